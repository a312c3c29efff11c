"""The artefacts of training, read, written and verified by recipe hash and SHA-256 in one place.

* Checkpoints: ``<cache>/<name>-<hash>.pt`` with a sidecar ``<name>-<hash>.json`` (the recipe, seed, SHA-256 of the
  .pt, training time, test accuracy with a 95 % bootstrap interval, history, provenance). ``<hash>`` is
  :meth:`tokenprune.training.recipe.TrainRecipe.recipe_hash`, so a changed recipe is a new file and never overwrites
  an old one; a checkpoint whose SHA-256 matches its sidecar is loaded, not retrained
  (:func:`tokenprune.training.base_models.ensure_model`).
* Cached outputs: where a run's weights do not fit the committed-artefact budget, the cache keeps what the notebooks
  read from it: its per-image outputs on a fixed image set (the logits), beside the recipe, its hash, and the
  SHA-256 of the weights that produced them (:func:`weights_sha256`). ``<name>-<hash>.npz`` holds the arrays,
  ``<name>-<hash>.json`` the sidecar (recipe, seed, SHA-256 of the .npz, weights SHA-256, accuracy, time,
  provenance). Who builds them: :mod:`tokenprune.training.cached_finetunes` and the proxy's output builders, which
  ``python -m tokenprune models`` (``make models``, :mod:`tokenprune.training.models_cli`) calls after the base models.
* A paper run's state (:mod:`tokenprune.training.paper_training`): ``<out>/checkpoint.pt`` and ``summary.json``.

Both kinds of cache entry live beside the checkpoints of their profile (``data/checkpoints`` for ``default``,
committed; ``data/checkpoints/<profile>`` otherwise).
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

from tokenprune.core.precision import DTYPES
from tokenprune.training.recipe import TrainRecipe
from tokenprune.training.recipe_book import RunSpec
from tokenprune.utils.io import CheckpointError, read_json

__all__ = [
    "CHECKPOINT_FORMAT", "MAX_CHECKPOINT_BYTES", "OUTPUTS_FORMAT", "CheckpointError", "CheckpointMismatchError",
    "CheckpointMissingError", "rebuild_hint", "refuse_if_cache_only", "checkpoint_dir", "checkpoint_paths",
    "stored_prefixes", "stored_state", "apply_state", "save_checkpoint", "verify_checkpoint", "read_checkpoint",
    "weights_sha256", "output_paths", "save_outputs", "has_outputs", "load_outputs", "ensure_outputs", "describe",
    "save_run_state", "restart_hint", "read_summary",
]

CHECKPOINT_FORMAT = "tokenprune-checkpoint-v1"


#: Committed checkpoints must stay at or under this size (bytes).
MAX_CHECKPOINT_BYTES = 10_000_000


class CheckpointMismatchError(CheckpointError, RuntimeError):
    """A checkpoint's SHA-256 differs from the one its sidecar JSON records (or it stores another recipe)."""


class CheckpointMissingError(CheckpointError, FileNotFoundError):
    """No checkpoint for this recipe in the cache; the message says how to build it. (A weights file whose sidecar
    is missing or broken is a :class:`CheckpointError` of its own: the checkpoint is there, its record is not.)"""


def rebuild_hint(*files: Path) -> str:
    """What to do about a broken cache entry (a checkpoint or cached outputs and their sidecar, in one folder):
    restore the committed files, or delete them and rebuild."""
    names = " ".join(f.name for f in files)
    return (f"restore them from git (`git checkout -- {names}` in {files[0].parent}) if they are committed, else "
            f"delete {' and '.join(f.name for f in files)} and rebuild with `python -m tokenprune models` "
            f"(`make models`)")


def refuse_if_cache_only(name: str, path: Path) -> None:
    """:class:`CheckpointMissingError` when :func:`tokenprune.utils.environment.cache_only` forbids building
    ``name``."""
    from tokenprune.utils.environment import CACHE_ONLY_ENV, cache_only

    if cache_only():
        raise CheckpointMissingError(f"{name}: {path.name} is missing or broken and {CACHE_ONLY_ENV} forbids building "
                                     f"it; build it with `make models` and commit it")


def checkpoint_dir(profile: str = "default") -> Path:
    """``data/checkpoints`` for ``default`` (committed), ``data/checkpoints/<profile>`` otherwise (git-ignored)."""
    from tokenprune.utils.environment import data_dir

    base = data_dir() / "checkpoints"
    return base if profile == "default" else base / profile


