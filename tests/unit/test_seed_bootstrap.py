"""intervals.seed_image_bootstrap_diff: paired seeds x paired images (trained configurations)."""
import numpy as np
import pytest

from tokenprune.measure.intervals import paired_bootstrap_diff, seed_image_bootstrap_diff


def _correct(p, shape, seed):
    return (np.random.default_rng(seed).random(shape) < p).astype(float)


def test_estimate_and_interval():
    a, b = _correct(0.8, (3, 500), 0), _correct(0.7, (3, 500), 1)
    r = seed_image_bootstrap_diff(a, b)
    assert r.estimate == pytest.approx(a.mean() - b.mean())
    assert r.low < r.estimate < r.high and r.n == 500 and r.level == 0.95
    assert r.low > 0 and r.p_value < 0.05
    r90 = seed_image_bootstrap_diff(a, b, alpha=0.1)
    assert r.low <= r90.low <= r90.high <= r.high


def test_identical_is_zero_and_one_seed_matches_image_bootstrap():
    a = _correct(0.8, (3, 400), 2)
    r = seed_image_bootstrap_diff(a, a)
    assert r.estimate == r.low == r.high == 0.0
    x, y = _correct(0.8, (1, 2000), 3), _correct(0.75, (1, 2000), 4)
    one = seed_image_bootstrap_diff(x, y)
    ref = paired_bootstrap_diff(x[0], y[0])
    assert one.estimate == pytest.approx(ref.estimate)
    assert (one.high - one.low) == pytest.approx(ref.high - ref.low, rel=0.2)


def test_seed_noise_widens_the_interval():
    rng = np.random.default_rng(5)
    n = 2000
    base = rng.random(n)
    # seeds differ by a shift of +-3 points: training noise the image bootstrap alone cannot see
    a = np.stack([(base < 0.80 + s).astype(float) for s in (-0.03, 0.0, 0.03)])
    b = np.stack([(base < 0.80).astype(float)] * 3)
    wide = seed_image_bootstrap_diff(a, b)
    narrow = paired_bootstrap_diff(a.mean(0), b.mean(0))
    assert (wide.high - wide.low) > 1.5 * (narrow.high - narrow.low)


def test_reference_row_broadcasts_and_shapes_checked():
    a, ref = _correct(0.8, (3, 300), 6), _correct(0.8, (1, 300), 7)
    r = seed_image_bootstrap_diff(a, ref)
    assert r.estimate == pytest.approx((a - ref).mean())
    with pytest.raises(ValueError, match="a, b"):
        seed_image_bootstrap_diff(a, _correct(0.8, (3, 200), 8))
    with pytest.raises(ValueError, match="a, b"):
        seed_image_bootstrap_diff(a, _correct(0.8, (2, 300), 8))
