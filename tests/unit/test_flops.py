"""MAC counts: analytic vs FlopCounterMode, and EViT's published table (at its 0.1 GMAC rounding)."""
import pytest
import timm
import torch

from tokenprune.measure.macs import analytic_macs, keep_rate_for_macs, mac_table, measured_macs
from tokenprune.core.patch import patch

EVIT_DEIT_S = {1.0: 4.6, 0.9: 4.0, 0.8: 3.5, 0.7: 3.0, 0.6: 2.6, 0.5: 2.3}


def test_deit_s_evit_table():
    rows = mac_table("deit_small_patch16_224", list(EVIT_DEIT_S), measure=True)
    for row in rows:
        assert round(row["gmacs"], 1) == EVIT_DEIT_S[row["keep_rate"]]
        assert abs(row["rel_diff"]) < 0.01


def test_deit_b_baseline():
    m = timm.create_model("deit_base_patch16_224")
    assert round(analytic_macs(m).gmacs, 1) == 17.6


def test_known_exact_count_deit_s():
    # 196 x 768 x 384 (patch embed) + 12 x (12 N D^2 + 2 N^2 D) with N = 197, D = 384 + 384 x 1000 (head)
    n, d = 197, 384
    want = 196 * 768 * d + 12 * (12 * n * d * d + 2 * n * n * d) + d * 1000
    assert analytic_macs(timm.create_model("deit_small_patch16_224")).total == want


def test_measured_counts_cpu_attention():
    """FlopCounterMode alone misses the CPU fused-attention kernel; measured_macs must not."""
    m = timm.create_model("deit_tiny_patch16_224").eval()
    assert measured_macs(m) == analytic_macs(m).total


@pytest.mark.parametrize("scorer,reducer", [("cls_attention", "drop"), ("tokens_to_tokens", "fuse_attention"),
                                            ("attention_variance", "fuse_softmax")])
def test_analytic_equals_measured_pruned(scorer, reducer):
    m = patch(timm.create_model("deit_tiny_patch16_224").eval(), keep_rate=0.6, scorer=scorer, reducer=reducer)
    a, b = analytic_macs(m).total, measured_macs(m)
    assert abs(a - b) / b < 0.01


def test_keep_rate_for_macs_matches_budget():
    m = patch(timm.create_model("deit_small_patch16_224"), keep_rate=0.7)
    target = analytic_macs(m).total
    r = keep_rate_for_macs(timm.create_model("deit_small_patch16_224"), target)
    assert analytic_macs(m, keep_rate=r).total >= target
    assert analytic_macs(m, keep_rate=r - 0.01).total <= target
    with pytest.raises(ValueError, match="target_macs"):
        keep_rate_for_macs(m, 1e12)


@pytest.mark.parametrize("reducer,opts", [("merge_dpcknn", {}), ("merge_dpcknn", {"num_clusters": 6, "pair_fraction": 0.2}),
                                          ("cluster_all", {}), ("bipartite", {})])
def test_merging_reducers_cost_is_counted(reducer, opts):
    """Clustering and matching cost MACs that the papers' columns leave out: analytic and measured agree."""
    m = patch(timm.create_model("deit_tiny_patch16_224").eval(), keep_rate=0.7, reducer=reducer, reducer_options=opts)
    count = analytic_macs(m)
    assert count.reduction > 0
    assert abs(count.total - measured_macs(m)) / count.total < 0.01


# The analytic count follows what every reducer really outputs, at every keep rate.
from tokenprune.core.reducers import REDUCERS, get_reducer  # noqa: E402
from tokenprune.core.patch import prune_state  # noqa: E402
from tokenprune.methods.tome import matching_rounds  # noqa: E402


def _scorer_for(reducer: str) -> str:
    return "tokens_to_tokens" if reducer == "fuse_attention" else "cls_attention"


@pytest.mark.parametrize("reducer", sorted(REDUCERS))
@pytest.mark.parametrize("img_size,keep", [(224, 0.3), (224, 0.9), (64, 0.9), (64, 0.2), (32, 0.5)])
def test_analytic_counts_what_every_reducer_does(reducer, img_size, keep):
    """Token counts of a real forward pass equal the analytic ones, and MACs equal the counted ones, for every
    registered reducer (bipartite below keep 0.5, BAT with fewer pruned tokens than clusters included)."""
    m = patch(timm.create_model("deit_tiny_patch16_224", img_size=img_size).eval(), keep_rate=keep,
              scorer=_scorer_for(reducer), reducer=reducer)
    with torch.inference_mode():
        m(torch.randn(2, 3, img_size, img_size))
    count = analytic_macs(m)
    assert count.tokens_out == prune_state(m).token_counts
    assert abs(count.total - measured_macs(m)) / count.total < 0.005


def test_bipartite_reaches_low_keep_rates():
    """196 tokens at keep 0.3 keep ceil(0.3 x 196) = 59 tokens at the first location (two matchings), as asked;
    before, one matching stopped at 98 while the count said 59 (0.498 against 0.623 measured GMACs)."""
    m = patch(timm.create_model("deit_tiny_patch16_224").eval(), keep_rate=0.3, reducer="bipartite")
    with torch.inference_mode():
        m(torch.randn(1, 3, 224, 224))
    assert prune_state(m).token_counts[3] == 1 + 59
    assert prune_state(m).token_counts[-1] == 1 + 6  # 59 -> 18 -> 6
    assert matching_rounds(196, 59) == [(196, 98), (98, 39)]
    assert matching_rounds(196, 98) == [(196, 98)]
    count = analytic_macs(m)
    assert abs(count.total - measured_macs(m)) / count.total < 0.005


def test_bipartite_one_round_is_pair_merge():
    """Above keep 0.5 the repeated matching is ToMe's single step, bit for bit."""
    from tokenprune.methods.tome import pair_merge, repeated_pair_merge
    g = torch.Generator().manual_seed(0)
    x, k = torch.randn(2, 20, 8, generator=g), torch.randn(2, 20, 4, generator=g)
    size = torch.ones(2, 20)
    a = pair_merge(x, size, None, k, 7)
    b = repeated_pair_merge(x, size, None, k, 13)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_dpcknn_with_fewer_pruned_tokens_than_clusters():
    """deit_tiny at 64 px, keep 0.9: 16 tokens keep 15 and cluster 1 (not 4); the count said 116.2 MMACs, the model
    does 94.1."""
    spec = get_reducer("merge_dpcknn")
    assert spec.output_tokens(16, 15) == 16 and spec.output_tokens(196, 138) == 142
    m = patch(timm.create_model("deit_tiny_patch16_224", img_size=64).eval(), keep_rate=0.9, reducer="merge_dpcknn")
    assert abs(analytic_macs(m).total / 1e6 - 94.1) < 0.05


def test_keep_rate_for_macs_is_reachable_by_bipartite():
    """The rate keep_rate_for_macs returns for a bipartite model is one the model realises at that cost."""
    m = patch(timm.create_model("deit_tiny_patch16_224").eval(), keep_rate=1.0, reducer="bipartite")
    target = 0.55e9
    r = keep_rate_for_macs(m, target)
    m.keep_rate = r
    assert measured_macs(m) >= target * 0.995
    assert r < 0.5