def checkpoint_paths(recipe: TrainRecipe, cache_dir: str | os.PathLike) -> tuple[Path, Path]:
    """``(<cache_dir>/<name>-<hash>.pt, <cache_dir>/<name>-<hash>.json)``."""
    stem = f"{recipe.name}-{recipe.recipe_hash()}"
    d = Path(cache_dir)
    return d / f"{stem}.pt", d / f"{stem}.json"


# ----------------------------------------------------------------------------------------------
# checkpoints
# ----------------------------------------------------------------------------------------------


def stored_prefixes(recipe: TrainRecipe, model: nn.Module) -> Optional[list[str]]:
    """Parameter-name prefixes a checkpoint stores (None: the whole state dict)."""
    arch = recipe.arch
    if arch.get("builder") == "finetune":  # a fine-tune stores what it trained (the rest is its base's)
        return None if recipe.trainable is None else list(recipe.trainable)
    if arch.get("builder") != "vit_s14":
        return None
    k = int(arch.get("finetune_blocks", 0))
    depth = len(model.blocks)
    prefixes = ["head."]
    if k > 0:
        prefixes += [f"blocks.{i}." for i in range(depth - k, depth)] + ["norm.", "fc_norm."]
    return prefixes


def stored_state(model: nn.Module, prefixes: Optional[list[str]], dtype: str) -> dict[str, torch.Tensor]:
    """The entries of the state dict under ``prefixes`` (None: all), floating-point ones in ``dtype``, on the CPU."""
    sd = model.state_dict()
    if prefixes is not None:
        sd = {k: v for k, v in sd.items() if any(k.startswith(p) for p in prefixes)}
    tgt = DTYPES[dtype]
    return {k: (v.detach().to("cpu", tgt) if tgt is not None and v.is_floating_point() else v.detach().cpu()).clone()
            for k, v in sd.items()}


def apply_state(model: nn.Module, sd: dict[str, torch.Tensor], partial: bool) -> None:
    """Load a stored state dict into ``model`` in its own dtypes (``partial``: only the stored entries)."""
    ref = model.state_dict()
    full = {k: v.to(ref[k].dtype) if k in ref and v.is_floating_point() else v for k, v in sd.items()}
    missing, unexpected = model.load_state_dict(full, strict=not partial)
    if unexpected:
        raise RuntimeError(f"checkpoint keys not in the model: {unexpected[:5]}")


def save_checkpoint(model: nn.Module, recipe: TrainRecipe, pt_path: str | os.PathLike) -> dict:
    """Write the checkpoint (atomically); returns ``{"sha256", "size_bytes", "stored_keys", ...}``."""
    from tokenprune.utils.io import atomic_write

    prefixes = stored_prefixes(recipe, model)
    sd = stored_state(model, prefixes, recipe.store_dtype)
    obj = {"format": CHECKPOINT_FORMAT, "name": recipe.name, "recipe_hash": recipe.recipe_hash(),
           "recipe": recipe.to_dict(), "partial": prefixes is not None, "stored_prefixes": prefixes,
           "store_dtype": recipe.store_dtype, "state_dict": sd}
    path = atomic_write(pt_path, lambda fh: torch.save(obj, fh), binary=True)
    from tokenprune.utils.io import sha256_file

    return {"sha256": sha256_file(path), "size_bytes": path.stat().st_size, "stored_dtype": recipe.store_dtype,
            "stored_prefixes": prefixes, "n_stored_values": int(sum(v.numel() for v in sd.values()))}


def verify_checkpoint(pt_path: str | os.PathLike, json_path: str | os.PathLike) -> dict:
    """The sidecar's content, after checking that the checkpoint's SHA-256 is the one it records.

    Raises :class:`CheckpointMissingError` when the weights file is missing, :class:`CheckpointError` naming the
    sidecar when the weights are there but their sidecar is missing, empty or truncated, and
    :class:`CheckpointMismatchError` when the hashes differ.
    """
    from tokenprune.utils.io import read_json, sha256_file

    pt, js = Path(pt_path), Path(json_path)
    if not pt.is_file():
        raise CheckpointMissingError(f"{pt} does not exist")
    info = read_json(js, rebuild_hint(pt, js), kind=f"the sidecar of {pt.name}")
    digest = sha256_file(pt)
    if digest != info.get("sha256"):
        raise CheckpointMismatchError(f"{pt}: SHA-256 {digest} differs from {info.get('sha256')} recorded in "
                                      f"{js.name}, so the file was changed or corrupted; {rebuild_hint(pt, js)}")
    return info


