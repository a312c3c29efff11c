"""Notebook 03's fine-tuning runs: at ``default`` the cached runs of
:data:`tokenprune.training.cached_finetunes.VARMEDAD` (loaded; ``make models`` builds them), at ``smoke`` and under
other settings the same runs trained here (not kept), at ``paper`` the runs of the recipe :data:`PAPER_RECIPE` on
timm's training stack (:func:`tokenprune.study.paper_runs.trained_model`). :func:`finetune_all` measures every run
and the off-the-shelf reference of each pruned configuration on the same images (:class:`Finetunes`). At ``default``
on a base model with no cached runs (a proxy notebook 00 chose after they were built) nothing is trained, hours on
this CPU: :func:`missing_runs` names the runs that would decide, and the fine-tuned claims say so."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import numpy as np
import pandas as pd
import torch

from tokenprune.core.config import UNPRUNED, PruneConfig
from tokenprune.measure import intervals
from tokenprune.measure.evaluation import Predictions
from tokenprune.study import paper_runs, verdicts
from tokenprune.study.proxy import needed_finetunes
from tokenprune.study.varmedad.claims import TRAINS_OVERLAP
from tokenprune.study.varmedad.settings import LOCS, PAPER_RECIPE, R_AGGRESSIVE, R_MAIN
from tokenprune.training import checkpoints
from tokenprune.training.finetune import finetune_trainable
from tokenprune.training import cached_finetunes as cached
from tokenprune.training import sources

__all__ = ["Finetunes", "finetune_runs", "missing_runs", "paper_temperatures", "paper_ft_spec", "ft_prepare",
           "given_finetune", "finetune_all", "seed_summary_table", "ft_setting", "trains_overlap_premise"]


@dataclass
class Finetunes:
    """Every fine-tuning run measured: the per-run ``table`` (config, seed, MACs, top-1 with its interval, loaded,
    training time, recipe hash; at paper the run and whether it trained its whole schedule), the fine-tuned
    predictions by (config, seed), the off-the-shelf references by config, the rows of the training split, the
    images they are measured on (``n_test``), and at ``paper`` the :class:`~tokenprune.study.paper_runs.TrainedRun`
    of each (config, seed) and the recipe in words (``setting``); ``missing``: the runs that would decide when the
    base model has none cached and none is trained here (:func:`missing_runs`; nothing measured then)."""

    table: pd.DataFrame
    preds: dict
    refs: dict
    n_train_rows: int
    n_test: int
    runs: dict
    setting: str
    missing: Optional[needed_finetunes.NeededFinetunes] = None


def finetune_runs(cfg: SimpleNamespace) -> cached.FinetuneRuns:
    """The fine-tuning runs of ``cfg``'s settings, declared as :data:`~tokenprune.training.cached_finetunes.VARMEDAD`
    is (at ``default`` the same runs)."""
    return cached.FinetuneRuns(
        prefix=cached.VARMEDAD.prefix, base_model=cfg.base_model, configs=tuple(cfg.finetune_configs),
        seeds=tuple(cfg.seeds), steps=cfg.finetune_steps, batch=cfg.finetune_batch, lr=cfg.finetune_lr,
        temperature=float(cfg.temperature), keep_rate=R_MAIN, aggressive_keep_rate=R_AGGRESSIVE, locations=LOCS,
        dtype=cfg.dtype, eval_batch=cfg.eval_batch)


def missing_runs(cfg: SimpleNamespace) -> Optional[needed_finetunes.NeededFinetunes]:
    """At ``default``, on a base model with no cached runs (not :data:`~tokenprune.training.cached_finetunes.
    VARMEDAD`'s), the runs of ``cfg`` that would decide the fine-tuned claims (every configuration and seed,
    ``finetune_steps`` x ``finetune_batch`` images each; :func:`tokenprune.study.proxy.needed_finetunes.needed`),
    which would take hours to train here; None where the runs are cached or trained here (other profiles)."""
    if cfg.profile != "default" or cfg.base_model == cached.VARMEDAD.base_model:
        return None
    return needed_finetunes.needed(cfg.base_model, [(c, c != "unpruned") for c in cfg.finetune_configs], cfg.seeds,
                                   cfg.finetune_steps * cfg.finetune_batch,
                                   f"{cached.VARMEDAD.prefix}_ft_<config>_s<seed> on {cfg.base_model}")


def paper_temperatures() -> list[float]:
    """The Eq. 8 temperatures :data:`PAPER_RECIPE` trains (its ``fusion_temperature``)."""
    from tokenprune.training.recipe_book import load_recipe

    return [float(t) for t in load_recipe(PAPER_RECIPE)["fusion_temperature"]]


def paper_ft_spec(runs: cached.FinetuneRuns, name: str, seed: int, tome: Optional[PruneConfig]):
    """The run of :data:`PAPER_RECIPE` that fine-tunes configuration ``name`` with ``seed``: the recipe's run at the
    temperature of ``runs`` (a ValueError names the runs there are when it trains no such run) with the scorer,
    reducer and keep rate of ``name``'s configuration (unpruned: keep 1), tagged with ``name`` (and T where the
    reducer reads it), so each configuration is a run of its own in ``runs_dir``."""
    c = cached.run_config(runs, name, tome) or UNPRUNED
    spec = paper_runs.recipe_run(PAPER_RECIPE, seed=seed, reducer_options=(("temperature", runs.temperature),))
    opts = tuple(c.reducer_options)
    tag = name + (f"_T{runs.temperature:g}" if "temperature" in dict(opts) else "")
    return dataclasses.replace(spec, tag=tag, scorer=c.scorer, reducer=c.reducer, reducer_options=opts,
                               keep_rate=float(c.keep_rate))


def ft_prepare(runs: cached.FinetuneRuns, name: str, tome: Optional[PruneConfig]):
    """``prepare(model) -> model`` of the paper run of ``name`` (:func:`tokenprune.training.paper_training.train_run`):
    the overlapping patch embedding for ``overlap_variance``, then its configuration (unpruned: keep 1), as the
    ``default`` runs are prepared."""
    from tokenprune.methods.overlap import overlap_patch_embed

    c = cached.run_config(runs, name, tome) or UNPRUNED
    return lambda m: c.apply(overlap_patch_embed(m) if name == "overlap_variance" else m)


def given_finetune(cfg: SimpleNamespace, name: str, seed: int) -> Optional[str]:
    """The user's fine-tuned checkpoint of configuration ``name`` and ``seed``, ``ft_weights_dir/<name>_s<seed>.pth``,
    when that file exists (else None: the recipe's run gives the model)."""
    if not cfg.ft_weights_dir:
        return None
    path = Path(cfg.ft_weights_dir).expanduser() / f"{name}_s{seed}.pth"
    return str(path) if path.is_file() else None


def _eval_images(subjects: Any, cfg: SimpleNamespace):
    """The images every run and reference are measured on: at ``default`` the base model's full test split (what
    the cached outputs hold), else the notebook's evaluation images; ``(images, labels)`` with ``images`` a function
    (the full split is preprocessed only when a run has to be computed)."""
    if cfg.profile != "default":
        return (lambda: subjects.x_eval), subjects.y_eval
    x_u8, y = sources.as_tensors(subjects.base_ds["test"])
    return (lambda: subjects.base.tp_preprocess(x_u8)), y


def _as_predictions(arrays: dict, labels: torch.Tensor, what: str) -> Predictions:
    stored = torch.from_numpy(arrays["labels"].astype(np.int64))
    if len(stored) != len(labels) or not bool((stored == labels).all()):
        raise ValueError(f"{what}: the cached outputs are for other images than the test split here "
                         f"({len(stored)} vs {len(labels)} labels); rebuild with `python -m tokenprune models --force`")
    return Predictions(torch.from_numpy(arrays["logits"].astype(np.float32)), labels)


def _paper_output(runs: cached.FinetuneRuns, spec, name: str, trained: bool, tome, cfg: SimpleNamespace, images,
                  labels, device: str) -> cached.RunOutput:
    """One paper run of :data:`PAPER_RECIPE` (loaded from ``runs_dir`` when finished there, else trained there now)
    or, ``trained`` False, its off-the-shelf reference: the run's start before any step (the DeiT-S init with a
    fresh head, prepared by :func:`ft_prepare`, torch seeded with the run's seed). The sidecar holds ``run`` (the
    TrainedRun, its model dropped; None for a reference) and ``loaded``."""
    from tokenprune.training.paper_training import run_model

    prepare = ft_prepare(runs, name, tome)
    run, train_s = None, 0.0
    if trained:
        run = paper_runs.trained_model(spec, cfg, cfg.data_root, cfg.deit_weights,
                                       given=given_finetune(cfg, name, spec.seed), prepare=prepare, device=device)
        m, run = run.model, dataclasses.replace(run, model=None)
        train_s = sum(float(r["seconds"]) for r in run.summary["history"]) if run.summary else 0.0
    else:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(spec.seed)
            m = prepare(run_model(spec, int(spec["num_classes"]), init_file=cfg.deit_weights))
    arrays, info = cached.measured(m.cpu().eval(), train_s, images, labels, cfg.dtype, cfg.eval_batch,
                                   "the notebook's images")
    info = {**info, "run": run, "loaded": run is not None and run.source != "trained"}
    return cached.RunOutput(name, spec.seed, spec, trained, arrays, info)


def _paper_outputs(runs: cached.FinetuneRuns, tome, cfg, images, labels, device: str) -> list[cached.RunOutput]:
    """Every paper run and, before the first run of each pruned configuration, the start of that run."""
    out, referenced = [], set()
    for s in runs.seeds:
        for name in runs.configs:
            spec = paper_ft_spec(runs, name, s, tome)
            if name != "unpruned" and name not in referenced:
                referenced.add(name)
                out.append(_paper_output(runs, spec, name, False, tome, cfg, images, labels, device))
            out.append(_paper_output(runs, spec, name, True, tome, cfg, images, labels, device))
    return out


def finetune_all(subjects: Any, tome: PruneConfig, cfg: SimpleNamespace, device: str) -> Finetunes:
    """Every fine-tuning run of ``cfg`` and the off-the-shelf reference of each pruned configuration, measured on
    the same images. At ``default`` the runs are the cached ones when ``cfg``'s runs are among them (a missing one
    raises, naming ``make models``); other settings and ``smoke`` train here, not kept; ``paper`` runs
    :data:`PAPER_RECIPE` (each run's TrainedRun in :attr:`Finetunes.runs`, for the premise that every run trained
    the whole schedule). At ``default`` on a base model with no cached runs, none is trained: the result holds the
    runs that would decide (:func:`missing_runs`) and nothing measured."""
    n_train_rows, paper = len(subjects.base_ds["train"]), cfg.profile == "paper"
    missing = missing_runs(cfg) if cfg.finetune_steps > 0 else None
    if cfg.finetune_steps <= 0 or missing is not None:
        return Finetunes(pd.DataFrame(), {}, {}, n_train_rows, len(subjects.y_eval), {}, ft_setting(cfg, n_train_rows),
                         missing)
    runs = finetune_runs(cfg)
    images, labels = _eval_images(subjects, cfg)
    if paper:
        outputs = _paper_outputs(runs, tome, cfg, images, labels, device)
    else:
        cache = checkpoints.checkpoint_dir(cfg.profile) if cfg.profile == "default" else None
        cache = cache if cache is not None and cached.VARMEDAD.covers(runs) else None
        outputs = cached.outputs(runs, subjects.ft_start, subjects.base_recipe, subjects.base_ds, tome, images,
                                 labels, cache_dir=cache, images_note="the base model's test split"
                                 if cfg.profile == "default" else "the notebook's images", device=device)
    preds, refs, rows, trained_runs = {}, {}, [], {}
    for o in outputs:
        p = _as_predictions(o.arrays, labels, o.recipe.name)
        if not o.trained:
            refs[o.config] = p
            continue
        preds[(o.config, o.seed)] = p
        ci = intervals.bootstrap_ci(p.correct.astype(float), seed=cfg.seed)
        row = {"config": o.config, "seed": o.seed, "gmacs": o.info["gmacs"], "top1": ci.estimate, "top1_low": ci.low,
               "top1_high": ci.high, "loaded": bool(o.info.get("loaded")), "train_time_s": o.info["train_time_s"],
               "recipe_hash": o.recipe.spec_hash() if paper else o.recipe.recipe_hash()}
        if paper:
            trained_runs[(o.config, o.seed)] = o.info["run"]
            row.update(run=o.recipe.name, source=o.info["run"].source, full_schedule=o.info["run"].full_schedule)
        rows.append(row)
    return Finetunes(pd.DataFrame(rows), preds, refs, n_train_rows, len(labels), trained_runs,
                     ft_setting(cfg, n_train_rows))


def seed_summary_table(ft: pd.DataFrame) -> pd.DataFrame:
    """Mean, sd and t-interval of top-1 over seeds per fine-tuned configuration."""
    summ = []
    for name, g in ft.groupby("config", sort=False):
        ss = intervals.seed_summary(g.top1.values)
        summ.append({"config": name, "gmacs": g.gmacs.mean(), "top1_mean": ss.mean, "top1_sd": ss.std, "seeds": ss.n,
                     "ci_low": ss.low, "ci_high": ss.high})
    return pd.DataFrame(summ)


def ft_setting(cfg: SimpleNamespace, n_train_rows: int) -> str:
    """What every fine-tuning run of ``cfg`` is, in words (for the claims' details); at ``paper`` the recipe
    :data:`PAPER_RECIPE` and the limits the settings put on it."""
    if getattr(cfg, "profile", None) == "paper":
        return _paper_setting(cfg, n_train_rows)
    images = cfg.finetune_steps * cfg.finetune_batch
    trains = finetune_trainable(cfg.base_model)
    return (f"{cfg.base_model} fine-tuned with pruning in place for {cfg.finetune_steps} steps of {cfg.finetune_batch} "
            f"images ({images} images, {images / n_train_rows:.2f} epochs of its {n_train_rows}-image training split; "
            f"AdamW at {cfg.finetune_lr:g}, cosine to a tenth), training "
            + ("every weight" if trains is None else "only " + ", ".join(p.rstrip(".") for p in trains)))


def _paper_setting(cfg: SimpleNamespace, n_train_rows: int) -> str:
    """The paper runs' recipe in words: :data:`PAPER_RECIPE`'s schedule, and the limits of the ``train_*`` settings
    when they shorten it (the test's)."""
    from tokenprune.training.recipe_book import load_recipe

    r = load_recipe(PAPER_RECIPE)
    lim = {k: v for k, v in dataclasses.asdict(paper_runs.limits_of(cfg)).items()
           if v is not None and k not in ("workers", "eval_images")}
    return (f"{cfg.base_model}: recipe {PAPER_RECIPE} on timm's training stack with pruning in place ({r['model']} "
            f"from {r['init']} with a fresh {r['num_classes']}-class head; {r['epochs']} epochs of its {n_train_rows}-"
            f"image training split, {r['optimizer']} at {r['base_lr']:g} x global batch / 512 (global batch "
            f"{r['global_batch']}), cosine to {r['min_lr']:g}, weight decay {r['weight_decay']:g}, mixup "
            f"{r['mixup']:g} / cutmix {r['cutmix']:g}, RandAugment {r['auto_augment']}, random erasing "
            f"{r['reprob']:g}, label smoothing {r['smoothing']:g}, drop path {r['drop_path']:g}, EMA "
            f"{r['model_ema_decay']:g}, repeated augmentation {'on' if r.get('repeated_aug') else 'off'}; Eq. 8 T = "
            f"{float(cfg.temperature):g}), training every weight; the settings finetune_steps/batch/lr do not apply"
            + (f"; shortened by the limits {lim}" if lim else ""))


def trains_overlap_premise(cfg: SimpleNamespace) -> verdicts.Premise:
    """'The fine-tuning trains what the overlapping embedding changes': its patch embedding (now strided) and its
    position embedding (resampled to the new grid) must train, or the fine-tuned overlap model is the
    off-the-shelf one with a retrained tail, which is not the paper's setting."""
    trains = finetune_trainable(cfg.base_model)
    need = ("patch_embed.", "pos_embed")
    holds = trains is None or all(any(t.startswith(n) for t in trains) for n in need)
    return verdicts.Premise(TRAINS_OVERLAP, holds, "everything trains" if trains is None else
                            f"{cfg.base_model}'s fine-tunes train only {', '.join(trains)}")
