"""Notebook 03's off-the-shelf sweep on the trained base model and the claims it decides, all paired on the same test
images without fine-tuning: the falsification test (objection 3), variance against EViT and MAC-matched ToMe
(objection 7), Eq. 7's axis, variance against MedAD and MedAD at r = 0.3."""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, Optional, Sequence

import pandas as pd
import torch

from tokenprune.core.config import PruneConfig
from tokenprune.measure import evaluation, significance
from tokenprune.measure import mac_matching as matching
from tokenprune.measure import rank_statistics as rankstats
from tokenprune.measure.evaluation import paired_comparison, prune_sweep
from tokenprune.study import cached_sweeps, verdicts
from tokenprune.study.why import MAX_WHY, shorten
from tokenprune.study.varmedad.claims import CLAIMS, MEDAD_ACC, MEDAD_JAC
from tokenprune.study.varmedad.designs import (beats_gate, beats_values, file, file_on_base, image_design, interval,
                                               margin_factor, no_margin_factor, part_summary, part_text)
from tokenprune.study.varmedad.subjects import eval_subject, photo_source
from tokenprune.study.varmedad.settings import (BLOCK_ALTERNATIVES, EFFECTS, EQUIV_MARGIN, LOCS, R_AGGRESSIVE,
                                                R_MAIN)
from tokenprune.study.paper_numbers import VARMEDAD as VM
from tokenprune.training.cached_finetunes import tome_matched

__all__ = ["blocks_name", "fs", "evit_cfg", "SweepConfigs", "sweep_configs", "Sweep", "sweep_inputs", "run_sweep",
           "falsification", "matched_offtheshelf", "medad_axis", "variance_vs_medad", "medad_r03_claims"]


def blocks_name(locs: Sequence[int], matched: bool) -> str:
    return "variance_blocks_" + "_".join(map(str, locs)) + ("_matched" if matched else "")


def fs(scorer: str, T: float, r: float = R_MAIN, locs: Sequence[int] = LOCS, name: Optional[str] = None,
       reducer: str = "fuse_softmax") -> PruneConfig:
    """A configuration with Eq. 8 fusion at temperature ``T`` (``reducer`` other than fuse_softmax: no options)."""
    opts = (("temperature", T),) if reducer == "fuse_softmax" else ()
    return PruneConfig(scorer, reducer, r, tuple(locs), opts, name=name)


def evit_cfg(name: Optional[str] = "evit") -> PruneConfig:
    """EViT at the paper's matched point: head-mean score, its own attention-weighted fusion."""
    return PruneConfig("cls_attention", "fuse_attention", R_MAIN, LOCS, name=name)


@dataclass
class SweepConfigs:
    """The sweep's configurations, the main one (``variance``) and ToMe matched to its MACs (``tome_match``)."""

    configs: list
    variance: PruneConfig
    tome_match: Any


@dataclass
class Sweep:
    """Every configuration's row (``table``: MACs, their ratio to the unpruned, top-1 ...) and predictions by name."""

    table: pd.DataFrame
    preds: dict


