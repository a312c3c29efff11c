"""SynthBirds sets: any range or subset of image indices as numpy arrays, and the three splits as a ``DatasetDict``
whose splits never share an image."""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Sequence

import numpy as np

from tokenprune.data.synthetic.bird_design import CLASS_NAMES, N_PARTS, BirdConfig
from tokenprune.data.synthetic.bird_render import render_bird_scenes
from tokenprune.data.synthetic.bird_scenes import sample_bird_scenes
from tokenprune.data.synthetic.in_memory import to_dataset

__all__ = ["make_part_dataset", "SPLIT_OFFSETS", "part_dataset"]


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
        out[split] = to_dataset(arr, feats, desc)
    return datasets.DatasetDict(out)
