"""ImageNet-style class folders (``root/train/<class>/*``, ``root/val/<class>/*``), and ImageNet-100 linked from
an ImageNet-1k folder with CMC's class list."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping

import numpy as np

import datasets

from tokenprune.data.datasets.columns import as_dataset_dict, class_label, records_dataset
from tokenprune.data.datasets.errors import DatasetFormatError, DatasetNotFoundError, require_path
from tokenprune.data.datasets.splits import check_fraction, split_train_val
from tokenprune.utils.environment import data_dir

__all__ = ["load_image_folder", "IMAGENET100_CLASSES_FILE", "imagenet100_classes", "make_imagenet100"]


_IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".pgm", ".tif", ".tiff", ".webp")


_FOLDER_HINT = (
    "Lay the images out as <root>/train/<class>/*.JPEG and <root>/val/<class>/*.JPEG "
    "(ImageNet's flat val/ folder must first be sorted into class folders)."
)


def _scan_class_folders(folder: Path, dataset: str) -> dict[str, list[str]]:
    """``{class folder name: sorted picture paths}`` for every sub-folder of ``folder``."""
    require_path(folder, dataset, _FOLDER_HINT, folder=True)
    out: dict[str, list[str]] = {}
    for entry in sorted(os.scandir(folder), key=lambda e: e.name):
        if not entry.is_dir():
            continue
        files = sorted(
            f.path for f in os.scandir(entry.path)
            if f.is_file() and f.name.lower().endswith(_IMAGE_EXTENSIONS)
        )
        out[entry.name] = files
    if not out:
        raise DatasetFormatError(f"{dataset}: {folder} has no class sub-folders. {_FOLDER_HINT}")
    empty = [name for name, files in out.items() if not files]
    if len(empty) == len(out):
        raise DatasetFormatError(f"{dataset}: the class folders in {folder} hold no pictures. {_FOLDER_HINT}")
    return out


def load_image_folder(
    root: str | os.PathLike | None = None,
    val_fraction: float = 0.1,
    seed: int = 0,
    title: str = "ImageNet",
) -> datasets.DatasetDict:
    """ImageNet-style class folders: ``root/train/<class>/*`` and ``root/val/<class>/*``.

    Classes are the sorted folder names of ``train/`` (for ImageNet, the WordNet ids).
    ``test`` is the release's ``val/`` folder (the set every paper reports on); ``val`` is
    ``val_fraction`` of ``train/`` (stratified, ``seed``). Columns: ``image`` (Image, RGB,
    lazy), ``path``, ``label``. Default root: ``<repo>/data/imagenet``; ``title`` names the
    dataset in messages.
    """
    val_fraction = check_fraction("val_fraction", val_fraction)
    base = Path(root).expanduser() if root is not None else data_dir() / "imagenet"
    require_path(base, title, _FOLDER_HINT, folder=True)
    train = _scan_class_folders(base / "train", title)
    test = _scan_class_folders(base / "val", title)
    class_names = list(train)
    unknown = sorted(set(test) - set(train))
    if unknown:
        raise DatasetFormatError(f"{title}: {base / 'val'} has class folders absent from train/: {unknown[:5]}")
    position = {c: i for i, c in enumerate(class_names)}

    def columns(per_class: Mapping[str, list[str]]) -> dict[str, Any]:
        paths = [p for c in per_class for p in per_class[c]]
        label = np.array([position[c] for c in per_class for _ in per_class[c]], dtype=np.int64)
        return {"image": paths, "path": paths, "label": label}

    features = datasets.Features({
        "image": datasets.Image(mode="RGB"),
        "path": datasets.Value("string"),
        "label": class_label(class_names),
    })
    train_all = columns(train)
    train_cols, val_cols = split_train_val(train_all, train_all["label"], val_fraction, seed)
    desc = f"{title} folders at {base}; test = val/ folder; val: {val_fraction:g} of train/ (seed={seed})"
    return as_dataset_dict({
        "train": records_dataset(train_cols, features, desc),
        "val": records_dataset(val_cols, features, desc),
        "test": records_dataset(columns(test), features, desc),
    })


#: the class list of ImageNet-100 (Tian et al., Contrastive Multiview Coding; arXiv 2507.19175's reference [14])
IMAGENET100_CLASSES_FILE = Path(__file__).with_name("imagenet100_cmc.txt")


def imagenet100_classes() -> list[str]:
    """The 100 WordNet ids of ImageNet-100 as CMC lists them (:data:`IMAGENET100_CLASSES_FILE`)."""
    lines = IMAGENET100_CLASSES_FILE.read_text(encoding="utf-8").splitlines()
    ids = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
    if len(ids) != 100 or len(set(ids)) != 100:
        raise DatasetFormatError(
            f"{IMAGENET100_CLASSES_FILE}: expected 100 distinct WordNet ids, found {len(set(ids))}"
        )
    return ids


def make_imagenet100(imagenet_root: str | os.PathLike, out_dir: str | os.PathLike) -> Path:
    """ImageNet-100 as class folders linked from an ImageNet-1k folder (``imagenet_root/train/<wnid>``,
    ``imagenet_root/val/<wnid>``): ``out_dir/{train,val}/<wnid>`` are symbolic links to the 100 classes of
    :func:`imagenet100_classes`, so nothing is copied; :func:`load_dataset` ``("imagenet100", root=out_dir)`` reads
    them. A class missing from either split is refused, naming it, before anything is linked; existing links to the
    same folders are kept, a different file in the way is refused."""
    src = Path(imagenet_root).expanduser()
    out = Path(out_dir).expanduser()
    ids = imagenet100_classes()
    for split in ("train", "val"):
        missing = [c for c in ids if not (src / split / c).is_dir()]
        if missing:
            raise DatasetNotFoundError(f"ImageNet-100: {len(missing)} of its classes are not folders under "
                                       f"{src / split}: {missing[:5]}")
    for split in ("train", "val"):
        (out / split).mkdir(parents=True, exist_ok=True)
        for c in ids:
            link, target = out / split / c, (src / split / c).resolve()
            if link.is_symlink() and link.resolve() == target:
                continue
            if link.exists() or link.is_symlink():
                raise DatasetFormatError(f"ImageNet-100: {link} exists and is not a link to {target}")
            link.symlink_to(target, target_is_directory=True)
    return out
