"""Part and object coverage of a pruned token set: which original patches the kept tokens stand for, and what
share of an image's annotated parts or object they cover.

Every function here is pure: masks, keypoints and source maps in, tensors out.

Conventions
-----------
* Patch indices are row-major over the patch grid (``index = row * grid_w + col``) and exclude
  the [CLS] token, matching the order of timm's patch tokens.
* ``kept_source`` is ``[B, N_kept, N_patches]``: entry ``[b, t, p]`` is non-zero when kept
  output token ``t`` of image ``b`` stands for original patch ``p`` (a merged or fused token
  has several non-zero entries). This is what the reducers return.
"""
from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

__all__ = [
    "patch_grid_shape",
    "mask_to_patch_grid",
    "keypoints_to_patch_index",
    "represented_patches",
    "part_coverage",
    "object_coverage",
]


def _pair(v: int | Sequence[int], name: str) -> tuple[int, int]:
    if isinstance(v, (int, np.integer)):
        return int(v), int(v)
    t = tuple(int(i) for i in v)
    if len(t) != 2:
        raise ValueError(f"{name} must be an int or a pair (h, w), got {v!r}")
    return t  # type: ignore[return-value]


def patch_grid_shape(
    img_size: int | Sequence[int],
    patch_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
) -> tuple[int, int]:
    """Patch-grid ``(rows, cols)`` of a patch embedding: ``floor((H + 2 pad - p) / s) + 1``.

    This is the output size of the patch-embedding convolution (kernel ``patch_size``, stride
    ``stride``, default = ``patch_size``). A stride below the patch size gives overlapping
    patches (varmedad uses stride = 3/4 of the patch).
    """
    h, w = _pair(img_size, "img_size")
    ph, pw = _pair(patch_size, "patch_size")
    sh, sw = _pair(stride if stride is not None else patch_size, "stride")
    qh, qw = _pair(padding, "padding")
    gh, gw = (h + 2 * qh - ph) // sh + 1, (w + 2 * qw - pw) // sw + 1
    if gh <= 0 or gw <= 0:
        raise ValueError(f"image {h}x{w} is smaller than one patch {ph}x{pw}")
    return gh, gw


def mask_to_patch_grid(
    mask: np.ndarray | torch.Tensor,
    patch_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    grid: Sequence[int] | None = None,
    min_fraction: float = 0.0,
    num_parts: int | None = None,
    padding: int | Sequence[int] = 0,
    flatten: bool = True,
) -> torch.Tensor:
    """Map a per-pixel mask to the patches that contain it.

    ``mask`` is ``[H, W]`` or ``[B, H, W]`` at the model's input resolution (after resize and
    crop), either boolean (object / foreground) or integer part ids (0 = background, parts
    1..K). A patch contains a part when the share of its pixels in that part is positive and at
    least ``min_fraction`` (``0`` = "any pixel"). Patch windows are those of the patch-embedding
    convolution (``patch_size``, ``stride``, ``padding``), so overlapping strides are handled;
    with padding, the share counts only pixels inside the image.

    Returns bool ``[..., N]`` for a boolean mask and ``[..., K, N]`` for a part-id mask
    (``K = num_parts`` or the largest id present), with ``N = rows * cols`` row-major
    (``[..., rows, cols]`` when ``flatten`` is False). If ``grid`` is given it must equal the
    computed grid, which guards against a mask at the wrong resolution.
    """
    m = mask if isinstance(mask, torch.Tensor) else torch.as_tensor(np.asarray(mask))
    m = m.detach().cpu()
    if m.ndim not in (2, 3):
        raise ValueError(f"mask must be [H, W] or [B, H, W], got shape {tuple(m.shape)}")
    batched = m.ndim == 3
    if not batched:
        m = m.unsqueeze(0)
    is_bool = m.dtype == torch.bool
    if is_bool:
        planes = m.unsqueeze(1).to(torch.float32)  # [B, 1, H, W]
    else:
        if m.is_floating_point():
            raise ValueError("mask must be boolean or integer part ids, not floating point")
        k = int(num_parts) if num_parts is not None else int(m.max().item()) if m.numel() else 0
        ids = torch.arange(1, k + 1, dtype=m.dtype).view(1, k, 1, 1)
        planes = (m.unsqueeze(1) == ids).to(torch.float32)  # [B, K, H, W]
    ph, pw = _pair(patch_size, "patch_size")
    s = _pair(stride if stride is not None else patch_size, "stride")
    pad = _pair(padding, "padding")
    expect = patch_grid_shape(tuple(m.shape[-2:]), (ph, pw), s, pad)
    if grid is not None and tuple(int(g) for g in grid) != expect:
        raise ValueError(
            f"mask of size {tuple(m.shape[-2:])} gives a {expect} patch grid, expected "
            f"{tuple(grid)}: is the mask at the model's input resolution?"
        )
    b, c = planes.shape[:2]
    frac = F.avg_pool2d(
        planes.reshape(b * c, 1, *planes.shape[-2:]),
        kernel_size=(ph, pw),
        stride=s,
        padding=pad,
        count_include_pad=False,
    ).reshape(b, c, *expect)
    hit = (frac > 0) & (frac >= min_fraction - 1e-9)
    if is_bool:
        hit = hit[:, 0]
    if flatten:
        hit = hit.flatten(-2)
    return hit if batched else hit[0]


