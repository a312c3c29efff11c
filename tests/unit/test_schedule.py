import math

import pytest

from tokenprune.core.schedule import Schedule, cosine_keep_rate, keep_rate_at, num_keep, token_counts


def test_token_counts_match_evit():
    s = Schedule.build(12, 0.7)
    assert [c - 1 for c in token_counts(196, 12, s, adds_tokens=1)][3::3] == [139, 99, 71]
    assert [c - 1 for c in token_counts(196, 12, s, adds_tokens=0)][3::3] == [138, 97, 68]


def test_num_keep_uses_evit_ceil():
    assert num_keep(196, 0.7) == 138
    assert num_keep(139, 0.7) == 98
    assert num_keep(10, 0.01) == 1


def test_schedule_locations_one_based():
    s = Schedule.build(12, [0.9, 0.8, 0.7], (4, 7, 10))
    assert s.keep_rates == {3: 0.9, 6: 0.8, 9: 0.7}
    assert s.locations == (4, 7, 10)
    assert s.at(0) == 1.0
    with pytest.raises(ValueError, match="locations"):
        Schedule.build(12, 0.7, (0,))
    with pytest.raises(ValueError, match="keep_rate"):
        Schedule.build(12, [0.7, 0.7], (4, 7, 10))


def test_cosine_warmup():
    assert cosine_keep_rate(0, 0.7, start=10, length=20) == 1.0
    assert cosine_keep_rate(10, 0.7, start=10, length=20) == pytest.approx(1.0)
    assert cosine_keep_rate(20, 0.7, start=10, length=20) == pytest.approx(0.85)
    assert cosine_keep_rate(30, 0.7, start=10, length=20) == 0.7
    vals = [cosine_keep_rate(t, 0.5, 0, 10) for t in range(11)]
    assert all(a >= b for a, b in zip(vals, vals[1:]))
    # EViT's adjust_keep_rate, by hand at a quarter of the way
    assert cosine_keep_rate(2.5, 0.5, 0, 10) == pytest.approx(0.5 + 0.5 * (math.cos(math.pi / 4) + 1) / 2)
    with pytest.raises(ValueError, match="target"):
        cosine_keep_rate(0, 1.2)


def test_keep_rate_at_is_evits_training_schedule():
    """The one keep-rate schedule of both training stacks: 1 unpruned, the step at ``start`` without a warm-up, else
    the cosine warm-up."""
    assert keep_rate_at(5.0, 1.0, 0.0, 3.0) == 1.0
    assert keep_rate_at(0.99, 0.7, 1.0, 0.0) == 1.0 and keep_rate_at(1.0, 0.7, 1.0, 0.0) == 0.7
    for e in (0.0, 1.0, 1.5, 2.9, 3.0, 5.0):
        assert keep_rate_at(e, 0.7, 1.0, 2.0) == cosine_keep_rate(e, 0.7, 1.0, 2.0)
