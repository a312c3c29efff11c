"""The verdict engine: each rule kind is one class that returns the verdict, the reason and its own text.

A claim is decided by a rule declared before its data exist. ``rule.decide(...)`` returns a
:class:`Decision`: the verdict (one of the engine's four, named in each kind's words by
:mod:`tokenprune.study.claims`), why (empty only when
reproduced) and the rule's text, all from the same code, so the ledger's "test" column and the verdict
cannot drift apart. ``Report.add_claim(..., decision=...)`` files it.

Rule kinds:

* :class:`Exact` -- a deterministic quantity equals the paper's (token counts).
* :class:`Rounded` -- our number, rounded as the paper prints it, equals the printed figure (MACs).
* :class:`Magnitude` -- our interval is compatible with the paper's number within a stated tolerance.
* :class:`AtLeast` -- our estimate reaches a stated fraction of the paper's figure (speedups).
* :class:`Direction` -- the sign of a paired difference, by its interval and, optionally, a test p-value.
* :class:`Equivalence` -- two configurations are equal within a margin (TOST: the 90 % interval inside
  the margin); shown different when the 95 % interval lies beyond it.
* :class:`Condition` -- a stated condition on measured quantities holds (a consistency check).
* :class:`Premise` -- what must hold before a claim is judged; a failed premise makes the claim
  ``inconclusive`` (or, for a premise nothing at this machine's scale can meet, ``not testable here``) with the
  premise named.
* :class:`Detectable` -- the design can detect the effect in dispute (its minimum detectable effect,
  :mod:`tokenprune.measure.power`): an ``inconclusive`` decision of a design whose MDE, even at the largest
  scale this machine allows, is above twice the effect becomes ``not testable here`` with the scale that would
  decide it.
* :class:`Criteria` -- a composite claim on several intervals and flags: reproduced when all of one list of
  declared conditions hold, else not reproduced when any of a second list holds, else inconclusive.
* :class:`Robustness` -- an unreported choice does not matter: not reproduced when any alternative differs
  significantly from the main configuration, reproduced when all are equivalent within a margin (TOST).

Rules are frozen dataclasses: their parameters (margins, thresholds) are part of the text they print.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Optional, Sequence

from tokenprune.study.conditions import AllOf, AnyOf, Above, Below, Beyond, Flag, Inside, fmt_interval

__all__ = [
    "Decision",
    "not_testable",
    "Exact",
    "Rounded",
    "Magnitude",
    "AtLeast",
    "Direction",
    "Equivalence",
    "Condition",
    "Premise",
    "first_failed",
    "Detectable",
    "Criteria",
    "Above",
    "Below",
    "Inside",
    "Beyond",
    "Flag",
    "AllOf",
    "AnyOf",
    "Robustness",
    "fmt_interval",
]

REPRODUCED, NOT_REPRODUCED = "reproduced", "not reproduced"
INCONCLUSIVE, NOT_TESTABLE = "inconclusive", "not testable here"


@dataclass(frozen=True)
class Decision:
    """A verdict with its reason and the text of the rule that gave it."""

    verdict: str
    why: str
    rule: str

    def __post_init__(self) -> None:
        if self.verdict not in (REPRODUCED, NOT_REPRODUCED, INCONCLUSIVE, NOT_TESTABLE):
            raise ValueError(f"verdict: unknown {self.verdict!r}")
        if self.verdict != REPRODUCED and not self.why.strip():
            raise ValueError(f"why: required for the verdict {self.verdict!r}")

    def because(self, note: str) -> "Decision":
        """The same decision with ``note`` appended to why (context such as the setting or the hardware)."""
        if not note:
            return self
        return Decision(self.verdict, "; ".join(w for w in (self.why, note) if w), self.rule)


def not_testable(why: str, rule: str = "") -> Decision:
    """``not testable here``, with what is missing."""
    return Decision(NOT_TESTABLE, why, rule or "not run at this profile")


def _finite(*values: Optional[float]) -> bool:
    return all(v is not None and math.isfinite(v) for v in values)


@dataclass(frozen=True)
class Exact:
    """Reproduced when the measured quantity equals ``expected`` exactly (deterministic quantities)."""

    expected: object
    what: str = "value"

    @property
    def text(self) -> str:
        return f"reproduced when the {self.what} equals the paper's exactly"

    def decide(self, value: object) -> Decision:
        if value == self.expected:
            return Decision(REPRODUCED, "", self.text)
        return Decision(NOT_REPRODUCED, f"{self.what} {value!r} differs from the paper's {self.expected!r}", self.text)


@dataclass(frozen=True)
class Rounded:
    """Reproduced when our number rounded to ``digits`` decimals equals the printed ``paper`` figure."""

    paper: float
    digits: int = 1

    @property
    def text(self) -> str:
        return f"reproduced when our number rounded to {self.digits} decimal(s) equals the printed {self.paper}"

    def decide(self, value: float) -> Decision:
        if round(value, self.digits) == self.paper:
            return Decision(REPRODUCED, "", self.text)
        return Decision(NOT_REPRODUCED, f"our {value:.{self.digits + 2}f} does not round to {self.paper}", self.text)


@dataclass(frozen=True)
class Magnitude:
    """Reproduced when the interval ``[low, high]`` meets ``[paper - tolerance, paper + tolerance]``;
    not reproduced when it lies entirely outside. The tolerance is stated before the data."""

    paper: float
    tolerance: float
    unit: str = ""

    @property
    def text(self) -> str:
        return (f"magnitude: reproduced when our 95 % interval meets {self.paper} +- {self.tolerance}"
                f"{' ' + self.unit if self.unit else ''}, else not reproduced")

    def decide(self, estimate: float, low: float, high: float) -> Decision:
        if not _finite(estimate, low, high):
            return Decision(INCONCLUSIVE, "no finite estimate", self.text)
        lo, hi = self.paper - self.tolerance, self.paper + self.tolerance
        if high >= lo and low <= hi:
            return Decision(REPRODUCED, "", self.text)
        side = "below" if high < lo else "above"
        return Decision(NOT_REPRODUCED, f"ours {fmt_interval(estimate, low, high, signed=False)} lies {side} "
                                        f"{self.paper} +- {self.tolerance}", self.text)


@dataclass(frozen=True)
class AtLeast:
    """Reproduced when the estimate is at least ``fraction`` x the paper's figure."""

    paper: float
    fraction: float = 1.0
    what: str = "estimate"

    @property
    def text(self) -> str:
        return f"reproduced when the {self.what} >= {self.fraction:g} x the paper's {self.paper:g}"

    def decide(self, estimate: float) -> Decision:
        if estimate >= self.fraction * self.paper:
            return Decision(REPRODUCED, "", self.text)
        return Decision(NOT_REPRODUCED, f"{self.what} {estimate:.2f} is below {self.fraction:g} x {self.paper:g}",
                        self.text)


