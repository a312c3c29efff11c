"""Claims as data: what a claim is (its declaration), the verdicts each kind of claim may take, and filing.

Each paper's package declares its claims in one table of :class:`Declaration` s (``study/<paper>/claims.py``),
each listing only what is particular to its claim (what most claims share has a default): the source's words, where
they are printed, the kind of claim, the paper's number (a path into :mod:`tokenprune.study.paper_numbers`, read once
through :func:`paper_number`), the rule that decides it (always called to give a :mod:`tokenprune.study.verdicts`
object, its tolerance fixed in the declaration), the effect in dispute, the premises it rests on, the setting it is
decided in and the notebook section that decides it. Experiments return measurements; :func:`file_claim` turns one
declaration, the rule's :class:`~tokenprune.study.verdicts.Decision` and the measurement into a filed claim, its why
one sentence (:mod:`tokenprune.study.why`).

The verdict engine speaks of a rule that holds (``reproduced``) or fails (``not reproduced``); each kind names
those outcomes in its own words (:data:`VOCABULARY`), and a declaration says which word a rule that holds gives
(``on_rule_holds``): a reviewer objection whose rule checks the paper's side reads ``rejected`` when it holds.
"""
from __future__ import annotations

import dataclasses
import re
import string
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Optional, Sequence

from tokenprune.study import verdicts
from tokenprune.study.why import MAX_WHY, one_sentence
from tokenprune.utils.io import to_jsonable

__all__ = [
    "PAPERS",
    "Claim",
    "KINDS",
    "SETTINGS",
    "VOCABULARY",
    "UNDECIDED",
    "OUTCOMES",
    "gating_order",
    "gate_by_premises",
    "declared_premises",
    "unmeasured",
    "ALL_VERDICTS",
    "Declaration",
    "Fixed",
    "DeclarationTable",
    "verdicts_of",
    "outcome_of",
    "file_claim",
    "paper_number",
]

PAPERS: tuple[str, ...] = ("evit", "bat", "varmedad", "decouple", "other")
"""Paper ids, the four papers of the README's table of notebooks (``evit``: EViT, ``bat``: BAT, ``varmedad``: Igaue &
Aizawa, ``decouple``: part coverage and faithfulness), each audited by its package of :mod:`tokenprune.study`;
``other`` is for checks of our own, e.g. library invariants."""

KINDS: tuple[str, ...] = ("paper claim", "reviewer objection", "consistency check", "transcription",
                          "our hypothesis")
"""What a claim is: the paper's own claim, a reviewer's objection to it, a check that holds by how something was
chosen or computed (never evidence), a check that a printed number was read as printed, or a hypothesis of ours."""

SETTINGS: tuple[str, ...] = ("from the sources", "analytic at paper scale", "timed on this machine", "proxy",
                             "paper-scale run")
"""Where a claim is decided: from the papers' texts and code alone, computed at the paper's scale without
training, by wall-clock timing here, on the proxy model, or by a run at the paper's scale."""

VOCABULARY: dict[str, tuple[str, str]] = {
    "paper claim": ("reproduced", "not reproduced"),
    "our hypothesis": ("supported", "not supported"),
    "reviewer objection": ("upheld", "rejected"),
    "consistency check": ("consistent", "inconsistent"),
    "transcription": ("consistent", "inconsistent"),
}
"""Each kind's two decisive verdicts."""

UNDECIDED: tuple[str, ...] = ("inconclusive", "not testable here")
"""The verdicts every kind may take when the data do not decide."""

ALL_VERDICTS: tuple[str, ...] = tuple(dict.fromkeys(
    [v for pair in VOCABULARY.values() for v in pair] + list(UNDECIDED)))

OUTCOMES: dict[str, str] = {"reproduced": "holds", "not reproduced": "fails", "inconclusive": "inconclusive",
                            "not testable here": "not testable here"}
"""The verdict engine's verdict -> the rule's outcome as results.json stores it (kind-neutral)."""


def verdicts_of(kind: str) -> tuple[str, ...]:
    """The verdicts a claim of ``kind`` may take (its two decisive words, then :data:`UNDECIDED`)."""
    if kind not in VOCABULARY:
        raise ValueError(f"kind: must be one of {', '.join(map(repr, KINDS))}; got {kind!r}")
    return VOCABULARY[kind] + UNDECIDED


def _opposite(kind: str, word: str) -> str:
    a, b = VOCABULARY[kind]
    return b if word == a else a


