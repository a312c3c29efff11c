"""CUB-200-2011 (Wah et al. 2011) read from its release folder ``CUB_200_2011/``: labels, boxes and part locations."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np

import datasets

from tokenprune.data.datasets.columns import as_dataset_dict, class_label, fixed_list, records_dataset
from tokenprune.data.datasets.errors import DatasetFormatError, check_images_exist, require_path
from tokenprune.data.datasets.release_text import id_map, lookup, read_rows, to_number
from tokenprune.data.datasets.splits import check_fraction, split_train_val, take_rows
from tokenprune.utils.environment import data_dir

__all__ = ["cub_part_names", "load_cub200"]


_CUB = "CUB-200-2011"
_CUB_HINT = (
    "Extract CUB_200_2011.tgz so that <root>/images.txt, <root>/parts/part_locs.txt and "
    "<root>/images/ exist (default root: <repo>/data/CUB_200_2011)."
)


def _cub_root(root: str | os.PathLike | None) -> Path:
    """The CUB_200_2011 folder: ``root`` itself, or ``root/CUB_200_2011`` when that holds the files."""
    base = Path(root).expanduser() if root is not None else data_dir() / "CUB_200_2011"
    nested = base / "CUB_200_2011"
    if not (base / "images.txt").is_file() and (nested / "images.txt").is_file():
        return nested
    return base


def cub_part_names(root: str | os.PathLike | None = None) -> list[str]:
    """The part names from ``parts/parts.txt``, in part-id order (row order of ``parts``)."""
    path = _cub_root(root) / "parts" / "parts.txt"
    pattern = "<part_id> <part_name>"
    rows = id_map(read_rows(path, _CUB, 2, pattern, _CUB_HINT), path, _CUB, pattern, (str,))
    ids = sorted(rows)
    if ids != list(range(1, len(ids) + 1)):
        raise DatasetFormatError(f"{_CUB}: {path}: part ids must be 1..{len(ids)}, got {ids}")
    return [rows[i][0] for i in ids]


def load_cub200(
    root: str | os.PathLike | None = None, val_fraction: float = 0.1, seed: int = 0
) -> datasets.DatasetDict:
    """CUB-200-2011 (Wah et al. 2011) from its release folder ``CUB_200_2011/``.

    Reads ``images.txt``, ``image_class_labels.txt``, ``train_test_split.txt``,
    ``bounding_boxes.txt``, ``classes.txt``, ``parts/parts.txt`` and ``parts/part_locs.txt``;
    pictures stay on disk under ``images/`` and are decoded when a row is read.

    Columns: ``image`` (Image, RGB, lazy), ``path`` (str), ``label`` (ClassLabel, the names
    of classes.txt, ids shifted to 0-based), ``image_id`` (int32, the release id),
    ``bbox`` (float32 [x_min, y_min, x_max, y_max] = (x, y, x + w, y + h)),
    ``bbox_xywh`` (float32 [x, y, w, h] as in bounding_boxes.txt),
    ``parts`` (Array2D (P, 3) float32: x, y, visible per part in ``cub_part_names`` order;
    P = 15; invisible parts are (0, 0, 0) as in the release; pixel coordinates as released).
    ``test`` is the release's test set (is_training_image = 0); ``val`` is ``val_fraction``
    of its training set, stratified by class, drawn with ``seed``.
    """
    val_fraction = check_fraction("val_fraction", val_fraction)
    base = _cub_root(root)
    require_path(base / "images.txt", _CUB, _CUB_HINT)

    def table(rel: str, fields: int, pattern: str, kinds: Sequence[type]) -> tuple[Path, dict[int, tuple]]:
        path = base / rel
        return path, id_map(read_rows(path, _CUB, fields, pattern, _CUB_HINT), path, _CUB, pattern, kinds)

    p_images, images = table("images.txt", 2, "<image_id> <image_name>", (str,))
    p_labels, labels = table("image_class_labels.txt", 2, "<image_id> <class_id>", (int,))
    p_split, split = table("train_test_split.txt", 2, "<image_id> <is_training_image>", (int,))
    p_boxes, boxes = table("bounding_boxes.txt", 5, "<image_id> <x> <y> <width> <height>", (float,) * 4)
    p_classes, classes = table("classes.txt", 2, "<class_id> <class_name>", (str,))
    part_names = cub_part_names(base)

    class_ids = sorted(classes)
    if class_ids != list(range(1, len(class_ids) + 1)):
        raise DatasetFormatError(f"{_CUB}: {p_classes}: class ids must be 1..{len(class_ids)}")
    class_names = [classes[i][0] for i in class_ids]

    ids = sorted(images)
    index = {image_id: row for row, image_id in enumerate(ids)}
    p_locs = base / "parts" / "part_locs.txt"
    loc_pattern = "<image_id> <part_id> <x> <y> <visible>"
    parts = np.zeros((len(ids), len(part_names), 3), dtype=np.float32)
    seen = np.zeros((len(ids), len(part_names)), dtype=bool)
    for row in read_rows(p_locs, _CUB, 5, loc_pattern, _CUB_HINT):
        image_id, part_id = (to_number(v, int, p_locs, _CUB, loc_pattern) for v in row[:2])
        values = [to_number(v, float, p_locs, _CUB, loc_pattern) for v in row[2:]]
        if image_id not in index or not 1 <= part_id <= len(part_names):
            raise DatasetFormatError(f"{_CUB}: {p_locs}: unknown image id {image_id} or part id {part_id}")
        parts[index[image_id], part_id - 1] = values
        seen[index[image_id], part_id - 1] = True
    if not seen.all():
        row, part = np.argwhere(~seen)[0]
        raise DatasetFormatError(f"{_CUB}: {p_locs} has no line for image id {ids[row]}, part id {part + 1}")

    img_dir = require_path(base / "images", _CUB, _CUB_HINT, folder=True)
    paths = [str(img_dir / images[i][0]) for i in ids]
    label = np.array([lookup(labels, i, p_labels, _CUB)[0] - 1 for i in ids], dtype=np.int64)
    if label.min() < 0 or label.max() >= len(class_names):
        raise DatasetFormatError(f"{_CUB}: {p_labels}: class ids must lie in 1..{len(class_names)}")
    is_train = np.array([lookup(split, i, p_split, _CUB)[0] for i in ids], dtype=np.int64)
    if not np.isin(is_train, (0, 1)).all():
        raise DatasetFormatError(f"{_CUB}: {p_split}: is_training_image must be 0 or 1")
    xywh = np.array([lookup(boxes, i, p_boxes, _CUB) for i in ids], dtype=np.float32).reshape(-1, 4)
    xyxy = np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], axis=1)
    check_images_exist(paths, _CUB, _CUB_HINT)

    columns = {
        "image": paths, "path": paths, "label": label, "image_id": np.array(ids, dtype=np.int32),
        "bbox": xyxy, "bbox_xywh": xywh, "parts": parts,
    }
    features = datasets.Features({
        "image": datasets.Image(mode="RGB"),
        "path": datasets.Value("string"),
        "label": class_label(class_names),
        "image_id": datasets.Value("int32"),
        "bbox": fixed_list("float32", 4),
        "bbox_xywh": fixed_list("float32", 4),
        "parts": datasets.Array2D(shape=(len(part_names), 3), dtype="float32"),
    })
    train_idx, test_idx = np.flatnonzero(is_train == 1), np.flatnonzero(is_train == 0)
    train_cols, val_cols = split_train_val(take_rows(columns, train_idx), label[train_idx], val_fraction, seed)
    desc = (
        f"{_CUB} from {base}; parts (x, y, visible) in order {part_names}; "
        f"val: {val_fraction:g} of the release's train (stratified, seed={seed})"
    )
    return as_dataset_dict({
        "train": records_dataset(train_cols, features, desc),
        "val": records_dataset(val_cols, features, desc),
        "test": records_dataset(take_rows(columns, test_idx), features, desc),
    })
