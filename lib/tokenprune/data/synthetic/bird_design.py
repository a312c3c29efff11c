"""What a SynthBirds image is made of: its eight named parts, the beak variants and the 12 classes they make with
the crest and the tail bands, the generation settings, the object-frame geometry of every part, and the loose
distractor parts. The class table is in the package docstring (:mod:`tokenprune.data.synthetic`)."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

__all__ = [
    "PART_NAMES", "N_PARTS", "PART_ID", "DISCRIMINATIVE_PARTS", "BeakVariant", "BEAK_VARIANTS", "BirdClass",
    "BIRD_CLASSES", "CLASS_NAMES", "LAYER_BAND", "LAYER_DISTRACTOR", "BirdConfig", "bird_parts", "hull_points",
    "DISTRACTOR_PART", "distractor_shapes", "class_table"
]

#: Part ids used in ``part_mask`` and ``distractor_mask`` (index = id; 0 is background).
PART_NAMES: tuple[str, ...] = ("background", "body", "head", "beak", "eye", "wing", "tail", "legs", "crest")
N_PARTS = len(PART_NAMES) - 1
PART_ID = {name: i for i, name in enumerate(PART_NAMES)}
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
CLASS_BEAK = np.array([c.beak for c in BIRD_CLASSES])
CLASS_CREST = np.array([c.crest for c in BIRD_CLASSES])
CLASS_BANDED = np.array([c.banded_tail for c in BIRD_CLASSES])


# layer ids of the label map (painter's canvas); object layers equal part ids, then the tail
# band, then two layers (main, band) per distractor slot
LAYER_BAND = 9
LAYER_DISTRACTOR = 10
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


def bird_parts(shape: Mapping[str, np.ndarray], beak: np.ndarray) -> dict[str, np.ndarray]:
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


def hull_points(shape: Mapping[str, np.ndarray]) -> np.ndarray:
    """Object-frame points ``[B, K, 2]`` whose box contains the bird of *every* class."""
    b = shape["head_r"].shape[0]
    pts = []
    for v in range(len(BEAK_VARIANTS)):
        g = bird_parts(shape, np.full(b, v))
        pts.append(g["beak"])
    for name in ("body", "head", "wing"):
        pts.append(_ellipse_outline(g[f"{name}_c"], g[f"{name}_ax"], g[f"{name}_phi"]))
    pts += [g["crest"], g["tail"], g["legs"].reshape(b, 4 * g["legs"].shape[1], 2)]
    return np.concatenate(pts, axis=1)


# distractor types: the three beaks, a crest, a plain tail, a banded tail (nominal shapes,
# centred on their vertex mean)
_DISTRACTOR_TYPES = ("beak:cone", "beak:dagger", "beak:hook", "crest", "tail:plain", "tail:banded")
DISTRACTOR_PART = np.array([PART_ID["beak"]] * 3 + [PART_ID["crest"], PART_ID["tail"], PART_ID["tail"]], dtype=np.uint8)


@functools.lru_cache(maxsize=1)
def distractor_shapes() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vertex table ``[T, 4, 2]``, band table ``[T, 2, 4, 2]`` and radius ``[T]`` per type."""
    nom = _nominal(3)
    g = bird_parts(nom, np.arange(3))
    polys = [g["beak"][0], g["beak"][1], g["beak"][2], g["crest"][0], g["tail"][0], g["tail"][0]]
    centres = [p.mean(axis=0) for p in polys]
    verts = np.stack([p - c for p, c in zip(polys, centres)])
    bands = np.zeros((len(polys), 2, 4, 2))
    bands[5] = g["bands"][0] - centres[5]
    radius = np.linalg.norm(verts, axis=-1).max(axis=-1)
    return verts, bands, radius


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