def outcome_of(kind: str, on_rule_holds: str, verdict: str) -> str:
    """The rule's kind-neutral outcome (``holds`` / ``fails`` / undecided) behind ``verdict``."""
    if verdict in UNDECIDED:
        return verdict
    if verdict == on_rule_holds:
        return "holds"
    if verdict == _opposite(kind, on_rule_holds):
        return "fails"
    raise ValueError(f"verdict: {verdict!r} is not a verdict of a {kind!r} ({', '.join(verdicts_of(kind))})")


@dataclass(frozen=True)
class Fixed:
    """A rule fixed in its declaration (a :mod:`tokenprune.study.verdicts` object), called as every declared rule is:
    ``decl.rule()`` gives it."""

    rule: Any

    def __call__(self) -> Any:
        return self.rule


def _fields(template: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(template) if name}


@dataclass(frozen=True, kw_only=True)
class Declaration:
    """One claim as declared before any data: what is particular to it is given, what most claims share defaults.

    Given always: ``id``, ``statement``, ``quote``, ``where``, ``unit``, ``setting`` and ``section``. Defaults: the
    ``paper`` of the :class:`DeclarationTable` it is declared in, a ``paper claim`` whose rule that holds reads as its
    kind's first word (``on_rule_holds``: ``reproduced``, ``supported``, ``upheld``, ``consistent``), no paper number,
    no rule, no effect in dispute, no premises, no family, nothing that would decide it elsewhere, not a headline.

    ``id`` and the texts may hold ``{name}`` fields (e.g. ``keep{keep:g}``) filled at filing from ``keys``, so that one
    declaration covers a claim repeated per keep rate; ``paper_number`` is a path into
    :mod:`tokenprune.study.paper_numbers` (a tuple of keys whose string elements may also be ``{name}`` fields), or
    None when the paper gives no number. ``rule`` is always called to give the verdict-engine object that decides the
    claim: declared as that object (kept as :class:`Fixed`, ``decl.rule()``) or as a function that derives it from
    named inputs (its formula fixed here, ``decl.rule(paper_gmacs)``); None when this machine cannot decide it (then
    ``would_decide`` says what would). ``premises`` name the premises (registered on the report with
    :meth:`tokenprune.study.report.Report.add_premise`) that must hold before the rule's verdict counts.
    """

    id: str
    statement: str
    quote: str
    where: str
    unit: str
    setting: str
    section: str
    paper: str = ""
    kind: str = "paper claim"
    on_rule_holds: str = ""
    paper_number: Optional[tuple] = None
    rule: Any = None
    effect: Optional[float] = None
    premises: tuple[str, ...] = ()
    family: Optional[str] = None
    would_decide: Optional[str] = None
    headline: bool = False

    def __post_init__(self) -> None:
        verdicts_of(self.kind)
        if not self.on_rule_holds:
            object.__setattr__(self, "on_rule_holds", VOCABULARY[self.kind][0])
        if self.rule is not None and not callable(self.rule):
            object.__setattr__(self, "rule", Fixed(self.rule))
        if self.setting not in SETTINGS:
            raise ValueError(f"setting: must be one of {', '.join(map(repr, SETTINGS))}; got {self.setting!r} "
                             f"({self.id})")
        if self.on_rule_holds not in VOCABULARY[self.kind]:
            raise ValueError(f"on_rule_holds: a {self.kind!r} reads a rule that holds as one of "
                             f"{VOCABULARY[self.kind]}; got {self.on_rule_holds!r} ({self.id})")
        for name in ("statement", "quote", "where", "section"):
            if not str(getattr(self, name)).strip():
                raise ValueError(f"{name}: required for every claim ({self.id})")
        if not isinstance(self.premises, tuple):
            raise ValueError(f"premises: a tuple of premise names ({self.id})")
        if not isinstance(self.headline, bool):
            raise ValueError(f"headline: True or False ({self.id})")
        if self.effect is not None and not isinstance(self.effect, (int, float)):
            raise ValueError(f"effect: a number in the claim's unit, or None ({self.id})")

    @property
    def keys(self) -> set[str]:
        """The ``{name}`` fields its id needs at filing."""
        return _fields(self.id)

    def claim_id(self, keys: Mapping[str, Any]) -> str:
        missing = self.keys - set(keys)
        if missing:
            raise ValueError(f"keys: the declaration {self.id!r} needs {sorted(missing)}")
        return self.id.format(**keys)

    def text(self, name: str, keys: Mapping[str, Any]) -> str:
        value = getattr(self, name)
        return value.format(**keys) if isinstance(value, str) and _fields(value) else value




