"""Notebook 03's sensitivity to the unreported choices (objection 4): the Eq. 8 temperature (for T >= 0.01 from the
fusion weights themselves; as T -> 0 from accuracy, where T moves the weights), the pruning blocks at matched MACs,
and the fusion token; and Eq. 8's unstated normalisation set (the review's minor comment 2), at DeiT-S's token
counts."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Optional, Sequence

import numpy as np
import pandas as pd
import torch

from tokenprune.core.schedule import num_keep
from tokenprune.core.scorers import select_topk
from tokenprune.measure import significance
from tokenprune.measure import rank_statistics as rankstats
from tokenprune.measure.evaluation import paired_comparison
from tokenprune.methods.varmedad import fusion_weight_distance, fusion_weight_spread
from tokenprune.study import verdicts
from tokenprune.study.varmedad.claims import CLAIMS, TEMPERATURE_MOVES
from tokenprune.study.varmedad.designs import (binding_gate, file, file_on_base, image_design, margin_factor,
                                               no_margin_factor)
from tokenprune.study.varmedad.settings import (BLOCK_ALTERNATIVES, EFFECTS, LOCS, PAPER_PATCHES, R_MAIN,
                                                T_FLAT_FROM, TV_MIN)
from tokenprune.study.varmedad.subjects import photo_source
from tokenprune.study.varmedad.sweep import blocks_name

__all__ = ["T_GRID", "temperature_spread", "temperature_flat_claim", "all_tokens_scale", "normalisation_claim",
           "robust_claim", "temperature_distance", "sensitivity"]

T_GRID = np.logspace(-9, 1, 41)
"""The temperatures of the Eq. 8 spread table, 1e-9 to 10 at four per decade."""


def temperature_spread(rank_sources: dict, blocks: Sequence[int] = (LOCS[0],), reduce: str = "mean",
                       temperatures: Sequence[float] = T_GRID) -> pd.DataFrame:
    """Effective share of pruned tokens in the Eq. 8 fused token (exp entropy / n_pruned) against T, per source and
    scorer (variance, MedAD) at r = 0.6: over the images its ``mean`` (the table, at block 4) or its ``min``, at each
    block of ``blocks`` (a ``block`` column when more than the first)."""
    if reduce not in ("mean", "min"):
        raise ValueError(f"reduce: 'mean' or 'min', got {reduce!r}")
    rows = []
    for src, cache in rank_sources.items():
        for block in blocks:
            sc = rankstats.score_rows(cache.cls_attn[block], ["attention_variance", "attention_medad"],
                                      cache.num_prefix_tokens)
            for name, s in sc.items():
                for T in temperatures:
                    share = fusion_weight_spread(s, R_MAIN, float(T))
                    rows.append({"source": src, **({"block": block} if tuple(blocks) != (LOCS[0],) else {}),
                                 "scorer": name, "T": T,
                                 "effective_share": (share.mean() if reduce == "mean" else share.min()).item()})
    return pd.DataFrame(rows)


def temperature_flat_claim(rep, subjects: SimpleNamespace) -> Optional[pd.DataFrame]:
    """Objection 4 for T >= 0.01, decided from the Eq. 8 weights themselves (no accuracy, no proxy): on the real
    photos through the pretrained ViT-S/14 (``subjects.photo_source``), the smallest effective share of the pruned
    tokens in the fused token over every image, blocks 4/7/10 (the unpruned model's [CLS] rows there), both scorers
    and the grid's T >= 0.01, against the declared bars (:data:`~tokenprune.study.varmedad.claims.FLAT_T`). Where
    the weights are a plain mean for every such T, no T in the range can change the fused token, hence nor
    accuracy. Returns the per-block minima (None when the photos are missing: not testable)."""
    decl = CLAIMS["varmedad.obj4.temperature_at_least_1e-2"]
    src = photo_source(rep, decl, subjects)
    if src is None:
        return None
    cache = subjects.rank_sources[src]
    n_patches = cache.cls_attn[LOCS[0]].shape[2] - cache.num_prefix_tokens
    grid = [float(t) for t in T_GRID if t >= T_FLAT_FROM * (1 - 1e-9)]
    table = temperature_spread({src: cache}, blocks=LOCS, reduce="min", temperatures=grid)
    worst = table.loc[table.effective_share.idxmin()]
    file(rep, decl, decl.rule().decide(float(worst.effective_share)), keys={"patches": n_patches},
         our_value=float(worst.effective_share),
         why=f"smallest share {worst.effective_share:.6f} ({worst.scorer}, block {int(worst.block)}, T = "
             f"{worst['T']:.3g}) on {cache.cls_attn[LOCS[0]].shape[0]} photo crops",
         details={"smallest share per block and scorer": {f"block {int(b)}, {n}": float(g.effective_share.min())
                                                          for (b, n), g in table.groupby(["block", "scorer"])},
                  "temperatures": f"{len(grid)} from {grid[0]:g} to {grid[-1]:g}; the share rises with T"})
    return table


def all_tokens_scale(scores: torch.Tensor, keep_rate: float, temperature: float) -> torch.Tensor:
    """Per image (``[B]``, float64): the scale of the Eq. 8 fused token normalised over all the ``N`` scored tokens
    against normalised over the pruned set P (the ``N - ceil(r N)`` lowest scores, as
    :func:`tokenprune.methods.varmedad.fuse_softmax` fuses them): ``sum over P of softmax(s / T)`` over all ``N``.
    The weights over P are proportional in both readings, so this factor is all that differs; it is at most
    ``|P| / N``, reached when the scores tie. 0 where nothing is pruned."""
    if not temperature > 0:
        raise ValueError(f"temperature: must be > 0, got {temperature!r}")
    _, rest = select_topk(scores, num_keep(scores.shape[1], keep_rate))
    w = torch.softmax(scores.double() / temperature, dim=1)
    return torch.gather(w, 1, rest).sum(1)


def normalisation_claim(rep, subjects: SimpleNamespace, temperature: float) -> pd.DataFrame:
    """The review's minor comment 2, the part that can be checked here: whether Eq. 8's unstated normalisation set
    (all the patch tokens at the location, or the pruned set P) changes the fused token, decided at DeiT-S's token
    counts (224 px, blocks 4/7/10, r = 0.6, one fused token carried on) without data: over every score vector and
    every T the scale of the all-tokens reading against the P reading ranges over (0, |P| / N], its largest value
    computed here on tied scores (:func:`all_tokens_scale`), its smallest approached as T -> 0. The same scale on the
    real photos through the pretrained ViT-S/14 at the main T stands in the details, deciding nothing. Returns the
    table of the locations."""
    rows, n = [], PAPER_PATCHES
    for block in LOCS:
        k = num_keep(n, R_MAIN)
        top = float(all_tokens_scale(torch.zeros(1, n), R_MAIN, 1.0)[0])   # tied scores: the largest scale
        rows.append({"block": block, "tokens_in": n, "pruned": n - k, "largest_scale": top})
        n = k + 1                                                        # the kept tokens and the fused one
    table = pd.DataFrame(rows)
    worst = table.loc[table.largest_scale.idxmax()]
    details = {"locations": table.to_dict("records"),
               "smallest scale": "0, approached as T -> 0 wherever a kept score exceeds the pruned ones",
               "direction": "the same in both readings (the weights over P are proportional); the next block's "
                            "LayerNorm sees the fused token without its scale, the residual stream keeps it; "
                            "accuracy is not measured",
               "not checked here": "the closing parenthesis (the review does not quote Eq. 8); the temperature T: "
                                   "varmedad.obj4.temperature_at_least_1e-2 and varmedad.obj4.temperature_to_zero"}
    src = getattr(subjects, "photo_source", None)
    if src in getattr(subjects, "rank_sources", {}):
        cache = subjects.rank_sources[src]
        sc = rankstats.score_rows(cache.cls_attn[LOCS[0]], ["attention_variance", "attention_medad"],
                                  cache.num_prefix_tokens)
        details[f"on the real photos, block {LOCS[0]}, T = {temperature:g} (not deciding)"] = {
            name: [float(c.min()), float(c.max())] for name, c in
            ((name, all_tokens_scale(s, R_MAIN, temperature)) for name, s in sc.items())}
    decl = CLAIMS["varmedad.eq8.normalisation_set"]
    file(rep, decl, decl.rule().decide(0.0, float(table.largest_scale.max())),
         our_value=round(float(worst.largest_scale), 4),
         why=f"block {int(worst.block)}: {int(worst.pruned)} of {int(worst.tokens_in)} tokens pruned",
         details=details)
    return table


def robust_claim(rep, preds: dict, cid: str, alts: Sequence[str], cfg: SimpleNamespace, subjects,
                 decide_on: Optional[Sequence[str]] = None, premises: Optional[dict] = None,
                 details: Optional[dict] = None) -> pd.DataFrame:
    """Every alternative vs the main configuration (variance, blocks 4/7/10, T main, fused) on the same images,
    paired (bootstrap, McNemar, TOST within the margin), decided by the declared robustness rule on the alternatives
    ``decide_on`` (default: all), gated on the design of the binding alternative (effect in dispute: the margin; up
    to the full test split); ``premises`` gives the value of declared premises measured here. The margin,
    :data:`EQUIV_MARGIN` in ImageNet top-1 points, is scaled by the proxy's sensitivity factor for EViT-type claims
    (:func:`~tokenprune.study.varmedad.designs.margin_factor`); a model without one leaves the claim not testable.
    Returns every alternative's row."""
    factor = margin_factor(cfg)
    rule = CLAIMS[cid].rule(factor or 1.0)
    margin = rule.margin
    rows = []
    for a in alts:
        t = significance.tost_paired(preds[a].correct.astype(float), preds["variance"].correct.astype(float),
                                     margin / 100)
        rows.append({"claim": cid, "alternative": a, **paired_comparison(preds[a], preds["variance"], seed=cfg.seed),
                     "tost_p": t.p_value, "equivalent_margin": t.equivalent})
    df = pd.DataFrame(rows)
    used = df[df.alternative.isin(list(decide_on))] if decide_on else df
    if used.empty:
        used = df
    worst = used.iloc[int(np.argmax(used.top1_diff.abs().values))]
    alternatives = [{"name": r.alternative, "estimate": r.top1_diff * 100, "low": r.top1_diff_low * 100,
                     "high": r.top1_diff_high * 100, "p": r.mcnemar_p, "equivalent": r.equivalent_margin,
                     "tost_p": r.tost_p} for r in used.itertuples()]
    n_max = getattr(subjects, "n_test_split", None)
    det, bind = binding_gate([(a["name"], margin, image_design(preds[a["name"]], preds["variance"], n_max),
                               bool(a["equivalent"] or (a["p"] < rule.alpha and (a["low"] > 0 or a["high"] < 0))))
                              for a in alternatives])
    if factor is None:
        decision = no_margin_factor(cfg)
    else:
        decision = det.gate(rule.decide(alternatives))
        details = {**(details or {}), "margin": f"{EFFECTS['no_number']:g} ImageNet points x sensitivity "
                                                f"{factor:.3g} = {margin:.3g} points"}
    file_on_base(rep, cid, decision, profile=cfg.profile,
                 base_run=getattr(subjects, "base_run", None), premises=premises,
                 keys={"worst": worst.alternative, "temperature": float(cfg.temperature), "base_model": cfg.base_model},
                 our_value=round(worst.top1_diff * 100, 2), ci=[worst.top1_diff_low * 100, worst.top1_diff_high * 100],
                 design=det.record(),
                 why=f"{worst.alternative} {worst.top1_diff * 100:+.2f} [{worst.top1_diff_low * 100:+.2f}, "
                     f"{worst.top1_diff_high * 100:+.2f}] points (p={worst.mcnemar_p:.2g}); binding {bind}",
                 details={**(details or {}), "alternatives": alternatives, "design": det.design.text()})
    return df


def temperature_distance(subjects: SimpleNamespace, base_model: str, T_main: float, alts: dict) -> dict:
    """Mean over the trained base model's images of the total-variation distance between the Eq. 8 weights at
    each alternative T and at ``T_main`` (variance scores at block 4, r = 0.6): how far a tested T moves the
    fused token (:func:`tokenprune.methods.varmedad.fusion_weight_distance`)."""
    cache = subjects.rank_sources[f"{base_model} (trained)"]
    sc = rankstats.score_rows(cache.cls_attn[LOCS[0]], ["attention_variance"], cache.num_prefix_tokens)
    return {name: float(fusion_weight_distance(sc["attention_variance"], R_MAIN, T, T_main).mean())
            for name, T in alts.items()}


def sensitivity(rep, preds: dict, sweep: pd.DataFrame, flat: float, cfg: SimpleNamespace,
                subjects: SimpleNamespace) -> pd.DataFrame:
    """Objection 4: the temperature for T >= 0.01 from the Eq. 8 weights (:func:`temperature_flat_claim`), Eq. 8's
    normalisation set (:func:`normalisation_claim`, the review's minor comment 2), and the three robustness claims
    (T -> 0, blocks at matched MACs, fusion), each within +-:data:`EQUIV_MARGIN`; the table of every alternative
    (with the block sets at equal keep rate and T = 1000 beside: T >= 0.01 is decided from the weights).
    The designs' largest scale is ``subjects.n_test_split`` (the full test split) when given."""
    temperature_flat_claim(rep, subjects)
    T_main = float(cfg.temperature)
    normalisation_claim(rep, subjects, T_main)
    t_alts = {"variance_T1e-9": 1e-9, "variance_T1e3": 1e3}
    tv = temperature_distance(subjects, cfg.base_model, T_main, t_alts)
    moves = tv["variance_T1e-9"] >= TV_MIN
    tv_txt = ", ".join(f"{a} {d:.3f}" for a, d in tv.items())
    t_premise = verdicts.Premise(TEMPERATURE_MOVES, bool(moves), f"T = {T_main:g}, bar {TV_MIN:g}: distances {tv_txt}")
    g = dict(zip(sweep.config, sweep.gmacs))
    g_main = g["variance"]
    matched = [blocks_name(locs, True) for locs in BLOCK_ALTERNATIVES]
    equal = [blocks_name(locs, False) for locs in BLOCK_ALTERNATIVES]
    mac_txt = "; ".join(f"{blocks_name(l, False)[len('variance_'):]}: keep-rate-equal MACs {g[e] / g_main - 1:+.1%}, "
                        f"matched {g[m] / g_main - 1:+.2%}" for l, e, m in zip(BLOCK_ALTERNATIVES, equal, matched))
    sens = pd.concat([
        robust_claim(rep, preds, "varmedad.obj4.temperature_to_zero", list(t_alts), cfg, subjects,
                     decide_on=["variance_T1e-9"], premises={TEMPERATURE_MOVES: t_premise},
                     details={"total-variation distances": tv, "judged": ["variance_T1e-9"],
                              "not judged": "variance_T1e3 (T >= 0.01: varmedad.obj4.temperature_at_least_1e-2)",
                              "smallest effective share for T in [0.01, 1]": flat}),
        robust_claim(rep, preds, "varmedad.obj4.blocks", matched + equal, cfg, subjects, decide_on=matched,
                     details={"MACs": mac_txt, "not judged": "the keep-rate-equal rows (sensitivity.csv)"}),
        robust_claim(rep, preds, "varmedad.obj4.fusion", ["variance_no_fusion"], cfg, subjects),
    ])
    return sens.merge(sweep[["config", "keep_rate", "gmacs"]], left_on="alternative",
                      right_on="config").drop(columns="config")
