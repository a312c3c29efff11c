"""Fixtures in the exact release formats of the paper datasets (CUB-200-2011, Stanford Cars, FGVC-Aircraft 2013b),
tiny: shared by the loader tests (tests/unit/test_data.py) and the paper tier (tests/paper)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image


def jpeg(path: Path, color: tuple[int, int, int], size: tuple[int, int] = (12, 8), mode: str = "RGB",
         texture: bool = False) -> None:
    """A JPEG of ``size`` (width, height) in ``color``; ``texture``: plus seeded noise (a picture whose patches
    differ, for the models of the paper tier)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    img = Image.new("RGB", size, color)
    if texture:
        rng = np.random.default_rng(list(color))
        noise = rng.integers(-60, 61, size=(size[1], size[0], 3))
        img = Image.fromarray(np.clip(np.asarray(img, dtype=np.int64) + noise, 0, 255).astype(np.uint8))
    if mode != "RGB":
        img = img.convert(mode)
    img.save(path, quality=95)


CUB_PARTS = [
    "back", "beak", "belly", "breast", "crown", "forehead", "left eye", "left leg",
    "left wing", "nape", "right eye", "right leg", "right wing", "tail", "throat",
]


def make_cub(base: Path, size: tuple[int, int] = (12, 8), texture: bool = False) -> dict:
    """A 3-class, 9-image CUB_200_2011 folder (pictures of ``size``, see :func:`jpeg`); returns the ground truth."""
    classes = ["001.Black_footed_Albatross", "002.Laysan_Albatross", "003.Sooty_Albatross"]
    rows = []
    for k in range(9):
        cls = k % 3
        rows.append({
            "id": k + 1, "cls": cls + 1, "train": int(k < 6),
            "name": f"{classes[cls]}/{classes[cls][4:]}_{k:04d}_{k}.jpg",
            "box": (1.0 + k, 2.0, 5.0, 4.5), "color": (20 * k, 100, 250 - 20 * k),
        })
    base.mkdir(parents=True)
    (base / "parts").mkdir()
    (base / "images.txt").write_text("".join(f"{r['id']} {r['name']}\n" for r in rows))
    (base / "image_class_labels.txt").write_text("".join(f"{r['id']} {r['cls']}\n" for r in rows))
    (base / "train_test_split.txt").write_text("".join(f"{r['id']} {r['train']}\n" for r in rows))
    (base / "bounding_boxes.txt").write_text(
        "".join(f"{r['id']} " + " ".join(f"{v:.1f}" for v in r["box"]) + "\n" for r in rows)
    )
    (base / "classes.txt").write_text("".join(f"{i + 1} {c}\n" for i, c in enumerate(classes)))
    (base / "parts" / "parts.txt").write_text("".join(f"{i + 1} {p}\n" for i, p in enumerate(CUB_PARTS)))
    lines = []
    for r in rows:
        for p in range(15):
            visible = int((r["id"] + p) % 3 != 0)
            x, y = (float(r["id"] * 10 + p), float(p) + 0.5) if visible else (0.0, 0.0)
            lines.append(f"{r['id']} {p + 1} {x:.1f} {y:.1f} {visible}\n")
    (base / "parts" / "part_locs.txt").write_text("".join(lines))
    for r in rows:
        jpeg(base / "images" / r["name"], r["color"], size, mode="L" if r["id"] == 2 else "RGB", texture=texture)
    return {"rows": rows, "classes": classes}


def mat_struct(records: list[dict], fields: tuple[str, ...]) -> np.ndarray:
    """A 1xN MATLAB struct array as scipy.io.savemat writes it (numbers stored as 1x1)."""
    arr = np.zeros((1, len(records)), dtype=[(f, object) for f in fields])
    for i, rec in enumerate(records):
        for f in fields:
            value = rec[f]
            arr[0, i][f] = value if isinstance(value, str) else np.array([[value]], dtype=np.uint16)
    return arr


