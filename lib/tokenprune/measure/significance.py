"""Hypothesis tests on paired measurements: McNemar's test of two classifiers' accuracy on the same images, the
paired TOST equivalence test, and Holm's adjustment of a family of p-values."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterator

import numpy as np
from scipy import stats as _st

from tokenprune.measure.arrays import ArrayLike, as_numpy

__all__ = ["McNemarResult", "TostResult", "mcnemar", "tost_paired", "holm_adjust"]


@dataclass(frozen=True)
class McNemarResult:
    """McNemar's test on paired correctness. Unpacks as ``statistic, p_value, n01, n10``.

    ``n01``: images model A gets wrong and model B gets right; ``n10``: A right, B wrong.
    ``method`` is ``"exact"`` (two-sided binomial test on the discordant pairs; ``statistic``
    is ``min(n01, n10)``) or ``"chi2_cc"`` (chi-square with continuity correction).
    """

    statistic: float
    p_value: float
    n01: int
    n10: int
    method: str

    def __iter__(self) -> Iterator[float | int]:
        return iter((self.statistic, self.p_value, self.n01, self.n10))


def mcnemar(correct_a: ArrayLike, correct_b: ArrayLike, exact_below: int = 25) -> McNemarResult:
    """McNemar's test (McNemar, 1947) that two classifiers have the same accuracy on paired images.

    Only discordant images carry information. With ``n = n01 + n10 < exact_below`` (25 by
    default, the usual rule) the exact two-sided binomial test of ``n10 ~ Bin(n, 1/2)`` is used;
    otherwise the chi-square statistic with Edwards' continuity correction
    ``(|n01 - n10| - 1)^2 / (n01 + n10)`` on one degree of freedom.
    """
    ca = as_numpy(correct_a).astype(bool).reshape(-1)
    cb = as_numpy(correct_b).astype(bool).reshape(-1)
    if ca.shape != cb.shape:
        raise ValueError(f"paired samples differ in length: {ca.size} vs {cb.size}")
    n01 = int(np.sum(~ca & cb))
    n10 = int(np.sum(ca & ~cb))
    n = n01 + n10
    if n < exact_below:
        k = min(n01, n10)
        p = 1.0 if n == 0 else min(1.0, 2.0 * float(_st.binom.cdf(k, n, 0.5)))
        return McNemarResult(float(k), p, n01, n10, "exact")
    stat = (abs(n01 - n10) - 1.0) ** 2 / n
    return McNemarResult(float(stat), float(_st.chi2.sf(stat, 1)), n01, n10, "chi2_cc")


@dataclass(frozen=True)
class TostResult:
    """Two one-sided tests for equivalence of paired means within ``(-margin, +margin)``."""

    p_value: float
    equivalent: bool
    mean_diff: float
    margin: float
    alpha: float
    p_lower: float
    p_upper: float
    ci_low: float
    ci_high: float
    n: int

    @property
    def ci(self) -> list[float]:
        """The ``1 - 2 alpha`` t-interval of the mean difference; inside the margin iff equivalent."""
        return [self.ci_low, self.ci_high]


def tost_paired(a: ArrayLike, b: ArrayLike, margin: float, alpha: float = 0.05) -> TostResult:
    """Paired TOST equivalence test (Schuirmann, 1987) of ``mean(a - b)`` within ``±margin``.

    Tests H0a: mean difference <= -margin and H0b: mean difference >= +margin with one-sided
    paired t-tests on ``d = a - b`` (df = n - 1); the TOST p-value is the larger of the two, and
    the means are declared equivalent when it is below ``alpha`` (equivalently, the
    ``1 - 2 alpha`` t-interval lies inside the margin). Use it for "same faithfulness" claims,
    where a non-significant difference test would not be evidence of equality.
    """
    if margin <= 0:
        raise ValueError(f"margin must be positive, got {margin}")
    x, y = as_numpy(a, np.float64).reshape(-1), as_numpy(b, np.float64).reshape(-1)
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length: {x.size} vs {y.size}")
    keep = ~(np.isnan(x) | np.isnan(y))
    d = x[keep] - y[keep]
    n = int(d.size)
    if n < 2:
        raise ValueError("tost_paired needs at least two complete pairs")
    mean = float(d.mean())
    se = float(d.std(ddof=1) / math.sqrt(n))
    df = n - 1
    if se == 0.0:
        p_lo = 0.0 if mean > -margin else 1.0
        p_hi = 0.0 if mean < margin else 1.0
        lo = hi = mean
    else:
        p_lo = float(_st.t.sf((mean + margin) / se, df))
        p_hi = float(_st.t.cdf((mean - margin) / se, df))
        q = float(_st.t.ppf(1.0 - alpha, df))
        lo, hi = mean - q * se, mean + q * se
    p = max(p_lo, p_hi)
    return TostResult(p, bool(p < alpha), mean, float(margin), alpha, p_lo, p_hi, lo, hi, n)


def holm_adjust(p_values: ArrayLike) -> np.ndarray:
    """Holm's step-down adjustment of the p-values of one family of tests (Holm, 1979): the ``i``-th smallest
    becomes ``max_{j <= i} min(1, (m - j + 1) p_(j))``; reject at level ``alpha`` where the adjusted p is at most
    ``alpha``. Returns the adjusted p-values in the input's order."""
    p = np.asarray(p_values, dtype=np.float64).reshape(-1)
    if np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError(f"p_values: expected values in [0, 1], got {p.tolist()}")
    m = p.size
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj
    return out