def _scalar(value: Any, name: str) -> float | int | str | None:
    """A claim value as float, int, str or None (numpy/torch scalars unwrapped, NaN -> None)."""
    v = to_jsonable(value)
    if v is None or isinstance(v, str):
        return v
    if isinstance(v, bool):
        raise ValueError(f"{name} must be a number, a string or None, not a bool")
    if isinstance(v, (int, float)):
        return v
    raise ValueError(f"{name} must be a number, a string or None, got {type(value).__name__}")


def _interval(value: Any) -> list[float] | None:
    """``[low, high]`` from None, a pair, or an object with ``low``/``high`` (intervals.Interval)."""
    if value is None:
        return None
    if hasattr(value, "low") and hasattr(value, "high"):
        value = [value.low, value.high]
    v = to_jsonable(value)
    if not isinstance(v, list) or len(v) != 2:
        raise ValueError(f"ci must be None or [low, high], got {value!r}")
    if any(x is None for x in v):
        return None
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in v):
        raise ValueError(f"ci bounds must be numbers, got {value!r}")
    low, high = float(v[0]), float(v[1])
    if low > high:
        raise ValueError(f"ci low {low} is above high {high}")
    return [low, high]


@dataclass(kw_only=True)
class Claim:
    """One audited claim of a paper, with our measurement and a verdict.

    ``verdict`` is exactly one of :data:`VERDICTS`; ``why`` is required (non-empty) for every
    verdict but ``reproduced``. ``test`` says how the verdict was decided (e.g. "MAC count at
    224 px, rounded to 0.1 as the paper does"); ``profile`` says at which profile our value was
    measured (efficiency claims are measured at the paper's scale in every profile).
    ``timed`` marks a verdict decided by wall-clock measurements on the machine that ran the
    notebook (throughput, time shares): such a verdict may legitimately differ on other hardware,
    so :func:`main`'s check lists its changes without failing on them. A timed claim must carry
    ``load``, the conditions its figures were timed under
    (:func:`tokenprune.measure.throughput.load_record`: load averages, other processes' cores, round
    spread, warnings); one timed under load says so in the ledger (:data:`UNDER_LOAD_MARK` before its why).
    ``design`` is the record of a comparison's design (:meth:`tokenprune.measure.power.Design.record`, or
    :meth:`tokenprune.study.verdicts.Detectable.record`): its units, minimum detectable effect at 80 % power, the
    MDE at the largest scale this machine allows and the effect in dispute; the ledger's MDE column shows it.
    """

    id: str
    paper: str
    statement: str
    quote: str
    source: str
    kind: str
    setting: str
    section: str
    verdict: str
    outcome: str
    family: str | None = None
    headline: bool = False
    premises: list[str] | None = None
    effect: float | None = None
    would_decide: str | None = None
    details: dict | None = None
    paper_value: float | str | None = None
    our_value: float | str | None = None
    ci: list[float] | None = None
    unit: str = ""
    profile: str = ""
    why: str = ""
    test: str = ""
    timed: bool = False
    load: dict | None = None
    design: dict | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id or re.search(r"[\s|`]", self.id):
            raise ValueError(f"id must be a non-empty string without spaces, '|' or '`', got {self.id!r}")
        if self.paper not in PAPERS:
            raise ValueError(f"paper must be one of {', '.join(map(repr, PAPERS))}; got {self.paper!r}")
        if self.kind not in KINDS:
            raise ValueError(f"claim {self.id}: kind must be one of {', '.join(map(repr, KINDS))}; got {self.kind!r}")
        if self.setting not in SETTINGS:
            raise ValueError(f"claim {self.id}: setting must be one of {', '.join(map(repr, SETTINGS))}; "
                             f"got {self.setting!r}")
        if self.verdict not in verdicts_of(self.kind):
            raise ValueError(f"claim {self.id}: verdict of a {self.kind!r} must be exactly one of "
                             f"{', '.join(map(repr, verdicts_of(self.kind)))}; got {self.verdict!r}")
        if self.outcome not in OUTCOMES.values():
            raise ValueError(f"claim {self.id}: outcome must be one of {sorted(OUTCOMES.values())}; "
                             f"got {self.outcome!r}")
        if len(self.why) > MAX_WHY:
            raise ValueError(f"claim {self.id}: why must be one sentence of at most {MAX_WHY} characters "
                             f"(detail goes into details); got {len(self.why)}: {self.why!r}")
        if self.details is not None:
            self.details = to_jsonable(dict(self.details))
        for name in ("statement", "quote", "source", "section", "unit", "profile", "why", "test"):
            if not isinstance(getattr(self, name), str):
                raise ValueError(f"{name} must be a string, got {type(getattr(self, name)).__name__}")
        if not isinstance(self.timed, bool):
            raise ValueError(f"claim {self.id}: timed must be True or False, got {self.timed!r}")
        if self.timed and not (isinstance(self.load, dict) and "under_load" in self.load):
            raise ValueError(f"claim {self.id}: a timed claim needs load, the conditions it was timed under "
                             f"(tokenprune.measure.throughput.load_record(results)), got {self.load!r}")
        if self.design is not None:
            if not (isinstance(self.design, Mapping) and {"mde", "mde_at_max", "n", "unit"} <= set(self.design)):
                raise ValueError(f"claim {self.id}: design must be a design record "
                                 "(tokenprune.measure.power.Design.record(effect), or Detectable.record()), "
                                 f"got {self.design!r}")
            self.design = to_jsonable(dict(self.design))
        if not self.timed and self.load is not None:
            raise ValueError(f"claim {self.id}: load is recorded for timed claims only")
        if self.load is not None:
            self.load = to_jsonable(dict(self.load))
        if not self.statement.strip():
            raise ValueError(f"claim {self.id}: statement must not be empty")
        if self.outcome != "holds" and not self.why.strip():
            raise ValueError(f"claim {self.id}: why is required when the verdict is {self.verdict!r}")
        self.paper_value = _scalar(self.paper_value, "paper_value")
        self.our_value = _scalar(self.our_value, "our_value")
        self.ci = _interval(self.ci)

    def to_dict(self) -> dict[str, Any]:
        """The claim as a plain dict (what results.json stores)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Claim":
        """Rebuild (and re-validate) a claim from :meth:`to_dict` output; unknown keys are refused."""
        fields = dataclasses.fields(cls)
        unknown = sorted(set(data) - {f.name for f in fields})
        if unknown:
            raise ValueError(f"unknown claim fields: {', '.join(unknown)}")
        missing = [f.name for f in fields if f.name not in data
                   and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        if missing:
            kind = data.get("kind")
            accepted = (f"; the verdict of a {kind!r} is one of {', '.join(map(repr, verdicts_of(kind)))}"
                        if "verdict" in missing and kind in VOCABULARY else "")
            raise ValueError(f"missing claim fields: {', '.join(missing)}{accepted}")
        return cls(**dict(data))


class DeclarationTable(Mapping[str, Declaration]):
    """A paper's declarations by id (ids unique, all of one paper)."""

    def __init__(self, paper: str, declarations: Iterable[Declaration]) -> None:
        self.paper = paper
        self._by_id: dict[str, Declaration] = {}
        for d in declarations:
            if not d.paper:
                d = dataclasses.replace(d, paper=paper)
            if d.paper != paper:
                raise ValueError(f"paper: {d.id} is declared for {d.paper!r} in the table of {paper!r}")
            if d.id in self._by_id:
                raise ValueError(f"id: {d.id!r} is declared twice")
            self._by_id[d.id] = d

    def __getitem__(self, key: str) -> Declaration:
        try:
            return self._by_id[key]
        except KeyError:
            raise KeyError(f"no declaration {key!r} in the table of {self.paper!r}") from None

    def __iter__(self):
        return iter(self._by_id)

    def __len__(self) -> int:
        return len(self._by_id)

    def in_section(self, section: str) -> list[Declaration]:
        return [d for d in self._by_id.values() if d.section == section]


