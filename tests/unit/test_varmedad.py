"""arXiv 2507.19175 scores: Eq. 6 as printed (exact zero, tie-break), the MedAD readings, and rank statistics."""
import numpy as np
import pytest
import torch
from timm.models.vision_transformer import VisionTransformer

import tokenprune.methods.varmedad  # noqa: F401  (registers the variants)
from tokenprune.measure import rank_statistics as rankstats
from tokenprune.core.patch import patch, prune_state
from tokenprune.core.reducers import get_reducer
from tokenprune.core.scorers import TokenContext, get_scorer, select_topk


def _rows(B=4, H=6, N=50, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (3 * torch.randn(B, H, N, generator=g)).softmax(-1)


def _ctx(rows, p=1):
    return TokenContext(x=torch.zeros(rows.shape[0], rows.shape[2], 4), num_prefix_tokens=p, block_index=3,
                        cls_attn=rows)


@pytest.mark.parametrize("seed", range(4))
def test_eq6_is_exactly_zero_and_keeps_raster_order(seed):
    rows = _rows(seed=seed)
    s = get_scorer("attention_variance_eq6")(_ctx(rows))
    assert torch.equal(s, torch.zeros_like(s))            # exact, not "small"
    keep, _ = select_topk(s, 7)
    assert keep.tolist() == [list(range(7))] * rows.shape[0]


def test_eq6_float_is_rounding_residue_that_ranks_arbitrarily():
    rows = _rows(N=197)
    s = get_scorer("attention_variance_eq6_float")(_ctx(rows))
    assert s.abs().max() < 1e-7 * rows.max()               # zero up to rounding
    assert (s != 0).any()                                   # but not exactly: the sort sees noise
    keep, _ = select_topk(s, 10)
    assert keep.tolist() != [list(range(10))] * rows.shape[0]


def test_eq6_pruning_keeps_first_patches_in_a_model():
    torch.manual_seed(0)
    m = VisionTransformer(img_size=32, patch_size=4, embed_dim=24, depth=12, num_heads=6, num_classes=3).eval()
    patch(m, keep_rate=0.5, scorer="attention_variance_eq6", reducer="drop", trace=True)
    with torch.inference_mode():
        m(torch.randn(2, 3, 32, 32))
    first = prune_state(m).history[0]["keep_idx"]
    assert first.tolist() == [list(range(32))] * 2        # 64 patches, keep ceil(0.5 * 64) = 32: the top rows


def test_medad_midpoint_differs_from_lower_median_with_six_heads():
    a = torch.tensor([0.0, 1, 2, 3, 4, 5]).view(1, 6, 1)
    rows = torch.cat([torch.zeros(1, 6, 1), a], dim=2)
    assert get_scorer("attention_medad")(_ctx(rows)).item() == 1.0           # lower median (torch)
    assert get_scorer("attention_medad_midpoint")(_ctx(rows)).item() == 1.5  # numpy's convention
    want = np.median(np.abs(a.numpy().ravel() - np.median(a.numpy())))
    assert get_scorer("attention_medad_midpoint")(_ctx(rows)).item() == want


def test_medad_midpoint_matches_numpy_on_random_rows():
    rows = _rows()
    a = rows[:, :, 1:].numpy().astype(np.float64)
    want = np.median(np.abs(a - np.median(a, axis=1, keepdims=True)), axis=1)
    got = get_scorer("attention_medad_midpoint")(_ctx(rows.double())).numpy()
    assert np.allclose(got, want)


def test_medad_equal_for_odd_head_count():
    rows = _rows(H=5)
    assert torch.allclose(get_scorer("attention_medad")(_ctx(rows)), get_scorer("attention_medad_midpoint")(_ctx(rows)))


def test_pooled_and_global_readings():
    rows = _rows()
    a = rows[:, :, 1:]
    pooled = (a - a.flatten(1).median(1).values[:, None, None]).abs().median(1).values
    assert torch.equal(get_scorer("attention_medad_pooled")(_ctx(rows)), pooled)
    assert not torch.allclose(pooled, get_scorer("attention_medad")(_ctx(rows)))


def test_cv2_is_variance_over_mean_squared():
    rows = _rows()
    v = get_scorer("attention_variance")(_ctx(rows))
    m = get_scorer("cls_attention")(_ctx(rows))
    assert torch.allclose(get_scorer("attention_cv2")(_ctx(rows)), v / m ** 2, rtol=1e-5)


def test_variance_of_scaled_heads_ranks_like_mean():
    # every head = mean * a fixed per-head factor: variance = cv^2 * mean^2, the same ranking as the mean
    g = torch.Generator().manual_seed(1)
    mean = torch.rand(2, 1, 40, generator=g)
    rows = mean * torch.tensor([0.5, 0.8, 1.0, 1.1, 1.2, 1.4]).view(1, 6, 1)
    s = rankstats.score_rows(rows, ["attention_variance", "cls_attention"], num_prefix_tokens=0)
    rho, tau = rankstats.rank_correlations(s["attention_variance"], s["cls_attention"])
    assert np.allclose(rho, 1) and np.allclose(tau, 1)
    fit = rankstats.loglog_fit(s["cls_attention"], s["attention_variance"])
    assert np.allclose(fit["slope"], 2) and np.allclose(fit["r2"], 1)
    assert np.allclose(rankstats.topk_jaccard(s["attention_variance"], s["cls_attention"], 0.3), 1)


def test_jaccard_and_chance():
    a = torch.arange(10.0).view(1, 10)
    assert rankstats.topk_jaccard(a, a, 0.5)[0] == 1.0
    assert rankstats.topk_jaccard(a, -a, 0.5)[0] == 0.0
    # Monte Carlo check of the hypergeometric expectation
    rng = np.random.default_rng(0)
    sims = [rankstats.topk_jaccard(torch.tensor(rng.random((1, 30))), torch.tensor(rng.random((1, 30))), 0.4)[0]
            for _ in range(3000)]
    assert abs(np.mean(sims) - rankstats.chance_jaccard(30, 0.4)) < 0.01


def test_rank_correlations_constant_row_is_nan():
    rho, tau = rankstats.rank_correlations(torch.zeros(1, 5), torch.arange(5.0).view(1, 5))
    assert np.isnan(rho[0]) and np.isnan(tau[0])


def test_score_rows_match_the_pruning_block():
    """Scores computed from cached [CLS] rows equal what the patched block's scorer sees at the first location."""
    from tokenprune.core.split_forward import cache_tokens
    torch.manual_seed(0)
    m = VisionTransformer(img_size=32, patch_size=4, embed_dim=24, depth=12, num_heads=6, num_classes=3).eval()
    x = torch.randn(3, 3, 32, 32)
    rows = cache_tokens(m, x, blocks=(4,), dtype="fp32").cls_attn[4]
    assert rows.shape == (3, 6, 65)
    patch(m, keep_rate=0.5, scorer="attention_variance", reducer="drop", trace=True)
    with torch.inference_mode():
        m(x)
    want = rankstats.score_rows(rows, ["attention_variance"])["attention_variance"]
    assert torch.allclose(prune_state(m).history[0]["scores"], want, atol=1e-7)
    with pytest.raises(ValueError, match="tokens_to_tokens"):
        rankstats.score_rows(rows, ["tokens_to_tokens"])


def test_fuse_softmax_limits():
    """Eq. 8: T -> 0 puts all weight on the best pruned token, large T gives the plain mean."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1, 6, 3, generator=g)
    scores = torch.tensor([[5.0, 4.0, 3.0, 2.0, 1.0]])
    ctx = TokenContext(x=x, num_prefix_tokens=1, block_index=3)
    cold = get_reducer("fuse_softmax", temperature=1e-4)(ctx, scores, 2).x[:, -1]
    hot = get_reducer("fuse_softmax", temperature=1e6)(ctx, scores, 2).x[:, -1]
    assert torch.allclose(cold, x[:, 3], atol=1e-5)           # pruned: tokens 3, 4, 5 (scores 3, 2, 1)
    assert torch.allclose(hot, x[:, 3:].mean(1), atol=1e-5)


def test_fusion_weight_spread_limits():
    from tokenprune.methods.varmedad import fusion_weight_spread
    s = torch.tensor([[1e-4, 2e-4, 3e-4, 4e-4, 5e-4, 6e-4]])
    assert fusion_weight_spread(s, 0.5, 0.5).item() > 0.999999        # T in (0, 1) >> score spread: plain mean
    assert abs(fusion_weight_spread(s, 0.5, 1e-9).item() - 1 / 3) < 1e-9  # T -> 0: one token of three
    assert torch.allclose(fusion_weight_spread(torch.zeros(2, 6), 0.5, 1e-9), torch.ones(2, dtype=torch.float64))


def test_fusion_weight_distance_says_whether_a_temperature_can_change_the_fused_token():
    from tokenprune.methods.varmedad import fusion_weight_distance, fusion_weights
    s = torch.tensor([[1e-4, 2e-4, 3e-4, 4e-4, 5e-4, 6e-4]])            # attention-sized scores
    w = fusion_weights(s, 0.5, 1e-9)
    assert w.shape == (1, 3) and torch.allclose(w.sum(1), torch.ones(1, dtype=torch.float64))
    # T = 0.5 and T = 1000 on such scores: the same (uniform) weights, distance ~ 0
    assert fusion_weight_distance(s, 0.5, 0.5, 1e3).item() < 1e-3
    assert fusion_weight_distance(s, 0.5, 0.5).item() < 1e-3             # against the plain mean
    # T -> 0: one token of three against the plain mean: 1 - 1/3
    assert abs(fusion_weight_distance(s, 0.5, 1e-9, 0.5).item() - 2 / 3) < 1e-3
    # rescaled scores: T in (0, 1) now matters
    assert fusion_weight_distance(s * 1e4, 0.5, 0.5).item() > 0.3
    assert torch.equal(fusion_weight_distance(s, 1.0, 0.5), torch.zeros(1, dtype=torch.float64))  # nothing pruned
    with pytest.raises(ValueError):
        fusion_weights(s, 0.5, 0.0)
