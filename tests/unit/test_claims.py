"""Tests of tokenprune.study.claims (declarations, each kind's verdicts, filing) and the ledger's number comparison."""
from __future__ import annotations

import dataclasses
import json

import pytest

from tokenprune.study import claims as C
from tokenprune.study import ledger as L
from tokenprune.study import report as R
from tokenprune.study import verdicts as V
from tokenprune.study import why as W


def _decl(**over) -> C.Declaration:
    fields = dict(id="evit.top1.keep{keep:g}", paper="evit", statement="top-1 at keep {keep:g}", quote='"79.5"',
                  where="Table 2", kind="paper claim", on_rule_holds="reproduced",
                  paper_number=("EVIT", "deit_small_patch16_224", "keep", "{keep}", "top1"),
                  rule=V.Magnitude(paper=79.5, tolerance=0.5), unit="%", effect=None, premises=(),
                  setting="proxy", section="§3", family=None, would_decide=None, headline=True)
    fields.update(over)
    return C.Declaration(**fields)


#: what a declaration must give (particular to each claim); everything else defaults to what most claims share
REQUIRED = {"id", "statement", "quote", "where", "unit", "setting", "section"}


def test_a_declaration_gives_what_is_particular_to_its_claim():
    fields = {f.name for f in dataclasses.fields(C.Declaration)}
    required = {f.name for f in dataclasses.fields(C.Declaration)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    assert required == REQUIRED
    for name in required:
        full = dataclasses.asdict(_decl())
        full.pop(name)
        with pytest.raises(TypeError, match=name):
            C.Declaration(**full)
    minimal = C.Declaration(**{k: v for k, v in dataclasses.asdict(_decl()).items() if k in REQUIRED})
    assert (minimal.kind, minimal.on_rule_holds, minimal.rule, minimal.premises, minimal.headline) == (
        "paper claim", "reproduced", None, (), False)
    assert fields - REQUIRED == {"paper", "kind", "on_rule_holds", "paper_number", "rule", "effect", "premises",
                                 "family", "would_decide", "headline"}


@pytest.mark.parametrize("kind,word", [("reviewer objection", "upheld"), ("consistency check", "consistent"),
                                       ("our hypothesis", "supported"), ("transcription", "consistent")])
def test_a_rule_that_holds_reads_as_the_kinds_first_word_by_default(kind, word):
    assert _decl(kind=kind, on_rule_holds="").on_rule_holds == word


def test_a_rule_is_always_called_to_give_the_object_that_decides():
    fixed = _decl()
    assert isinstance(fixed.rule, C.Fixed) and fixed.rule().decide(79.5, 79.4, 79.6).verdict == "reproduced"
    assert dataclasses.replace(fixed, id="z").rule is fixed.rule
    derived = _decl(rule=lambda paper: V.Magnitude(paper=paper, tolerance=0.5))
    assert derived.rule(80.0).paper == 80.0 and _decl(rule=None).rule is None


def test_a_table_gives_its_paper_to_declarations_that_name_none():
    table = C.DeclarationTable("bat", [_decl(paper="")])
    assert next(iter(table.values())).paper == "bat"
    with pytest.raises(ValueError, match="paper"):
        C.DeclarationTable("bat", [_decl(paper="evit")])


@pytest.mark.parametrize("field,value", [("kind", "claim"), ("setting", "somewhere"),
                                         ("on_rule_holds", "upheld"), ("quote", " "), ("premises", ["a"])])
def test_declaration_refuses_bad_fields_naming_them(field, value):
    with pytest.raises(ValueError, match=field):
        _decl(**{field: value})


@pytest.mark.parametrize("kind,on_holds,engine,verdict", [
    ("paper claim", "reproduced", "reproduced", "reproduced"),
    ("paper claim", "reproduced", "not reproduced", "not reproduced"),
    ("our hypothesis", "supported", "not reproduced", "not supported"),
    ("reviewer objection", "upheld", "reproduced", "upheld"),
    ("reviewer objection", "rejected", "reproduced", "rejected"),
    ("reviewer objection", "rejected", "not reproduced", "upheld"),
    ("consistency check", "consistent", "not reproduced", "inconsistent"),
    ("transcription", "consistent", "reproduced", "consistent"),
    ("consistency check", "consistent", "inconclusive", "inconclusive"),
])
def test_file_claim_names_the_outcome_in_its_kinds_words(kind, on_holds, engine, verdict):
    rep = R.Report("01_evit", profile="default")
    decision = V.Decision(engine, "" if engine == "reproduced" else "ours 78.0 lies below 79.5 +- 0.5", "rule")
    claim = C.file_claim(rep, _decl(kind=kind, on_rule_holds=on_holds), decision, keys={"keep": 0.7},
                         our_value=78.0, ci=[77.5, 78.5])
    assert claim.verdict == verdict and claim.kind == kind
    assert claim.outcome == C.OUTCOMES[engine]
    assert C.outcome_of(kind, on_holds, claim.verdict) == claim.outcome
    assert claim.id == "evit.top1.keep0.7" and claim.paper_value == 79.5 and claim.profile == "default"


def test_a_claim_refuses_a_verdict_of_another_kind_and_a_long_why():
    rep = R.Report("01_evit", profile="default")
    claim = C.file_claim(rep, _decl(), V.Decision("reproduced", "", "rule"), keys={"keep": 0.7})
    with pytest.raises(ValueError, match="verdict"):
        dataclasses.replace(claim, id="x", verdict="upheld")
    with pytest.raises(ValueError, match="why"):
        dataclasses.replace(claim, id="x", verdict="not reproduced", outcome="fails", why="x" * (W.MAX_WHY + 1))
    long = "the interval lies below; " + "x" * W.MAX_WHY
    filed = C.file_claim(rep, _decl(id="y{keep}"), V.Decision("not reproduced", long, "rule"), keys={"keep": 0.7},
                         why="context")
    assert filed.why == "the interval lies below" and filed.details == {"context": "context", "reason": long}


@pytest.mark.parametrize("text,limit,want", [
    ("a; b; c", 200, "a; b; c"),
    ("first clause; second clause; third", 30, "first clause; second clause"),
    ("premise failed: the proxy (measured on a model outside the regime)", 40, "premise failed: the proxy"),
    ("premise failed: the proxy (measured here; a proxy would decide); rule", 64,
     "premise failed: the proxy (measured here; a proxy would decide)"),
    ("premise failed: the proxy (measured here; a proxy would decide); rule", 40, "premise failed: the proxy"),
    ("one clause far too long to fit and without any parenthesis", 20, "one clause far too…"),
])
def test_a_long_why_keeps_its_leading_clauses_whole(text, limit, want):
    assert W.leading_clauses(text, limit) == want and len(want) <= limit


@pytest.mark.parametrize("text,limit,want", [
    ("short", 200, "short"),
    ("the ratio 1.530 [1.198, 1.642] is wide", 26, "the ratio 1.530…"),
    ("the ratio 1.530 [1.198, 1.642] is wide", 14, "the ratio…"),
    ("a gap of +12.34 points", 14, "a gap of…"),
    ("a gap of +12.34 points", 17, "a gap of +12.34…"),
    ("words only, cut in a word", 18, "words only, cut i…"),
])
def test_a_why_is_shortened_in_one_place_never_inside_a_number_or_an_interval(text, limit, want):
    assert W.shorten(text, limit) == want and len(want) <= limit


def test_too_long_measures_the_joined_why():
    assert not W.too_long("x" * W.MAX_WHY) and W.too_long("x" * (W.MAX_WHY - 1), "")
    assert W.too_long("x" * 100, "y" * 99) and not W.too_long("x" * 100, "y" * 98)


def test_premises_are_declared_and_gate_the_decision():
    rep = R.Report("01_evit", profile="default")
    decl = _decl(premises=("proxy: C5",))
    with pytest.raises(ValueError, match="premise"):
        C.file_claim(rep, decl, V.Decision("reproduced", "", "rule"), keys={"keep": 0.7})
    rep.add_premise(V.Premise("proxy: C5", False, "62.0 % top-1"))
    with pytest.raises(ValueError, match="premise"):
        rep.add_premise(V.Premise("proxy: C5", True))
    claim = C.file_claim(rep, decl, V.Decision("not reproduced", "below", "rule"), keys={"keep": 0.7})
    assert claim.verdict == "inconclusive" and "proxy: C5" in claim.why
    assert claim.details["rule alone"]["verdict"] == "fails" and claim.premises == ["proxy: C5"]
    # a premise given for one filing overrides the report's; an undeclared one is refused
    ok = C.file_claim(rep, decl, V.Decision("reproduced", "", "rule"), keys={"keep": 0.5},
                      premises={"proxy: C5": V.Premise("proxy: C5", True)})
    assert ok.verdict == "reproduced"
    with pytest.raises(ValueError, match="premises"):
        C.file_claim(rep, decl, V.Decision("reproduced", "", "rule"), keys={"keep": 0.9},
                     premises={"other": V.Premise("other", True)})
    table = rep.claims_table("§3")
    assert list(table.frame["claim"]) == ["evit.top1.keep0.7", "evit.top1.keep0.5"]
    assert list(table.frame["verdict"]) == ["inconclusive", "reproduced"] and len(rep.claims_table("§9")) == 0
    assert 'id="claim-evit.top1.keep0.7"' in table._repr_html_()


def test_paper_number_path_and_declaration_table():
    assert C.paper_number(("EVIT", "deit_small_patch16_224", "keep", "{keep}", "gmacs"), {"keep": 0.5}) == 2.3
    with pytest.raises(KeyError, match="paper_number"):
        C.paper_number(("EVIT", "deit_tiny"))
    table = C.DeclarationTable("evit", [_decl(), _decl(id="evit.other", section="§4")])
    assert [d.id for d in table.in_section("§4")] == ["evit.other"]
    with pytest.raises(ValueError, match="twice"):
        C.DeclarationTable("evit", [_decl(), _decl()])
    with pytest.raises(ValueError, match="paper"):
        C.DeclarationTable("bat", [_decl()])
    with pytest.raises(KeyError, match="evit.nothing"):
        table["evit.nothing"]


def _write(folder, claims):
    (folder / "01_evit").mkdir(parents=True)
    (folder / "01_evit" / "results.json").write_text(json.dumps({"name": "01_evit", "claims": claims}))


def test_compare_results_finds_moved_numbers_and_outcomes_but_not_renamed_verdicts(tmp_path, capsys):
    old = [{"id": "a", "verdict": "reproduced", "our_value": 1.0, "ci": [0.5, 1.5]},
           {"id": "b", "verdict": "not reproduced", "our_value": 2.0},
           {"id": "t", "verdict": "reproduced", "our_value": 1.4, "timed": True},
           {"id": "gone", "verdict": "inconclusive"}]
    new = [{"id": "a", "verdict": "consistent", "outcome": "holds", "our_value": 1.0, "ci": [0.5, 1.5]},
           {"id": "b", "verdict": "upheld", "outcome": "fails", "our_value": 2.0},
           {"id": "t", "verdict": "reproduced", "outcome": "holds", "our_value": 1.2, "timed": True}]
    _write(tmp_path / "old", old)
    _write(tmp_path / "new", new)
    changes = L.compare_results(tmp_path / "old", tmp_path / "new")
    assert [(c.claim_id, c.field, c.timed) for c in changes] == [("gone", "claim", False), ("t", "our_value", True)]
    assert L.main([str(tmp_path / "new"), "--compare-results", str(tmp_path / "old"), "--no-write"]) == 1
    new[1]["outcome"] = "holds"
    _write(tmp_path / "moved", new)
    fields = {(c.claim_id, c.field) for c in L.compare_results(tmp_path / "old", tmp_path / "moved")}
    assert ("b", "outcome") in fields
    old.pop()
    _write(tmp_path / "same", old)
    assert L.main([str(tmp_path / "new"), "--compare-results", str(tmp_path / "same"), "--no-write"]) == 0
    out = capsys.readouterr().out
    assert "listed, not failed" in out


def test_a_premise_nothing_here_can_meet_makes_the_claim_not_testable_and_a_held_one_records_its_limitation():
    rep = R.Report("01_evit", profile="default")
    decl = _decl(premises=("regime", "bar", "fallback"))
    rep.add_premise(V.Premise("regime", False, "no proxy qualified", fails_as=V.NOT_TESTABLE))
    rep.add_premise(V.Premise("bar", False, "62.0 % top-1"))
    rep.add_premise(V.Premise("fallback", True, limitation="outside the bands by a factor of 19"))
    claim = C.file_claim(rep, decl, V.Decision("reproduced", "", "rule"), keys={"keep": 0.7}, our_value=79.4)
    # the not-testable premise is outermost whatever its place in the declaration, and the value is kept
    assert claim.verdict == "not testable here" and "regime" in claim.why and claim.our_value == 79.4
    assert set(claim.details["failed premises"]) == {"regime", "bar"}
    assert claim.details["rule alone"]["verdict"] == "holds"
    assert claim.details["limitations"] == {"fallback": "outside the bands by a factor of 19"}
    with pytest.raises(ValueError, match="fails_as"):
        V.Premise("x", False, fails_as="not reproduced")
