"""Every committed artefact in ``data/checkpoints`` is the one the code names: its sidecar's recipe hashes to the
recipe hash the sidecar and the file name record, a checkpoint's recipe is the one the ``default`` profile computes
today, and the SHA-256 of the weights or outputs is the one the sidecar records."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tokenprune.training.checkpoints import checkpoint_dir
from tokenprune.training.model_recipes import default_recipes, round_recipes
from tokenprune.training.recipe import TrainRecipe
from tokenprune.utils.io import sha256_file

SIDECARS = sorted(checkpoint_dir("default").glob("*.json"))


def test_there_are_committed_artefacts():
    assert SIDECARS, f"no sidecar in {checkpoint_dir('default')}"


@pytest.mark.parametrize("sidecar", SIDECARS, ids=lambda p: p.stem)
def test_sidecar_recipe_hash_is_what_the_code_computes(sidecar: Path):
    info = json.loads(sidecar.read_text(encoding="utf-8"))
    recipe = TrainRecipe.from_dict(info["recipe"])
    assert recipe.recipe_hash() == info["recipe_hash"]
    assert sidecar.stem == f"{info['name']}-{info['recipe_hash']}"
    artefact = sidecar.parent / (info.get("checkpoint") or info["outputs"])
    assert artefact.stem == sidecar.stem
    assert sha256_file(artefact) == info["sha256"]


@pytest.mark.parametrize("sidecar", [p for p in SIDECARS if p.with_suffix(".pt").is_file()], ids=lambda p: p.stem)
def test_committed_checkpoint_is_the_default_profiles_recipe(sidecar: Path):
    """A committed checkpoint is the recipe the code computes today: the default profile's, or a round-2 or round-3
    candidate's of the proxy (built on their own, beside them)."""
    info = json.loads(sidecar.read_text(encoding="utf-8"))
    recipes = {**default_recipes(), **round_recipes(2), **round_recipes(3)}
    assert recipes[info["name"]].recipe_hash() == info["recipe_hash"]


def test_round2_stays_within_its_repository_budget():
    """What round 2 of the proxy commits (its candidates' checkpoints, outputs and fine-tunes, with their sidecars)
    fits the growth its plan allows."""
    from tokenprune.training.proxy import round2

    names = tuple(c.name for c in round2.CANDIDATES)
    files = [p for p in checkpoint_dir("default").iterdir() if p.is_file() and p.name.startswith(names)]
    assert sum(p.stat().st_size for p in files) <= round2.REPO_BUDGET_MB * 1e6