def keypoints_to_patch_index(
    kp_xy: np.ndarray | torch.Tensor,
    visible: np.ndarray | torch.Tensor,
    img_size: int | Sequence[int],
    patch_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
) -> torch.Tensor:
    """Patch membership of part keypoints (e.g. CUB-200-2011's 15 part locations).

    ``kp_xy`` is ``[..., K, 2]`` in pixels of the model input (x = column, y = row, already
    mapped through resize and crop); ``visible`` is ``[..., K]``. A keypoint belongs to every
    patch whose window ``[c*s - pad, c*s - pad + p)`` contains it, so with overlapping strides
    it may belong to several patches. Keypoints on the far image border are clamped inside.

    Returns bool ``[..., K, N]``: row ``k`` is the patch set of part ``k``; rows of invisible
    keypoints, or keypoints outside every patch window, are all False (the part then counts as
    not annotated in :func:`part_coverage`). Pass it to :func:`part_coverage` directly.
    """
    xy = kp_xy if isinstance(kp_xy, torch.Tensor) else torch.as_tensor(np.asarray(kp_xy))
    xy = xy.detach().cpu().to(torch.float64)
    vis = visible if isinstance(visible, torch.Tensor) else torch.as_tensor(np.asarray(visible))
    vis = vis.detach().cpu().bool()
    if xy.shape[-1] != 2 or xy.shape[:-1] != vis.shape:
        raise ValueError(f"kp_xy {tuple(xy.shape)} must be [..., K, 2] matching visible {tuple(vis.shape)}")
    h, w = _pair(img_size, "img_size")
    ph, pw = _pair(patch_size, "patch_size")
    sh, sw = _pair(stride if stride is not None else patch_size, "stride")
    qh, qw = _pair(padding, "padding")
    gh, gw = patch_grid_shape((h, w), (ph, pw), (sh, sw), (qh, qw))
    x = xy[..., 0].clamp(0.0, w - 1e-6)
    y = xy[..., 1].clamp(0.0, h - 1e-6)
    x0 = torch.arange(gw, dtype=torch.float64) * sw - qw  # window starts, columns
    y0 = torch.arange(gh, dtype=torch.float64) * sh - qh
    in_col = (x.unsqueeze(-1) >= x0) & (x.unsqueeze(-1) < x0 + pw)  # [..., K, gw]
    in_row = (y.unsqueeze(-1) >= y0) & (y.unsqueeze(-1) < y0 + ph)  # [..., K, gh]
    member = in_row.unsqueeze(-1) & in_col.unsqueeze(-2)  # [..., K, gh, gw]
    member = member.flatten(-2) & vis.unsqueeze(-1)
    return member


