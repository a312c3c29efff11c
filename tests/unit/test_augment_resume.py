"""DeiT-style batch augmentation (random-resized crops, random erasing, Mixup / CutMix) and training in parts that
resume: a run paused at an epoch boundary and continued ends with the weights of an uninterrupted run."""
from __future__ import annotations

import time

import pytest
import torch

from tokenprune.training import augment, resume
from tokenprune.training.loop import train
from tokenprune.training.recipe import TrainRecipe
from tokenprune.training.sources import Preprocess
from tokenprune.training.train_cli import tiny_problem, tiny_vit

DEIT = {"random_resized_crop_scale": [0.25, 1.0], "random_resized_crop_ratio": [0.75, 1.3333], "hflip": True,
        "random_erasing": 0.25, "mixup": 0.8, "cutmix": 1.0, "mixup_switch_prob": 0.5}


def _recipe(**kw) -> TrainRecipe:
    base = dict(name="tiny_aug", img_size=8, epochs=3, batch_size=32, lr=3e-3, warmup_epochs=0.25, dtype="fp32",
                label_smoothing=0.1, augment=DEIT,
                preprocess={"channels": 1, "mean": [0.5], "std": [0.5], "resize": "bilinear"})
    base.update(kw)
    return TrainRecipe(**base)


def test_crop_boxes_lie_inside_the_image_with_the_asked_area_and_ratio():
    g = torch.Generator().manual_seed(0)
    boxes = augment.crop_boxes(2000, 40, 40, (0.25, 1.0), (0.75, 4 / 3), g)
    w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
    assert (boxes[:, :2] >= 0).all() and (boxes[:, 2] <= 40).all() and (boxes[:, 3] <= 40).all()
    share = w * h / 1600
    assert share.min() >= 0.2 and share.max() <= 1.0 and 0.5 < share.mean() < 0.75
    assert ((w / h) >= 0.7).all() and ((w / h) <= 1.45).all()
    assert len({tuple(b.tolist()) for b in boxes}) > 1000          # one box per image


def test_random_resized_crops_resize_each_image_and_keep_a_full_crop_intact():
    x = torch.arange(2 * 16 * 16, dtype=torch.float32).view(2, 1, 16, 16)
    out = augment.random_resized_crops(x, 8, (0.25, 1.0), generator=torch.Generator().manual_seed(0))
    assert out.shape == (2, 1, 8, 8) and not torch.equal(out[0], out[1] - 256)
    full = augment.random_resized_crops(x, 16, (1.0, 1.0), (1.0, 1.0))
    torch.testing.assert_close(full, x)                              # the whole image at its own size


def test_batch_augment_mixes_labels_and_erases():
    torch.manual_seed(0)
    aug = augment.BatchAugment(DEIT, num_classes=4, label_smoothing=0.1)
    x, y = torch.randn(8, 1, 8, 8), torch.arange(8) % 4
    xa, target = aug(x.clone(), y)
    assert target.shape == (8, 4) and torch.allclose(target.sum(1), torch.ones(8))
    assert (target.max(1).values < 1.0).all() and not torch.equal(xa, x)
    loss = aug.loss(torch.zeros(8, 4), target)
    assert loss.item() == pytest.approx(torch.log(torch.tensor(4.0)).item(), rel=1e-5)
    with pytest.raises(ValueError, match="even"):
        aug(x[:3], y[:3])
    assert not augment.BatchAugment.wanted({"hflip": True}) and augment.BatchAugment.wanted(DEIT)


def test_an_augmentation_no_part_performs_is_refused_by_name():
    with pytest.raises(ValueError, match="augment.*rand_augment"):
        Preprocess.from_recipe(_recipe(augment={"rand_augment": "rand-m9"}))
    pre = Preprocess.from_recipe(_recipe())
    x = torch.randint(0, 255, (4, 1, 12, 12), dtype=torch.uint8)
    assert pre(x, train=True, generator=torch.Generator().manual_seed(0)).shape == (4, 1, 8, 8)
    assert pre(x).shape == (4, 1, 8, 8)


