"""Building the Hugging Face ``Dataset`` objects every loader returns, and reading their columns back.

In-memory image columns are ``Array2D``/``Array3D`` uint8 built straight from numpy (no per-row conversion);
on-disk pictures are ``Image(mode="RGB")`` columns holding only the path. :func:`as_dataset_dict` gives the three
splits the numpy format that keeps stored dtypes.
"""

from __future__ import annotations

import os
from typing import Any, Mapping, Sequence

import numpy as np

import datasets

from tokenprune.data.datasets.splits import SPLITS

__all__ = [
    "NUMPY_FORMAT", "class_label", "fixed_list", "array_dataset", "records_dataset", "as_dataset_dict", "to_numpy",
    "load_image",
]

#: ``with_format`` arguments of every returned split; ``dtype=None`` keeps stored dtypes (not widened to int64).
NUMPY_FORMAT: dict[str, Any] = {"type": "numpy", "dtype": None}


def class_label(names: Sequence[str]) -> datasets.ClassLabel:
    """The ``label`` feature carrying the class names."""
    return datasets.ClassLabel(names=list(names))


def fixed_list(dtype: str, length: int) -> Any:
    """A fixed-length list feature (``datasets.List``, or ``Sequence`` on versions without it)."""
    list_cls = getattr(datasets, "List", None) or datasets.Sequence
    return list_cls(datasets.Value(dtype), length=length)


def _array_feature(shape: tuple[int, ...], dtype: str) -> Any:
    if len(shape) == 2:
        return datasets.Array2D(shape=shape, dtype=dtype)
    if len(shape) == 3:
        return datasets.Array3D(shape=shape, dtype=dtype)
    raise ValueError(f"no Array feature for per-row shape {shape}")


def _arrow_array(images: np.ndarray, feature: Any) -> Any:
    """Build the Arrow storage of an Array2D/Array3D column straight from a numpy array.

    The storage of ``datasets``' ArrayND types is nested ``list<...<uint8>>``; building it
    from offsets avoids the per-row conversion ``Dataset.from_dict`` would do.
    """
    import pyarrow as pa

    if images.size >= 2**31 - 1:
        raise OverflowError("too large for 32-bit list offsets")
    storage = pa.array(np.ascontiguousarray(images).reshape(-1))
    for dim in reversed(images.shape[1:]):
        rows = len(storage) // dim
        offsets = pa.array(np.arange(0, rows * dim + 1, dim, dtype=np.int32))
        storage = pa.ListArray.from_arrays(offsets, storage)
    return pa.ExtensionArray.from_storage(feature(), storage)


def array_dataset(
    images: np.ndarray,
    labels: np.ndarray,
    class_names: Sequence[str],
    description: str,
) -> datasets.Dataset:
    """An in-memory Dataset with an ``image`` Array2D/3D uint8 column and a ClassLabel."""
    images = np.ascontiguousarray(images, dtype=np.uint8)
    labels = np.asarray(labels, dtype=np.int64)
    features = datasets.Features(
        {"image": _array_feature(tuple(images.shape[1:]), "uint8"), "label": class_label(class_names)}
    )
    info = datasets.DatasetInfo(description=description, features=features)
    try:
        import pyarrow as pa
        from datasets.table import InMemoryTable

        table = pa.table({"image": _arrow_array(images, features["image"]), "label": pa.array(labels)})
        return datasets.Dataset(InMemoryTable(table), info=info)
    except Exception:  # pragma: no cover - fallback for datasets versions with another layout
        return datasets.Dataset.from_dict({"image": images, "label": labels}, features=features, info=info)


def records_dataset(columns: Mapping[str, Any], features: datasets.Features, description: str) -> datasets.Dataset:
    """A Dataset from column lists/arrays; ``image`` paths are stored, not decoded."""
    info = datasets.DatasetInfo(description=description, features=features)
    return datasets.Dataset.from_dict(dict(columns), features=features, info=info)


def as_dataset_dict(splits: Mapping[str, datasets.Dataset]) -> datasets.DatasetDict:
    """Wrap the three splits and give them the numpy format that keeps stored dtypes."""
    dd = datasets.DatasetDict({name: splits[name] for name in SPLITS})
    return dd.with_format(**NUMPY_FORMAT)


def to_numpy(split: datasets.Dataset, column: str = "image") -> np.ndarray:
    """The whole ``column`` of ``split`` as one numpy array with its stored dtype.

    For Array2D/Array3D image columns this is the (N, H, W[, 3]) uint8 array, read through
    Arrow without a per-row Python loop (it honours ``select``/``shuffle`` index mappings).
    Lazy ``Image`` columns are decoded, one picture at a time (an object array when sizes differ).
    """
    import pyarrow as pa

    col = split.with_format("arrow")[:].column(column).combine_chunks()
    if isinstance(col, pa.ExtensionArray) and hasattr(col, "to_numpy"):
        return np.asarray(col.to_numpy(zero_copy_only=False))
    return np.asarray(split.with_format(**NUMPY_FORMAT)[:][column])


def load_image(path: str | os.PathLike, mode: str = "RGB") -> np.ndarray:
    """Decode one picture file into a uint8 array (HxWx3 for ``mode="RGB"``)."""
    from PIL import Image

    with Image.open(path) as img:
        return np.asarray(img.convert(mode), dtype=np.uint8)
