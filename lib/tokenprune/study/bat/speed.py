"""§3: what BAT's clustering costs in wall-clock time at DeiT-S scale, beside EViT at equal token counts.

Interleaved timing rounds with a ReductionTimer on every pruned model (:func:`clustering_benchmark`); BAT's
operator time share beyond EViT's, paired over passes (:func:`clustering_overhead`), decides the summary's flaw
'the clustering overhead isn't trivial' against the margin the printed column can hide.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd
import timm
import torch

from tokenprune.core.patch import patch
from tokenprune.measure import macs as flops
from tokenprune.measure import intervals
from tokenprune.measure import throughput as bench
from tokenprune.measure.reducer_timing import timed_benchmark
from tokenprune.methods.bat import dpc_knn
from tokenprune.study.bat.claims import CLAIMS, PRINTED_FIGURE, TIMED_PASSES
from tokenprune.study.bat.effects import speed_margin
from tokenprune.study.claims import file_claim
from tokenprune.study.verdicts import Premise

__all__ = ["Benchmark", "clustering_benchmark", "dpc_knn_is_batched", "clustering_overhead", "file_speed_claims"]


@dataclass
class Benchmark:
    """A timing run: the speed-up table, the raw results, each configuration's operator time shares
    (:func:`tokenprune.measure.reducer_timing.timed_benchmark`) and its total MACs."""

    speed: pd.DataFrame
    results: list
    shares: dict
    macs: dict


def clustering_benchmark(deit: Mapping[str, torch.nn.Module], model_name: str, keep_rates: Sequence[float],
                         bat_opts: dict, num_clusters: int, batch: int, rounds: int, device: str,
                         seed: int) -> Benchmark:
    """Time ``model_name`` (from ``deit`` when there, else created with random weights: time does not depend
    on them) unpruned and, at each keep rate, EViT, BAT in EViT's budget and BAT with its clusters added
    (interleaved rounds, a ReductionTimer on each)."""
    src = deit.get(model_name) or timm.create_model(model_name).eval()
    models = {"unpruned": copy.deepcopy(src)}
    for r in keep_rates:
        for label, red, opts in [("EViT", "fuse_attention", {}),
                                 ("BAT in EViT's budget", "merge_dpcknn_budget", bat_opts),
                                 (f"BAT +{num_clusters}", "merge_dpcknn", bat_opts)]:
            models[f"{label} @ {r:g}"] = patch(copy.deepcopy(src), keep_rate=r, reducer=red, reducer_options=opts)
    macs = {name: flops.analytic_macs(m).total for name, m in models.items()}
    results, shares = timed_benchmark(models, batch=batch, img_size=224, dtype="fp32", device=device,
                                      warmup=1, rounds=rounds, iters_per_round=1, seed=seed)
    speed = pd.DataFrame(bench.speedup_table(results, macs, seed=seed))
    speed["gmacs_total"] = [macs[c] / 1e9 for c in speed.config]
    speed["reduction_time_share"] = [shares.get(c, {}).get("reduction_share", 0.0) for c in speed.config]
    speed["reducer_time_share"] = [shares.get(c, {}).get("reducer_share", 0.0) for c in speed.config]
    return Benchmark(speed=speed, results=results, shares=shares, macs=macs)


def dpc_knn_is_batched(num_clusters: int, k: int, seed: int) -> bool:
    """One DPC-KNN call on a batch equals one call per image (no Python loop over images); asserts it."""
    xb = torch.randn(8, 60, 384, generator=torch.Generator().manual_seed(seed))
    assign_b, centres_b = dpc_knn(xb, num_clusters, k)
    per_image = [dpc_knn(xb[i:i + 1], num_clusters, k) for i in range(len(xb))]
    ok = all(torch.equal(a[0], assign_b[i]) and torch.equal(c[0], centres_b[i]) for i, (a, c) in enumerate(per_image))
    assert ok, "batched DPC-KNN differs from per-image DPC-KNN"
    return ok


def clustering_overhead(timing: Benchmark, keep_rates: Sequence[float], num_clusters: int, seed: int) -> pd.DataFrame:
    """Per keep rate and BAT variant: throughput relative to EViT, and BAT's operator time share minus EViT's,
    paired over interleaved forward passes (bootstrap)."""
    rows = []
    for r in keep_rates:
        by_config = {row["config"]: row for row in
                     bench.speedup_table(timing.results, timing.macs, baseline=f"EViT @ {r:g}", seed=seed)}
        ev_sh = np.asarray(timing.shares[f"EViT @ {r:g}"]["shares_per_forward"])
        for variant in ("BAT in EViT's budget", f"BAT +{num_clusters}"):
            row = by_config[f"{variant} @ {r:g}"]
            sh = np.asarray(timing.shares[f"{variant} @ {r:g}"]["shares_per_forward"])
            n = min(len(sh), len(ev_sh))  # same batch, back to back
            extra = intervals.paired_bootstrap_diff(sh[:n], ev_sh[:n], seed=seed)
            rows.append({"keep_rate": r, "variant": variant, "throughput_vs_evit": row["speedup"],
                         "throughput_low": row["speedup_low"], "throughput_high": row["speedup_high"],
                         "operator_time_share": float(sh.mean()), "evit_operator_time_share": float(ev_sh.mean()),
                         "extra_share": extra.estimate, "extra_share_low": extra.low,
                         "extra_share_high": extra.high, "passes": n,
                         **{k: row[k] for k in bench.LOAD_COLUMNS}})
    return pd.DataFrame(rows)


def file_speed_claims(rep: Any, overhead: pd.DataFrame, cpu: str, device: str, bench_model: str, batch: int) -> None:
    """The summary's flaw 'the clustering overhead isn't trivial', timed: BAT's operator share beyond EViT's against
    the margin the printed column can hide (:func:`~tokenprune.study.bat.effects.speed_margin`); its premises are a
    printed figure at the keep rate and at least 3 timed passes."""
    decl = CLAIMS["bat.speed.clustering_cost.keep{keep:g}"]
    for row in overhead[overhead.variant == "BAT in EViT's budget"].itertuples():
        margin = speed_margin(row.keep_rate)
        decision = decl.rule(row.keep_rate).decide(row.extra_share * 100, row.extra_share_low * 100,
                                                   row.extra_share_high * 100)
        premises = {PRINTED_FIGURE: Premise(PRINTED_FIGURE, margin is not None, "none printed"),
                    TIMED_PASSES: Premise(TIMED_PASSES, row.passes >= 3, f"{row.passes}")}
        mtxt = f"{margin:.2f}" if margin is not None else "n/a"
        file_claim(rep, decl, decision, keys={"keep": row.keep_rate}, timed=True,
                   load=bench.load_from_row(row._asdict()),
                   paper_value=0.0, our_value=round(row.extra_share * 100, 2),
                   ci=[round(row.extra_share_low * 100, 2), round(row.extra_share_high * 100, 2)], premises=premises,
                   why=f"BAT's operator {row.operator_time_share:.1%} vs EViT's {row.evit_operator_time_share:.1%} "
                       f"of each forward pass; margin {mtxt} %",
                   details={"margin": "100 x 0.05 / printed GMACs (half the column's last digit)",
                            "throughput_bat_over_evit": [row.throughput_vs_evit, row.throughput_low,
                                                         row.throughput_high],
                            "timing": f"ReductionTimer, {cpu}, {device}, {bench_model}, batch {batch}, fp32, "
                                      f"{row.passes} timed passes, paired over interleaved passes"})
