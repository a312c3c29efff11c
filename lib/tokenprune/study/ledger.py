"""The claims ledger, and comparisons of two report folders.

:func:`write_ledger` turns every ``reports/*/results.json`` into ``reports/README.md``: the counts of verdicts by
paper, kind and setting, then every claim. The ledger holds no volatile content (no timestamps, timings or commits),
so the same results give the same bytes. ``python -m tokenprune report`` rebuilds it; ``--check-against OLD``
compares verdicts with a saved ledger or reports folder; ``--compare-results OLD_DIR`` compares every claim's
numbers (value, interval, design, paper's number) and the rule's outcome by id (:func:`compare_results`).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tokenprune.study.claims import KINDS, SETTINGS, UNDECIDED, VOCABULARY
from tokenprune.study.report import RESULTS_FILE, VERDICTS, read_results
from tokenprune.utils.io import InputError, atomic_write_text, input_checks

__all__ = [
    "load_results",
    "build_ledger",
    "write_ledger",
    "timed_claims",
    "ledger_verdicts",
    "VerdictChange",
    "compare_verdicts",
    "NumberChange",
    "compare_results",
    "results_folder",
    "main",
]

LEDGER_COMMAND = "make reproduce"
LEDGER_FILE = "README.md"
#: appended to the profile cell of a ``timed`` claim in the ledger (and read back by :func:`timed_claims`)
TIMED_MARK = " (timed)"
#: put before the why of a timed claim whose figures were measured under load
UNDER_LOAD_MARK = "**timed under load**"
_NOTEBOOK_MARK = re.compile(r"^<!-- notebook: (?P<name>.+?) -->\s*$")



def load_results(reports_dir: str | os.PathLike[str] = "reports") -> list[dict[str, Any]]:
    """Every ``<reports_dir>/*/results.json``, sorted by notebook name, claims validated
    (:func:`~tokenprune.study.report.read_results`: an InputError names a truncated file, or the file and the claim
    whose verdict its kind does not accept).

    Each dict gets ``_dir`` (the folder name). A notebook's name is its ``name`` field, or
    its folder name when that is missing.
    """
    out = []
    for path in sorted(Path(reports_dir).glob(f"*/{RESULTS_FILE}")):
        data = read_results(path)
        data["_dir"] = path.parent.name
        out.append(data)
    out.sort(key=lambda d: (str(d["name"]), d["_dir"]))
    names = [d["name"] for d in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"{reports_dir}: several report folders claim the notebook name(s) {dup}")
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
    """Text safe inside a markdown table cell, whole: a claim's statement carries where it was measured and its
    scope, which a cut would drop."""
    return " ".join(text.replace("|", "\\|").split())


def _ours(claim: Mapping[str, Any]) -> str:
    s = _fmt_value(claim.get("our_value"))
    ci = claim.get("ci")
    if ci:
        s += f" [{_fmt_number(ci[0])}, {_fmt_number(ci[1])}]"
    return s


_CLAIM_COLUMNS = ("claim", "kind", "setting", "statement", "where", "paper", "ours [CI]", "unit", "MDE", "profile",
                  "verdict", "why")


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
    for power, and how many inconclusive claims rest on a failed premise (counted apart)."""
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


def _verdict_counts(claims: list[Mapping[str, Any]]) -> str:
    """``12 reproduced, 3 not reproduced, 1 inconclusive`` in the order of :data:`VERDICTS`, for the untimed claims;
    the timed ones counted apart, as in the tally (:mod:`tokenprune.study.tally`)."""
    untimed = [c for c in claims if not c.get("timed")]
    counts = {v: sum(c["verdict"] == v for c in untimed) for v in VERDICTS}
    text = [f"{n} {v}" for v, n in counts.items() if n]
    timed = len(claims) - len(untimed)
    if timed:
        text.append(f"{timed} timed (verdicts depend on the machine)")
    return ", ".join(text)


def _tally_lines(results: list[dict[str, Any]]) -> list[str]:
    """The study's one tally, notebook by notebook and for all of them (:func:`tokenprune.study.tally.tally_text`)."""
    from tokenprune.study.tally import tally, tally_text

    lines = [f"- [{_cell(str(r['name']))}]({r['_dir']}/{RESULTS_FILE}): {tally_text(tally(r['claims']))}."
             for r in results if r["claims"]]
    return lines + [f"- **all notebooks**: {tally_text(tally(c for r in results for c in r['claims']))}."]


