"""Fixture data of the paper tier in the release formats the `paper` profile reads: an ImageNet folder
(``train/<wnid>/*.JPEG``, ``val/<wnid>/*.JPEG``) and a DeiT-S checkpoint in DeiT's format (``{'model': state_dict}``,
1000 classes) under the file name the recipes name."""
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

WNIDS = ["n01440764", "n01443537", "n01484850", "n01491361"]
INIT = "deit_small_patch16_224-cd65a155.pth"


def _jpeg(path: Path, seed: int) -> None:
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 255, size=(256, 300, 3), dtype=np.uint8)).save(path, quality=80)


@pytest.fixture(scope="session")
def imagenet(tmp_path_factory):
    """``root`` (ImageNet folders: 4 classes, 4 training and 2 validation images each), ``init_dir`` (the DeiT-S
    checkpoint ``init``), ``classes``."""
    root = tmp_path_factory.mktemp("imagenet")
    for split, n in (("train", 4), ("val", 2)):
        for c, wnid in enumerate(WNIDS):
            for k in range(n):
                _jpeg(root / split / wnid / f"{wnid}_{split}_{k}.JPEG", 100 * c + 10 * k + (split == "val"))
    import timm

    init = tmp_path_factory.mktemp("init")
    torch.save({"model": timm.create_model("deit_small_patch16_224", num_classes=1000).state_dict()}, init / INIT)
    return SimpleNamespace(root=root, init_dir=init, init=INIT, classes=len(WNIDS))



#: DeiT-S and DeiT-B start checkpoints under the file names of the recipe decoupling_fgvc_finetune
DEIT_INITS = {"deit_small_patch16_224": INIT, "deit_base_patch16_224": "deit_base_patch16_224-b5f2ef4d.pth"}


@pytest.fixture(scope="session")
def fgvc(tmp_path_factory):
    """``root`` holding CUB_200_2011/, stanford_cars/ and fgvc-aircraft-2013b/ in their release formats
    (tests/release_fixtures.py: 3, 3 and 4 classes; 6, 6 and 4 training and 3, 3 and 2 test pictures of 320x240
    px, textured) and ``init_dir`` holding DeiT-S and DeiT-B in DeiT's format (``{'model': state_dict}``, 1000
    classes, random weights) under the recipe's names."""
    import timm

    from release_fixtures import make_aircraft, make_cars, make_cub

    root = tmp_path_factory.mktemp("fgvc")
    size = (320, 240)
    make_cub(root / "CUB_200_2011", size=size, texture=True)
    make_cars(root / "stanford_cars", size=size, texture=True, n_test=3)
    make_aircraft(root / "fgvc-aircraft-2013b", size=size, texture=True)
    init = tmp_path_factory.mktemp("fgvc_init")
    for arch, name in DEIT_INITS.items():
        torch.save({"model": timm.create_model(arch, num_classes=1000).state_dict()}, init / name)
    return SimpleNamespace(root=root, init_dir=init)
