import numpy as np
import pytest
import timm
import torch

from tokenprune.core.patch import prune_state
from tokenprune.measure.evaluation import DROPPED, KEPT, MERGED, paired_comparison, patch_status, prune_sweep
from tokenprune.core.config import PruneConfig
from tokenprune.study.figures import overlay_status, status_grid


@pytest.fixture(scope="module")
def tiny():
    torch.manual_seed(0)
    m = timm.create_model("deit_tiny_patch16_224", img_size=64, num_classes=5)
    x = torch.randn(12, 3, 64, 64)
    y = torch.randint(0, 5, (12,))
    return m, x, y


def test_prune_sweep_rows_and_reference(tiny):
    m, x, y = tiny
    cfgs = [PruneConfig(keep_rate=0.5), PruneConfig(keep_rate=0.5, reducer="drop"),
            PruneConfig(keep_rate=1.0, name="keep everything")]
    table, preds = prune_sweep(m, x, y, cfgs, batch=5)
    assert list(table.config) == ["unpruned"] + [c.label for c in cfgs]
    full = table.iloc[0]
    assert full.agreement == 1.0 and full.kl == 0.0
    same = table.set_index("config").loc["keep everything"]
    assert same.agreement == 1.0 and same.kl == pytest.approx(0.0, abs=1e-6) and same.top1 == full.top1
    assert table.gmacs.iloc[1] < table.gmacs.iloc[0]
    assert (table.top1_low <= table.top1).all() and (table.top1 <= table.top1_high).all()
    assert not hasattr(m, "_tokenprune") or not prune_state(m).prunes
    with pytest.raises(ValueError, match="configs"):
        prune_sweep(m, x, y, [cfgs[0], cfgs[0]])


def test_paired_comparison_identical_is_zero(tiny):
    m, x, y = tiny
    _, preds = prune_sweep(m, x, y, [PruneConfig(keep_rate=0.5)])
    res = paired_comparison(preds["unpruned"], preds["unpruned"])
    assert res["top1_diff"] == 0 and res["n01"] == res["n10"] == 0


@pytest.mark.parametrize("reducer", ["drop", "fuse_attention", "bipartite"])
def test_patch_status_codes(tiny, reducer):
    m, x, _ = tiny
    maps = patch_status(m, x[:2], PruneConfig(keep_rate=0.5, reducer=reducer))
    assert len(maps) == 3 and maps[0].shape == (2, 4, 4)
    n_keep = int(np.ceil(0.5 * 16))
    first = maps[0]
    if reducer == "drop":
        assert ((first == KEPT).sum((1, 2)) == n_keep).all() and not (first == MERGED).any()
    if reducer == "fuse_attention":
        assert ((first == KEPT).sum((1, 2)) == n_keep).all() and not (first == DROPPED).any()
    if reducer == "bipartite":
        assert not (first == DROPPED).any() and ((first == MERGED).sum((1, 2)) >= 2).all()


def test_overlay_and_grid():
    img = np.zeros((32, 32, 3), np.uint8) + 200
    status = np.array([[KEPT, DROPPED], [MERGED, KEPT]], np.uint8)
    out = overlay_status(img, status)
    assert (out[:16, :16] == 200).all() and (out[:16, 16:] < 200).all()
    fig = status_grid([img], [status[None]])
    assert len(fig.axes) == 2
