"""Interval estimation for per-image and per-seed measurements: the percentile bootstrap of one sample
(Efron & Tibshirani, 1993), the paired bootstrap of a difference, the two-stage bootstrap over seeds and images
(Davison & Hinkley, 1997) and the Student-t interval over seeds.

Every function here is pure: arrays in, small frozen dataclasses out; every random choice takes an explicit
``seed``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterator, Optional

import numpy as np
from scipy import stats as _st

from tokenprune.measure.arrays import ArrayLike, as_numpy

__all__ = [
    "Bounded",
    "Interval",
    "PairedDiff",
    "SeedSummary",
    "bootstrap_ci",
    "bootstrap_ci_or_nan",
    "paired_bootstrap_diff",
    "seed_image_bootstrap_diff",
    "seed_summary",
]


class Bounded:
    """A result with a confidence interval ``[low, high]`` (its ``low`` and ``high`` fields)."""

    low: float
    high: float

    @property
    def ci(self) -> list[float]:
        """``[low, high]``, the form a :class:`tokenprune.study.report.Claim` takes."""
        return [self.low, self.high]


@dataclass(frozen=True)
class Interval(Bounded):
    """A point estimate with a confidence interval ``[low, high]`` at confidence ``level``."""

    estimate: float
    low: float
    high: float
    level: float = 0.95

    def __iter__(self) -> Iterator[float]:
        """Unpack as ``estimate, low, high``."""
        return iter((self.estimate, self.low, self.high))

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0


def _apply_stat(stat: Callable[..., np.ndarray], samples: np.ndarray) -> np.ndarray:
    """Apply ``stat`` to each row of ``samples`` (vectorised when ``stat`` takes ``axis``)."""
    try:
        out = np.asarray(stat(samples, axis=1), dtype=np.float64)
        if out.shape == (samples.shape[0],):
            return out
    except TypeError:
        pass
    return np.apply_along_axis(stat, 1, samples).astype(np.float64)


def _bootstrap_stats(
    values: np.ndarray,
    stat: Callable[..., np.ndarray],
    n_boot: int,
    seed: int,
    max_elements: int = 4_000_000,
) -> np.ndarray:
    """``n_boot`` statistics of resamples (with replacement) of ``values``, in chunks."""
    n = values.shape[0]
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_boot, max_elements // max(n, 1)))
    out = np.empty(n_boot, dtype=np.float64)
    for start in range(0, n_boot, chunk):
        stop = min(start + chunk, n_boot)
        idx = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = _apply_stat(stat, values[idx])
    return out


def bootstrap_ci(
    values: ArrayLike,
    stat: Callable[..., np.ndarray] = np.mean,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap confidence interval of ``stat(values)`` (Efron & Tibshirani, 1993).

    Resamples the per-image ``values`` with replacement ``n_boot`` times (vectorised, in chunks
    that bound memory), and returns the ``alpha/2`` and ``1 - alpha/2`` quantiles of the
    resampled statistic around the statistic of the original sample. ``stat`` should accept an
    ``axis`` keyword (``np.mean``, ``np.median`` do); other callables are applied row by row.
    Per-image accuracy is ``values = correct(...)``; the interval of its mean is the CI of top-1.
    NaN values are dropped first (for example images without annotated parts).
    """
    v = as_numpy(values, np.float64).reshape(-1)
    v = v[~np.isnan(v)]
    if v.size == 0:
        raise ValueError("bootstrap_ci needs at least one non-NaN value")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    est = float(stat(v))
    boots = _bootstrap_stats(v, stat, n_boot, seed)
    low, high = np.quantile(boots, [alpha / 2.0, 1.0 - alpha / 2.0])
    return Interval(est, float(low), float(high), 1.0 - alpha)