@dataclass(frozen=True)
class Direction:
    """A sign claim on a paired difference ``A - B`` (``expected``: ``">"`` A is larger, ``"<"`` A is smaller).

    Reproduced when the 95 % interval lies beyond ``threshold`` on the expected side (and, with
    ``test=True``, the paired test's p-value is below ``alpha``); not reproduced when it lies beyond on
    the other side (with the same test requirement); otherwise inconclusive. With ``test=True`` an
    interval that excludes the threshold while the test does not agree is inconclusive and says so.
    """

    expected: str = ">"
    threshold: float = 0.0
    test: bool = False
    alpha: float = 0.05
    unit: str = "points"
    test_name: str = "McNemar"

    def __post_init__(self) -> None:
        if self.expected not in (">", "<"):
            raise ValueError(f"expected: must be '>' or '<', got {self.expected!r}")

    @property
    def text(self) -> str:
        side = "above" if self.expected == ">" else "below"
        other = "below" if self.expected == ">" else "above"
        t = f" and {self.test_name} p < {self.alpha:g}" if self.test else ""
        return (f"direction: reproduced when the 95 % interval of the difference lies {side} {self.threshold:g}{t}; "
                f"not reproduced when it lies {other}{t}; else inconclusive")

    def decide(self, estimate: float, low: float, high: float, p: Optional[float] = None, what: str = "") -> Decision:
        label = f"{what}: " if what else ""
        if not _finite(estimate, low, high):
            return Decision(INCONCLUSIVE, f"{label}no finite difference", self.text)
        sig = (not self.test) or p is None or p < self.alpha
        above, below = low > self.threshold, high < self.threshold
        favour, against = (above, below) if self.expected == ">" else (below, above)
        ci = fmt_interval(estimate, low, high)
        if favour and sig:
            return Decision(REPRODUCED, "", self.text)
        if against and sig:
            return Decision(NOT_REPRODUCED, f"{label}the opposite holds: difference {ci} {self.unit}", self.text)
        if favour or against:
            return Decision(INCONCLUSIVE, f"{label}difference {ci} {self.unit} excludes {self.threshold:g} but "
                                          f"{self.test_name} p = {p:.3g} >= {self.alpha:g}: the two tests disagree",
                            self.text)
        p_txt = f", {self.test_name} p = {p:.3g}" if p is not None else ""
        return Decision(INCONCLUSIVE, f"{label}difference {ci} {self.unit} contains {self.threshold:g}{p_txt}: "
                                      "within noise at this sample size", self.text)


