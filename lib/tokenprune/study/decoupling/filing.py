"""Filing notebook 04's claims: each from its declaration (:mod:`tokenprune.study.decoupling.claims`) and what was
measured, through :func:`tokenprune.study.claims.file_claim`.

Per dataset run (the small model at the intermediate block and the low keep rate, unless the claim is about blocks,
keep rates or all configurations; the larger model for the null claim): :func:`file_coverage_claims` (section 5),
:func:`file_faithfulness_claims` (6), :func:`file_decoupling_claims` (7); :func:`file_cost_claim` (9) once, on
analytic MACs at the paper's scale. What each dataset's claims read is its
:class:`~tokenprune.study.decoupling.evidence.Evidence` (:func:`evidence`). Every comparison claim carries its paired
per-image design (:func:`~tokenprune.study.decoupling.evidence.paired_design`) and is gated on detecting the effect in
dispute (:func:`tokenprune.study.proxy.audit_model.gated`) before :func:`~tokenprune.study.claims.file_claim` applies
its declared premises: those measured here (the ceiling, the stand-in, enough configurations), the proxy's
sensitivity factor for the claim's family (:func:`~tokenprune.study.decoupling.evidence.proxy_sensitivity`), the
dataset the summary's figure is given for, the dataset's construction (:func:`early_parts_premise`), the head's size
in the sources (:func:`head_size_premise`) and the training runs' whole schedule at paper scale are given per filing;
the part model's bar is registered on the report by the notebook.
"""
from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any, Mapping, Optional

import numpy as np
import pandas as pd

from tokenprune.data import synthetic
from tokenprune.measure import significance
from tokenprune.study import verdicts
from tokenprune.study.decoupling import claims as decl
from tokenprune.study.decoupling.cost import fast_values
from tokenprune.study.decoupling.data import PAPER_DATASET
from tokenprune.study.decoupling.evidence import (Evidence, file_summarised, file_unmeasured, is_proxy,
                                                  paired_design, proxy_sensitivity)
from tokenprune.study.decoupling.measurements import (CENTRE_FAMILY_ALPHA, Measurements, centre_family, centre_values,
                                                      decoupling_stats, human_features_values, seeds_agree)
from tokenprune.study.decoupling.settings import Layout, mid_block
from tokenprune.study.proxy.audit_model import worst_design
from tokenprune.study.verdicts import Premise, fmt_interval

__all__ = ["evidence", "early_parts_premise", "head_size_premise", "file_coverage_claims", "file_faithfulness_claims",
           "file_decoupling_claims", "file_cost_claim"]


def _iv(x) -> dict:
    return {"our_value": round(x.estimate, 2), "ci": [round(x.low, 2), round(x.high, 2)]}


def _fmt(x) -> str:
    return fmt_interval(x.estimate, x.low, x.high) + " pp"


def evidence(settings: dict, m: Measurements, gaps: pd.DataFrame, models_table: pd.DataFrame, d: Layout,
             cfg: SimpleNamespace, sensitivity: Optional[Mapping[str, Mapping[str, Optional[float]]]] = None
             ) -> list[Evidence]:
    """The evidence of every dataset whose small model ran; ``sensitivity``: the proxy datasets with each one's
    factor by claim family (a dataset not in it is not a proxy; default: notebook 00's, :func:`is_proxy` and
    :func:`proxy_sensitivity` for each family of :data:`~tokenprune.study.decoupling.claims.SENSITIVITY_FAMILY`)."""
    run = sorted({n.split("/")[0] for n in settings if n.endswith("/small")})
    families = sorted(set(decl.SENSITIVITY_FAMILY.values()))
    if sensitivity is None:
        sensitivity = {ds: {f: proxy_sensitivity(ds, cfg, f) for f in families} for ds in run if is_proxy(ds, cfg)}
    return [Evidence(ds, settings[f"{ds}/small"], settings, m, gaps, models_table, d, cfg,
                     dict(sensitivity.get(ds, {})), proxy=ds in sensitivity) for ds in run]


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
    pct = {sc: m.mean_pct(small, d.mid, d.low_keep, sc) for sc in ("cls_attention", "sensitivity", "random", "centre")
           if m.per_image(small, d.mid, d.low_keep, sc, "cov") is not None}
    details = {"where": ev.where, "seeds positive": f"{pos} of {len(cfg.seeds)}", "coverage %": pct}
    base = m.paired(small, d.mid, d.low_keep, "cls_attention", "centre")
    if base is not None:  # the baseline of the gain against a content-free prior
        details["[CLS] attention - centre prior, pp"] = _iv(base)
    values = {"seeds_positive": pos == len(cfg.seeds), "gap": g}
    summary = (f"gap {_fmt(g)}, {pos} of {len(cfg.seeds)} seeds positive; coverage [CLS] attention "
               f"{pct['cls_attention']:.1f} %, head {pct['sensitivity']:.1f} %")
    design = ev.gap_design(d.mid, d.low_keep)
    direction = ev.declaration("coverage_better")
    direction = direction[0].claim_id(direction[1])
    own = ev.dataset == decl.GAIN_DATASET
    figure = Premise(decl.FIGURE_FOR_DATASET, holds=own, fails_as=verdicts.NOT_TESTABLE,
                     detail="" if own else f"'more than {decl.GAIN_THRESHOLD_PP:g} points' is FGVC-Aircraft's figure; "
                                           f"here the direction is {direction}")
    ev.file(rep, "coverage_gain", decl.coverage_gain_rule(len(cfg.seeds)).decide(values), design=design,
            summary=summary, details=details if own else {**details, "direction": direction},
            premises={decl.FIGURE_FOR_DATASET: figure}, **_iv(g))
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


