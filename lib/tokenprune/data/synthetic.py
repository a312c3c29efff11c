"""Synthetic benchmarks with exact part and object masks, for measuring part coverage.

Two generators, both deterministic and vectorised across a batch with numpy:

* **SynthBirds** (:func:`make_part_dataset`, :func:`part_dataset`): a procedural fine-grained
  dataset. Each image shows one bird made of eight named parts (body, head, beak, eye, wing,
  tail, legs, crest) drawn as filled ellipses and convex polygons over a random crop of a
  bundled scikit-image photo, with loose "distractor" parts in the background. The 12 classes
  differ only in three small parts (beak type, crest present or not, tail banded or plain);
  every other property (colours, pose, proportions, background, distractors) is drawn
  independently of the class. Outputs an exact per-pixel part-id mask, a separate distractor
  mask, one keypoint per part and the object box.
* **Cluttered (Fashion-)MNIST** (:func:`clutter_items`, :func:`cluttered`): the real 28x28
  item on a larger canvas with crops of *other* items pasted around it, with the exact object
  mask and box.

Randomness is counter-based: every random number is a hash of ``(seed, image index, variable
name, component)``, so image ``i`` depends only on ``(seed, i)`` (plus, for the cluttered set,
the item pool it draws clutter from), any subset can be regenerated alone, and adding a new
random variable never shifts the others.

Same seed, same bytes holds for a fixed platform and fixed numpy / scikit-image versions (the
backgrounds are resized once with ``skimage.transform.resize``; numpy's vectorised sin/cos may
differ in the last bit between CPUs, which could only move a pixel whose centre lies within
~1e-12 px of a shape edge).

Coordinates: ``x`` is the column, ``y`` the row, pixel ``(row r, col c)`` covers
``[c, c+1) x [r, r+1)`` and a shape covers the pixel when it contains the pixel centre
``(c + 0.5, r + 0.5)``. Boxes are ``(x0, y0, x1, y1)`` with ``x1, y1`` exclusive.

SynthBirds classes (label = 4 * beak + 2 * crest + banded; see :func:`class_table`):

=====  ======================  =========================  ======  ======
label  name                    beak (colour)              crest   tail
=====  ======================  =========================  ======  ======
0      cone_bare_plain         cone: short, thick, yellow no      plain
1      cone_bare_banded        cone                       no      banded
2      cone_crested_plain      cone                       yes     plain
3      cone_crested_banded     cone                       yes     banded
4      dagger_bare_plain       dagger: long, thin, black  no      plain
5      dagger_bare_banded      dagger                     no      banded
6      dagger_crested_plain    dagger                     yes     plain
7      dagger_crested_banded   dagger                     yes     banded
8      hook_bare_plain         hook: drooping tip, red    no      plain
9      hook_bare_banded        hook                       no      banded
10     hook_crested_plain      hook                       yes     plain
11     hook_crested_banded     hook                       yes     banded
=====  ======================  =========================  ======  ======
"""

from __future__ import annotations

import functools
import time
import zlib
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = [
    "PART_NAMES",
    "N_PARTS",
    "DISCRIMINATIVE_PARTS",
    "BEAK_VARIANTS",
    "BeakVariant",
    "BirdClass",
    "BIRD_CLASSES",
    "CLASS_NAMES",
    "BirdConfig",
    "BACKGROUND_PHOTOS",
    "SPLIT_OFFSETS",
    "sample_bird_scenes",
    "render_bird_scenes",
    "make_part_dataset",
    "part_dataset",
    "class_table",
    "clutter_items",
    "photo_backgrounds",
    "cluttered",
    "benchmark_generation",
    "save_sample_grid",
]

# ----------------------------------------------------------------------------------------------
# counter-based random numbers
# ----------------------------------------------------------------------------------------------

_U64 = np.uint64
_GOLDEN = _U64(0x9E3779B97F4A7C15)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser on a uint64 array (wrapping arithmetic)."""
    x = x + _GOLDEN
    x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


class _Draw:
    """Uniform numbers ``u(seed, index, name, k)`` in [0, 1) for a batch of image indices."""

    def __init__(self, seed: int, index: np.ndarray) -> None:
        self.seed = int(seed) & 0xFFFFFFFFFFFFFFFF
        self.index = np.asarray(index).astype(np.uint64).reshape(-1)

    def uniform(self, name: str, k: int | None = None, low: float = 0.0, high: float = 1.0) -> np.ndarray:
        """``[B]`` (``k`` None) or ``[B, k]`` float64 uniform in ``[low, high)``."""
        stream = zlib.crc32(name.encode()) & 0xFFFFFFFF
        key = _splitmix64(np.array([self.seed], dtype=np.uint64) ^ np.array([stream], dtype=np.uint64))
        kk = 1 if k is None else k
        x = _splitmix64(key + self.index[:, None] * _GOLDEN) + np.arange(kk, dtype=np.uint64)[None, :]
        u = (_splitmix64(x) >> _U64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
        u = low + (high - low) * u
        return u[:, 0] if k is None else u

    def integers(self, name: str, n: int, k: int | None = None) -> np.ndarray:
        """Integers uniform in ``[0, n)``."""
        return np.minimum((self.uniform(name, k) * n).astype(np.int64), n - 1)


# ----------------------------------------------------------------------------------------------
# rasterising convex shapes as row spans
# ----------------------------------------------------------------------------------------------


def _to_spans(lower: np.ndarray, upper: np.ndarray, empty: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Float x-bounds per row -> inclusive integer column spans (empty rows get lo > hi)."""
    lo = np.ceil(np.clip(lower, -2.0, size + 2.0) - 0.5)
    hi = np.floor(np.clip(upper, -2.0, size + 2.0) - 0.5)
    lo = np.where(empty, size, lo).astype(np.int16)
    hi = np.where(empty, -1, hi).astype(np.int16)
    return lo, hi


