"""Notebook reports and the claims ledger.

A notebook builds one :class:`Report`, adds :class:`Claim` s, tables, figures and values, and
calls :meth:`Report.write`. That writes, under the notebook's report folder
(``reports/<name>/`` by default), one CSV per table, one PNG per figure and ``results.json``,
each atomically (temporary file in the same folder, then ``os.replace``), ``results.json``
last, so a reader never sees a half-written file and ``results.json`` only lists files that
exist. ``results.json`` carries the provenance: git commit, parameters, seed, library
versions, hardware, wall time and a UTC timestamp.

:func:`write_ledger` turns every ``reports/*/results.json`` into ``reports/README.md``, the
claims ledger. The ledger holds no volatile content (no timestamps, timings or commits), so
the same results give the same bytes and CI can compare verdicts with :func:`ledger_verdicts`
and :func:`compare_verdicts`, or run ``python -m tokenprune report --check-against OLD``.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import json
import os
import re
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable, Mapping

from tokenprune.study.claims import ALL_VERDICTS, KINDS, OUTCOMES, SETTINGS, verdicts_of
from tokenprune.utils.environment import REPO_ROOT, provenance
from tokenprune.utils.io import (InputError, atomic_write_bytes, atomic_write_text, dumps_json, input_checks,
                                 to_jsonable)

__all__ = [
    "VERDICTS",
    "PAPERS",
    "Claim",
    "Report",
    "VerdictChange",
    "timed_claims",
    "load_results",
    "results_folder",
    "build_ledger",
    "write_ledger",
    "ledger_verdicts",
    "compare_verdicts",
    "main",
]

VERDICTS: tuple[str, ...] = ALL_VERDICTS
"""The accepted verdicts (each kind's own words, then the undecided ones), in the order the ledger counts them."""

MAX_WHY = 200
"""A claim's why is one sentence of at most this many characters."""

PAPERS: tuple[str, ...] = ("evit", "bat", "varmedad", "decouple", "other")
"""Paper ids (see DESIGN.md); ``other`` is for checks of our own, e.g. library invariants."""


LEDGER_COMMAND = "make reproduce"
RESULTS_FILE = "results.json"
LEDGER_FILE = "README.md"
SCHEMA_VERSION = 1
FIGURE_DPI = 120

def reports_dir_for(profile: str) -> Path:
    """Where a run at ``profile`` writes by default: the committed ``reports/`` for ``default`` only; any other
    profile writes to the git-ignored ``runs/<profile>/``, so a smoke or paper run never overwrites the
    committed default reports (pass a folder explicitly to write elsewhere)."""
    return REPO_ROOT / "reports" if profile == "default" else REPO_ROOT / "runs" / profile


_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
#: appended to the profile cell of a ``timed`` claim in the ledger (and read back by :func:`timed_claims`)
TIMED_MARK = " (timed)"
#: put before the why of a timed claim whose figures were measured under load
UNDER_LOAD_MARK = "**timed under load**"
_NOTEBOOK_MARK = re.compile(r"^<!-- notebook: (?P<name>.+?) -->\s*$")


# ----------------------------------------------------------------------------------------------
# claims
# ----------------------------------------------------------------------------------------------


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
    """``[low, high]`` from None, a pair, or an object with ``low``/``high`` (metrics.Interval)."""
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
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"unknown claim fields: {', '.join(unknown)}")
        return cls(**dict(data))


# ----------------------------------------------------------------------------------------------
# reports
# ----------------------------------------------------------------------------------------------


def _file_stem(name: str, ext: str) -> str:
    stem = name[: -len(ext)] if name.endswith(ext) else name
    if not _NAME_RE.match(stem):
        raise ValueError(f"name {name!r} must match {_NAME_RE.pattern} (it becomes a file name)")
    return stem


def _in_notebook() -> bool:
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and hasattr(shell, "kernel")


def show_inline(png: bytes | None = None, caption: str = "", label: str = "") -> None:
    """Inside a notebook kernel, display ``caption`` (as ``**label.** caption``) and the PNG; elsewhere nothing."""
    if not _in_notebook():
        return
    from IPython.display import Image, Markdown, display

    if caption:
        display(Markdown(f"**{label}.** {caption}" if label else caption))
    if png is not None:
        display(Image(data=png, format="png"))


