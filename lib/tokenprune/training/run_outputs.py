"""Training runs cached as their outputs, not their weights.

Where a run's weights do not fit the committed-artefact budget, the cache keeps what the notebooks read from it:
its per-image outputs on a fixed image set (the logits, float32), beside the recipe, its hash, and the SHA-256 of
the weights that produced them (:func:`weights_sha256`). ``<name>-<hash>.npz`` holds the arrays, ``<name>-<hash>.json``
the sidecar (recipe, seed, SHA-256 of the .npz, weights SHA-256, accuracy, time, provenance); ``<hash>`` is
:meth:`tokenprune.training.loop.TrainRecipe.recipe_hash`, so a changed recipe is a new entry and never overwrites an
old one, exactly as for checkpoints (:mod:`tokenprune.training.base_models`). They live beside the checkpoints of
their profile (``data/checkpoints`` for ``default``, committed; ``data/checkpoints/<profile>`` otherwise).

Who builds them: :mod:`tokenprune.training.cached_finetunes` (the runs declared as data there), which ``python -m
tokenprune models`` (``make models``; :mod:`tokenprune.training.models_command`) calls after the base models.
"""
from __future__ import annotations

import hashlib
import io
import os
import time
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

import numpy as np
import torch
import torch.nn as nn

from tokenprune.training.loop import TrainRecipe

__all__ = ["OUTPUTS_FORMAT", "weights_sha256", "output_paths", "save_outputs", "load_outputs", "has_outputs",
           "ensure_outputs", "describe"]

OUTPUTS_FORMAT = "tokenprune-run-outputs-v1"


