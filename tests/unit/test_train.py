"""The training package (loop, recipes, checkpoints, base models): recipe hashing, the training loop, keep-rate warm-up, DDP,
the checkpoint cache and the smoke profile."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

import tokenprune.training.base_models as tm
from tokenprune.core.patch import patch, prune_state
from tokenprune.core.schedule import cosine_keep_rate, keep_rate_at
from tokenprune.training import checkpoints, model_recipes, models_cli, recipe_data
from tokenprune.training.bench import bench_training
from tokenprune.training.loop import evaluate, train
from tokenprune.training.optim import lr_at
from tokenprune.training.recipe import TrainRecipe
from tokenprune.training.sources import Preprocess, as_tensors
from tokenprune.training.train_cli import tiny_problem, tiny_vit

REPO = Path(__file__).resolve().parents[2]


def _tiny_recipe(**kw) -> TrainRecipe:
    base = dict(name="tiny", img_size=8, epochs=2, batch_size=32, lr=3e-3, warmup_epochs=0.25, dtype="fp32",
                label_smoothing=0.0, preprocess={"channels": 1, "mean": [0.5], "std": [0.5], "resize": "pad"})
    base.update(kw)
    return TrainRecipe(**base)


# ---------------------------------------------------------------------------------------------- recipe


def test_recipe_hash_is_stable():
    a = TrainRecipe(arch={"embed_dim": 64, "depth": 12}, augment={"hflip": True, "crop_pad": 2})
    b = TrainRecipe(arch={"depth": 12, "embed_dim": 64}, augment={"crop_pad": 2, "hflip": True})
    assert a.recipe_hash() == b.recipe_hash()  # key order does not matter
    assert len(a.recipe_hash()) == 12 and int(a.recipe_hash(), 16) >= 0
    assert TrainRecipe.from_dict(a.to_dict()).recipe_hash() == a.recipe_hash()  # JSON round trip
    assert TrainRecipe(prune={"locations": (4, 7, 10)}).recipe_hash() == TrainRecipe(prune={"locations": [4, 7, 10]}).recipe_hash()
    # the hash is the SHA-256 of the canonical JSON
    import hashlib

    assert a.recipe_hash() == hashlib.sha256(a.canonical_json().encode()).hexdigest()[:12]
    assert json.loads(a.canonical_json())["arch"] == {"depth": 12, "embed_dim": 64}


@pytest.mark.parametrize("change", [
    {"lr": 2e-3}, {"seed": 1}, {"epochs": 11}, {"keep_rate": 0.7}, {"keep_start": 1.0}, {"dtype": "fp32"},
    {"arch": {"embed_dim": 65, "depth": 12}}, {"dataset_kwargs": {"seed": 1}}, {"augment": {"hflip": True}},
    {"train_subset": 100}, {"store_dtype": "fp16"}, {"img_size": 32}, {"name": "other"},
])
def test_recipe_hash_is_sensitive(change):
    a = TrainRecipe(arch={"embed_dim": 64, "depth": 12})
    assert a.replace(**change).recipe_hash() != a.recipe_hash()


def test_recipe_validates():
    with pytest.raises(ValueError, match="dtype"):
        TrainRecipe(dtype="int8")
    with pytest.raises(ValueError, match="keep_rate"):
        TrainRecipe(keep_rate=0.0)
    with pytest.raises(ValueError, match="learning_rate"):
        TrainRecipe.from_dict({"learning_rate": 1.0})


def test_default_recipes_fit_the_brief():
    r = model_recipes.default_recipes()
    assert {"small_vit_fmnist", "vit_s14_fmnist_linear", "s14_birds_easy"} <= set(r)
    assert r["small_vit_fmnist"].arch["depth"] == 12 and r["small_vit_fmnist"].arch["class_token"]
    assert r["vit_s14_fmnist_linear"].img_size % 14 == 0
    hashes = [x.recipe_hash() for x in r.values()]
    assert len(set(hashes)) == len(hashes)
    smoke = model_recipes.smoke_recipes()
    # the smoke profile runs the fine-tunes' code on seeds 0-2 only, and has each candidate of rounds 2 and 3 (an
    # audit's proxy)
    assert set(smoke) == ({f"{n}_smoke" for n, x in r.items() if x.arch["builder"] != "finetune" or x.seed <= 2}
                          | {f"{n}_smoke" for n in model_recipes.round2_recipes()}
                          | {f"{n}_smoke" for n in model_recipes.round3_recipes()})
    full = smoke["s14d_fmnist112_full_smoke"]   # round 3's first candidate, as small as round 2's
    assert (full.train_subset, full.epochs, full.dataset_kwargs["limit"]) == (64, 1, 256)
    assert full.img_size == model_recipes.round3_recipes()["s14d_fmnist112_full"].img_size


# ---------------------------------------------------------------------------------------------- pieces


def _keep_rate(epoch: float, r: TrainRecipe) -> float:
    return keep_rate_at(epoch, r.keep_rate, r.keep_start, r.keep_length)


def test_lr_and_keep_rate_schedules():
    assert lr_at(0, 100, 10, 1.0) == pytest.approx(0.1)
    assert lr_at(9, 100, 10, 1.0) == pytest.approx(1.0)
    assert lr_at(10, 100, 10, 1.0, 0.0) == pytest.approx(1.0)
    assert lr_at(100, 100, 10, 1.0, 0.01) == pytest.approx(0.01)
    r = TrainRecipe(keep_rate=0.7, keep_start=1.0, keep_length=2.0)
    for e in (0.0, 0.99, 1.0, 1.5, 2.9, 3.0, 5.0):
        assert _keep_rate(e, r) == cosine_keep_rate(e, 0.7, 1.0, 2.0)
    step = r.replace(keep_length=0)  # EViT's fine-tuning: the target at once, from keep_start on
    assert _keep_rate(0.5, step) == 1.0
    assert _keep_rate(1.0, step) == 0.7
    assert _keep_rate(3.0, TrainRecipe()) == 1.0


def test_preprocess_pad_resize_channels_and_augment():
    x = torch.zeros(4, 1, 28, 28, dtype=torch.uint8)
    x[:, :, 10:12, 10:12] = 255
    pre = Preprocess(32, channels=1, mean=[0.0], std=[1.0], resize="pad")
    y = pre(x)
    assert y.shape == (4, 1, 32, 32) and y.dtype == torch.float32
    assert y[0, 0, 12:14, 12:14].min() == 1.0 and y.sum() == 4 * 4  # centred: 2 px of padding each side
    pre3 = Preprocess(56, channels=3, mean=[0.5] * 3, std=[0.25] * 3, resize="bilinear")
    z = pre3(x)
    assert z.shape == (4, 3, 56, 56) and torch.equal(z[:, 0], z[:, 2])
    aug = Preprocess(28, mean=[0.0], std=[1.0], crop_pad=3, hflip=True)
    g = torch.Generator().manual_seed(0)
    a = aug(x, train=True, generator=g)
    assert a.shape == (4, 1, 28, 28)
    assert torch.allclose(a.sum(dim=(1, 2, 3)), torch.full((4,), 4.0))  # shifts <= 3 px keep the square
    assert any(not torch.equal(a[i], a[0]) for i in range(1, 4))  # random per image
    assert torch.equal(aug(x, train=False), pre(x)[:, :, 2:30, 2:30])  # no augmentation at eval time
    f = torch.randn(3, 5)
    assert pre(f) is f  # features pass through


def test_as_tensors_from_split_and_subset():
    ds = recipe_data.load_recipe_data(TrainRecipe(dataset="fashion_mnist", dataset_kwargs={"val_fraction": 0.1, "seed": 0}))
    x, y = as_tensors(ds["test"], subset=100, seed=0)
    assert x.shape == (100, 1, 28, 28) and x.dtype == torch.uint8 and y.dtype == torch.int64
    x2, _ = as_tensors(ds["test"], subset=100, seed=0)
    assert torch.equal(x, x2)


# ---------------------------------------------------------------------------------------------- training


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_few_steps_reduce_the_loss(dtype):
    torch.manual_seed(0)
    x, y = tiny_problem(256)
    model = tiny_vit()
    fused = [m.fused_attn for m in model.modules() if hasattr(m, "fused_attn")]
    res = train(_tiny_recipe(dtype=dtype, epochs=3), model, (x, y), (x[:64], y[:64]), progress=False)
    assert res.steps == 3 * (256 // 32) and res.images_seen == res.steps * 32
    first, last = np.mean(res.losses[:3]), np.mean(res.losses[-3:])
    assert last < first - 0.3, (first, last)
    assert res.history[-1]["val_acc"] > 0.9
    logits, labels = evaluate(model, (x[:50], y[:50]), dtype=dtype)
    assert logits.shape == (50, 4) and labels.tolist() == y[:50].tolist()
    assert (logits.argmax(1) == labels).float().mean() > 0.9
    assert [m.fused_attn for m in model.modules() if hasattr(m, "fused_attn")] == fused  # restored


def test_fused_optimizer_gives_the_same_training_up_to_rounding():
    x, y = tiny_problem(128)
    weights = []
    for fused in (False, True):
        torch.manual_seed(0)
        model = tiny_vit()
        init = torch.cat([p.detach().flatten() for p in model.parameters()])
        train(_tiny_recipe(dtype="fp32", epochs=1), model, (x, y), None, progress=False, fused_optimizer=fused)
        weights.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert (weights[0] - init).abs().max() > 1e-3  # it trained
    torch.testing.assert_close(weights[1], weights[0], atol=1e-4, rtol=1e-4)


def test_bench_refuses_an_unknown_setting_and_names_the_accepted_parts():
    with pytest.raises(ValueError, match="settings") as err:
        bench_training(settings=("fp32+turbo",), rounds=1, progress=False)
    assert all(part in str(err.value) for part in ("turbo", "fp32", "bf16", "eager_attn", "compile", "fused_adamw"))


def test_keep_rate_warmup_changes_model_keep_rate():
    torch.manual_seed(0)
    x, y = tiny_problem(128)
    model = patch(tiny_vit(depth=4), keep_rate=1.0, locations=(2, 3))
    recipe = _tiny_recipe(epochs=3, keep_rate=0.5, keep_start=0.5, keep_length=1.5,
                          prune={"locations": [2, 3], "scorer": "cls_attention", "reducer": "fuse_attention"})
    seen, counts = [], []

    def hook(mod, args):
        if mod.training:
            seen.append({i + 1: r for i, r in prune_state(mod).schedule.keep_rates.items()})

    def after(mod, args, out):
        if mod.training:
            counts.append(list(prune_state(mod).token_counts))

    model.register_forward_pre_hook(hook)
    model.register_forward_hook(after)
    res = train(recipe, model, (x, y), None, progress=False)
    spe = res.steps_per_epoch
    assert spe == 4 and len(seen) == res.steps == 12
    for i, rates in enumerate(seen):
        want = cosine_keep_rate(i / spe, 0.5, 0.5, 1.5)
        assert rates == {2: pytest.approx(want), 3: pytest.approx(want)}, i
        assert res.keep_rates[i] == pytest.approx(want)
    assert seen[0][2] == 1.0 and seen[-1][2] == 0.5 and len({r[2] for r in seen}) > 4
    # the keep rate acts: 16 patches + [CLS] at first, fewer tokens at the end of the warm-up
    assert counts[0][-1] == 17 and counts[-1][-1] < 17


def test_compile_is_skipped_while_the_keep_rate_changes():
    x, y = tiny_problem(64)
    model = tiny_vit(depth=4)
    res = train(_tiny_recipe(epochs=1, keep_rate=0.5, prune={"locations": [2]}), model, (x, y), progress=False,
                compile=True)
    assert not res.compiled and prune_state(model) is not None


def test_lazy_image_split_trains_through_a_dataloader(tmp_path):
    from PIL import Image

    from tokenprune.data.datasets import load_image_folder

    x, y = tiny_problem(48, size=8)
    for split, idx in (("train", range(0, 40)), ("val", range(40, 48))):
        for i in idx:
            d = tmp_path / split / f"c{int(y[i])}"
            d.mkdir(parents=True, exist_ok=True)
            Image.fromarray(x[i, 0].numpy()).convert("RGB").save(d / f"{i}.png")
    ds = load_image_folder(tmp_path, val_fraction=0.0)
    model = tiny_vit()
    model.patch_embed.proj = torch.nn.Conv2d(3, 16, 2, 2)
    recipe = _tiny_recipe(epochs=1, batch_size=8, preprocess={"channels": 3, "mean": [0.5] * 3, "std": [0.5] * 3},
                          augment={"random_resized_crop": True, "hflip": True})
    res = train(recipe, model, ds["train"], ds["test"], progress=False, workers=0)
    assert res.steps == 40 // 8 and 0.0 <= res.history[-1]["val_acc"] <= 1.0
    logits, labels = evaluate(model, ds["test"], workers=0)
    assert logits.shape == (8, 4) and len(labels) == 8


def test_ddp_two_gloo_processes_end_with_identical_weights(tmp_path):
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(REPO / "lib"))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           "-m", "tokenprune.training.train_cli", "--ddp-check", str(tmp_path)]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r0 = torch.load(tmp_path / "rank0.pt", weights_only=False)
    r1 = torch.load(tmp_path / "rank1.pt", weights_only=False)
    assert r0["world_size"] == r1["world_size"] == 2
    for k, v in r0["state_dict"].items():
        assert torch.equal(v, r1["state_dict"][k]), k
    assert r0["losses"] != r1["losses"]  # each rank saw its own shard
    assert np.mean(r0["losses"][-3:]) < np.mean(r0["losses"][:3]) - 0.2
    metrics = ("epoch", "steps", "train_loss", "val_acc", "val_loss", "lr", "keep_rate")
    for h0, h1 in zip(r0["history"], r1["history"]):  # losses and eval metrics all-reduced
        assert {k: h0[k] for k in metrics} == {k: h1[k] for k in metrics}
    assert r0["history"][-1]["val_acc"] > 0.9


# ---------------------------------------------------------------------------------------------- checkpoints


def _cache_recipe() -> TrainRecipe:
    return TrainRecipe(name="cache_test", arch={"builder": "timm_vit", "img_size": 28, "patch_size": 7, "in_chans": 1,
                                               "num_classes": 10, "embed_dim": 16, "depth": 2, "num_heads": 2},
                       dataset="fashion_mnist", dataset_kwargs={"val_fraction": 0.1, "seed": 0},
                       preprocess={"channels": 1, "mean": [0.286], "std": [0.353], "resize": "pad"},
                       train_subset=128, val_subset=64, test_subset=200, epochs=1, batch_size=32, dtype="fp32",
                       store_dtype="fp16")


def test_checkpoint_cache_round_trip(tmp_path):
    recipe = _cache_recipe()
    model, info = tm.ensure_model(recipe, tmp_path, progress=False)
    pt, js = checkpoints.checkpoint_paths(recipe, tmp_path)
    assert not info["loaded"] and pt.is_file() and js.is_file()
    assert pt.name == f"cache_test-{recipe.recipe_hash()}.pt"
    side = json.loads(js.read_text())
    from tokenprune.utils.io import sha256_file

    assert side["sha256"] == sha256_file(pt) and side["recipe"] == recipe.to_dict() and side["seed"] == 0
    lo, hi = side["test"]["ci95"]
    assert side["test"]["n"] == 200 and lo <= side["test"]["accuracy"] <= hi
    assert side["stored_dtype"] == "fp16" and side["size_bytes"] == pt.stat().st_size
    # loaded, not retrained: same weights (fp16-rounded), preprocessing attached
    again, info2 = tm.ensure_model(recipe, tmp_path, progress=False)
    assert info2["loaded"]
    for k, v in model.state_dict().items():
        assert torch.equal(v, again.state_dict()[k]), k
    assert all(v.dtype == torch.float32 for v in again.state_dict().values())
    lg, lb = evaluate(again, recipe_data.load_recipe_data(recipe)["test"], subset=200, seed=0, dtype="fp32")
    assert (lg.argmax(1) == lb).float().mean().item() == pytest.approx(side["test"]["accuracy"])
    # a changed checkpoint is refused, or retrained on request
    with open(pt, "ab") as fh:
        fh.write(b"\0")
    with pytest.raises(checkpoints.CheckpointMismatchError, match=pt.name):
        tm.ensure_model(recipe, tmp_path, on_mismatch="raise", progress=False)
    _, info3 = tm.ensure_model(recipe, tmp_path, on_mismatch="retrain", progress=False)
    assert not info3["loaded"] and checkpoints.verify_checkpoint(pt, js)["sha256"] == sha256_file(pt)
    js.unlink()   # the weights without their sidecar: the sidecar is named as missing, not the checkpoint
    with pytest.raises(checkpoints.CheckpointError, match=js.name) as err:
        checkpoints.verify_checkpoint(pt, js)
    assert not isinstance(err.value, checkpoints.CheckpointMissingError)
    pt.unlink()
    with pytest.raises(checkpoints.CheckpointMissingError):
        checkpoints.verify_checkpoint(pt, js)


def test_load_base_model_says_how_to_build_a_missing_one(tmp_path):
    with pytest.raises(checkpoints.CheckpointMissingError, match="python -m tokenprune models"):
        tm.load_base_model("small_vit_fmnist", cache_dir=tmp_path)
    with pytest.raises(ValueError, match="unknown"):
        tm.load_base_model("no_such_model", cache_dir=tmp_path)


# every smoke model, the pre-registered candidates at 112 and 196 px included: a guard against a hang, with room for
# one thread of a slow 2-core CPU beside the other test worker
@pytest.mark.timeout(1800)
def test_smoke_profile_builds_every_model(tmp_path):
    infos = tm.build_profile("smoke", cache_dir=tmp_path, progress=False, skip_missing_weights=True)
    names = {i["name"] for i in infos}
    assert {"small_vit_fmnist_smoke", "s14_birds_easy_smoke", "s14d_birds196_smoke"} <= names
    # the models of rounds 2 and 3 store blocks 4-12 (about 32 MB) and are budgeted as a round (REPO_BUDGET_MB)
    deep = {f"{n}_smoke" for n in {**model_recipes.round2_recipes(), **model_recipes.round3_recipes()}}
    for info in infos:
        assert Path(info["path"]).is_file()
        assert info["size_bytes"] <= checkpoints.MAX_CHECKPOINT_BYTES or info["name"] in deep
        assert 0.0 <= info["test"]["accuracy"] <= 1.0
    for info in infos:  # second call: everything from the cache
        model, again = tm.load_base_model(info["name"], cache_dir=tmp_path)
        assert again["loaded"] and again["sha256"] == info["sha256"]
        assert model.tp_preprocess.img_size == again["recipe"]["img_size"]


def test_paper_recipe_follows_evit_finetuning():
    (name, r), = model_recipes.paper_recipes().items()
    assert r.keep_rate == 0.7 and r.keep_length == 0 and r.keep_start == 0 and r.epochs == 30
    assert _keep_rate(0.0, r) == 0.7
    with pytest.raises(ValueError, match="--init"):
        tm.build_profile("paper", cache_dir="/nonexistent")


def test_bench_runs():
    rows = bench_training(settings=("fp32", "bf16+eager_attn"), embed_dim=32, num_heads=2, batch=8, rounds=1,
                          steps_per_round=1, warmup=1, progress=False)
    assert [r["setting"] for r in rows] == ["fp32", "bf16+eager_attn"] and rows[0]["ratio"] == 1.0
    assert all(r["img_per_s"] > 0 for r in rows)


def test_paper_builder_loads_a_local_checkpoint(tmp_path):
    import argparse

    import timm

    src = timm.create_model("deit_tiny_patch16_224", pretrained=False, num_classes=1000)
    path = tmp_path / "deit_tiny.pth"
    torch.save({"model": src.state_dict(), "args": argparse.Namespace(lr=1.0)}, path)  # DeiT's release layout
    (name, r), = model_recipes.paper_recipes(init=path).items()
    from tokenprune.utils.io import sha256_file

    assert r.arch["init_sha256"] == sha256_file(path)
    r = r.replace(arch={**r.arch, "model": "deit_tiny_patch16_224"})
    model = tm.build_model(r, init=path)
    for k, v in src.state_dict().items():
        assert torch.equal(v, model.state_dict()[k]), k


def test_make_models_in_parts_stops_starting_builds_at_its_deadline_and_a_rerun_continues(tmp_path, capsys):
    import time as _time

    left: list = []
    # a deadline already past: nothing is trained, every missing model is left for the next part
    infos = tm.build_profile("smoke", only=["small_vit_fmnist_smoke"], cache_dir=tmp_path, progress=False,
                             deadline=_time.monotonic() - 1, left=left)
    assert infos == [] and left == ["small_vit_fmnist_smoke"] and not any(tmp_path.iterdir())
    # the next part builds it; a part after that loads it even past its deadline
    assert len(tm.build_profile("smoke", only=["small_vit_fmnist_smoke"], cache_dir=tmp_path, progress=False)) == 1
    left = []
    infos = tm.build_profile("smoke", only=["small_vit_fmnist_smoke"], cache_dir=tmp_path, progress=False,
                             deadline=_time.monotonic() - 1, left=left)
    assert len(infos) == 1 and infos[0]["loaded"] and left == []
    from tokenprune.utils.io import InputError

    with pytest.raises(InputError, match="--max-minutes"):
        models_cli.check_args(models_cli.build_parser().parse_args(["--profile", "smoke", "--max-minutes", "0"]))


def test_make_models_in_parts_leaves_the_output_builders_for_the_next_part(monkeypatch, capsys):
    from tokenprune.training import models_cli

    called = []
    monkeypatch.setattr(models_cli, "build_base_models", lambda args: 0)
    monkeypatch.setattr(models_cli, "OUTPUT_BUILDERS",
                        tuple(lambda n=n, **kw: called.append(n) or [] for n in ("a", "b")))
    assert models_cli.main(["--max-minutes", "1e-9"]) == 0 and called == []
    assert capsys.readouterr().out.strip()   # it says what is left
    assert models_cli.main([]) == 0 and called == ["a", "b"]