def paper_number(path: Optional[Sequence[Any]], keys: Mapping[str, Any] = {}) -> Any:
    """The number at ``path`` in :mod:`tokenprune.study.paper_numbers` (first element: the module attribute), with
    ``{name}`` elements filled from ``keys`` (a lone ``{name}`` takes the key's value itself, e.g. a float)."""
    if path is None:
        return None
    from tokenprune.study import paper_numbers

    value: Any = paper_numbers
    for i, step in enumerate(path):
        if isinstance(step, str) and step.startswith("{") and step.endswith("}") and step.count("{") == 1:
            step = keys[step[1:-1].split(":")[0]]
        elif isinstance(step, str) and _fields(step):
            step = step.format(**keys)
        try:
            value = getattr(value, step) if i == 0 else value[step]
        except (AttributeError, KeyError, IndexError, TypeError):
            raise KeyError(f"paper_number: no {step!r} at {list(path[:i])} in paper_numbers") from None
    return value


def gating_order(premises: Sequence[Any]) -> list[Any]:
    """``premises`` in the order they gate a decision: as declared, except that a failed premise that fails as
    ``not testable here`` (nothing at this machine's scale can meet it) is outermost, so that it is the one named."""
    return sorted(premises, key=lambda p: not p.holds and getattr(p, "fails_as", "") == "not testable here")


