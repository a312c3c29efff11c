"""FGVC-Aircraft 2013b (Maji et al. 2013) read from its release folder, at any of its three label levels."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np

import datasets

from tokenprune.data.datasets.columns import as_dataset_dict, class_label, fixed_list, records_dataset
from tokenprune.data.datasets.errors import DatasetFormatError, check_images_exist, require_path
from tokenprune.data.datasets.release_text import read_rows, to_number
from tokenprune.data.datasets.splits import SPLITS, check_fraction, split_train_val
from tokenprune.utils.environment import data_dir

__all__ = ["load_fgvc_aircraft"]


_AIR = "FGVC-Aircraft"
_AIR_HINT = (
    "Extract fgvc-aircraft-2013b.tar.gz so that <root>/data/variants.txt and <root>/data/images/ "
    "exist (default root: <repo>/data/fgvc-aircraft-2013b)."
)
_AIR_LEVELS = {"variant": "variants", "family": "families", "manufacturer": "manufacturers"}


def _aircraft_data_dir(root: str | os.PathLike | None) -> Path:
    """``<root>/data`` of the release (``root`` may also be that ``data`` folder itself)."""
    base = Path(root).expanduser() if root is not None else data_dir() / "fgvc-aircraft-2013b"
    if not (base / "data" / "variants.txt").is_file() and (base / "variants.txt").is_file():
        return base
    return base / "data"


def _aircraft_names(folder: Path, level: str) -> list[str]:
    path = folder / f"{_AIR_LEVELS[level]}.txt"
    require_path(path, _AIR, _AIR_HINT)
    names = [line.strip() for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    if not names or len(set(names)) != len(names):
        raise DatasetFormatError(f"{_AIR}: {path}: expected one distinct {level} name per line")
    return names


def _aircraft_split(folder: Path, level: str, split: str, names: Sequence[str]) -> dict[str, int]:
    """``{image_name: class index}`` from ``images_<level>_<split>.txt``."""
    path = folder / f"images_{level}_{split}.txt"
    pattern = f"<image_name> <{level} name>"
    position = {name: i for i, name in enumerate(names)}
    out: dict[str, int] = {}
    for image, name in read_rows(path, _AIR, 2, pattern, _AIR_HINT):
        if name not in position:
            raise DatasetFormatError(
                f"{_AIR}: {path}: {level} {name!r} of image {image} is not in {_AIR_LEVELS[level]}.txt"
            )
        out[image] = position[name]
    return out


def _aircraft_boxes(folder: Path) -> dict[str, tuple[float, float, float, float]]:
    path = folder / "images_box.txt"
    pattern = "<image_name> <xmin> <ymin> <xmax> <ymax>"
    rows = read_rows(path, _AIR, 5, pattern, _AIR_HINT)
    return {r[0]: tuple(to_number(v, float, path, _AIR, pattern) for v in r[1:]) for r in rows}  # type: ignore[misc]


def load_fgvc_aircraft(
    root: str | os.PathLike | None = None,
    level: str = "variant",
    val_fraction: float | None = None,
    seed: int = 0,
) -> datasets.DatasetDict:
    """FGVC-Aircraft 2013b (Maji et al. 2013): 10,000 images; 100 variants, 70 families, 30 makers.

    Reads ``data/{variants,families,manufacturers}.txt``,
    ``data/images_{variant,family,manufacturer}_{train,val,test,trainval}.txt`` and
    ``data/images_box.txt``; pictures in ``data/images/<name>.jpg``.

    Columns: ``image`` (Image, RGB, lazy; note the release's 20-pixel copyright banner at the
    bottom is left in place), ``path``, ``label`` (ClassLabel at ``level``), ``variant``,
    ``family``, ``manufacturer`` (ClassLabels), ``bbox`` (float32 [x_min, y_min, x_max, y_max],
    0-based: the release's 1-based inclusive box becomes (xmin - 1, ymin - 1, xmax, ymax)).
    Splits: the official train / val / test when ``val_fraction`` is None; otherwise ``val``
    is ``val_fraction`` of the official ``trainval`` (stratified at ``level``, ``seed``).
    """
    if level not in _AIR_LEVELS:
        raise ValueError(f"load_fgvc_aircraft: level must be one of {list(_AIR_LEVELS)}, got {level!r}")
    folder = _aircraft_data_dir(root)
    require_path(folder / "variants.txt", _AIR, _AIR_HINT)
    names = {lvl: _aircraft_names(folder, lvl) for lvl in _AIR_LEVELS}
    boxes = _aircraft_boxes(folder)
    img_dir = require_path(folder / "images", _AIR, _AIR_HINT, folder=True)
    features = datasets.Features({
        "image": datasets.Image(mode="RGB"),
        "path": datasets.Value("string"),
        "label": class_label(names[level]),
        **{lvl: class_label(names[lvl]) for lvl in _AIR_LEVELS},
        "bbox": fixed_list("float32", 4),
    })

    def columns(split: str) -> dict[str, Any]:
        per_level = {lvl: _aircraft_split(folder, lvl, split, names[lvl]) for lvl in _AIR_LEVELS}
        images = list(per_level["variant"])
        for lvl, mapping in per_level.items():
            if set(mapping) != set(images):
                raise DatasetFormatError(
                    f"{_AIR}: {folder / f'images_{lvl}_{split}.txt'} and images_variant_{split}.txt "
                    "list different images"
                )
        missing = [i for i in images if i not in boxes]
        if missing:
            raise DatasetFormatError(f"{_AIR}: {folder / 'images_box.txt'} has no box for image {missing[0]}")
        paths = [str(img_dir / f"{image}.jpg") for image in images]
        check_images_exist(paths, _AIR, _AIR_HINT)
        box = np.array([boxes[i] for i in images], dtype=np.float32).reshape(-1, 4) - np.array([1, 1, 0, 0], np.float32)
        cols: dict[str, Any] = {"image": paths, "path": paths}
        for lvl in _AIR_LEVELS:
            cols[lvl] = np.array([per_level[lvl][i] for i in images], dtype=np.int64)
        cols["label"] = cols[level]
        cols["bbox"] = box
        return cols

    if val_fraction is None:
        parts = {split: columns(split) for split in SPLITS}
        desc = f"{_AIR} from {folder}; label level: {level}; official train/val/test"
    else:
        val_fraction = check_fraction("val_fraction", val_fraction)
        trainval = columns("trainval")
        train_cols, val_cols = split_train_val(trainval, trainval["label"], val_fraction, seed)
        parts = {"train": train_cols, "val": val_cols, "test": columns("test")}
        desc = f"{_AIR} from {folder}; label level: {level}; val: {val_fraction:g} of trainval (seed={seed})"
    return as_dataset_dict({split: records_dataset(cols, features, desc) for split, cols in parts.items()})
