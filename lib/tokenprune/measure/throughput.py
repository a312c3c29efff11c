"""Throughput of (pruned) ViTs, measured side by side.

Protocol: ``torch.inference_mode``, a fixed random batch, warm-up passes, then several timed rounds in
which every configuration runs once in turn (interleaved, so drift in clock speed or load hits all
alike); the figure is the median images/s over rounds. Device, dtype, batch and threads are recorded
next to every figure. EViT measured at batch 64, fp32, on an A100; this machine is a CPU.

Usage::

    python -m tokenprune bench --model deit_small_patch16_224 --keep 1.0 0.7 --batch 32
"""
from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Callable, Optional, Sequence

import torch

from tokenprune.core.precision import DTYPES, autocast
from tokenprune.utils.environment import hardware

__all__ = ["BenchResult", "benchmark", "speedup_table", "load_warnings", "main"]

#: rounds of one configuration whose coefficient of variation exceeds this are flagged
MAX_ROUND_CV = 0.10

@dataclass
class BenchResult:
    """Median throughput of one configuration, with the conditions it was measured under."""

    label: str
    img_per_s: float
    rounds: list[float]
    batch: int
    dtype: str
    device: str
    threads: int
    iters_per_round: int
    extra: dict = field(default_factory=dict)

    def as_dict(self) -> dict:
        return asdict(self)


