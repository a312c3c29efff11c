"""What a notebook's run found, in a reader's words, generated from its results.json alone.

:func:`findings` sorts a run's claims into what of the paper holds, what fails, what stays undecided and what is not
testable here (with what would decide it), each with the setting that decided it and the claims behind it; checks
(consistency checks and transcriptions) are counted apart, never as evidence, and so are timed claims, whose verdicts
depend on the machine. The count line is the study's one tally (:mod:`tokenprune.study.tally`).
:func:`findings_markdown` writes them for the top of the executed notebook and for the study page;
:func:`limitations` says where the proxy stands against DeiT-class models, from notebook 00's calibration table;
:func:`compute_used` says what the run took.
"""
from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from tokenprune.study.tally import Tally, tally, tally_text

__all__ = ["Finding", "Findings", "findings", "findings_markdown", "limitations", "compute_used", "decided_claims",
           "top_line", "headlines", "HEADLINE_RULE", "MAX_AGAINST", "FOR_THE_PAPER", "AGAINST_THE_PAPER"]

#: the verdicts that count for the paper, by kind (a rejected objection leaves the paper standing)
FOR_THE_PAPER = {"paper claim": "reproduced", "our hypothesis": "supported", "reviewer objection": "rejected"}
#: the verdicts that count against the paper, by kind
AGAINST_THE_PAPER = {"paper claim": "not reproduced", "our hypothesis": "not supported", "reviewer objection": "upheld"}
CHECKS = ("consistency check", "transcription")
#: the settings that name the classification models a notebook's accuracy claims were measured on
MEASURED_ON = ("proxy_model", "base_model")
MAX_LISTED = 8


@dataclass(frozen=True)
class Finding:
    """One claim as a finding: its id, statement, kind, setting, verdict, reason, and what would decide it."""

    id: str
    statement: str
    kind: str
    setting: str
    verdict: str
    why: str
    would_decide: Optional[str]
    headline: bool
    timed: bool = False

    @classmethod
    def of(cls, claim: Mapping[str, Any]) -> "Finding":
        return cls(claim["id"], claim["statement"], claim["kind"], claim["setting"], claim["verdict"],
                   claim.get("why", ""), claim.get("would_decide"), bool(claim.get("headline")),
                   bool(claim.get("timed")))


@dataclass
class Findings:
    """A run's claims sorted for a reader (each list keeps the notebook's order, headline claims first)."""

    notebook: str
    title: str
    tally: Tally
    holds: list[Finding] = field(default_factory=list)
    fails: list[Finding] = field(default_factory=list)
    undecided: list[Finding] = field(default_factory=list)
    untestable: list[Finding] = field(default_factory=list)
    checks: list[Finding] = field(default_factory=list)
    timed: list[Finding] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(len(x) for x in (self.holds, self.fails, self.undecided, self.untestable, self.checks, self.timed))


def findings(results: Mapping[str, Any]) -> Findings:
    """Sort the claims of one results.json (a dict as written by :meth:`tokenprune.study.report.Report.write`)."""
    claims = results.get("claims", [])
    out = Findings(str(results.get("name", "")), str(results.get("title") or results.get("name", "")), tally(claims))
    for claim in claims:
        f = Finding.of(claim)
        if f.timed:
            out.timed.append(f)
        elif f.kind in CHECKS:
            out.checks.append(f)
        elif f.verdict == FOR_THE_PAPER[f.kind]:
            out.holds.append(f)
        elif f.verdict == AGAINST_THE_PAPER[f.kind]:
            out.fails.append(f)
        elif f.verdict == "inconclusive":
            out.undecided.append(f)
        else:
            out.untestable.append(f)
    for group in (out.holds, out.fails, out.undecided, out.untestable, out.timed):
        group.sort(key=lambda f: not f.headline)
    return out