def weights_sha256(model: nn.Module, prefixes: Optional[Sequence[str]] = None) -> str:
    """SHA-256 over the model's state dict (or the entries under ``prefixes``): for each entry in sorted key order,
    its name, dtype, shape and raw bytes (on the CPU, contiguous). Equal weights give equal digests across runs."""
    h = hashlib.sha256()
    for k, v in sorted(model.state_dict().items()):
        if prefixes is not None and not any(k.startswith(p) for p in prefixes):
            continue
        t = v.detach().to("cpu").contiguous()
        h.update(f"{k}|{t.dtype}|{tuple(t.shape)}|".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def output_paths(recipe: TrainRecipe, cache_dir: str | os.PathLike) -> tuple[Path, Path]:
    """``(<cache>/<name>-<hash>.npz, <cache>/<name>-<hash>.json)``."""
    stem = f"{recipe.name}-{recipe.recipe_hash()}"
    return Path(cache_dir) / f"{stem}.npz", Path(cache_dir) / f"{stem}.json"


def save_outputs(recipe: TrainRecipe, arrays: dict[str, np.ndarray], info: dict,
                 cache_dir: str | os.PathLike) -> dict:
    """Write the arrays (atomically, .npz compressed) and the sidecar ``info`` plus the format, recipe, its hash
    and the .npz's SHA-256; returns the sidecar."""
    from tokenprune.utils.io import atomic_write_bytes, sha256_file, write_json

    if "weights_sha256" not in info:
        raise ValueError("info: must name the weights_sha256 of the weights that produced the outputs")
    npz, js = output_paths(recipe, cache_dir)
    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    atomic_write_bytes(npz, buf.getvalue())
    side = {"format": OUTPUTS_FORMAT, "name": recipe.name, "recipe_hash": recipe.recipe_hash(),
            "recipe": recipe.to_dict(), "seed": recipe.seed, "outputs": npz.name, "sha256": sha256_file(npz),
            "size_bytes": npz.stat().st_size, "arrays": {k: [str(v.dtype), list(v.shape)] for k, v in arrays.items()},
            **info}
    write_json(js, side)
    return side


def has_outputs(recipe: TrainRecipe, cache_dir: str | os.PathLike) -> bool:
    """Whether the recipe's outputs and their sidecar are cached. Outputs without their sidecar are neither there
    nor absent: :class:`~tokenprune.utils.io.CheckpointError` naming the missing sidecar."""
    from tokenprune.training.base_models import rebuild_hint
    from tokenprune.utils.io import read_json

    npz, js = output_paths(recipe, cache_dir)
    if npz.is_file() and not js.is_file():
        read_json(js, rebuild_hint(npz, js), kind=f"the sidecar of {npz.name}")   # raises: missing
    return npz.is_file() and js.is_file()


def load_outputs(recipe: TrainRecipe, cache_dir: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict]:
    """``(arrays, sidecar)`` of the recipe's cached outputs. Raises
    :class:`~tokenprune.training.base_models.CheckpointMissingError` when absent (naming ``make models``),
    :class:`~tokenprune.utils.io.CheckpointError` naming the sidecar when it is missing beside the outputs, empty or
    truncated, and :class:`~tokenprune.training.base_models.CheckpointMismatchError` when the .npz's SHA-256 or the
    recipe hash differs from the sidecar."""
    from tokenprune.training.base_models import CheckpointMismatchError, CheckpointMissingError, rebuild_hint
    from tokenprune.utils.io import read_json, sha256_file

    npz, js = output_paths(recipe, cache_dir)
    if not npz.is_file():
        raise CheckpointMissingError(f"run {recipe.name!r}: no cached outputs {npz}; build them with "
                                     f"`python -m tokenprune models` (`make models`)")
    info = read_json(js, rebuild_hint(npz, js), kind=f"the sidecar of {npz.name}")
    if info.get("format") != OUTPUTS_FORMAT or info.get("recipe_hash") != recipe.recipe_hash():
        raise CheckpointMismatchError(f"{js}: not the outputs of recipe {recipe.recipe_hash()} "
                                      f"({info.get('format')}, {info.get('recipe_hash')}); {rebuild_hint(npz, js)}")
    digest = sha256_file(npz)
    if digest != info.get("sha256"):
        raise CheckpointMismatchError(f"{npz}: SHA-256 {digest} differs from {info.get('sha256')} recorded in "
                                      f"{js.name}; {rebuild_hint(npz, js)}")
    with np.load(npz, allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    return arrays, info


def ensure_outputs(recipe: TrainRecipe, run: Callable[[], tuple[dict[str, np.ndarray], dict]],
                   cache_dir: str | os.PathLike, force: bool = False) -> tuple[dict[str, np.ndarray], dict]:
    """The cached outputs of ``recipe``, or ``run()`` (which trains and evaluates, returning the arrays and a sidecar
    with ``weights_sha256``) saved and returned; ``force``: run anyway. The sidecar gets ``loaded`` and, for a run,
    its ``wall_time_s`` and provenance."""
    from tokenprune.utils.environment import provenance

    if not force and has_outputs(recipe, cache_dir):
        arrays, info = load_outputs(recipe, cache_dir)
        return arrays, {**info, "loaded": True}
    from tokenprune.training.base_models import refuse_if_cache_only

    refuse_if_cache_only(recipe.name, output_paths(recipe, cache_dir)[0])
    started = time.perf_counter()
    arrays, info = run()
    info = {**info, "wall_time_s": round(time.perf_counter() - started, 1),
            "provenance": provenance(recipe.to_dict(), recipe.seed, started, cwd=Path(__file__).parent)}
    return arrays, {**save_outputs(recipe, arrays, info, cache_dir), "loaded": False}


def describe(info: dict[str, Any]) -> str:
    """One line per cached run for ``python -m tokenprune models``."""
    acc = info.get("test", {})
    how = "loaded" if info.get("loaded") else f"trained in {info.get('train_time_s', 0):.0f} s"
    return (f"{info['name']}: test acc {acc.get('accuracy', float('nan')):.4f} (n={acc.get('n')}), {how}, "
            f"{info['outputs']} {info['size_bytes'] / 1e6:.2f} MB, weights sha256 {info['weights_sha256'][:16]}...")