def _count_table(results: list[dict[str, Any]], field: str, order: tuple[str, ...]) -> list[str]:
    """Rows of (notebook, ``field`` value): the number of claims and their verdicts; then the totals by value."""
    lines = [f"| notebook | {field} | claims | verdicts |", "|---|---|---:|---|"]
    for r in results:
        link = f"[{_cell(str(r['name']))}]({r['_dir']}/{RESULTS_FILE})"
        for value in order:
            group = [c for c in r["claims"] if c[field] == value]
            if group:
                lines.append(f"| {link} | {value} | {len(group)} | {_verdict_counts(group)} |")
    every = [c for r in results for c in r["claims"]]
    for value in order:
        group = [c for c in every if c[field] == value]
        if group:
            lines.append(f"| **all** | {value} | {len(group)} | {_verdict_counts(group)} |")
    lines.append(f"| **all** | | {len(every)} | {_verdict_counts(every)} |")
    return lines


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
        "Each row is one claim: its kind, the setting it is decided in, the number the source gives, ours with "
        "its confidence interval, the profile it was measured at, and the verdict in its kind's words ("
        + "; ".join(f"{k}: {' / '.join(VOCABULARY[k])}" for k in KINDS)
        + f"; any kind: {' / '.join(UNDECIDED)}). Provenance (commit, versions, hardware, timings) is in each "
        "notebook's results.json.",
        "",
        *_mixed_profiles_note(results),
        "## Summary",
        "",
        "The tally by notebook, each kind of claim with its own verdicts (consistency checks and transcriptions are "
        "never counted as reproductions; timed claims are counted apart, their verdicts depending on the machine), "
        "then the claims by the setting they are decided in.",
        "",
        *_tally_lines(results),
        "",
        *_count_table(results, "setting", SETTINGS),
    ]
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
            row = [
                f"`{c['id']}`",
                c["kind"],
                c["setting"],
                _cell(c["statement"]),
                _cell(c.get("source", "")),
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
    return {(nb, cid) for nb, claims in _raw_claims(path).items() for cid, c in claims.items() if c.get("timed")}


def ledger_verdicts(source: str | os.PathLike[str] = "reports") -> dict[tuple[str, str], str]:
    """``{(notebook, claim_id): verdict}`` from a reports folder or from a ledger markdown file.

    A folder is read through its ``*/results.json``; a file (e.g. a saved copy of the committed
    ``reports/README.md``) is parsed as a ledger written by :func:`build_ledger`.
    """
    path = Path(source)
    if path.is_file():
        return _parse_ledger(path.read_text(encoding="utf-8"))
    return {(nb, cid): c["verdict"] for nb, claims in _raw_claims(path).items() for cid, c in claims.items()}


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


_LEGACY_OUTCOMES = {"reproduced": "holds", "not reproduced": "fails"}
#: the fields of a claim whose values two runs of the same code must share (the rule's outcome besides)
COMPARED_FIELDS: tuple[str, ...] = ("our_value", "ci", "design", "paper_value", "unit")


def _outcome(claim: Mapping[str, Any]) -> str:
    """The rule's kind-neutral outcome: stored since claims carry a kind; for older results derived from the verdict
    (``reproduced`` -> holds, ``not reproduced`` -> fails)."""
    return claim.get("outcome") or _LEGACY_OUTCOMES.get(claim["verdict"], claim["verdict"])


def _raw_claims(folder: Path) -> dict[str, dict[str, dict[str, Any]]]:
    """``{notebook: {claim_id: claim}}`` read as stored (no validation: an older schema is compared as it is; a
    truncated file, or a claim without an id or a verdict, is an InputError naming it)."""
    out = {}
    for path in sorted(folder.glob(f"*/{RESULTS_FILE}")):
        data = read_results(path, validate=False)
        out[str(data["name"])] = {c["id"]: c for c in data["claims"]}
    return out


@dataclass(frozen=True)
class NumberChange:
    """One difference between two report folders: a claim added or removed, or one field (a number, the interval,
    the design, the paper's number, the unit, or ``outcome``) that differs; ``timed`` when either side was timed."""

    notebook: str
    claim_id: str
    field: str
    old: Any
    new: Any
    timed: bool

    def __str__(self) -> str:
        return f"{self.notebook} / {self.claim_id}: {self.field} {self.old!r} -> {self.new!r}"


def compare_results(old_dir: str | os.PathLike[str], new_dir: str | os.PathLike[str]) -> list[NumberChange]:
    """Every difference between the claims of two report folders, by notebook and id: claims only on one side
    (field ``claim``), and for each shared claim each of :data:`COMPARED_FIELDS` and the rule's outcome (so a verdict
    renamed by its kind is no difference, a verdict that moved is). Notebooks only in one folder are compared as
    all their claims added or removed."""
    old, new = _raw_claims(Path(old_dir)), _raw_claims(Path(new_dir))
    changes = []
    for nb in sorted(set(old) | set(new)):
        a_claims, b_claims = old.get(nb, {}), new.get(nb, {})
        for cid in sorted(set(a_claims) | set(b_claims)):
            a, b = a_claims.get(cid), b_claims.get(cid)
            timed = bool((a or {}).get("timed") or (b or {}).get("timed"))
            if a is None or b is None:
                changes.append(NumberChange(nb, cid, "claim", "absent" if a is None else "present",
                                            "absent" if b is None else "present", timed))
                continue
            for field in COMPARED_FIELDS:
                if a.get(field) != b.get(field):
                    changes.append(NumberChange(nb, cid, field, a.get(field), b.get(field), timed))
            if _outcome(a) != _outcome(b):
                changes.append(NumberChange(nb, cid, "outcome", _outcome(a), _outcome(b), timed))
    return changes


def results_folder(path: str | os.PathLike[str], option: str) -> Path:
    """``path`` as a folder of reports: InputError naming ``option`` and the folder when it does not exist or
    holds no ``*/results.json`` (a ledger of no claims says nothing)."""
    folder = Path(path)
    if not folder.is_dir():
        raise InputError(f"{option}: {folder} {'is not a folder' if folder.exists() else 'does not exist'}")
    if not list(folder.glob(f"*/{RESULTS_FILE}")):
        raise InputError(f"{option}: {folder} holds no <notebook>/{RESULTS_FILE}")
    return folder


def main(argv: list[str] | None = None) -> int:
    """``python -m tokenprune report [REPORTS_DIR] [--check-against OLD] [--compare-results OLD_DIR] [--no-write]``.

    Regenerates ``REPORTS_DIR/README.md``. With ``--check-against OLD`` (a saved ledger file or a reports folder),
    also prints every verdict that differs from OLD; with ``--compare-results OLD_DIR``, every claim whose numbers or
    outcome differ (:func:`compare_results`). Exits 1 if any differs, timed claims aside (listed apart).
    """
    parser = argparse.ArgumentParser(prog="python -m tokenprune report", description=main.__doc__)
    parser.add_argument("reports_dir", nargs="?", default="reports")
    parser.add_argument("--check-against", metavar="OLD",
                        help="saved ledger (.md) or reports folder to compare verdicts with")
    parser.add_argument("--compare-results", metavar="OLD_DIR",
                        help="reports folder to compare every claim's numbers and outcome with, by id")
    parser.add_argument("--changed-only", action="store_true", help="ignore added and removed claims in the check")
    parser.add_argument("--no-write", action="store_true", help="do not rewrite README.md")
    args = parser.parse_args(argv)
    with input_checks():   # both sources read (and refused) before anything is written
        if args.no_write:      # compared as stored (a truncated file, a claim without id or verdict refused)
            _raw_claims(results_folder(args.reports_dir, "reports_dir"))
        else:                  # a ledger is written from validated claims only
            load_results(results_folder(args.reports_dir, "reports_dir"))
        old = None
        if args.compare_results:
            _raw_claims(results_folder(args.compare_results, "--compare-results"))
        if args.check_against:
            old = ledger_verdicts(args.check_against if Path(args.check_against).is_file()
                                  else results_folder(args.check_against, "--check-against"))
    if not args.no_write:
        print(f"wrote {write_ledger(args.reports_dir)}")
    rc = 0
    if args.compare_results:
        rc = _print_number_changes(compare_results(args.compare_results, args.reports_dir))
    if old is None:
        return rc
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
    timed_note = f", {len(diffs) - len(failing)} timed" if len(diffs) > len(failing) else ""
    print(f"{len(failing)} verdict difference(s){timed_note}")
    return 1 if failing or rc else 0


def _print_number_changes(changes: list[NumberChange]) -> int:
    """Print the differences, timed claims apart (listed, not failed); 1 when any other differs."""
    failing = [c for c in changes if not c.timed]
    for c in failing:
        print(f"differs: {c}")
    for c in changes:
        if c.timed:
            print(f"differs (timed on this machine; listed, not failed): {c}")
    print(f"{len(failing)} difference(s) in numbers or outcomes"
          + (f", {len(changes) - len(failing)} in timed claims" if len(changes) > len(failing) else ""))
    return 1 if failing else 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
