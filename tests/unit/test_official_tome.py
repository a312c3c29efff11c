"""measure.official_tome: the official ToMe patch is loaded only from a checkout the user gives, leaves no ``tome``
module behind, refuses models its copy of timm's forward does not compute, and (given a checkout in
TOKENPRUNE_OFFICIAL_TOME) computes what our bipartite reducer with ToMe's schedule computes."""
import copy
import os
import sys
import textwrap

import pytest
import timm
import torch

from tokenprune import patch
from tokenprune.measure import official_tome as O
from tokenprune.measure.official_evit import SAME_OUTPUTS_ATOL
from tokenprune.methods.tome import tome_schedule

OFFICIAL = os.environ.get("TOKENPRUNE_OFFICIAL_TOME")


def _tiny(seed: int = 0, **kw):
    torch.manual_seed(seed)
    return timm.create_model("vit_tiny_patch16_224", img_size=32, patch_size=4, depth=2, **kw).eval()


def test_loader_refuses_a_directory_without_the_timm_patch(tmp_path):
    (tmp_path / "tome").mkdir()  # a package without patch/timm.py is not a ToMe checkout
    with pytest.raises(FileNotFoundError) as e:
        O.load_official_tome(tmp_path)
    assert str(tmp_path.resolve() / "tome" / "patch" / "timm.py") in str(e.value)
    assert len(str(e.value).splitlines()) == 1


def test_loader_imports_the_checkout_and_leaves_sys_modules_and_path_as_they_were(tmp_path, monkeypatch):
    """A checkout-shaped package (absolute self-imports, as ToMe's) is imported from the given path; afterwards no
    ``tome`` module is registered and an installed ``tome`` is back in place."""
    pkg = tmp_path / "tome"
    (pkg / "patch").mkdir(parents=True)
    (pkg / "__init__.py").write_text("from . import merge, patch\n")
    (pkg / "merge.py").write_text("WHERE = 'checkout'\n")
    (pkg / "patch" / "__init__.py").write_text("from .timm import apply_patch as timm\n")
    (pkg / "patch" / "timm.py").write_text(textwrap.dedent("""\
        from tome.merge import WHERE
        def apply_patch(model, trace_source=False, prop_attn=True):
            model.patched_from = WHERE
        """))
    installed = type(sys)("tome")
    monkeypatch.setitem(sys.modules, "tome", installed)
    path_before = list(sys.path)
    mod = O.load_official_tome(tmp_path)
    assert sys.modules["tome"] is installed and not any(k.startswith("tome.") for k in sys.modules)
    assert sys.path == path_before
    assert mod.merge.WHERE == "checkout" and O.load_official_tome(tmp_path) is mod
    patched = O.official_tome_like(mod, _tiny(), 5)
    assert patched.patched_from == "checkout" and patched.r == 5


def test_refuses_models_that_toMes_forward_does_not_compute():
    with pytest.raises(ValueError, match="model") as e:
        O.official_tome_like(None, _tiny(init_values=1e-5), 4)  # LayerScale: ToMe's Block.forward skips ls1 / ls2
    assert "ls1" in str(e.value)
    with pytest.raises(ValueError, match="model"):
        O.official_tome_like(None, _tiny(global_pool="avg"), 4)
    with pytest.raises(ValueError, match="r"):
        O.official_tome_like(None, _tiny(), -1)


@pytest.mark.skipif(not OFFICIAL, reason="set TOKENPRUNE_OFFICIAL_TOME to a checkout of facebookresearch/ToMe")
@pytest.mark.parametrize("r", [4, 13, 40])
def test_official_tome_computes_what_our_bipartite_reducer_computes(r):
    """Our ``bipartite`` with ``tome_schedule(r)`` and proportional attention gives the official patch's logits
    (fp32, within SAME_OUTPUTS_ATOL; r = 40 is clamped to half the tokens at every block, as ToMe clamps it)."""
    mod = O.load_official_tome(OFFICIAL)
    m = _tiny(r)
    rates, locations = tome_schedule(r, m.patch_embed.num_patches, len(m.blocks))
    ours = patch(copy.deepcopy(m), keep_rate=rates, locations=locations, reducer="bipartite", prop_attn=True)
    official = O.official_tome_like(mod, m, r)
    assert O.check_same_outputs(ours, official, img_size=32, what="the official ToMe") <= SAME_OUTPUTS_ATOL
    assert "tome" not in sys.modules or not str(getattr(sys.modules["tome"], "__file__", "")).startswith(OFFICIAL)
    with pytest.raises(AssertionError, match="official ToMe"):  # the check sees a different merge
        O.check_same_outputs(patch(copy.deepcopy(m), keep_rate=rates, locations=locations, reducer="bipartite"),
                             official, img_size=32, what="the official ToMe")
