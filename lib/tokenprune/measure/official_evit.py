"""The official EViT implementation (youweiliang/evit, ``evit.py``), loaded from a local checkout, as a
baseline for timing our patch side by side.

The project ships none of that code: :func:`load_official_evit` imports ``evit.py`` (and its ``helpers.py``)
from a directory the user provides (a clone of https://github.com/youweiliang/evit). Its ``@register_model``
decorators would overwrite timm's ``deit_*`` entries, so they are disabled while the file is imported;
``helpers.py`` imports ``torchprofile`` (EViT's MAC counter) for functions the model does not use, so
where that package is absent a stub stands in for it during the import.
:func:`official_evit_like` builds the official ``EViT`` with the shape of a timm DeiT, fusion on and the keep
rate at the given locations, and copies the timm model's weights into it (the parameter names are the
same); :func:`check_same_outputs` asserts that it computes what our patched model computes.
"""
from __future__ import annotations

import importlib.util
import sys
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Iterator, Sequence

import torch
from timm.models.vision_transformer import VisionTransformer

from tokenprune.core.schedule import EVIT_LOCATIONS

__all__ = ["load_official_evit", "official_evit_like", "check_same_outputs", "SAME_OUTPUTS_ATOL"]

_MODULE_NAME = "_tokenprune_official_evit"
#: the official module loaded from each checkout (resolved path)
_LOADED: dict[Path, ModuleType] = {}


@contextmanager
def _no_timm_registration() -> Iterator[None]:
    import timm.models.registry as registry

    saved = registry.register_model
    registry.register_model = lambda fn: fn  # type: ignore[assignment]
    try:
        yield
    finally:
        registry.register_model = saved


def load_official_evit(repo_dir: str | Path) -> ModuleType:
    """Import the official ``evit.py`` from ``repo_dir`` (a checkout of youweiliang/evit); cached per process and
    checkout. Raises FileNotFoundError when ``repo_dir`` does not hold ``evit.py`` and ``helpers.py``."""
    repo = Path(repo_dir).expanduser().resolve()
    if repo in _LOADED:
        return _LOADED[repo]
    for name in ("evit.py", "helpers.py"):
        if not (repo / name).is_file():
            raise FileNotFoundError(f"official_evit: {repo / name} not found; pass a checkout of "
                                    "https://github.com/youweiliang/evit (it holds evit.py and helpers.py)")
    spec = importlib.util.spec_from_file_location(_MODULE_NAME, repo / "evit.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    saved_helpers = sys.modules.pop("helpers", None)
    stub = None
    if importlib.util.find_spec("torchprofile") is None:
        stub = ModuleType("torchprofile")

        def profile_macs(*_a, **_k):
            raise NotImplementedError("torchprofile is not installed (a stub stood in for EViT's helpers.py)")

        stub.profile_macs = profile_macs  # type: ignore[attr-defined]
        sys.modules["torchprofile"] = stub
    sys.path.insert(0, str(repo))
    try:
        with _no_timm_registration():
            spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(repo))
        sys.modules.pop("helpers", None)
        if saved_helpers is not None:
            sys.modules["helpers"] = saved_helpers
        if stub is not None:
            sys.modules.pop("torchprofile", None)
    sys.modules[_MODULE_NAME] = module
    _LOADED[repo] = module
    return module


def official_evit_like(module: ModuleType, model: VisionTransformer, keep_rate: float,
                       locations: Sequence[int] = EVIT_LOCATIONS) -> torch.nn.Module:
    """The official ``EViT`` (fusion on, ``keep_rate`` at the 1-based ``locations``) with ``model``'s shape and
    weights. ``model`` must be a plain timm DeiT/ViT: one [CLS] token, no registers, no LayerScale, class-token
    pooling (what the official code implements)."""
    if model.num_prefix_tokens != 1 or getattr(model, "global_pool", "token") != "token":
        raise ValueError("model: the official EViT supports one [CLS] token and class-token pooling only")
    blk = model.blocks[0]
    keep = [keep_rate if i + 1 in set(locations) else 1.0 for i in range(len(model.blocks))]
    official = module.EViT(img_size=tuple(model.patch_embed.img_size), patch_size=model.patch_embed.patch_size[0],
                           in_chans=model.patch_embed.proj.in_channels, num_classes=model.num_classes,
                           embed_dim=model.embed_dim, depth=len(model.blocks), num_heads=blk.attn.num_heads,
                           mlp_ratio=blk.mlp.fc1.out_features / model.embed_dim, qkv_bias=blk.attn.qkv.bias is not None,
                           keep_rate=tuple(keep), fuse_token=True)
    missing, unexpected = official.load_state_dict(
        {k: v for k, v in model.state_dict().items() if not k.startswith("fc_norm") and not k.startswith("head_drop")},
        strict=False)
    allowed_missing = {"pre_logits"}
    if unexpected or any(not k.startswith(tuple(allowed_missing)) for k in missing):
        raise ValueError(f"model: weights do not map onto the official EViT "
                         f"(missing {missing}, unexpected {unexpected})")
    return official.eval()


#: largest absolute logit difference accepted between our patch and an official implementation (fp32): both
#: compute the same function in another order of operations; measured 1e-6-2e-6 on DeiT-S (logits of order 1)
SAME_OUTPUTS_ATOL = 1e-4


def check_same_outputs(ours: torch.nn.Module, official: torch.nn.Module, img_size: int = 224,
                       atol: float = SAME_OUTPUTS_ATOL, seed: int = 0, what: str = "the official EViT") -> float:
    """Largest absolute logit difference of the two models on two random images (fp32); raises AssertionError
    naming ``what`` above ``atol``."""
    x = torch.randn(2, 3, img_size, img_size, generator=torch.Generator().manual_seed(seed))
    with torch.inference_mode():
        diff = (ours.eval()(x) - official.eval()(x)).abs().max().item()
    if not diff <= atol:  # NaN fails too
        raise AssertionError(f"our patched model and {what} differ by {diff:.3g} (> {atol:g})")
    return diff
