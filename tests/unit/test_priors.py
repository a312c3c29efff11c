"""The centre prior keeps the disc of patches around the image centre."""
import pytest
import torch

from tokenprune.methods import priors  # noqa: F401  (registers "centre")
from tokenprune.core.scorers import TokenContext, get_scorer, select_topk


def _ctx(n, extras=None):
    return TokenContext(x=torch.zeros(2, n + 1, 4), num_prefix_tokens=1, block_index=0, extras=extras or {})


def test_centre_of_odd_grid_is_kept_first():
    s = get_scorer("centre")(_ctx(25))
    keep, _ = select_topk(s, 5)
    assert keep[0, 0].item() == 12  # the middle patch of 5x5
    assert sorted(keep[0].tolist()) == [7, 11, 12, 13, 17]  # then its four neighbours
    assert torch.equal(s[0], s[1])


def test_even_grid_keeps_the_four_central_patches():
    keep, _ = select_topk(get_scorer("centre")(_ctx(16)), 4)
    assert sorted(keep[0].tolist()) == [5, 6, 9, 10]


def test_rectangular_grid_from_extras_and_errors():
    s = get_scorer("centre")(_ctx(6, {"grid": (2, 3)}))
    assert s.shape == (2, 6)
    keep, _ = select_topk(s, 2)
    assert sorted(keep[0].tolist()) == [1, 4]
    with pytest.raises(ValueError, match="square"):
        get_scorer("centre")(_ctx(6))
    with pytest.raises(ValueError, match="grid"):
        get_scorer("centre")(_ctx(6, {"grid": (2, 2)}))
