"""The official ToMe implementation (facebookresearch/ToMe, ``tome/patch/timm.py``), loaded from a local checkout,
as a baseline for timing our ``bipartite`` reducer side by side.

The project ships none of that code: :func:`load_official_tome` imports the ``tome`` package from a directory the
user provides (a clone of https://github.com/facebookresearch/ToMe). The package imports itself by its own name
(``from tome.merge import ...``), so it is imported as ``tome`` with the checkout first on ``sys.path``; afterwards
the path and the ``tome`` entries of ``sys.modules`` are put back as they were (a ``tome`` installed in the
environment is neither used nor shadowed afterwards), and the package is kept in a private cache.

:func:`official_tome_like` applies ``tome.patch.timm`` (proportional attention on, as ToMe evaluates off the shelf)
to a copy of a timm model and sets ``model.r``; :func:`check_same_outputs` asserts that it computes what our
``bipartite`` reducer with :func:`tokenprune.methods.tome.tome_schedule` and ``prop_attn=True`` computes.

timm compatibility. ToMe's patch was written for timm 0.4-0.6 and runs unchanged with timm 1.0: it imports
``Attention``, ``Block`` and ``VisionTransformer`` from ``timm.models.vision_transformer`` (still exported), swaps
the classes of the model, its ``Block`` and ``Attention`` modules, finds ``drop_path1`` by name, and timm's
``forward_features`` calls the blocks without an attention mask. Its copies of timm's ``Block.forward`` and
``Attention.forward`` leave out what timm added since: LayerScale (``ls1``, ``ls2``), QK and scale norms
(``q_norm``, ``k_norm``, ``norm``), output gates, attention masks. For a DeiT / plain ViT these are identities,
so no shim is needed; a model that uses any of them is refused (:func:`official_tome_like`), and the output check
would catch what that list misses.
"""
from __future__ import annotations

import copy
import importlib
import sys
from pathlib import Path
from types import ModuleType

import torch
from timm.models.vision_transformer import VisionTransformer

from tokenprune.measure.official_evit import check_same_outputs

__all__ = ["load_official_tome", "official_tome_like", "check_same_outputs"]

#: the official package loaded from each checkout (resolved path), kept out of ``sys.modules``
_LOADED: dict[Path, ModuleType] = {}


def _tome_modules() -> dict[str, ModuleType]:
    return {k: v for k, v in sys.modules.items() if k == "tome" or k.startswith("tome.")}


def load_official_tome(repo_dir: str | Path) -> ModuleType:
    """Import the official ``tome`` package from ``repo_dir`` (a checkout of facebookresearch/ToMe); cached per
    process and checkout. Raises FileNotFoundError when ``repo_dir`` does not hold ``tome/patch/timm.py``."""
    repo = Path(repo_dir).expanduser().resolve()
    if repo in _LOADED:
        return _LOADED[repo]
    if not (repo / "tome" / "patch" / "timm.py").is_file():
        raise FileNotFoundError(f"official_tome: {repo / 'tome' / 'patch' / 'timm.py'} not found; pass a checkout of "
                                "https://github.com/facebookresearch/ToMe (it holds tome/patch/timm.py)")
    saved = _tome_modules()
    for k in saved:
        del sys.modules[k]
    sys.path.insert(0, str(repo))
    try:
        module = importlib.import_module("tome")
    finally:
        sys.path.remove(str(repo))
        for k in _tome_modules():
            del sys.modules[k]
        sys.modules.update(saved)
    _LOADED[repo] = module
    return module


def _unsupported(model: VisionTransformer) -> list[str]:
    """What ``model`` computes that ToMe's copies of timm's ``Block`` / ``Attention`` forward leave out."""
    out = []
    if getattr(model, "global_pool", "token") != "token" or model.num_prefix_tokens != 1 or model.cls_token is None:
        out.append("one [CLS] token with class-token pooling")
    for i, blk in enumerate(model.blocks):
        attn = blk.attn
        for name, mod in (("ls1", getattr(blk, "ls1", None)), ("ls2", getattr(blk, "ls2", None)),
                          ("attn.q_norm", getattr(attn, "q_norm", None)),
                          ("attn.k_norm", getattr(attn, "k_norm", None)),
                          ("attn.norm", getattr(attn, "norm", None))):
            if mod is not None and not isinstance(mod, torch.nn.Identity):
                out.append(f"blocks[{i}].{name}")
        if getattr(attn, "gate", None) is not None:
            out.append(f"blocks[{i}].attn.gate")
    return out


def official_tome_like(module: ModuleType, model: VisionTransformer, r: int) -> torch.nn.Module:
    """A copy of ``model`` patched by the official ``tome.patch.timm`` (proportional attention on, no source
    tracing) with ``model.r = r`` (``r`` tokens merged in every block). ``model`` must be a plain timm DeiT/ViT:
    one [CLS] token, class-token pooling, no LayerScale, QK norm or gate (what ToMe's patch implements)."""
    if isinstance(r, bool) or not isinstance(r, int) or r < 0:
        raise ValueError(f"r: expected an int >= 0 (tokens merged per block), got {r!r}")
    missing = _unsupported(model)
    if missing:
        raise ValueError(f"model: the official ToMe patch does not compute {', '.join(missing[:4])}"
                         f"{' ...' if len(missing) > 4 else ''} (it copies timm 0.6's Block and Attention)")
    official = copy.deepcopy(model).eval()
    module.patch.timm(official, trace_source=False, prop_attn=True)
    official.r = r
    return official