def _item(f: Finding, link: Optional[str], with_why: bool) -> str:
    ident = f"[`{f.id}`]({link}#claim-{f.id})" if link is not None else f"`{f.id}`"
    mark = "**headline** " if f.headline else ""
    text = f"- {mark}{f.statement.rstrip('.')} ({f.setting}; {ident})"
    if f.timed:
        text += f": {f.verdict} on the machine that ran it"
    if with_why and f.why:
        text += f": {f.why.rstrip('.')}"
    if f.verdict == "not testable here" and f.would_decide:
        text += f". Would decide it: {f.would_decide.rstrip('.')}"
    return text + "."


def _section(title: str, items: Sequence[Finding], link: Optional[str], with_why: bool) -> list[str]:
    if not items:
        return []
    lines = [f"**{title}** ({len(items)})", ""]
    shown = [f for f in items if f.headline] or list(items[:MAX_LISTED])
    shown = shown if len(shown) <= MAX_LISTED else shown[:MAX_LISTED]
    lines += [_item(f, link, with_why) for f in shown]
    rest = [f for f in items if f not in shown]
    if rest:
        lines += ["", f"<details><summary>{len(rest)} more</summary>", ""]
        lines += [_item(f, link, with_why) for f in rest]
        lines += ["", "</details>"]
    return lines + [""]


def findings_markdown(found: Findings, link: Optional[str] = None, limits: str = "", compute: str = "",
                      top: str = "") -> str:
    """The findings as markdown: the ``top`` line (:func:`top_line`) and the tally, then what holds, what fails,
    what stays undecided (with why), what is not testable here (with what would decide it), the checks and the timed
    claims; then ``limits`` and ``compute``. ``link``: the executed notebook's HTML, whose claim anchors
    (``#claim-<id>``) each item links to."""
    lines = ["## Findings", ""] + ([f"**Top line.** {top}", ""] if top else []) + [
             f"_Generated from this run's results ({tally_text(found.tally)}). Each item names the setting that "
             "decided it: from the sources, analytic at paper scale, timed on this machine, proxy, or paper-scale "
             "run._", ""]
    lines += _section("What of the paper holds", found.holds, link, False)
    lines += _section("What fails", found.fails, link, True)
    lines += _section("Undecided here", found.undecided, link, True)
    lines += _section("Not testable here", found.untestable, link, False)
    lines += _section("Checks (consistency and transcription; not evidence)", found.checks, link, True)
    lines += _section("Timed on this machine (verdicts depend on the machine)", found.timed, link, True)
    if limits:
        lines += ["**Limitations.** " + limits, ""]
    if compute:
        lines += ["**Compute.** " + compute, ""]
    return "\n".join(lines).rstrip() + "\n"


def _number(row: Mapping[str, str], key: str) -> Optional[float]:
    try:
        return float(row[key])
    except (KeyError, TypeError, ValueError):
        return None


def _round_rows(calibration_dir: Path) -> dict[int, list[dict]]:
    """Each pre-registered round's measured candidates, from notebook 00's tables in ``calibration_dir``
    (:data:`tokenprune.study.proxy.calibration.ROUND_TABLES`); a round whose table is missing is left out."""
    from tokenprune.study.proxy.calibration import ROUND_TABLES

    out = {}
    for k, name in ROUND_TABLES.items():
        path = calibration_dir / f"{name}.csv"
        if path.exists():
            with open(path, newline="", encoding="utf-8") as fh:
                out[k] = [r for r in csv.DictReader(fh) if r.get("candidate")]
    return out


def _round_costs(k: int, cls: Sequence[Mapping[str, str]]) -> str:
    """``0.7-13.2 and 5.1-17.6 points on round 1's 5 candidates (64 tokens)``: EViT at keep 0.7, then ToMe."""
    def span(key: str) -> str:
        v = [c for c in (_number(r, key) for r in cls) if c is not None]
        return f"{min(v):.1f}-{max(v):.1f}" if v else "not measured"
    tokens = "/".join(sorted({r["tokens"] for r in cls}, key=int))
    return (f"{span('cost@0.7')} and {span('tome_cost')} points on round {k}'s {len(cls)} "
            f"candidate{'s' if len(cls) != 1 else ''} ({tokens} tokens)")


