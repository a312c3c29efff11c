"""Filing one of notebook 01's claims with a why of one short sentence (:data:`tokenprune.study.why.MAX_WHY`):
the rule's reason cut to its first clause and the context dropped where the sentence would be too long, both kept
whole in the claim's details."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from tokenprune.study import verdicts
from tokenprune.study.claims import Declaration, declared_premises, file_claim, gate_by_premises
from tokenprune.study.why import shorten, too_long

__all__ = ["REASON_LIMIT", "concise", "file"]

#: a rule's reason longer than this keeps its first clause in the why (the whole reason goes into the details)
REASON_LIMIT = 130


def concise(decision: verdicts.Decision, limit: int = REASON_LIMIT) -> tuple[verdicts.Decision, Optional[str]]:
    """``decision`` with its reason cut to the first clause (``"; "``-separated) when longer than ``limit`` (that
    clause :func:`~tokenprune.study.why.shorten` ed to ``limit`` when longer still), and the whole reason (None when
    nothing was cut)."""
    why = decision.why
    if len(why) <= limit:
        return decision, None
    short = shorten(why.split("; ")[0], limit)
    return verdicts.Decision(decision.verdict, short, decision.rule), why


def _reason_after_premises(rep: Any, decl: Declaration, decision: verdicts.Decision,
                           premises: Mapping[str, Any]) -> str:
    """The reason the claim will carry once its declared premises gate ``decision`` (the outermost failed one)."""
    return gate_by_premises(decision, declared_premises(rep, decl, premises)).why


def file(rep: Any, decl: Declaration, decision: verdicts.Decision, *, why: str = "", details: Optional[dict] = None,
         premises: Mapping[str, Any] = {}, **kwargs: Any) -> Any:
    """:func:`tokenprune.study.claims.file_claim` with ``decision``'s reason made :func:`concise` and the context
    ``why`` moved into ``details`` where the claim's why would be :func:`~tokenprune.study.why.too_long`."""
    decision, whole = concise(decision)
    details = dict(details or {})
    if whole is not None:
        details["rule's reason"] = whole
    reason = _reason_after_premises(rep, decl, decision, premises)
    if why and too_long(reason, why):
        details["context"], why = why, ""
    return file_claim(rep, decl, decision, why=why, details=details or None, premises=premises, **kwargs)