def read_checkpoint(pt_path: str | os.PathLike, recipe: Optional[TrainRecipe] = None) -> tuple[dict, TrainRecipe]:
    """The checkpoint's content and its recipe (``recipe``, else the one it stores): :class:`CheckpointError` naming
    the fix when it is not a checkpoint of this format, :class:`CheckpointMismatchError` when it stores another
    recipe. The model is built and loaded by :func:`tokenprune.training.base_models.load_checkpoint`."""
    from tokenprune.utils.io import load_torch

    pt = Path(pt_path)
    hint = rebuild_hint(pt, pt.with_suffix(".json"))
    obj = load_torch(pt, hint, kind="the checkpoint")
    if not isinstance(obj, dict) or obj.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{pt}: not a {CHECKPOINT_FORMAT} file; {hint}")
    recipe = recipe or TrainRecipe.from_dict(obj["recipe"])
    if obj["recipe_hash"] != recipe.recipe_hash():
        raise CheckpointMismatchError(f"{pt}: stores recipe {obj['recipe_hash']}, expected {recipe.recipe_hash()}; "
                                      f"{hint}")
    return obj, recipe


# ----------------------------------------------------------------------------------------------
# cached outputs
# ----------------------------------------------------------------------------------------------


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
    from tokenprune.utils.io import read_json

    npz, js = output_paths(recipe, cache_dir)
    if npz.is_file() and not js.is_file():
        read_json(js, rebuild_hint(npz, js), kind=f"the sidecar of {npz.name}")   # raises: missing
    return npz.is_file() and js.is_file()


def load_outputs(recipe: TrainRecipe, cache_dir: str | os.PathLike) -> tuple[dict[str, np.ndarray], dict]:
    """``(arrays, sidecar)`` of the recipe's cached outputs. Raises
    :class:`CheckpointMissingError` when absent (naming ``make models``),
    :class:`~tokenprune.utils.io.CheckpointError` naming the sidecar when it is missing beside the outputs, empty or
    truncated, and :class:`CheckpointMismatchError` when the .npz's SHA-256 or the
    recipe hash differs from the sidecar."""
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
    # one accuracy, or one per evaluated configuration (``accuracy/<label>``, e.g. a control unpruned and pruned)
    accs = {k.removeprefix("accuracy/"): v for k, v in acc.items() if k.startswith("accuracy/")}
    shown = (", ".join(f"{label} {v:.4f}" for label, v in accs.items()) if accs
             else f"{acc.get('accuracy', float('nan')):.4f}")
    return (f"{info['name']}: test acc {shown} (n={acc.get('n')}), {how}, "
            f"{info['outputs']} {info['size_bytes'] / 1e6:.2f} MB, weights sha256 {info['weights_sha256'][:16]}...")


# ----------------------------------------------------------------------------------------------
# a paper run's state
# ----------------------------------------------------------------------------------------------


def save_run_state(path: Path, obj: dict) -> None:
    """Write a paper run's state (``torch.save``, atomically): what :func:`tokenprune.training.paper_training.train_run`
    resumes from."""
    from tokenprune.utils.io import atomic_write

    atomic_write(path, lambda fh: torch.save(obj, fh), binary=True)


def restart_hint(out: Path) -> str:
    """What to do about a run folder whose checkpoint is broken: the run starts over in an empty folder."""
    return f"delete {out} (or move it away) and train the run again: it starts over"


def read_summary(out: Path, spec: RunSpec) -> dict:
    """``out/summary.json`` of ``spec``'s run; :class:`~tokenprune.utils.io.CheckpointError` naming it and the fix
    when it is empty or truncated (the run's checkpoint holds what it records: training again in ``out`` resumes
    past the last epoch and writes it anew)."""
    return read_json(out / "summary.json", f"delete it and train the run again with the same folder: it resumes "
                     f"from {out / 'checkpoint.pt'} and writes the summary anew",
                     kind=f"the summary of run {spec.name}")
