"""Tests of tokenprune.data.synthetic: SynthBirds and cluttered (Fashion-)MNIST."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from tokenprune.data import synthetic as syn

PID = {name: i for i, name in enumerate(syn.PART_NAMES)}
DISCRIMINATIVE_IDS = [PID[p] for p in syn.DISCRIMINATIVE_PARTS]


@pytest.fixture(scope="module")
def birds() -> dict[str, np.ndarray]:
    return syn.make_part_dataset(96, seed=3)


# ------------------------------------------------------------------------------------ SynthBirds


def test_shapes_and_dtypes(birds: dict[str, np.ndarray]) -> None:
    n, s, p = 96, 64, syn.N_PARTS
    expect = {
        "image": ((n, s, s, 3), np.uint8),
        "label": ((n,), np.int64),
        "part_mask": ((n, s, s), np.uint8),
        "distractor_mask": ((n, s, s), np.uint8),
        "keypoints": ((n, p, 3), np.float32),
        "bbox": ((n, 4), np.int32),
        "index": ((n,), np.int64),
    }
    assert set(birds) == set(expect)
    for key, (shape, dtype) in expect.items():
        assert birds[key].shape == shape, key
        assert birds[key].dtype == dtype, key
    assert birds["part_mask"].max() <= p
    assert set(np.unique(birds["distractor_mask"])) <= {0, PID["beak"], PID["tail"], PID["crest"]}
    assert len(syn.BIRD_CLASSES) == len(syn.CLASS_NAMES) == 12
    assert len(set(syn.CLASS_NAMES)) == 12


@pytest.mark.parametrize("size", [32, 96])
def test_other_sizes_and_no_distractors(size: int) -> None:
    d = syn.make_part_dataset(8, seed=1, img_size=size, n_distractors=0)
    assert d["image"].shape == (8, size, size, 3)
    assert not d["distractor_mask"].any()
    assert (d["part_mask"] == PID["body"]).any(axis=(1, 2)).all()


def test_same_seed_same_bytes_and_seed_matters() -> None:
    a = syn.make_part_dataset(30, seed=7)
    b = syn.make_part_dataset(30, seed=7, batch_size=7)  # batching must not matter
    for key in a:
        assert a[key].tobytes() == b[key].tobytes(), key
    c = syn.make_part_dataset(30, seed=8)
    assert a["image"].tobytes() != c["image"].tobytes()


def test_subset_regeneration(birds: dict[str, np.ndarray]) -> None:
    pick = [0, 17, 50, 95]
    sub = syn.make_part_dataset(0, seed=3, indices=pick)
    for key in birds:
        np.testing.assert_array_equal(sub[key], birds[key][pick], err_msg=key)
    tail = syn.make_part_dataset(6, seed=3, start=90)
    np.testing.assert_array_equal(tail["image"], birds["image"][90:])


def test_labels_balanced_per_block(birds: dict[str, np.ndarray]) -> None:
    labels = birds["label"].reshape(-1, 12)  # 96 = 8 blocks of 12
    for block in labels:
        assert sorted(block) == list(range(12))


def test_bbox_is_tight_box_of_part_mask(birds: dict[str, np.ndarray]) -> None:
    s = birds["part_mask"].shape[1]
    for mask, (x0, y0, x1, y1) in zip(birds["part_mask"] > 0, birds["bbox"]):
        assert 0 <= x0 < x1 <= s and 0 <= y0 < y1 <= s
        inside = np.zeros_like(mask)
        inside[y0:y1, x0:x1] = True
        assert not (mask & ~inside).any()
        assert mask[y0].any() and mask[y1 - 1].any() and mask[:, x0].any() and mask[:, x1 - 1].any()


def test_visible_keypoints_lie_on_their_part(birds: dict[str, np.ndarray]) -> None:
    for mask, kp in zip(birds["part_mask"], birds["keypoints"]):
        for pid in range(1, syn.N_PARTS + 1):
            x, y, v = kp[pid - 1]
            present = (mask == pid).any()
            assert bool(v) == present
            if v:
                assert x == int(x) and y == int(y)
                assert mask[int(y), int(x)] == pid
            else:
                assert x == 0 and y == 0


def test_crest_present_exactly_for_crested_classes(birds: dict[str, np.ndarray]) -> None:
    crested = np.array([syn.BIRD_CLASSES[k].crest for k in birds["label"]])
    has_crest = (birds["part_mask"] == PID["crest"]).any(axis=(1, 2))
    np.testing.assert_array_equal(has_crest, crested)
    # every other part is visible in every image at the default size
    for pid in range(1, syn.N_PARTS + 1):
        if pid != PID["crest"]:
            assert (birds["part_mask"] == pid).any(axis=(1, 2)).all(), syn.PART_NAMES[pid]


def test_part_regions_are_uniformly_coloured(birds: dict[str, np.ndarray]) -> None:
    """The mask is exact: each part is one flat colour (the tail: one or, if banded, two)."""
    for img, mask, label in zip(birds["image"], birds["part_mask"], birds["label"]):
        for pid in range(1, syn.N_PARTS + 1):
            px = img[mask == pid]
            if not len(px):
                continue
            n_colours = len(np.unique(px, axis=0))
            if pid == PID["tail"]:
                assert n_colours == (2 if syn.BIRD_CLASSES[label].banded_tail else 1)
            else:
                assert n_colours == 1, syn.PART_NAMES[pid]


def test_distractors_are_separate_and_outside_object_box() -> None:
    cfg = syn.BirdConfig()
    sc = syn.sample_bird_scenes(np.arange(200), seed=5, config=cfg)
    d = syn.render_bird_scenes(sc, cfg)
    assert d["distractor_mask"].any(axis=(1, 2)).mean() > 0.5  # most images have distractors
    assert not ((d["distractor_mask"] > 0) & (d["part_mask"] > 0)).any()
    s = cfg.img_size
    centre = np.arange(s) + 0.5
    for k in range(200):
        x0, y0, x1, y1 = sc["exclusion_box"][k]
        box = ((centre[:, None] >= y0) & (centre[:, None] <= y1)) & ((centre[None, :] >= x0) & (centre[None, :] <= x1))
        obj = d["part_mask"][k] > 0
        assert not (obj & ~box).any()  # the object lies in its exclusion box ...
        assert not ((d["distractor_mask"][k] > 0) & box).any()  # ... which no distractor enters
        bx0, by0, bx1, by1 = d["bbox"][k]
        gap = cfg.distractor_gap
        grown = np.zeros((s, s), bool)
        grown[max(by0 - gap, 0) : by1 + gap, max(bx0 - gap, 0) : bx1 + gap] = True
        assert not ((d["distractor_mask"][k] > 0) & grown).any()


def test_class_changes_only_the_discriminative_parts() -> None:
    """Same pose, colours, background and distractors, another class: only beak / tail /
    crest pixels may change, and each class-defining attribute visibly changes its part."""
    cfg = syn.BirdConfig()
    sc = syn.sample_bird_scenes(np.arange(24), seed=11, config=cfg)
    renders = {}
    for lab in range(len(syn.BIRD_CLASSES)):
        s2 = dict(sc, label=np.full(24, lab))
        renders[lab] = syn.render_bird_scenes(s2, cfg)
    for a, b in itertools.combinations(range(len(syn.BIRD_CLASSES)), 2):
        ra, rb = renders[a], renders[b]
        np.testing.assert_array_equal(ra["distractor_mask"], rb["distractor_mask"])
        disc = np.isin(ra["part_mask"], DISCRIMINATIVE_IDS) | np.isin(rb["part_mask"], DISCRIMINATIVE_IDS)
        changed = (ra["image"] != rb["image"]).any(axis=-1) | (ra["part_mask"] != rb["part_mask"])
        assert not (changed & ~disc).any(), (syn.CLASS_NAMES[a], syn.CLASS_NAMES[b])
        ca, cb = syn.BIRD_CLASSES[a], syn.BIRD_CLASSES[b]
        for part, differs in (
            ("beak", ca.beak != cb.beak),
            ("crest", ca.crest != cb.crest),
            ("tail", ca.banded_tail != cb.banded_tail),
        ):
            pid = PID[part]
            region = (ra["part_mask"] == pid) | (rb["part_mask"] == pid)
            part_changed = (changed & region).any(axis=(1, 2))
            if differs:
                assert part_changed.all(), (part, syn.CLASS_NAMES[a], syn.CLASS_NAMES[b])
            else:
                assert not part_changed.any(), (part, syn.CLASS_NAMES[a], syn.CLASS_NAMES[b])


def test_part_dataset_splits_and_features() -> None:
    import datasets

    dd = syn.part_dataset(6, 4, 3, seed=2)
    assert list(dd) == ["train", "val", "test"]
    assert [len(dd[k]) for k in dd] == [6, 4, 3]
    feats = dd["train"].features
    assert isinstance(feats["label"], datasets.ClassLabel) and feats["label"].names == list(syn.CLASS_NAMES)
    row = dd["val"][:4]
    assert row["image"].dtype == np.uint8 and row["image"].shape == (4, 64, 64, 3)
    assert row["keypoints"].dtype == np.float32 and row["keypoints"].shape == (4, 8, 3)
    ref = syn.make_part_dataset(4, seed=2, start=syn.SPLIT_OFFSETS["val"])
    for key in ("image", "part_mask", "distractor_mask", "keypoints", "bbox", "label", "index"):
        np.testing.assert_array_equal(row[key], ref[key], err_msg=key)
    # the val split does not depend on the size of the train split
    dd2 = syn.part_dataset(2, 4, 0, seed=2)
    np.testing.assert_array_equal(dd2["val"][:4]["image"], row["image"])
    assert syn.class_table()[0]["name"] == syn.CLASS_NAMES[0]


def test_generation_speed_is_reported(capsys: pytest.CaptureFixture[str]) -> None:
    """Prints images/s; no timing assertion (the machine is shared)."""
    speed = syn.benchmark_generation(n=512, batch_size=256, repeats=1)
    out = capsys.readouterr().out
    with capsys.disabled():
        print("\n" + out.strip())
    assert speed["synthbirds_images_per_s"] > 0 and speed["cluttered_images_per_s"] > 0


# ---------------------------------------------------------------------------- cluttered MNIST


def _digits28() -> tuple[np.ndarray, np.ndarray]:
    """Real handwritten digits (scikit-learn's bundled 8x8 set) blown up to 28x28."""
    from sklearn.datasets import load_digits

    d = load_digits()
    big = np.kron(d.images[:300], np.ones((3, 3)))  # 24x24
    imgs = np.zeros((300, 28, 28), np.uint8)
    imgs[:, 2:26, 2:26] = np.round(big * 255 / 16).astype(np.uint8)
    return imgs, d.target[:300]


def _placed(item: np.ndarray, offset: np.ndarray, canvas: int) -> np.ndarray:
    out = np.zeros((canvas, canvas), np.uint8)
    x, y = offset
    out[y : y + item.shape[0], x : x + item.shape[1]] = item
    return out


@pytest.mark.parametrize("threshold", [0, 100])
def test_cluttered_object_mask_is_the_items_pixels(threshold: int) -> None:
    imgs, labels = _digits28()
    gap = 1
    d = syn.clutter_items(imgs, labels, canvas=64, seed=4, threshold=threshold, gap=gap)
    assert d["image"].shape == (300, 64, 64) and d["image"].dtype == np.uint8
    assert d["object_mask"].dtype == np.uint8 and d["bbox"].dtype == np.int32
    np.testing.assert_array_equal(d["label"], labels)
    assert d["clutter_mask"].any(axis=(1, 2)).mean() > 0.9
    for k in range(300):
        placed = _placed(imgs[k], d["offset"][k], 64)
        np.testing.assert_array_equal(d["object_mask"][k], placed > threshold)
        x0, y0, x1, y1 = d["bbox"][k]
        m = d["object_mask"][k].astype(bool)
        assert (
            m[y0:y1, x0:x1].sum() == m.sum()
            and m[y0].any()
            and m[y1 - 1].any()
            and m[:, x0].any()
            and m[:, x1 - 1].any()
        )
        # the rule: no clutter inside the object box grown by `gap`; there the image is the item
        g = (slice(max(y0 - gap, 0), y1 + gap), slice(max(x0 - gap, 0), x1 + gap))
        np.testing.assert_array_equal(d["image"][k][g], placed[g])
        assert not d["clutter_mask"][k][g].any()
        np.testing.assert_array_equal(d["image"][k][m], placed[m])


def test_cluttered_pieces_come_from_other_items() -> None:
    n = 20
    imgs = np.zeros((n, 28, 28), np.uint8)
    for i in range(n):
        imgs[i, 2:26, 2:26] = 10 + 10 * i  # each item has its own grey level
    d = syn.clutter_items(imgs, np.arange(n), canvas=64, seed=0, n_clutter=8)
    for k in range(n):
        values = set(np.unique(d["image"][k][d["clutter_mask"][k] > 0]))
        assert values and (10 + 10 * k) not in values


def test_cluttered_determinism_and_subset() -> None:
    imgs, labels = _digits28()
    a = syn.clutter_items(imgs, labels, seed=9)
    b = syn.clutter_items(imgs, labels, seed=9)
    for key in a:
        assert a[key].tobytes() == b[key].tobytes(), key
    pick = [5, 77, 299]
    sub = syn.clutter_items(imgs, labels, seed=9, indices=pick)
    for key in a:
        np.testing.assert_array_equal(sub[key], a[key][pick], err_msg=key)
    c = syn.clutter_items(imgs, labels, seed=10)
    assert a["image"].tobytes() != c["image"].tobytes()


def test_cluttered_on_photos_changes_only_the_empty_pixels() -> None:
    imgs, labels = _digits28()
    black = syn.clutter_items(imgs, labels, canvas=64, seed=3)
    photo = syn.clutter_items(imgs, labels, canvas=64, seed=3, background="photo", background_contrast=0.5)
    for key in ("object_mask", "clutter_mask", "bbox", "offset", "label", "index"):
        np.testing.assert_array_equal(photo[key], black[key], err_msg=key)
    fg = (black["object_mask"] | black["clutter_mask"]).astype(bool)
    np.testing.assert_array_equal(photo["image"][fg], black["image"][fg])
    bg = photo["image"][~fg].astype(float)
    assert 0 < bg.mean() and bg.max() <= 0.5 * 255 + 1  # a photo, dimmed by the contrast
    # a function of (seed, index): the same image for an item whatever else is generated with it
    sub = syn.clutter_items(imgs, labels, canvas=64, seed=3, background="photo", indices=[7, 42])
    np.testing.assert_array_equal(sub["image"], photo["image"][[7, 42]])
    # not one photo for all
    assert len({photo["image"][k][~fg[k]].mean().round(1) for k in range(20)}) > 5


@pytest.mark.parametrize("kwargs, param", [({"background": "noise"}, "background"),
                                           ({"background": "photo", "background_contrast": 1.5},
                                            "background_contrast")])
def test_cluttered_refuses_an_unknown_background(kwargs: dict, param: str) -> None:
    imgs, labels = _digits28()
    with pytest.raises(ValueError, match=param):
        syn.clutter_items(imgs, labels, **kwargs)


def test_cluttered_wrapper_keeps_label_feature() -> None:
    import datasets

    imgs, labels = _digits28()
    feats = datasets.Features(
        {"image": datasets.Array2D((28, 28), "uint8"), "label": datasets.ClassLabel(names=[str(i) for i in range(10)])}
    )
    dd = datasets.DatasetDict(
        {
            "train": datasets.Dataset.from_dict({"image": imgs[:40], "label": labels[:40]}, features=feats),
            "test": datasets.Dataset.from_dict({"image": imgs[40:60], "label": labels[40:60]}, features=feats),
        }
    )
    out = syn.cluttered(dd, canvas=56, seed=1)
    assert list(out) == ["train", "test"]
    assert out["test"].features["label"] == feats["label"]
    rows = out["test"][:20]
    assert rows["image"].shape == (20, 56, 56) and rows["image"].dtype == np.uint8
    np.testing.assert_array_equal(rows["label"], labels[40:60])
    again = syn.cluttered(dd, canvas=56, seed=1)
    np.testing.assert_array_equal(again["train"][:40]["image"], out["train"][:40]["image"])
