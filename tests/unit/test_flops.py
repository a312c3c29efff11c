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
