"""What the notebooks share: a section stopwatch and interval columns for tables."""
from __future__ import annotations

import contextlib
import time
from typing import Any, Iterator, Optional

import pandas as pd

from tokenprune.measure.intervals import Interval

__all__ = ["Stopwatch", "ci_columns", "show_whole_tables", "settings_table"]


class Stopwatch:
    """Wall and CPU seconds per notebook section (on a loaded 2-core machine the CPU time over the cores
    approximates an idle machine's wall time). ``lap(name)`` closes the section since the previous lap;
    ``with sw.section(name):`` times a block and adds up repeated uses of the same name."""

    def __init__(self) -> None:
        self.sections: dict[str, dict[str, float]] = {}
        self._mark = (time.perf_counter(), time.process_time())

    def lap(self, name: str) -> None:
        now = (time.perf_counter(), time.process_time())
        self.sections[name] = {"wall_s": round(now[0] - self._mark[0], 1), "cpu_s": round(now[1] - self._mark[1], 1)}
        self._mark = now

    @contextlib.contextmanager
    def section(self, name: str) -> Iterator[None]:
        t0, c0 = time.perf_counter(), time.process_time()
        try:
            yield
        finally:
            s = self.sections.setdefault(name, {"wall_s": 0.0, "cpu_s": 0.0})
            s["wall_s"] += time.perf_counter() - t0
            s["cpu_s"] += time.process_time() - c0
        self._mark = (time.perf_counter(), time.process_time())

    def table(self) -> pd.DataFrame:
        return pd.DataFrame([{"section": k, **v} for k, v in self.sections.items()])


def ci_columns(interval: Optional[Interval], prefix: str, scale: float = 1.0) -> dict[str, float]:
    """``{prefix, prefix_low, prefix_high}`` of ``interval`` x ``scale`` (NaN for None), for one table row."""
    if interval is None:
        nan = float("nan")
        return {prefix: nan, f"{prefix}_low": nan, f"{prefix}_high": nan}
    return {prefix: interval.estimate * scale, f"{prefix}_low": interval.low * scale,
            f"{prefix}_high": interval.high * scale}


def show_whole_tables() -> None:
    """Let a notebook show every row and column of its tables (pandas cuts them to ``...`` by default, and an
    executed report must not hide rows)."""
    for option in ("display.max_rows", "display.max_columns", "display.width", "display.max_colwidth"):
        pd.set_option(option, None)


def settings_table(notebook: str, profile: str, cfg: Any) -> pd.DataFrame:
    """What this run's settings change from ``notebook``'s ``profile`` (name, the profile's value, this run's), one
    row per changed setting; an empty table means the profile ran as declared."""
    from tokenprune.study import params

    declared = vars(params.setup(notebook, profile))
    rows = [{"setting": k, "profile": declared.get(k), "this run": v} for k, v in vars(cfg).items()
            if k not in declared or declared[k] != v]
    return pd.DataFrame(rows, columns=["setting", "profile", "this run"])
