"""Wall-clock timings of the small models on this machine (§13 of notebook 01): inference throughput per keep rate
and training throughput with EViT against unpruned (Table 11)."""
from __future__ import annotations

import copy
import os
import statistics
import time
from typing import Any

import pandas as pd
import torch

from tokenprune.core.config import PruneConfig
from tokenprune.measure import macs as flops
from tokenprune.measure import throughput as bench
from tokenprune.study.evit.filing import file
from tokenprune.study.evit.claims import CLAIMS, TIMING_ROUNDS
from tokenprune.study.evit.efficiency import rounds_premise
from tokenprune.study.proxy.audit_model import EvaluatedModel

__all__ = ["small_vit_throughput", "training_throughput"]


def small_vit_throughput(model: EvaluatedModel, cfg: Any, sweep: pd.DataFrame) -> pd.DataFrame:
    """The small ViT's images/s on this CPU at keep 1.0 and each sweep keep rate (timed side by side), with the
    speedups and the sweep's top-1."""
    ms, macs_ = {}, {}
    for k in [1.0] + list(cfg.sweep_keep_rates):
        m = copy.deepcopy(model.base)
        PruneConfig(keep_rate=k).apply(m)
        ms[f"keep={k:g}"], macs_[f"keep={k:g}"] = m, flops.analytic_macs(m).total
    res = bench.benchmark(ms, batch=cfg.small_bench_batch, img_size=model.img_size,
                          in_chans=model.base.patch_embed.proj.in_channels, dtype="fp32", device="cpu",
                          warmup=0 if cfg.profile == "smoke" else 1, rounds=cfg.small_bench_rounds, iters_per_round=1,
                          seed=cfg.seed)
    speed = pd.DataFrame(bench.speedup_table(res, macs_, seed=cfg.seed))
    speed["keep_rate"] = [float(c.split("=")[1]) for c in speed.config]
    speed["top1"] = [sweep.set_index("config").loc["unpruned" if k == 1.0 else f"fuse@{k:g}", "top1"]
                     for k in speed.keep_rate]
    return speed


def _train_results(models: dict, x: torch.Tensor, y: torch.Tensor, rounds: int, warmup: int, steps: int = 2):
    """Training images/s (forward, backward, AdamW step; fp32, CPU) of each model on one fixed batch, in interleaved
    rounds, as :class:`tokenprune.measure.throughput.BenchResult` with the load they ran under."""
    steppers = {}
    for name, m in models.items():
        m.train()
        opt = torch.optim.AdamW(m.parameters(), lr=1e-5)

        def step(m=m, opt=opt) -> None:
            loss = torch.nn.functional.cross_entropy(m(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        for _ in range(warmup):
            step()
        steppers[name] = step
    times: dict[str, list[float]] = {k: [] for k in models}
    load_before, others = os.getloadavg()[0], bench.other_cpu_meter()
    for _ in range(rounds):
        for name, step in steppers.items():
            t0 = time.perf_counter()
            for _ in range(steps):
                step()
            times[name].append(steps * len(x) / (time.perf_counter() - t0))
    other = others()
    load = {"load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
            "other_cores": None if other is None else round(other, 3), "cores": os.cpu_count() or 1}
    return [bench.BenchResult(n, statistics.median(v), v, len(x), "fp32", "cpu", torch.get_num_threads(), steps,
                              extra={**load, "round_cv": statistics.pstdev(v) / statistics.fmean(v)})
            for n, v in times.items()]


def training_throughput(rep: Any, model: EvaluatedModel, cfg: Any, keep: float = 0.7) -> pd.DataFrame:
    """Table 11 on this machine: training images/s of the small ViT with EViT at ``keep`` against unpruned (copies
    of ``model.base``, fp32, ``cfg.small_bench_batch`` images, ``cfg.train_bench_rounds`` interleaved rounds); files
    the timed claim that EViT trains faster (a direction claim on the speedup, gated by at least 3 rounds)."""
    ms, macs_ = {}, {}
    for k in (1.0, keep):
        m = copy.deepcopy(model.base)
        PruneConfig(keep_rate=k).apply(m)
        ms[f"keep={k:g}"], macs_[f"keep={k:g}"] = m, flops.analytic_macs(m).total
    n = min(cfg.small_bench_batch, len(model.y))
    torch.manual_seed(cfg.seed)
    res = _train_results(ms, model.X[:n].float(), model.y[:n], rounds=cfg.train_bench_rounds,
                         warmup=0 if cfg.profile == "smoke" else 1)
    speed = pd.DataFrame(bench.speedup_table(res, macs_, seed=cfg.seed))
    row = speed.iloc[1]
    decl = CLAIMS["evit.t11.trains_faster.keep{keep:g}"]
    file(rep, decl, decl.rule().decide(row.speedup, row.speedup_low, row.speedup_high),
         premises={TIMING_ROUNDS: rounds_premise(int(row["rounds"]))}, keys={"keep": keep},
         timed=True, load=bench.load_from_row(row),
         our_value=round(row.speedup, 3), ci=[round(row.speedup_low, 3), round(row.speedup_high, 3)],
         why=f"a direction claim (faster at all): training steps on one fixed batch of {n}, fp32, "
             f"{row['device']}, {row['rounds']} interleaved rounds; MAC ratio {row.mac_ratio:.2f}",
         details={"step": "forward, backward, AdamW", "interval": "bootstrap over per-round ratios",
                  "paper": "timed DeiT-S on GPUs; 'considerably' is not quantified"})
    return speed
