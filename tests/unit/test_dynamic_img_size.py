"""Models built with ``dynamic_img_size=True`` (timm keeps the flag on the model): every entry point that
checks the input size takes other sizes, and the MAC count follows the grid the model computes."""
import pytest
import timm
import torch

import tokenprune
from tokenprune.core.patch import accepts_any_img_size, check_img_size


def _dynamic(**kw):
    return timm.create_model("deit_tiny_patch16_224", dynamic_img_size=True, **kw).eval()


def test_the_flag_is_read_from_the_model():
    assert accepts_any_img_size(_dynamic())
    assert not accepts_any_img_size(timm.create_model("deit_tiny_patch16_224"))
    assert check_img_size(_dynamic(), 160) == (160, 160)
    with pytest.raises(ValueError, match="img_size"):
        check_img_size(timm.create_model("deit_tiny_patch16_224"), 160)


@pytest.mark.parametrize("keep", [1.0, 0.7])
def test_macs_at_another_size_equal_what_the_model_computes(keep):
    m = tokenprune.patch(_dynamic(), keep_rate=keep)
    with torch.inference_mode():
        m(torch.randn(1, 3, 160, 96))
    assert tokenprune.prune_state(m).token_counts[0] == 1 + 10 * 6
    assert tokenprune.analytic_macs(m, img_size=(160, 96)).total == tokenprune.measured_macs(m, img_size=(160, 96))


def test_dynamic_padding_rounds_the_grid_up():
    m = _dynamic(dynamic_img_pad=True)
    assert tokenprune.analytic_macs(m, img_size=(150, 100)).total == tokenprune.measured_macs(m, img_size=(150, 100))