class Report:
    """What one notebook produces: claims, tables, figures and values, written atomically.

    ``out_dir`` is this notebook's own folder (default :func:`reports_dir_for` ``(profile) / name``). Tables and figures
    are rendered when added (a later change to the DataFrame or Figure is not picked up);
    nothing touches the disk until :meth:`write`.
    """

    def __init__(
        self,
        name: str,
        out_dir: str | os.PathLike[str] | None = None,
        params: Mapping[str, Any] | None = None,
        profile: str = "default",
        title: str | None = None,
        seed: int | None = None,
    ) -> None:
        if not _NAME_RE.match(name):
            raise ValueError(f"name {name!r} must match {_NAME_RE.pattern}")
        self.name = name
        self.title = title or name
        self.out_dir = Path(out_dir) if out_dir is not None else reports_dir_for(profile) / name
        self.params: dict[str, Any] = dict(params or {})
        self.profile = profile
        self.seed = seed if seed is not None else self.params.get("seed")
        self._started = time.perf_counter()
        self._claims: list[Claim] = []
        self._premises: dict[str, Any] = {}
        self._tables: dict[str, str] = {}
        self._figures: dict[str, bytes] = {}
        self.values: dict[str, Any] = {}

    @property
    def claims(self) -> tuple[Claim, ...]:
        return tuple(self._claims)

    def add_claim(self, claim: Claim | None = None, /, **fields: Any) -> Claim:
        """Add a :class:`Claim`, given as an object or as its fields.

        ``decision`` (a :class:`tokenprune.study.verdicts.Decision`) gives the verdict, why and test from
        the rule that decided the claim; a ``why`` passed beside it is appended as context.
        ``profile`` defaults to the report's profile. Claim ids must be unique in a report.
        """
        if claim is None:
            decision = fields.pop("decision", None)
            if decision is not None:
                if {"verdict", "test"} & set(fields):
                    raise TypeError("pass either decision or verdict/test, not both")
                fields["verdict"], fields["test"] = decision.verdict, decision.rule
                fields["why"] = "; ".join(w for w in (decision.why, fields.get("why", "")) if w)
            fields.setdefault("profile", self.profile)
            claim = Claim(**fields)
        elif fields:
            raise TypeError("pass either a Claim or its fields, not both")
        if not claim.profile:
            claim = dataclasses.replace(claim, profile=self.profile)
        if any(c.id == claim.id for c in self._claims):
            raise ValueError(f"duplicate claim id {claim.id!r} in report {self.name!r}")
        self._claims.append(claim)
        return claim

    def add_premise(self, premise: Any) -> Any:
        """Register ``premise`` (a :class:`tokenprune.study.verdicts.Premise`) under its name, before any claim that
        declares it is filed; registering a name twice is refused."""
        if premise.name in self._premises:
            raise ValueError(f"premise: {premise.name!r} is registered twice in report {self.name!r}")
        self._premises[premise.name] = premise
        return premise

    def premise(self, name: str) -> Any:
        """The premise registered as ``name`` (a claim declaring an unregistered premise cannot be filed)."""
        try:
            return self._premises[name]
        except KeyError:
            raise ValueError(f"premise: {name!r} is not registered in report {self.name!r} "
                             f"(registered: {sorted(self._premises)})") from None

    def claims_table(self, section: str) -> Any:
        """The claims filed so far that ``section`` decides: id, kind, setting, verdict (a DataFrame, shown under
        the section in its notebook)."""
        import pandas as pd

        rows = [{"claim": c.id, "kind": c.kind, "setting": c.setting, "verdict": c.verdict}
                for c in self._claims if c.section == section]
        return pd.DataFrame(rows, columns=["claim", "kind", "setting", "verdict"])

    def rename_claims(self, ids: Mapping[str, str]) -> None:
        """Give the filed claims of ``ids`` (old id -> new id) their new ids, in place (e.g. a paper-scale id once
        the model a claim was measured on is known to be the paper's); an id not filed, or a new id that would
        repeat one, is refused."""
        known = {c.id for c in self._claims}
        unknown = sorted(set(ids) - known)
        if unknown:
            raise ValueError(f"ids: not filed in report {self.name!r}: {unknown}")
        after = [ids.get(c.id, c.id) for c in self._claims]
        if len(set(after)) != len(after):
            raise ValueError(f"ids: renaming {dict(ids)} would repeat a claim id in report {self.name!r}")
        self._claims = [dataclasses.replace(c, id=new) for c, new in zip(self._claims, after)]

    def add_table(self, name: str, df: Any, index: bool | None = None, caption: str = "") -> Path:
        """Render a pandas DataFrame to ``<name>.csv`` (written by :meth:`write`); inside a notebook a
        ``caption`` is shown (the cell's last expression then shows the table under it).

        The index is written when ``index`` is True, or by default when it is not a plain
        0..n-1 range. Returns the path the file will have.
        """
        stem = _file_stem(name, ".csv")
        if index is None:
            import pandas as pd

            idx = df.index
            index = not (isinstance(idx, pd.RangeIndex) and idx.start == 0 and idx.step == 1 and idx.name is None)
        self._tables[f"{stem}.csv"] = df.to_csv(index=index, lineterminator="\n")
        if caption:
            show_inline(caption=caption, label=f"Table {stem}")
        return self.out_dir / f"{stem}.csv"

    def add_figure(self, name: str, fig: Any, caption: str = "", dpi: int = FIGURE_DPI) -> Path:
        """Render a matplotlib Figure to ``<name>.png`` at ``dpi`` (written by :meth:`write`) and, inside a
        notebook, show it inline under ``caption`` (one line: what to look at)."""
        stem = _file_stem(name, ".png")
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
        self._figures[f"{stem}.png"] = buf.getvalue()
        show_inline(png=buf.getvalue(), caption=caption, label=f"Figure {stem}")
        return self.out_dir / f"{stem}.png"

    def add_value(self, key: str, value: Any) -> None:
        """Record a free-form value (number, string, list, dict, numpy/torch scalar) in results.json."""
        self.values[key] = value

    def to_dict(self) -> dict[str, Any]:
        """The content of results.json (provenance taken now)."""
        return {
            "schema_version": SCHEMA_VERSION,
            "name": self.name,
            "title": self.title,
            "profile": self.profile,
            "params": self.params,
            "provenance": provenance(self.params, self.seed, self._started, cwd=self.out_dir),
            "claims": [c.to_dict() for c in self._claims],
            "tables": sorted(self._tables),
            "figures": sorted(self._figures),
            "values": self.values,
        }

    def write(self) -> Path:
        """Write tables, figures, then results.json, each atomically; return results.json's path.

        results.json is encoded before any file is touched, so an unserialisable value fails
        the write without changing anything on disk.
        """
        text = dumps_json(self.to_dict())
        self.out_dir.mkdir(parents=True, exist_ok=True)
        for fname, csv in sorted(self._tables.items()):
            atomic_write_text(self.out_dir / fname, csv)
        for fname, png in sorted(self._figures.items()):
            atomic_write_bytes(self.out_dir / fname, png)
        return atomic_write_text(self.out_dir / RESULTS_FILE, text)


