"""§2: BAT's MAC column at the paper's scale (DeiT-S/T, 224 px, batch 1), its parameters, and ToMe's own schedule.

Which token schedule reproduces the printed column (:func:`bat_mac_table`, :func:`mac_column_match`), whether the
column counts the clustering at the study's tolerance for the same cost (:func:`counts_clustering_decision`), the
authors' log counter, the parameter count, the third-party summary's objective, and ToMe's printed GFLOPs from our
count of its own schedule (:func:`tome_mac_table`).
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

import pandas as pd
import timm
import torch

from tokenprune.core.patch import patch
from tokenprune.measure import macs as flops
from tokenprune.methods.tome import tome_schedule
from tokenprune.study.bat.claims import (CLAIMS, HEADLINE_KEEP, HEADLINE_MAC_TOLERANCE_PP, SUMMARY_STATES,
                                         counts_clustering_rule)
from tokenprune.study.bat.settings import DEIT_S, DEIT_T, PAPER_KEEP
from tokenprune.study.claims import file_claim
from tokenprune.study.paper_numbers import BAT, TOME
from tokenprune.study.tolerances import SAME_COST_GMACS
from tokenprune.study.verdicts import Decision, Premise

__all__ = ["FVCORE_NORM_PER_ELEMENT", "ClusteringEvidence", "deit_models", "layer_norm_macs", "fvcore_style_macs",
           "bat_mac_table", "mac_column_match", "counts_clustering_decision", "file_headline_mac_claim",
           "file_mac_claims", "file_parameter_claims", "summary_states", "file_loss_claim", "tome_mac_table",
           "file_tome_claims"]

_BAT_S, _BAT_T = BAT[DEIT_S], BAT[DEIT_T]
_PRINTED_COLUMN = "/".join(str(v["gmacs"]) for v in _BAT_S["keep"].values())  # "3.0/2.6/2.3/2.0/1.8/1.6"

#: fvcore's estimate for a normalisation layer with an affine transform: 5 operations per element
#: (fvcore/nn/jit_handles.py, ``norm_flop_counter``: "5 is just a rough estimate"); matrix products count as here
FVCORE_NORM_PER_ELEMENT = 5


def deit_models() -> dict[str, torch.nn.Module]:
    """DeiT-S and DeiT-T (random weights, eval mode), created once, in this order (weight initialisation
    draws from torch's global generator and dominates small runs); callers copy them."""
    return {name: timm.create_model(name).eval() for name in (DEIT_S, DEIT_T)}


def _printed_gmacs(model: str, method: str, keep_rate: float) -> Optional[float]:
    """BAT's printed GMACs for a row (DeiT-S: per keep rate; DeiT-T: the baseline only)."""
    if model == DEIT_S:
        return _BAT_S["baseline"]["gmacs"] if method == "unpruned" else _BAT_S["keep"].get(keep_rate, {}).get("gmacs")
    return _BAT_T["baseline"]["gmacs"] if method == "unpruned" else None


def layer_norm_macs(count: flops.MacCount, dim: int) -> int:
    """What the fvcore convention adds to our count: ``5`` x the elements every LayerNorm normalises (``norm1`` on
    the tokens entering each block, ``norm2`` on those entering its MLP, the final norm), from the token counts
    of ``count``. Our count and FlopCounterMode's leave norms out, as EViT's and BAT's text do not say."""
    elements = dim * (sum(count.tokens_in) + sum(count.tokens_out) + count.tokens_out[-1])
    return FVCORE_NORM_PER_ELEMENT * elements


def fvcore_style_macs(model: torch.nn.Module, img_size: int = 224) -> int:
    """The fvcore convention measured: FlopCounterMode's matrix products (with the CPU attention kernel) plus
    5 per element of every ``native_layer_norm``, at batch 1 (MACs)."""
    from torch.utils.flop_counter import FlopCounterMode

    def norm(input_shape, *_, **__):
        return 2 * FVCORE_NORM_PER_ELEMENT * math.prod(input_shape)  # FLOPs = 2 x MACs in the counter's unit

    mapping = {**flops.SDPA_CPU_FORMULA, torch.ops.aten.native_layer_norm: norm}
    x = torch.zeros(1, 3, img_size, img_size)
    with torch.inference_mode(), FlopCounterMode(display=False, custom_mapping=mapping) as counter:
        model.eval()(x)
    return counter.get_total_flops() // 2


def _schedule_rows(model_name: str, m: torch.nn.Module, methods: Sequence[tuple]) -> list[dict]:
    base_count = flops.analytic_macs(m)
    rows = [{"model": model_name, "method": "unpruned", "reducer": None, "keep_rate": 1.0, "tokens": "196",
             "gmacs_model": base_count.total / 1e9, "gmacs_reduction": 0.0, "gmacs_total": base_count.total / 1e9,
             "reduction_share": 0.0, "gmacs_norms": layer_norm_macs(base_count, m.embed_dim) / 1e9}]
    for label, red, opts in methods:
        patch(m, keep_rate=1.0, reducer=red, reducer_options=opts)
        for r in [0.9, 0.8] + PAPER_KEEP:
            m.keep_rate = r
            c = flops.analytic_macs(m)
            stages = [196] + [c.tokens_out[loc - 1] - 1 for loc in (4, 7, 10)]
            rows.append({"model": model_name, "method": label, "reducer": red, "keep_rate": r,
                         "tokens": " -> ".join(map(str, stages)), "gmacs_model": (c.total - c.reduction) / 1e9,
                         "gmacs_reduction": c.reduction / 1e9, "gmacs_total": c.total / 1e9,
                         "reduction_share": c.reduction / c.total,
                         "gmacs_norms": layer_norm_macs(c, m.embed_dim) / 1e9})
    return rows


def _measure_budget_rows(macs: pd.DataFrame, deit_s: torch.nn.Module, bat_opts: dict) -> None:
    """The DeiT-S budget rows at 0.7 and 0.3 counted by FlopCounterMode, which must agree within 1 %."""
    m = patch(copy.deepcopy(deit_s), keep_rate=1.0, reducer="merge_dpcknn_budget", reducer_options=bat_opts)
    for r in (0.7, 0.3):
        m.keep_rate = r
        a, meas = flops.analytic_macs(m), flops.measured_macs(m)
        sel = (macs.model == DEIT_S) & (macs.reducer == "merge_dpcknn_budget") & (macs.keep_rate == r)
        macs.loc[sel, "gmacs_measured"] = meas / 1e9
        assert abs(meas - a.total) / a.total < 0.01, "analytic and measured MACs disagree by more than 1%"
        fv = fvcore_style_macs(m)
        macs.loc[sel, "gmacs_fvcore_style_measured"] = fv / 1e9
        assert abs(fv - a.total - layer_norm_macs(a, m.embed_dim)) / fv < 0.01, "fvcore-style count disagrees"


def bat_mac_table(deit: Mapping[str, torch.nn.Module], bat_opts: dict, num_clusters: int,
                  measure_macs: bool) -> pd.DataFrame:
    """Analytic MACs of DeiT-S and DeiT-T at 224 px, batch 1, for EViT (fusion, drop), BAT with its clusters
    added (``merge_dpcknn``) and BAT inside EViT's budget (``merge_dpcknn_budget``) at keep 0.9, 0.8 and the
    paper's rates: tokens per stage, model MACs, the operator's own MACs, the printed figure and the authors'
    log counter; ``gmacs_fvcore_style`` is the total in fvcore's convention (LayerNorms counted, ``gmacs_norms``)
    and ``counter_spread`` its relative difference from ours. With ``measure_macs`` the DeiT-S budget rows at
    0.7 and 0.3 are also counted by FlopCounterMode (``gmacs_measured``, ``gmacs_fvcore_style_measured``)."""
    methods = [("EViT (fusion)", "fuse_attention", {}), ("EViT (drop)", "drop", {}),
               (f"BAT, +{num_clusters} clusters", "merge_dpcknn", bat_opts),
               ("BAT in EViT's budget", "merge_dpcknn_budget", bat_opts)]
    rows = []
    for model_name in (DEIT_S, DEIT_T):
        rows += _schedule_rows(model_name, copy.deepcopy(deit[model_name]), methods)
    macs = pd.DataFrame(rows)
    macs["gmacs_fvcore_style"] = macs.gmacs_total + macs.gmacs_norms
    macs["counter_spread"] = macs.gmacs_norms / macs.gmacs_total
    macs["paper_gmacs_bat"] = [_printed_gmacs(row.model, row.method, row.keep_rate) for row in macs.itertuples()]
    macs["authors_log_gmacs"] = [_BAT_S["log_gmacs"].get(row.keep_rate) if row.model == DEIT_S
                                 and row.method != "unpruned" else None for row in macs.itertuples()]
    if measure_macs:
        _measure_budget_rows(macs, deit[DEIT_S], bat_opts)
    return macs


def _row(macs: pd.DataFrame, model_name: str, reducer: str, r: float) -> Any:
    return macs[(macs.model == model_name) & (macs.reducer == reducer) & (macs.keep_rate == r)].iloc[0]


def mac_column_match(macs: pd.DataFrame) -> pd.DataFrame:
    """Per paper keep rate: the printed DeiT-S figure beside each schedule's model MACs, BAT's total with the
    clustering, the authors' log counter, and which of them round to the printed figure."""
    rows = []
    for r in PAPER_KEEP:
        want = _BAT_S["keep"][r]["gmacs"]
        b, plus = _row(macs, DEIT_S, "merge_dpcknn_budget", r), _row(macs, DEIT_S, "merge_dpcknn", r)
        ev, dr = _row(macs, DEIT_S, "fuse_attention", r), _row(macs, DEIT_S, "drop", r)
        log = _BAT_S["log_gmacs"][r]
        rows.append({"keep_rate": r, "paper": want, "budget_model": b.gmacs_model, "budget_total": b.gmacs_total,
                     "plus_clusters_model": plus.gmacs_model, "evit_fusion": ev.gmacs_model,
                     "evit_drop": dr.gmacs_model, "authors_log": log,
                     "model_rounds_to_paper": round(b.gmacs_model, 1) == want,
                     "total_rounds_to_paper": round(b.gmacs_total, 1) == want,
                     "plus_clusters_rounds_to_paper": round(plus.gmacs_model, 1) == want,
                     "log_rounds_to_paper": round(log, 1) == want})
    return pd.DataFrame(rows)


@dataclass(frozen=True)
class ClusteringEvidence:
    """What decides ``bat.macs.deit_s.counts_clustering``: the decision, the discriminating keep rates (the counts
    with and without the clustering differ by more than the tolerance), those where the printed figure is the count
    with the clustering (``support``), those where it is the count without (``against``), and the largest
    difference between the two counts with its keep rate (``largest``: ``(keep_rate, gmacs)``)."""

    decision: Decision
    discriminating: list
    support: list
    against: list
    largest: tuple


def _same_cost(a: float, b: float, tolerance: float) -> bool:
    """``a`` and ``b`` (GMACs) are the same cost: they differ by at most ``tolerance`` (to 1e-9, float noise aside)."""
    return round(abs(a - b), 9) <= tolerance


def counts_clustering_decision(rows: Sequence[tuple[float, float, float, float]],
                               tolerance: float = SAME_COST_GMACS) -> ClusteringEvidence:
    """Decide whether a printed MAC column counts the clustering, at the study's tolerance for the same cost.

    ``rows``: ``(keep_rate, printed, model_gmacs, total_gmacs)``. A rate *discriminates* when the count with the
    clustering (``total``) and the count without it (``model``) differ by more than ``tolerance`` GMACs
    (:data:`~tokenprune.study.tolerances.SAME_COST_GMACS`, the printed precision): below it the printed column cannot
    tell them apart. At a discriminating rate the printed figure is the count it is within ``tolerance`` of, when it
    is within it of one only (:func:`~tokenprune.study.bat.claims.counts_clustering_rule`: no discriminating rate, or
    mixed evidence, is inconclusive)."""
    disc, support, against = [], [], []
    for r, printed, model, total in rows:
        if _same_cost(model, total, tolerance):
            continue
        disc.append(r)
        is_total, is_model = _same_cost(printed, total, tolerance), _same_cost(printed, model, tolerance)
        if is_total and not is_model:
            support.append(r)
        elif is_model and not is_total:
            against.append(r)
    largest = max(((r, total - model) for r, _, model, total in rows), key=lambda rg: abs(rg[1]),
                  default=(math.nan, math.nan))
    values = {"follows_total": bool(support), "never_follows_model": not against,
              "follows_model_only": bool(against) and not support}
    decision = counts_clustering_rule(tolerance).decide(values)
    if not disc:
        decision = Decision(decision.verdict, f"the counts with and without the clustering differ by at most "
                                              f"{abs(largest[1]):.3f} GMACs (keep {largest[0]:g}), within the "
                                              f"{tolerance:g}-GMAC tolerance for the same cost: the printed "
                                              "precision cannot tell them apart", decision.rule)
    return ClusteringEvidence(decision, disc, support, against, largest)


def _rates(rates: Sequence[float]) -> str:
    return ", ".join(f"{r:g}" for r in rates) or "none"


def _file_column_claims(rep: Any, macs: pd.DataFrame, mac_match: pd.DataFrame, num_clusters: int) -> None:
    for r in PAPER_KEEP:
        decl = CLAIMS["bat.macs.deit_s.keep{keep:g}"]
        b, plus = _row(macs, DEIT_S, "merge_dpcknn_budget", r), _row(macs, DEIT_S, "merge_dpcknn", r)
        dr = _row(macs, DEIT_S, "drop", r)
        file_claim(rep, decl, decl.rule(r).decide(b.gmacs_model), keys={"keep": r}, our_value=round(b.gmacs_model, 3),
                   why=f"EViT's schedule ({b.tokens}) was chosen because it gives the printed column; "
                       f"{b.gmacs_model:.3f} GMACs, {b.gmacs_total:.3f} with the clustering",
                   details={"tokens": b.tokens, "clustering_mmacs": b.gmacs_reduction * 1e3,
                            "total_gmacs": b.gmacs_total, f"plus_{num_clusters}_clusters_gmacs": plus.gmacs_model,
                            "plus_clusters_tokens": plus.tokens, "evit_drop_gmacs": dr.gmacs_model,
                            "authors_log_gmacs": _BAT_S["log_gmacs"][r],
                            "count": "analytic MACs (= FlopCounterMode's) at 224 px, batch 1, transformer only"})
    n_plus = int(mac_match.plus_clusters_rounds_to_paper.sum())
    off = mac_match[~mac_match.plus_clusters_rounds_to_paper]
    decl = CLAIMS["bat.macs.deit_s.plus_clusters_variant"]
    why_not = (f"{len(off)} of 6 rates cost more than printed, e.g. keep {off.keep_rate.iloc[0]:g}: "
               f"{off.plus_clusters_model.iloc[0]:.3f}" if len(off) else "")
    file_claim(rep, decl, decl.rule().decide(n_plus == 6, why_not),
               paper_value=_PRINTED_COLUMN, our_value=f"{n_plus}/6 round to the printed figure",
               why="so sections 4-6 compare it at EViT's total MACs, not at the same keep rate",
               details={f"keep {row.keep_rate:g}": {"plus_clusters": row.plus_clusters_model, "printed": row.paper}
                        for row in mac_match.itertuples()})


def _file_counter_claims(rep: Any, macs: pd.DataFrame, mac_match: pd.DataFrame) -> None:
    ds = macs[(macs.model == DEIT_S) & macs.keep_rate.isin(PAPER_KEEP)]
    budget_rows = {r: _row(macs, DEIT_S, "merge_dpcknn_budget", r) for r in PAPER_KEEP}
    rows = [(r, _BAT_S["keep"][r]["gmacs"], float(b.gmacs_model), float(b.gmacs_total)) for r, b in budget_rows.items()]
    ev = counts_clustering_decision(rows)
    budget = macs[(macs.model == DEIT_S) & (macs.reducer == "merge_dpcknn_budget") & macs.keep_rate.isin(PAPER_KEEP)]
    max_share = float(budget.reduction_share.max())
    spreads = ds.groupby("keep_rate").counter_spread.max()
    spread_gmacs = float((ds.counter_spread * ds.gmacs_total).max())
    log07 = _BAT_S["log_gmacs"][0.7] / budget_rows[0.7].gmacs_model - 1
    r_max, d_max = ev.largest
    why = (ev.decision.why if not ev.discriminating else
           f"rates where the counts differ by more than {SAME_COST_GMACS:g} GMACs: {_rates(ev.discriminating)}; the "
           f"printed figure is the count with the clustering at {_rates(ev.support)}, without at {_rates(ev.against)}")
    file_claim(rep, CLAIMS["bat.macs.deit_s.counts_clustering"],
               Decision(ev.decision.verdict, why, ev.decision.rule),
               paper_value=_PRINTED_COLUMN,
               our_value=f"clustering up to {d_max * 1e3:.1f} MMACs (keep {r_max:g}, {max_share:.2%} of the MACs); "
                         f"discriminating rates: {_rates(ev.discriminating)}",
               details={"reason": ev.decision.why, "same_cost_tolerance_gmacs": SAME_COST_GMACS,
                        "clustering_gmacs": {f"{r:g}": total - model for r, _, model, total in rows},
                        "counters": f"ours = FlopCounterMode (matrix products) vs fvcore's convention "
                                    f"(+{FVCORE_NORM_PER_ELEMENT} per LayerNorm element), measured: they differ by "
                                    f"{spreads.min():.2%}-{spreads.max():.2%} (up to {spread_gmacs:.3f} GMACs)",
                        "authors_log_gmacs": {f"{r:g}": _BAT_S["log_gmacs"][r] for r in ev.discriminating},
                        "authors_log_vs_ours_keep0.7": log07})
    bad = mac_match[~mac_match.log_rounds_to_paper]
    n_log_ok = int(mac_match.log_rounds_to_paper.sum())
    drift = [r.authors_log - r.evit_fusion for r in mac_match.itertuples() if r.keep_rate in (0.6, 0.5, 0.4)]
    decl = CLAIMS["bat.macs.deit_s.authors_log"]
    file_claim(rep, decl, decl.rule().decide(n_log_ok == 6, "; ".join(f"keep {row.keep_rate:g}: log "
                                                                    f"{row.authors_log:.3f} vs printed {row.paper}"
                                                                    for row in bad.itertuples())),
               paper_value=_PRINTED_COLUMN, our_value=f"{n_log_ok}/6 log values round to the printed figure",
               details={"log_minus_evit_schedule_gmacs": {"0.6/0.5/0.4": [round(d, 3) for d in drift]},
                        "note": "the logged runs did not all use the schedule the column implies"})


def _file_deit_t_claims(rep: Any, macs: pd.DataFrame) -> None:
    tiny = macs[macs.model == DEIT_T]
    tiny_base = float(tiny[tiny.method == "unpruned"].gmacs_model.iloc[0])
    issue_text = _BAT_T["baseline"]["gmacs_issue_text"]
    decl = CLAIMS["bat.macs.deit_t.baseline"]
    file_claim(rep, decl, decl.rule().decide(tiny_base), our_value=round(tiny_base, 3),
               why=f"timm {DEIT_T} at 224 px: {tiny_base:.3f} GMACs, printed as {round(tiny_base, 1)}",
               details={"also_quoted": issue_text, "also_quoted_is_our_count": round(tiny_base, 1) == issue_text})
    tb = tiny[tiny.reducer == "merge_dpcknn_budget"]
    rates_at = [float(r) for r, g in zip(tb.keep_rate, tb.gmacs_model) if round(g, 1) == _BAT_T["bat"]["gmacs"]]
    g07 = float(tb[tb.keep_rate == 0.7].gmacs_model.iloc[0])
    decl = CLAIMS["bat.macs.deit_t.keep0.7"]
    file_claim(rep, decl, decl.rule().decide(g07), our_value=round(g07, 3),
               why=f"model MACs inside EViT's budget at keep 0.7; rates that round to {_BAT_T['bat']['gmacs']}: "
                   f"{_rates(rates_at)}")


def file_headline_mac_claim(rep: Any, macs: pd.DataFrame,
                            tolerance_pp: float = HEADLINE_MAC_TOLERANCE_PP) -> dict:
    """The MAC half of the summary's headline ("we reduce FLOPs by 35%"): DeiT-S with BAT inside EViT's budget at
    :data:`~tokenprune.study.bat.claims.HEADLINE_KEEP` (the Table 1 row that gives both halves), the clustering
    counted, within ``tolerance_pp`` points of 35 % fewer MACs than unpruned DeiT-S (FLOPs and MACs fall by the same
    share). The reduction at every counted keep rate and the rate that gives exactly -35 % go to the details."""
    decl = CLAIMS["bat.secondary.headline.mac_reduction"]
    want = 100 * BAT["secondary_summary_headline"]["flop_reduction"]
    ds = macs[macs.model == DEIT_S]
    base = float(ds[ds.method == "unpruned"].gmacs_total.iloc[0])
    budget = ds[ds.reducer == "merge_dpcknn_budget"].set_index("keep_rate")
    red = {float(r): 100 * (1 - float(g) / base) for r, g in budget.gmacs_total.sort_index(ascending=False).items()}
    b = _row(macs, DEIT_S, "merge_dpcknn_budget", HEADLINE_KEEP)
    value, value_model = red[HEADLINE_KEEP], 100 * (1 - float(b.gmacs_model) / base)
    k_need = flops.keep_rate_for_macs(timm.create_model(DEIT_S), (1 - want / 100) * base * 1e9)
    near = [r for r, v in red.items() if abs(v - want) <= tolerance_pp]
    printed = 100 * (1 - _BAT_S["keep"][HEADLINE_KEEP]["gmacs"] / _BAT_S["baseline"]["gmacs"])
    target = (1 - want / 100) * base
    same = _same_cost(target, float(b.gmacs_total), SAME_COST_GMACS)
    decision = decl.rule().decide(abs(value - want) <= tolerance_pp,
                                  f"keep {HEADLINE_KEEP:g} gives -{value:.2f} %, more than {tolerance_pp:g} point "
                                  f"from -{want:.0f} %")
    file_claim(rep, decl, decision, paper_value=want, our_value=round(value, 2),
               why=f"{base:.3f} -> {float(b.gmacs_total):.3f} GMACs at keep {HEADLINE_KEEP:g} (printed "
                   f"{_BAT_S['baseline']['gmacs']} -> {_BAT_S['keep'][HEADLINE_KEEP]['gmacs']}: -{printed:.1f} %); "
                   f"-{want:.0f} % needs keep {k_need:.3f}",
               details={"reduction per keep rate (%, clustering counted)": {f"{r:g}": round(v, 2)
                                                                           for r, v in red.items()},
                        "reduction without the clustering (%)": round(value_model, 2),
                        f"keep rates within {tolerance_pp:g} point of -{want:.0f} %": [f"{r:g}" for r in near],
                        f"keep rate for exactly -{want:.0f} % (EViT's schedule, analytic)": round(k_need, 4),
                        f"GMACs at -{want:.0f} % vs ours": [round(target, 3), round(float(b.gmacs_total), 3)],
                        f"same cost (within {SAME_COST_GMACS:g} GMACs)": same})
    return {"reductions": red, "reduction": value, "keep_needed": k_need, "within": near}


def file_mac_claims(rep: Any, macs: pd.DataFrame, mac_match: pd.DataFrame, num_clusters: int) -> None:
    """The MAC-column claims: each printed DeiT-S figure for BAT inside EViT's budget (the schedule chosen because it
    reproduces the column: consistency checks), the same column for the variant the accuracy comparisons use,
    whether the column counts the clustering (at the tolerance for the same cost), whether it is the authors' log
    counter, DeiT-T's baseline and BAT figure, and the MAC half of the summary's headline
    (:func:`file_headline_mac_claim`)."""
    _file_column_claims(rep, macs, mac_match, num_clusters)
    _file_counter_claims(rep, macs, mac_match)
    _file_deit_t_claims(rep, macs)
    file_headline_mac_claim(rep, macs)


def file_parameter_claims(rep: Any, deit_s: torch.nn.Module, bat_opts: dict) -> None:
    """BAT adds no parameters, and the third-party summary's loss is not the paper's (:func:`file_loss_claim`)."""
    n_plain = sum(p.numel() for p in deit_s.parameters())
    m_bat = patch(copy.deepcopy(deit_s), keep_rate=0.7, reducer="merge_dpcknn", reducer_options=bat_opts)
    n_bat = sum(p.numel() for p in m_bat.parameters())
    decl = CLAIMS["bat.params.none_added"]
    decision = decl.rule().decide(n_bat == n_plain and _BAT_S["log_params"] == n_plain,
                                f"patched {n_bat:,} vs unpatched {n_plain:,} vs logs {_BAT_S['log_params']:,}")
    file_claim(rep, decl, decision, our_value=n_bat, why=f"timm DeiT-S has {n_plain:,} parameters; with BAT {n_bat:,}")
    file_loss_claim(rep)


#: where the third-party summary states the objective (checked against the file when it is on this machine)
SUMMARY_FILE = "shared/papers/bat-secondary-summary.txt"


def summary_states(text: Optional[str], phrase: str) -> Optional[bool]:
    """Whether ``text`` (the summary, None when its file is not here) states ``phrase`` (LaTeX and spacing aside)."""
    if text is None:
        return None

    def norm(t: str) -> str:
        t = t.lower().replace("\\alpha", "alpha").replace("\\beta", "beta")
        return "".join(ch for ch in t if ch.isalnum() or ch in "=+")

    return norm(phrase.replace("L_imp", "Limp").replace("L_div", "Ldiv")) in norm(
        text.replace("L_{imp}", "Limp").replace("L_{div}", "Ldiv"))


def _summary_text() -> Optional[str]:
    for root in (Path.cwd(), *Path.cwd().parents):
        f = root / SUMMARY_FILE
        if f.is_file():
            return f.read_text(errors="replace")
    return None


def file_loss_claim(rep: Any, summary_text: Optional[str] = "auto") -> None:
    """The summary's training objective against the paper's, a transcription check: the summary's objective must
    equal what the paper trains with; its premise is that the summary really states that objective (its file, when
    here; the quoted text of ``paper_numbers.BAT`` otherwise)."""
    text = _summary_text() if summary_text == "auto" else summary_text
    quoted = BAT["secondary_summary_loss"]
    stated = summary_states(text, quoted)
    premise = Premise(SUMMARY_STATES, stated is not False, f"{SUMMARY_FILE} does not contain {quoted!r}")
    decl = CLAIMS["bat.secondary.loss_objective"]
    file_claim(rep, decl, decl.rule().decide(quoted), our_value=quoted, premises={SUMMARY_STATES: premise},
               details={"paper": "a parameter-free operator trained with the classification loss alone",
                        "summary_text": "its file" if stated is not None else "not here: the quoted text is used"})


def tome_mac_table(deit_s: torch.nn.Module, measure_macs: bool) -> pd.DataFrame:
    """DeiT-S with ToMe's own schedule (:func:`tokenprune.methods.tome.tome_schedule`: r tokens merged in every
    block, [CLS] protected, proportional attention) for ToMe's printed r: patch tokens after each block, model
    MACs, the matching's own MACs, the total, fvcore's convention (LayerNorms counted) and, with
    ``measure_macs``, FlopCounterMode's count."""
    rows = []
    for r, printed in TOME[DEIT_S]["r"].items():
        rates, locs = tome_schedule(r, deit_s.patch_embed.num_patches, len(deit_s.blocks))
        m = patch(copy.deepcopy(deit_s), keep_rate=list(rates), locations=locs, reducer="bipartite", prop_attn=True)
        c = flops.analytic_macs(m)
        row = {"r": r, "tokens": " -> ".join(str(t - 1) for t in [c.tokens_in[0]] + c.tokens_out),
               "gmacs_model": (c.total - c.reduction) / 1e9, "gmacs_matching": c.reduction / 1e9,
               "gmacs_total": c.total / 1e9, "gmacs_fvcore_style": (c.total + layer_norm_macs(c, m.embed_dim)) / 1e9,
               "paper_gflops": printed["gflops"]}
        if measure_macs:
            row["gmacs_measured"] = flops.measured_macs(m) / 1e9
            assert abs(row["gmacs_measured"] - row["gmacs_total"]) / row["gmacs_total"] < 0.005
        rows.append(row)
    return pd.DataFrame(rows)


def file_tome_claims(rep: Any, tome: pd.DataFrame, unpruned_gmacs: float) -> None:
    """ToMe's printed DeiT-S GFLOPs for r = 8 / 13 / 16 from our count of its own schedule (on the total, matching
    included, as fvcore traces it): ToMe's 'FLOPs' are MACs (unpruned DeiT-S is 4.6 in both)."""
    decl = CLAIMS["bat.baseline.tome.deit_s.r{r}"]
    for row in tome.itertuples():
        file_claim(rep, decl, decl.rule(row.r).decide(row.gmacs_total), keys={"r": row.r},
                   our_value=round(row.gmacs_total, 3),
                   why=f"ToMe's schedule, matching included; unpruned DeiT-S is {unpruned_gmacs:.3f} GMACs here, so "
                       "its 'GFLOPs' are MACs",
                   details={"tokens": row.tokens, "model_gmacs": row.gmacs_model,
                            "matching_mmacs": row.gmacs_matching * 1e3, "fvcore_style_gmacs": row.gmacs_fvcore_style})