def early_parts_premise(ev: Evidence) -> dict:
    """:data:`~tokenprune.study.decoupling.claims.EARLY_PARTS_HIDDEN` on SynthBirds, a premise about the dataset that
    its construction decides: its parts are flat-coloured shapes, the beak's colour coding the class, so an early
    block's local features locate them (the early block's coverage is shown beside it, not read by it); {} elsewhere
    (not declared)."""
    if ev.dataset != "parts":
        return {}
    m, d, small = ev.m, ev.d, ev.small
    shown = {sc: m.mean_pct(small, d.early, d.low_keep, sc) for sc in ("sensitivity", "cls_attention", "random")
             if m.per_image(small, d.early, d.low_keep, sc, "cov") is not None}
    beaks = ", ".join(f"{b.name} {'/'.join(map(str, b.colour))}" for b in synthetic.BEAK_VARIANTS)
    detail = (f"by construction: SynthBirds' parts are flat-coloured ellipses and polygons, the beak's colour coding "
              f"its class (RGB {beaks})" +
              ("" if not shown else f"; at block {d.early}, keep {d.low_keep:g}, part coverage " +
               ", ".join(f"{k} {v:.1f} %" for k, v in shown.items())))
    return {decl.EARLY_PARTS_HIDDEN: Premise(decl.EARLY_PARTS_HIDDEN, holds=False, detail=detail)}


