"""Behavioural tests of tokenprune.measure.metrics, .intervals, .significance, .coverage and .diversity:
hand-computed values, statistical properties, coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy import stats

from tokenprune.measure import coverage, diversity, intervals, metrics, significance


# ---------------------------------------------------------------- accuracy and faithfulness


def test_top1_accepts_logits_and_predictions():
    logits = torch.tensor([[2.0, 1.0, 0.0], [0.0, 3.0, 1.0], [0.0, 0.0, 5.0], [1.0, 0.0, 0.0]])
    labels = np.array([0, 1, 1, 0])
    assert metrics.top1(logits, labels) == pytest.approx(0.75)
    assert metrics.top1(np.array([0, 1, 2, 0]), labels) == pytest.approx(0.75)
    assert metrics.correct(logits, labels).tolist() == [True, True, False, True]


def test_agreement_between_logits_and_predictions():
    a = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    assert metrics.agreement(a, [0, 1, 1, 1]) == pytest.approx(0.75)
    assert metrics.agreement(a, a) == 1.0


def test_kl_divergence_hand_computed_and_direction():
    p = np.array([[0.5, 0.5]])
    q = np.array([[0.9, 0.1]])
    expected = 0.5 * math.log(0.5 / 0.9) + 0.5 * math.log(0.5 / 0.1)
    # logits = log-probabilities give exactly these softmax outputs
    kl = metrics.kl_divergence(np.log(p), np.log(q))
    assert kl == pytest.approx(expected, rel=1e-9)
    reverse = metrics.kl_divergence(np.log(q), np.log(p))
    assert reverse != pytest.approx(kl)  # KL(full || pruned), not symmetric
    same = torch.randn(5, 10)
    assert metrics.kl_divergence(same, same) == pytest.approx(0.0, abs=1e-12)
    per = metrics.kl_divergence(same, same + torch.randn(5, 10), per_image=True)
    assert per.shape == (5,) and (per >= 0).all()


def test_true_class_prob_change():
    full = np.log(np.array([[0.6, 0.4], [0.2, 0.8]]))
    pruned = np.log(np.array([[0.5, 0.5], [0.3, 0.7]]))
    per = metrics.true_class_prob_change(full, pruned, [0, 1], per_image=True)
    np.testing.assert_allclose(per, [-0.1, -0.1], atol=1e-12)
    assert metrics.true_class_prob_change(full, pruned, [0, 1]) == pytest.approx(-0.1)


# ---------------------------------------------------------------- bootstrap


def test_bootstrap_ci_covers_true_mean_and_shrinks_with_n():
    rng = np.random.default_rng(1)
    small = rng.normal(3.0, 1.0, size=100)
    large = rng.normal(3.0, 1.0, size=3000)
    ci_s = intervals.bootstrap_ci(small, seed=0)
    ci_l = intervals.bootstrap_ci(large, seed=0)
    for ci in (ci_s, ci_l):
        assert ci.low < 3.0 < ci.high
        assert ci.low <= ci.estimate <= ci.high
    assert (ci_l.high - ci_l.low) < 0.5 * (ci_s.high - ci_s.low)
    # width is close to the normal-theory width 2 * 1.96 * sd / sqrt(n)
    assert ci_l.high - ci_l.low == pytest.approx(2 * 1.96 / math.sqrt(3000), rel=0.15)


def test_bootstrap_ci_deterministic_chunked_and_unpackable():
    v = np.arange(50, dtype=float)
    a = intervals.bootstrap_ci(v, n_boot=500, seed=3)
    b = intervals.bootstrap_ci(v, n_boot=500, seed=3)
    assert a == b
    est, lo, hi = a
    assert est == pytest.approx(24.5) and a.ci == [lo, hi]
    # a statistic without an axis keyword still works (row by row)
    c = intervals.bootstrap_ci(v, stat=lambda x: float(np.max(x) - np.min(x)), n_boot=50)
    assert c.estimate == 49.0
    # NaN values are dropped
    assert intervals.bootstrap_ci([1.0, np.nan, 1.0]).estimate == 1.0


def test_bootstrap_result_does_not_depend_on_chunk_size():
    v = np.random.default_rng(0).normal(size=200)
    tiny_chunks = intervals._bootstrap_stats(v, np.mean, 300, seed=0, max_elements=500)
    one_chunk = intervals._bootstrap_stats(v, np.mean, 300, seed=0)
    np.testing.assert_array_equal(tiny_chunks, one_chunk)


def test_paired_bootstrap_detects_difference_and_null():
    rng = np.random.default_rng(0)
    base = rng.normal(size=400)
    shifted = base + 0.2 + rng.normal(scale=0.1, size=400)
    d = intervals.paired_bootstrap_diff(shifted, base, n_boot=1000)
    assert d.estimate == pytest.approx(0.2, abs=0.03)
    assert d.low > 0 and d.p_value < 0.01
    null = intervals.paired_bootstrap_diff(base + rng.normal(scale=0.1, size=400), base, n_boot=1000)
    assert null.low < 0 < null.high and null.p_value > 0.05
    same = intervals.paired_bootstrap_diff(base, base, n_boot=100)
    assert same.estimate == 0.0 and same.p_value == 1.0


# ---------------------------------------------------------------- McNemar


def _paired(n11: int, n10: int, n01: int, n00: int) -> tuple[np.ndarray, np.ndarray]:
    a = np.array([1] * n11 + [1] * n10 + [0] * n01 + [0] * n00, dtype=bool)
    b = np.array([1] * n11 + [0] * n10 + [1] * n01 + [0] * n00, dtype=bool)
    return a, b


def test_mcnemar_exact_matches_scipy_binomtest():
    a, b = _paired(n11=50, n10=8, n01=2, n00=10)
    res = significance.mcnemar(a, b)
    assert res.method == "exact"
    assert (res.n01, res.n10) == (2, 8)
    expected = stats.binomtest(8, 10, 0.5, alternative="two-sided").pvalue
    assert res.p_value == pytest.approx(expected, rel=1e-12)
    assert res.p_value == pytest.approx(112 / 1024)  # 2 * P(X <= 2), X ~ Bin(10, 1/2)
    stat, p, n01, n10 = res
    assert (stat, n01, n10) == (2.0, 2, 8)


def test_mcnemar_chi_square_with_continuity_correction():
    a, b = _paired(n11=100, n10=30, n01=10, n00=20)
    res = significance.mcnemar(a, b)
    assert res.method == "chi2_cc"
    assert res.statistic == pytest.approx((abs(10 - 30) - 1) ** 2 / 40)
    assert res.p_value == pytest.approx(stats.chi2.sf(361 / 40, 1))


def test_mcnemar_no_discordant_pairs():
    a, b = _paired(5, 0, 0, 5)
    assert significance.mcnemar(a, b).p_value == 1.0


# ---------------------------------------------------------------- TOST and seeds


def test_tost_detects_equivalence_and_non_equivalence():
    rng = np.random.default_rng(0)
    a = rng.normal(size=500)
    close = a + rng.normal(scale=0.05, size=500)  # mean difference ~0, small noise
    eq = significance.tost_paired(a, close, margin=0.02)
    assert eq.equivalent and eq.p_value < 0.05
    assert -0.02 < eq.ci_low < eq.ci_high < 0.02
    far = a + 0.05 + rng.normal(scale=0.05, size=500)
    neq = significance.tost_paired(far, a, margin=0.02)
    assert not neq.equivalent and neq.p_value > 0.5
    # a too-small sample cannot show equivalence even when the means agree
    small = significance.tost_paired(a[:5], a[:5] + rng.normal(scale=1.0, size=5), margin=0.02)
    assert not small.equivalent


def test_tost_matches_two_one_sided_t_tests():
    rng = np.random.default_rng(4)
    a, b = rng.normal(size=30), rng.normal(size=30)
    res = significance.tost_paired(a, b, margin=0.5)
    d = a - b
    lo = stats.ttest_1samp(d, -0.5, alternative="greater").pvalue
    hi = stats.ttest_1samp(d, 0.5, alternative="less").pvalue
    assert res.p_lower == pytest.approx(lo) and res.p_upper == pytest.approx(hi)
    assert res.p_value == pytest.approx(max(lo, hi))
    with pytest.raises(ValueError):
        significance.tost_paired(a, b, margin=0)


def test_seed_summary():
    s = intervals.seed_summary([1.0, 2.0, 3.0])
    assert (s.mean, s.n) == (2.0, 3)
    assert s.std == pytest.approx(1.0)
    half = stats.t.ppf(0.975, 2) / math.sqrt(3)
    assert s.ci == pytest.approx([2.0 - half, 2.0 + half])
    one = intervals.seed_summary([0.7])
    assert one.mean == 0.7 and math.isnan(one.std) and math.isnan(one.low)


# ---------------------------------------------------------------- patch mapping and coverage


def test_mask_to_patch_grid_any_and_fraction():
    mask = np.zeros((8, 8), dtype=bool)
    mask[0:2, 0:2] = True  # 4 of 16 pixels of patch (0, 0)
    mask[4, 7] = True  # one pixel of patch (1, 1)
    anyp = coverage.mask_to_patch_grid(mask, patch_size=4)
    assert anyp.tolist() == [True, False, False, True]
    quarter = coverage.mask_to_patch_grid(mask, patch_size=4, min_fraction=0.25)
    assert quarter.tolist() == [True, False, False, False]
    assert coverage.mask_to_patch_grid(mask, 4, flatten=False).shape == (2, 2)


def test_mask_to_patch_grid_part_ids_and_batch():
    mask = torch.zeros(2, 8, 8, dtype=torch.long)
    mask[0, 0, 0] = 1
    mask[0, 7, 7] = 2
    mask[1, 0, 7] = 2
    out = coverage.mask_to_patch_grid(mask, 4, num_parts=3)
    assert out.shape == (2, 3, 4)
    assert out[0].tolist() == [[True, False, False, False], [False, False, False, True], [False] * 4]
    assert out[1, 1].tolist() == [False, True, False, False]


def test_mask_to_patch_grid_overlapping_stride():
    # 10x10 image, patch 4, stride 3 -> grid 3x3, windows start at 0, 3, 6
    mask = np.zeros((10, 10), dtype=bool)
    mask[3, 3] = True  # inside windows starting at 0 (0..3) and 3 (3..6), rows and cols
    grid = coverage.mask_to_patch_grid(mask, patch_size=4, stride=3, flatten=False)
    assert grid.shape == (3, 3)
    assert grid.tolist() == [[True, True, False], [True, True, False], [False, False, False]]
    with pytest.raises(ValueError, match=r"\(4, 4\)"):
        coverage.mask_to_patch_grid(mask, patch_size=4, stride=3, grid=(4, 4))
    assert coverage.patch_grid_shape(224, 16, 12) == (18, 18)


def test_keypoints_to_patch_index_plain_and_overlapping():
    kp = torch.tensor([[1.0, 1.0], [7.5, 4.0], [3.5, 3.5], [0.0, 0.0]])
    vis = torch.tensor([True, True, True, False])
    plain = coverage.keypoints_to_patch_index(kp, vis, img_size=8, patch_size=4)
    assert plain.shape == (4, 4)
    assert plain.nonzero().tolist() == [[0, 0], [1, 3], [2, 0]]
    # overlapping: 10x10, patch 4, stride 3; (3.5, 3.5) lies in windows 0 and 1 on both axes
    over = coverage.keypoints_to_patch_index(kp[2:3], vis[2:3], img_size=10, patch_size=4, stride=3)
    assert sorted(over[0].nonzero().flatten().tolist()) == [0, 1, 3, 4]
    # agrees with rasterising the keypoint into a one-pixel mask
    mask = np.zeros((10, 10), dtype=bool)
    mask[3, 3] = True
    ref = coverage.mask_to_patch_grid(mask, 4, stride=3)
    assert over[0].tolist() == ref.tolist()


def test_part_coverage_with_merged_token():
    # 4 patches, 3 annotated parts: part0 -> patch0, part1 -> patch2, part2 -> patches 1 and 3
    parts = torch.tensor(
        [[[1, 0, 0, 0], [0, 0, 1, 0], [0, 1, 0, 1]]], dtype=torch.bool
    )
    # two kept tokens: token0 = patch0, token1 = a merge of patches 1 and 3
    kept = torch.tensor([[[1.0, 0.0, 0.0, 0.0], [0.0, 0.5, 0.0, 0.5]]])
    cov = coverage.part_coverage(parts, kept)
    assert cov.tolist() == [pytest.approx(2 / 3)]
    cov_p = coverage.part_coverage(parts, kept, variant="patches")
    assert cov_p.tolist() == [pytest.approx(3 / 4)]
    # without the merge only part0 is covered
    only_first = kept[:, :1]
    assert coverage.part_coverage(parts, only_first).item() == pytest.approx(1 / 3)
    # min_weight: merged weights 0.5 no longer count above 0.6
    assert coverage.part_coverage(parts, kept, min_weight=0.6).item() == pytest.approx(1 / 3)


def test_part_coverage_batch_unannotated_and_shape_check():
    parts = torch.zeros(2, 2, 4, dtype=torch.bool)
    parts[0, 0, 1] = True  # image 0: one annotated part (part 1 not visible)
    kept = torch.zeros(2, 1, 4, dtype=torch.bool)
    kept[0, 0, 1] = True
    cov = coverage.part_coverage(parts, kept)
    assert cov[0].item() == 1.0 and math.isnan(cov[1].item())
    with pytest.raises(ValueError, match="part_patch_sets") as err:  # the shapes given and the N expected
        coverage.part_coverage(parts, torch.zeros(2, 1, 5))
    assert "(2, 2, 4)" in str(err.value) and "N=5" in str(err.value)


def test_object_coverage():
    obj = torch.tensor([[True, True, False, False], [False, False, False, True]])
    kept = torch.tensor([[[1, 0, 0, 0], [0, 0, 1, 0]], [[0, 0, 0, 1], [1, 0, 0, 0]]], dtype=torch.bool)
    assert coverage.object_coverage(obj, kept).tolist() == [0.5, 1.0]


def test_coverage_end_to_end_from_keypoints():
    kp = torch.tensor([[[1.0, 1.0], [6.0, 6.0]]])  # patches 0 and 3 of a 2x2 grid
    vis = torch.ones(1, 2, dtype=torch.bool)
    sets = coverage.keypoints_to_patch_index(kp, vis, img_size=8, patch_size=4)
    kept = torch.zeros(1, 2, 4)
    kept[0, 0, 0] = 1.0
    kept[0, 1, 1] = 1.0
    assert coverage.part_coverage(sets, kept).item() == 0.5


# ---------------------------------------------------------------- diversity


def test_diversity_collapsed_and_orthogonal_sets():
    same = torch.ones(4, 4)
    d = diversity.diversity(same)
    assert d.mean_cosine_distance == pytest.approx(0.0, abs=1e-12)
    assert d.effective_rank == pytest.approx(1.0)
    eye = torch.eye(4)
    d = diversity.diversity(eye)
    assert d.mean_cosine_distance == pytest.approx(1.0)
    assert d.effective_rank == pytest.approx(4.0)
    opposite = torch.tensor([[1.0, 0.0], [-1.0, 0.0]])
    assert diversity.mean_pairwise_cosine_distance(opposite).item() == pytest.approx(2.0)
    batch = torch.stack([same, eye])
    assert diversity.effective_rank(batch).tolist() == pytest.approx([1.0, 4.0])


def test_holm_adjust_matches_the_step_down_procedure():
    from tokenprune.measure.significance import holm_adjust

    p = [0.01, 0.04, 0.03, 0.005]
    # sorted 0.005, 0.01, 0.03, 0.04 -> x4, x3, x2, x1 -> 0.02, 0.03, 0.06, 0.04 -> running max 0.02 0.03 0.06 0.06
    np.testing.assert_allclose(holm_adjust(p), [0.03, 0.06, 0.06, 0.02])
    np.testing.assert_allclose(holm_adjust([0.5, 0.9]), [1.0, 1.0])
    with pytest.raises(ValueError, match="p_values"):
        holm_adjust([0.1, 1.5])


def test_seed_image_bootstrap_resamples_source_groups():
    from tokenprune.measure.intervals import seed_image_bootstrap_diff

    rng = np.random.default_rng(0)
    base = (rng.random((3, 400)) < 0.7).astype(float)
    ref = (rng.random((1, 400)) < 0.6).astype(float)
    one = seed_image_bootstrap_diff(base, ref, seed=1)
    alone = seed_image_bootstrap_diff(base, ref, seed=1, groups=np.arange(400))
    assert alone.estimate == pytest.approx(one.estimate)
    assert (alone.high - alone.low) == pytest.approx(one.high - one.low, rel=0.15)
    # every image four times over: counted as independent the interval halves; by source it does not
    rep_a, rep_b = np.repeat(base, 4, axis=1), np.repeat(ref, 4, axis=1)
    naive = seed_image_bootstrap_diff(rep_a, rep_b, seed=1)
    by_source = seed_image_bootstrap_diff(rep_a, rep_b, seed=1, groups=np.repeat(np.arange(400), 4))
    assert (by_source.high - by_source.low) > 1.5 * (naive.high - naive.low)
    with pytest.raises(ValueError, match="groups"):
        seed_image_bootstrap_diff(base, ref, groups=np.arange(10))