# ----------------------------------------------------------------------------------------------
# the claims ledger
# ----------------------------------------------------------------------------------------------


def load_results(reports_dir: str | os.PathLike[str] = "reports") -> list[dict[str, Any]]:
    """Every ``<reports_dir>/*/results.json``, sorted by notebook name, claims validated.

    Each dict gets ``_dir`` (the folder name). A notebook's name is its ``name`` field, or
    its folder name when that is missing.
    """
    out = []
    for path in sorted(Path(reports_dir).glob(f"*/{RESULTS_FILE}")):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            data.setdefault("name", path.parent.name)
            data["claims"] = [Claim.from_dict(c).to_dict() for c in data.get("claims", [])]
        except (ValueError, TypeError) as exc:
            raise ValueError(f"{path}: {exc}") from exc
        data["_dir"] = path.parent.name
        out.append(data)
    out.sort(key=lambda d: (str(d["name"]), d["_dir"]))
    names = [d["name"] for d in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"several report folders claim the notebook name(s) {dup}")
    return out


def _fmt_number(v: float | int) -> str:
    """Short, stable text of a number: as typed when short (``3.0`` stays ``3.0``), else 4 digits."""
    if isinstance(v, int):
        return str(v)
    short = repr(float(v))
    return short if len(short) <= 7 else f"{v:.4g}"