def limitations(calibration_dir: Optional[Path],
                results: Mapping[str, Any],
                choice: Mapping[str, Any]) -> str:
    """Where the run's accuracy claims stand against DeiT-class models, from notebook 00's choice ``choice``
    (:func:`tokenprune.study.publish.chosen_values`) and each pre-registered round's table in ``calibration_dir``
    (:func:`_round_rows`): for claims that rest on the classification proxy (premise
    :data:`tokenprune.study.proxy.chosen.PROXY_CHOSEN`), that none qualified in either round and what each round's
    candidates cost, or the proxy's costs; for claims on the fine-grained proxy (premise ``FINE_GRAINED_BAR``), how
    far the fallback lies outside the cost bands. Empty when the run has no such claim or there is no calibration
    report."""
    from tokenprune.study.proxy.chosen import FINE_GRAINED_BAR, PROXY_CHOSEN, against_deit, distance_factor
    from tokenprune.study.proxy.plan import band_text
    from tokenprune.study.paper_numbers import DEIT_CLASS_OFF_THE_SHELF as anchors

    by_round = _round_rows(calibration_dir) if calibration_dir is not None else {}
    if not by_round:
        return ""
    chosen, how = choice.get("chosen") or {}, choice.get("how") or {}
    rows = [r for k in sorted(by_round) for r in by_round[k]]
    premises = {p for c in results.get("claims", []) for p in (c.get("premises") or [])}
    deit = (f"DeiT-S has 196 tokens and DeiT-class models lose about {anchors['low']:g}-{anchors['high']:g} points "
            f"off the shelf at about 3 GMACs ({anchors['source']})")
    out = []
    if PROXY_CHOSEN in premises:
        cls = [r for r in rows if r.get("role") == "classification"]
        name = chosen.get("classification")
        if name is None and cls:
            params = results.get("params", {})
            models = list(dict.fromkeys(str(params[k]) for k in MEASURED_ON if params.get(k)))
            measured = (f" on `{models[0]}`, a model" if len(models) == 1 else
                        f" on {' and '.join(f'`{m}`' for m in models)}, models" if models else ", on models")
            rounds = "; ".join(_round_costs(k, [r for r in by_round[k] if r.get("role") == "classification"])
                               for k in sorted(by_round) if any(r.get("role") == "classification"
                                                                for r in by_round[k]))
            n = len(by_round)
            out.append(f"No classification proxy qualified in the {n} pre-registered round{'s' if n > 1 else ''} "
                       f"of the calibration (notebook 00). Off the shelf, "
                       f"EViT with fusion at keep 0.7 and ToMe at DeiT-S's MAC ratio cost {rounds}; {deit}. The "
                       f"accuracy claims that rest on the proxy are therefore not testable here, each shown with what "
                       f"was measured{measured} outside the papers' regime.")
        elif name:
            row = next((r for r in cls if r["candidate"] == name), None)
            if row is not None:
                out.append(f"Accuracy claims decided on the proxy describe `{name}` ({row.get('tokens')} patch tokens, "
                           f"base top-1 {_number(row, 'top1') or float('nan'):.1f} %), where EViT with fusion costs "
                           f"{_number(row, 'cost@0.7') or float('nan'):.1f} points at keep 0.7 off the shelf; {deit}.")
    if FINE_GRAINED_BAR in premises and chosen.get("fine-grained"):
        name = chosen["fine-grained"]
        row = next((r for r in rows if r["candidate"] == name), None)
        if row is not None:
            d = _number(row, "band_distance") or 0.0
            kind = "the fallback" if how.get("fine-grained") == "fallback" else "the proxy"
            out.append(f"Claims on SynthBirds are decided on {kind} `{name}` ({row.get('tokens')} patch tokens, base "
                       f"top-1 {_number(row, 'top1') or float('nan'):.1f} %), where EViT with fusion costs "
                       f"{_number(row, 'cost@0.7') or float('nan'):.1f} points off the shelf at keep 0.7 and "
                       f"{_number(row, 'cost@0.5') or float('nan'):.1f} at keep 0.5"
                       + (f", outside the pre-registered bands ({band_text('K2')} and {band_text('K3')}) by a "
                          f"distance of {d:.2f} "
                          f"(a factor of about {distance_factor(d)})" if d > 0 else "")
                       + f"; {deit}. A verdict on it says how pruning behaves on "
                       + against_deit({k: _number(row, k) for k in ("cost@0.7", "cost@0.5")}) + ".")
    return " ".join(out)


