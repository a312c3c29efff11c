"""Figures shared by the notebooks: which patches each reduction location kept (EViT Figure 3 style)."""
from __future__ import annotations

from typing import Optional, Sequence

import numpy as np

from tokenprune.measure.evaluation import DROPPED, KEPT, MERGED

__all__ = ["overlay_status", "status_grid"]

#: RGB tint per status: kept patches untouched, merged ones tinted, dropped ones greyed out
TINT = {MERGED: np.array([255, 160, 0]), DROPPED: np.array([40, 40, 40])}


def _to_rgb(img: np.ndarray) -> np.ndarray:
    img = np.asarray(img)
    if img.ndim == 2:
        img = np.repeat(img[..., None], 3, axis=-1)
    if img.dtype != np.uint8:
        lo, hi = float(img.min()), float(img.max())
        img = ((img - lo) / max(hi - lo, 1e-12) * 255).astype(np.uint8)
    return img


def overlay_status(img: np.ndarray, status: np.ndarray, alpha: float = 0.7) -> np.ndarray:
    """An ``H x W x 3`` uint8 picture of ``img`` with each patch of the ``gh x gw`` status map painted:
    kept patches as they are, merged ones tinted orange, dropped ones dark (EViT Figure 3 greys them out)."""
    rgb = _to_rgb(img).astype(np.float32)
    h, w = rgb.shape[:2]
    gh, gw = status.shape
    rows = np.minimum((np.arange(h) * gh) // h, gh - 1)
    cols = np.minimum((np.arange(w) * gw) // w, gw - 1)
    per_pixel = np.asarray(status)[rows[:, None], cols[None, :]]
    for code, tint in TINT.items():
        m = per_pixel == code
        rgb[m] = (1 - alpha) * rgb[m] + alpha * tint
    return rgb.clip(0, 255).astype(np.uint8)


def status_grid(images: Sequence[np.ndarray], maps: Sequence[np.ndarray], row_titles: Optional[Sequence[str]] = None,
                col_titles: Optional[Sequence[str]] = None, scale: float = 1.6):
    """A figure: one row per image, the image and then one panel per location (``maps[l][i]``)."""
    import matplotlib.pyplot as plt

    n, L = len(images), len(maps)
    fig, axes = plt.subplots(n, L + 1, figsize=(scale * (L + 1), scale * n), squeeze=False)
    for i, img in enumerate(images):
        axes[i, 0].imshow(_to_rgb(img))
        for l_ in range(L):
            axes[i, l_ + 1].imshow(overlay_status(img, np.asarray(maps[l_][i])))
        if row_titles:
            axes[i, 0].set_ylabel(row_titles[i], fontsize=8)
    for ax in axes.ravel():
        ax.set_xticks([])
        ax.set_yticks([])
    titles = ["input"] + list(col_titles or [f"location {l_ + 1}" for l_ in range(L)])
    for j, t in enumerate(titles):
        axes[0, j].set_title(t, fontsize=8)
    fig.tight_layout()
    return fig
