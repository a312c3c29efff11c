"""The test of BAT's central claim, "diversity matters most at low keep rates" (Long et al., CVPR 2023):
the least-squares slope over keep rates of a paired per-image difference, with a bootstrap interval."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from tokenprune.measure import intervals

__all__ = ["Trend", "trend_contrast"]


@dataclass(frozen=True)
class Trend:
    """Slope of a paired difference over a parameter (per unit of the parameter), with a bootstrap CI."""

    slope: float
    low: float
    high: float
    p_value: float
    n: int
    levels: tuple[float, ...]
    means: tuple[float, ...]

    @property
    def ci(self) -> list[float]:
        return [self.low, self.high]


def trend_contrast(diffs: np.ndarray | Sequence[Sequence[float]], levels: Sequence[float], n_boot: int = 2000,
                   seed: int = 0) -> Trend:
    """Least-squares slope of ``mean_i diffs[l, i]`` against ``levels[l]``, with a bootstrap over images.

    ``diffs`` is ``[L, N]``: a paired per-image difference (e.g. BAT correct minus EViT correct) at each
    of ``L`` levels (keep rates), measured on the same ``N`` images. The slope of the level means is
    linear in the images, ``slope = mean_i s_i`` with ``s_i = sum_l w_l diffs[l, i]`` and
    ``w_l = (x_l - mean x) / sum_l (x_l - mean x)^2``, so resampling images resamples ``s_i``
    (:func:`tokenprune.measure.intervals.paired_bootstrap_diff` against zero gives the interval and the
    two-sided p-value). A negative slope means the difference grows as the level falls.
    """
    d = np.asarray(diffs, dtype=np.float64)
    x = np.asarray(levels, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != x.size:
        raise ValueError(f"diffs: expected [L={x.size}, N], got shape {d.shape}")
    if x.size < 2 or np.ptp(x) == 0:
        raise ValueError("levels: need at least two distinct levels")
    w = (x - x.mean()) / ((x - x.mean()) ** 2).sum()
    s = w @ d
    res = intervals.paired_bootstrap_diff(s, np.zeros_like(s), n_boot=n_boot, seed=seed)
    return Trend(res.estimate, res.low, res.high, res.p_value, res.n, tuple(x.tolist()),
                 tuple(d.mean(axis=1).tolist()))
