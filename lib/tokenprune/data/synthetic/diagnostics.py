"""The generators' speed, and a picture of SynthBirds samples with their masks, keypoints and boxes."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from tokenprune.data.synthetic.bird_dataset import make_part_dataset
from tokenprune.data.synthetic.bird_design import CLASS_NAMES
from tokenprune.data.synthetic.cluttered import clutter_items

__all__ = ["benchmark_generation", "save_sample_grid"]


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