def compute_used(results: Mapping[str, Any]) -> str:
    """``1,234 s on 2 cores of an Intel(R) Xeon(R) Processor (torch 2.x, fp32 profile)``: the run's wall time and
    hardware from its provenance."""
    prov = results.get("provenance", {})
    hw = prov.get("hardware", {})
    wall = prov.get("wall_time_s")
    versions = prov.get("versions", {})
    when = f"{wall:,.0f} s of wall time" if isinstance(wall, (int, float)) else "an unrecorded time"
    where = f"{hw.get('cpus_available', hw.get('cpu_count', '?'))} CPU cores ({hw.get('cpu_model', 'unknown CPU')})"
    gpus = hw.get("gpus")
    if gpus:
        where += f" and {gpus}"
    return f"This run took {when} on {where}, torch {versions.get('torch', '?')}, profile `{results.get('profile')}`."


#: the settings whose claims are about the method as written and its cost, decided without training a model
WITHOUT_TRAINING = ("from the sources", "analytic at paper scale")


def _models_of(claims: Sequence[Mapping[str, Any]], chosen: Mapping[str, Any]) -> str:
    """The models the ``claims`` were decided on, as far as their premises name them: notebook 00's classification
    proxy, the fine-grained model (named with how it was chosen), else the models each statement names."""
    from tokenprune.study.proxy.chosen import FINE_GRAINED_BAR, PROXY_CHOSEN

    premises = {p for c in claims for p in (c.get("premises") or [])}
    named = []
    if PROXY_CHOSEN in premises and chosen.get("chosen", {}).get("classification"):
        named.append(f"the classification proxy `{chosen['chosen']['classification']}`")
    if FINE_GRAINED_BAR in premises and chosen.get("chosen", {}).get("fine-grained"):
        how = "fallback" if chosen.get("how", {}).get("fine-grained") == "fallback" else "proxy"
        named.append(f"the fine-grained {how} `{chosen['chosen']['fine-grained']}`")
    if any(not ({PROXY_CHOSEN, FINE_GRAINED_BAR} & set(c.get("premises") or [])) for c in claims):
        named.append("models trained or loaded here, named in each statement")
    return " and ".join(named)


def decided_claims(results: Mapping[str, Any]) -> tuple[list, list, int]:
    """A notebook's own claims on its paper (checks and timed claims aside), those decided here, and how many of
    those were decided against the paper: what :func:`top_line` and the README's one line per paper count."""
    from tokenprune.study.claims import VOCABULARY

    own = [c for c in results.get("claims", []) if c["kind"] not in CHECKS and not c.get("timed")]
    decided = [c for c in own if c["verdict"] in VOCABULARY[c["kind"]]]
    return own, decided, sum(c["verdict"] == AGAINST_THE_PAPER[c["kind"]] for c in decided)