def bootstrap_ci_or_nan(values: ArrayLike, n_boot: int = 2000, alpha: float = 0.05, seed: int = 0) -> Interval:
    """:func:`bootstrap_ci` of the mean, or an all-NaN :class:`Interval` when no value is finite (a quantity
    undefined on every image, such as a rank correlation of constant scores)."""
    v = as_numpy(values, np.float64).reshape(-1)
    if not np.isfinite(v).any():
        return Interval(math.nan, math.nan, math.nan, 1.0 - alpha)
    return bootstrap_ci(v, n_boot=n_boot, alpha=alpha, seed=seed)


@dataclass(frozen=True)
class PairedDiff(Bounded):
    """Mean of paired differences ``a - b`` with a bootstrap CI and a two-sided p-value."""

    estimate: float
    low: float
    high: float
    p_value: float
    n: int
    level: float = 0.95


def _paired_diff(boots: np.ndarray, est: float, n: int, alpha: float) -> PairedDiff:
    """The percentile interval of the bootstrap differences ``boots`` around ``est`` and the two-sided p-value of
    H0: difference = 0 from the distribution centred on the null (Hall & Wilson, 1991):
    ``p = (1 + #{|d* - d| >= |d|}) / (n_boot + 1)``."""
    low, high = np.quantile(boots, [alpha / 2.0, 1.0 - alpha / 2.0])
    extreme = np.abs(boots - est) >= abs(est) - 1e-12
    p = float((1 + extreme.sum()) / (boots.size + 1))
    return PairedDiff(est, float(low), float(high), min(p, 1.0), n, 1.0 - alpha)


def paired_bootstrap_diff(a: ArrayLike, b: ArrayLike, n_boot: int = 2000, alpha: float = 0.05,
                          seed: int = 0) -> PairedDiff:
    """Paired bootstrap of ``mean(a) - mean(b)`` for per-image metrics measured on the same images.

    Images are resampled as pairs, so the correlation between the two conditions is kept (the
    unpaired interval would be far too wide). The CI is the percentile interval of the
    resampled mean difference. The two-sided p-value tests H0: mean difference = 0 by
    centring the bootstrap distribution on the null (Hall & Wilson, 1991):
    ``p = (1 + #{|d* - d| >= |d|}) / (n_boot + 1)``.
    """
    x, y = as_numpy(a, np.float64).reshape(-1), as_numpy(b, np.float64).reshape(-1)
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length: {x.size} vs {y.size}")
    keep = ~(np.isnan(x) | np.isnan(y))
    d = x[keep] - y[keep]
    if d.size == 0:
        raise ValueError("paired_bootstrap_diff needs at least one complete pair")
    est = float(d.mean())
    boots = _bootstrap_stats(d, np.mean, n_boot, seed)
    return _paired_diff(boots, est, int(d.size), alpha)


def _group_index(groups: Optional[ArrayLike], n: int) -> tuple[Optional[np.ndarray], np.ndarray, np.ndarray]:
    """For ``groups`` ``[N]``: the order that sorts them, where each group starts in it, and each group's size;
    ``(None, arange(N), ones(N))`` without groups."""
    if groups is None:
        return None, np.arange(n), np.ones(n, dtype=np.int64)
    g = np.asarray(groups)
    if g.shape != (n,):
        raise ValueError(f"groups: expected shape ({n},), one group per image, got {g.shape}")
    order = np.argsort(g, kind="stable")
    gs = g[order]
    starts = np.r_[0, np.flatnonzero(gs[1:] != gs[:-1]) + 1]
    return order, starts, np.diff(np.r_[starts, n])


