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
        chosen.preregistration(round=4)


def _meets_all(role: str) -> dict:
    """Measurements that meet every criterion of ``role`` (costs inside the bands, intervals above 0)."""
    return {"object_token_share": 0.3, "top1": 95.0, "cost@0.7": 1.0, "cost@0.7_low": 0.5, "cost@0.5": 4.0,
            "cost@0.5_low": 3.0, "tome_cost": 1.5, "ft_share_of_cost": 50.0, "ft_gain@0.7_low": 0.2}


def _row(c, m: dict) -> dict:
    return {**m, "candidate": c.name, "role": c.role, "tokens": c.tokens, "built": True, **plan.judge(c, m)}


def test_both_rounds_choose_once_round2_is_complete_for_a_role(monkeypatch):
    """Round 1's choice stands while round 2 is incomplete for a role; once complete, the plan's unchanged choose()
    runs over both rounds in order: a round-2 candidate meeting every criterion wins over round 1's fallback."""
    rung, fmnist, mnist, birds = round2.CANDIDATES
    rounds1 = [{"candidate": "s14_birds_easy", "role": "fine-grained", **_meets_all("fine-grained"),
                "cost@0.7": 19.8, "cost@0.5": 44.9}]
    chosen1 = {"classification": (None, "none"), "fine-grained": ("s14_birds_easy", "fallback")}
    measured = {}
    monkeypatch.setattr(calibration, "_measured", lambda c, profile, seed: measured.get(c.name))

    rows, choice, complete = calibration.calibrate_round2(rounds1, chosen1)
    assert not any(r["built"] for r in rows) and complete == {"classification": False, "fine-grained": False}
    assert choice == chosen1

    bad = {**_meets_all("classification"), "cost@0.7": 9.0}          # misses K2: round 2 goes on
    measured[rung.name] = _row(rung, bad)
    rows, choice, complete = calibration.calibrate_round2(rounds1, chosen1)
    assert not complete["classification"] and choice["classification"] == (None, "none")

    measured[fmnist.name] = _row(fmnist, _meets_all("classification"))  # meets all: the role is complete
    rows, choice, complete = calibration.calibrate_round2(rounds1, chosen1)
    assert complete["classification"] and choice["classification"] == (fmnist.name, "meets every criterion")
    assert calibration.round2_complete(rows, "classification") and not complete["fine-grained"]

    measured[birds.name] = _row(birds, {**_meets_all("fine-grained"), "cost@0.7": 6.0, "cost@0.5": 20.0})
    rows, choice, complete = calibration.calibrate_round2(rounds1, chosen1)   # its last, a nearer fallback
    assert complete["fine-grained"] and choice["fine-grained"] == (birds.name, "fallback")
