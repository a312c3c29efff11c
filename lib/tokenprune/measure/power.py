"""Minimum detectable effects: the smallest true difference a paired design detects with 80 % power.

A claim that compares two configurations on the same units (images, photos or seeds) is decided by a 95 %
interval of the mean paired difference. Its minimum detectable effect (MDE) at power ``1 - beta`` and
two-sided level ``alpha`` is the standard normal-approximation bound (Cohen 1988, ch. 2; for a paired
design the unit is the per-unit difference):

    MDE = (z_{1 - alpha/2} + z_{1 - beta}) * sd / sqrt(n)

with ``sd`` the standard deviation of one unit's paired difference and ``n`` the number of units. With few
units (seeds) the normal quantiles are replaced by Student's t with ``n - 1`` degrees of freedom, the usual
correction for an estimated ``sd``. For paired 0/1 outcomes (per-image correctness, a McNemar design)
``sd`` is that of a difference in {-1, 0, +1}: ``sqrt(p_discordant - delta^2)``, at most ``sqrt(p_discordant)``.

The MDE depends on the spread of the differences and on ``n``, never on their mean, so a rule gated on it
(:class:`tokenprune.study.verdicts.Detectable`) cannot favour either verdict of the claim it gates.
:class:`Design` carries one claim's design: its units, its ``n``, the ``sd`` and where that came from, and the
largest ``n`` this machine allows (a full test split; 5 seeds), from which the ``n`` a decision would need follows.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any, Optional

import numpy as np

__all__ = ["POWER", "ALPHA", "mde", "n_for_mde", "paired_sd", "Design"]

#: the power and two-sided level every MDE of the study is stated at (80 % power at the rule's alpha)
POWER, ALPHA = 0.8, 0.05

_T_BELOW = 30  # below this many units the quantiles are Student's t


def _quantiles(n: int, alpha: float, power: float) -> float:
    if not 0 < alpha < 1:
        raise ValueError(f"alpha: expected a level in (0, 1), got {alpha!r}")
    if not 0 < power < 1:
        raise ValueError(f"power: expected a probability in (0, 1), got {power!r}")
    if n < _T_BELOW:
        from scipy.stats import t

        df = max(n - 1, 1)
        return float(t.ppf(1 - alpha / 2, df) + t.ppf(power, df))
    z = NormalDist().inv_cdf
    return z(1 - alpha / 2) + z(power)


def mde(sd: float, n: int, alpha: float = ALPHA, power: float = POWER) -> float:
    """The minimum detectable mean paired difference of ``n`` units whose differences have spread ``sd``
    (same unit as ``sd``); ``inf`` with fewer than 2 units."""
    if not (isinstance(n, (int, np.integer)) and n >= 0):
        raise ValueError(f"n: expected a number of units >= 0, got {n!r}")
    if not (math.isfinite(sd) and sd >= 0):
        raise ValueError(f"sd: expected a finite spread >= 0, got {sd!r}")
    if n < 2:
        return math.inf
    return _quantiles(int(n), alpha, power) * sd / math.sqrt(n)


def n_for_mde(target: float, sd: float, alpha: float = ALPHA, power: float = POWER, n_max: int = 10**9) -> int:
    """The fewest units whose MDE is at most ``target`` (``n_max + 1`` when even ``n_max`` units do not suffice)."""
    if not target > 0:
        raise ValueError(f"target: expected an effect > 0, got {target!r}")
    if sd == 0:
        return 2
    z = NormalDist().inv_cdf
    n = max(2, math.ceil(((z(1 - alpha / 2) + z(power)) * sd / target) ** 2))
    while n <= n_max and mde(sd, n, alpha, power) > target:  # the t correction below 30 units
        n += 1
    return min(n, n_max + 1)


def paired_sd(a: Any, b: Any, scale: float = 1.0) -> float:
    """The standard deviation (ddof 1) of the per-unit differences ``scale * (a - b)`` (``scale=100``: points
    from 0/1 correctness). It does not depend on the mean difference."""
    d = scale * (np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64))
    if d.ndim != 1 or len(d) < 2:
        raise ValueError(f"a, b: expected two equal-length 1-d arrays of at least 2 units, got shape {d.shape}")
    return float(np.std(d, ddof=1))


@dataclass(frozen=True)
class Design:
    """One claim's design: ``n`` paired ``unit`` s whose differences spread by ``sd`` (``sd_source`` says how it
    was obtained), and ``n_max``, the most units this machine allows (``max_scale`` says what that is)."""

    unit: str
    n: int
    sd: float
    sd_source: str
    n_max: int
    max_scale: str
    alpha: float = ALPHA
    power: float = POWER

    def __post_init__(self) -> None:
        if self.unit not in ("images", "photos", "seeds", "scenes", "configurations"):
            raise ValueError(f"unit: expected images, photos, seeds, scenes or configurations, got {self.unit!r}")
        if self.n_max < self.n:
            raise ValueError(f"n_max: the largest scale ({self.n_max}) is below the design's n ({self.n})")
        mde(self.sd, self.n, self.alpha, self.power)  # validates sd and n

    @classmethod
    def paired(cls, a: Any, b: Any, unit: str, n_max: int, max_scale: str, scale: float = 100.0,
               sd_source: str = "") -> "Design":
        """The design of comparing per-unit values ``a`` and ``b`` (0/1 correctness by default, in points)."""
        n = int(np.asarray(a).shape[0])
        return cls(unit=unit, n=n, sd=paired_sd(a, b, scale), n_max=n_max, max_scale=max_scale,
                   sd_source=sd_source or f"sd of the {n} paired differences (independent of their mean)")

    @property
    def mde(self) -> float:
        return mde(self.sd, self.n, self.alpha, self.power)

    @property
    def mde_at_max(self) -> float:
        return mde(self.sd, self.n_max, self.alpha, self.power)

    def n_needed(self, effect: float) -> int:
        """Units for an MDE of ``effect`` (at this design's spread)."""
        return n_for_mde(abs(effect), self.sd, self.alpha, self.power)

    def text(self) -> str:
        return (f"MDE {self.mde:.2f} with {self.n} {self.unit} (80 % power, alpha {self.alpha:g}; sd {self.sd:.3g}: "
                f"{self.sd_source}); {self.mde_at_max:.2f} at {self.max_scale} ({self.n_max} {self.unit})")

    def record(self, effect_in_dispute: Optional[float] = None) -> dict:
        """What results.json stores about the design."""
        out = {"unit": self.unit, "n": self.n, "sd": self.sd, "sd_source": self.sd_source, "alpha": self.alpha,
               "power": self.power, "mde": self.mde, "n_max": self.n_max, "max_scale": self.max_scale,
               "mde_at_max": self.mde_at_max}
        if effect_in_dispute is not None:
            out["effect_in_dispute"] = abs(float(effect_in_dispute))
            out["n_needed"] = self.n_needed(effect_in_dispute) if effect_in_dispute else None
        return out
