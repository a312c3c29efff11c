"""Round 2 of the proxy's pre-registration: its candidates are at the token counts and object shares it declares, its
budget fits the limits it declares, and nothing trains a candidate without the augmentation its recipe asks for."""
import math

import numpy as np
import pytest
import torch

from tokenprune.study.proxy import calibration, chosen, plan
from tokenprune.training.proxy import candidates as round1, round2


def test_round2_candidates_are_new_and_ordered_cheapest_first():
    names = [c.name for c in round2.CANDIDATES]
    assert len(set(names)) == len(names) and not set(names) & {c.name for c in round1.CANDIDATES}
    assert all(c.round == 2 for c in round2.CANDIDATES) and all(c.round == 1 for c in round1.CANDIDATES)
    assert [c.tokens for c in round2.CANDIDATES] == sorted(c.tokens for c in round2.CANDIDATES)
    assert {c.role for c in round2.CANDIDATES} == set(plan.BARS)
    assert all(c.tokens == 196 for c in round2.CANDIDATES[1:]) and round2.CANDIDATES[0].tokens == 64
    assert all(c.n_clutter == 0 and c.background == "photo" for c in round2.CANDIDATES)


def test_round2_recipes_train_blocks_4_to_12_with_deit_augmentation():
    for c in round2.CANDIDATES:
        r = round2.candidate_recipe(c)
        assert r.trainable == [f"blocks.{i}." for i in range(3, 12)] + ["norm.", "head."]
        assert {"mixup", "cutmix", "random_erasing", "random_resized_crop_scale"} <= set(r.augment)
        assert r.augment["hflip"] == (c.source != "mnist") and r.dtype == "fp32"
        assert r.img_size == c.img_size and r.arch["num_classes"] == c.num_classes
    hashes = [r.recipe_hash() for r in round2.candidate_recipes().values()]
    assert len(set(hashes)) == len(hashes)
    with pytest.raises(ValueError, match="head"):
        round2.candidate_recipe(round1.CANDIDATES[0])


def test_every_augmentation_of_round2_is_performed():
    """Each key of a round-2 recipe's ``augment`` is one the training performs: the crops by the preprocessing, random
    erasing and Mixup / CutMix by the loop (an unknown key is refused: tests/unit/test_augment_resume.py)."""
    from tokenprune.training.augment import BatchAugment
    from tokenprune.training.sources import Preprocess

    for recipe in round2.candidate_recipes().values():
        pre = Preprocess.from_recipe(recipe)
        assert pre.crop_scale == tuple(round2.AUGMENT["random_resized_crop_scale"])
        assert BatchAugment.wanted(recipe.augment)
    from tokenprune.training import model_recipes

    for profile in ("smoke", "default"):   # every other recipe the project builds is accepted as before
        for recipe in model_recipes.recipes_for(profile).values():
            Preprocess.from_recipe(recipe)


def test_round2_budget_fits_its_parts_and_hours():
    rows = round2.budget()
    assert [r["candidate"] for r in rows] == [c.name for c in round2.CANDIDATES]
    for r in rows:
        per_part = math.ceil(round2.DEEP["epochs"] / r["parts"])
        assert per_part * r["epoch_minutes"] <= round2.PART_MINUTES
    assert rows[-1]["cumulative_hours"] <= round2.ROUND_HOURS
    # the budget follows the measured speeds: a slower CPU needs more time
    slow = {k: {s: v / 2 for s, v in d.items()} for k, d in round2.SIZED_FROM.items()}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(round2, "SIZED_FROM", slow)
        assert round2.budget()[-1]["cumulative_hours"] > rows[-1]["cumulative_hours"] * 1.9


def test_tome_r_of_each_token_count_is_nearest_deit_s_mac_ratio():
    assert round2.TOME_R[64] == calibration.proxy_outputs.TOME_R
    assert calibration._nearest_tome_r(196, 196, range(10, 17)) == round2.TOME_R[196]


@pytest.mark.parametrize("c", [c for c in round2.CANDIDATES if c.source != "synth_birds"], ids=lambda c: c.name)
def test_round2_scenes_put_one_object_on_about_25_to_40_percent_of_the_tokens(c):
    """The canvas of each scene candidate: its object's mask touches about 25-40 % of the token grid on average (500
    items of the training split, the mask alone: no model). MNIST's thin digits touch 25 % even when the digit fills
    the scene (a 28-px canvas), hence "about": at least 22 %."""
    from tokenprune.data import datasets
    from tokenprune.data.synthetic.cluttered import clutter_items
    from tokenprune.measure.coverage import mask_to_patch_grid

    split = getattr(datasets, f"load_{c.source}")()["train"].with_format("numpy")
    images = np.asarray(split["image"][:500]).astype(np.uint8).reshape(500, 28, 28)
    out = clutter_items(images, np.asarray(split["label"][:500]), canvas=c.canvas, n_clutter=0, background="photo")
    grid = c.img_size // c.patch
    share = mask_to_patch_grid(torch.from_numpy(out["object_mask"] > 0), c.canvas // grid, grid=(grid, grid))
    assert 0.22 <= float(share.float().mean()) <= 0.40


def test_round2_status_says_what_is_built():
    status = calibration.round2_status()
    assert list(status["candidate"]) == [c.name for c in round2.CANDIDATES]
    assert set(status["base_model"]) <= {"built", "not built"}


def test_each_round_has_its_own_preregistration():
    assert chosen.ROUND_FILES[1] == chosen.PLAN_FILES
    assert chosen.ROUND_FILES[2][0] == ("lib/tokenprune/training/proxy/round2.py",)
    with pytest.raises(ValueError, match="round"):
        chosen.preregistration(round=3)