def sweep_configs(base: torch.nn.Module, T: float, falsify_keep_rates: Sequence[float]) -> SweepConfigs:
    """The off-the-shelf sweep: the matched point r = 0.6 (variance, MedAD and its per-head reading, EViT, the
    head mean with Eq. 8 fusion, ToMe MAC-matched to the variance model, low variance, random, cv2, Eq. 6 as
    printed), the sensitivity alternatives (T, no fusion, blocks) and the falsification keep rates."""
    variance_cfg = fs("attention_variance", T, name="variance")
    tome_match = tome_matched(base, variance_cfg)
    target_macs = matching.config_macs(base, variance_cfg)[0]
    configs = [
        variance_cfg, fs("attention_medad", T, name="medad"),
        fs("attention_medad_global", T, name="medad_per_head_reading"), evit_cfg(),
        fs("cls_attention", T, name="mean_eq8"),
        tome_match.config, fs("inverse:attention_variance", T, name="low_variance"), fs("random", T, name="random"),
        fs("attention_cv2", T, name="cv2"), fs("attention_variance_eq6", T, name="eq6_printed"),
        fs("attention_variance", 1e-9, name="variance_T1e-9"), fs("attention_variance", 1e3, name="variance_T1e3"),
        fs("attention_variance", T, reducer="drop", name="variance_no_fusion"),
        fs("attention_variance", T, locs=(3, 6, 9), name="variance_blocks_3_6_9"),
        fs("attention_variance", T, locs=(5, 8, 11), name="variance_blocks_5_8_11"),
        fs("attention_variance", T, locs=(2, 6, 10), name="variance_blocks_2_6_10"),
    ]
    # the same block sets at the main configuration's MACs (EViT Table 13's protocol): the keep rate found by
    # config_at_macs, so that a location effect is not a compute effect
    for locs in BLOCK_ALTERNATIVES:
        m = matching.config_at_macs(base, fs("attention_variance", T, locs=locs, name=blocks_name(locs, True)),
                                    target_macs)
        configs.append(m.config)
    evaluation.UNPRUNED.apply(base)
    configs += [fs("attention_medad", T, r=R_AGGRESSIVE, name="medad_r03"),
                fs("attention_variance", T, r=R_AGGRESSIVE, name="variance_r03")]
    for r in falsify_keep_rates:
        if r == R_MAIN:
            continue
        configs += [fs("attention_variance", T, r=r, name=f"variance@{r}"),
                    fs("inverse:attention_variance", T, r=r, name=f"low_variance@{r}"),
                    fs("random", T, r=r, name=f"random@{r}"), fs("cls_attention", T, r=r, name=f"mean_eq8@{r}"),
                    fs("attention_cv2", T, r=r, name=f"cv2@{r}")]
    return SweepConfigs(configs, variance_cfg, tome_match)


def sweep_inputs(cfg: Optional[SimpleNamespace] = None, subject: Optional[tuple] = None) -> cached_sweeps.SweepInputs:
    """The off-the-shelf sweep's model, images and configurations (``cfg``: the notebook's settings, None: the
    ``default`` profile's, as ``make models`` caches it; ``subject``: the notebook's (base, its sidecar, its
    evaluation images and labels), None: loaded by :func:`subjects.eval_subject`)."""
    from tokenprune.study import params

    cfg = params.setup("03_variance_medad", "default") if cfg is None else cfg
    if subject is None:
        base, info, _, x_eval, y_eval = eval_subject(cfg)
    else:
        base, info, x_eval, y_eval = subject
    configs = sweep_configs(base, float(cfg.temperature), cfg.falsify_keep_rates).configs
    return cached_sweeps.SweepInputs(base, info, x_eval, y_eval, configs, cfg.eval_batch, cfg.dtype, cfg.seed)


def run_sweep(base, x_eval, y_eval, configs, cfg, info: Optional[dict] = None) -> Sweep:
    """Every configuration on the same test images (:func:`prune_sweep`; at ``default``, given the base model's
    sidecar ``info``: the cached sweep, :mod:`tokenprune.study.cached_sweeps`), with the MAC ratio to the unpruned."""
    if info is None or cfg.profile != "default":
        table, preds = prune_sweep(base, x_eval, y_eval, configs, batch=cfg.eval_batch, dtype=cfg.dtype, seed=cfg.seed)
    else:
        inp = cached_sweeps.SweepInputs(base, info, x_eval, y_eval, list(configs), cfg.eval_batch, cfg.dtype, cfg.seed)
        preds = cached_sweeps.cached_sweep("varmedad_offtheshelf", inp, cfg.profile)
        table = evaluation.sweep_table(base, preds, configs, seed=cfg.seed)
    table["gmacs"] = table["gmacs"].astype(float)
    table["mac_ratio"] = table.gmacs / table.gmacs.iloc[0]
    return Sweep(table, preds)


