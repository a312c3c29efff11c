"""Runs cached as their outputs (tokenprune.training.checkpoints): keyed by recipe hash, verified by SHA-256."""
import numpy as np
import pytest
import torch

from tokenprune.training import checkpoints
from tokenprune.training.checkpoints import CheckpointMismatchError, CheckpointMissingError
from tokenprune.training.recipe import TrainRecipe


def _run(calls):
    def run():
        calls.append(1)
        return {"logits": np.arange(6, dtype=np.float16).reshape(3, 2), "labels": np.array([1, 0, 1], np.int16)}, \
            {"weights_sha256": "ab" * 32, "test": {"n": 3, "accuracy": 1.0}, "train_time_s": 1.0}
    return run


def test_ensure_outputs_runs_once_then_loads(tmp_path):
    rec = TrainRecipe(name="r", epochs=1.0)
    calls = []
    arrays, info = checkpoints.ensure_outputs(rec, _run(calls), tmp_path)
    assert not info["loaded"] and info["recipe_hash"] == rec.recipe_hash() and len(calls) == 1
    again, info2 = checkpoints.ensure_outputs(rec, _run(calls), tmp_path)
    assert info2["loaded"] and len(calls) == 1
    assert np.array_equal(again["logits"], arrays["logits"]) and again["logits"].dtype == np.float16
    # another recipe is another entry, never the same file
    other = rec.replace(seed=1)
    assert checkpoints.output_paths(other, tmp_path)[0] != checkpoints.output_paths(rec, tmp_path)[0]
    assert not checkpoints.has_outputs(other, tmp_path)


def test_load_outputs_refuses_missing_and_changed_files(tmp_path):
    rec = TrainRecipe(name="r", epochs=1.0)
    with pytest.raises(CheckpointMissingError, match="make models"):
        checkpoints.load_outputs(rec, tmp_path)
    checkpoints.ensure_outputs(rec, _run([]), tmp_path)
    npz, _ = checkpoints.output_paths(rec, tmp_path)
    npz.write_bytes(npz.read_bytes() + b"x")
    with pytest.raises(CheckpointMismatchError, match=npz.name):  # the changed file named
        checkpoints.load_outputs(rec, tmp_path)


def test_save_outputs_needs_the_weights_digest(tmp_path):
    with pytest.raises(ValueError, match="weights_sha256"):
        checkpoints.save_outputs(TrainRecipe(name="r", epochs=1.0), {"a": np.zeros(1)}, {}, tmp_path)


def test_weights_sha256_follows_the_weights_and_the_prefixes():
    torch.manual_seed(0)
    a = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 2))
    b = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Linear(2, 2))
    b.load_state_dict(a.state_dict())
    assert checkpoints.weights_sha256(a) == checkpoints.weights_sha256(b)
    with torch.no_grad():
        b[0].weight[0, 0] += 1e-3
    assert checkpoints.weights_sha256(a) != checkpoints.weights_sha256(b)
    assert checkpoints.weights_sha256(a, ["1."]) == checkpoints.weights_sha256(b, ["1."])   # only layer 1 hashed
