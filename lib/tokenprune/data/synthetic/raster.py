"""Exact rasterisation of convex shapes as row spans, painted in order onto a label map.

Pixel ``(row r, col c)`` covers ``[c, c+1) x [r, r+1)``; a shape covers the pixel when it contains the pixel centre
``(c + 0.5, r + 0.5)``. Also the object-frame to pixel transform and the tight boxes of masks.
"""

from __future__ import annotations

import numpy as np

__all__ = ["polygon_spans", "ellipse_spans", "paint", "affine", "ellipse_to_pixels", "mask_boxes"]


def _to_spans(lower: np.ndarray, upper: np.ndarray, empty: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Float x-bounds per row -> inclusive integer column spans (empty rows get lo > hi)."""
    lo = np.ceil(np.clip(lower, -2.0, size + 2.0) - 0.5)
    hi = np.floor(np.clip(upper, -2.0, size + 2.0) - 0.5)
    lo = np.where(empty, size, lo).astype(np.int16)
    hi = np.where(empty, -1, hi).astype(np.int16)
    return lo, hi


def polygon_spans(verts: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Row spans ``[B, S]`` of convex polygons ``verts [B, V, 2]`` (x, y) in pixel units.

    Vertex order does not matter (the inside of each edge is the side of the vertex mean);
    repeated vertices (a triangle passed as a quad) are allowed.
    """
    p1 = verts
    p2 = np.roll(verts, -1, axis=1)
    nx = -(p2[..., 1] - p1[..., 1])
    ny = p2[..., 0] - p1[..., 0]
    d = nx * p1[..., 0] + ny * p1[..., 1]
    g = verts.mean(axis=1)
    side = nx * g[:, None, 0] + ny * g[:, None, 1] - d
    sgn = np.where(side > 0, -1.0, 1.0)  # orient every edge so that inside means n.p <= d
    nx, ny, d = nx * sgn, ny * sgn, d * sgn
    y = np.arange(size, dtype=np.float64) + 0.5
    eps = 1e-9
    safe = np.where(np.abs(nx) > eps, nx, 1.0)
    t = (d / safe)[:, :, None] - (ny / safe)[:, :, None] * y  # x where each edge crosses row y
    upper = np.min(t, axis=1, where=(nx > eps)[:, :, None], initial=np.inf)
    lower = np.max(t, axis=1, where=(nx < -eps)[:, :, None], initial=-np.inf)
    blocked = lower > upper
    level = np.abs(nx) <= eps  # edges parallel to the rows: rows on their outer side are empty
    if level.any():
        blocked = blocked | (level[:, :, None] & (ny[:, :, None] * y > d[:, :, None])).any(axis=1)
    return _to_spans(lower, upper, blocked, size)


def ellipse_spans(
    centre: np.ndarray, axes: np.ndarray, direction: np.ndarray, size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Row spans ``[B, S]`` of ellipses: centre ``[B, 2]``, semi-axes ``[B, 2]`` (a, b), and the
    unit direction ``[B, 2]`` of the ``a`` axis, all in pixel units."""
    a2, b2 = axes[:, 0] ** 2, axes[:, 1] ** 2
    ux, uy = direction[:, 0], direction[:, 1]
    alpha = ux * ux / a2 + uy * uy / b2
    beta = ux * uy * (1.0 / a2 - 1.0 / b2)
    dy = (np.arange(size, dtype=np.float64) + 0.5)[None, :] - centre[:, 1:2]
    disc = alpha[:, None] - dy * dy / (a2 * b2)[:, None]
    sq = np.sqrt(np.maximum(disc, 0.0))
    mid = centre[:, 0:1] - beta[:, None] * dy / alpha[:, None]
    half = sq / alpha[:, None]
    return _to_spans(mid - half, mid + half, disc < 0, size)


def paint(layers: np.ndarray, spans: tuple[np.ndarray, np.ndarray], value: int, only_on: int | None = None) -> None:
    """Painter's algorithm: set ``layers[b, r, c] = value`` for pixels inside the row spans
    (and, with ``only_on``, only where the layer is currently ``only_on``).

    Works on the smallest band of rows that holds the shape in every image of the batch, so
    small parts cost little.
    """
    b, size = layers.shape[:2]
    lo, hi = spans
    full = lo <= hi
    r0 = np.argmax(full, axis=1)
    r1 = size - np.argmax(full[:, ::-1], axis=1)
    r1 = np.where(full.any(axis=1), r1, r0)
    height = int((r1 - r0).max(initial=0))
    if height == 0:
        return
    cols = np.arange(layers.shape[-1], dtype=np.int16)
    if 2 * height > size:  # whole image
        m = (cols >= lo[:, :, None]) & (cols <= hi[:, :, None])
        if only_on is not None:
            m &= layers == only_on
        np.copyto(layers, np.uint8(value), where=m)
        return
    r0 = np.minimum(r0, size - height)
    rows = r0[:, None] + np.arange(height)[None, :]
    bi = np.arange(b)[:, None]
    lo_w, hi_w = np.take_along_axis(lo, rows, 1), np.take_along_axis(hi, rows, 1)
    m = (cols >= lo_w[:, :, None]) & (cols <= hi_w[:, :, None])
    sub = layers[bi, rows]
    if only_on is not None:
        m &= sub == only_on
    np.copyto(sub, np.uint8(value), where=m)
    layers[bi, rows] = sub


def affine(
    points: np.ndarray, centre: np.ndarray, scale: np.ndarray, angle: np.ndarray, flip: np.ndarray
) -> np.ndarray:
    """Object frame -> pixels: ``p = centre + scale * R(angle) @ diag(flip, 1) @ q``.

    ``points`` is ``[B, K, 2]`` (or ``[K, 2]``, shared); the rest are per image ``[B]`` / ``[B, 2]``.
    """
    u = points[..., 0] * flip[:, None]
    v = points[..., 1]
    c, s = np.cos(angle)[:, None], np.sin(angle)[:, None]
    x = centre[:, 0:1] + scale[:, None] * (c * u - s * v)
    y = centre[:, 1:2] + scale[:, None] * (s * u + c * v)
    return np.stack([x, y], axis=-1)


def ellipse_to_pixels(
    centre: np.ndarray,
    axes: np.ndarray,
    phi: np.ndarray,
    obj_centre: np.ndarray,
    scale: np.ndarray,
    angle: np.ndarray,
    flip: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An object-frame ellipse (centre ``[B, 2]``, semi-axes ``[B, 2]``, angle ``[B]``) in pixels."""
    c_pix = affine(centre[:, None, :], obj_centre, scale, angle, flip)[:, 0]
    du, dv = np.cos(phi) * flip, np.sin(phi)
    ca, sa = np.cos(angle), np.sin(angle)
    direction = np.stack([ca * du - sa * dv, sa * du + ca * dv], axis=-1)
    return c_pix, axes * scale[:, None], direction


def mask_boxes(mask: np.ndarray) -> np.ndarray:
    """Tight ``(x0, y0, x1, y1)`` boxes (exclusive ends) of boolean masks ``[B, H, W]``;
    ``(0, 0, 0, 0)`` for an empty mask."""
    rows, cols = mask.any(axis=2), mask.any(axis=1)
    h, w = mask.shape[1:]
    y0, y1 = np.argmax(rows, axis=1), h - np.argmax(rows[:, ::-1], axis=1)
    x0, x1 = np.argmax(cols, axis=1), w - np.argmax(cols[:, ::-1], axis=1)
    box = np.stack([x0, y0, x1, y1], axis=1).astype(np.int32)
    box[~rows.any(axis=1)] = 0
    return box