@dataclass(frozen=True)
class Equivalence:
    """Equal within ``margin`` (two one-sided tests at ``alpha``, read as the 1 - 2 alpha interval lying
    inside ``(-margin, margin)``): reproduced; not reproduced when the 95 % interval lies entirely beyond
    the margin; otherwise inconclusive. ``low90``/``high90`` may be omitted when a TOST result is passed
    as ``equivalent``."""

    margin: float
    unit: str = "points"
    alpha: float = 0.05

    @property
    def text(self) -> str:
        return (f"equivalence (TOST, alpha {self.alpha:g}): reproduced when the "
                f"{100 - 200 * self.alpha:.0f} % interval "
                f"lies inside +-{self.margin:g} {self.unit}; not reproduced when the 95 % interval lies beyond it; "
                "else inconclusive")

    def decide(self, estimate: float, low95: float, high95: float, low90: Optional[float] = None,
               high90: Optional[float] = None, equivalent: Optional[bool] = None) -> Decision:
        m = self.margin
        if equivalent is None:
            if not _finite(low90, high90):
                return Decision(INCONCLUSIVE, "no finite interval", self.text)
            equivalent = -m < low90 and high90 < m
        if equivalent:
            return Decision(REPRODUCED, "", self.text)
        if _finite(low95, high95) and (low95 > m or high95 < -m):
            return Decision(NOT_REPRODUCED, f"difference {fmt_interval(estimate, low95, high95)} {self.unit} lies "
                                            f"entirely beyond +-{m:g}", self.text)
        return Decision(INCONCLUSIVE, f"difference {fmt_interval(estimate, low95, high95)} {self.unit}: equivalence "
                                      f"within +-{m:g} is not shown, nor a difference larger than that", self.text)


@dataclass(frozen=True)
class Condition:
    """Reproduced when a stated condition on measured quantities holds (``text`` says which)."""

    text: str

    def decide(self, holds: bool, why_not: str) -> Decision:
        if holds:
            return Decision(REPRODUCED, "", self.text)
        return Decision(NOT_REPRODUCED, why_not, self.text)


