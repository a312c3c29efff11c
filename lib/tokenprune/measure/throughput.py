"""Throughput of (pruned) ViTs, measured side by side.

Protocol: ``torch.inference_mode``, a fixed random batch, warm-up passes, then several timed rounds in which every
configuration runs once in turn (interleaved, so drift in clock speed or load hits all alike); the figure is the
median images/s over rounds (:func:`benchmark`). Device, dtype, batch and threads are recorded next to every figure,
with the load the rounds ran under (:func:`load_record`); :func:`speedup_table` gives each configuration's speedup
over a baseline with its bootstrap interval. EViT measured at batch 64, fp32, on an A100; this machine is a CPU.
The command line, ``python -m tokenprune bench``, is :mod:`tokenprune.measure.bench_command`.
"""
from __future__ import annotations

import contextlib
import os
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional, Sequence

import torch

from tokenprune.core.precision import autocast
from tokenprune.utils.io import to_jsonable

__all__ = ["BenchResult", "benchmark", "speedup_table", "load_warnings", "load_record", "load_from_row", "LOAD_COLUMNS",
           "other_cpu_meter", "MAX_ROUND_CV", "MAX_OTHER_CORES_FRACTION"]

#: rounds of one configuration whose coefficient of variation exceeds this are flagged
MAX_ROUND_CV = 0.10
#: figures timed while other processes used more than this fraction of the cores are flagged
MAX_OTHER_CORES_FRACTION = 0.25