def make_cars(base: Path, with_labels: bool = True, size: tuple[int, int] = (12, 8), texture: bool = False,
              n_test: int = 1) -> dict:
    """A 3-class Stanford Cars devkit folder: 6 training and ``n_test`` test pictures of ``size`` (see :func:`jpeg`)."""
    from scipy.io import savemat

    names = ["AM General Hummer SUV 2000", "Acura RL Sedan 2012", "Audi TT RS Coupe 2012"]
    train = [{"bbox_x1": 1 + i, "bbox_y1": 2, "bbox_x2": 10, "bbox_y2": 7 + (i % 2), "class": i % 3 + 1,
              "fname": f"{i + 1:05d}.jpg"} for i in range(6)]
    test = [{"bbox_x1": 3, "bbox_y1": 4, "bbox_x2": 11, "bbox_y2": 8, "class": (i + 2) % 3 + 1, "fname": f"{i + 1:05d}.jpg"}
            for i in range(n_test)]
    devkit = base / "devkit"
    devkit.mkdir(parents=True)
    savemat(devkit / "cars_meta.mat", {"class_names": np.array([names], dtype=object)})
    fields = ("bbox_x1", "bbox_y1", "bbox_x2", "bbox_y2", "class", "fname")
    savemat(devkit / "cars_train_annos.mat", {"annotations": mat_struct(train, fields)})
    savemat(devkit / "cars_test_annos.mat", {"annotations": mat_struct(test, fields[:4] + ("fname",))})
    if with_labels:
        savemat(base / "cars_test_annos_withlabels.mat", {"annotations": mat_struct(test, fields)})
    for i, rec in enumerate(train):
        jpeg(base / "cars_train" / rec["fname"], (10 + i if texture else 10, 20, 30), size, texture=texture)
    for i, rec in enumerate(test):
        jpeg(base / "cars_test" / rec["fname"], (200, 10 + i if texture else 10, 10), size, texture=texture)
    return {"names": names, "train": train, "test": test}


AIRCRAFT = [  # image, variant, family, manufacturer, split
    ("0034309", "707-320", "Boeing 707", "Boeing", "train"),
    ("0034958", "727-200", "Boeing 727", "Boeing", "train"),
    ("0037511", "A300B4", "A300", "Airbus", "train"),
    ("0037512", "F-16A/B", "F-16", "Lockheed Martin", "train"),
    ("1025794", "707-320", "Boeing 707", "Boeing", "val"),
    ("1340192", "A300B4", "A300", "Airbus", "val"),
    ("0056978", "727-200", "Boeing 727", "Boeing", "test"),
    ("0062781", "F-16A/B", "F-16", "Lockheed Martin", "test"),
]


def make_aircraft(root: Path, size: tuple[int, int] = (12, 8), texture: bool = False) -> None:
    """An FGVC-Aircraft 2013b folder of :data:`AIRCRAFT` (pictures of ``size``, see :func:`jpeg`)."""
    folder = root / "data"
    folder.mkdir(parents=True)
    levels = {"variant": 1, "family": 2, "manufacturer": 3}
    plural = {"variant": "variants", "family": "families", "manufacturer": "manufacturers"}
    for level, col in levels.items():
        names = list(dict.fromkeys(row[col] for row in AIRCRAFT))
        (folder / f"{plural[level]}.txt").write_text("\n".join(names) + "\n")
        for split in ("train", "val", "test", "trainval"):
            members = [r for r in AIRCRAFT if r[4] == split or (split == "trainval" and r[4] in ("train", "val"))]
            (folder / f"images_{level}_{split}.txt").write_text("".join(f"{r[0]} {r[col]}\n" for r in members))
    (folder / "images_box.txt").write_text(
        "".join(f"{r[0]} {i + 1} {i + 2} {i + 10} {i + 7}\n" for i, r in enumerate(AIRCRAFT))
    )
    for i, r in enumerate(AIRCRAFT):
        jpeg(folder / "images" / f"{r[0]}.jpg", (30 * i, 60, 90), size, texture=texture)
