"""Cached off-the-shelf sweeps: the logits of a sweep the ``default`` profile runs the same way every time,
measured once by ``make models`` and read by the notebook (``make reproduce``), each configuration recomputed on
:data:`RECHECK_IMAGES` images and compared by the rule of :mod:`tokenprune.training.recheck`.

A sweep is :func:`tokenprune.measure.evaluation.sweep_predictions` of a committed base model at a list of
configurations on the first images of its test split; its table (:func:`~tokenprune.measure.evaluation.sweep_table`)
is computed from the predictions on every read, so a cached and a computed sweep give one table. The sweeps cached
are declared as data (:data:`SWEEPS`: a name and the function that gives its :class:`SweepInputs` from the notebook's
``default`` settings, the one the notebook calls too). An entry's recipe is the base model's, with its SHA-256, the
configurations, the images, batch, precision, seed and :data:`tokenprune.core.patch.NUMERICS_VERSION` in ``extra``:
a change to any of them finds no entry, and the notebook then runs the sweep itself (an error under
``TOKENPRUNE_CACHE_ONLY``, which CI's ``make reproduce`` sets).
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np
import torch

from tokenprune.core.config import UNPRUNED, PruneConfig
from tokenprune.core.patch import NUMERICS_VERSION
from tokenprune.measure.evaluation import Predictions, check_sweep_labels, predict, sweep_predictions
from tokenprune.training import checkpoints
from tokenprune.training import recheck as recheck_rule
from tokenprune.training.recipe import TrainRecipe

__all__ = ["RECHECK_IMAGES", "SWEEPS", "SweepInputs", "cached_configs", "sweep_recipe", "measure", "cached_sweep",
           "inputs_of", "build_cached"]

#: images on which every configuration of a cached sweep is recomputed when it is read
RECHECK_IMAGES = 64

#: the cached sweeps: name -> "module:function" returning the sweep's :class:`SweepInputs` at the ``default`` profile
SWEEPS: dict[str, str] = {
    "evit_keep_rates": "tokenprune.study.evit.experiments:keep_sweep_inputs",
    "evit_locations": "tokenprune.study.evit.studies:locations_inputs",
    "evit_synthbirds": "tokenprune.study.evit.experiments:synthbirds_inputs",
    "varmedad_offtheshelf": "tokenprune.study.varmedad.sweep:sweep_inputs",
}


@dataclass
class SweepInputs:
    """What a sweep evaluates: the base ``model`` (patched), its sidecar ``info`` (``load_base_model``), the
    preprocessed ``images`` (the first ones of its test split) and ``labels``, the ``configs``, the evaluation's
    ``batch``, ``dtype`` and ``seed``, and the images as read (``raw``, for the notebook's figures)."""

    model: torch.nn.Module
    info: dict
    images: torch.Tensor
    labels: torch.Tensor
    configs: list[PruneConfig]
    batch: int
    dtype: str
    seed: int
    raw: Optional[torch.Tensor] = None


def _drawn(config: PruneConfig) -> bool:
    """Whether ``config``'s scorer draws random numbers (per batch, so its rows cannot be recomputed alone)."""
    return "random" in str(config.scorer)


def cached_configs(inputs: SweepInputs) -> list[PruneConfig]:
    """The configurations an entry holds: all but those of a random scorer, which draws per batch (so that its first
    rows cannot be recomputed alone) and is computed on every read; its generator is seeded per configuration, so
    computing it apart gives the same logits. Refuses repeated labels (ValueError naming ``configs``)."""
    return [c for c in check_sweep_labels(inputs.configs) if not _drawn(c)]


def sweep_recipe(name: str, inputs: SweepInputs) -> TrainRecipe:
    """The entry's record: the base model's recipe renamed ``<name>_sweep``, with what the logits depend on."""
    base = TrainRecipe.from_dict(inputs.info["recipe"])
    return base.replace(name=f"{name}_sweep", extra={
        **base.extra, "outputs": "off-the-shelf sweep logits", "base_hash": base.recipe_hash(),
        "base_sha256": inputs.info["sha256"], "configs": [repr(c) for c in cached_configs(inputs)],
        "numerics": NUMERICS_VERSION, "test_images": int(len(inputs.labels)), "batch": int(inputs.batch),
        "dtype": inputs.dtype, "eval_seed": int(inputs.seed)})


def measure(inputs: SweepInputs) -> tuple[dict[str, np.ndarray], dict]:
    """The sweep's logits (fp32, by label; ``unpruned`` first) and labels, and the sidecar part of its entry."""
    preds = sweep_predictions(inputs.model, inputs.images, inputs.labels, cached_configs(inputs), batch=inputs.batch,
                              dtype=inputs.dtype, seed=inputs.seed)
    arrays = {f"logits/{k}": p.logits.float().numpy() for k, p in preds.items()}
    arrays["labels"] = inputs.labels.numpy()
    acc = float(preds["unpruned"].correct.mean())
    return arrays, {"weights_sha256": inputs.info["sha256"], "train_time_s": 0.0,
                    "test": {"accuracy": acc, "n": int(len(inputs.labels))}}


def _recheck(name: str, inputs: SweepInputs, arrays: dict[str, np.ndarray]) -> None:
    k = min(RECHECK_IMAGES, len(inputs.labels))
    for cfg in [None] + cached_configs(inputs):
        label = "unpruned" if cfg is None else cfg.label
        (cfg or UNPRUNED).apply(inputs.model, seed=inputs.seed)
        again = predict(inputs.model, inputs.images[:k], inputs.labels[:k], batch=k, dtype=inputs.dtype).logits
        r = recheck_rule.compare(f"{name}: {label}", again.numpy(), arrays[f"logits/{label}"][:k],
                                 recheck_rule.is_continuous(cfg))
        if not r.ok:
            raise checkpoints.CheckpointMismatchError(f"{r.refusal()}; rebuild with `make models` after removing "
                                                      "its entry")
    UNPRUNED.apply(inputs.model)


def cached_sweep(name: str, inputs: SweepInputs, profile: str) -> dict[str, Predictions]:
    """The predictions of sweep ``name`` (a key of :data:`SWEEPS`) by label: at ``default`` read from its entry and
    rechecked (:class:`~tokenprune.training.checkpoints.CheckpointMismatchError` when a configuration or the labels
    no longer match), else computed; at other profiles, or when the entry is missing (an error under
    ``TOKENPRUNE_CACHE_ONLY``), computed by :func:`~tokenprune.measure.evaluation.sweep_predictions`."""
    if name not in SWEEPS:
        raise ValueError(f"name: unknown sweep {name!r}; accepted: {sorted(SWEEPS)}")
    recipe = sweep_recipe(name, inputs)
    folder = checkpoints.checkpoint_dir("default")
    if profile != "default" or not checkpoints.has_outputs(recipe, folder):
        if profile == "default":
            checkpoints.refuse_if_cache_only(recipe.name, checkpoints.output_paths(recipe, folder)[0])
        return sweep_predictions(inputs.model, inputs.images, inputs.labels, inputs.configs, batch=inputs.batch,
                                 dtype=inputs.dtype, seed=inputs.seed)
    arrays, _ = checkpoints.load_outputs(recipe, folder)
    if not np.array_equal(arrays["labels"], inputs.labels.numpy()):
        raise checkpoints.CheckpointMismatchError(
            f"{recipe.name}: its {len(arrays['labels'])} labels are not those of the images asked for; "
            f"{checkpoints.rebuild_hint(*checkpoints.output_paths(recipe, folder))}")
    _recheck(recipe.name, inputs, arrays)
    labels = torch.from_numpy(arrays["labels"]).long()
    read = {k.split("/", 1)[1]: Predictions(torch.from_numpy(v), labels) for k, v in arrays.items()
            if k.startswith("logits/")}
    drawn = [c for c in inputs.configs if _drawn(c)]
    live = sweep_predictions(inputs.model, inputs.images, inputs.labels, drawn, batch=inputs.batch, dtype=inputs.dtype,
                             seed=inputs.seed) if drawn else {}
    # in the order of the configurations, as the sweep computes them
    return {k: read[k] if k in read else live[k] for k in ["unpruned"] + [c.label for c in inputs.configs]}


def inputs_of(name: str) -> SweepInputs:
    """The :class:`SweepInputs` of declared sweep ``name`` at the ``default`` profile."""
    module, fn = SWEEPS[name].split(":")
    maker: Callable[[], SweepInputs] = getattr(importlib.import_module(module), fn)
    return maker()


def build_cached(profile: str = "default", progress: bool = True, force: bool = False) -> list[dict]:
    """``make models``: every declared sweep's logits beside the ``default`` checkpoints (other profiles: nothing;
    their notebooks run their sweeps). Returns the sidecars."""
    if profile != "default":
        return []
    out = []
    for name in SWEEPS:
        inputs = inputs_of(name)
        _, info = checkpoints.ensure_outputs(sweep_recipe(name, inputs), lambda: measure(inputs),
                                             checkpoints.checkpoint_dir(profile), force=force)
        if progress:
            print(checkpoints.describe(info), flush=True)
        out.append(info)
    return out
