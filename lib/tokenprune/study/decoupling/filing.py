"""Filing notebook 04's claims: each from its declaration (:mod:`tokenprune.study.decoupling.claims`) and what was
measured, through :func:`tokenprune.study.claims.file_claim`.

Per dataset run (the small model at the intermediate block and the low keep rate, unless the claim is about blocks,
keep rates or all configurations; the larger model for the null claim): :func:`file_coverage_claims` (section 5),
:func:`file_faithfulness_claims` (6), :func:`file_decoupling_claims` (7); :func:`file_cost_claim` (9) once, on
analytic MACs at the paper's scale. Every comparison claim carries its paired per-image design
(:func:`paired_design`) and is gated on detecting the effect in dispute
(:func:`tokenprune.study.proxy.audit_model.gated`) before :func:`~tokenprune.study.claims.file_claim` applies its
declared premises: those measured here (the ceiling, the stand-in, enough configurations) and the training runs' whole
schedule at paper scale are given per filing; the part model's bar is registered on the report by the notebook.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Mapping, Optional

import numpy as np
import pandas as pd

from tokenprune.data import synthetic
from tokenprune.measure import power, significance
from tokenprune.study import paper_runs, verdicts
from tokenprune.study.claims import Declaration, declared_premises, file_claim, gate_by_premises
from tokenprune.study.why import too_long
from tokenprune.study.decoupling import claims as decl
from tokenprune.study.decoupling.cost import fast_values
from tokenprune.study.decoupling.data import PAPER_DATASET, PAPER_DIRS, Setting
from tokenprune.study.decoupling.measurements import (CENTRE_FAMILY_ALPHA, Measurements, centre_family, centre_values,
                                                      decoupling_stats, human_features_values, seeds_agree)
from tokenprune.study.decoupling.settings import TRAINED, Layout, mid_block
from tokenprune.study.proxy.audit_model import gated, worst_design
from tokenprune.study.verdicts import Decision, Premise, fmt_interval

__all__ = ["Evidence", "evidence", "paired_design", "training_premise", "file_coverage_claims",
           "file_faithfulness_claims", "file_decoupling_claims", "file_cost_claim", "file_unmeasured"]


def paired_design(a, b, n_split: int, what: str = "", scale: float = 100.0,
                  alpha: float = power.ALPHA) -> Optional[power.Design]:
    """The paired design of per-image values ``a`` and ``b`` (``scale`` x: points), over the images where both are
    defined; its largest scale is the full test split ``n_split``, times the share of images where both are
    defined (part coverage is undefined on an image without parts). None with fewer than 2 such images."""
    x, y = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    ok = np.isfinite(x) & np.isfinite(y)
    n, n_all = int(ok.sum()), len(x)
    if n < 2:
        return None
    n_max = max(n, int(round(n_split * n / max(n_all, 1))))
    scale_txt = (f"the full test split ({n_split} images)" if n == n_all else
                 f"the full test split ({n_split} images, of which about {n_max} have it defined)")
    src = (f"sd of the {n} paired per-image differences of this run{f' ({what})' if what else ''} (independent of "
           "their mean)")
    d = power.Design.paired(x[ok], y[ok], unit="images", n_max=n_max, max_scale=scale_txt, scale=scale, sd_source=src)
    return d if alpha == d.alpha else dataclasses.replace(d, alpha=alpha)


def training_premise(*settings: Setting) -> Optional[Premise]:
    """:data:`tokenprune.study.paper_runs.FULL_SCHEDULE` of the models of ``settings`` a claim reads (a given
    checkpoint counts as whole); None when none of them comes from a training run (the proxies' base models)."""
    runs = [S.run for S in settings if getattr(S, "run", None) is not None]
    return paper_runs.full_schedule_premise(runs) if runs else None


def _iv(x) -> dict:
    return {"our_value": round(x.estimate, 2), "ci": [round(x.low, 2), round(x.high, 2)]}


def _fmt(x) -> str:
    return fmt_interval(x.estimate, x.low, x.high) + " pp"


def _gated_why(rep: Any, d: Declaration, decision: Decision, premises: Mapping[str, Premise]) -> str:
    return gate_by_premises(decision, declared_premises(rep, d, premises)).why


def _file(rep: Any, d: Declaration, decision: Decision, *, keys: Mapping[str, Any], summary: str,
          premises: Mapping[str, Premise] = {}, details: Optional[dict] = None, **values: Any) -> Any:
    """:func:`file_claim` with ``summary`` (one sentence with the deciding numbers) after the reason, where it fits in
    one why; an engine reason too long for a why is kept in ``details`` and the summary stands for it."""
    details = dict(details or {})
    premises = {k: v for k, v in premises.items() if k in d.premises}
    if too_long(_gated_why(rep, d, decision, premises)):
        details["rule's reason"] = decision.why
        decision, summary = Decision(decision.verdict, summary, decision.rule), ""
    if summary and too_long(_gated_why(rep, d, decision, premises), summary):
        details["summary"], summary = summary, ""
    return file_claim(rep, d, decision, keys=keys, why=summary, details=details or None, premises=premises,
                      **values)


def file_unmeasured(rep: Any, d: Declaration, decision: Decision, *, keys: Mapping[str, Any] = {},
                    read: Mapping[str, Premise] = {}, paper_value: Any = None) -> Any:
    """File ``d`` with nothing measured (no value, no unit): ``decision`` (not testable here) is gated on the
    premises of ``read`` only; the declared premises that cannot matter before anything is measured (the part
    model's bar when the larger model does not classify, or a dataset that was not run) are named in details."""
    unread = [p for p in d.premises if p not in read]
    bare = dataclasses.replace(d, unit="", premises=tuple(p for p in d.premises if p in read))
    return file_claim(rep, bare, decision, keys=keys, paper_value=paper_value, premises=read,
                      details={"premises not read": unread} if unread else None)


@dataclass
class Evidence:
    """What the claims on one dataset read: its small model's setting ``S`` (and every setting), the measurements,
    the gaps and settings tables, the layout and the settings ``cfg``."""

    dataset: str
    S: Setting
    settings: dict
    m: Measurements
    gaps: pd.DataFrame
    models_table: pd.DataFrame
    d: Layout
    cfg: SimpleNamespace

    @property
    def small(self) -> str:
        return f"{self.dataset}/small"

    @property
    def coverage(self) -> str:
        return "part coverage" if self.S.parts is not None else "object coverage"

    @property
    def n_split(self) -> int:
        return self.S.n_test_split or len(self.S.x_eval)

    @property
    def where(self) -> str:
        S, d = self.S, self.d
        return (f"{PAPER_DATASET.get(self.dataset, self.dataset)}, {S.model_label}, block {d.mid}, keep "
                f"{d.low_keep:g}, {len(S.x_eval)} images")

    def declaration(self, key: str) -> tuple[Declaration, dict]:
        d, keys = decl.declaration(key, self.dataset)
        return d, {**keys, "coverage": self.coverage}

    def premises(self, *extra: Setting) -> dict:
        """The training premise of the paper's datasets (the small model's run, and those of ``extra``)."""
        p = training_premise(self.S, *extra)
        return {} if p is None else {p.name: p}

    def gap_design(self, block, keep, a="sensitivity", b="cls_attention", what=""):
        x, y = self.m.per_image(self.small, block, keep, a, "cov"), self.m.per_image(self.small, block, keep, b, "cov")
        if x is None or y is None:
            return None
        return paired_design(x, y, self.n_split, what or f"{a} - {b}, block {block}, keep {keep:g}" +
                             ("; trained heads: mean of the seeds per image" if a in TRAINED else ""))

    def diff_design(self, block1, keep1, block2, keep2):
        g1, g2 = self.m.gap_values(self.small, block1, keep1), self.m.gap_values(self.small, block2, keep2)
        return paired_design(g1, g2, self.n_split, f"gap at block {block1}, keep {keep1:g} minus gap at block "
                                                   f"{block2}, keep {keep2:g}")

    def file(self, rep: Any, key: str, decision: Decision, *, design=None, keys: Mapping[str, Any] = {},
             premises: Mapping[str, Premise] = {}, summary: str = "", details: Optional[dict] = None,
             extra: tuple = (), **values: Any) -> Any:
        """File claim ``key`` on this dataset: ``decision`` gated on detecting the effect in dispute with
        ``design`` (when given), then on the declared premises (``premises``: those measured here; the training
        runs' of the small model and of ``extra``)."""
        d, k = self.declaration(key)
        record = None
        if design is not None:
            g = gated(decision, decl.effect_in_dispute(d, self.cfg), design)
            decision, record = g.decision, g.design
        return _file(rep, d, decision, keys={**k, **keys}, summary=summary, details=details,
                     premises={**self.premises(*extra), **premises}, design=record,
                     paper_value=decl.PAPER_VALUE[key], **values)


def evidence(settings: dict, m: Measurements, gaps: pd.DataFrame, models_table: pd.DataFrame, d: Layout,
             cfg: SimpleNamespace) -> list[Evidence]:
    """The evidence of every dataset whose small model ran."""
    run = sorted({n.split("/")[0] for n in settings if n.endswith("/small")})
    return [Evidence(ds, settings[f"{ds}/small"], settings, m, gaps, models_table, d, cfg) for ds in run]


def _file_not_run(rep: Any, keys: tuple, settings: dict) -> None:
    for ds in sorted({n.split("/")[0] for n in settings} - {n.split("/")[0] for n in settings if
                                                                n.endswith("/small")}):
        for key in keys:
            d, k = decl.declaration(key, ds)
            file_unmeasured(rep, d, verdicts.not_testable(f"setting {ds}/small was not run (settings parameter)"),
                            keys=k)


# ---------------------------------------------------------------------------------------------- section 5
def file_coverage_claims(rep: Any, evidences: list[Evidence], settings: dict) -> None:
    """The coverage claims (section 5) of every dataset run."""
    for ev in evidences:
        _coverage_gain(rep, ev)
        _centre_prior(rep, ev)
        _centre_everywhere(rep, ev)
        _blocks_and_keep_rates(rep, ev)
        _capacity(rep, ev)
        _human_features(rep, ev)
        _larger_model(rep, ev)
    _file_not_run(rep, ("coverage_gain", "coverage_better", "beats_centre_prior", "centre_prior_everywhere",
                        "intermediate_layer", "early_late_null", "low_keep_rate", "capacity_control",
                        "human_features", "larger_model_null"), settings)


def _coverage_gain(rep: Any, ev: Evidence) -> None:
    m, d, cfg, small = ev.m, ev.d, ev.cfg, ev.small
    g = m.gap(small, d.mid, d.low_keep)
    pos = seeds_agree(ev.gaps, small, d.mid, d.low_keep)
    pct = {sc: m.mean_pct(small, d.mid, d.low_keep, sc) for sc in ("cls_attention", "sensitivity", "random", "centre")}
    details = {"where": ev.where, "seeds positive": f"{pos} of {len(cfg.seeds)}", "coverage %": pct}
    if ev.dataset != "aircraft":
        proxy_note = "" if ev.dataset in PAPER_DIRS else " (the paper's datasets run at the paper profile)"
        details["stand-in"] = ("the summary states the figure for FGVC-Aircraft only; the same threshold is applied"
                               + proxy_note)
    values = {"seeds_positive": pos == len(cfg.seeds), "gap": g}
    summary = (f"gap {_fmt(g)}, {pos} of {len(cfg.seeds)} seeds positive; coverage [CLS] attention "
               f"{pct['cls_attention']:.1f} %, head {pct['sensitivity']:.1f} %")
    design = ev.gap_design(d.mid, d.low_keep)
    ev.file(rep, "coverage_gain", decl.coverage_gain_rule(len(cfg.seeds)).decide(values), design=design,
            summary=summary, details=details, **_iv(g))
    ev.file(rep, "coverage_better", decl.coverage_better_rule(len(cfg.seeds), cfg.margin).decide(values),
            design=design, summary=summary, details=details, **_iv(g))


def _centre_prior(rep: Any, ev: Evidence) -> None:
    m, d = ev.m, ev.d
    dc = m.paired(ev.small, d.mid, d.low_keep, "sensitivity", "centre")
    decision = decl.BEATS_CENTRE_RULE.decide(dc.estimate, dc.low, dc.high, what="sensitivity - centre")
    ev.file(rep, "beats_centre_prior", decision, design=ev.gap_design(d.mid, d.low_keep, "sensitivity", "centre"),
            summary=f"sensitivity head - centre prior {_fmt(dc)}", details={"where": ev.where}, **_iv(dc))


def _centre_everywhere(rep: Any, ev: Evidence) -> None:
    """The centre prior against the sensitivity head at every (block, keep rate) of the small model; the design is
    that of the least precise configuration, at the family's Bonferroni level."""
    m, cfg, S, small = ev.m, ev.cfg, ev.S, ev.small
    fam = centre_family(m, small, S.blocks, cfg.keep_rates)
    d, keys = ev.declaration("centre_prior_everywhere")
    if not fam:
        file_unmeasured(rep, d, verdicts.not_testable("no configuration with both scorers measured"), keys=keys)
        return
    bl, kp, worst = min(fam, key=lambda t: t[2].estimate)
    beaten = [(b, k) for b, k, v in fam if v.high < -cfg.margin]
    cls_c = [m.paired(small, b, k, "cls_attention", "centre") for b, k, _ in fam]
    cls_c = [v.estimate for v in cls_c if v is not None]
    level = CENTRE_FAMILY_ALPHA / len(fam)
    design = worst_design([paired_design(m.per_image(small, b, k, "sensitivity", "cov"),
                                         m.per_image(small, b, k, "centre", "cov"), ev.n_split,
                                         f"sensitivity - centre, block {b}, keep {k:g}, the least precise of "
                                         f"{len(fam)} configurations; alpha {level:.3g} (Bonferroni)", alpha=level)
                           for b, k, _ in fam])
    rule = decl.centre_prior_everywhere_rule(len(cfg.blocks) * len(cfg.keep_rates), cfg.margin)
    ev.file(rep, "centre_prior_everywhere", rule.decide(centre_values(fam)), design=design,
            keys={"block": bl, "keep": kp, "level": 100 * (1 - CENTRE_FAMILY_ALPHA / len(fam)),
                  "configurations": len(fam)},
            summary=f"the centre prior covers more than the head by over {cfg.margin:g} point at {len(beaten)} of "
                    f"{len(fam)} configurations",
            details={"[CLS] attention - centre, pp": [min(cls_c), max(cls_c)], "where": ev.where}, **_iv(worst))


def _blocks_and_keep_rates(rep: Any, ev: Evidence) -> None:
    """The gap's dependence on the block (intermediate largest; early and late null) and on the keep rate."""
    m, d, cfg, small = ev.m, ev.d, ev.cfg, ev.small
    low = d.low_keep
    g = m.gap(small, d.mid, low)
    g_design = ev.gap_design(d.mid, low)
    d_e, d_l = m.diff_of_gaps(small, d.mid, low, d.early, low), m.diff_of_gaps(small, d.mid, low, d.late, low)
    g_e, g_l = m.gap(small, d.early, low), m.gap(small, d.late, low)
    bind, bind_block = min(((d_e, d.early), (d_l, d.late)), key=lambda t: t[0].estimate)
    decision = decl.intermediate_layer_rule(cfg.margin).decide(
        {"gap(intermediate)": g, "gap(intermediate) - gap(early)": d_e, "gap(intermediate) - gap(late)": d_l})
    ev.file(rep, "intermediate_layer", decision, keys={"mid": d.mid, "other": bind_block},
            design=worst_design([g_design, ev.diff_design(d.mid, low, d.early, low),
                                 ev.diff_design(d.mid, low, d.late, low)]),
            summary=f"gaps at blocks {d.early}/{d.mid}/{d.late}: {g_e.estimate:+.2f}/{g.estimate:+.2f}/"
                    f"{g_l.estimate:+.2f} pp (keep {low:g})",
            details={"mid - early": _fmt(d_e), "mid - late": _fmt(d_l)}, **_iv(bind))

    te, tl = (significance.tost_paired(m.per_image(small, b, low, "sensitivity", "cov"),
                                       m.per_image(small, b, low, "cls_attention", "cov"), margin=d.margin_frac)
              for b in (d.early, d.late))
    big, big_block = max(((g_e, d.early), (g_l, d.late)), key=lambda t: abs(t[0].estimate))
    decision = decl.early_late_null_rule(cfg.margin).decide(
        {"early_equivalent": te.equivalent, "late_equivalent": tl.equivalent, "gap(early)": g_e, "gap(late)": g_l})
    ev.file(rep, "early_late_null", decision, keys={"block": big_block},
            design=worst_design([ev.gap_design(d.early, low), ev.gap_design(d.late, low)]),
            summary=f"gap at block {d.early} {_fmt(g_e)} (TOST p {te.p_value:.3f}), at block {d.late} {_fmt(g_l)} "
                    f"(TOST p {tl.p_value:.3f})", **_iv(big))

    d_k = m.diff_of_gaps(small, d.mid, low, d.mid, d.high_keep)
    g_hi = m.gap(small, d.mid, d.high_keep)
    decision = decl.low_keep_rate_rule(cfg.margin).decide({"gap(low keep)": g, "gap(low keep) - gap(high keep)": d_k})
    ev.file(rep, "low_keep_rate", decision, keys={"low": low, "high": d.high_keep},
            design=worst_design([g_design, ev.diff_design(d.mid, low, d.mid, d.high_keep)]),
            summary=f"gap at keep {low:g}: {g.estimate:+.2f} pp, at keep {d.high_keep:g}: {g_hi.estimate:+.2f} pp "
                    f"(block {d.mid})", **_iv(d_k))


def _capacity(rep: Any, ev: Evidence) -> None:
    m, d, cfg, small = ev.m, ev.d, ev.cfg, ev.small
    g = m.gap(small, d.mid, d.low_keep)
    ctrl = {c: m.gap(small, d.mid, d.low_keep, "sensitivity", c) for c in ("mimic", "task")}
    ctrl = {c: v for c, v in ctrl.items() if v is not None}
    worst = min(ctrl.values(), key=lambda v: v.estimate)
    designs = [ev.gap_design(d.mid, d.low_keep)] + [
        ev.gap_design(d.mid, d.low_keep, "sensitivity", c, f"sensitivity - {c}, block {d.mid}, keep "
                                                           f"{d.low_keep:g}; both: mean of the seeds per image")
        for c in ctrl]
    values = {"sensitivity - cls_attention": g, **{f"sensitivity - {c}": v for c, v in ctrl.items()}}
    details = {} if "task" in ctrl else {"task": "the task-loss control was not trained for this dataset "
                                                 "(task_settings)"}
    ev.file(rep, "capacity_control", decl.capacity_control_rule(list(ctrl), cfg.margin).decide(values),
            design=worst_design(designs), summary=", ".join(f"sensitivity - {c}: {_fmt(v)}" for c, v in ctrl.items()),
            details=details, **_iv(worst))


def _human_features(rep: Any, ev: Evidence) -> None:
    """SynthBirds' class-defining parts stand in for 'the patches humans would use' (a premise); no other dataset
    has what would decide it."""
    S, cfg = ev.S, ev.cfg
    if ev.dataset != "parts" or S.parts is None:
        d, keys = ev.declaration("human_features")
        reason = ("Fashion-MNIST has no parts" if ev.dataset == "fmnist" else
                  f"{PAPER_DATASET.get(ev.dataset, ev.dataset)} marks parts or boxes, not which of them humans use")
        file_unmeasured(rep, d, verdicts.not_testable(
            f"no annotation of the features humans would use to identify the object: {reason}"), keys=keys,
            paper_value=decl.PAPER_VALUE["human_features"])
        return
    hf = human_features_values(S, ev.m, cfg)
    stand_in = Premise(decl.STAND_IN, holds=hf.gap is not None,
                       detail=f"{', '.join(synthetic.DISCRIMINATIVE_PARTS)}: by construction the only parts whose "
                              f"appearance depends on the class; {hf.n_valid} images with a class-defining part")
    iv = hf.gap if hf.gap is not None else SimpleNamespace(estimate=math.nan, low=math.nan, high=math.nan)
    decision = decl.human_features_rule(len(cfg.seeds), cfg.margin).decide(
        {"gap (class-defining parts)": iv, "seeds_positive": hf.positive == hf.seeds})
    design = paired_design(hf.x, hf.y, ev.n_split,
                           "class-defining-part coverage, sensitivity - cls_attention, on the images with such a "
                           "part; sensitivity head: mean of the seeds per image")
    ev.file(rep, "human_features", decision, design=design, premises={decl.STAND_IN: stand_in},
            summary=f"{hf.positive} of {hf.seeds} seeds positive; class-defining-part coverage: head "
                    f"{hf.coverage_head:.1f} %, [CLS] attention {hf.coverage_cls:.1f} % ({hf.n_valid} images)",
            details={"where": ev.where}, **({} if hf.gap is None else _iv(hf.gap)))


def _larger_model(rep: Any, ev: Evidence) -> None:
    """A larger model that does not classify the dataset leaves the claim not testable, gated only on the training
    runs' whole schedule (a shortened run is why it does not classify)."""
    m, d, cfg, S, settings = ev.m, ev.d, ev.cfg, ev.S, ev.settings
    large = f"{ev.dataset}/large"
    dl_, keys = ev.declaration("larger_model_null")
    paper_value = decl.PAPER_VALUE["larger_model_null"]
    if large not in settings:
        file_unmeasured(rep, dl_, verdicts.not_testable(f"setting {large} was not run (settings parameter)"),
                        keys=keys, paper_value=paper_value)
        return
    SL = settings[large]
    acc = ev.models_table.set_index("setting").loc[large]
    chance = 1 / int(SL.model.num_classes)
    if not acc.top1_low > 2 * chance:
        decision = verdicts.not_testable(
            f"the larger model here does not classify this dataset: unpruned top-1 {100 * acc.top1_unpruned:.1f} % "
            f"[{100 * acc.top1_low:.1f}, {100 * acc.top1_high:.1f}] of {int(SL.model.num_classes)} classes "
            f"(chance {100 * chance:.1f} %)",
            rule="testable when the larger model's unpruned top-1 has a 95 % interval above twice chance")
        file_unmeasured(rep, dl_, decision, keys=keys, paper_value=paper_value, read=ev.premises(SL))
        return
    mid_l = mid_block(SL.blocks)
    g = m.gap(ev.small, d.mid, d.low_keep)
    gl = m.gap(large, mid_l, d.low_keep)
    xl = m.per_image(large, mid_l, d.low_keep, "sensitivity", "cov")
    yl = m.per_image(large, mid_l, d.low_keep, "cls_attention", "cov")
    tl = significance.tost_paired(xl, yl, margin=d.margin_frac)
    decision = decl.larger_model_null_rule(cfg.margin).decide(
        {"tost_equivalent": tl.equivalent, "small-model gap": g, "larger-model gap": gl})
    design = paired_design(xl, yl, SL.n_test_split or len(SL.x_eval),
                           f"larger model, sensitivity - cls_attention, block {mid_l}, keep {d.low_keep:g}; "
                           "sensitivity head: mean of the seeds per image")
    ev.file(rep, "larger_model_null", decision, design=design, extra=(SL,),
            summary=f"larger-model gap {_fmt(gl)} (TOST p {tl.p_value:.3f}), small-model gap {_fmt(g)}",
            details={"larger model": f"{SL.model_label}, grid {SL.grid[0]}x{SL.grid[1]} (small model "
                                     f"{S.grid[0]}x{S.grid[1]}), block {mid_l}, {len(SL.x_eval)} images"},
            **_iv(gl))


# ---------------------------------------------------------------------------------------------- sections 6, 7, 9
def file_faithfulness_claims(rep: Any, evidences: list[Evidence], settings: dict) -> None:
    """'Almost identical' faithfulness (section 6): TOST of per-image agreement, unless both are at the ceiling."""
    for ev in evidences:
        m, d, cfg = ev.m, ev.d, ev.cfg
        x = m.per_image(ev.small, d.mid, d.low_keep, "sensitivity", "agree")
        y = m.per_image(ev.small, d.mid, d.low_keep, "cls_attention", "agree")
        tost = significance.tost_paired(x, y, margin=d.margin_frac)
        ceiling = Premise(decl.CEILING, holds=not min(x.mean(), y.mean()) >= cfg.ceiling,
                          detail=f"ceiling {100 * cfg.ceiling:g} %; agreements {100 * y.mean():.1f} % and "
                                 f"{100 * x.mean():.1f} %")
        decision = decl.equal_faithfulness_rule(cfg.margin).decide(
            {"equivalent": tost.equivalent,
             "agreement difference (fraction)": (tost.mean_diff, tost.ci_low, tost.ci_high)})
        design = paired_design(x, y, ev.n_split, f"top-1 agreement with the unpruned model, sensitivity - "
                                                 f"cls_attention, block {d.mid}, keep {d.low_keep:g}; sensitivity "
                                                 "head: mean of the seeds per image")
        ev.file(rep, "equal_faithfulness", decision, design=design, premises={decl.CEILING: ceiling},
                summary=f"agreement [CLS] attention {100 * y.mean():.1f} %, head {100 * x.mean():.1f} %, TOST p "
                        f"{tost.p_value:.3f}",
                details={"where": ev.where}, our_value=round(100 * tost.mean_diff, 2),
                ci=[round(100 * tost.ci_low, 2), round(100 * tost.ci_high, 2)])
    _file_not_run(rep, ("equal_faithfulness",), settings)


def file_decoupling_claims(rep: Any, evidences: list[Evidence], settings: dict) -> None:
    """The title claim (section 7), pooled over configurations and within keep rates (mean of the within-keep-rate
    rhos); a rank correlation, not a paired difference in points: no design."""
    for ev in evidences:
        cfg = ev.cfg
        st = decoupling_stats(ev.m, ev.small, cfg.keep_rates, cfg.n_boot, cfg.seed)
        for key, iv, what, name, enough in (
                ("decoupled", st.pooled, "rank correlation", decl.ENOUGH_CONFIGS, st.n_configs >= 5),
                ("decoupled_equal_keep", st.stratified, "mean within-keep-rate rank correlation",
                 decl.ENOUGH_CONFIGS_PER_KEEP, st.n_strata >= 1)):
            premise = Premise(name, holds=enough, detail=f"{st.n_configs} configurations; per keep rate {st.strata}")
            e, lo, hi = iv
            rule = decl.DECOUPLED_RULE if key == "decoupled" else decl.DECOUPLED_EQUAL_KEEP_RULE
            details = {"configurations": st.n_configs, "per keep rate": st.strata}
            if enough and hi < -decl.DECOUPLED_MARGIN:
                details["opposed"] = ("the interval lies below the margin's negative: coverage and faithfulness "
                                      "pull in different directions, which is not 'decoupled' either")
            ev.file(rep, key, rule.decide({what: (e, lo, hi)}), premises={name: premise},
                    summary=f"Spearman rho of mean coverage and mean agreement over {st.n_configs} configurations of "
                            f"{ev.S.name}, bootstrap over {len(ev.S.x_eval)} images",
                    details=details, our_value=None if not math.isfinite(e) else round(e, 3),
                    ci=None if not (math.isfinite(lo) and math.isfinite(hi)) else [round(lo, 3), round(hi, 3)])
    _file_not_run(rep, ("decoupled", "decoupled_equal_keep"), settings)


def file_cost_claim(rep: Any, scorer_macs: Optional[pd.DataFrame]) -> Any:
    """``decouple.just_as_fast.deit_s_224``: the head's extra MACs at the paper's model and scale (analytic; the
    summary gives no speed number)."""
    d = decl.CLAIMS["decouple.just_as_fast.deit_s_224"]
    pv = decl.PAPER_VALUE["just_as_fast"]
    if scorer_macs is None or not len(fast_values(scorer_macs)):
        return file_unmeasured(rep, d, verdicts.not_testable("the scorer MAC table was not computed"), paper_value=pv)
    v, vb = fast_values(scorer_macs), fast_values(scorer_macs, "deit_base_patch16_224")
    worst = float(v.extra_pct_of_unpruned.max())
    decision = d.rule().decide(worst <= decl.FAST_TOLERANCE_PCT, f"extra MACs {worst:.3f} % of the unpruned model's "
                                                               f"exceed {decl.FAST_TOLERANCE_PCT:g} %")
    return _file(rep, d, decision, keys={}, paper_value=pv, our_value=round(worst, 3),
                 summary=f"DeiT-B up to {vb.extra_pct_of_unpruned.max():.3f} %; analytic MACs: the head is a dense "
                         "MLP over every prunable token",
                 details={"per keep rate": {f"{k:g}": {"% of unpruned": a, "% of the [CLS]-pruned model": b}
                                            for k, a, b in v.itertuples(index=False)}})
