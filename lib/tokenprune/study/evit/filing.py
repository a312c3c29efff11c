"""Filing one of notebook 01's claims with a why of one short sentence (:data:`tokenprune.study.claims.MAX_WHY`):
the rule's reason cut to its first clause and the context dropped where the sentence would be too long, both kept
whole in the claim's details."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from tokenprune.study import verdicts
from tokenprune.study.claims import MAX_WHY, Declaration, declared_premises, file_claim, gate_by_premises

__all__ = ["REASON_LIMIT", "concise", "file"]

#: a rule's reason longer than this keeps its first clause in the why (the whole reason goes into the details)
REASON_LIMIT = 130


def concise(decision: verdicts.Decision, limit: int = REASON_LIMIT) -> tuple[verdicts.Decision, Optional[str]]:
    """``decision`` with its reason cut to the first clause (``"; "``-separated) when longer than ``limit``, and the
    whole reason (None when nothing was cut)."""
    why = decision.why
    if len(why) <= limit:
        return decision, None
    short = why.split("; ")[0]
    if len(short) > limit:
        cut = short[:limit].rsplit(", ", 1)[0]
        short = cut if len(cut) > limit // 2 else short[:limit - 3] + "..."
    return verdicts.Decision(decision.verdict, short, decision.rule), why


def _reason_after_premises(rep: Any, decl: Declaration, decision: verdicts.Decision,
                           premises: Mapping[str, Any]) -> str:
    """The reason the claim will carry once its declared premises gate ``decision`` (the outermost failed one)."""
    return gate_by_premises(decision, declared_premises(rep, decl, premises)).why


def file(rep: Any, decl: Declaration, decision: verdicts.Decision, *, why: str = "", details: Optional[dict] = None,
         premises: Mapping[str, Any] = {}, **kwargs: Any) -> Any:
    """:func:`tokenprune.study.claims.file_claim` with ``decision``'s reason made :func:`concise` and the context
    ``why`` moved into ``details`` where the claim's why would exceed :data:`~tokenprune.study.claims.MAX_WHY`."""
    decision, whole = concise(decision)
    details = dict(details or {})
    if whole is not None:
        details["rule's reason"] = whole
    reason = _reason_after_premises(rep, decl, decision, premises)
    if why and len(reason) + 2 + len(why) > MAX_WHY:
        details["context"], why = why, ""
    return file_claim(rep, decl, decision, why=why, details=details or None, premises=premises, **kwargs)
