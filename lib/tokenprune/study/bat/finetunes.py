"""§6: a short pruning-aware fine-tuning of the proxy with BAT and with EViT over seeds, compared on the same images.

No verdict rests on a fine-tuning that did not move the model: the claim declares
:data:`tokenprune.study.proxy.audit_model.MOVED` (both methods' fine-tuned minus off-the-shelf top-1 above 0),
judged per filing on the runs (:func:`finetune_decision`).
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd
import torch

from tokenprune.core.config import PruneConfig
from tokenprune.measure import evaluation, intervals
from tokenprune.measure import mac_matching as matching
from tokenprune.measure import macs as flops
from tokenprune.measure.power import Design
from tokenprune.study.bat.claims import CLAIMS, TWO_SEEDS
from tokenprune.study.bat.comparisons import brief, sd_source
from tokenprune.study.bat.effects import effect_vs_evit, paper_gap
from tokenprune.study.bat.proxy_scale import VARIANT
from tokenprune.study.claims import file_claim, unmeasured
from tokenprune.study.proxy.audit_model import MOVED, Comparison, gated, moved_premise
from tokenprune.study.verdicts import Decision, Premise, not_testable

__all__ = ["Finetunes", "FinetuneDecision", "run_finetune", "finetune_decision", "file_finetune_claims"]

_METHODS = (("bat", "BAT"), ("evit", "EViT (fusion)"))


@dataclass
class Finetunes:
    """The fine-tuning runs (one row per run; the last of each seed carries that seed's paired test), the summary
    over seeds per keep rate (with each method's gain over the same configuration off the shelf,
    ``<bat|evit>_gain[_low|_high]``) and the per-seed BAT - EViT top-1 gaps by keep rate; all empty when no
    fine-tuning ran."""

    runs: pd.DataFrame
    summary: pd.DataFrame
    gaps: dict


@dataclass(frozen=True)
class FinetuneDecision:
    """The decision of one fine-tuned claim before its declared premises, the seed-level design's record (None with
    one seed) and the premises judged on the runs (at least 2 seeds; the fine-tuning moved the model)."""

    decision: Decision
    design: Optional[dict]
    premises: dict


def _run_keep_rate(base: torch.nn.Module, probe: torch.nn.Module, bat: PruneConfig, recipe: Any, ft_train: Any,
                   images: torch.Tensor, labels: torch.Tensor, cfg: Any, r: float, runs: list) -> tuple[dict, dict]:
    """Fine-tune EViT and BAT (matched to EViT's MACs at ``r`` on ``probe``) once per seed; append a row per run to
    ``runs``; return the methods and the per-(seed, method) predictions."""
    from tokenprune.training.finetune import finetune, finetune_recipe

    seed = cfg.seed
    target = flops.analytic_macs(PruneConfig(reducer="fuse_attention", keep_rate=r).apply(probe)).total
    methods = {"EViT (fusion)": PruneConfig(reducer="fuse_attention", keep_rate=r),
               "BAT": matching.config_at_macs(probe, bat, target).config}
    per_seed = {}
    for s in cfg.finetune_seeds:
        for name, conf in methods.items():
            m = copy.deepcopy(base)
            rec = finetune_recipe(recipe, conf, name=f"ft_{name}_{r:g}_{s}", seed=int(s), epochs=1.0,
                                  batch_size=cfg.ft_batch, lr=1e-4, min_lr=1e-6, warmup_epochs=0.0,
                                  keep_start=0.0, keep_length=0.5, train_subset=None, dtype=cfg.dtype)
            res = finetune(m, rec, ft_train, conf)
            p = evaluation.predict(m, images, labels, batch=cfg.sweep_batch, dtype=cfg.dtype)
            per_seed[(s, name)] = p
            runs.append({"keep_rate": r, "seed": s, "method": name, "config_keep_rate": conf.keep_rate,
                         "steps": res.steps, "train_s": res.train_time_s, "top1": float(p.correct.mean()),
                         **{f"top1_{k2}": v for k2, v in
                            zip(("low", "high"), intervals.bootstrap_ci(p.correct.astype(float), seed=seed).ci)}})
        pc = evaluation.paired_comparison(per_seed[(s, "BAT")], per_seed[(s, "EViT (fusion)")], seed=seed)
        runs[-1].update({"bat_minus_evit": pc["top1_diff"], "diff_low": pc["top1_diff_low"],
                         "diff_high": pc["top1_diff_high"], "mcnemar_p": pc["mcnemar_p"]})
    return methods, per_seed


def _summary_row(base: torch.nn.Module, methods: dict, per_seed: dict, images: torch.Tensor, labels: torch.Tensor,
                 cfg: Any, r: float) -> tuple[dict, list]:
    """Over seeds: each method's mean and spread, the Student-t interval of the mean gap, and each method's gain
    over the same configuration off the shelf on the same images (two-stage bootstrap over seeds and images)."""
    seeds = cfg.finetune_seeds
    d = [per_seed[(s, "BAT")].correct.mean() - per_seed[(s, "EViT (fusion)")].correct.mean() for s in seeds]
    sb = intervals.seed_summary([per_seed[(s, "BAT")].correct.mean() for s in seeds])
    se = intervals.seed_summary([per_seed[(s, "EViT (fusion)")].correct.mean() for s in seeds])
    sd = intervals.seed_summary(d)
    row = {"keep_rate": r, "bat_mean": sb.mean, "bat_std": sb.std, "evit_mean": se.mean, "evit_std": se.std,
           "diff_mean": sd.mean, "diff_std": sd.std, "diff_low": sd.low, "diff_high": sd.high, "seeds": sd.n}
    for key, name in _METHODS:
        m = copy.deepcopy(base)
        methods[name].apply(m)
        ots = evaluation.predict(m, images, labels, batch=cfg.sweep_batch, dtype=cfg.dtype)
        ft_c = np.stack([per_seed[(s, name)].correct.astype(float) for s in seeds])
        gain = intervals.seed_image_bootstrap_diff(ft_c, ots.correct.astype(float), seed=cfg.seed)
        row.update({f"{key}_off_shelf": float(ots.correct.mean()), f"{key}_gain": gain.estimate,
                    f"{key}_gain_low": gain.low, f"{key}_gain_high": gain.high})
    return row, d


def run_finetune(base: torch.nn.Module, probe: torch.nn.Module, bat: PruneConfig, recipe: Any, train_split: Any,
                 images: torch.Tensor, labels: torch.Tensor, cfg: Any) -> Finetunes:
    """Fine-tune ``base`` with pruning (:func:`tokenprune.training.finetune.finetune`, EViT's keep-rate warm-up over
    the first half) for ``cfg.finetune_steps`` steps of ``cfg.ft_batch`` images, once per keep rate, seed and method
    (EViT with fusion; ``bat`` matched to its MACs on ``probe``), and evaluate each run on the same images; nothing
    runs when ``cfg.finetune_steps`` is 0 or at the paper profile (30 epochs of ImageNet per run)."""
    from tokenprune.training.sources import as_tensors

    runs, summary, gaps = [], [], {}
    if cfg.finetune_steps <= 0 or cfg.profile == "paper":  # not run: file_finetune_claims says why
        return Finetunes(pd.DataFrame(runs), pd.DataFrame(summary), gaps)
    ft_train = as_tensors(train_split, subset=cfg.finetune_steps * cfg.ft_batch, seed=cfg.seed + 1)
    for r in cfg.finetune_keep_rates:
        methods, per_seed = _run_keep_rate(base, probe, bat, recipe, ft_train, images, labels, cfg, r, runs)
        row, gaps[r] = _summary_row(base, methods, per_seed, images, labels, cfg, r)
        summary.append(row)
    return Finetunes(pd.DataFrame(runs), pd.DataFrame(summary), gaps)


def _gain(row: Any, key: str) -> Comparison:
    """A method's fine-tuned minus off-the-shelf top-1 (points) as a comparison over seeds."""
    nan = float("nan")
    return Comparison(diff=row[f"{key}_gain"] * 100, low=row[f"{key}_gain_low"] * 100,
                      high=row[f"{key}_gain_high"] * 100, low90=nan, high90=nan, p=None, seeds=int(row.seeds))


def finetune_decision(row: Any, per_seed: Sequence[float], r: float) -> FinetuneDecision:
    """The decision of ``bat.finetuned.vs_evit.keep<r>`` from one summary row of :func:`run_finetune` and its per-seed
    gaps (fractions): the declared direction on the Student-t interval of the mean per-seed gap (points), gated by
    its seed-level design (sd of the per-seed gaps; at most 5 seeds here) with the effect in dispute of
    :func:`~tokenprune.study.bat.effects.effect_vs_evit`; the premises (at least 2 seeds; the fine-tuning moved both
    methods) are returned for filing."""
    effect, _ = effect_vs_evit(r)
    seeds = int(row.seeds)
    decision = CLAIMS["bat.finetuned.vs_evit.keep{keep:g}"].rule().decide(row.diff_mean * 100, row.diff_low * 100,
                                                                        row.diff_high * 100)
    record = None
    if seeds >= 2:
        sd = float(np.std(np.asarray(per_seed, dtype=float) * 100, ddof=1))
        design = Design(unit="seeds", n=seeds, sd=sd, sd_source=sd_source(seeds, "per-seed (BAT - EViT top-1, points)"),
                        n_max=max(5, seeds), max_scale="5 seeds")
        g = gated(decision, effect, design)
        decision, record = g.decision, g.design
    premises = {TWO_SEEDS: Premise(TWO_SEEDS, seeds >= 2, f"{seeds}"),
                MOVED: moved_premise({name: _gain(row, key) for key, name in _METHODS})}
    return FinetuneDecision(decision, record, premises)


def _not_run(cfg: Any) -> tuple[Decision, dict]:
    """What nothing measured decides: not testable, its declared premises vacuous (no run, no proxy measurement)."""
    ran = ("finetune_steps = 0" if cfg.profile != "paper" else "not run at the paper profile (30 epochs of ImageNet "
                                                               "per run and seed)")
    why = f"no fine-tuning ran here ({ran})"
    return not_testable(why, "needs real training"), unmeasured(CLAIMS["bat.finetuned.vs_evit.keep{keep:g}"], why)


def file_finetune_claims(rep: Any, finetunes: Finetunes, cfg: Any, base_name: Optional[str]) -> None:
    """After fine-tuning BAT beats EViT (:func:`finetune_decision`: decided on the runs only when they moved the
    model); ``not testable here`` when no fine-tuning ran."""
    decl = CLAIMS["bat.finetuned.vs_evit.keep{keep:g}"]
    summary = finetunes.summary
    rows = {row.keep_rate: row for _, row in summary.iterrows()} if len(summary) else {}
    for r in cfg.finetune_keep_rates:
        row, pg = rows.get(r), paper_gap(r)
        paper_value = pg if pg is not None else "BAT > EViT"
        if row is None:
            decision, premises = _not_run(cfg)
            file_claim(rep, decl, decision, keys={"keep": r}, paper_value=paper_value, premises=premises)
            continue
        per_seed = finetunes.gaps.get(r, [])
        fd = finetune_decision(row, per_seed, r)
        effect, effect_src = effect_vs_evit(r)
        ci = [round(row.diff_low * 100, 3), round(row.diff_high * 100, 3)] if np.isfinite(row.diff_low) else None
        sentence = (f"mean BAT - EViT {row.diff_mean * 100:+.2f} pp over {int(row.seeds)} seed(s) on {cfg.n_eval} "
                    f"images; fine-tuning moved BAT {row.bat_gain * 100:+.2f}, EViT {row.evit_gain * 100:+.2f} pp")
        decision, details = brief(fd.decision, sentence, {
            "per_seed_pp": [round(v * 100, 3) for v in per_seed], "effect": effect, "effect_source": effect_src,
            "gain_bat_pp": [row.bat_gain * 100, row.bat_gain_low * 100, row.bat_gain_high * 100],
            "gain_evit_pp": [row.evit_gain * 100, row.evit_gain_low * 100, row.evit_gain_high * 100],
            "run": f"{cfg.finetune_steps} steps of batch {cfg.ft_batch} from {base_name}, EViT's keep-rate warm-up "
                   "over the first half; the paper's protocol (30 epochs of ImageNet) is not run here",
            "variant": VARIANT})
        file_claim(rep, decl, decision, keys={"keep": r}, paper_value=paper_value,
                   our_value=round(row.diff_mean * 100, 3), ci=ci, design=fd.design, premises=fd.premises,
                   details=details)
