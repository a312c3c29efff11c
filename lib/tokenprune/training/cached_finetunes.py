"""Fine-tuning runs cached as their outputs (:mod:`tokenprune.training.checkpoints`): the variance / MedAD study's
runs (Igaue & Aizawa, arXiv 2507.19175: Eq. 8 fusion at blocks 4/7/10, the matched keep rate 0.6 and MedAD at 0.3),
declared as data (:data:`VARMEDAD`), their recipes, and training and measuring one run.

Each run fine-tunes the base model with one pruning configuration in place (EViT's fine-tuning: the target keep
rate from the first step) for ``steps`` steps of ``batch`` images, AdamW with a cosine decay to a tenth of ``lr``,
no warm-up; ToMe's keep rate is matched to the variance model's MACs on the base model. Each pruned configuration
also has an off-the-shelf reference: the start of its runs, measured before any step. ``make models``
(:mod:`tokenprune.training.models_cli`) builds the outputs of :data:`VARMEDAD` on the base model's full test
split; notebook 03 reads the same declaration for its ``default`` profile and loads them.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np
import torch

from tokenprune.core.config import UNPRUNED, PruneConfig
from tokenprune.core.precision import set_eager_attention
from tokenprune.measure import intervals, mac_matching
from tokenprune.measure.evaluation import Predictions, predict
from tokenprune.measure.macs import analytic_macs
from tokenprune.methods.overlap import overlap_patch_embed
from tokenprune.training import base_models, checkpoints, recipe_data
from tokenprune.training.finetune import finetune, finetune_recipe
from tokenprune.training.recipe import TrainRecipe
from tokenprune.training.sources import as_tensors

__all__ = ["CONFIGS", "FinetuneRuns", "VARMEDAD", "Run", "RunOutput", "run_config", "tome_matched", "run_recipe",
           "runs_of", "ots_recipe", "start_model", "train_and_measure", "measured", "outputs", "build_cached"]

CONFIGS: tuple[str, ...] = ("variance", "medad", "evit", "tome", "unpruned", "overlap_variance", "medad_r03")
"""The configurations a run can fine-tune: variance or MedAD of the [CLS] attention across heads with Eq. 8 fusion,
EViT (head mean, its own fusion), ToMe at the variance model's MACs, none, variance on the overlapping patch
embedding (stride 3/4 of the patch), and MedAD at the aggressive keep rate."""


@dataclass(frozen=True, kw_only=True)
class FinetuneRuns:
    """A set of fine-tuning runs as data: one run per configuration of ``configs`` and seed of ``seeds``, named
    ``<prefix>_ft_<config>_s<seed>`` (off-the-shelf references ``<prefix>_ots_<config>``)."""

    prefix: str
    base_model: str
    configs: tuple[str, ...]
    seeds: tuple[int, ...]
    steps: int
    batch: int
    lr: float
    temperature: float
    keep_rate: float
    aggressive_keep_rate: float
    locations: tuple[int, ...]
    dtype: str
    eval_batch: int

    def __post_init__(self) -> None:
        bad = sorted(set(self.configs) - set(CONFIGS))
        if bad:
            raise ValueError(f"configs: {bad} not accepted; accepted: {list(CONFIGS)}")
        if not self.temperature > 0:
            raise ValueError(f"temperature: must be > 0, got {self.temperature!r}")

    def covers(self, other: "FinetuneRuns") -> bool:
        """Whether every run of ``other`` is one of these (same recipe settings, its configurations and seeds among
        these)."""
        same = ("prefix", "base_model", "steps", "batch", "lr", "temperature", "keep_rate", "aggressive_keep_rate",
                "locations", "dtype", "eval_batch")
        return (all(getattr(self, k) == getattr(other, k) for k in same) and set(other.configs) <= set(self.configs)
                and set(other.seeds) <= set(self.seeds))


VARMEDAD = FinetuneRuns(
    prefix="vm",
    base_model="vit_s14_fmnist_ft",
    configs=("variance", "evit", "tome", "unpruned", "overlap_variance", "medad_r03"),
    seeds=(0, 1, 2, 3, 4),
    steps=128,
    batch=128,
    lr=3e-4,
    temperature=0.5,
    keep_rate=0.6,
    aggressive_keep_rate=0.3,
    locations=(4, 7, 10),
    dtype="fp32",
    eval_batch=250,
)
"""Notebook 03's cached fine-tunes: the calibrated proxy of notebook 00, 16,384 images per run (its last block,
final norm and head train), five seeds, Eq. 8 at T = 0.5, measured in fp32."""


@dataclass(frozen=True)
class Run:
    """One fine-tuning run: its configuration, seed and recipe."""

    config: str
    seed: int
    recipe: Any


@dataclass
class RunOutput:
    """A run (``trained``) or its off-the-shelf reference: the per-image outputs and the sidecar."""

    config: str
    seed: int
    recipe: Any
    trained: bool
    arrays: dict
    info: dict


def _fused(runs: FinetuneRuns, scorer: str, name: str, keep_rate: Optional[float] = None) -> PruneConfig:
    return PruneConfig(scorer, "fuse_softmax", runs.keep_rate if keep_rate is None else keep_rate,
                       tuple(runs.locations), (("temperature", runs.temperature),), name=name)


def run_config(runs: FinetuneRuns, name: str, tome: Optional[PruneConfig]) -> Optional[PruneConfig]:
    """The configuration run ``name`` prunes with (None: unpruned; ``overlap_variance`` prunes as ``variance`` on
    the overlapping patch embedding; ``tome``: the MAC-matched ToMe configuration, :func:`tome_matched`)."""
    if name not in CONFIGS:
        raise ValueError(f"name: {name!r} not accepted; accepted: {list(CONFIGS)}")
    if name == "unpruned":
        return None
    if name in ("variance", "overlap_variance"):
        return _fused(runs, "attention_variance", "variance")
    if name == "evit":
        return PruneConfig("cls_attention", "fuse_attention", runs.keep_rate, tuple(runs.locations), name="evit")
    if name == "tome":
        if tome is None:
            raise ValueError("tome: the MAC-matched ToMe configuration is needed for run 'tome' (tome_matched)")
        return tome
    return {"medad": _fused(runs, "attention_medad", "medad"),
            "medad_r03": _fused(runs, "attention_medad", "medad_r03", runs.aggressive_keep_rate)}[name]


def tome_matched(base: torch.nn.Module, variance: PruneConfig) -> mac_matching.Matched:
    """ToMe (bipartite merging at every block, proportional attention) with the keep rate that matches the MACs of
    ``variance`` on ``base`` (:func:`tokenprune.measure.mac_matching.config_at_macs`); ``base`` is left unpruned."""
    UNPRUNED.apply(base)
    target = mac_matching.config_macs(base, variance)[0]
    match = mac_matching.config_at_macs(base, PruneConfig("cls_attention", "bipartite", 0.9, tuple(range(1, 13)),
                                                          prop_attn=True, name="tome"), target)
    UNPRUNED.apply(base)
    return match


def run_recipe(runs: FinetuneRuns, base: TrainRecipe, n_rows: int, name: str, seed: int,
               config: Optional[PruneConfig]) -> TrainRecipe:
    """The recipe of run ``name`` with ``seed``: ``steps`` x ``batch`` images drawn with the seed (a subset when that
    is less than the ``n_rows`` training rows, else whole epochs), the configuration it prunes with recorded in
    ``extra`` so that two configurations never share a recipe hash (the overlapping embedding is not in ``prune``)."""
    want = runs.steps * runs.batch
    subset, epochs = (want, 1.0) if want <= n_rows else (None, want / n_rows)
    rec = finetune_recipe(base, config, name=f"{runs.prefix}_ft_{name}_s{seed}", seed=seed, epochs=epochs,
                          batch_size=runs.batch, lr=runs.lr, min_lr=runs.lr / 10, warmup_epochs=0.0, keep_length=0.0,
                          keep_start=0.0, train_subset=subset, val_subset=None, test_subset=None)
    return rec.replace(extra={**base.extra, "finetune_config": name, "prune_config": repr(config)})


def runs_of(runs: FinetuneRuns, base: TrainRecipe, n_rows: int, tome: Optional[PruneConfig]) -> list[Run]:
    """Every run of ``runs`` in the order they are measured (seed, then configuration)."""
    return [Run(name, s, run_recipe(runs, base, n_rows, name, s, run_config(runs, name, tome)))
            for s in runs.seeds for name in runs.configs]


def ots_recipe(runs: FinetuneRuns, run: TrainRecipe, name: str) -> TrainRecipe:
    """The record of the off-the-shelf reference of configuration ``name``: the start of its runs, evaluated before
    any step (the recipe of ``run``, seed 0, marked untrained)."""
    return run.replace(name=f"{runs.prefix}_ots_{name}", seed=0,
                       extra={**run.extra, "trained": False, "what": "the start of the fine-tune, not trained"})


def start_model(name: str, start: torch.nn.Module) -> torch.nn.Module:
    """A fresh copy of the unpruned ``start``, with the overlapping patch embedding for ``overlap_variance``."""
    UNPRUNED.apply(start)
    m = copy.deepcopy(start)
    return overlap_patch_embed(m) if name == "overlap_variance" else m


def _logits_arrays(p: Predictions) -> dict:
    """The per-image outputs a cached run stores: logits in float16 when that keeps every argmax, else float32."""
    half = p.logits.half()
    keep = bool((half.float().argmax(-1) == p.logits.argmax(-1)).all())
    return {"logits": (half if keep else p.logits).numpy(), "labels": p.labels.numpy().astype(np.int16)}


def measured(m: torch.nn.Module, train_s: float, images: Callable[[], torch.Tensor], labels: torch.Tensor,
             dtype: str, eval_batch: int, images_note: str) -> tuple[dict, dict]:
    """``m`` (on the CPU, in eval mode) on ``images()``: the arrays the output cache stores and the sidecar's
    measured part (training seconds, MACs, test accuracy with its bootstrap interval)."""
    set_eager_attention(m, False)
    p = predict(m, images(), labels, batch=eval_batch, dtype=dtype)
    ci = intervals.bootstrap_ci(p.correct.astype(float), seed=0)
    return _logits_arrays(p), {
        "train_time_s": round(train_s, 1), "gmacs": analytic_macs(m).total / 1e9,
        "test": {"n": int(len(labels)), "accuracy": ci.estimate, "ci95": ci.ci, "eval_dtype": dtype,
                 "images": images_note}}


def train_and_measure(runs: FinetuneRuns, run: Run, trained: bool, start: torch.nn.Module,
                      config: Optional[PruneConfig], train_source: Callable[[], Any], images: Callable[[], Any],
                      labels: torch.Tensor, images_note: str, device: str) -> tuple[dict, dict]:
    """One run (or, ``trained`` False, its off-the-shelf reference) from ``start``: the arrays and the sidecar the
    output cache stores."""
    m = start_model(run.config, start)
    train_s = 0.0
    if trained:
        train_s = finetune(m, run.recipe, train_source(), config, device=device, seed=run.seed,
                           progress=False).train_time_s
    elif config is not None:
        config.apply(m, seed=run.seed)
    m = m.cpu().eval()
    arrays, info = measured(m, train_s, images, labels, runs.dtype, runs.eval_batch, images_note)
    return arrays, {"weights_sha256": checkpoints.weights_sha256(m, run.recipe.trainable),
                    "weights_hashed": run.recipe.trainable or "all", **info}


def outputs(runs: FinetuneRuns, start: torch.nn.Module, base: TrainRecipe, data: Any, tome: Optional[PruneConfig],
            images: Callable[[], Any], labels: torch.Tensor, *, cache_dir: Optional[Any], build: bool = False,
            force: bool = False, images_note: str, device: str = "cpu") -> list[RunOutput]:
    """Every run of :func:`runs_of` and, before the first run of each pruned configuration, its off-the-shelf
    reference, measured on ``images()``. With ``cache_dir`` they are the cached outputs there (``build``: the
    missing ones trained and saved, ``force``: all retrained; else a missing one raises, naming ``make models``);
    without, each is trained here and not kept."""
    lazy: dict = {}

    def source():
        if "train" not in lazy:
            lazy["train"] = as_tensors(data["train"])
        return lazy["train"]

    def one(run: Run, trained: bool) -> RunOutput:
        config = run_config(runs, run.config, tome)

        def work():
            return train_and_measure(runs, run, trained, start, config, source, images, labels, images_note, device)

        if cache_dir is None:
            arrays, info = work()
            info = {**info, "loaded": False}
        else:
            if not build and not checkpoints.has_outputs(run.recipe, cache_dir):
                raise checkpoints.CheckpointMissingError(
                    f"fine-tune {run.recipe.name!r}: no cached outputs in {cache_dir}; build them with `python -m "
                    f"tokenprune models` (`make models`)")
            arrays, info = checkpoints.ensure_outputs(run.recipe, work, cache_dir, force=force)
        return RunOutput(run.config, run.seed, run.recipe, trained, arrays, info)

    out, referenced = [], set()
    for run in runs_of(runs, base, len(data["train"]), tome):
        if run.config != "unpruned" and run.config not in referenced:
            referenced.add(run.config)
            out.append(one(Run(run.config, 0, ots_recipe(runs, run.recipe, run.config)), trained=False))
        out.append(one(run, trained=True))
    return out


def build_cached(profile: str = "default", progress: bool = True, force: bool = False,
                 runs: FinetuneRuns = VARMEDAD) -> list[dict]:
    """``make models``: the runs of ``runs`` and their off-the-shelf references, trained and measured on the base
    model's full test split and cached as their outputs beside the ``default`` checkpoints (other profiles:
    nothing; their notebooks train their own). Returns the sidecars."""
    if profile != "default":
        return []
    torch.manual_seed(0)
    np.random.seed(0)
    start, info = base_models.load_base_model(runs.base_model, progress=False)
    base = TrainRecipe.from_dict(info["recipe"])
    data = recipe_data.load_recipe_data(base)
    tome = tome_matched(start, run_config(runs, "variance", None)).config
    x_u8, labels = as_tensors(data["test"])
    done = outputs(runs, start, base, data, tome, lambda: start.tp_preprocess(x_u8), labels,
                   cache_dir=checkpoints.checkpoint_dir(profile), build=True, force=force,
                   images_note="the base model's test split")
    if progress:
        for o in done:
            print(checkpoints.describe(o.info), flush=True)
    return [o.info for o in done]