def _beats(rep, cid: str, parts: list, preds: dict, effects: Sequence[float], row, subjects, cfg,
           paper_value: Any = None, keys: Optional[dict] = None, lead: int = 0) -> None:
    """File a beats-rule claim: every part won, gated on the design of the part that binds; its why leads with the
    part ``lead`` (the one its value reports)."""
    decl = CLAIMS[cid]
    values = {k: v for label, c in parts for k, v in beats_values(label, c).items()}
    det, bind = beats_gate(parts, preds, effects, getattr(subjects, "n_test_split", None))
    file_on_base(rep, cid, det.gate(decl.rule([lb for lb, _ in parts]).decide(values)), profile=cfg.profile,
                 base_run=getattr(subjects, "base_run", None), keys=keys or {}, paper_value=paper_value,
                 our_value=round(row.top1_diff * 100, 2), ci=[row.top1_diff_low * 100, row.top1_diff_high * 100],
                 design=det.record(), why=shorten(f"{part_text(*parts[lead])}; binding part {bind}", MAX_WHY - 40),
                 details={"parts": [part_summary(lb, c) for lb, c in parts], "effects in dispute": list(effects),
                          "design": det.design.text()})


def falsification(rep, preds: dict, cfg: SimpleNamespace, subjects: Any) -> pd.DataFrame:
    """Objection 3 on the trained model: variance vs low variance, random and the head mean, and cv2 vs random
    and the head mean, at every falsification keep rate (paired); files the two claims, each gated on the design
    of its binding part (effect in dispute: :data:`EFFECTS` ``no_number``, up to the full test split)."""
    rows = []
    for r in cfg.falsify_keep_rates:
        sfx = "" if r == R_MAIN else f"@{r}"
        for a, b in (("variance", "low_variance"), ("variance", "random"), ("variance", "mean_eq8"),
                     ("cv2", "random"), ("cv2", "mean_eq8")):
            rows.append({"keep_rate": r, "a": a + sfx, "b": b + sfx,
                         **paired_comparison(preds[a + sfx], preds[b + sfx], seed=cfg.seed)})
    fals = pd.DataFrame(rows)

    def part(a: str, b: str, r: float) -> tuple[str, dict]:
        sfx = "" if r == R_MAIN else f"@{r}"
        return f"{a} vs {b} at r={r}", fals[(fals.a == a + sfx) & (fals.b == b + sfx)].iloc[0].to_dict()

    eff = EFFECTS["no_number"]
    parts = [part("variance", b, r) for r in cfg.falsify_keep_rates for b in ("low_variance", "random")]
    main = fals[(fals.keep_rate == R_MAIN) & (fals.b == "low_variance")].iloc[0]
    keys = {"keep_rates": ", ".join(map(str, cfg.falsify_keep_rates)), "base_model": cfg.base_model}
    _beats(rep, "varmedad.obj3.high_vs_low_variance", parts, preds, [eff] * len(parts), main, subjects, cfg,
           keys=keys)
    parts = [part("cv2", "random", r) for r in cfg.falsify_keep_rates]
    row = fals[(fals.a == "cv2") & (fals.b == "random")].iloc[0]
    _beats(rep, "varmedad.obj3.diversity_beyond_mean", parts, preds, [eff] * len(parts), row, subjects, cfg)
    return fals


def matched_offtheshelf(rep, preds: dict, sweep: pd.DataFrame, tome_match, cfg: SimpleNamespace,
                        subjects: Any) -> pd.DataFrame:
    """Objection 7 without fine-tuning: variance and MedAD vs EViT and ToMe (MAC-matched) on the same images;
    files the claim 'variance beats both', gated on the design of its binding part (effects in dispute: Table 2's
    variance - EViT and variance - ToMe)."""
    rows = [{"a": "variance", "b": b, **paired_comparison(preds["variance"], preds[b], seed=cfg.seed)}
            for b in ("evit", "tome", "medad")]
    rows += [{"a": "medad", "b": b, **paired_comparison(preds["medad"], preds[b], seed=cfg.seed)}
             for b in ("evit", "tome")]
    matched = pd.DataFrame(rows).merge(sweep[["config", "gmacs"]], left_on="b", right_on="config")
    matched = matched.drop(columns="config")
    parts = [(f"variance vs {b}", matched[(matched.a == "variance") & (matched.b == b)].iloc[0].to_dict())
             for b in ("evit", "tome")]
    row = matched[(matched.a == "variance") & (matched.b == "tome")].iloc[0]
    top1 = VM["matched"]["top1"]
    _beats(rep, "varmedad.obj7.offtheshelf_matched", parts, preds,
           [EFFECTS["variance_vs_evit"], EFFECTS["variance_vs_tome"]], row, subjects, cfg,
           paper_value=round(top1["attention_variance"] - top1["tome"], 2),
           keys={"tome_error": f"{tome_match.rel_error:+.1%}", "base_model": cfg.base_model}, lead=1)
    return matched


