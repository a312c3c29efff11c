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


def _owner(stem: str, names: list[str]) -> str | None:
    """The candidate a committed file belongs to: the longest of ``names`` that is its stem's recipe name or prefixes
    it before ``_`` or ``-`` (round 3's ``s14d_fmnist112_full`` is not round 2's ``s14d_fmnist112``)."""
    return max((n for n in names if stem == n or stem.startswith((f"{n}_", f"{n}-"))), key=len, default=None)


@pytest.mark.parametrize("round_", [2, 3])
def test_each_round_stays_within_its_repository_budget(round_):
    """What a round of the proxy commits (its candidates' checkpoints, outputs and fine-tunes, with their sidecars)
    fits the growth its plan allows; a file counts for the candidate whose name it carries, whichever round."""
    import importlib

    from tokenprune.training.proxy import candidates, round2, round3

    mod = importlib.import_module(f"tokenprune.training.proxy.round{round_}")
    names = [c.name for c in candidates.CANDIDATES + round2.CANDIDATES + round3.CANDIDATES]
    mine = {c.name for c in mod.CANDIDATES}
    files = [p for p in checkpoint_dir("default").iterdir() if p.is_file() and _owner(p.stem, names) in mine]
    assert _owner("s14d_fmnist112_full-dba9d413ea74", names) == "s14d_fmnist112_full"
    assert sum(p.stat().st_size for p in files) <= mod.REPO_BUDGET_MB * 1e6