@dataclass(frozen=True)
class Premise:
    """What must hold before a claim is judged. ``gate(decision)`` returns ``decision`` when the premise
    holds, else ``fails_as`` (``inconclusive``, or ``not testable here`` for a premise no measurement at this
    machine's scale can meet, e.g. that a proxy in the papers' regime exists) naming the failed premise (the rule
    text says so too). ``limitation``: what a claim that rests on the premise must say even when it holds (e.g. that
    its proxy is a fallback outside the cost bands); :func:`tokenprune.study.claims.file_claim` records it."""

    name: str
    holds: bool
    detail: str = ""
    fails_as: str = INCONCLUSIVE
    limitation: str = ""

    def __post_init__(self) -> None:
        if self.fails_as not in (INCONCLUSIVE, NOT_TESTABLE):
            raise ValueError(f"fails_as: {self.fails_as!r} not accepted; accepted: {INCONCLUSIVE!r}, {NOT_TESTABLE!r}")

    def gate(self, decision: Decision) -> Decision:
        rule = f"premise: {self.name}; then {decision.rule}"
        if self.holds:
            return Decision(decision.verdict, decision.why, rule)
        return Decision(self.fails_as, f"premise failed: {self.name}" + (f" ({self.detail})" if self.detail else ""),
                        rule)


@dataclass(frozen=True)
class Detectable:
    """Whether a claim's design can detect ``effect``, the effect in dispute (stated before the data, in the
    claim's unit), at 80 % power: :mod:`tokenprune.measure.power`.

    ``gate(decision)``: an ``inconclusive`` decision becomes ``not testable here`` when the MDE at the largest
    scale this machine allows (``design.n_max``) is more than ``factor`` x the effect, with the MDE and the
    number of units that would decide it; an inconclusive decision of a design that is underpowered at its own
    ``n`` but not at ``n_max`` says so. Decisive verdicts pass unchanged (the data decided despite the power),
    and so does a failed premise (gate the premise outside this gate). The MDE depends only on the spread of
    the differences, so this gate cannot favour either verdict. ``record()`` is what the claim stores
    (``Claim.design``; the ledger's MDE column)."""

    effect: float
    design: Any
    factor: float = 2.0

    def __post_init__(self) -> None:
        if not (math.isfinite(self.effect) and self.effect > 0):
            raise ValueError(f"effect: the effect in dispute must be finite and > 0, got {self.effect!r}")

    @property
    def text(self) -> str:
        return (f"detectable: not testable here when the MDE (80 % power) at the largest scale here exceeds "
                f"{self.factor:g} x the effect in dispute, {self.effect:g}")

    def record(self) -> dict:
        return self.design.record(self.effect)

    def gate(self, decision: Decision) -> Decision:
        d = self.design
        rule = f"{self.text}; then {decision.rule}"
        if decision.verdict != INCONCLUSIVE or decision.why.startswith("premise failed"):
            return Decision(decision.verdict, decision.why, rule)
        if d.mde_at_max > self.factor * self.effect:
            return Decision(NOT_TESTABLE, f"{decision.why}; the MDE at {d.max_scale} is {d.mde_at_max:.2f}, more "
                                          f"than {self.factor:g} x the effect in dispute ({self.effect:g}): "
                                          f"deciding it "
                                          f"needs about {d.n_needed(self.effect)} {d.unit} (this run: {d.n}, MDE "
                                          f"{d.mde:.2f})", rule)
        if d.mde > self.effect:
            return Decision(INCONCLUSIVE, f"{decision.why}; underpowered: MDE {d.mde:.2f} with this run's "
                                          f"{d.n} {d.unit} "
                                          f"is above the effect in dispute ({self.effect:g}); {d.mde_at_max:.2f} at "
                                          f"{d.max_scale}", rule)
        return Decision(INCONCLUSIVE, decision.why, rule)


def first_failed(premises: Sequence[Premise]) -> Optional[Premise]:
    """The first premise that does not hold, or None."""
    return next((p for p in premises if not p.holds), None)