def _busy_cpu_s() -> Optional[float]:
    """CPU seconds the whole machine has been busy (user, nice, system, irq, softirq, steal; /proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()
    except OSError:
        return None
    if not fields or fields[0] != "cpu":
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(v) for v in fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def other_cpu_meter() -> Callable[[], Optional[float]]:
    """Start measuring what *other* processes use: the returned function gives the mean number of cores they
    kept busy since the call (machine-wide busy CPU time minus this process's own, over the wall time), or
    None where /proc/stat is absent. Unlike the load average it does not count this process's own earlier
    work (a notebook's previous cells), so it says whether something else competed with the timed rounds."""
    busy0, own0, t0 = _busy_cpu_s(), time.process_time(), time.perf_counter()

    def read() -> Optional[float]:
        busy1, own1, t1 = _busy_cpu_s(), time.process_time(), time.perf_counter()
        if busy0 is None or busy1 is None or t1 <= t0:
            return None
        return max(0.0, ((busy1 - busy0) - (own1 - own0)) / (t1 - t0))

    return read


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
              progress: Optional[Callable[[str], None]] = None, train: bool = False) -> list[BenchResult]:
    """Images/s of each model, measured interleaved; returns one :class:`BenchResult` per model, whose
    ``extra`` records the 1-minute load average before and after the run, the mean number of cores other
    processes kept busy during it (``other_cores``, :func:`other_cpu_meter`) and the rounds' coefficient of
    variation (see :func:`load_warnings`). ``train``: the models are training steps
    (:class:`tokenprune.measure.training_step.TrainingStep`), run with autograd on instead of in inference mode."""
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
    others = other_cpu_meter()
    for m in models.values():
        m.eval().to(device)
    with (contextlib.nullcontext() if train else torch.inference_mode()), autocast(dtype, device):
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
    other = others()
    load = {"load_before": round(load_before, 2), "load_after": round(os.getloadavg()[0], 2),
            "other_cores": None if other is None else round(other, 3), "cores": os.cpu_count() or 1}
    return [BenchResult(name, statistics.median(v), v, batch, dtype, device, threads, iters_per_round,
                        extra={**load, "round_cv": statistics.pstdev(v) / statistics.fmean(v)})
            for name, v in times.items()]


def speedup_table(results: Sequence[BenchResult], macs: dict[str, float], baseline: Optional[str] = None,
                  seed: int = 0) -> list[dict]:
    """Speedup of each configuration over ``baseline`` (default: the first): the median of the per-round ratios
    (rounds are interleaved, so round ``i`` of two configurations ran back to back) with a bootstrap interval,
    next to the MAC ratio and their quotient (1.0 = the speedup the MAC reduction promises). Every row also
    carries the run's :func:`load_record` flattened (``load_before``, ``load_after``, ``other_cores``,
    ``max_round_cv``, ``under_load``, ``load_warnings``), which :func:`load_from_row` turns back into the
    ``load`` of a timed claim."""
    from tokenprune.measure.intervals import bootstrap_ci

    import numpy as np

    base = next(r for r in results if r.label == (baseline or results[0].label))
    rec = load_record(results)
    load_cols = {**{k: rec[k] for k in _LOAD_KEYS if k != "warnings"}, "load_warnings": "; ".join(rec["warnings"])}
    rows = []
    for r in results:
        ratios = np.asarray(r.rounds) / np.asarray(base.rounds)
        ci = bootstrap_ci(ratios, stat=np.median, seed=seed)
        speed = float(np.median(ratios))  # the estimate the interval is about (not the ratio of the two medians)
        mac_ratio = macs[base.label] / macs[r.label]
        rows.append({"config": r.label, "img_per_s": r.img_per_s, "speedup": speed, "speedup_low": ci.low,
                     "speedup_high": ci.high, "mac_ratio": mac_ratio, "speedup_over_mac_ratio": speed / mac_ratio,
                     "batch": r.batch, "dtype": r.dtype, "device": r.device, "threads": r.threads,
                     "rounds": len(r.rounds), **load_cols})
    return rows


_LOAD_KEYS = ("load_before", "load_after", "other_cores", "cores", "max_round_cv", "under_load", "warnings")
#: the columns a :func:`speedup_table` row holds about the run's load (what :func:`load_from_row` reads)
LOAD_COLUMNS = tuple(k for k in _LOAD_KEYS if k != "warnings") + ("load_warnings",)


def load_from_row(row: Any) -> dict:
    """The :func:`load_record` of the run a :func:`speedup_table` row (a dict or a pandas row) came from."""
    get = row.get if hasattr(row, "get") else (lambda k, d=None: getattr(row, k, d))
    out = {k: to_jsonable(get(k)) for k in _LOAD_KEYS if k != "warnings"}
    text = get("load_warnings") or ""
    out["under_load"] = bool(out["under_load"])
    out["warnings"] = [w for w in str(text).split("; ") if w]
    return out


def load_warnings(results: Sequence[BenchResult], cores: Optional[int] = None, max_cv: float = MAX_ROUND_CV,
                  max_other: float = MAX_OTHER_CORES_FRACTION) -> list[str]:
    """Why figures timed on this machine may not hold (empty when none): other processes kept more than
    ``max_other`` of the cores busy during the timed rounds (another job competed), or the rounds of one
    configuration disagree (coefficient of variation above ``max_cv``). The 1-minute load averages before
    and after are recorded but do not flag on their own: inside a notebook they count its own earlier cells."""
    cores = cores or (results[0].extra.get("cores") if results else None) or os.cpu_count() or 1
    out = []
    other = results[0].extra.get("other_cores") if results else None
    if other is not None and other > max_other * cores:
        out.append(f"machine under load: other processes kept {other:.2f} of {cores} cores busy while timing "
                   f"(above {max_other * cores:.2f}; 1-minute load average "
                   f"{results[0].extra.get('load_before')} before, "
                   f"{results[0].extra.get('load_after')} after): the figures are not an idle machine's")
    for r in results:
        cv = r.extra.get("round_cv")
        if cv is not None and cv > max_cv:
            out.append(f"{r.label}: rounds disagree (coefficient of variation {cv:.0%} > {max_cv:.0%})")
    return out


def load_record(results: Sequence[BenchResult]) -> dict:
    """What a timed claim records of the conditions its figures were measured under: load averages before and
    after, other processes' cores, the largest round CV, and :func:`load_warnings` (``under_load`` when any)."""
    if not results:
        raise ValueError("results: expected at least one BenchResult")
    e = results[0].extra
    warnings = load_warnings(results)
    cvs = [r.extra.get("round_cv") for r in results if r.extra.get("round_cv") is not None]
    return {"load_before": e.get("load_before"), "load_after": e.get("load_after"), "other_cores": e.get("other_cores"),
            "cores": e.get("cores"), "max_round_cv": round(max(cvs), 4) if cvs else None,
            "under_load": bool(warnings), "warnings": warnings}
