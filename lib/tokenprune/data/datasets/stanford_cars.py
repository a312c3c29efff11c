"""Stanford Cars (Krause et al. 2013) read from its devkit release: MATLAB annotation files and picture folders."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

import datasets

from tokenprune.data.datasets.columns import as_dataset_dict, class_label, fixed_list, records_dataset
from tokenprune.data.datasets.errors import DatasetFormatError, DatasetNotFoundError, check_images_exist, require_path
from tokenprune.data.datasets.release_text import read_rows, to_number
from tokenprune.data.datasets.splits import check_fraction, split_train_val
from tokenprune.utils.environment import data_dir

__all__ = ["load_stanford_cars"]


_CARS = "Stanford Cars"
_CARS_HINT = (
    "Extract car_devkit.tgz, cars_train.tgz and cars_test.tgz into <root> (default "
    "<repo>/data/stanford_cars) so that <root>/devkit/cars_meta.mat, <root>/devkit/cars_train_annos.mat, "
    "<root>/cars_train/ and <root>/cars_test/ exist, and put cars_test_annos_withlabels.mat in "
    "<root>/devkit/ (or <root>/)."
)
_CARS_BOX_FIELDS = ("bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2")


def _find_in(base: Path, name: str) -> Path | None:
    for folder in (base / "devkit", base):
        if (folder / name).is_file():
            return folder / name
    return None


def _cars_mat(base: Path, name: str) -> Path:
    found = _find_in(base, name)
    if found is None:
        raise DatasetNotFoundError(
            f"{_CARS}: expected file '{name}' at {base / 'devkit' / name} (or {base / name}), "
            f"but it does not exist. {_CARS_HINT}"
        )
    return found


def _loadmat(path: Path, dataset: str) -> dict[str, Any]:
    from scipy.io import loadmat

    try:
        return loadmat(str(path), squeeze_me=True)
    except Exception as err:  # scipy raises several types for non-.mat content
        raise DatasetFormatError(f"{dataset}: {path} is not a readable MATLAB .mat file ({err})") from err


def _cars_annotations(path: Path, need_class: bool) -> dict[str, np.ndarray]:
    """The ``annotations`` struct array of a devkit .mat file as numpy columns."""
    mat = _loadmat(path, _CARS)
    if "annotations" not in mat:
        found = sorted(k for k in mat if not k.startswith("__"))
        raise DatasetFormatError(f"{_CARS}: {path} has no 'annotations' struct (found {found})")
    ann = np.atleast_1d(mat["annotations"])
    names = ann.dtype.names or ()
    needed = _CARS_BOX_FIELDS + ("fname",) + (("class",) if need_class else ())
    absent = [f for f in needed if f not in names]
    if absent:
        raise DatasetFormatError(f"{_CARS}: {path}: 'annotations' lacks field(s) {absent}; has {list(names)}")
    out = {f: np.array([float(v) for v in ann[f]], dtype=np.float32) for f in _CARS_BOX_FIELDS}
    out["fname"] = np.array([str(v) for v in ann["fname"]], dtype=object)
    if "class" in names:
        out["class"] = np.array([int(v) for v in ann["class"]], dtype=np.int64)
    return out


def _cars_class_names(base: Path) -> list[str]:
    path = _cars_mat(base, "cars_meta.mat")
    mat = _loadmat(path, _CARS)
    if "class_names" not in mat:
        raise DatasetFormatError(f"{_CARS}: {path} has no 'class_names' cell array")
    return [str(v) for v in np.atleast_1d(mat["class_names"])]


def _cars_test_classes(base: Path, test: dict[str, np.ndarray], test_labels: str | os.PathLike | None) -> np.ndarray:
    """1-based test classes: from ``test_labels`` (one id per line) or the annotations."""
    if test_labels is not None:
        path = Path(test_labels).expanduser()
        rows = read_rows(path, _CARS, 1, "<class_id> (one per line, in cars_test_annos.mat order)")
        classes = np.array([to_number(r[0], int, path, _CARS, "<class_id>") for r in rows], dtype=np.int64)
        if len(classes) != len(test["fname"]):
            raise DatasetFormatError(f"{_CARS}: {path} has {len(classes)} labels for {len(test['fname'])} test images")
        return classes
    if "class" not in test:
        raise DatasetFormatError(
            f"{_CARS}: the test annotations have no 'class' field; put cars_test_annos_withlabels.mat "
            f"at {base / 'devkit' / 'cars_test_annos_withlabels.mat'} "
            "or pass test_labels=<file with one class id per line>"
        )
    return test["class"]


def load_stanford_cars(
    root: str | os.PathLike | None = None,
    val_fraction: float = 0.1,
    seed: int = 0,
    test_labels: str | os.PathLike | None = None,
) -> datasets.DatasetDict:
    """Stanford Cars (Krause et al. 2013) from the devkit release: 196 classes, 8,144 / 8,041.

    Reads ``cars_meta.mat`` (``class_names``), ``cars_train_annos.mat`` and
    ``cars_test_annos_withlabels.mat`` (or ``cars_test_annos.mat`` plus ``test_labels``, a
    text file with one 1-based class id per line in annotation order), each searched in
    ``<root>/devkit/`` then ``<root>/``; pictures in ``cars_train/`` and ``cars_test/``.

    Columns: ``image`` (Image, RGB, lazy), ``path``, ``label`` (ClassLabel; ``class`` - 1),
    ``bbox`` (float32 [x_min, y_min, x_max, y_max], 0-based: the devkit's 1-based inclusive
    (x1, y1, x2, y2) become (x1 - 1, y1 - 1, x2, y2)). ``val`` is ``val_fraction`` of the
    training set (stratified, ``seed``).
    """
    val_fraction = check_fraction("val_fraction", val_fraction)
    base = Path(root).expanduser() if root is not None else data_dir() / "stanford_cars"
    class_names = _cars_class_names(base)
    train = _cars_annotations(_cars_mat(base, "cars_train_annos.mat"), need_class=True)
    if test_labels is None:
        if _find_in(base, "cars_test_annos_withlabels.mat") is None:
            raise DatasetNotFoundError(
                f"{_CARS}: expected file 'cars_test_annos_withlabels.mat' at "
                f"{base / 'devkit' / 'cars_test_annos_withlabels.mat'} (or {base / 'cars_test_annos_withlabels.mat'}), "
                "but it does not exist; it holds the test labels. Alternatively pass test_labels=<text file "
                f"with one class id per line> to use devkit/cars_test_annos.mat. {_CARS_HINT}"
            )
        test = _cars_annotations(_cars_mat(base, "cars_test_annos_withlabels.mat"), need_class=True)
    else:
        test = _cars_annotations(_cars_mat(base, "cars_test_annos.mat"), need_class=False)
    test["class"] = _cars_test_classes(base, test, test_labels)

    features = datasets.Features({
        "image": datasets.Image(mode="RGB"),
        "path": datasets.Value("string"),
        "label": class_label(class_names),
        "bbox": fixed_list("float32", 4),
    })

    def columns(ann: dict[str, np.ndarray], folder: str) -> dict[str, Any]:
        img_dir = require_path(base / folder, _CARS, _CARS_HINT, folder=True)
        paths = [str(img_dir / name) for name in ann["fname"]]
        label = ann["class"] - 1
        if len(label) and (label.min() < 0 or label.max() >= len(class_names)):
            raise DatasetFormatError(f"{_CARS}: class ids must lie in 1..{len(class_names)} (cars_meta.mat)")
        box = np.stack([ann["bbox_x1"] - 1, ann["bbox_y1"] - 1, ann["bbox_x2"], ann["bbox_y2"]], axis=1)
        check_images_exist(paths, _CARS, _CARS_HINT)
        return {"image": paths, "path": paths, "label": label, "bbox": box.astype(np.float32)}

    train_cols = columns(train, "cars_train")
    train_cols, val_cols = split_train_val(train_cols, train_cols["label"], val_fraction, seed)
    desc = f"{_CARS} from {base}; val: {val_fraction:g} of the release's train (stratified, seed={seed})"
    return as_dataset_dict({
        "train": records_dataset(train_cols, features, desc),
        "val": records_dataset(val_cols, features, desc),
        "test": records_dataset(columns(test, "cars_test"), features, desc),
    })
