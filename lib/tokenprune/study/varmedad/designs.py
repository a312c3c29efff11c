"""Notebook 03's designs and intervals: the paired, seed and cluster designs of its comparisons
(:class:`~tokenprune.measure.power.Design`), the Detectable gate of a claim made of several comparisons, the
two-stage cluster bootstrap, and filing a claim measured on the base model (:func:`file_on_base`)."""
from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping, Optional, Sequence

import numpy as np

from tokenprune.measure import intervals
from tokenprune.measure.evaluation import Predictions
from tokenprune.measure.power import Design
from tokenprune.study import paper_runs, verdicts
from tokenprune.study.claims import Declaration, file_claim
from tokenprune.study.proxy import chosen
from tokenprune.study.why import too_long
from tokenprune.study.varmedad.claims import CLAIMS

__all__ = ["FAMILY", "margin_factor", "no_margin_factor", "image_design", "seed_design", "cluster_design",
           "binding_gate", "beats_values", "part_summary", "part_text", "beats_gate", "cluster_bootstrap_ci",
           "interval", "file", "file_on_base"]


#: the claim family of the paper's margins (:data:`tokenprune.study.proxy.plan.FAMILIES`): its scorers keep the top-k
#: patches by a statistic of the [CLS] attention and fuse the rest, EViT's mechanism
FAMILY = "evit"


def margin_factor(cfg: Any) -> Optional[float]:
    """The factor a margin in ImageNet top-1 points is multiplied by on the model ``cfg.base_model``: 1 at the paper
    profile (DeiT-S itself), else the proxy's sensitivity factor for :data:`FAMILY`'s claims
    (:func:`tokenprune.study.proxy.chosen.sensitivity_of`), None where the model is not a proxy notebook 00 chose or
    the family has no factor on it (the margin has no meaning there: :func:`no_margin_factor`)."""
    return 1.0 if cfg.profile == "paper" else chosen.sensitivity_of(cfg.base_model, FAMILY)


def no_margin_factor(cfg: Any) -> verdicts.Decision:
    """The decision of an equivalence claim whose margin is in ImageNet top-1 points on a model with no
    :func:`margin_factor`, naming what is missing (:func:`tokenprune.study.proxy.chosen.why_no_factor`): not testable
    here on a model that is not a proxy (one that is would decide), inconclusive on a proxy whose family has no factor
    (a premise the sources do not give: DeiT-S's reference)."""
    why = f"the margin is in ImageNet top-1 points and {chosen.why_no_factor(cfg.base_model, FAMILY)}"
    if chosen.is_proxy(cfg.base_model):
        return verdicts.Decision(verdicts.INCONCLUSIVE, why, "the margin's premise")
    return verdicts.not_testable(why)


def image_design(a: Predictions, b: Predictions, n_max: Optional[int] = None,
                 max_scale: str = "the full test split", sd_source: str = "") -> Design:
    """The paired design of comparing ``a`` with ``b`` on the same images: per-image correctness (points), up to
    ``n_max`` images (the full test split of the data; None: the images here)."""
    n = len(a.labels)
    return Design.paired(a.correct.astype(float), b.correct.astype(float), unit="images",
                         n_max=max(n, int(n_max or n)), max_scale=max_scale if n_max else f"these {n} images",
                         sd_source=sd_source or f"sd of the {n} paired per-image differences of this run "
                                                "(independent of their mean)")


def seed_design(diffs: Sequence[float], what: str) -> Optional[Design]:
    """The design of a claim over seeds: the per-seed differences ``diffs`` (points), up to 5 seeds; None with fewer
    than 2 seeds (no spread to measure). ``what`` completes the sd's source."""
    d = np.asarray(diffs, dtype=np.float64)
    if len(d) < 2:
        return None
    n = len(d)
    return Design(unit="seeds", n=n, sd=float(np.std(d, ddof=1)),
                  sd_source=f"sd of the {n} per-seed differences of this run ({what}; independent of their mean)",
                  n_max=max(5, n), max_scale=f"{max(5, n)} seeds")


