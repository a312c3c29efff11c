"""The paper profile's training (tokenprune.training.paper_training, its command line tokenprune.study.paper_runs) on fixture data in ImageNet's release format:
DeiT-S at 224 px, the recipes as written, shrunk only in batch, steps, epochs and evaluation images; one
run under a 2-process torchrun (gloo) on the CPU; a killed run resumes after its last epoch."""
import json
import os
import re
import subprocess
import sys

import pytest

from tokenprune.core.patch import prune_state
from tokenprune.study import paper_runs
from tokenprune.training import paper_training as pt, recipe_book
from tokenprune.training.recipe_book import load_recipe

def _spec(**values):
    spec = recipe_book.run_specs(load_recipe("evit_deit_s_finetune"))[0]
    v = {**spec.values, "num_classes": 4, **values}             # the fixture's classes (tests/paper/conftest.py)
    return recipe_book.RunSpec(**{**{f: getattr(spec, f) for f in ("recipe", "model", "init", "dataset", "keep_rate", "seed",
                                                          "scorer", "reducer", "reducer_options")}, "values": v})


LIMITS = recipe_book.Limits(batch_per_process=2, steps_per_epoch=2, epochs=1, eval_images=4, workers=0)


def test_run_specs_expand_every_list():
    assert [s.keep_rate for s in recipe_book.run_specs(load_recipe("bat_deit_s_finetune"))] == [0.6, 0.5, 0.4, 0.3, 0.2]
    dec = recipe_book.run_specs(load_recipe("decoupling_fgvc_finetune"))
    assert len(dec) == 6 and {(s.model, s.init) for s in dec} == {
        ("deit_small_patch16_224", "deit_small_patch16_224-cd65a155.pth"),
        ("deit_base_patch16_224", "deit_base_patch16_224-b5f2ef4d.pth")}
    vm = recipe_book.run_specs(load_recipe("varmedad_deit_s_imagenet100"))
    assert {s.reducer for s in vm} == {"fuse_softmax"} and len(vm) == 4 * 3      # 4 temperatures x 3 seeds
    assert len({s.spec_hash() for s in vm}) == len(vm)


def test_keep_rate_schedule_follows_the_recipe():
    ft = recipe_book.run_specs(load_recipe("evit_deit_s_finetune"))[0]
    assert pt._keep_rate_at(ft, 0.0) == pytest.approx(0.7)                 # fine-tuning: the target from iteration 0
    sc = recipe_book.run_specs(load_recipe("evit_deit_s_scratch"))[0]
    assert pt._keep_rate_at(sc, 5.0) == 1.0                                # from scratch: 1 until epoch 10
    assert 0.7 < pt._keep_rate_at(sc, 60.0) < 1.0 and pt._keep_rate_at(sc, 110.0) == pytest.approx(0.7)


def test_gpu_hours_say_where_the_speed_comes_from():
    g = paper_runs.gpu_hours(recipe_book.run_specs(load_recipe("evit_deit_s_finetune"))[0])
    assert g.images == 30 * 1_281_167 and "EViT README" in g.source and "not measured" in g.source
    assert g.hours == pytest.approx(g.images / (4385 / 3) / 3600)
    m = paper_runs.gpu_hours(recipe_book.run_specs(load_recipe("evit_deit_s_finetune"))[0], measured_img_per_s=2000, measured_on="H200")
    assert "measured" in m.source and m.hours == pytest.approx(g.images / 2000 / 3600)


@pytest.mark.slow
def test_train_run_trains_resumes_and_refuses_another_run(imagenet, tmp_path):
    root, init = imagenet.root, imagenet.init_dir
    spec = _spec()
    s1 = pt.train_run(spec, tmp_path, root, init, LIMITS, device="cpu", progress=False)
    assert len(s1["history"]) == 1 and s1["history"][0]["images"] == 4 and s1["resumed_from"] is None
    h = s1["history"][0]
    assert h["keep_rate"] == pytest.approx(0.7) and 0 <= h["top1"] <= 100 and "top1_ema" in h
    assert s1["lr"] == pytest.approx(2e-5 * 2 / 512)                    # linear scaling at the batch that ran
    # a second epoch continues from the checkpoint instead of starting again
    s2 = pt.train_run(spec, tmp_path, root, init, recipe_book.Limits(2, 2, 2, 4, 0), device="cpu", progress=False)
    assert s2["resumed_from"] == 0 and [r["epoch"] for r in s2["history"]] == [0, 1]
    assert s2["history"][0] == h
    assert len((tmp_path / "log.jsonl").read_text().splitlines()) == 2
    other = _spec(keep_rate=0.5, base_lr=1e-4)
    with pytest.raises(ValueError, match=other.spec_hash()):  # out_dir holds another run: the run asked for is named
        pt.train_run(other, tmp_path, root, init, LIMITS, device="cpu", progress=False)


def test_missing_init_names_the_flag(tmp_path):
    with pytest.raises(FileNotFoundError, match="--init-dir"):
        pt.run_model(_spec(), 4, tmp_path)