def _sync(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def benchmark(models: dict[str, torch.nn.Module], batch: int = 32, img_size: int | Sequence[int] = 224,
              in_chans: int = 3, dtype: str = "fp32", device: str = "cpu", warmup: int = 2,
              rounds: int = 7, iters_per_round: int = 2, seed: int = 0,
              progress: Optional[Callable[[str], None]] = None) -> list[BenchResult]:
    """Images/s of each model, measured interleaved; returns one :class:`BenchResult` per model, whose
    ``extra`` records the 1-minute load average before and after the run and the rounds' coefficient of
    variation (see :func:`load_warnings`)."""
    if not models:
        raise ValueError("models: expected at least one model")
    for name, value in (("batch", batch), ("rounds", rounds), ("iters_per_round", iters_per_round)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}: expected a positive int, got {value!r}")
    h, w = (img_size, img_size) if isinstance(img_size, int) else img_size
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, in_chans, h, w, generator=gen).to(device)
    times: dict[str, list[float]] = {k: [] for k in models}
    load_before = os.getloadavg()[0]
    for m in models.values():
        m.eval().to(device)
    with torch.inference_mode(), autocast(dtype, device):
        for name, m in models.items():
            for _ in range(warmup):
                m(x)
        for r in range(rounds):
            for name, m in models.items():
                _sync(device)
                t0 = time.perf_counter()
                for _ in range(iters_per_round):
                    m(x)
                _sync(device)
                times[name].append(batch * iters_per_round / (time.perf_counter() - t0))
            if progress:
                progress(f"round {r + 1}/{rounds}")
    threads = torch.get_num_threads()
    load = {"load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2)}
    return [BenchResult(name, statistics.median(v), v, batch, dtype, device, threads, iters_per_round,
                        extra={**load, "round_cv": statistics.pstdev(v) / statistics.fmean(v)})
            for name, v in times.items()]


def _keep_rate(text: str) -> float:
    value = float(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"keep rates lie in (0, 1] (1.0: unpruned), got {text}")
    return value


def load_warnings(results: Sequence[BenchResult], cores: Optional[int] = None, max_cv: float = MAX_ROUND_CV) -> list[str]:
    """Why figures measured on this machine may not hold: a 1-minute load average above a quarter of the
    cores before or after the run, or rounds of one configuration whose coefficient of variation exceeds
    ``max_cv`` (another job competing for the cores)."""
    cores = cores or os.cpu_count() or 1
    out = []
    loads = [r.extra.get(k) for r in results[:1] for k in ("load_before", "load_after")]
    if any(v is not None and v > cores / 4 for v in loads):
        out.append(f"machine under load: 1-minute load average {loads[0]:.2f} before / {loads[1]:.2f} after "
                   f"(above {cores / 4:.2f}, a quarter of {cores} cores): the figures are not an idle machine's")
    for r in results:
        cv = r.extra.get("round_cv")
        if cv is not None and cv > max_cv:
            out.append(f"{r.label}: rounds disagree (coefficient of variation {cv:.0%} > {max_cv:.0%})")
    return out


def build_parser() -> argparse.ArgumentParser:
    """The options of ``python -m tokenprune bench``, each with its help text."""
    from tokenprune.core.reducers import REDUCERS
    from tokenprune.core.scorers import scorer_names

    ap = argparse.ArgumentParser(prog="python -m tokenprune bench", description=main.__doc__)
    ap.add_argument("--model", default="deit_small_patch16_224", help="a timm VisionTransformer name (default: %(default)s)")
    ap.add_argument("--keep", type=_keep_rate, nargs="+", default=[1.0, 0.7],
                    help="keep rates in (0, 1], the first is the baseline of the ratios (default: %(default)s)")
    ap.add_argument("--reducer", default="fuse_attention", choices=sorted(REDUCERS), help="default: %(default)s")
    ap.add_argument("--scorer", default="cls_attention", help=f"one of {scorer_names()} (default: %(default)s)")
    ap.add_argument("--batch", type=int, default=32, help="images per timed batch (EViT: 64; default: %(default)s)")
    ap.add_argument("--dtype", default="fp32", choices=sorted(DTYPES), help="autocast dtype (EViT: fp32; default: %(default)s)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", help="default: %(default)s")
    ap.add_argument("--rounds", type=int, default=7, help="interleaved timed rounds (default: %(default)s)")
    ap.add_argument("--iters", type=int, default=2, help="batches per configuration and round (default: %(default)s)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed passes per configuration first (default: %(default)s)")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's)")
    return ap


def main(argv: Optional[Sequence[str]] = None) -> list[dict]:
    """Print model, keep rate, MACs, img/s, speedup with its interval and speedup / MAC ratio, measured side by side."""
    import timm
    from timm.models.vision_transformer import VisionTransformer

    from tokenprune.core.patch import patch
    from tokenprune.measure.macs import analytic_macs

    ap = build_parser()
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    models, macs = {}, {}
    for r in args.keep:
        m = timm.create_model(args.model)
        if not isinstance(m, VisionTransformer):
            ap.error(f"--model: {args.model} is a {type(m).__name__}, not a timm VisionTransformer "
                     "(tokenprune patches timm ViTs only)")
        if r < 1.0:
            patch(m, keep_rate=r, scorer=args.scorer, reducer=args.reducer)
        label = f"keep={r:g}"
        models[label] = m
        macs[label] = analytic_macs(m).total
    img = models[next(iter(models))].patch_embed.img_size
    res = benchmark(models, batch=args.batch, img_size=tuple(img), dtype=args.dtype, device=args.device,
                    warmup=args.warmup, rounds=args.rounds, iters_per_round=args.iters)
    base = res[0]
    hw = hardware()
    table = speedup_table(res, macs)
    print(f"# {args.model}, {args.scorer} + {args.reducer}; batch {args.batch}, {args.dtype}, {args.device}, "
          f"{res[0].threads} threads; {hw['cpu_model']}{', ' + ', '.join(hw['gpus']) if hw['gpus'] else ''}; "
          f"median of {args.rounds} interleaved rounds x {args.iters} batches; speedup (95 % bootstrap interval over "
          f"rounds) and MAC ratio relative to {base.label}; load average {base.extra['load_before']:.2f} before, "
          f"{base.extra['load_after']:.2f} after")
    print(f"{'model':<26} {'keep':>5} {'GMACs':>6} {'img/s':>8} {'speedup [95 % CI]':>24} {'MAC ratio':>9} "
          f"{'speedup/MAC ratio [95 % CI]':>28}")
    rows = []
    for r, b, row in zip(args.keep, res, table):
        mac_ratio = row["mac_ratio"]
        lo, hi = row["speedup_low"] / mac_ratio, row["speedup_high"] / mac_ratio
        print(f"{args.model:<26} {r:>5.2f} {macs[b.label] / 1e9:>6.2f} {b.img_per_s:>8.1f} "
              f"{row['speedup']:>8.3f} [{row['speedup_low']:.3f}, {row['speedup_high']:.3f}] {mac_ratio:>9.3f} "
              f"{row['speedup_over_mac_ratio']:>12.3f} [{lo:.3f}, {hi:.3f}]")
        rows.append({"model": args.model, "keep_rate": r, "gmacs": macs[b.label] / 1e9, "img_per_s": b.img_per_s,
                     **{k: row[k] for k in ("speedup", "speedup_low", "speedup_high", "mac_ratio", "speedup_over_mac_ratio")},
                     **{k: v for k, v in b.as_dict().items() if k not in ("label", "img_per_s")}})
    for w in load_warnings(res):
        print(f"WARNING: {w}")
    return rows


if __name__ == "__main__":
    main()


def speedup_table(results: Sequence[BenchResult], macs: dict[str, float], baseline: Optional[str] = None,
                  seed: int = 0) -> list[dict]:
    """Speedup of each configuration over ``baseline`` (default: the first), with a bootstrap interval over
    the per-round ratios (rounds are interleaved, so round ``i`` of two configurations ran back to back),
    next to the MAC ratio and their quotient (1.0 = the speedup the MAC reduction promises)."""
    from tokenprune.measure.metrics import bootstrap_ci

    import numpy as np

    base = next(r for r in results if r.label == (baseline or results[0].label))
    rows = []
    for r in results:
        ratios = np.asarray(r.rounds) / np.asarray(base.rounds)
        ci = bootstrap_ci(ratios, stat=np.median, seed=seed)
        speed = r.img_per_s / base.img_per_s
        mac_ratio = macs[base.label] / macs[r.label]
        rows.append({"config": r.label, "img_per_s": r.img_per_s, "speedup": speed, "speedup_low": ci.low,
                     "speedup_high": ci.high, "mac_ratio": mac_ratio, "speedup_over_mac_ratio": speed / mac_ratio,
                     "batch": r.batch, "dtype": r.dtype, "device": r.device, "threads": r.threads,
                     "rounds": len(r.rounds)})
    return rows