def cluster_design(diffs, groups, unit: str, n_max: Optional[int], max_scale: str, scale: float = 1.0) -> Design:
    """The design of a paired difference measured on clusters (a photo's crops): the unit is the cluster, its value
    the mean of its members' differences (``scale`` x)."""
    d = np.asarray(diffs, dtype=np.float64).reshape(-1)
    g = np.asarray(groups).reshape(-1)
    keys = list(dict.fromkeys(g.tolist()))
    means = np.array([d[g == k].mean() for k in keys])
    n = len(means)
    return Design.paired(means, np.zeros(n), unit=unit, n_max=max(n, int(n_max or n)), max_scale=max_scale,
                         scale=scale, sd_source=f"sd of the {n} per-{unit[:-1]} mean differences (their "
                                            f"{len(d)} members averaged) of this run (independent of their mean)")


def binding_gate(parts: Sequence[tuple[str, float, Design, bool]]) -> tuple[verdicts.Detectable, str]:
    """The :class:`~tokenprune.study.verdicts.Detectable` gate of a claim made of several comparisons, each
    ``(label, effect in dispute, design, decided)``: the part that binds is the undecided one (every part when all
    are decided) whose MDE at the largest scale is the largest multiple of its effect, since the claim can be
    decided only when that part can. Returns the gate and the part's label."""
    if not parts:
        raise ValueError("parts: at least one comparison is needed")
    open_ = [p for p in parts if not p[3]] or list(parts)
    label, effect, design, _ = max(open_, key=lambda p: p[2].mde_at_max / p[1])
    return verdicts.Detectable(effect, design), label


def beats_values(label: str, c: Mapping[str, Any]) -> dict:
    """The values :func:`~tokenprune.study.varmedad.claims.beats_rule` reads for one part, from a
    :func:`~tokenprune.measure.evaluation.paired_comparison` row."""
    return {f"{label} (top-1 points)": (c["top1_diff"] * 100, c["top1_diff_low"] * 100, c["top1_diff_high"] * 100),
            f"McNemar p < 0.05, {label}": bool(c["mcnemar_p"] < 0.05)}


def part_text(label: str, c: Mapping[str, Any]) -> str:
    """One part of a comparison in a few words: the difference with its interval in points and McNemar's p."""
    return (f"{label} {c['top1_diff'] * 100:+.2f} [{c['top1_diff_low'] * 100:+.2f}, {c['top1_diff_high'] * 100:+.2f}]"
            f" (p={c['mcnemar_p']:.2g})")


def part_summary(label: str, c: Mapping[str, Any]) -> dict:
    """One part of a comparison for a claim's details: the difference and interval in points, McNemar's p."""
    return {"part": label, "diff": round(c["top1_diff"] * 100, 2), "low": round(c["top1_diff_low"] * 100, 2),
            "high": round(c["top1_diff_high"] * 100, 2), "mcnemar_p": float(c["mcnemar_p"])}


def _part_decided(c: Mapping[str, Any]) -> bool:
    """A part of a beats rule is decided (won or lost) when its interval excludes 0 and McNemar p < 0.05."""
    return bool((c["top1_diff_low"] > 0 or c["top1_diff_high"] < 0) and c["mcnemar_p"] < 0.05)


def beats_gate(parts: Sequence[tuple[str, Mapping[str, Any]]], preds: dict, effects: Sequence[float],
               n_max: Optional[int]) -> tuple[verdicts.Detectable, str]:
    """The Detectable gate of a beats-rule claim: per part (``label``, a paired-comparison row naming its
    configurations ``a`` and ``b``) the paired design of those two on the same images, with that part's effect in
    dispute; :func:`binding_gate` picks the part that binds."""
    return binding_gate([(lb, eff, image_design(preds[c["a"]], preds[c["b"]], n_max), _part_decided(c))
                         for (lb, c), eff in zip(parts, effects)])


