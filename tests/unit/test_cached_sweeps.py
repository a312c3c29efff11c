"""Cached off-the-shelf sweeps: an entry gives the predictions the sweep computes and the same table; a sweep without an
entry is computed, or refused under the cache-only setting; another model or other labels are refused when read; a
random scorer's rows, which depend on the batch, are computed on each read."""
from __future__ import annotations

import pandas as pd
import pytest
import timm
import torch

from tokenprune.core.config import PruneConfig
from tokenprune.core.patch import patch
from tokenprune.measure import evaluation
from tokenprune.study import cached_sweeps as cs
from tokenprune.training import checkpoints
from tokenprune.training.recipe import TrainRecipe
from tokenprune.utils.environment import CACHE_ONLY_ENV

NAME = "evit_synthbirds"


def _inputs(seed: int = 0, configs=None) -> cs.SweepInputs:
    torch.manual_seed(seed)
    m = patch(timm.create_model("vit_tiny_patch16_224", img_size=32, patch_size=8, embed_dim=32, num_heads=2,
                                num_classes=5).eval(), keep_rate=1.0)
    g = torch.Generator().manual_seed(0)
    images, labels = torch.randn(80, 3, 32, 32, generator=g), torch.randint(0, 5, (80,), generator=g)
    configs = configs or [PruneConfig(keep_rate=0.5, reducer="fuse_attention", name="fuse@0.5"),
                          PruneConfig(keep_rate=0.5, reducer="drop", name="drop@0.5"),
                          PruneConfig(keep_rate=0.5, scorer="centre", reducer="drop", locations=(3,),
                                      name="centre@0.5")]
    info = {"recipe": TrainRecipe(name="tiny", img_size=32).to_dict(), "sha256": "0" * 64}
    return cs.SweepInputs(m, info, images, labels, configs, batch=40, dtype="fp32", seed=0)


@pytest.fixture()
def folder(tmp_path, monkeypatch):
    monkeypatch.setattr(checkpoints, "checkpoint_dir", lambda profile="default": tmp_path)
    monkeypatch.delenv(CACHE_ONLY_ENV, raising=False)
    return tmp_path


def test_an_entry_gives_the_computed_predictions_and_table(folder, monkeypatch):
    inp = _inputs()
    computed = cs.cached_sweep(NAME, inp, "default")                 # no entry yet: computed
    table, preds = evaluation.prune_sweep(inp.model, inp.images, inp.labels, inp.configs, batch=40)
    assert set(computed) == set(preds) == {"unpruned", "fuse@0.5", "drop@0.5", "centre@0.5"}
    checkpoints.ensure_outputs(cs.sweep_recipe(NAME, inp), lambda: cs.measure(inp), folder)
    monkeypatch.setattr(cs, "sweep_predictions", lambda *a, **k: pytest.fail("the entry was not read"))
    cached = cs.cached_sweep(NAME, inp, "default")
    for k, p in preds.items():
        assert torch.equal(cached[k].logits, p.logits) and torch.equal(cached[k].labels, p.labels)
    pd.testing.assert_frame_equal(evaluation.sweep_table(inp.model, cached, inp.configs), table)


def test_without_an_entry_the_sweep_is_refused_under_cache_only(folder, monkeypatch):
    monkeypatch.setenv(CACHE_ONLY_ENV, "1")
    with pytest.raises(checkpoints.CheckpointMissingError, match="make models"):
        cs.cached_sweep(NAME, _inputs(), "default")
    assert set(cs.cached_sweep(NAME, _inputs(), "smoke")) == {"unpruned", "fuse@0.5", "drop@0.5", "centre@0.5"}


def test_another_model_or_other_labels_are_refused(folder):
    inp = _inputs()
    checkpoints.ensure_outputs(cs.sweep_recipe(NAME, inp), lambda: cs.measure(inp), folder)
    with pytest.raises(checkpoints.CheckpointMismatchError, match="differ"):
        cs.cached_sweep(NAME, _inputs(seed=1), "default")            # same recipe, other weights
    other = _inputs()
    other.labels = (other.labels + 1) % 5
    with pytest.raises(checkpoints.CheckpointMismatchError, match="labels"):
        cs.cached_sweep(NAME, other, "default")


def test_another_configuration_finds_no_entry(folder):
    inp = _inputs()
    checkpoints.ensure_outputs(cs.sweep_recipe(NAME, inp), lambda: cs.measure(inp), folder)
    other = _inputs(configs=[PruneConfig(keep_rate=0.7, reducer="drop", name="drop@0.5")])
    assert cs.sweep_recipe(NAME, other).recipe_hash() != cs.sweep_recipe(NAME, inp).recipe_hash()
    assert not checkpoints.has_outputs(cs.sweep_recipe(NAME, other), folder)


def test_a_random_scorer_is_computed_on_each_read_with_the_sweeps_logits(folder, monkeypatch):
    """Its draws depend on the batch, so the entry does not hold it; computed apart it gives the sweep's logits."""
    rand = PruneConfig(keep_rate=0.5, scorer="random", name="random@0.5")
    inp = _inputs(configs=[PruneConfig(keep_rate=0.5, reducer="drop", name="drop@0.5"), rand])
    assert [c.label for c in cs.cached_configs(inp)] == ["drop@0.5"]
    _, preds = evaluation.prune_sweep(inp.model, inp.images, inp.labels, inp.configs, batch=40)
    checkpoints.ensure_outputs(cs.sweep_recipe(NAME, inp), lambda: cs.measure(inp), folder)
    assert "logits/random@0.5" not in checkpoints.load_outputs(cs.sweep_recipe(NAME, inp), folder)[0]
    got = cs.cached_sweep(NAME, inp, "default")
    assert list(got) == ["unpruned", "drop@0.5", "random@0.5"]
    assert all(torch.equal(got[k].logits, preds[k].logits) for k in preds)


def test_repeated_labels_and_an_unknown_sweep_are_refused(folder):
    drop = PruneConfig(keep_rate=0.5, reducer="drop", name="drop@0.5")
    with pytest.raises(ValueError, match="configs"):
        cs.cached_sweep(NAME, _inputs(configs=[drop, drop]), "default")
    with pytest.raises(ValueError, match="name"):
        cs.cached_sweep("no_such_sweep", _inputs(), "default")