def _fmt_value(v: Any) -> str:
    if v is None:
        return "—"
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return _fmt_number(v)
    return _cell(str(v))


def _cell(text: str) -> str:
    """Text safe inside a markdown table cell."""
    return " ".join(text.replace("|", "\\|").split())


def _ours(claim: Mapping[str, Any]) -> str:
    s = _fmt_value(claim.get("our_value"))
    ci = claim.get("ci")
    if ci:
        s += f" [{_fmt_number(ci[0])}, {_fmt_number(ci[1])}]"
    return s


_CLAIM_COLUMNS = ("claim", "statement", "paper", "ours [CI]", "unit", "MDE", "profile", "verdict", "why")


def _mde_cell(claim: Mapping[str, Any]) -> str:
    """``0.62 (n 2000; 0.28 at full scale) / 0.30``: the design's MDE, at the largest scale, and the effect in
    dispute; empty for a claim without a design (not a comparison, or not yet given one)."""
    d = claim.get("design")
    if not d:
        return ""
    cell = f"{d['mde']:.3g} ({d['n']} {d['unit']}"
    if d.get("n_max", d["n"]) != d["n"]:
        cell += f"; {d['mde_at_max']:.3g} at {d['n_max']}"
    cell += ")"
    if d.get("effect_in_dispute") is not None:
        cell += f" vs {d['effect_in_dispute']:.3g}"
    return cell


def _design_summary(results: list[dict[str, Any]]) -> list[str]:
    """How many claims state a design, how many can detect their effect in dispute, how many are not testable
    for power, and how many inconclusive claims rest on a failed premise (counted apart, issue 14)."""
    claims = [c for r in results for c in r["claims"]]
    designed = [c for c in claims if c.get("design")]
    disputed = [c for c in designed if c["design"].get("effect_in_dispute") is not None]
    powered = [c for c in disputed if c["design"]["mde"] <= c["design"]["effect_in_dispute"]]
    weak = [c for c in disputed if c["design"]["mde_at_max"] > 2 * c["design"]["effect_in_dispute"]]
    premise = [c for c in claims if c["verdict"] == "inconclusive" and "premise failed" in c.get("why", "")]
    return [
        "",
        f"Designs: {len(designed)} claims state their minimum detectable effect (80 % power, column MDE: "
        f"this run's, at the largest scale here, and the effect in dispute); {len(powered)} of the {len(disputed)} "
        f"with an effect in dispute detect it at this run's scale, and {len(weak)} cannot at any scale this machine "
        f"allows (MDE above twice the effect). Inconclusive for a failed premise: {len(premise)}.",
    ]


def _mixed_profiles_note(results: list[dict[str, Any]]) -> list[str]:
    """A warning line when the notebooks of one ledger ran at different profiles (else nothing)."""
    by_profile: dict[str, list[str]] = {}
    for r in results:
        by_profile.setdefault(str(r.get("profile", "")), []).append(str(r["name"]))
    if len(by_profile) < 2:
        return []
    parts = "; ".join(f"`{p}`: {', '.join(names)}" for p, names in sorted(by_profile.items()))
    return [f"> **Profiles mixed in this ledger** ({parts}): each verdict holds at its own profile.", ""]