def cluster_bootstrap_ci(values, groups, n_boot: int = 2000, alpha: float = 0.05, seed: int = 0) -> intervals.Interval:
    """Percentile interval of the mean of ``values`` when they come in clusters (``groups``: one label per value,
    e.g. the photo a crop was cut from): each resample draws the clusters with replacement, then within each drawn
    cluster its members with replacement (two-stage, Davison & Hinkley 1997, Sec. 3.8), so values of one cluster
    are not counted as independent. NaN values are dropped; no finite value gives an all-NaN interval. With one
    value per cluster it is the ordinary bootstrap."""
    v = np.asarray(values, dtype=np.float64).reshape(-1)
    g = np.asarray(groups).reshape(-1)
    if v.shape != g.shape:
        raise ValueError(f"values, groups: expected the same length, got {v.size} and {g.size}")
    keep = np.isfinite(v)
    v, g = v[keep], g[keep]
    if v.size == 0:
        return intervals.Interval(math.nan, math.nan, math.nan, 1.0 - alpha)
    order = np.argsort(g, kind="stable")
    v, g = v[order], g[order]
    _, start_idx, sizes = np.unique(g, return_index=True, return_counts=True)
    n_g, m_max = len(sizes), int(sizes.max())
    rng = np.random.default_rng(seed)
    boots = np.empty(n_boot)
    chunk = max(1, min(n_boot, 2_000_000 // max(n_g * m_max, 1)))
    for lo in range(0, n_boot, chunk):
        k = min(chunk, n_boot - lo)
        drawn = rng.integers(0, n_g, size=(k, n_g))                                     # clusters
        member = np.floor(rng.random((k, n_g, m_max)) * sizes[drawn][..., None]).astype(np.int64)
        valid = np.arange(m_max)[None, None, :] < sizes[drawn][..., None]             # a cluster's own size
        picked = np.where(valid, v[np.minimum(start_idx[drawn][..., None] + member, v.size - 1)], 0.0)
        boots[lo:lo + k] = picked.sum((1, 2)) / valid.sum((1, 2))
    low, high = np.quantile(boots, [alpha / 2, 1 - alpha / 2])
    return intervals.Interval(float(v.mean()), float(low), float(high), 1.0 - alpha)


def interval(values, groups, seed: int) -> intervals.Interval:
    """Bootstrap interval of the mean: over clusters (crops nested) when ``groups`` is given, else over values."""
    if groups is None:
        return intervals.bootstrap_ci_or_nan(values, seed=seed)
    return cluster_bootstrap_ci(values, groups, seed=seed)


def file(rep: Any, decl: Declaration, decision: verdicts.Decision, *, why: str = "",
         details: Optional[Mapping[str, Any]] = None, premises: Optional[Mapping[str, verdicts.Premise]] = None,
         **measured: Any) -> Any:
    """:func:`~tokenprune.study.claims.file_claim` with a why of one sentence: ``why`` (the deciding numbers) follows
    the rule's reason unless both are :func:`~tokenprune.study.why.too_long`, else it stands alone and the rule's
    reason goes into ``details`` (``rule's reason``); when a declared premise fails (its name then is the why),
    ``why`` goes into ``details`` (``measured``)."""
    details, given = dict(details or {}), dict(premises or {})
    failed = [n for n in decl.premises if not (given[n] if n in given else rep.premise(n)).holds]
    if failed and why:
        details["measured"], why = why, ""
    elif decision.why and too_long(decision.why, why):
        details["rule's reason"] = decision.why
        decision, why = dataclasses.replace(decision, why=why or "the rule's reason is in the details"), ""
    return file_claim(rep, decl, decision, why=why, details=details or None, premises=given, **measured)


def file_on_base(rep: Any, cid: str, decision: verdicts.Decision, *, profile: str, base_run: Any = None,
                 premises: Optional[Mapping[str, verdicts.Premise]] = None, **measured: Any) -> Any:
    """File claim ``cid``, measured on the base model (or its fine-tunes): at ``paper`` its paper-scale declaration,
    its whole-schedule premise judged on ``base_run`` unless ``premises`` gives it; elsewhere ``cid`` itself, on
    the proxy's calibration premises registered on the report. ``measured``: :func:`file_claim`'s values."""
    given = dict(premises or {})
    if profile == "paper":
        decl = CLAIMS[paper_runs.paper_scale_id(cid)]
        if paper_runs.FULL_SCHEDULE not in given:
            given[paper_runs.FULL_SCHEDULE] = paper_runs.full_schedule_premise([base_run])
    else:
        decl = CLAIMS[cid]
    return file(rep, decl, decision, premises=given, **measured)