def medad_axis(rep, preds: dict, subjects: Any, cfg: SimpleNamespace) -> pd.DataFrame:
    """Review major comment 2: over which axis Eq. 7's inner median runs. The per-patch reading (median over heads)
    against the per-head reading (median over patches): the Jaccard of their kept sets at block 4, r = 0.6, on every
    source (interval over images; on the photos over the photos, their crops nested). The claim is about which
    patches MedAD keeps, so it is decided on the kept sets, not on an accuracy proxy: on the real photos through the
    pretrained ViT-S/14 (``subjects.photo_source``, the source nearest DeiT-S: 6 heads, hundreds of patches) by
    :data:`~tokenprune.study.varmedad.claims.MEDAD_AXIS_RULE`. The readings' paired top-1 difference on the trained
    base model stands beside it in the claim's details, deciding nothing."""
    rows = []
    for src, cache in subjects.rank_sources.items():
        sc = rankstats.score_rows(cache.cls_attn[LOCS[0]], ["attention_medad", "attention_medad_global"],
                                  cache.num_prefix_tokens)
        jac = rankstats.topk_jaccard(sc["attention_medad"], sc["attention_medad_global"], R_MAIN)
        ci = interval(jac, subjects.rank_groups.get(src), cfg.seed)
        rows.append({"source": src, "block": LOCS[0], "jaccard": ci.estimate, "jaccard_low": ci.low,
                     "jaccard_high": ci.high,
                     "chance": rankstats.chance_jaccard(sc["attention_medad"].shape[1], R_MAIN)})
    table = pd.DataFrame(rows)
    decl = CLAIMS["varmedad.eq7.median_axis"]
    src = photo_source(rep, decl, subjects)
    if src is None:
        return table
    j = table[table.source == src].iloc[0]
    cache = subjects.rank_sources[src]
    n_patches = cache.cls_attn[LOCS[0]].shape[2] - cache.num_prefix_tokens
    details = {"jaccard by source": table.to_dict("records"),
               "kept patches shared": {"estimate": _shared(j.jaccard), "low": _shared(j.jaccard_low),
                                       "high": _shared(j.jaccard_high)},
               "intervals": "cluster bootstrap over the photos, their crops nested"}
    a, b = preds.get("medad_per_head_reading"), preds.get("medad")
    if a is not None and b is not None:
        c = paired_comparison(a, b, seed=cfg.seed)
        t = significance.tost_paired(a.correct.astype(float), b.correct.astype(float), EQUIV_MARGIN)
        details[f"{MEDAD_ACC}, trained {cfg.base_model} (not deciding: an accuracy proxy)"] = {
            **part_summary("readings", c), "tost_p": t.p_value}
    file(rep, decl, decl.rule().decide({MEDAD_JAC: (j.jaccard, j.jaccard_low, j.jaccard_high)}),
         keys={"patches": n_patches}, our_value=round(j.jaccard, 4), ci=[j.jaccard_low, j.jaccard_high],
         why=f"Jaccard {verdicts.fmt_interval(j.jaccard, j.jaccard_low, j.jaccard_high, signed=False)} (chance "
             f"{j.chance:.2f}): {_shared(j.jaccard):.0%} of the kept patches shared",
         details=details)
    return table


def _shared(jaccard: float) -> float:
    """The share of its kept patches one of two equal-size kept sets shares with the other, from their Jaccard."""
    return 2 * jaccard / (1 + jaccard)


