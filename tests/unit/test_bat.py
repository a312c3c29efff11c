"""BAT audit helpers: the reducer inside EViT's budget, matched-MAC configurations, the trend test,
kept-token diversity and the reduction timer."""
import numpy as np
import pytest
import timm
import torch

import tokenprune.methods.bat  # noqa: F401  (registers merge_dpcknn_budget)
from tokenprune.measure import macs as flops
from tokenprune.methods.bat import budget_split
from tokenprune.measure.trend import trend_contrast
from tokenprune.core.config import PruneConfig
from tokenprune.measure.kept_tokens import kept_token_diversity, tokens_after
from tokenprune.measure.mac_matching import config_at_macs
from tokenprune.core.patch import patch, prune_state
from tokenprune.core.reducers import get_reducer
from tokenprune.measure.reducer_timing import ReductionTimer, timed_benchmark
from tokenprune.core.scorers import TokenContext


def _ctx(B=2, N=25, C=8):
    g = torch.Generator().manual_seed(0)
    return TokenContext(x=torch.randn(B, N, C, generator=g), num_prefix_tokens=1, block_index=0,
                        cls_attn=torch.rand(B, 3, N, generator=g).softmax(-1), source=torch.eye(N).expand(B, N, N))


def _tiny_vit(**kw):
    from timm.models.vision_transformer import VisionTransformer

    return VisionTransformer(img_size=32, patch_size=4, in_chans=3, num_classes=5, embed_dim=32, depth=12,
                             num_heads=2, **kw).eval()


def test_budget_split():
    assert budget_split(10, 4) == (7, 4)
    assert budget_split(2, 4) == (1, 2)  # at least one attentive token
    with pytest.raises(ValueError, match="num_clusters"):
        budget_split(10, 0)


@pytest.mark.parametrize("opts", [{}, {"num_clusters": 2, "pair_fraction": 0.25}, {"num_clusters": 9}])
def test_budget_reducer_outputs_evit_count_and_covers_every_patch(opts):
    ctx = _ctx()
    scores = torch.randn(2, 24, generator=torch.Generator().manual_seed(1))
    spec = get_reducer("merge_dpcknn_budget", **opts)
    assert spec.adds_tokens == 1
    out = spec(ctx, scores, 8)
    assert out.x.shape[1] == 1 + 8 + 1  # EViT's count: prefix + n_keep + 1
    assert torch.equal(out.source.sum(1), torch.ones(2, 25))
    assert torch.equal(out.source.sum(-1), out.size)


def test_budget_reducer_token_counts_equal_evit_on_deit():
    m = timm.create_model("deit_tiny_patch16_224").eval()
    for red in ("fuse_attention", "merge_dpcknn_budget"):
        patch(m, keep_rate=0.4, reducer=red)
        with torch.inference_mode():
            m(torch.randn(1, 3, 224, 224))
        counts = prune_state(m).token_counts
        if red == "fuse_attention":
            evit = counts
    assert counts == evit
    c = flops.analytic_macs(m)
    assert c.tokens_out == evit and c.reduction > 0


def test_config_at_macs_matches_and_falls_back_for_tome():
    m = _tiny_vit()
    target = flops.analytic_macs(PruneConfig(reducer="fuse_attention", keep_rate=0.5).apply(m)).total
    bat = config_at_macs(m, PruneConfig(reducer="merge_dpcknn"), target)
    assert bat.reachable and abs(bat.rel_error) < 0.03 and bat.config.keep_rate < 0.5
    low = flops.analytic_macs(PruneConfig(reducer="fuse_attention", keep_rate=0.2).apply(m)).total
    tome = config_at_macs(m, PruneConfig(reducer="bipartite"), low, fallback_locations=[tuple(range(1, 13))])
    assert tome.config.keep_rate >= 0.5 and len(tome.config.locations) == 12 and tome.reachable
    # the matched configuration's analytic token counts are what the model does
    tome.config.apply(m)
    with torch.inference_mode():
        m(torch.randn(1, 3, 32, 32))
    assert prune_state(m).token_counts == flops.analytic_macs(m).tokens_out


