"""Every random choice of a SynthBirds image (pose, proportions, colours, background crop, distractors), drawn per
image index with counter-based random numbers; all but the label are independent of the class."""

from __future__ import annotations

from typing import Sequence

import numpy as np

from tokenprune.data.synthetic.backgrounds import BACKGROUND_PHOTOS, luma
from tokenprune.data.synthetic.bird_design import (
    BEAK_VARIANTS,
    BIRD_CLASSES,
    BirdConfig,
    distractor_shapes,
    hull_points,
)
from tokenprune.data.synthetic.counter_random import Draw
from tokenprune.data.synthetic.raster import affine

__all__ = ["sample_bird_scenes"]


def _hsv_to_rgb(h: np.ndarray, s: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Vectorised HSV (all in [0, 1]) -> RGB float in [0, 255], shape ``[..., 3]``."""
    i = np.floor(h * 6.0) % 6
    f = h * 6.0 - np.floor(h * 6.0)
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    r = np.choose(i.astype(int), [v, q, p, p, t, v])
    g = np.choose(i.astype(int), [t, v, v, q, p, p])
    b = np.choose(i.astype(int), [p, p, t, v, v, q])
    return np.stack([r, g, b], axis=-1) * 255.0


def sample_bird_scenes(
    indices: np.ndarray | Sequence[int], seed: int = 0, config: BirdConfig = BirdConfig()
) -> dict[str, np.ndarray]:
    """Draw every random choice of the images ``indices`` (a dict of per-image arrays).

    Everything except ``label`` is independent of the class, so :func:`render_bird_scenes` on
    the same scenes with another ``label`` changes only the discriminative parts. Labels are
    balanced: each aligned block of 12 consecutive indices holds every class once.
    """
    idx = np.asarray(indices, dtype=np.int64).reshape(-1)
    if idx.size and idx.min() < 0:
        raise ValueError("indices must be non-negative")
    cfg = config
    size = cfg.img_size
    rd = Draw(seed, idx)
    b = idx.size
    n_cls = len(BIRD_CLASSES)
    # balanced labels: a random permutation of the classes per block of n_cls indices
    block_keys = Draw(seed, idx // n_cls).uniform("label_perm", n_cls)
    perm = np.argsort(block_keys, axis=1, kind="stable")
    sc: dict[str, np.ndarray] = {"index": idx, "label": perm[np.arange(b), idx % n_cls]}
    # proportions (class-independent)
    sc["body_a"] = rd.uniform("body_a", low=0.92, high=1.08)
    sc["body_b"] = rd.uniform("body_b", low=0.92, high=1.08)
    sc["body_phi"] = rd.uniform("body_phi", low=-0.10, high=0.10)
    sc["head_r"] = rd.uniform("head_r", low=0.90, high=1.10)
    sc["wing_phi"] = rd.uniform("wing_phi", low=-0.12, high=0.12)
    sc["beak_len"] = rd.uniform("beak_len", low=0.90, high=1.10)
    sc["beak_w"] = rd.uniform("beak_w", low=0.90, high=1.10)
    sc["crest_h"] = rd.uniform("crest_h", low=0.85, high=1.15)
    sc["tail_tilt"] = rd.uniform("tail_tilt", low=0.0, high=0.35)
    sc["tail_len"] = rd.uniform("tail_len", low=0.90, high=1.10)
    # pose: scale shrunk if needed so that the box of every class fits in the image
    sc["angle"] = np.deg2rad(rd.uniform("angle", low=-cfg.max_rotation_deg, high=cfg.max_rotation_deg))
    sc["flip"] = np.where(rd.uniform("flip") < 0.5, -1.0, 1.0) if cfg.flip else np.ones(b)
    rel = affine(hull_points(sc), np.zeros((b, 2)), np.ones(b), sc["angle"], sc["flip"])
    lo, hi = rel.min(axis=1), rel.max(axis=1)  # [B, 2] at unit scale
    margin = 1.0
    fit = ((size - 2 * margin) / (hi - lo)).min(axis=1)
    scale = np.minimum(rd.uniform("scale", low=cfg.scale_range[0], high=cfg.scale_range[1]) * size, fit)
    sc["scale"] = scale
    free_lo = margin - scale[:, None] * lo
    free_hi = size - margin - scale[:, None] * hi
    sc["centre"] = free_lo + rd.uniform("centre", 2) * np.maximum(free_hi - free_lo, 0.0)
    box = np.concatenate([sc["centre"] + scale[:, None] * lo, sc["centre"] + scale[:, None] * hi], axis=1)
    sc["exclusion_box"] = box + np.array([-1, -1, 1, 1]) * cfg.distractor_gap  # x0, y0, x1, y1 (float)
    # colours (class-independent; the beak colour is its variant's colour plus this noise)
    body = _hsv_to_rgb(
        rd.uniform("body_h"), rd.uniform("body_s", low=0.25, high=0.85), rd.uniform("body_v", low=0.35, high=0.95)
    )
    head = _hsv_to_rgb(
        rd.uniform("head_h"), rd.uniform("head_s", low=0.25, high=0.85), rd.uniform("head_v", low=0.35, high=0.95)
    )
    head = np.where((rd.uniform("head_same") < 0.5)[:, None], body, head)
    wing = body * rd.uniform("wing_dark", low=0.55, high=0.80)[:, None]
    crest = _hsv_to_rgb(
        rd.uniform("crest_h"), rd.uniform("crest_s", low=0.5, high=1.0), rd.uniform("crest_v", low=0.55, high=1.0)
    )
    legs = np.stack(
        [
            rd.uniform("legs_r", low=60, high=200),
            rd.uniform("legs_g", low=45, high=140),
            rd.uniform("legs_b", low=30, high=90),
        ],
        axis=-1,
    )
    light, dark = np.array([238.0, 236.0, 225.0]), np.array([22.0, 22.0, 28.0])
    band = np.where((luma(wing) < 110)[:, None], light, dark)
    eye = np.where((luma(head) > 70)[:, None], np.array([12.0, 12.0, 12.0]), np.array([245.0, 245.0, 245.0]))
    sc["colours"] = np.stack(
        [body, head, np.zeros_like(body), eye, wing, wing, legs, crest, band], axis=1
    )  # layers 1..9
    sc["beak_noise"] = rd.uniform("beak_noise", 3, low=-14, high=14)
    # background crop of a bundled photo
    sc["bg_photo"] = rd.integers("bg_photo", len(BACKGROUND_PHOTOS))
    sc["bg_frac"] = rd.uniform("bg_frac", low=cfg.background_crop[0], high=cfg.background_crop[1])
    sc["bg_pos"] = rd.uniform("bg_pos", 2)
    sc["bg_flip"] = rd.uniform("bg_flip") < 0.5
    j = cfg.colour_jitter
    sc["gain"] = rd.uniform("bright", low=1 - j, high=1 + j)[:, None] * rd.uniform(
        "chan_gain", 3, low=1 - 0.4 * j, high=1 + 0.4 * j
    )
    # distractors: loose beaks / crests / tails, placed so their disc misses the exclusion box
    nd = cfg.n_distractors
    _, _, radius = distractor_shapes()
    kind = rd.integers("d_kind", 3, nd)  # 0 beak, 1 crest, 2 tail
    sub = rd.integers("d_sub", 6, nd)
    dtype_ = np.where(kind == 0, sub % 3, np.where(kind == 1, 3, 4 + sub % 2))
    dscale = scale[:, None] * rd.uniform("d_scale", nd, low=0.8, high=1.2)
    rpx = dscale * radius[dtype_] + 1.0
    n_try = 8
    cand = rd.uniform("d_pos", nd * n_try * 2).reshape(b, nd, n_try, 2)
    span = np.maximum(size - 2 * rpx, 0.0)[..., None, None]
    cand = rpx[..., None, None] + cand * span  # [B, D, T, 2]
    ex = sc["exclusion_box"][:, None, None, :]
    ddx = np.maximum(np.maximum(ex[..., 0] - cand[..., 0], cand[..., 0] - ex[..., 2]), 0.0)
    ddy = np.maximum(np.maximum(ex[..., 1] - cand[..., 1], cand[..., 1] - ex[..., 3]), 0.0)
    ok = np.hypot(ddx, ddy) > rpx[..., None]
    first = np.argmax(ok, axis=-1)
    sc["d_centre"] = np.take_along_axis(cand, first[..., None, None], axis=2)[:, :, 0]
    sc["d_present"] = ok.any(axis=-1) & (rd.uniform("d_use", nd) < cfg.p_distractor) & (2 * rpx < size)
    sc["d_type"] = dtype_
    sc["d_scale"] = dscale
    sc["d_angle"] = rd.uniform("d_angle", nd, high=2 * np.pi)
    sc["d_flip"] = np.where(rd.uniform("d_flip", nd) < 0.5, -1.0, 1.0)
    d_col = _hsv_to_rgb(
        rd.uniform("d_h", nd), rd.uniform("d_s", nd, low=0.4, high=1.0), rd.uniform("d_v", nd, low=0.4, high=1.0)
    )
    beak_col = np.array([v.colour for v in BEAK_VARIANTS], dtype=np.float64)
    d_col = np.where(
        (dtype_ < 3)[..., None],
        beak_col[np.minimum(dtype_, 2)] + rd.uniform("d_noise", nd * 3, low=-14, high=14).reshape(b, nd, 3),
        d_col,
    )
    d_band = np.where((luma(d_col) < 110)[..., None], light, dark)
    sc["d_colours"] = np.stack([d_col, d_band], axis=2)  # [B, D, 2, 3]
    return sc