def gate_by_premises(decision: Any, premises: Sequence[Any]) -> Any:
    """``decision`` gated by ``premises`` in :func:`gating_order` (what :func:`file_claim` files)."""
    for p in gating_order(premises):
        decision = p.gate(decision)
    return decision


def declared_premises(rep: Any, decl: "Declaration", premises: Mapping[str, Any] = {}) -> list[Any]:
    """The premises ``decl`` declares, in its order: those given for this filing (``premises``), else the report's;
    a premise given under another name than its own is refused."""
    out = []
    for name in decl.premises:
        premise = premises[name] if name in premises else rep.premise(name)
        if premise.name != name:
            raise ValueError(f"premises: the premise given for {name!r} is named {premise.name!r} ({decl.id})")
        out.append(premise)
    return out


def unmeasured(decl: Declaration, why: str) -> dict[str, verdicts.Premise]:
    """The declared premises of ``decl`` for a filing that measured nothing (its verdict says why it is not testable
    here): a premise on what a measurement rests on holds vacuously without one."""
    return {name: verdicts.Premise(name, True, f"nothing measured: {why}") for name in decl.premises}


def file_claim(rep: Any, decl: Declaration, decision: Any, *, keys: Mapping[str, Any] = {},
               our_value: Any = None, ci: Optional[Sequence[float]] = None, design: Optional[dict] = None,
               timed: bool = False, load: Optional[dict] = None, paper_value: Any = None,
               why: str = "", details: Optional[dict] = None, premises: Mapping[str, Any] = {}) -> Any:
    """File the claim ``decl`` (ids and texts filled from ``keys``) on report ``rep`` with the verdict engine's
    ``decision``, after the declaration's premises gate it; return the filed claim.

    A premise that fails makes the claim ``inconclusive`` (or what the premise fails as) naming it; the rule's own
    verdict and reason are kept in ``details["rule alone"]``, each failed premise's detail in
    ``details["failed premises"]``, each held premise's limitation in ``details["limitations"]``. ``why`` (context) is
    appended to the decision's reason where both fit one why (:func:`~tokenprune.study.why.one_sentence`).
    ``paper_value`` defaults to the declaration's paper number. ``premises`` gives, for this filing only, the value
    of declared premises that depend on what was measured (e.g. the training runs a number comes from); the others
    are the report's."""
    details = dict(details or {})
    unknown = sorted(set(premises) - set(decl.premises))
    if unknown:
        raise ValueError(f"premises: {unknown} are not declared premises of {decl.id}")
    rule_alone = decision
    for premise in gating_order(declared_premises(rep, decl, premises)):
        name = premise.name
        if not premise.holds:
            details.setdefault("rule alone", {"verdict": OUTCOMES[rule_alone.verdict], "why": rule_alone.why})
            details.setdefault("failed premises", {})[name] = premise.detail
        elif getattr(premise, "limitation", ""):
            details.setdefault("limitations", {})[name] = premise.limitation
        decision = premise.gate(decision)
    if decision.verdict not in OUTCOMES:
        raise ValueError(f"decision: unknown verdict {decision.verdict!r} ({decl.id})")
    outcome = OUTCOMES[decision.verdict]
    verdict = {"holds": decl.on_rule_holds, "fails": _opposite(decl.kind, decl.on_rule_holds)}.get(outcome, outcome)
    reason = one_sentence(decision.why, why, details)
    if paper_value is None:
        paper_value = paper_number(decl.paper_number, keys)
        if isinstance(paper_value, Mapping):
            raise ValueError(f"paper_number: {decl.paper_number} is a table, not a number ({decl.id})")
    claim = Claim(
        id=decl.claim_id(keys), paper=decl.paper, statement=decl.text("statement", keys),
        quote=decl.text("quote", keys), source=decl.text("where", keys), kind=decl.kind, setting=decl.setting,
        section=decl.section, family=decl.family, headline=decl.headline, premises=list(decl.premises),
        effect=decl.effect, would_decide=decl.text("would_decide", keys), verdict=verdict, outcome=outcome,
        paper_value=paper_value, our_value=our_value, ci=list(ci) if ci is not None else None,
        unit=decl.text("unit", keys),
        why=reason, test=decision.rule, timed=timed, load=load, design=design, details=details or None,
    )
    return rep.add_claim(claim)

