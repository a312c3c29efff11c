"""Conditions on measured quantities, the parts of a :class:`tokenprune.study.verdicts.Criteria` rule.

Each condition reads one quantity (an estimate with its 95 % interval, or a flag) from the values a claim was
measured with and says whether it holds, and its own text: :class:`Above`, :class:`Below`, :class:`Inside`,
:class:`Beyond`, :class:`Flag`, and their combinations :class:`AllOf` / :class:`AnyOf`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["Above", "Below", "Inside", "Beyond", "Flag", "AllOf", "AnyOf", "fmt_interval"]


def fmt_interval(estimate: float, low: float, high: float, nd: int = 2, signed: bool = True) -> str:
    """``+1.23 [+0.50, +1.90]`` (``signed=False``: ``1.23 [0.50, 1.90]``)."""
    s = "+" if signed else ""
    return f"{estimate:{s}.{nd}f} [{low:{s}.{nd}f}, {high:{s}.{nd}f}]"


def _triple(v: object) -> tuple[float, float, float]:
    """``(estimate, low, high)`` of an interval-like value (``Interval``, ``PairedDiff``, a 3-sequence)."""
    if hasattr(v, "low") and hasattr(v, "high"):
        return float(getattr(v, "estimate", getattr(v, "mean_diff", math.nan))), float(v.low), float(v.high)
    e, lo, hi = v  # type: ignore[misc]
    return float(e), float(lo), float(hi)


@dataclass(frozen=True)
class Above:
    """The ``level`` % interval of the quantity ``name`` lies above ``threshold`` (its low end > threshold)."""

    name: str
    threshold: float = 0.0
    level: int = 95

    @property
    def text(self) -> str:
        return f"the {self.level} % interval of {self.name} lies above {self.threshold:g}"

    def holds(self, values: dict) -> bool:
        return _triple(values[self.name])[1] > self.threshold

    def show(self, values: dict) -> str:
        return f"{self.name} {fmt_interval(*_triple(values[self.name]))}"


@dataclass(frozen=True)
class Below(Above):
    """The ``level`` % interval of ``name`` lies below ``threshold`` (its high end < threshold)."""

    @property
    def text(self) -> str:
        return f"the {self.level} % interval of {self.name} lies below {self.threshold:g}"

    def holds(self, values: dict) -> bool:
        return _triple(values[self.name])[2] < self.threshold


@dataclass(frozen=True)
class Inside(Above):
    """The ``level`` % interval of ``name`` lies strictly inside ``(-threshold, +threshold)``."""

    @property
    def text(self) -> str:
        return f"the {self.level} % interval of {self.name} lies inside +-{self.threshold:g}"

    def holds(self, values: dict) -> bool:
        _, lo, hi = _triple(values[self.name])
        return -self.threshold < lo and hi < self.threshold


@dataclass(frozen=True)
class Beyond(Above):
    """The ``level`` % interval of ``name`` lies entirely beyond ``+-threshold`` (low > t or high < -t)."""

    @property
    def text(self) -> str:
        return f"the {self.level} % interval of {self.name} lies entirely beyond +-{self.threshold:g}"

    def holds(self, values: dict) -> bool:
        _, lo, hi = _triple(values[self.name])
        return lo > self.threshold or hi < -self.threshold


@dataclass(frozen=True)
class Flag:
    """A yes/no result computed elsewhere (a test's decision, a count): ``values[name]`` is a bool; ``text``
    says what it means."""

    name: str
    text: str

    def holds(self, values: dict) -> bool:
        return bool(values[self.name])

    def show(self, values: dict) -> str:
        return f"{self.name}: {values[self.name]}"


@dataclass(frozen=True)
class AllOf:
    """Every condition holds."""

    conditions: tuple

    @property
    def text(self) -> str:
        return "(" + " and ".join(c.text for c in self.conditions) + ")"

    def holds(self, values: dict) -> bool:
        return all(c.holds(values) for c in self.conditions)

    def show(self, values: dict) -> str:
        return "; ".join(c.show(values) for c in self.conditions)


@dataclass(frozen=True)
class AnyOf(AllOf):
    """At least one condition holds."""

    @property
    def text(self) -> str:
        return "(" + " or ".join(c.text for c in self.conditions) + ")"

    def holds(self, values: dict) -> bool:
        return any(c.holds(values) for c in self.conditions)