def variance_vs_medad(rep, preds: dict, cfg: SimpleNamespace, subjects: Any) -> pd.DataFrame:
    """The abstract's 'MedAD can similarly lead to strong performance' on the trained proxy without fine-tuning,
    paired on the same images at r = 0.6 (r = 0.3 beside it): MedAD's top-1 equals variance's within the equivalence
    margin (:func:`~tokenprune.study.varmedad.claims.medad_similar_rule`, paired TOST). The margin is in ImageNet
    top-1 points, so on a proxy it is scaled by the proxy's sensitivity factor for EViT-type claims; a model without
    one (not a proxy notebook 00 chose, or a proxy on which that family has none) leaves the claim not testable here
    (:func:`~tokenprune.study.varmedad.designs.no_margin_factor`). Gated on the paired design with the (scaled) margin
    as the effect in dispute, up to the full test split; Table 2's difference (0.08) is the paper's value."""
    rows = [{"keep_rate": r, "a": a, "b": b, **paired_comparison(preds[a], preds[b], seed=cfg.seed)}
            for r, a, b in ((R_MAIN, "variance", "medad"), (R_AGGRESSIVE, "variance_r03", "medad_r03"))]
    df = pd.DataFrame(rows)
    c = df.iloc[0]
    top1 = VM["matched"]["top1"]
    cid = "varmedad.variance_vs_medad"
    factor = margin_factor(cfg)
    margin = EFFECTS["medad_similar"] * (factor or 1.0)
    det = verdicts.Detectable(margin, image_design(preds["variance"], preds["medad"],
                                                   getattr(subjects, "n_test_split", None)))
    details = {"parts": [part_summary(f"{r.a} - {r.b} at r={r.keep_rate}", r._asdict()) for r in df.itertuples()],
               "design": det.design.text()}
    if factor is None:
        decision = no_margin_factor(cfg)
    else:
        t = significance.tost_paired(preds["variance"].correct.astype(float), preds["medad"].correct.astype(float),
                                     margin / 100)
        decision = det.gate(CLAIMS[cid].rule(factor).decide(c.top1_diff * 100, c.top1_diff_low * 100,
                                                             c.top1_diff_high * 100, t.ci_low * 100, t.ci_high * 100))
        details.update({"margin": f"{EFFECTS['medad_similar']:g} ImageNet points x sensitivity {factor:.3g} = "
                                  f"{margin:.3g} points", "tost_p": t.p_value})
    file_on_base(rep, cid, decision, profile=cfg.profile, base_run=getattr(subjects, "base_run", None),
                 paper_value=round(top1["attention_variance"] - top1["attention_medad"], 2),
                 our_value=round(c.top1_diff * 100, 2), ci=[c.top1_diff_low * 100, c.top1_diff_high * 100],
                 design=det.record(), why=part_text("variance - MedAD", c), details=details)
    return df


def medad_r03_claims(rep, preds: dict, cfg: SimpleNamespace, subjects: Any) -> pd.DataFrame:
    """'MedAD stays within 3 % at r = 0.3' on the trained proxy without fine-tuning (the fine-tuned claim is one of
    the margins): whether MedAD at r = 0.3 stays within 3 top-1 points of the unpruned model, gated on its paired
    design with the 3-point margin as the effect in dispute, variance beside it."""
    rows = [{"a": a, "b": "unpruned", **paired_comparison(preds[a], preds["unpruned"], seed=cfg.seed)}
            for a in ("medad_r03", "variance_r03")]
    df = pd.DataFrame(rows)
    c = df.iloc[0]
    cid = "varmedad.medad_r03.offtheshelf"
    det = verdicts.Detectable(EFFECTS["medad_r03"], image_design(preds["medad_r03"], preds["unpruned"],
                                                                 getattr(subjects, "n_test_split", None)))
    decision = CLAIMS[cid].rule().decide(c.top1_diff * 100, c.top1_diff_low * 100, c.top1_diff_high * 100,
                                       what="MedAD r=0.3 - unpruned")
    file_on_base(rep, cid, det.gate(decision), profile=cfg.profile, base_run=getattr(subjects, "base_run", None),
                 paper_value=-VM["medad_r03"]["max_drop"], our_value=round(c.top1_diff * 100, 2),
                 ci=[c.top1_diff_low * 100, c.top1_diff_high * 100], design=det.record(),
                 why=part_text("MedAD r=0.3 - unpruned", c) + "; '3 %' read as 3 top-1 points",
                 details={"parts": [part_summary(f"{r.a} - unpruned", r._asdict()) for r in df.itertuples()],
                          "design": det.design.text()})
    return df
