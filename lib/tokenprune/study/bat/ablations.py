"""§5: BAT's ablations at matched MACs: importance only, diversity only, both, pairing; ``k``, clusters, weights.

Every ablation runs at the MAC budgets of EViT at the ablation keep rates on the same images, paired against BAT
(:func:`run_ablations`); the claims decide A - B at the lowest budget (:func:`file_ablation_claims`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import torch

from tokenprune.core.config import PruneConfig
from tokenprune.measure import evaluation
from tokenprune.study.bat.claims import ABLATIONS, CLAIMS
from tokenprune.study.bat.comparisons import brief, paired_decision, pick
from tokenprune.study.bat.effects import effect_ablation
from tokenprune.study.bat.proxy_scale import VARIANT, matched_set
from tokenprune.study.claims import file_claim

__all__ = ["Ablations", "ablation_set", "run_ablations", "ablation_pairs", "file_ablation_claims"]

#: what each ablation claim's paper value says
_PAPER_VALUE = {"both_vs_importance": "both components needed", "both_vs_diversity": "both components needed",
                "pairing": "pairing helps"}


@dataclass
class Ablations:
    """Every ablation at matched MACs: the table (each paired against BAT at its budget), the predictions and the
    configurations by label."""

    table: pd.DataFrame
    preds: dict
    configs: list


def ablation_set(bat_opts: dict, ablations: str) -> dict[str, PruneConfig]:
    """Importance only (EViT), diversity only (DPC-KNN of all tokens), both (BAT, also inside EViT's budget),
    with pairing; with ``ablations == "all"`` also other ``k``, cluster counts and merge weights."""
    def bat_c(**o: Any) -> PruneConfig:
        return PruneConfig(reducer="merge_dpcknn", reducer_options=tuple(sorted({**bat_opts, **o}.items())))

    abl = {
        "importance only: EViT (fusion)": PruneConfig(reducer="fuse_attention"),
        "importance only: EViT (drop)": PruneConfig(reducer="drop"),
        "diversity only: DPC-KNN of all tokens": PruneConfig(reducer="cluster_all",
                                                             reducer_options=(("k", bat_opts["k"]),)),
        "both: BAT": bat_c(),
        "both: BAT in EViT's budget": PruneConfig(reducer="merge_dpcknn_budget",
                                                  reducer_options=tuple(sorted(bat_opts.items()))),
        "both + pairing 0.25": bat_c(pair_fraction=0.25),
        "both + pairing 0.5": bat_c(pair_fraction=0.5),
    }
    if ablations == "all":
        abl.update({f"k={kk}": bat_c(k=kk) for kk in (2, 10) if kk != bat_opts["k"]})
        abl.update({f"clusters={c}": bat_c(num_clusters=c) for c in (1, 2, 8) if c != bat_opts["num_clusters"]})
        abl.update({f"weights={w}": bat_c(merge_weight=w) for w in ("size", "uniform")
                    if w != bat_opts["merge_weight"]})
    return abl


def run_ablations(base: torch.nn.Module, probe: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor,
                  abl: Mapping[str, PruneConfig], keep_rates: Sequence[float], batch: int, dtype: str,
                  seed: int) -> Ablations:
    """Every ablation at the MAC budgets of EViT at ``keep_rates`` on the same images, each paired against
    BAT at the same budget (bootstrap, McNemar)."""
    configs, matched = matched_set(probe, abl, keep_rates)
    table, preds = evaluation.prune_sweep(base, images, labels, configs, batch=batch, dtype=dtype, seed=seed)
    table = table.merge(matched[["config", "method", "budget_keep_rate", "mmacs", "reachable"]], on="config",
                        how="left")
    ref = {r: preds[f"both: BAT @ {r:g}"] for r in keep_rates}
    cols = ["diff_vs_bat", "diff_vs_bat_low", "diff_vs_bat_high", "mcnemar_p_vs_bat"]
    for col in cols:
        table[col] = np.nan
    for i, row in table.iterrows():
        if row.config == "unpruned":
            continue
        pc = evaluation.paired_comparison(preds[row.config], ref[row.budget_keep_rate], seed=seed)
        table.loc[i, cols] = [pc["top1_diff"], pc["top1_diff_low"], pc["top1_diff_high"], pc["mcnemar_p"]]
    return Ablations(table=table, preds=preds, configs=configs)


def ablation_pairs(r_abl: float) -> list[tuple[str, str, float]]:
    """The pairs (ablation labels) and effects in dispute of ``bat.ablation.*`` at the budget of EViT keep ``r_abl``."""
    return [(f"{a} @ {r_abl:g}", f"{b} @ {r_abl:g}", effect_ablation(cid)[0]) for cid, (a, b) in ABLATIONS.items()]


def file_ablation_claims(rep: Any, abl_preds: Mapping[str, Any], full_preds: Mapping[str, Any], r_abl: float,
                         n_test: int, max_scale: str, seed: int) -> None:
    """Both components beat each alone, and pairing helps: a direction on the paired top-1 difference at the budget
    of EViT keep ``r_abl``, on the full test split where the pair ran there (``full_preds``), else on the sweep's
    images (``abl_preds``), gated by its design (interval only, McNemar reported)."""
    for cid, (a_name, b_name) in ABLATIONS.items():
        decl = CLAIMS[f"bat.ablation.{cid}.keep{{keep:g}}"]
        assert decl.effect == effect_ablation(cid)[0]
        a, b, where = pick(f"{a_name} @ {r_abl:g}", f"{b_name} @ {r_abl:g}", full_preds, abl_preds)
        res = paired_decision(a.correct, b.correct, decl.effect, n_test, max_scale, decl.rule(), seed=seed)
        decision, details = brief(res.decision, res.brief(where, decl.effect),
                                  {"mcnemar_p": res.mcnemar_p, "effect_source": effect_ablation(cid)[1],
                                   "variant": VARIANT})
        file_claim(rep, decl, decision, keys={"keep": r_abl}, paper_value=_PAPER_VALUE[cid],
                   our_value=round(res.diff, 3), ci=[round(res.low, 3), round(res.high, 3)], design=res.design,
                   details=details)