def _blocks_and_keep_rates(rep: Any, ev: Evidence) -> None:
    """The gap's dependence on the block (intermediate largest; early and late null) and on the keep rate."""
    m, d, cfg, small = ev.m, ev.d, ev.cfg, ev.small
    early = early_parts_premise(ev)
    low = d.low_keep
    g = m.gap(small, d.mid, low)
    g_design = ev.gap_design(d.mid, low)
    d_e, d_l = m.diff_of_gaps(small, d.mid, low, d.early, low), m.diff_of_gaps(small, d.mid, low, d.late, low)
    g_e, g_l = m.gap(small, d.early, low), m.gap(small, d.late, low)
    bind, bind_block = min(((d_e, d.early), (d_l, d.late)), key=lambda t: t[0].estimate)
    decision = decl.intermediate_layer_rule(cfg.margin).decide(
        {"gap(intermediate)": g, "gap(intermediate) - gap(early)": d_e, "gap(intermediate) - gap(late)": d_l})
    ev.file(rep, "intermediate_layer", decision, keys={"mid": d.mid, "other": bind_block}, premises=early,
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
    ev.file(rep, "early_late_null", decision, keys={"block": big_block}, premises=early,
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
    """'Almost identical' faithfulness (section 6): TOST of per-image agreement within the margin (ImageNet points) x
    the proxy's sensitivity factor (not testable on a proxy without one), unless both are at the ceiling; and 'just
    as accurate' (:func:`_just_as_accurate`)."""
    for ev in evidences:
        m, d, cfg = ev.m, ev.d, ev.cfg
        x = m.per_image(ev.small, d.mid, d.low_keep, "sensitivity", "agree")
        y = m.per_image(ev.small, d.mid, d.low_keep, "cls_attention", "agree")
        scale = ev.scale("equal_faithfulness")
        tost = significance.tost_paired(x, y, margin=round(decl.scaled_margin(cfg.margin, scale) / 100, 6))
        ceiling = Premise(decl.CEILING, holds=not min(x.mean(), y.mean()) >= cfg.ceiling,
                          detail=f"ceiling {100 * cfg.ceiling:g} %; agreements {100 * y.mean():.1f} % and "
                                 f"{100 * x.mean():.1f} %")
        decision = decl.equal_faithfulness_rule(cfg.margin, scale).decide(
            {"equivalent": tost.equivalent,
             "agreement difference (fraction)": (tost.mean_diff, tost.ci_low, tost.ci_high)})
        design = paired_design(x, y, ev.n_split, f"top-1 agreement with the unpruned model, sensitivity - "
                                                 f"cls_attention, block {d.mid}, keep {d.low_keep:g}; sensitivity "
                                                 "head: mean of the seeds per image")
        ev.file(rep, "equal_faithfulness", decision, design=design,
                premises={decl.CEILING: ceiling,
                          decl.SENSITIVITY_KNOWN: ev.sensitivity_premise("equal_faithfulness")},
                summary=f"agreement [CLS] attention {100 * y.mean():.1f} %, head {100 * x.mean():.1f} %, TOST p "
                        f"{tost.p_value:.3f}",
                details={"where": ev.where, "margin, pp": round(decl.scaled_margin(cfg.margin, scale), 3)},
                our_value=round(100 * tost.mean_diff, 2),
                ci=[round(100 * tost.ci_low, 2), round(100 * tost.ci_high, 2)])
        _just_as_accurate(rep, ev)
    _file_not_run(rep, ("equal_faithfulness", "just_as_accurate"), settings)


def _unpruned_top1(ev: Evidence) -> Optional[float]:
    """The small model's unpruned top-1 (%) from the models table, None where it has none."""
    t = ev.models_table
    if not len(t) or "top1_unpruned" not in t or ev.small not in set(t.setting):
        return None
    return 100 * float(t.set_index("setting").loc[ev.small, "top1_unpruned"])


def _just_as_accurate(rep: Any, ev: Evidence) -> None:
    """'just as accurate': the model pruned by the sensitivity head against the one pruned by [CLS] attention (the
    standard method the summary's sentence compares with), paired TOST of per-image top-1 correctness within the
    margin (ImageNet points) x the proxy's sensitivity factor, at the claims' block and keep rate; uninformative where
    both pruned models keep nearly every decision of the unpruned one (the ceiling on agreement)."""
    m, d, cfg = ev.m, ev.d, ev.cfg
    x, y = (m.per_image(ev.small, d.mid, d.low_keep, sc, "correct") for sc in ("sensitivity", "cls_attention"))
    if x is None or y is None:
        dl_, keys = ev.declaration("just_as_accurate")
        file_unmeasured(rep, dl_, verdicts.not_testable(f"top-1 of the pruned models not measured at block {d.mid}, "
                                                        f"keep {d.low_keep:g}"),
                        keys=keys, read=ev.premises(), paper_value=decl.PAPER_VALUE["just_as_accurate"])
        return
    ax, ay = (m.per_image(ev.small, d.mid, d.low_keep, sc, "agree") for sc in ("sensitivity", "cls_attention"))
    agree = [100 * float(np.mean(a)) for a in (ay, ax) if a is not None]
    ceiling = Premise(decl.ACCURACY_CEILING, holds=bool(agree) and min(agree) < 100 * cfg.ceiling,
                      detail=f"ceiling {100 * cfg.ceiling:g} %; agreements " +
                             (" and ".join(f"{a:.1f} %" for a in agree) or "not measured"))
    scale = ev.scale("just_as_accurate")
    margin = decl.scaled_margin(cfg.margin, scale)
    tost = significance.tost_paired(x, y, margin=round(margin / 100, 6))
    decision = decl.just_as_accurate_rule(cfg.margin, scale).decide(
        {"equivalent": tost.equivalent, "top-1 difference (fraction)": (tost.mean_diff, tost.ci_low, tost.ci_high)})
    design = paired_design(x, y, ev.n_split, f"top-1 correctness, sensitivity - cls_attention, block {d.mid}, keep "
                                             f"{d.low_keep:g}; sensitivity head: mean of the seeds per image")
    top1 = {"[CLS] attention": round(100 * float(np.mean(y)), 2), "sensitivity head": round(100 * float(np.mean(x)), 2)}
    unpruned = _unpruned_top1(ev)
    if unpruned is not None:
        top1["unpruned"] = round(unpruned, 2)
    ev.file(rep, "just_as_accurate", decision, design=design,
            premises={decl.ACCURACY_CEILING: ceiling,
                      decl.SENSITIVITY_KNOWN: ev.sensitivity_premise("just_as_accurate")},
            summary=f"top-1 [CLS] attention {top1['[CLS] attention']:.1f} %, head {top1['sensitivity head']:.1f} %, "
                    f"TOST p {tost.p_value:.3f}",
            details={"where": ev.where, "margin, pp": round(margin, 3), "top-1 %": top1},
            our_value=round(100 * tost.mean_diff, 2), ci=[round(100 * tost.ci_low, 2), round(100 * tost.ci_high, 2)])


def file_decoupling_claims(rep: Any, evidences: list[Evidence], settings: dict) -> None:
    """The title claim (section 7), pooled over configurations and within keep rates (mean of the within-keep-rate
    rhos); a rank correlation, not a paired difference in points: no design. On a proxy only the configurations in
    DeiT-S's cost regime count (agreement cost within K2's band x the proxy's sensitivity factor,
    :func:`~tokenprune.study.decoupling.claims.regime_band`; not testable without a factor); at paper scale every
    configuration."""
    for ev in evidences:
        cfg = ev.cfg
        band = ev.band
        st = decoupling_stats(ev.m, ev.small, cfg.keep_rates, cfg.n_boot, cfg.seed, cost_band=band)
        band_txt = ("every configuration (paper scale)" if band is None and not ev.on_proxy else
                    "every configuration (no factor)" if band is None else
                    f"agreement cost {band[0]:.1f}-{band[1]:.1f} points (K2's {decl.REGIME_BAND[0]:g}-"
                    f"{decl.REGIME_BAND[1]:g} x {ev.scale('decoupled'):.2f})")
        for key, iv, what, name, enough in (
                ("decoupled", st.pooled, "rank correlation", decl.ENOUGH_CONFIGS, st.n_configs >= 5),
                ("decoupled_equal_keep", st.stratified, "mean within-keep-rate rank correlation",
                 decl.ENOUGH_CONFIGS_PER_KEEP, st.n_strata >= 1)):
            scaled = ev.sensitivity_premise(key)
            premise = Premise(name, holds=enough, detail=f"{st.n_configs} of {st.n_measured} configurations in "
                                                         f"{band_txt}; per keep rate {st.strata}")
            e, lo, hi = iv
            rule = decl.DECOUPLED_RULE if key == "decoupled" else decl.DECOUPLED_EQUAL_KEEP_RULE
            details = {"configurations": st.n_configs, "configurations measured": st.n_measured,
                       "counted": band_txt, "per keep rate": st.strata}
            if enough and hi < -decl.DECOUPLED_MARGIN:
                details["opposed"] = ("the interval lies below the margin's negative: coverage and faithfulness "
                                      "pull in different directions, which is not 'decoupled' either")
            ev.file(rep, key, rule.decide({what: (e, lo, hi)}), premises={name: premise, scaled.name: scaled},
                    summary=f"Spearman rho of mean coverage and mean agreement over {st.n_configs} configurations of "
                            f"{ev.S.name}, bootstrap over {len(ev.S.x_eval)} images",
                    details=details, our_value=None if not math.isfinite(e) else round(e, 3),
                    ci=None if not (math.isfinite(lo) and math.isfinite(hi)) else [round(lo, 3), round(hi, 3)])
    _file_not_run(rep, ("decoupled", "decoupled_equal_keep"), settings)


def head_size_premise(scorer_macs: pd.DataFrame) -> Premise:
    """:data:`~tokenprune.study.decoupling.claims.HEAD_SIZE_GIVEN`: the sources give the head's parameter count
    (:data:`~tokenprune.study.decoupling.claims.HEAD_PARAMS_FROM_SOURCES`) and the head whose MACs were counted at
    DeiT-S's width has it."""
    given = decl.HEAD_PARAMS_FROM_SOURCES
    r = scorer_macs[(scorer_macs.setting == "paper scale (224 px)") & (scorer_macs.model == "deit_small_patch16_224")]
    ours = int(r.head_params.iloc[0]) if "head_params" in r and len(r) else None
    holds = given is not None and ours == given
    detail = (("no source gives the head's size: the press summary names none and the paper was not found" if given
               is None else f"the sources give {given} parameters") +
              ("" if ours is None else f"; the head counted here has {ours} parameters at DeiT-S's width"))
    return Premise(decl.HEAD_SIZE_GIVEN, holds=holds, detail=detail)


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
    return file_summarised(rep, d, decision, keys={}, paper_value=pv, our_value=round(worst, 3),
                           premises={decl.HEAD_SIZE_GIVEN: head_size_premise(scorer_macs)},
                           summary=f"DeiT-B up to {vb.extra_pct_of_unpruned.max():.3f} %; analytic MACs: the head is "
                                   "a dense MLP over every prunable token",
                           details={"per keep rate": {f"{k:g}": {"% of unpruned": a, "% of the [CLS]-pruned model": b}
                                                      for k, a, b in v.itertuples(index=False)}})