def _weights(model: torch.nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def test_a_paused_run_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path):
    """Three epochs with every augmentation, straight through, against: paused by its deadline after the first
    epoch (TrainingPaused, state saved), then started again with the same path."""
    x, y = tiny_problem(128)
    recipe = _recipe()
    torch.manual_seed(0)
    straight = tiny_vit()
    res = train(recipe, straight, (x, y), None, progress=False)
    assert res.steps == 3 * (128 // 32)

    torch.manual_seed(0)
    model = tiny_vit()
    path = resume.state_path(tmp_path, recipe.name, recipe.recipe_hash())
    with pytest.raises(resume.TrainingPaused) as paused:
        train(recipe, model, (x, y), None, progress=False, resume=path, deadline=time.monotonic())
    assert paused.value.epochs_done == 1 and path.is_file()
    torch.manual_seed(123)                                           # another process: nothing carried in memory
    model = tiny_vit()
    res2 = train(recipe, model, (x, y), None, progress=False, resume=path)
    assert res2.steps == res.steps and len(res2.history) == 3
    torch.testing.assert_close(_weights(model), _weights(straight), atol=1e-6, rtol=1e-6)
    assert res2.losses == pytest.approx(res.losses, rel=1e-5)


def test_a_run_paused_inside_an_epoch_resumes_to_the_weights_of_an_uninterrupted_one(tmp_path):
    """Epochs longer than a part: paused after the first step of an epoch (the state holds the step within it),
    started again, paused again, then run to the end: the weights and losses of the run straight through."""
    x, y = tiny_problem(128)
    recipe = _recipe(epochs=2)
    torch.manual_seed(0)
    straight = tiny_vit()
    res = train(recipe, straight, (x, y), None, progress=False)

    torch.manual_seed(0)
    model = tiny_vit()
    path = resume.state_path(tmp_path, recipe.name, recipe.recipe_hash())
    with pytest.raises(resume.TrainingPaused) as paused:
        train(recipe, model, (x, y), None, progress=False, resume=path, deadline=time.monotonic(), within_epochs=True)
    assert paused.value.epochs_done == 0 and paused.value.steps == (1, 128 // 32)
    torch.manual_seed(7)
    with pytest.raises(resume.TrainingPaused) as paused:
        train(recipe, tiny_vit(), (x, y), None, progress=False, resume=path, deadline=time.monotonic(),
              within_epochs=True)
    assert paused.value.steps == (2, 128 // 32)
    torch.manual_seed(123)                                           # another process: nothing carried in memory
    model = tiny_vit()
    res2 = train(recipe, model, (x, y), None, progress=False, resume=path)
    assert res2.steps == res.steps and len(res2.history) == 2
    assert [h["steps"] for h in res2.history] == [h["steps"] for h in res.history]
    torch.testing.assert_close(_weights(model), _weights(straight), atol=1e-6, rtol=1e-6)
    assert res2.losses == pytest.approx(res.losses, rel=1e-5)


def test_a_state_of_another_recipe_is_refused(tmp_path):
    x, y = tiny_problem(64)
    recipe = _recipe(epochs=2)
    path = resume.state_path(tmp_path, recipe.name, recipe.recipe_hash())
    torch.manual_seed(0)
    with pytest.raises(resume.TrainingPaused):
        train(recipe, tiny_vit(), (x, y), None, progress=False, resume=path, deadline=time.monotonic())
    with pytest.raises(ValueError, match="resume"):
        train(_recipe(epochs=2, lr=1e-3), tiny_vit(), (x, y), None, progress=False, resume=path)
    with pytest.raises(ValueError, match="deadline"):
        train(recipe, tiny_vit(), (x, y), None, progress=False, deadline=time.monotonic())


def test_models_round2_builds_in_order_and_stops_at_a_paused_part(monkeypatch, capsys):
    """``models --round 2``: the candidates in the round's order (``--only``: those), each base model then its
    outputs; a paused part stops the command with one line saying how to continue. Bad options are refused."""
    from tokenprune.training import base_models, models_cli
    from tokenprune.training.proxy import outputs, round2
    from tokenprune.utils.io import InputError

    names = [c.name for c in round2.CANDIDATES]
    built, measured = [], []

    def ensure(recipe, cache, **kw):
        if recipe.name == names[2]:
            raise resume.TrainingPaused(recipe.name, 1, 3, cache / "partial" / "x.state.pt")
        built.append(recipe.name)
        return None, {}

    monkeypatch.setattr(base_models, "ensure_model", ensure)
    monkeypatch.setattr(outputs, "build", lambda **kw: measured.extend(kw["only"]) or [])
    assert models_cli.main(["--round", "2"]) == 0
    assert built == names[:2] and measured == names[:2]
    assert "paused after epoch 1 of 3" in capsys.readouterr().out
    built.clear()
    assert models_cli.main(["--round", "2", "--only", names[1]]) == 0 and built == [names[1]]
    for bad in (["--round", "2", "--only", "s14_birds"], ["--round", "2", "--profile", "smoke"]):
        with pytest.raises(InputError):
            models_cli.main(bad)
    # --list prints the round's recipes with their hashes and builds nothing
    built.clear(), measured.clear(), capsys.readouterr()
    assert models_cli.main(["--round", "2", "--list", "--only", names[1]]) == 0
    assert built == [] and measured == []
    printed = capsys.readouterr().out.splitlines()
    recipe = round2.candidate_recipes()[names[1]]
    assert [line.split(":")[0] for line in printed] == [f"{names[1]}-{recipe.recipe_hash()}"]
