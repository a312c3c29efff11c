"""A claim's why: one sentence of at most :data:`MAX_WHY` characters, the rule's reason with its context when both
fit, cut in one place (:func:`shorten`) and never inside a number or an interval; what does not fit moves into the
claim's details (:func:`one_sentence`)."""
from __future__ import annotations

__all__ = ["MAX_WHY", "too_long", "shorten", "one_sentence"]

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


def one_sentence(reason: str, context: str, details: dict) -> str:
    """The claim's why: the rule's reason with ``context`` when both fit :data:`MAX_WHY`; else the reason alone (the
    context kept in ``details["context"]``), its first clause when even that is longer (the whole reason kept in
    ``details["reason"]``), :func:`shorten` when the clause is too."""
    parts = [w for w in (reason, context) if w]
    if not too_long(*parts):
        return "; ".join(parts)
    if context:
        details["context"] = context
    if not too_long(reason):
        return reason
    details["reason"] = reason
    return shorten(reason.split("; ")[0])
