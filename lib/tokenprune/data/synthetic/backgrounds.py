"""Backgrounds from photos bundled inside scikit-image (no download): RGB squares for SynthBirds, greyscale crops for
the cluttered sets."""

from __future__ import annotations

import functools

import numpy as np

from tokenprune.data.synthetic.counter_random import Draw

__all__ = ["BACKGROUND_PHOTOS", "luma", "background_bank", "photo_backgrounds"]

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


def luma(rgb: np.ndarray) -> np.ndarray:
    """The luma of RGB values ``[..., 3]`` (ITU-R BT.601 weights), shape ``[...]``."""
    return rgb @ np.array([0.299, 0.587, 0.114])


def _load_photo(name: str) -> np.ndarray:
    """One bundled scikit-image photo as RGB uint8 (grey ones are replicated to 3 channels)."""
    from skimage import data

    img = data.stereo_motorcycle()[0] if name == "motorcycle" else getattr(data, name)()
    img = np.asarray(img)
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=-1)
    return img[..., :3].astype(np.uint8)


@functools.lru_cache(maxsize=4)
def background_bank(side: int) -> np.ndarray:
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


@functools.lru_cache(maxsize=4)
def _grey_bank(side: int) -> np.ndarray:
    """:func:`background_bank` at ``side`` as greyscale float ``[K, side, side]`` in [0, 255], read-only."""
    bank = luma(background_bank(side).astype(np.float64))
    bank.setflags(write=False)
    return bank


def photo_backgrounds(draw: Draw, canvas: int, contrast: float) -> np.ndarray:
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