def build_ledger(reports_dir: str | os.PathLike[str] = "reports") -> str:
    """The claims ledger (markdown) built from every ``<reports_dir>/*/results.json``.

    Deterministic: notebooks sorted by name, claims in the order the notebook added them, and
    no timestamps, timings or commits (those stay in results.json).
    """
    results = load_results(reports_dir)
    base = Path(reports_dir).name or "reports"
    lines = [
        "# Claims ledger",
        "",
        f"<!-- generated file: run `{LEDGER_COMMAND}` (or `python -m tokenprune report`); never edit by hand -->",
        f"> Generated by `{LEDGER_COMMAND}` from `{base}/*/{RESULTS_FILE}` "
        "(`python -m tokenprune report`). Never edit this file by hand: rerun the command.",
        "",
        "Each row is one claim of a paper, the number the paper gives, ours with its confidence "
        "interval, the profile it was measured at, and the verdict: "
        + ", ".join(f"**{v}**" for v in VERDICTS)
        + ". Provenance (commit, versions, hardware, timings) is in each notebook's results.json.",
        "",
        *_mixed_profiles_note(results),
        "## Summary",
        "",
        "| notebook | profile | claims | " + " | ".join(VERDICTS) + " |",
        "|---|---|---:|" + "---:|" * len(VERDICTS),
    ]
    totals = dict.fromkeys(VERDICTS, 0)
    for r in results:
        counts = dict.fromkeys(VERDICTS, 0)
        for c in r["claims"]:
            counts[c["verdict"]] += 1
            totals[c["verdict"]] += 1
        link = f"[{_cell(str(r['name']))}]({r['_dir']}/{RESULTS_FILE})"
        lines.append(
            f"| {link} | {_cell(str(r.get('profile', '')))} | {len(r['claims'])} | "
            + " | ".join(str(counts[v]) for v in VERDICTS)
            + " |"
        )
    lines.append(
        f"| **all** | | {sum(totals.values())} | " + " | ".join(str(totals[v]) for v in VERDICTS) + " |"
    )
    lines += _design_summary(results)
    for r in results:
        title = str(r.get("title") or r["name"])
        lines += ["", f"## {_cell(str(r['name']))}: {_cell(title)}", f"<!-- notebook: {r['name']} -->", ""]
        if not r["claims"]:
            lines.append("_No claims recorded._")
            continue
        lines.append("| " + " | ".join(_CLAIM_COLUMNS) + " |")
        lines.append("|" + "---|" * len(_CLAIM_COLUMNS))
        for c in r["claims"]:
            statement = _cell(c["statement"])
            if c.get("source"):
                statement += f" ({_cell(c['source'])})"
            row = [
                f"`{c['id']}`",
                statement,
                _fmt_value(c.get("paper_value")),
                _ours(c),
                _cell(c.get("unit", "")),
                _cell(_mde_cell(c)),
                _cell(c.get("profile", "")) + (TIMED_MARK if c.get("timed") else ""),
                c["verdict"],
                _cell(_why_with_load(c)),
            ]
            lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"


def _why_with_load(c: Mapping[str, Any]) -> str:
    """A claim's why, preceded by :data:`UNDER_LOAD_MARK` and the load warnings when it was timed under load."""
    load = c.get("load") or {}
    if not load.get("under_load"):
        return c.get("why", "")
    return f"{UNDER_LOAD_MARK} ({'; '.join(load.get('warnings', []))}): {c.get('why', '')}"


def write_ledger(reports_dir: str | os.PathLike[str] = "reports") -> Path:
    """Build the ledger and write it atomically to ``<reports_dir>/README.md``."""
    return atomic_write_text(Path(reports_dir) / LEDGER_FILE, build_ledger(reports_dir))


def _split_row(line: str) -> list[str]:
    cells = re.split(r"(?<!\\)\|", line.strip())
    return [c.strip() for c in cells[1:-1]]


def _parse_ledger(text: str, column: str = "verdict", match: str | None = None) -> dict[tuple[str, str], str]:
    """``{(notebook, claim_id): cell}`` of ``column`` in a ledger; with ``match``, only rows whose cell
    ends with it."""
    verdicts: dict[tuple[str, str], str] = {}
    notebook: str | None = None
    columns: list[str] | None = None
    for line in text.splitlines():
        mark = _NOTEBOOK_MARK.match(line)
        if mark:
            notebook, columns = mark.group("name"), None
            continue
        if notebook is None or not line.startswith("|"):
            continue
        cells = _split_row(line)
        if columns is None:
            columns = cells
            continue
        if "claim" not in columns or column not in columns or len(cells) != len(columns):
            continue
        claim_id = cells[columns.index("claim")].strip("`")
        cell = cells[columns.index(column)]
        if claim_id and not set(claim_id) <= {"-", ":"} and (match is None or cell.endswith(match)):
            verdicts[(notebook, claim_id)] = cell
    return verdicts


def timed_claims(source: str | os.PathLike[str] = "reports") -> set[tuple[str, str]]:
    """``{(notebook, claim_id)}`` of the claims marked ``timed`` in a reports folder or ledger file."""
    path = Path(source)
    if path.is_file():
        return set(_parse_ledger(path.read_text(encoding="utf-8"), column="profile", match=TIMED_MARK))
    return {(str(r["name"]), c["id"]) for r in load_results(path) for c in r["claims"] if c.get("timed")}


