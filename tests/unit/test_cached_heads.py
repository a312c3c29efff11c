"""Notebook 04's heads cached as their outputs: an entry gives back exactly what training gave, is found only by the
same model, data and parameters, is rechecked against the model in hand, and ``python -m tokenprune models`` builds
it after the training layer's outputs."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch
from timm.models.vision_transformer import VisionTransformer

from tokenprune.study import cached_results
from tokenprune.study.decoupling import cached_heads, heads
from tokenprune.study.decoupling.data import Caches, Setting
from tokenprune.study.notebook import Stopwatch
from tokenprune.core import split_forward as split
from tokenprune.training import checkpoints, models_cli
from tokenprune.utils.environment import CACHE_ONLY_ENV


def _setting(seed: int = 0, n_train: int = 12, n_eval: int = 10) -> Setting:
    torch.manual_seed(seed)
    model = VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=4, num_heads=2, num_classes=3).eval()
    g = torch.Generator().manual_seed(seed)
    raw = torch.randint(0, 256, (n_eval, 32, 32, 3), generator=g, dtype=torch.uint8)
    x_eval = raw.permute(0, 3, 1, 2).float() / 255
    x_train = torch.rand(n_train, 3, 32, 32, generator=g)
    return Setting("parts/small", "parts", "a 4-block ViT", model, x_train, torch.arange(n_train) % 3, x_eval,
                   torch.arange(n_eval) % 3, raw.numpy(), None, torch.rand(n_eval, 16, generator=g) > 0.5, (4, 4),
                   [1, 2, 3], info={"name": "tiny", "recipe_hash": "0" * 12, "sha256": "1" * 64})


def _cfg(**changes) -> SimpleNamespace:
    cfg = dict(profile="default", seed=0, seeds=[0, 1], steps=3, head_batch=4, head_lr=1e-3, signal="grad",
               signal_target="pred_logit", probes=1, fd_probes=1, rank_loss="listnet", task_tau=0.5,
               keep_rates=[0.5, 0.75], dtype="fp32", task_settings=["parts/small"])
    return SimpleNamespace(**{**cfg, **changes})


def _caches(S: Setting) -> Caches:
    return Caches({S.name: split.cache_tokens(S.model, S.x_train, S.blocks, dtype="fp32")},
                  {S.name: split.cache_tokens(S.model, S.x_eval, S.blocks, dtype="fp32")})


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """A setting, its caches, its heads trained here and their entry saved in a folder of its own."""
    S, cfg = _setting(), _cfg()
    caches = _caches(S)
    fresh = heads.train_setting(S.name, S, caches.train[S.name], caches.eval[S.name], cfg, Stopwatch())
    folder = tmp_path_factory.mktemp("cache")
    arrays, info = cached_heads.to_arrays(S.name, S, fresh, cfg)
    checkpoints.save_outputs(cached_heads.heads_recipe(S.name, S, cfg), arrays, info, folder)
    return S, cfg, caches, fresh, folder


def test_a_loaded_entry_gives_back_what_training_gave(built):
    S, cfg, caches, fresh, folder = built
    loaded = cached_heads.trained_heads({S.name: S}, caches, cfg, Stopwatch(), cache_dir=folder)
    assert list(loaded.scores) == list(fresh.scores) and len(fresh.scores) == 3 * 4 + 2   # 2 seeds x 2 kinds x 3 blocks + task
    assert all(torch.equal(loaded.scores[k], fresh.scores[k]) for k in fresh.scores)
    assert all(torch.equal(loaded.signal_eval[k], fresh.signal_eval[k]) for k in fresh.signal_eval)
    assert loaded.log.equals(fresh.log)
    key = heads.check_head_key(S.name, S, cfg)
    assert list(loaded.heads) == [key]
    want, got = fresh.heads[key].state_dict(), loaded.heads[key].state_dict()
    assert all(torch.equal(want[k], got[k]) for k in want)
    # what the notebook reads next is the same as from the heads trained here
    a = heads.score_all({S.name: S}, caches.eval, loaded, cfg)
    b = heads.score_all({S.name: S}, caches.eval, fresh, cfg)
    assert list(a) == list(b) and all(torch.equal(a[k], b[k]) for k in a)


def test_another_model_fails_the_recheck(built):
    S, cfg, _, _, folder = built
    other = _setting()
    with torch.no_grad():
        other.model.blocks[2].mlp.fc2.weight.mul_(1.5)
    with pytest.raises(checkpoints.CheckpointMismatchError, match="parts/small"):
        cached_heads.trained_heads({other.name: other}, _caches(other), cfg, Stopwatch(), cache_dir=folder)


@pytest.mark.parametrize("change", ["steps", "label", "model", "task"])
def test_other_parameters_data_or_model_find_no_entry(built, change, monkeypatch):
    S, cfg, caches, _, folder = built
    S2, cfg2 = _setting(), _cfg()
    if change == "steps":
        cfg2.steps = 4
    elif change == "label":
        S2.y_eval = S2.y_eval.clone()
        S2.y_eval[0] = (S2.y_eval[0] + 1) % 3
    elif change == "model":
        S2.info = {**S2.info, "sha256": "2" * 64}
    else:
        cfg2.task_settings = []
    rec = cached_heads.heads_recipe(S2.name, S2, cfg2)
    assert rec.recipe_hash() != cached_heads.heads_recipe(S.name, S, cfg).recipe_hash()
    assert not checkpoints.has_outputs(rec, folder)
    monkeypatch.setenv(CACHE_ONLY_ENV, "1")   # no entry at default: an error where building is forbidden
    with pytest.raises(checkpoints.CheckpointMissingError, match="make models"):
        cached_heads.trained_heads({S2.name: S2}, caches, cfg2, Stopwatch(), cache_dir=folder)


def test_without_an_entry_the_heads_are_trained_here(built, tmp_path):
    S, cfg, caches, fresh, _ = built
    again = cached_heads.trained_heads({S.name: S}, caches, cfg, Stopwatch(), cache_dir=tmp_path)
    assert len(again.heads) == len(fresh.heads) and not list(tmp_path.iterdir())   # trained, nothing written
    assert all(torch.allclose(again.scores[k], fresh.scores[k], atol=1e-6) for k in fresh.scores)


def test_the_data_digest_reads_integer_data_only():
    a, b = _setting(), _setting()
    b.x_train = b.x_train + 1e-7   # float images are not hashed (their last bits may differ between CPUs)
    assert cached_heads.data_sha256(a) == cached_heads.data_sha256(b)
    b.raw_eval = np.array(b.raw_eval)
    b.raw_eval[0, 0, 0, 0] ^= 1
    assert cached_heads.data_sha256(a) != cached_heads.data_sha256(b)


def test_only_the_default_profile_builds_heads():
    assert cached_heads.build_cached("smoke") == [] and cached_heads.build_cached("paper") == []


def test_the_models_command_runs_the_studys_builders_after_the_training_layers(monkeypatch):
    called = []
    monkeypatch.setattr(models_cli, "build_base_models", lambda args: 0)
    monkeypatch.setattr(models_cli, "OUTPUT_BUILDERS", (lambda **kw: called.append("training") or [],))
    monkeypatch.setattr(cached_results, "STUDY_BUILDERS", (lambda **kw: called.append("study") or [],))
    assert cached_results.main([]) == 0 and called == ["training", "study"]