# ----------------------------------------------------------------------------------------------
# Criteria: a composite claim decided by stated conditions on several intervals and flags
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Criteria:
    """A composite claim: reproduced when every condition of ``reproduced`` holds; else not reproduced when
    any condition of ``not_reproduced`` holds; else inconclusive.

    Conditions (:class:`Above`, :class:`Below`, :class:`Inside`, :class:`Beyond` on named intervals,
    :class:`Flag` on named yes/no results, nested with :class:`AllOf` / :class:`AnyOf`) are declared with the
    rule, so its text lists them; ``decide(values)`` takes ``{name: interval or bool}``. Use it for a claim
    that needs several intervals at once (a gap that must be positive *and* larger than others), where no
    single-interval rule fits.
    """

    reproduced: tuple
    not_reproduced: tuple

    @property
    def text(self) -> str:
        yes = " and ".join(c.text for c in self.reproduced)
        no = " or ".join(c.text for c in self.not_reproduced)
        return f"reproduced when {yes}; else not reproduced when {no}; else inconclusive"

    def decide(self, values: dict) -> Decision:
        if all(c.holds(values) for c in self.reproduced):
            return Decision(REPRODUCED, "", self.text)
        hit = next((c for c in self.not_reproduced if c.holds(values)), None)
        if hit is not None:
            return Decision(NOT_REPRODUCED, f"{hit.text} ({hit.show(values)})", self.text)
        miss = next(c for c in self.reproduced if not c.holds(values))
        return Decision(INCONCLUSIVE, f"not shown: {miss.text} ({miss.show(values)}); nor does a condition for "
                                      "'not reproduced' hold", self.text)


# ----------------------------------------------------------------------------------------------
# Robustness: an unreported choice does not matter, judged over several alternatives at once
# ----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Robustness:
    """An unreported choice does not matter: every alternative is compared with the main configuration on
    the same data. Not reproduced when any alternative differs from it significantly (the 95 % interval of
    the paired difference excludes 0 and the paired test's p < ``alpha``); reproduced when every
    alternative is equivalent to it within ``margin`` (TOST at ``alpha``, run by the caller and passed as
    ``equivalent``); otherwise inconclusive.

    ``decide`` takes one mapping per alternative with ``name``, ``estimate``, ``low``, ``high`` (the
    difference alternative - main, in ``unit``), ``p`` (the paired test), ``equivalent`` (bool) and
    optionally ``tost_p``."""

    margin: float
    unit: str = "points"
    alpha: float = 0.05
    test_name: str = "McNemar"

    @property
    def text(self) -> str:
        return (f"robustness: every alternative vs the main configuration on the same data; not reproduced when any "
                f"has a 95 % interval of the difference excluding 0 and {self.test_name} p < {self.alpha:g}; "
                f"reproduced when all are equivalent within +-{self.margin:g} {self.unit} (paired TOST, alpha "
                f"{self.alpha:g}); else inconclusive")

    def decide(self, alternatives: Sequence[dict]) -> Decision:
        if not alternatives:
            raise ValueError("alternatives: at least one is needed")
        differs = [a for a in alternatives if a["p"] < self.alpha and (a["low"] > 0 or a["high"] < 0)]
        if differs:
            return Decision(NOT_REPRODUCED, "the unreported choice matters: " + "; ".join(
                f"{a['name']} {a['estimate']:+.2f} {self.unit} ({self.test_name} p={a['p']:.2g})" for a in differs),
                self.text)
        if all(bool(a["equivalent"]) for a in alternatives):
            return Decision(REPRODUCED, "", self.text)
        open_ = [a for a in alternatives if not bool(a["equivalent"])]
        return Decision(INCONCLUSIVE, f"no significant difference, but equivalence within {self.margin:g} {self.unit} "
                                      "is not shown for: " + "; ".join(
                                          f"{a['name']} {fmt_interval(a['estimate'], a['low'], a['high'])}"
                                          + (f" (TOST p={a['tost_p']:.2g})" if a.get("tost_p") is not None else "")
                                          for a in open_), self.text)
