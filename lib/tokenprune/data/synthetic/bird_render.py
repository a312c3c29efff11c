"""Rasterising SynthBirds scenes: the painted label map, the exact part and distractor masks, one keypoint per part,
the object box and the coloured image over its background crop."""

from __future__ import annotations

from typing import Mapping

import numpy as np

from tokenprune.data.synthetic.backgrounds import background_bank
from tokenprune.data.synthetic.bird_design import (
    BEAK_VARIANTS,
    CLASS_BANDED,
    CLASS_BEAK,
    CLASS_CREST,
    DISTRACTOR_PART,
    LAYER_BAND,
    LAYER_DISTRACTOR,
    N_PARTS,
    PART_ID,
    BirdConfig,
    bird_parts,
    distractor_shapes,
)
from tokenprune.data.synthetic.raster import affine, ellipse_spans, ellipse_to_pixels, mask_boxes, paint, polygon_spans

__all__ = ["render_bird_scenes"]


def _keypoints(part_mask: np.ndarray, anchors: np.ndarray) -> np.ndarray:
    """One keypoint per part, ``[B, P, 3]`` float32 ``(x, y, visible)``.

    ``anchors [B, P, 2]`` are the parts' reference points in pixels (the centre of the region
    of each part that is normally unoccluded). The keypoint is the anchor's pixel if that pixel
    shows the part, else the part pixel whose centre is nearest the anchor (ties: first in
    row-major order); ``x, y`` are the column and row index, so ``part_mask[y, x]`` is the part.
    ``visible`` is 1 when the part has at least one pixel; invisible rows are all zero.
    """
    b, s, _ = part_mask.shape
    ids = np.arange(1, N_PARTS + 1)
    vis = np.stack([(part_mask == p).any(axis=(1, 2)) for p in ids], axis=1)
    px = np.clip(np.floor(anchors[..., 0]), 0, s - 1).astype(np.int64)
    py = np.clip(np.floor(anchors[..., 1]), 0, s - 1).astype(np.int64)
    on = part_mask[np.arange(b)[:, None], py, px] == ids[None, :]
    bb, pp = np.nonzero(vis & ~on)
    if bb.size:
        centre = np.arange(s, dtype=np.float64) + 0.5
        ax, ay = anchors[bb, pp, 0], anchors[bb, pp, 1]
        d2 = (centre[None, :, None] - ay[:, None, None]) ** 2 + (centre[None, None, :] - ax[:, None, None]) ** 2
        d2 = np.where(part_mask[bb] == ids[pp][:, None, None], d2, np.inf)
        py[bb, pp], px[bb, pp] = np.divmod(np.argmin(d2.reshape(bb.size, -1), axis=1), s)
    kp = np.stack([px, py, vis], axis=-1).astype(np.float32)
    kp[~vis] = 0.0
    return kp