def _polygon_spans(verts: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
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


def _ellipse_spans(
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


def _paint(layers: np.ndarray, spans: tuple[np.ndarray, np.ndarray], value: int, only_on: int | None = None) -> None:
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


def _affine(
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


def _ellipse_to_pixels(
    centre: np.ndarray,
    axes: np.ndarray,
    phi: np.ndarray,
    obj_centre: np.ndarray,
    scale: np.ndarray,
    angle: np.ndarray,
    flip: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """An object-frame ellipse (centre ``[B, 2]``, semi-axes ``[B, 2]``, angle ``[B]``) in pixels."""
    c_pix = _affine(centre[:, None, :], obj_centre, scale, angle, flip)[:, 0]
    du, dv = np.cos(phi) * flip, np.sin(phi)
    ca, sa = np.cos(angle), np.sin(angle)
    direction = np.stack([ca * du - sa * dv, sa * du + ca * dv], axis=-1)
    return c_pix, axes * scale[:, None], direction


# ----------------------------------------------------------------------------------------------
# SynthBirds: parts, classes, geometry
# ----------------------------------------------------------------------------------------------

#: Part ids used in ``part_mask`` and ``distractor_mask`` (index = id; 0 is background).
PART_NAMES: tuple[str, ...] = ("background", "body", "head", "beak", "eye", "wing", "tail", "legs", "crest")
N_PARTS = len(PART_NAMES) - 1
_PID = {name: i for i, name in enumerate(PART_NAMES)}
#: The parts whose appearance depends on the class (all other parts are class-independent).
DISCRIMINATIVE_PARTS: tuple[str, ...] = ("beak", "tail", "crest")


@dataclass(frozen=True)
class BeakVariant:
    """A beak type: protrusion length beyond the head, base half-width, tip droop (object
    units, body half-length = 0.5) and RGB colour."""

    name: str
    length: float
    half_width: float
    droop: float
    colour: tuple[int, int, int]


BEAK_VARIANTS: tuple[BeakVariant, ...] = (
    BeakVariant("cone", 0.17, 0.085, 0.01, (240, 195, 30)),  # short thick yellow
    BeakVariant("dagger", 0.32, 0.050, 0.00, (30, 30, 34)),  # long thin black
    BeakVariant("hook", 0.20, 0.075, 0.11, (215, 40, 30)),  # drooping red
)


@dataclass(frozen=True)
class BirdClass:
    """One SynthBirds class: a beak type, a crest or none, a banded or plain tail."""

    name: str
    beak: int
    crest: bool
    banded_tail: bool


BIRD_CLASSES: tuple[BirdClass, ...] = tuple(
    BirdClass(f"{BEAK_VARIANTS[b].name}_{'crested' if c else 'bare'}_{'banded' if t else 'plain'}", b, bool(c), bool(t))
    for b in range(len(BEAK_VARIANTS))
    for c in (0, 1)
    for t in (0, 1)
)
CLASS_NAMES: tuple[str, ...] = tuple(c.name for c in BIRD_CLASSES)
_CLS_BEAK = np.array([c.beak for c in BIRD_CLASSES])
_CLS_CREST = np.array([c.crest for c in BIRD_CLASSES])
_CLS_BANDED = np.array([c.banded_tail for c in BIRD_CLASSES])

#: Bundled scikit-image photos (no download needed) used as backgrounds.
BACKGROUND_PHOTOS: tuple[str, ...] = (
    "astronaut",
    "chelsea",
    "coffee",
    "rocket",
    "motorcycle",
    "hubble_deep_field",
    "immunohistochemistry",
    "grass",
    "gravel",
    "brick",
)

# layer ids of the label map (painter's canvas); object layers equal part ids, then the tail
# band, then two layers (main, band) per distractor slot
_L_BAND = 9
_L_DISTRACTOR = 10
_BAND_FRACS = ((0.40, 0.55), (0.70, 0.85))  # dark/light bands along the tail, fractions of its length


@dataclass(frozen=True)
class BirdConfig:
    """Generation settings for SynthBirds.

    ``img_size`` defaults to 64: with 8-px patches a ViT sees an 8x8 grid (64 tokens), cheap on
    a CPU, and each discriminative part (beak ~3-9 px, crest ~5-10 px) falls in one or two
    patches, so dropping a single token can lose the class evidence. Geometry scales with
    ``img_size``; below ~48 px the eye and legs may vanish (their keypoints are then invisible).
    """

    img_size: int = 64
    scale_range: tuple[float, float] = (0.30, 0.45)  # pixels per object unit, as a fraction of img_size
    max_rotation_deg: float = 20.0
    flip: bool = True
    n_distractors: int = 3  # distractor slots per image
    p_distractor: float = 0.75  # chance that a slot is used (if it fits outside the object box)
    distractor_gap: int = 2  # px between a distractor and the object's exclusion box
    colour_jitter: float = 0.2  # brightness factor in [1 - j, 1 + j], per-channel gain +-0.4 j
    background_crop: tuple[float, float] = (0.5, 1.0)  # crop side as a fraction of the photo


def _nominal(b: int) -> dict[str, np.ndarray]:
    """Jitter values that give the nominal (average) bird."""
    one = np.ones(b)
    return {
        "body_a": one,
        "body_b": one,
        "body_phi": 0 * one,
        "head_r": one,
        "wing_phi": 0 * one,
        "beak_len": one,
        "beak_w": one,
        "crest_h": one,
        "tail_tilt": 0.15 * one,
        "tail_len": one,
    }


def _bird_parts(shape: Mapping[str, np.ndarray], beak: np.ndarray) -> dict[str, np.ndarray]:
    """Object-frame geometry of every part (facing +x, y down, body half-length 0.5).

    ``shape`` holds per-image proportion jitters (see :func:`_nominal`), ``beak`` the beak
    variant per image. Returns ellipses as ``*_c`` (centre), ``*_ax`` (semi-axes), ``*_phi``
    and polygons as ``[B, 4, 2]`` vertex arrays (triangles repeat a vertex).
    """
    b = beak.shape[0]
    g: dict[str, np.ndarray] = {}
    g["body_c"] = np.zeros((b, 2))
    g["body_ax"] = np.stack([0.50 * shape["body_a"], 0.30 * shape["body_b"]], axis=-1)
    g["body_phi"] = shape["body_phi"]
    r = 0.19 * shape["head_r"]
    hc = np.stack([np.full(b, 0.46), np.full(b, -0.30)], axis=-1)
    g["head_c"], g["head_ax"], g["head_phi"] = hc, np.stack([r, r], axis=-1), np.zeros(b)
    g["eye_c"] = hc + np.stack([0.40 * r, -0.22 * r], axis=-1)
    er = 0.055 * np.sqrt(shape["head_r"])
    g["eye_ax"], g["eye_phi"] = np.stack([er, er], axis=-1), np.zeros(b)
    g["wing_c"] = np.tile([-0.08, -0.05], (b, 1))
    g["wing_ax"] = np.tile([0.32, 0.15], (b, 1))
    g["wing_phi"] = 0.15 + shape["wing_phi"]
    # beak: base inside the head, tip beyond its front edge
    length = np.array([v.length for v in BEAK_VARIANTS])[beak] * shape["beak_len"]
    hw = np.array([v.half_width for v in BEAK_VARIANTS])[beak] * shape["beak_w"]
    droop = np.array([v.droop for v in BEAK_VARIANTS])[beak]
    base = hc + np.stack([0.75 * r, 0.05 * r], axis=-1)
    tip = hc + np.stack([r + length, 0.05 * r + droop], axis=-1)
    off = np.stack([np.zeros(b), hw], axis=-1)
    g["beak"] = np.stack([base - off, tip, tip, base + off], axis=1)
    # crest: a swept-back spike on top of the head
    a1, a2 = np.deg2rad(-130.0), np.deg2rad(-70.0)
    p1 = hc + 0.8 * r[:, None] * np.array([np.cos(a1), np.sin(a1)])
    p2 = hc + 0.8 * r[:, None] * np.array([np.cos(a2), np.sin(a2)])
    apex = hc + (r * shape["crest_h"])[:, None] * np.array([-1.0, -2.1])
    g["crest"] = np.stack([p1, apex, apex, p2], axis=1)
    # tail: a widening quad behind the body, tilted down by tail_tilt radians
    tilt = shape["tail_tilt"]
    dirn = np.stack([-np.cos(tilt), np.sin(tilt)], axis=-1)
    perp = np.stack([np.sin(tilt), np.cos(tilt)], axis=-1)
    bc = np.tile([-0.36, -0.02], (b, 1))
    ec = bc + (0.58 * shape["tail_len"])[:, None] * dirn
    bt, bb, et, eb = bc - 0.08 * perp, bc + 0.08 * perp, ec - 0.15 * perp, ec + 0.15 * perp
    g["tail"] = np.stack([bt, et, eb, bb], axis=1)
    bands = []
    for f1, f2 in _BAND_FRACS:
        t1, t2 = bt + f1 * (et - bt), bt + f2 * (et - bt)
        u1, u2 = bb + f1 * (eb - bb), bb + f2 * (eb - bb)
        bands.append(np.stack([t1, t2, u2, u1], axis=1))
    g["bands"] = np.stack(bands, axis=1)  # [B, 2, 4, 2]
    # legs: two thin sticks below the body
    legs = []
    for hip, foot in (((0.08, 0.22), (0.11, 0.58)), ((-0.10, 0.24), (-0.12, 0.58))):
        hip_a, foot_a = np.array(hip), np.array(foot)
        d = (foot_a - hip_a) / np.linalg.norm(foot_a - hip_a)
        n = 0.035 * np.array([-d[1], d[0]])
        legs.append(np.tile(np.stack([hip_a - n, foot_a - n, foot_a + n, hip_a + n]), (b, 1, 1)))
    g["legs"] = np.stack(legs, axis=1)  # [B, 2, 4, 2]
    # keypoint anchors, by part id 1..8: points inside the usually unoccluded part of each part
    hip, foot = g["legs"][:, 0, [0, 3]].mean(axis=1), g["legs"][:, 0, [1, 2]].mean(axis=1)
    g["anchors"] = np.stack(
        [
            np.tile([0.10, 0.15], (b, 1)),  # body: the belly, below the wing
            hc,  # head
            (base + tip) / 2,  # beak
            g["eye_c"],  # eye
            g["wing_c"],  # wing
            bc + 0.62 * (ec - bc),  # tail: between the bands, behind the body
            hip + 0.7 * (foot - hip),  # legs: the front leg, below the body
            (p1 + p2 + apex) / 3,  # crest
        ],
        axis=1,
    )
    return g


def _ellipse_outline(c: np.ndarray, ax: np.ndarray, phi: np.ndarray, n: int = 32) -> np.ndarray:
    """``n`` boundary points ``[B, n, 2]`` of object-frame ellipses."""
    t = np.linspace(0, 2 * np.pi, n, endpoint=False)
    x, y = ax[:, 0:1] * np.cos(t), ax[:, 1:2] * np.sin(t)
    cp, sp = np.cos(phi)[:, None], np.sin(phi)[:, None]
    return np.stack([c[:, 0:1] + cp * x - sp * y, c[:, 1:2] + sp * x + cp * y], axis=-1)


def _hull_points(shape: Mapping[str, np.ndarray]) -> np.ndarray:
    """Object-frame points ``[B, K, 2]`` whose box contains the bird of *every* class."""
    b = shape["head_r"].shape[0]
    pts = []
    for v in range(len(BEAK_VARIANTS)):
        g = _bird_parts(shape, np.full(b, v))
        pts.append(g["beak"])
    for name in ("body", "head", "wing"):
        pts.append(_ellipse_outline(g[f"{name}_c"], g[f"{name}_ax"], g[f"{name}_phi"]))
    pts += [g["crest"], g["tail"], g["legs"].reshape(b, 4 * g["legs"].shape[1], 2)]
    return np.concatenate(pts, axis=1)


# distractor types: the three beaks, a crest, a plain tail, a banded tail (nominal shapes,
# centred on their vertex mean)
_DISTRACTOR_TYPES = ("beak:cone", "beak:dagger", "beak:hook", "crest", "tail:plain", "tail:banded")
_DISTRACTOR_PART = np.array([_PID["beak"]] * 3 + [_PID["crest"], _PID["tail"], _PID["tail"]], dtype=np.uint8)


@functools.lru_cache(maxsize=1)
def _distractor_shapes() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vertex table ``[T, 4, 2]``, band table ``[T, 2, 4, 2]`` and radius ``[T]`` per type."""
    nom = _nominal(3)
    g = _bird_parts(nom, np.arange(3))
    polys = [g["beak"][0], g["beak"][1], g["beak"][2], g["crest"][0], g["tail"][0], g["tail"][0]]
    centres = [p.mean(axis=0) for p in polys]
    verts = np.stack([p - c for p, c in zip(polys, centres)])
    bands = np.zeros((len(polys), 2, 4, 2))
    bands[5] = g["bands"][0] - centres[5]
    radius = np.linalg.norm(verts, axis=-1).max(axis=-1)
    return verts, bands, radius


def _hsv_to_rgb(h: np.ndarray, s: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Vectorised HSV (all in [0, 1]) -> RGB float in [0, 255], shape ``[..., 3]``."""
    i = np.floor(h * 6.0) % 6
    f = h * 6.0 - np.floor(h * 6.0)
    p, q, t = v * (1 - s), v * (1 - f * s), v * (1 - (1 - f) * s)
    r = np.choose(i.astype(int), [v, q, p, p, t, v])
    g = np.choose(i.astype(int), [t, v, v, q, p, p])
    b = np.choose(i.astype(int), [p, p, t, v, v, q])
    return np.stack([r, g, b], axis=-1) * 255.0


def _luma(rgb: np.ndarray) -> np.ndarray:
    return rgb @ np.array([0.299, 0.587, 0.114])


# ----------------------------------------------------------------------------------------------
# SynthBirds: backgrounds
# ----------------------------------------------------------------------------------------------


def _load_photo(name: str) -> np.ndarray:
    """One bundled scikit-image photo as RGB uint8 (grey ones are replicated to 3 channels)."""
    from skimage import data

    img = data.stereo_motorcycle()[0] if name == "motorcycle" else getattr(data, name)()
    img = np.asarray(img)
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=-1)
    return img[..., :3].astype(np.uint8)


@functools.lru_cache(maxsize=4)
def _background_bank(side: int) -> np.ndarray:
    """Centre squares of :data:`BACKGROUND_PHOTOS`, resized (anti-aliased) to ``side``:
    ``[K, side, side, 3]`` uint8, read-only."""
    from skimage.transform import resize

    out = []
    for name in BACKGROUND_PHOTOS:
        img = _load_photo(name)
        h, w = img.shape[:2]
        m = min(h, w)
        sq = img[(h - m) // 2 : (h - m) // 2 + m, (w - m) // 2 : (w - m) // 2 + m]
        out.append((resize(sq, (side, side), anti_aliasing=True) * 255.0 + 0.5).astype(np.uint8))
    bank = np.stack(out)
    bank.setflags(write=False)
    return bank


# ----------------------------------------------------------------------------------------------
# SynthBirds: sampling and rendering
# ----------------------------------------------------------------------------------------------


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
    rd = _Draw(seed, idx)
    b = idx.size
    n_cls = len(BIRD_CLASSES)
    # balanced labels: a random permutation of the classes per block of n_cls indices
    block_keys = _Draw(seed, idx // n_cls).uniform("label_perm", n_cls)
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
    rel = _affine(_hull_points(sc), np.zeros((b, 2)), np.ones(b), sc["angle"], sc["flip"])
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
    band = np.where((_luma(wing) < 110)[:, None], light, dark)
    eye = np.where((_luma(head) > 70)[:, None], np.array([12.0, 12.0, 12.0]), np.array([245.0, 245.0, 245.0]))
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
    _, _, radius = _distractor_shapes()
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
    d_band = np.where((_luma(d_col) < 110)[..., None], light, dark)
    sc["d_colours"] = np.stack([d_col, d_band], axis=2)  # [B, D, 2, 3]
    return sc


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


def _boxes(mask: np.ndarray) -> np.ndarray:
    """Tight ``(x0, y0, x1, y1)`` boxes (exclusive ends) of boolean masks ``[B, H, W]``;
    ``(0, 0, 0, 0)`` for an empty mask."""
    rows, cols = mask.any(axis=2), mask.any(axis=1)
    h, w = mask.shape[1:]
    y0, y1 = np.argmax(rows, axis=1), h - np.argmax(rows[:, ::-1], axis=1)
    x0, x1 = np.argmax(cols, axis=1), w - np.argmax(cols[:, ::-1], axis=1)
    box = np.stack([x0, y0, x1, y1], axis=1).astype(np.int32)
    box[~rows.any(axis=1)] = 0
    return box


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
    beak = _CLS_BEAK[label]
    g = _bird_parts(sc, beak)
    pose = (sc["centre"], sc["scale"], sc["angle"], sc["flip"])
    lay = np.zeros((b, size, size), dtype=np.uint8)
    # distractors first (the object is never drawn over them: they lie outside its box)
    dverts, dbands, _ = _distractor_shapes()
    for j in range(sc["d_type"].shape[1]):
        t = sc["d_type"][:, j]
        dpose = (sc["d_centre"][:, j], sc["d_scale"][:, j], sc["d_angle"][:, j], sc["d_flip"][:, j])
        absent = ~sc["d_present"][:, j]
        lo, hi = _polygon_spans(_affine(dverts[t], *dpose), size)
        lo[absent] = size
        _paint(lay, (lo, hi), _L_DISTRACTOR + 2 * j)
        banded = sc["d_present"][:, j] & (t == 5)
        if banded.any():
            for k in range(dbands.shape[1]):
                lo, hi = _polygon_spans(_affine(dbands[t, k], *dpose), size)
                lo[~banded] = size
                _paint(lay, (lo, hi), _L_DISTRACTOR + 2 * j + 1, only_on=_L_DISTRACTOR + 2 * j)
    # the bird, back to front
    banded = _CLS_BANDED[label]
    _paint(lay, _polygon_spans(_affine(g["tail"], *pose), size), _PID["tail"])
    if banded.any():
        for k in range(g["bands"].shape[1]):
            lo, hi = _polygon_spans(_affine(g["bands"][:, k], *pose), size)
            lo[~banded] = size
            _paint(lay, (lo, hi), _L_BAND, only_on=_PID["tail"])
    for k in range(g["legs"].shape[1]):
        _paint(lay, _polygon_spans(_affine(g["legs"][:, k], *pose), size), _PID["legs"])
    for name in ("body", "wing"):
        _paint(
            lay,
            _ellipse_spans(*_ellipse_to_pixels(g[f"{name}_c"], g[f"{name}_ax"], g[f"{name}_phi"], *pose), size),
            _PID[name],
        )
    lo, hi = _polygon_spans(_affine(g["crest"], *pose), size)
    lo[~_CLS_CREST[label]] = size
    _paint(lay, (lo, hi), _PID["crest"])
    _paint(
        lay, _ellipse_spans(*_ellipse_to_pixels(g["head_c"], g["head_ax"], g["head_phi"], *pose), size), _PID["head"]
    )
    _paint(lay, _polygon_spans(_affine(g["beak"], *pose), size), _PID["beak"])
    _paint(lay, _ellipse_spans(*_ellipse_to_pixels(g["eye_c"], g["eye_ax"], g["eye_phi"], *pose), size), _PID["eye"])
    # masks
    nd = sc["d_type"].shape[1]
    n_layers = _L_DISTRACTOR + 2 * nd
    part_lut = np.zeros(n_layers, dtype=np.uint8)
    part_lut[:_L_BAND] = np.arange(_L_BAND)
    part_lut[_L_BAND] = _PID["tail"]
    part_mask = np.take(part_lut, lay)
    flat = lay.astype(np.intp)
    flat += (np.arange(b) * n_layers)[:, None, None]
    d_lut = np.zeros((b, n_layers), dtype=np.uint8)
    d_lut[:, _L_DISTRACTOR:] = np.repeat(_DISTRACTOR_PART[sc["d_type"]], 2, axis=1)
    distractor_mask = np.take(d_lut.ravel(), flat)
    # colours: a per-image palette indexed by layer, jittered; background photo crop, jittered
    pal = np.zeros((b, n_layers, 3))
    pal[:, 1 : _L_BAND + 1] = sc["colours"]
    beak_col = np.array([v.colour for v in BEAK_VARIANTS], dtype=np.float64)
    pal[:, _PID["beak"]] = beak_col[beak] + sc["beak_noise"]
    pal[:, _L_DISTRACTOR:] = sc["d_colours"].reshape(b, 2 * nd, 3)
    gain = sc["gain"]
    pal = np.clip(pal * gain[:, None, :] + 0.5, 0, 255).astype(np.uint8)
    bank = _background_bank(2 * size)
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
        "keypoints": _keypoints(part_mask, _affine(g["anchors"], *pose)),
        "bbox": _boxes(part_mask > 0),
        "index": np.asarray(sc["index"], dtype=np.int64),
    }


def _config(img_size: int, overrides: Mapping[str, Any]) -> BirdConfig:
    return replace(BirdConfig(), img_size=int(img_size), **dict(overrides))


def make_part_dataset(
    n: int,
    seed: int = 0,
    img_size: int = 64,
    *,
    start: int = 0,
    indices: Sequence[int] | np.ndarray | None = None,
    batch_size: int = 256,
    **config: Any,
) -> dict[str, np.ndarray]:
    """Generate ``n`` SynthBirds images (indices ``start .. start + n - 1``, or ``indices``).

    Image ``i`` depends only on ``(seed, i)`` and the config, so any subset can be regenerated
    by passing its ``indices``. ``config`` overrides :class:`BirdConfig` fields. Returns the
    arrays of :func:`render_bird_scenes`, concatenated.
    """
    cfg = _config(img_size, config)
    idx = (
        np.arange(start, start + n, dtype=np.int64)
        if indices is None
        else np.asarray(indices, dtype=np.int64).reshape(-1)
    )
    if idx.size == 0:  # empty, with the right shapes and dtypes
        one = render_bird_scenes(sample_bird_scenes(np.zeros(1, np.int64), seed, cfg), cfg)
        return {k: v[:0] for k, v in one.items()}
    parts = [
        render_bird_scenes(sample_bird_scenes(idx[i : i + batch_size], seed, cfg), cfg)
        for i in range(0, idx.size, batch_size)
    ]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


#: index offset of each split, so that the splits never share an image and resizing one split
#: does not change the others
SPLIT_OFFSETS: dict[str, int] = {"train": 0, "val": 1 << 40, "test": 2 << 40}


def _bird_features(size: int) -> Any:
    import datasets

    return datasets.Features(
        {
            "image": datasets.Array3D((size, size, 3), "uint8"),
            "label": datasets.ClassLabel(names=list(CLASS_NAMES)),
            "part_mask": datasets.Array2D((size, size), "uint8"),
            "distractor_mask": datasets.Array2D((size, size), "uint8"),
            "keypoints": datasets.Array2D((N_PARTS, 3), "float32"),
            "bbox": datasets.List(datasets.Value("int32"), length=4),
            "index": datasets.Value("int64"),
        }
    )


def _to_dataset(arrays: Mapping[str, np.ndarray], features: Any, description: str) -> Any:
    """An in-memory ``datasets.Dataset`` built straight from numpy columns (no per-row
    conversion), formatted as numpy with stored dtypes kept."""
    import datasets
    import pyarrow as pa
    from datasets.table import InMemoryTable

    cols = {}
    for name, feat in features.items():
        a = np.ascontiguousarray(arrays[name])
        if isinstance(feat, (datasets.Array2D, datasets.Array3D)):
            storage = pa.array(a.astype(feat.dtype, copy=False).reshape(-1))
            for dim in reversed(a.shape[1:]):
                offsets = pa.array(np.arange(0, len(storage) + 1, dim, dtype=np.int32))
                storage = pa.ListArray.from_arrays(offsets, storage)
            cols[name] = pa.ExtensionArray.from_storage(feat(), storage)
        elif a.ndim == 2:  # fixed-length list
            cols[name] = pa.FixedSizeListArray.from_arrays(pa.array(a.reshape(-1)), a.shape[1])
        else:
            cols[name] = pa.array(a)
    info = datasets.DatasetInfo(description=description, features=features)
    table = pa.table(cols).cast(features.arrow_schema)
    return datasets.Dataset(InMemoryTable(table), info=info).with_format("numpy", dtype=None)


def part_dataset(n_train: int, n_val: int, n_test: int, seed: int = 0, img_size: int = 64, **config: Any) -> Any:
    """SynthBirds as a ``datasets.DatasetDict`` with splits ``train``, ``val``, ``test``.

    Columns: ``image`` (Array3D uint8 ``[S, S, 3]``), ``label`` (ClassLabel, names
    :data:`CLASS_NAMES`), ``part_mask`` and ``distractor_mask`` (Array2D uint8 ``[S, S]``),
    ``keypoints`` (Array2D float32 ``[8, 3]``: x, y, visible per part id 1..8), ``bbox``
    (4 int32: x0, y0, x1, y1, exclusive ends) and ``index`` (the generator index; split ``k``
    uses indices ``SPLIT_OFFSETS[k] + i``). Formatted like :mod:`tokenprune.data.datasets`:
    ``with_format("numpy", dtype=None)`` (keep ``dtype=None`` when reformatting).
    """
    import datasets

    feats = _bird_features(int(img_size))
    out = {}
    desc = f"SynthBirds (tokenprune.data.synthetic), seed={seed}, img_size={img_size}, config={config}"
    for split, n in (("train", n_train), ("val", n_val), ("test", n_test)):
        arr = make_part_dataset(n, seed, img_size, start=SPLIT_OFFSETS[split], **config)
        out[split] = _to_dataset(arr, feats, desc)
    return datasets.DatasetDict(out)


def class_table() -> list[dict[str, Any]]:
    """The SynthBirds classes as rows ``{label, name, beak, beak_colour, crest, tail}``."""
    return [
        {
            "label": i,
            "name": c.name,
            "beak": BEAK_VARIANTS[c.beak].name,
            "beak_colour": BEAK_VARIANTS[c.beak].colour,
            "crest": c.crest,
            "tail": "banded" if c.banded_tail else "plain",
        }
        for i, c in enumerate(BIRD_CLASSES)
    ]


# ----------------------------------------------------------------------------------------------
# Cluttered (Fashion-)MNIST
# ----------------------------------------------------------------------------------------------


def clutter_items(
    images: np.ndarray,
    labels: np.ndarray,
    *,
    canvas: int = 64,
    seed: int = 0,
    indices: Sequence[int] | np.ndarray | None = None,
    n_clutter: int = 6,
    piece_size: tuple[int, int] = (8, 12),
    threshold: int = 0,
    gap: int = 1,
    n_tries: int = 8,
    background: str = "black",
    background_contrast: float = 0.5,
) -> dict[str, np.ndarray]:
    """Place each item on a ``canvas`` x ``canvas`` black canvas (or a photo) among crops of other items.

    ``images`` is uint8 ``[N, h, w]`` (28x28 for (Fashion-)MNIST), ``labels`` ``[N]``. Output
    image ``k`` is built from item ``i = indices[k]`` (default ``0 .. N-1``) and depends only on
    ``(seed, i)`` and the pool ``images``:

    * the item is pasted unchanged at a random offset; its **object mask** is its pixels
      ``> threshold`` (default: every nonzero pixel) and ``bbox`` the tight box of that mask;
    * up to ``n_clutter`` square pieces (side uniform in ``piece_size``, inclusive) are cut at a
      random place from random *other* items of the pool (``j != i``) and pasted (pixel-wise
      max among pieces) at random places. **Rule:** a piece is only placed where it lies
      entirely outside the object box grown by ``gap`` px; each piece tries ``n_tries``
      positions and is dropped if none qualifies. So the grown box contains exactly the item's
      pixels, and every object pixel keeps the item's value;
    * ``background="photo"``: every pixel that is neither object nor clutter shows a
      ``canvas``-px crop of a greyscale scikit-image photo (:func:`photo_backgrounds`) with its
      luminance times ``background_contrast``; ``"black"`` (the default) leaves them 0.

    Returns ``image [K, C, C] uint8``, ``label [K] int64``, ``object_mask [K, C, C] uint8``
    (0/1), ``clutter_mask [K, C, C] uint8`` (0/1: clutter pixels ``> threshold``), ``bbox
    [K, 4] int32`` (x0, y0, x1, y1, exclusive), ``offset [K, 2] int32`` (x, y of the item's
    top-left corner) and ``index [K] int64`` (the item index ``i``).
    """
    imgs = np.asarray(images)
    if imgs.ndim != 3 or imgs.dtype != np.uint8:
        raise ValueError(f"images must be uint8 [N, h, w], got {imgs.dtype} {imgs.shape}")
    if background not in ("black", "photo"):
        raise ValueError(f"background: {background!r} not accepted; accepted: 'black', 'photo'")
    if not 0.0 <= background_contrast <= 1.0:
        raise ValueError(f"background_contrast: must be in [0, 1], got {background_contrast!r}")
    n, h, w = imgs.shape
    if n < 2:
        raise ValueError("need at least two items (clutter comes from other items)")
    kmin, kmax = int(piece_size[0]), int(piece_size[1])
    if not (1 <= kmin <= kmax <= min(h, w)) or canvas < max(h, w):
        raise ValueError("need 1 <= piece_size[0] <= piece_size[1] <= item size <= canvas")
    idx = np.arange(n, dtype=np.int64) if indices is None else np.asarray(indices, dtype=np.int64).reshape(-1)
    lab = np.asarray(labels).astype(np.int64)[idx]
    b = idx.size
    rd = _Draw(seed, idx)
    items = imgs[idx]
    # the item
    off = np.stack([rd.integers("off_x", canvas - w + 1), rd.integers("off_y", canvas - h + 1)], axis=1)
    obj = np.zeros((b, canvas, canvas), dtype=np.uint8)
    bi = np.arange(b)[:, None, None]
    ry = off[:, 1, None, None] + np.arange(h)[None, :, None]
    rx = off[:, 0, None, None] + np.arange(w)[None, None, :]
    obj[bi, ry, rx] = items
    mask = obj > threshold
    box = _boxes(mask)
    empty = ~mask.any(axis=(1, 2))
    box[empty] = np.concatenate([off, off + [w, h]], axis=1)[empty]
    grown = box + np.array([-gap, -gap, gap, gap])
    # clutter pieces, on a canvas padded by kmax so every window fits
    pad = canvas + kmax
    clut = np.zeros((b, pad, pad), dtype=np.uint8)
    ar = np.arange(kmax)
    for p in range(n_clutter):
        tag = f"piece{p}"
        k = kmin + rd.integers(tag + "_size", kmax - kmin + 1)
        src = (idx + 1 + rd.integers(tag + "_src", n - 1)) % n
        sy = rd.uniform(tag + "_sy") * (h - k + 1)
        sx = rd.uniform(tag + "_sx") * (w - k + 1)
        sy, sx = sy.astype(np.int64), sx.astype(np.int64)
        # candidate positions; keep the first one whose piece misses the grown box
        cand = (rd.uniform(tag + "_pos", 2 * n_tries).reshape(b, n_tries, 2) * (canvas - k + 1)[:, None, None]).astype(
            np.int64
        )
        x0, y0 = cand[..., 0], cand[..., 1]
        x1, y1 = x0 + k[:, None], y0 + k[:, None]
        g = grown[:, None, :]
        ok = (x1 <= g[..., 0]) | (x0 >= g[..., 2]) | (y1 <= g[..., 1]) | (y0 >= g[..., 3])
        first = np.argmax(ok, axis=1)
        use = ok.any(axis=1)
        px, py = x0[np.arange(b), first], y0[np.arange(b), first]
        inside = ar[None, :] < k[:, None]  # [B, kmax]
        win = inside[:, :, None] & inside[:, None, :] & use[:, None, None]
        gy = np.minimum(sy[:, None] + ar[None, :], h - 1)
        gx = np.minimum(sx[:, None] + ar[None, :], w - 1)
        piece = imgs[src[:, None, None], gy[:, :, None], gx[:, None, :]] * win
        ty = py[:, None, None] + ar[None, :, None]
        tx = px[:, None, None] + ar[None, None, :]
        clut[bi, ty, tx] = np.maximum(clut[bi, ty, tx], piece)
    clut = clut[:, :canvas, :canvas]
    image = np.maximum(obj, clut)
    if background == "photo":
        fg = mask | (clut > threshold)
        image = np.where(fg, image, photo_backgrounds(rd, canvas, background_contrast))
    elif background != "black":
        raise ValueError(f"background: {background!r} not accepted; accepted: 'black', 'photo'")
    return {
        "image": image,
        "label": lab,
        "object_mask": mask.astype(np.uint8),
        "clutter_mask": (clut > threshold).astype(np.uint8),
        "bbox": box.astype(np.int32),
        "offset": off.astype(np.int32),
        "index": idx,
    }


@functools.lru_cache(maxsize=4)
def _grey_bank(side: int) -> np.ndarray:
    """:func:`_background_bank` at ``side`` as greyscale float ``[K, side, side]`` in [0, 255], read-only."""
    bank = _luma(_background_bank(side).astype(np.float64))
    bank.setflags(write=False)
    return bank


def photo_backgrounds(draw: _Draw, canvas: int, contrast: float) -> np.ndarray:
    """One background per image of ``draw``'s batch: a ``canvas`` x ``canvas`` crop, at a random place, of one of
    :data:`BACKGROUND_PHOTOS` (greyscale, its centre square resized to twice ``canvas``), luminance times
    ``contrast``; ``[B, canvas, canvas]`` uint8, a function of the seed and the image's index only."""
    bank = _grey_bank(2 * canvas)
    b = draw.index.size
    k = draw.integers("bg_photo", bank.shape[0])
    ox, oy = draw.integers("bg_x", canvas + 1), draw.integers("bg_y", canvas + 1)
    ar = np.arange(canvas)
    crop = bank[k[:, None, None], oy[:, None, None] + ar[None, :, None], ox[:, None, None] + ar[None, None, :]]
    assert crop.shape == (b, canvas, canvas)
    return (crop * contrast + 0.5).astype(np.uint8)


def _as_uint8_stack(column: Any) -> np.ndarray:
    """A dataset image column (arrays, lists or PIL images) as uint8 ``[N, h, w]``."""
    try:
        arr = np.asarray(column)
    except (ValueError, TypeError):
        arr = np.empty(0)
    if arr.dtype == object or arr.ndim != 3:
        arr = np.stack([np.asarray(x) for x in column])
    if arr.ndim == 4 and arr.shape[-1] == 1:
        arr = arr[..., 0]
    return arr.astype(np.uint8)


def cluttered(dataset_dict: Any, canvas: int = 64, seed: int = 0, **kwargs: Any) -> Any:
    """Cluttered version of a DatasetDict with ``image`` and ``label`` columns (e.g. from
    ``tokenprune.data.datasets.load_fashion_mnist()``), split by split; each split draws its clutter
    from its own items only. ``kwargs`` go to :func:`clutter_items`. Columns: ``image``,
    ``object_mask``, ``clutter_mask`` (Array2D uint8 ``[C, C]``), ``label`` (the input's label
    feature), ``bbox`` (4 int32), ``offset`` (2 int32), ``index`` (int64, row in the split)."""
    import datasets

    out = {}
    for split, ds in dataset_dict.items():
        fmt = ds.with_format("numpy", dtype=None)
        imgs = _as_uint8_stack(fmt["image"])
        labels = np.asarray(fmt["label"])
        split_seed = (int(seed) * 1000003 + zlib.crc32(str(split).encode())) & 0xFFFFFFFFFFFFFFFF
        arr = clutter_items(imgs, labels, canvas=canvas, seed=split_seed, **kwargs)
        label_feat = ds.features["label"] if "label" in ds.features else datasets.Value("int64")
        feats = datasets.Features(
            {
                "image": datasets.Array2D((canvas, canvas), "uint8"),
                "label": label_feat,
                "object_mask": datasets.Array2D((canvas, canvas), "uint8"),
                "clutter_mask": datasets.Array2D((canvas, canvas), "uint8"),
                "bbox": datasets.List(datasets.Value("int32"), length=4),
                "offset": datasets.List(datasets.Value("int32"), length=2),
                "index": datasets.Value("int64"),
            }
        )
        out[split] = _to_dataset(arr, feats, f"cluttered {split}, canvas={canvas}, seed={seed}, {kwargs}")
    return datasets.DatasetDict(out)


# ----------------------------------------------------------------------------------------------
# speed and a visual check
# ----------------------------------------------------------------------------------------------


def benchmark_generation(
    n: int = 4096, img_size: int = 64, batch_size: int = 256, repeats: int = 3, seed: int = 0
) -> dict[str, float]:
    """Print and return generation speed (images/s, best of ``repeats``) of both generators at
    ``img_size`` (SynthBirds) and a 64-px canvas (cluttered, on random stand-in 28x28 items)."""
    make_part_dataset(batch_size, seed, img_size, batch_size=batch_size)  # warm caches
    best = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        make_part_dataset(n, seed, img_size, batch_size=batch_size)
        best = min(best, time.perf_counter() - t0)
    birds = n / best
    rng = np.random.default_rng(0)
    items = (rng.random((2048, 28, 28)) ** 3 * 255).astype(np.uint8)
    items[:, :4] = 0
    items[:, -4:] = 0
    labels = rng.integers(0, 10, 2048)
    best_c = np.inf
    for _ in range(repeats):
        t0 = time.perf_counter()
        for i in range(0, n, 2048):
            clutter_items(items, labels, canvas=64, seed=seed, indices=np.arange(i, min(i + 2048, n)) % 2048)
        best_c = min(best_c, time.perf_counter() - t0)
    clut = n / best_c
    print(f"SynthBirds {img_size}px: {birds:,.0f} images/s; cluttered 64px: {clut:,.0f} images/s", end="")
    print(f" (n={n}, batch={batch_size})")
    return {"synthbirds_images_per_s": birds, "cluttered_images_per_s": clut}


def save_sample_grid(path: str, n: int = 16, seed: int = 0, img_size: int = 64, upscale: int = 3, **config: Any) -> str:
    """Save a PNG grid of ``n`` SynthBirds samples: per sample the image, then the part mask
    (colour per part, distractors grey) with keypoints as white dots. Returns ``path``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    d = make_part_dataset(n, seed, img_size, **config)
    cols = 4
    rows_ = int(np.ceil(n / cols))
    fig, axes = plt.subplots(rows_, 2 * cols, figsize=(2 * cols * 1.6, rows_ * 1.75))
    cmap = plt.get_cmap("tab10")
    colours = np.array([[0, 0, 0]] + [list(cmap(i)[:3]) for i in (0, 1, 2, 3, 4, 5, 6, 8)]) * 255  # no grey
    for i, ax in enumerate(axes.ravel()):
        ax.axis("off")
        k, second = divmod(i, 2)
        if k >= n:
            continue
        if not second:
            ax.imshow(d["image"][k], interpolation="nearest")
            ax.set_title(CLASS_NAMES[d["label"][k]], fontsize=6)
        else:
            over = colours[d["part_mask"][k]].astype(np.uint8)
            over[(d["distractor_mask"][k] > 0)] = 110
            ax.imshow(over, interpolation="nearest")
            kp = d["keypoints"][k]
            v = kp[:, 2] > 0
            ax.scatter(kp[v, 0], kp[v, 1], s=3, c="white")
            x0, y0, x1, y1 = d["bbox"][k]
            ax.add_patch(plt.Rectangle((x0 - 0.5, y0 - 0.5), x1 - x0, y1 - y0, fill=False, ec="yellow", lw=0.6))
    fig.tight_layout()
    fig.savefig(path, dpi=60 * upscale)
    plt.close(fig)
    return path