def represented_patches(kept_source: torch.Tensor, min_weight: float = 0.0) -> torch.Tensor:
    """Bool ``[B, N_patches]``: patches stood for by at least one kept token.

    A patch counts when some kept token's source weight for it exceeds ``min_weight``; merged
    tokens therefore cover every patch they absorbed. Whether a catch-all fused token (EViT's
    fused token, which stands for every pruned patch) should count is the caller's choice:
    drop its row from ``kept_source`` to measure what the *attentive* tokens keep.
    """
    src = kept_source if isinstance(kept_source, torch.Tensor) else torch.as_tensor(np.asarray(kept_source))
    src = src.detach().cpu()
    if src.ndim == 2:
        src = src.unsqueeze(0)
    if src.ndim != 3:
        raise ValueError(f"kept_source must be [B, N_kept, N_patches], got {tuple(src.shape)}")
    if src.dtype == torch.bool:
        return src.any(dim=1)
    return (src > min_weight).any(dim=1)


def _as_bool(x: np.ndarray | torch.Tensor) -> torch.Tensor:
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    return t.detach().cpu().bool()


def part_coverage(
    part_patch_sets: np.ndarray | torch.Tensor,
    kept_source: np.ndarray | torch.Tensor,
    variant: str = "parts",
    min_weight: float = 0.0,
) -> torch.Tensor:
    """Per-image part coverage of a pruned token set, float64 ``[B]`` in [0, 1] (NaN: no parts).

    ``part_patch_sets`` is bool ``[B, K, N_patches]``: the patches of each annotated part (from
    :func:`keypoints_to_patch_index` or a part-id mask through :func:`mask_to_patch_grid`).
    ``kept_source`` is ``[B, N_kept, N_patches]`` (see the module docstring); merged tokens
    count for every patch they stand for.

    * ``variant="parts"``: share of annotated parts (parts with a non-empty patch set) that
      have at least one patch represented by a kept token.
    * ``variant="patches"``: share of part patches (the union over parts) that are represented.

    Average with ``torch.nanmean`` (or :func:`bootstrap_ci`, which drops NaN) over images.
    """
    parts = _as_bool(part_patch_sets)
    if parts.ndim == 2:
        parts = parts.unsqueeze(0)
    src = kept_source if isinstance(kept_source, torch.Tensor) else torch.as_tensor(np.asarray(kept_source))
    rep = represented_patches(src.detach().cpu(), min_weight)
    if parts.ndim != 3 or parts.shape[0] != rep.shape[0] or parts.shape[-1] != rep.shape[-1]:
        raise ValueError(
            f"part_patch_sets {tuple(parts.shape)} must be [B, K, N] matching kept_source "
            f"[B, N_kept, N] with B={rep.shape[0]}, N={rep.shape[-1]} (patch tokens only, no [CLS])"
        )
    if variant == "parts":
        annotated = parts.any(dim=-1)  # [B, K]
        covered = (parts & rep.unsqueeze(1)).any(dim=-1) & annotated
        num, den = covered.sum(-1), annotated.sum(-1)
    elif variant == "patches":
        union = parts.any(dim=1)  # [B, N]
        num, den = (union & rep).sum(-1), union.sum(-1)
    else:
        raise ValueError(f"variant must be 'parts' or 'patches', got {variant!r}")
    num, den = num.to(torch.float64), den.to(torch.float64)
    return torch.where(den > 0, num / den.clamp_min(1), torch.full_like(den, math.nan))


def object_coverage(
    mask_patches: np.ndarray | torch.Tensor,
    kept_source: np.ndarray | torch.Tensor,
    min_weight: float = 0.0,
) -> torch.Tensor:
    """Per-image share of object patches represented by kept tokens, float64 ``[B]`` (NaN: empty).

    ``mask_patches`` is bool ``[B, N_patches]`` (an object mask or bounding box through
    :func:`mask_to_patch_grid`); ``kept_source`` as in :func:`part_coverage`.
    """
    obj = _as_bool(mask_patches)
    if obj.ndim == 1:
        obj = obj.unsqueeze(0)
    return part_coverage(obj.unsqueeze(1), kept_source, variant="patches", min_weight=min_weight)