def render_bird_scenes(scenes: Mapping[str, np.ndarray], config: BirdConfig = BirdConfig()) -> dict[str, np.ndarray]:
    """Rasterise scenes from :func:`sample_bird_scenes` into images, masks, keypoints and boxes.

    Returns ``image [B, S, S, 3] uint8``, ``label [B] int64``, ``part_mask [B, S, S] uint8``
    (part ids, see :data:`PART_NAMES`), ``distractor_mask [B, S, S] uint8`` (the part id of a
    loose distractor part, 0 elsewhere), ``keypoints [B, P, 3] float32`` (x = column, y = row,
    visible), ``bbox [B, 4] int32`` (tight box of ``part_mask > 0``) and ``index [B] int64``.
    """
    sc = scenes
    size = config.img_size
    label = np.asarray(sc["label"], dtype=np.int64)
    b = label.shape[0]
    beak = CLASS_BEAK[label]
    g = bird_parts(sc, beak)
    pose = (sc["centre"], sc["scale"], sc["angle"], sc["flip"])
    lay = np.zeros((b, size, size), dtype=np.uint8)
    # distractors first (the object is never drawn over them: they lie outside its box)
    dverts, dbands, _ = distractor_shapes()
    for j in range(sc["d_type"].shape[1]):
        t = sc["d_type"][:, j]
        dpose = (sc["d_centre"][:, j], sc["d_scale"][:, j], sc["d_angle"][:, j], sc["d_flip"][:, j])
        absent = ~sc["d_present"][:, j]
        lo, hi = polygon_spans(affine(dverts[t], *dpose), size)
        lo[absent] = size
        paint(lay, (lo, hi), LAYER_DISTRACTOR + 2 * j)
        banded = sc["d_present"][:, j] & (t == 5)
        if banded.any():
            for k in range(dbands.shape[1]):
                lo, hi = polygon_spans(affine(dbands[t, k], *dpose), size)
                lo[~banded] = size
                paint(lay, (lo, hi), LAYER_DISTRACTOR + 2 * j + 1, only_on=LAYER_DISTRACTOR + 2 * j)
    # the bird, back to front
    banded = CLASS_BANDED[label]
    paint(lay, polygon_spans(affine(g["tail"], *pose), size), PART_ID["tail"])
    if banded.any():
        for k in range(g["bands"].shape[1]):
            lo, hi = polygon_spans(affine(g["bands"][:, k], *pose), size)
            lo[~banded] = size
            paint(lay, (lo, hi), LAYER_BAND, only_on=PART_ID["tail"])
    for k in range(g["legs"].shape[1]):
        paint(lay, polygon_spans(affine(g["legs"][:, k], *pose), size), PART_ID["legs"])
    for name in ("body", "wing"):
        paint(
            lay,
            ellipse_spans(*ellipse_to_pixels(g[f"{name}_c"], g[f"{name}_ax"], g[f"{name}_phi"], *pose), size),
            PART_ID[name],
        )
    lo, hi = polygon_spans(affine(g["crest"], *pose), size)
    lo[~CLASS_CREST[label]] = size
    paint(lay, (lo, hi), PART_ID["crest"])
    paint(
        lay, ellipse_spans(*ellipse_to_pixels(g["head_c"], g["head_ax"], g["head_phi"], *pose), size), PART_ID["head"]
    )
    paint(lay, polygon_spans(affine(g["beak"], *pose), size), PART_ID["beak"])
    paint(lay, ellipse_spans(*ellipse_to_pixels(g["eye_c"], g["eye_ax"], g["eye_phi"], *pose), size), PART_ID["eye"])
    # masks
    nd = sc["d_type"].shape[1]
    n_layers = LAYER_DISTRACTOR + 2 * nd
    part_lut = np.zeros(n_layers, dtype=np.uint8)
    part_lut[:LAYER_BAND] = np.arange(LAYER_BAND)
    part_lut[LAYER_BAND] = PART_ID["tail"]
    part_mask = np.take(part_lut, lay)
    flat = lay.astype(np.intp)
    flat += (np.arange(b) * n_layers)[:, None, None]
    d_lut = np.zeros((b, n_layers), dtype=np.uint8)
    d_lut[:, LAYER_DISTRACTOR:] = np.repeat(DISTRACTOR_PART[sc["d_type"]], 2, axis=1)
    distractor_mask = np.take(d_lut.ravel(), flat)
    # colours: a per-image palette indexed by layer, jittered; background photo crop, jittered
    pal = np.zeros((b, n_layers, 3))
    pal[:, 1 : LAYER_BAND + 1] = sc["colours"]
    beak_col = np.array([v.colour for v in BEAK_VARIANTS], dtype=np.float64)
    pal[:, PART_ID["beak"]] = beak_col[beak] + sc["beak_noise"]
    pal[:, LAYER_DISTRACTOR:] = sc["d_colours"].reshape(b, 2 * nd, 3)
    gain = sc["gain"]
    pal = np.clip(pal * gain[:, None, :] + 0.5, 0, 255).astype(np.uint8)
    bank = background_bank(2 * size)
    q = bank.shape[1]
    crop = sc["bg_frac"] * q
    start = sc["bg_pos"] * (q - crop)[:, None]  # x, y
    steps = (np.arange(size) + 0.5)[None, :] * (crop / size)[:, None]
    cols = np.minimum(start[:, 0:1] + steps, q - 1).astype(np.intp)
    cols = np.where(sc["bg_flip"][:, None], cols[:, ::-1], cols)
    rows = np.minimum(start[:, 1:2] + steps, q - 1).astype(np.intp)
    src = (sc["bg_photo"][:, None, None] * q + rows[:, :, None]) * q + cols[:, None, :]
    gain_q = np.round(gain * 128).astype(np.uint16)  # fixed-point gain (x128) for the photo
    bg = np.take(bank.reshape(-1, 3), src, axis=0).astype(np.uint16)
    bg *= gain_q[:, None, None, :]
    bg >>= 7
    np.minimum(bg, 255, out=bg)
    bg = bg.astype(np.uint8)
    bg *= (lay == 0)[..., None]  # photo where no shape was painted, 0 elsewhere
    image = np.take(pal.reshape(-1, 3), flat, axis=0)  # layer 0 of the palette is black
    image += bg
    return {
        "image": image,
        "label": label,
        "part_mask": part_mask,
        "distractor_mask": distractor_mask,
        "keypoints": _keypoints(part_mask, affine(g["anchors"], *pose)),
        "bbox": mask_boxes(part_mask > 0),
        "index": np.asarray(sc["index"], dtype=np.int64),
    }
