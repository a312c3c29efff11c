"""Overlapping patch embedding for a timm ViT (Igaue & Aizawa, arXiv 2507.19175, Sec. 3.3 / Table 3).

The paper replaces the patch embedding's stride ``P`` (non-overlapping ``P x P`` patches) by a stride of
``3/4 P``, so neighbouring patches overlap by a quarter and the model starts from more tokens, which the
pruning stages then thin out. For DeiT-S at 224 px, patch 16, stride 12 and no padding the grid is
``floor((224 - 16) / 12) + 1 = 18`` per side: **324** tokens instead of 196 (the paper does not print the
count; the review asks for it).

:func:`overlap_patch_embed` rebuilds a timm ``VisionTransformer``'s patch embedding in place: the same
``P x P`` convolution kernel and weights with the new stride, the grid and token count updated on the
``PatchEmbed`` (so :func:`tokenprune.measure.macs.analytic_macs`, which derives the grid from the convolution's
kernel, stride and padding, and :func:`tokenprune.measure.evaluation.patch_status` see the new grid), and the
pretrained absolute position embedding resampled to the new grid (``timm.layers.resample_abs_pos_embed``,
bicubic, as timm does when it loads a checkpoint at another resolution). The paper does not say how it
initialised the position embedding of the larger grid; resampling is our choice, and fine-tuning is
expected to adapt it (the paper fine-tunes).

Stride convention when ``3/4 P`` is not an integer (ViT-S/14: 10.5): :func:`overlap_stride` rounds *down*
(10), so the overlap is at least a quarter of the patch.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import torch
from timm.layers import PatchEmbed, resample_abs_pos_embed
from timm.models.vision_transformer import VisionTransformer

__all__ = ["OVERLAP_FRACTION", "overlap_stride", "conv_grid", "overlap_patch_embed", "overlap_info"]

#: the paper's stride as a fraction of the patch size (16 -> 12)
OVERLAP_FRACTION: float = 0.75


def overlap_stride(patch_size: int, fraction: float = OVERLAP_FRACTION) -> int:
    """``floor(fraction * patch_size)``, at least 1: 16 -> 12 (the paper), 14 -> 10, 4 -> 3."""
    if isinstance(patch_size, bool) or not isinstance(patch_size, int) or patch_size < 1:
        raise ValueError(f"patch_size: expected a positive int, got {patch_size!r}")
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"fraction: expected a number in (0, 1], got {fraction!r}")
    return max(1, math.floor(fraction * patch_size + 1e-9))


def conv_grid(img_size: int | Sequence[int], kernel: int | Sequence[int], stride: int | Sequence[int],
              padding: int | Sequence[int] = 0) -> tuple[int, int]:
    """Output grid of a convolution: ``floor((size + 2 pad - kernel) / stride) + 1`` per side.
    224 px, kernel 16, stride 12, no padding: (18, 18)."""
    def two(v):
        return (v, v) if isinstance(v, int) else tuple(v)

    (h, w), (kh, kw), (sh, sw), (ph, pw) = two(img_size), two(kernel), two(stride), two(padding)
    return (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1


def overlap_patch_embed(model: VisionTransformer, stride: Optional[int | Sequence[int]] = None,
                        fraction: float = OVERLAP_FRACTION, interpolation: str = "bicubic",
                        antialias: bool = True) -> VisionTransformer:
    """Give ``model`` an overlapping patch embedding with ``stride`` (default ``overlap_stride(P, fraction)``),
    in place.

    The convolution keeps its ``P x P`` kernel, weights and bias (no padding); only the stride changes. The
    ``PatchEmbed``'s ``grid_size`` and ``num_patches`` and the model's ``pos_embed`` (prefix entries kept,
    patch entries resampled from the old grid to the new one) follow. ``stride`` equal to the patch size
    leaves the model unchanged. Works before or after :func:`tokenprune.core.patch.patch`. Returns ``model``.
    """
    if not isinstance(model, VisionTransformer):
        raise TypeError(f"model: expected a timm VisionTransformer, got {type(model).__name__}")
    pe = model.patch_embed
    if not isinstance(pe, PatchEmbed) or not isinstance(pe.proj, torch.nn.Conv2d):
        raise TypeError(f"model.patch_embed: expected timm PatchEmbed with a Conv2d, got {type(pe).__name__}")
    if getattr(pe, "dynamic_img_pad", False):
        raise ValueError("model.patch_embed: dynamic_img_pad pads to a multiple of the patch size, which an "
                         "overlapping stride does not follow; build the model without dynamic_img_pad")
    if pe.img_size is None:
        raise ValueError("model.patch_embed: has no fixed img_size; build the model with img_size=...")
    conv = pe.proj
    kernel = tuple(conv.kernel_size)
    if any(p != 0 for p in conv.padding):
        raise ValueError(f"model.patch_embed.proj: padding {conv.padding} not supported (the paper uses none)")
    if stride is None:
        stride = tuple(overlap_stride(k, fraction) for k in kernel)
    stride = (stride, stride) if isinstance(stride, int) else tuple(stride)
    if len(stride) != 2 or not all(isinstance(s, int) and 1 <= s <= k for s, k in zip(stride, kernel)):
        raise ValueError(f"stride: expected ints in 1..{kernel} (the kernel; larger strides would skip pixels), "
                         f"got {stride!r}")
    old_grid = tuple(pe.grid_size)
    new_grid = conv_grid(tuple(pe.img_size), kernel, stride)
    with torch.no_grad():
        new = torch.nn.Conv2d(conv.in_channels, conv.out_channels, kernel_size=kernel, stride=stride,
                              bias=conv.bias is not None, device=conv.weight.device, dtype=conv.weight.dtype)
        new.weight.copy_(conv.weight)
        new.weight.requires_grad_(conv.weight.requires_grad)
        if conv.bias is not None:
            new.bias.copy_(conv.bias)
            new.bias.requires_grad_(conv.bias.requires_grad)
        new.train(conv.training)
    pe.proj = new
    pe.grid_size = new_grid
    pe.num_patches = new_grid[0] * new_grid[1]
    if model.pos_embed is not None and new_grid != old_grid:
        n_prefix = 0 if getattr(model, "no_embed_class", False) else model.num_prefix_tokens
        pos = resample_abs_pos_embed(model.pos_embed.detach(), new_size=list(new_grid), old_size=list(old_grid),
                                     num_prefix_tokens=n_prefix, interpolation=interpolation, antialias=antialias)
        model.pos_embed = torch.nn.Parameter(pos.contiguous(), requires_grad=model.pos_embed.requires_grad)
    info = getattr(model, "_tp_overlap", None)
    model._tp_overlap = {"stride": stride, "kernel": kernel, "grid": new_grid,
                         "original_grid": info["original_grid"] if info else old_grid}
    return model


def overlap_info(model: VisionTransformer) -> dict:
    """Stride, kernel and grids of ``model``'s patch embedding (``original_grid`` before any overlap)."""
    pe = model.patch_embed
    info = getattr(model, "_tp_overlap", None)
    return {"stride": tuple(pe.proj.stride), "kernel": tuple(pe.proj.kernel_size), "grid": tuple(pe.grid_size),
            "num_patches": pe.grid_size[0] * pe.grid_size[1],
            "original_grid": info["original_grid"] if info else tuple(pe.grid_size)}