def test_trend_contrast_slope_and_sign():
    rng = np.random.default_rng(0)
    levels = [0.9, 0.7, 0.5, 0.3]
    # gap 0 at 0.9 growing to +0.3 at 0.3: slope -0.5 per unit keep rate
    means = np.array([0.0, 0.1, 0.2, 0.3])
    diffs = (rng.random((4, 4000)) < means[:, None]).astype(float)
    t = trend_contrast(diffs, levels, seed=0)
    assert t.slope == pytest.approx(np.polyfit(levels, diffs.mean(1), 1)[0])
    assert t.high < 0 and t.p_value < 0.01
    flat = trend_contrast(np.zeros((4, 50)), levels)
    assert flat.slope == 0
    with pytest.raises(ValueError):
        trend_contrast(np.zeros((3, 5)), levels)


def test_kept_token_diversity_shapes_and_collapse():
    m = _tiny_vit()
    x = torch.randn(6, 3, 32, 32)
    out = tokens_after(m, x, block=10, batch=4)
    assert [t.shape for t in out] == [(4, 65, 32), (2, 65, 32)]
    d = kept_token_diversity(m, x, block=10, batch=4)
    assert d["cosine_distance"].shape == (6,) and (d["tokens"] == 64).all()
    # identical tokens have no diversity
    from tokenprune.measure import diversity

    same = torch.ones(1, 5, 8)
    assert float(diversity.mean_pairwise_cosine_distance(same)[0]) == pytest.approx(0.0, abs=1e-12)


def test_reduction_timer_measures_and_restores():
    m = patch(_tiny_vit(), keep_rate=0.5, reducer="merge_dpcknn")
    st = prune_state(m)
    fn_before = st.reducer.fn
    with ReductionTimer(m) as t, torch.inference_mode():
        for _ in range(3):
            m(torch.randn(2, 3, 32, 32))
    assert t.forwards == 3 and t.calls == 9 and 0 < t.share < 1 and len(t.shares()) == 3
    assert st.reducer.fn is fn_before
    res, shares = timed_benchmark({"plain": _tiny_vit(), "bat": m}, batch=2, img_size=32, warmup=1, rounds=2,
                                  iters_per_round=1)
    assert set(shares) == {"bat"} and shares["bat"]["forwards"] == 3 and len(res) == 2


def _tcformer_dpc_knn(x, cluster_num, k=5):
    """TCFormer's cluster_dpc_knn (its public implementation, as shared/papers/README.md describes it) without its
    1e-6 density noise: cdist / sqrt(C); density exp(-mean of the k nearest squared distances, self included);
    distance to the nearest denser token (the farthest distance for the densest); centres = top density x
    distance; each token to its nearest centre, centres to themselves."""
    b, n, c = x.shape
    dist = torch.cdist(x.double(), x.double()) / c ** 0.5
    nearest = torch.topk(dist, k=k, dim=-1, largest=False).values
    density = (-(nearest ** 2).mean(-1)).exp()
    mask = (density[:, None, :] > density[:, :, None]).double()
    dmax = dist.flatten(1).max(-1).values[:, None, None]
    delta = (dist * mask + dmax * (1 - mask)).min(-1).values
    centres = torch.topk(delta * density, k=cluster_num, dim=-1).indices
    assign = torch.gather(dist, 1, centres[..., None].expand(b, cluster_num, n)).argmin(1)
    assign.scatter_(1, centres, torch.arange(cluster_num).expand(b, cluster_num))
    return assign, centres


def test_dpc_knn_is_tcformers_algorithm():
    """Without density ties (random tokens) our DPC-KNN picks TCFormer's centres and assignment."""
    from tokenprune.methods.bat import dpc_knn

    x = torch.randn(4, 40, 16, generator=torch.Generator().manual_seed(3))
    for k, clusters in [(5, 4), (3, 7)]:
        a, c = dpc_knn(x, clusters, k)
        ra, rc = _tcformer_dpc_knn(x, clusters, k)
        assert torch.equal(c, rc) and torch.equal(a, ra)
