"""The proxy's cached fine-tunes as their outputs on their test split: one entry per fine-tune, read back as the rows
of the images asked for, and refused when its labels or its checkpoint's logits disagree."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from tokenprune.measure.evaluation import predict
from tokenprune.training import checkpoints, finetune_outputs as fo
from tokenprune.training.model_recipes import FINETUNE_CONDITIONS, FINETUNED_BASES, recipes_for
from tokenprune.utils.environment import CACHE_ONLY_ENV

BASE = "vit_s14_fmnist_ft"


def _model(seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 8 * 8, 10)).eval()


@pytest.fixture()
def entry(tmp_path):
    """An entry of one fine-tune's recipe on 100 test images, written from a small model's logits."""
    recipe = fo.finetunes_of(BASE)["s14_ft_drop70_s1"]
    g = torch.Generator().manual_seed(0)
    images, labels = torch.rand(100, 3, 8, 8, generator=g), torch.randint(0, 10, (100,), generator=g)
    m = _model()
    p = predict(m, images, labels, batch=fo.EVAL_BATCH, dtype="fp32", device="cpu")
    arrays = {"logits": p.logits.numpy(), "labels": labels.numpy().astype(np.int16)}
    checkpoints.save_outputs(fo.outputs_recipe(recipe), arrays, {"weights_sha256": checkpoints.weights_sha256(m)},
                             tmp_path)
    return recipe, m, images, labels, p.logits, tmp_path


def test_the_rows_of_the_images_asked_for_are_the_cached_ones(entry):
    recipe, m, images, labels, logits, folder = entry
    got = fo.cached_logits(recipe, m, images[:70], labels[:70], cache_dir=folder)
    assert torch.equal(got, logits[:70])


def test_labels_that_do_not_begin_the_split_are_refused(entry):
    recipe, m, images, labels, _, folder = entry
    with pytest.raises(checkpoints.CheckpointMismatchError, match="labels"):
        fo.cached_logits(recipe, m, images[1:71], labels[1:71], cache_dir=folder)
    with pytest.raises(checkpoints.CheckpointMismatchError, match="labels"):
        fo.cached_logits(recipe, m, torch.cat([images, images]), torch.cat([labels, labels]), cache_dir=folder)


def test_another_model_fails_the_recheck(entry):
    recipe, _, images, labels, _, folder = entry
    with pytest.raises(checkpoints.CheckpointMismatchError, match="differ"):
        fo.cached_logits(recipe, _model(seed=1), images, labels, cache_dir=folder)


def test_a_fine_tune_without_an_entry_is_evaluated_or_refused_under_cache_only(entry, monkeypatch):
    recipe, m, images, labels, _, folder = entry
    other = fo.finetunes_of(BASE)["s14_ft_drop70_s2"]
    assert fo.cached_logits(other, m, images, labels, cache_dir=folder) is None
    monkeypatch.setenv(CACHE_ONLY_ENV, "1")
    with pytest.raises(checkpoints.CheckpointMissingError, match="make models"):
        fo.cached_logits(other, m, images, labels, cache_dir=folder)


def test_every_fine_tune_has_an_entry_of_its_own_and_its_own_pruning():
    recipes = fo.finetunes_of(BASE)
    _, _, _, seeds = FINETUNED_BASES["s14"]
    assert len(recipes) == len(FINETUNE_CONDITIONS) * len(seeds)
    outs = [fo.outputs_recipe(r) for r in recipes.values()]
    assert len({o.recipe_hash() for o in outs}) == len(outs)
    assert all(o.name == f"{r.name}_test" and o.recipe_hash() != r.recipe_hash() for o, r in zip(outs, recipes.values()))
    for r in recipes.values():
        keep, reducer, _ = FINETUNE_CONDITIONS[r.extra["finetune"]]
        c = fo.eval_config(r)
        assert (c.keep_rate, c.reducer) == (keep, reducer)
    # the smoke profile's fine-tunes are evaluated the same way
    smoke = [r for r in recipes_for("smoke").values() if r.arch.get("builder") == "finetune"]
    assert smoke and all(fo.eval_config(r).keep_rate == FINETUNE_CONDITIONS[r.extra["finetune"]][0] for r in smoke)


def test_only_the_default_profile_builds_outputs():
    assert fo.build("smoke") == [] and fo.build("paper") == []