def top_line(results: Mapping[str, Any], chosen: Optional[Mapping[str, Any]] = None) -> str:
    """What one notebook decided, on what, and what it leaves to a user's GPU and data, from its results alone (and
    notebook 00's ``chosen`` values, ``{"chosen": ..., "how": ...}``, to name the proxies): the paper's own claims
    (checks and timed claims aside) split into decided without training, decided on a model trained here, and not
    decided, the last by what would decide them (a paper-scale run, or a proxy in the papers' regime)."""
    from tokenprune.study.proxy.chosen import PROXY_CHOSEN

    own, decided, against = decided_claims(results)
    if not own:
        return ""
    plain = [c for c in decided if c["setting"] in WITHOUT_TRAINING]
    trained = [c for c in decided if c["setting"] not in WITHOUT_TRAINING]
    parts = [f"{len(decided)} of the {len(own)} claims on the paper (checks and timed claims aside) decided here "
             f"({len(decided) - against} for the paper, {against} against)"]
    if plain:
        parts.append(f"{len(plain)} of them without training (from the papers' texts and code, or computed at the "
                     "paper's scale)")
    if trained:
        parts.append(f"{len(trained)} on {_models_of(trained, chosen or {})}")
    text = "; ".join(parts) + "."
    left = [c for c in own if c not in decided]
    gpu = sum(c["setting"] == "paper-scale run" and c["verdict"] == "not testable here" for c in left)
    proxy = sum(c["setting"] != "paper-scale run" and c["verdict"] == "not testable here"
                and c.get("why", "").startswith(f"premise failed: {PROXY_CHOSEN}") for c in left)
    other = len(left) - gpu - proxy
    undecided = [f"{gpu} need a paper-scale run (`--profile paper` on a GPU, with the paper's data and weights from "
                 "local paths)" if gpu else "",
                 f"{proxy} need a proxy in the papers' regime, which notebook 00's calibration did not find" if proxy
                 else "", (f"{other} {'is' if other == 1 else 'are'} inconclusive or not testable for another "
                           "reason (each says what would decide it)") if other else ""]
    undecided = [u for u in undecided if u]
    if undecided:
        text += " Not decided: " + "; ".join(undecided) + "."
    return text


#: how many claims decided against a paper the README's headlines list beyond the paper's own headline claims
MAX_AGAINST = 4
#: the rule that picks and orders the README's headlines (:func:`headlines`), shown above them
HEADLINE_RULE = (f"Headlines per paper: first the claims its abstract, title or summary makes (declared as headlines "
                 f"in its claims table), decided ones first; then up to {MAX_AGAINST} more claims decided against the "
                 "paper, the evidence that needs no trained model first (from the sources, then analytic at paper "
                 "scale, then on a proxy).")


def _decided(claim: Mapping[str, Any]) -> bool:
    return not claim.get("timed") and claim["verdict"] in (FOR_THE_PAPER.get(claim["kind"]),
                                                           AGAINST_THE_PAPER.get(claim["kind"]),
                                                           "consistent", "inconsistent")


def _against(claim: Mapping[str, Any]) -> bool:
    return not claim.get("timed") and (claim["verdict"] == AGAINST_THE_PAPER.get(claim["kind"])
                                       or (claim["kind"] == "transcription" and claim["verdict"] == "inconsistent"))


def headlines(results: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], int]:
    """The claims the README lists for one notebook by :data:`HEADLINE_RULE`, and how many more were decided against
    the paper than it lists. A consistency check found inconsistent is counted against the paper's text only when it
    is a transcription (a printed number that is not what the paper's own data give)."""
    from tokenprune.study.claims import SETTINGS

    claims = list(results.get("claims", []))
    rank = (lambda c: 0 if _decided(c) else 1 if c.get("timed") else 2 if c["verdict"] == "inconclusive" else 3)
    own = sorted((c for c in claims if c.get("headline")), key=rank)
    against = sorted((c for c in claims if _against(c) and not c.get("headline")),
                     key=lambda c: SETTINGS.index(c["setting"]))
    return own + against[:MAX_AGAINST], max(0, len(against) - MAX_AGAINST)