def seed_image_bootstrap_diff(a: ArrayLike, b: ArrayLike, n_boot: int = 2000, alpha: float = 0.05, seed: int = 0,
                              groups: Optional[ArrayLike] = None) -> PairedDiff:
    """Two-stage bootstrap of ``mean(a) - mean(b)`` for per-image metrics of trained models, ``[S, N]``.

    Row ``s`` holds the per-image values (e.g. correctness) of the model trained with seed ``s``, on the same
    ``N`` images in the same order for ``a`` and ``b``; seeds pair too (seed ``s`` of ``a`` and of ``b`` saw
    the same data in the same order). Each resample draws ``S`` seeds with replacement, then ``N`` images with
    replacement (Davison & Hinkley, 1997, Sec. 3.8: resample the top level, then within it), and takes the
    mean difference, so the interval holds both the training noise (across seeds) and the sampling of test
    images. A one-row ``b`` (an untrained reference) is compared with every seed of ``a``. With few seeds the
    seed stage understates the spread by about ``(S - 1) / S``; report the per-seed values beside it.
    The two-sided p-value centres the bootstrap distribution on the null, as :func:`paired_bootstrap_diff`.
    ``n`` of the result is the number of images. ``groups`` (``[N]``, e.g. the source item each test image was made
    from): the second stage resamples groups instead of images, so images that share a source are not counted as
    independent (the mean is then over the drawn groups' images).
    """
    x, y = as_numpy(a, np.float64), as_numpy(b, np.float64)
    if x.ndim == 1:
        x = x[None]
    if y.ndim == 1:
        y = y[None]
    if (x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]
            or (x.shape[0] != y.shape[0] and 1 not in (x.shape[0], y.shape[0]))):
        raise ValueError(f"a, b: expected [S, N] arrays with the same N and the same S (or S = 1), "
                         f"got {x.shape}, {y.shape}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    d = x - y
    if np.isnan(d).any():
        raise ValueError("seed_image_bootstrap_diff: NaN values are not supported")
    s, n = d.shape
    order, starts, counts = _group_index(groups, n)
    m = len(starts)
    rng = np.random.default_rng(seed)
    est = float(d.mean())
    boots = np.empty(n_boot, dtype=np.float64)
    chunk = max(1, min(n_boot, 4_000_000 // max(n, 1)))
    for start in range(0, n_boot, chunk):
        stop = min(start + chunk, n_boot)
        k = stop - start
        weights = np.stack([np.bincount(rng.integers(0, s, s), minlength=s) for _ in range(k)]) / s  # [k, S]
        per_image = weights @ d                                                                          # [k, N]
        if order is None:
            idx = rng.integers(0, n, size=(k, n))
            boots[start:stop] = np.take_along_axis(per_image, idx, axis=1).mean(1)
        else:
            sums = np.add.reduceat(per_image[:, order], starts, axis=1)                                  # [k, G]
            idx = rng.integers(0, m, size=(k, m))
            boots[start:stop] = np.take_along_axis(sums, idx, axis=1).sum(1) / counts[idx].sum(1)
    return _paired_diff(boots, est, int(n), alpha)


@dataclass(frozen=True)
class SeedSummary(Bounded):
    """Mean, sample standard deviation (ddof=1), count and a Student-t interval over seeds."""

    mean: float
    std: float
    n: int
    low: float
    high: float
    level: float = 0.95


def seed_summary(values: ArrayLike, alpha: float = 0.05) -> SeedSummary:
    """Summarise one metric measured over independent seeds (training runs).

    ``mean ± t_{1-alpha/2, n-1} * std / sqrt(n)``. With a single seed the standard deviation
    and the interval are NaN: one run says nothing about run-to-run spread.
    """
    v = as_numpy(values, np.float64).reshape(-1)
    v = v[~np.isnan(v)]
    n = int(v.size)
    if n == 0:
        raise ValueError("seed_summary needs at least one value")
    mean = float(v.mean())
    if n == 1:
        return SeedSummary(mean, math.nan, 1, math.nan, math.nan, 1.0 - alpha)
    std = float(v.std(ddof=1))
    h = float(_st.t.ppf(1.0 - alpha / 2.0, n - 1)) * std / math.sqrt(n)
    return SeedSummary(mean, std, n, mean - h, mean + h, 1.0 - alpha)
