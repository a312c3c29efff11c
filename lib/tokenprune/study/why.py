"""A claim's why: one sentence of at most :data:`MAX_WHY` characters, the rule's reason with its context when both
fit; when they do not, the reason's leading clauses that fit, whole (:func:`one_sentence`), so that a why ends where
a clause ends, never in an ellipsis. What does not fit moves into the claim's details, which the study page shows
one click away. :func:`shorten` (an ellipsis, never inside a number or an interval) is the last resort, for a single
clause that is itself too long."""
from __future__ import annotations

__all__ = ["MAX_WHY", "too_long", "shorten", "leading_clauses", "one_sentence"]

MAX_WHY = 200
"""A claim's why is one sentence of at most this many characters."""


_NUMBER = frozenset("0123456789.")


def too_long(*parts: str) -> bool:
    """Whether ``parts`` joined as one why (``"; "`` between them) exceed :data:`MAX_WHY`: the one measure every
    filing uses to decide what stays in a why and what moves into the claim's details."""
    return len("; ".join(parts)) > MAX_WHY


def shorten(text: str, limit: int = MAX_WHY) -> str:
    """``text`` cut to at most ``limit`` characters, ending in an ellipsis: the one place a why is cut. The cut never
    falls inside a number (``1.6|42`` backs off to before ``1.642``) or an interval (an unclosed ``[`` backs off to
    before the ``[``), so that a number a why shows is one that was measured."""
    if len(text) <= limit:
        return text
    end = limit - 1
    opened = text.rfind("[", 0, end)
    if opened > text.rfind("]", 0, end):
        end = opened
    if 0 < end < len(text) and text[end - 1] in _NUMBER and text[end] in _NUMBER | {"%"}:
        while end > 0 and text[end - 1] in _NUMBER | {"+", "-", "−"}:
            end -= 1
    return text[:end].rstrip() + "…"


def _clauses(text: str) -> list[str]:
    """``text`` split at each ``"; "`` outside parentheses and brackets."""
    out, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += (ch in "([") - (ch in ")]")
        if depth == 0 and text.startswith("; ", i):
            out.append(text[start:i])
            start = i + 2
    return out + [text[start:]]


def leading_clauses(reason: str, limit: int = MAX_WHY) -> str:
    """The longest run of ``reason``'s leading clauses (``"; "`` between them, outside parentheses and brackets) within
    ``limit`` characters; when even
    the first is longer, that clause up to its first parenthesis (``premise failed: X (a long detail)`` gives
    ``premise failed: X``); :func:`shorten` only when that is too long as well."""
    clauses = _clauses(reason)
    kept = ""
    for clause in clauses:
        joined = f"{kept}; {clause}" if kept else clause
        if len(joined) > limit:
            break
        kept = joined
    if kept:
        return kept
    head = clauses[0].split(" (", 1)[0].rstrip(" :,")
    return head if head and len(head) <= limit else shorten(clauses[0], limit)


def one_sentence(reason: str, context: str, details: dict) -> str:
    """The claim's why: the rule's reason with ``context`` when both fit :data:`MAX_WHY`; else the reason alone (the
    context kept in ``details["context"]``), its leading clauses that fit when even that is longer
    (:func:`leading_clauses`; the whole reason kept in ``details["reason"]``)."""
    parts = [w for w in (reason, context) if w]
    if not too_long(*parts):
        return "; ".join(parts)
    if context:
        details["context"] = context
    if not too_long(reason):
        return reason
    details["reason"] = reason
    return leading_clauses(reason)