@pytest.mark.slow
def test_torchrun_two_processes_gloo(imagenet, tmp_path):
    """``torchrun --nproc_per_node 2`` on the CPU (gloo): both ranks train, rank 0 writes the summary, the global
    batch is both processes' images."""
    root, init = imagenet.root, imagenet.init_dir
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m", "tokenprune",
           "paper-train", "--recipe", "evit_deit_s_finetune", "--data-root", str(root), "--init-dir", str(init),
           "--out", str(tmp_path), "--device", "cpu", "--batch-per-process", "2", "--steps-per-epoch", "2",
           "--epochs", "1", "--eval-images", "4", "--workers", "0"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=280)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "A100-hours" in r.stdout
    (summary,) = list(tmp_path.glob("*/summary.json"))
    s = json.loads(summary.read_text())
    assert s["world_size"] == 2 and s["global_batch"] == 4 and s["history"][0]["images"] == 8


@pytest.mark.slow
def test_a_run_under_other_limits_is_refused(imagenet, tmp_path):
    pt.train_run(_spec(), tmp_path, imagenet.root, imagenet.init_dir, LIMITS, device="cpu", progress=False)
    shorter = recipe_book.Limits(2, 1, 2, 4, 0)
    with pytest.raises(ValueError, match=re.escape(str(recipe_book.training_limits(shorter)))):  # the limits asked for named
        pt.train_run(_spec(), tmp_path, imagenet.root, imagenet.init_dir, shorter, device="cpu", progress=False)


def test_a_prepared_run_needs_a_tag_and_no_warm_up(tmp_path):
    spec = _spec()
    with pytest.raises(ValueError, match="RunSpec.tag"):
        pt.train_run(spec, tmp_path, prepare=lambda m: m)
    scratch = recipe_book.run_specs(load_recipe("evit_deit_s_scratch"))[0]
    import dataclasses
    with pytest.raises(ValueError, match="shrink_start_epoch"):
        pt.train_run(dataclasses.replace(scratch, tag="mine"), tmp_path, prepare=lambda m: m)


def test_paper_scale_ids_are_their_own():
    assert paper_runs.paper_scale_id("bat.top1.deit_s.keep0.5") == "bat.paper_scale.top1.deit_s.keep0.5"
    with pytest.raises(ValueError, match="claim_id"):
        paper_runs.paper_scale_id("nodot")


@pytest.mark.slow
def test_notebooks_train_then_load_and_a_shortened_run_is_not_judged(imagenet, tmp_path):
    """:func:`paper_runs.trained_model`: a missing run trains (under the notebook's limits), a finished one loads
    with the same weights, and the premise 'whole schedule' fails on the shortened run, naming it; a given
    checkpoint is loaded as it is."""
    from types import SimpleNamespace

    import torch

    cfg = SimpleNamespace(train_batch_per_process=2, train_steps_per_epoch=1, train_epochs=1, train_eval_images=2,
                          train_workers=0,
                          runs_dir=str(tmp_path / "runs"))
    spec = recipe_book.run_specs(load_recipe("evit_deit_s_finetune"))[0]
    init = imagenet.init_dir / imagenet.init
    a = paper_runs.trained_model(spec, cfg, str(imagenet.root), str(init), device="cpu")
    assert a.source == "trained" and a.epochs_trained == 1 and not a.full_schedule
    assert (tmp_path / "runs" / spec.name / "summary.json").is_file()
    b = paper_runs.trained_model(spec, cfg, str(imagenet.root), str(init), device="cpu")
    assert b.source == "loaded"
    x = torch.randn(2, 3, 224, 224)
    with torch.inference_mode():
        assert torch.equal(a.model(x), b.model(x))
    assert prune_state(b.model).schedule.at(3) == pytest.approx(0.7)           # pruning as evaluated: EViT's keep 0.7 (block 4)
    prem = paper_runs.full_schedule_premise([a])
    assert not prem.holds and "1 of 30 epochs" in prem.detail and "shortened" in prem.detail
    torch.save({"model": a.model.state_dict()}, tmp_path / "given.pth")
    g = paper_runs.trained_model(spec, cfg, str(imagenet.root), None, given=str(tmp_path / "given.pth"))
    assert g.source == "given" and g.full_schedule
    with torch.inference_mode():
        assert torch.equal(g.model(x), a.model(x))


def test_randaugment_posterize_at_full_magnitude_runs():
    """The paper recipes' RandAugment draws magnitudes around 9 (sd 0.5): at 10 its increasing posterize keeps 0 bits,
    which the installed Pillow must accept (Pillow 13 raises, which stopped a training run at a random step)."""
    from PIL import Image
    from timm.data.auto_augment import AugmentOp

    op = AugmentOp("PosterizeIncreasing", prob=1.0, magnitude=10)
    out = op(Image.new("RGB", (8, 8), (200, 100, 50)))
    assert out.size == (8, 8)
