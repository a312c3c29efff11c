"""The one count of a set of claims that every reader surface shows: the README's findings, the ledger, the study
page and each report's findings.

Claims are counted by kind, each kind's verdicts in one fixed order (its two decisive verdicts, then
:data:`~tokenprune.study.claims.UNDECIDED`). A timed claim (throughput, time shares) is counted apart, by number only:
its verdict depends on the machine that ran it, so a tally that gave it would differ between two machines whose other
verdicts agree. Checks (consistency checks, transcriptions) stay in their own kinds and are never counted as
reproductions. :func:`tally_text` is the tally's only wording; every surface calls it.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

__all__ = ["KindCount", "Tally", "tally", "tally_text", "verdict_order"]


def verdict_order(kind: str) -> tuple[str, ...]:
    """The order a kind's verdicts are counted in: its two decisive verdicts, then the undecided ones."""
    from tokenprune.study.claims import UNDECIDED, VOCABULARY

    return (*VOCABULARY[kind], *UNDECIDED)


@dataclass(frozen=True)
class KindCount:
    """The untimed claims of one kind: how many, and how many took each verdict (in :func:`verdict_order`)."""

    kind: str
    claims: int
    verdicts: tuple[tuple[str, int], ...]


@dataclass(frozen=True)
class Tally:
    """Claims counted by kind (untimed claims only) with the timed ones apart."""

    kinds: tuple[KindCount, ...]
    timed: int

    @property
    def claims(self) -> int:
        return sum(k.claims for k in self.kinds) + self.timed

    def count(self, kind: str, verdict: str) -> int:
        """How many untimed claims of ``kind`` took ``verdict`` (0 when none)."""
        return sum(n for k in self.kinds if k.kind == kind for v, n in k.verdicts if v == verdict)


def tally(claims: Iterable[Mapping[str, Any]]) -> Tally:
    """Count ``claims`` (results.json claim records) by kind, in :data:`~tokenprune.study.claims.KINDS`' order."""
    from tokenprune.study.claims import KINDS

    claims = list(claims)
    untimed = [c for c in claims if not c.get("timed")]
    unknown = sorted({str(c["kind"]) for c in untimed} - set(KINDS))
    if unknown:
        raise ValueError(f"claim kind: {', '.join(unknown)} is not one of {', '.join(KINDS)}")
    kinds = []
    for kind in KINDS:
        group = [c for c in untimed if c["kind"] == kind]
        if group:
            counts = tuple((v, sum(c["verdict"] == v for c in group)) for v in verdict_order(kind))
            kinds.append(KindCount(kind, len(group), tuple((v, n) for v, n in counts if n)))
    return Tally(tuple(kinds), len(claims) - len(untimed))


def _plural(n: int, noun: str) -> str:
    """``1 paper claim``, ``2 paper claims``, ``2 our hypotheses``."""
    if n == 1:
        return f"{n} {noun}"
    return f"{n} {noun[:-2]}es" if noun.endswith("is") else f"{n} {noun}s"


def tally_text(t: Tally) -> str:
    """``50 claims: 46 paper claims (9 reproduced, 2 not reproduced, 1 inconclusive, 34 not testable here); 3
    consistency checks (3 consistent); 4 timed claims (verdicts depend on the machine)``."""
    parts = [f"{_plural(k.claims, k.kind)} (" + ", ".join(f"{n} {v}" for v, n in k.verdicts) + ")"
             for k in t.kinds]
    if t.timed:
        parts.append(f"{_plural(t.timed, 'timed claim')} (verdicts depend on the machine)")
    return f"{_plural(t.claims, 'claim')}: " + "; ".join(parts)