def ledger_verdicts(source: str | os.PathLike[str] = "reports") -> dict[tuple[str, str], str]:
    """``{(notebook, claim_id): verdict}`` from a reports folder or from a ledger markdown file.

    A folder is read through its ``*/results.json``; a file (e.g. a saved copy of the committed
    ``reports/README.md``) is parsed as a ledger written by :func:`build_ledger`.
    """
    path = Path(source)
    if path.is_file():
        return _parse_ledger(path.read_text(encoding="utf-8"))
    return {(str(r["name"]), c["id"]): c["verdict"] for r in load_results(path) for c in r["claims"]}


@dataclass(frozen=True)
class VerdictChange:
    """A claim whose verdict differs between two ledgers (None: absent on that side)."""

    notebook: str
    claim_id: str
    old: str | None
    new: str | None

    @property
    def kind(self) -> str:
        """``changed``, ``added`` (only in the new ledger) or ``removed`` (only in the old)."""
        if self.old is None:
            return "added"
        if self.new is None:
            return "removed"
        return "changed"

    def __str__(self) -> str:
        return f"{self.notebook} / {self.claim_id}: {self.kind} ({self.old!r} -> {self.new!r})"


def compare_verdicts(
    old: Mapping[tuple[str, str], str], new: Mapping[tuple[str, str], str]
) -> list[VerdictChange]:
    """Claims whose verdict changed, appeared or disappeared between ``old`` and ``new``, sorted."""
    changes = []
    for key in sorted(set(old) | set(new)):
        a, b = old.get(key), new.get(key)
        if a != b:
            changes.append(VerdictChange(key[0], key[1], a, b))
    return changes


def results_folder(path: str | os.PathLike[str], option: str) -> Path:
    """``path`` as a folder of reports: InputError naming ``option`` and the folder when it does not exist or
    holds no ``*/results.json`` (a ledger of no claims says nothing)."""
    folder = Path(path)
    if not folder.is_dir():
        raise InputError(f"{option}: {folder} {'is not a folder' if folder.exists() else 'does not exist'}")
    if not load_results(folder):
        raise InputError(f"{option}: {folder} holds no <notebook>/{RESULTS_FILE}")
    return folder


def main(argv: list[str] | None = None) -> int:
    """``python -m tokenprune report [REPORTS_DIR] [--check-against OLD] [--no-write]``.

    Regenerates ``REPORTS_DIR/README.md``. With ``--check-against OLD`` (a saved ledger file
    or a reports folder), also prints every verdict that differs from OLD and exits 1 if any.
    """
    parser = argparse.ArgumentParser(prog="python -m tokenprune report", description=main.__doc__)
    parser.add_argument("reports_dir", nargs="?", default="reports")
    parser.add_argument("--check-against", metavar="OLD", help="saved ledger (.md) or reports folder to compare verdicts with")
    parser.add_argument("--changed-only", action="store_true", help="ignore added and removed claims in the check")
    parser.add_argument("--no-write", action="store_true", help="do not rewrite README.md")
    args = parser.parse_args(argv)
    with input_checks():   # both sources read (and refused) before anything is written
        results_folder(args.reports_dir, "reports_dir")
        old = None
        if args.check_against:
            old = ledger_verdicts(args.check_against if Path(args.check_against).is_file()
                                  else results_folder(args.check_against, "--check-against"))
    if not args.no_write:
        print(f"wrote {write_ledger(args.reports_dir)}")
    if old is None:
        return 0
    diffs = compare_verdicts(old, ledger_verdicts(args.reports_dir))
    if args.changed_only:
        diffs = [d for d in diffs if d.kind == "changed"]
    timed = timed_claims(args.check_against) | timed_claims(args.reports_dir)
    failing = [d for d in diffs if (d.notebook, d.claim_id) not in timed]
    for d in diffs:
        if (d.notebook, d.claim_id) in timed:
            print(f"verdict differs (timed on this machine; listed, not failed): {d}")
        else:
            print(f"verdict differs: {d}")
    print(f"{len(failing)} verdict difference(s)" + (f", {len(diffs) - len(failing)} timed" if len(diffs) > len(failing) else ""))
    return 1 if failing else 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
