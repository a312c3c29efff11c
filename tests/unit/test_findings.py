"""Findings, the forest plot, the README section and the notebook's findings cell, generated from results alone."""
from __future__ import annotations

import json
from pathlib import Path

import nbformat
import pytest

from tokenprune.study import findings as F
from tokenprune.study import forest, publish
from tokenprune.study.tally import tally, tally_text


def _claim(cid, kind, verdict, setting="proxy", **over):
    c = {"id": cid, "statement": f"statement {cid}", "kind": kind, "setting": setting, "verdict": verdict,
         "why": "" if verdict in ("reproduced", "consistent") else "because 1.2 < 3", "would_decide": None,
         "headline": False, "our_value": 1.0, "ci": [0.5, 1.5], "paper_value": 1.2, "unit": "points (a - b)"}
    c.update(over)
    return c


RESULTS = {"name": "01_evit", "title": "EViT", "profile": "default", "params": {"proxy_model": "vit_x"},
           "provenance": {"wall_time_s": 12.5, "hardware": {"cpus_available": 2, "cpu_model": "CPU"},
                          "versions": {"torch": "2"}},
           "claims": [_claim("a", "paper claim", "reproduced", headline=True),
                      _claim("b", "paper claim", "not reproduced"),
                      _claim("c", "reviewer objection", "upheld"),
                      _claim("d", "reviewer objection", "rejected"),
                      _claim("e", "consistency check", "consistent", setting="analytic at paper scale"),
                      _claim("f", "our hypothesis", "inconclusive"),
                      _claim("g", "paper claim", "not testable here", our_value=None,
                             would_decide="DeiT-S trained on ImageNet"),
                      _claim("h", "paper claim", "reproduced", timed=True, setting="timed on this machine",
                             headline=True)]}


def test_findings_sort_claims_by_side_and_keep_checks_apart():
    found = F.findings(RESULTS)
    assert [f.id for f in found.holds] == ["a", "d"]   # headline claims first, then the notebook's order
    assert [f.id for f in found.fails] == ["b", "c"]
    assert [f.id for f in found.undecided] == ["f"] and [f.id for f in found.untestable] == ["g"]
    assert [f.id for f in found.checks] == ["e"] and found.total == 8
    assert [f.id for f in found.timed] == ["h"]   # its verdict depends on the machine: counted apart
    assert found.tally.claims == 8 and found.tally.timed == 1 and found.tally.count("paper claim", "reproduced") == 1
    text = F.findings_markdown(found, link="", compute=F.compute_used(RESULTS), top="the top line")
    assert "(#claim-a)" in text and "DeiT-S trained on ImageNet" in text and "12 s" in text
    assert "the top line" in text and tally_text(found.tally) in text


def test_forest_groups_by_unit_and_colours_by_side():
    panels = forest.plotted_claims(RESULTS)
    assert list(panels) == ["points"] and [r["id"] for r in panels["points"]] == ["a", "b", "c", "d", "e", "f", "h"]
    sides = {r["id"]: r["side"] for r in panels["points"]}
    assert sides["a"] == sides["d"] == "for the paper" and sides["c"] == "against the paper"
    assert sides["e"] == "check" and sides["f"] == "undecided"
    assert forest.forest_png(RESULTS)[:8] == b"\x89PNG\r\n\x1a\n"
    assert forest.forest_png({"claims": []}) is None


def _reports(root: Path, results: dict) -> Path:
    (root / "01_evit").mkdir(parents=True)
    from tokenprune.study import claims as C

    fields = {f for f in C.Claim.__dataclass_fields__}
    claims = [{**{k: v for k, v in c.items() if k in fields}, "paper": "evit", "quote": '"q"', "source": "T1",
               "section": "§1", "outcome": "fails" if c["verdict"] in ("not reproduced", "upheld") else
               ("holds" if c["verdict"] in ("reproduced", "rejected", "consistent") else c["verdict"]),
               "load": {"under_load": False} if c.get("timed") else None} for c in results["claims"]]
    (root / "01_evit" / "results.json").write_text(json.dumps({**results, "claims": claims}))
    return root


def test_readme_findings_give_no_timed_verdict_and_markers_are_required(tmp_path):
    root = _reports(tmp_path / "reports", RESULTS)
    body = publish.readme_findings(root)
    assert "reports/01_evit/01_evit.html" in body and tally_text(tally(RESULTS["claims"])) in body
    assert f"**{publish.TIMED_VERDICT}**" in body   # the timed headline claim's verdict is not stated
    from tokenprune.study.findings import decided_claims

    own, decided, against = decided_claims(RESULTS)   # the one line per paper opens the section
    row = body.splitlines()[2]
    assert "reports/01_evit/01_evit.html" in row
    assert f"| {len(decided)} of {len(own)} | {len(decided) - against} / {against} |" in row
    text = f"intro\n{publish.MARKERS[0]}\nold\n{publish.MARKERS[1]}\noutro\n"
    new = publish.replace_between_markers(text, body)
    assert new.startswith("intro\n") and new.endswith("outro\n") and "old" not in new and body in new
    with pytest.raises(ValueError, match="markers"):
        publish.replace_between_markers("no markers here", body)


def test_publish_opens_the_notebook_with_its_findings_and_records_no_machine_path(tmp_path):
    root = _reports(tmp_path / "reports", RESULTS)
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# 01 · EViT"), nbformat.v4.new_code_cell("x = 1")]
    nb.metadata["papermill"] = {"input_path": str(tmp_path / "notebooks" / "01_evit.ipynb"),
                                "output_path": str(root / ".staging-01_evit" / "01_evit.ipynb")}
    executed = root / "01_evit" / "01_evit.ipynb"
    nbformat.write(nb, executed)
    text = publish.publish(executed, root / "01_evit", root, Path("notebooks/01_evit.ipynb"))
    out = nbformat.read(executed, as_version=4)
    assert out.cells[1].metadata["tags"] == ["findings"] and out.cells[1].source.startswith(text)
    assert publish.FOREST_FILE in out.cells[1].source and (root / "01_evit" / publish.FOREST_FILE).exists()
    assert (root / "01_evit" / publish.FINDINGS_FILE).read_text() == text
    assert str(tmp_path) not in json.dumps(out.metadata["papermill"])


def _calibration(root: Path, chosen: dict, how: dict) -> Path:
    import csv

    d = root / publish.CALIBRATION_DIR
    d.mkdir(parents=True)
    rows = [{"candidate": "cls_a", "role": "classification", "tokens": 64, "top1": 86.0, "cost@0.7": 5.0,
             "cost@0.5": 20.0, "tome_cost": 17.6, "band_distance": 0.75},
            {"candidate": "cls_b", "role": "classification", "tokens": 64, "top1": 81.0, "cost@0.7": 0.7,
             "cost@0.5": 11.0, "tome_cost": 5.1, "band_distance": 0.0},
            {"candidate": "birds", "role": "fine-grained", "tokens": 64, "top1": 91.5, "cost@0.7": 19.8,
             "cost@0.5": 44.9, "tome_cost": "", "band_distance": 2.92}]
    with open(d / "calibration.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (d / "results.json").write_text(json.dumps({"values": {"chosen": chosen, "how": how}}))
    return d


def test_limitations_say_where_the_claims_rest_from_the_calibration(tmp_path):
    from tokenprune.study.proxy.chosen import FINE_GRAINED_BAR, PROXY_CHOSEN

    d = _calibration(tmp_path, {"classification": None, "fine-grained": "birds"},
                     {"classification": "none", "fine-grained": "fallback"})
    choice = publish.chosen_values(tmp_path)
    on_proxy = {**RESULTS, "claims": [_claim("a", "paper claim", "not testable here", premises=[PROXY_CHOSEN])]}
    text = F.limitations(d, on_proxy, choice)
    assert "vit_x" in text and "0.7-5.0" in text and "5.1-17.6" in text   # the model measured, the candidates' range
    assert "birds" not in text
    two = {**on_proxy, "params": {"proxy_model": "vit_x", "base_model": "small_y"}}
    assert "vit_x" in F.limitations(d, two, choice) and "small_y" in F.limitations(d, two, choice)
    assert "None" not in F.limitations(d, {**on_proxy, "params": {}}, choice)   # a notebook that names no model
    on_birds = {**RESULTS, "claims": [_claim("a", "paper claim", "reproduced", premises=[FINE_GRAINED_BAR])]}
    text = F.limitations(d, on_birds, choice)
    assert "birds" in text and "2.92" in text and "19.8" in text
    assert F.limitations(d, RESULTS, choice) == ""            # no claim rests on a proxy
    assert F.limitations(tmp_path / "missing", on_birds, choice) == ""
    with open(d / "calibration_round2.csv", "w", newline="") as fh:           # a second round: both are named
        fh.write("candidate,role,tokens,top1,cost@0.7,cost@0.5,tome_cost,band_distance\n"
                 "deep_a,classification,196,84.0,0.1,2.2,0.6,1.0\ndeep_b,classification,196,98.0,0.4,0.2,1.3,4.4\n")
    text = F.limitations(d, on_proxy, choice)
    assert "0.7-5.0 and 5.1-17.6" in text and "0.1-0.4 and 0.6-1.3" in text   # each round's EViT and ToMe ranges
    proxy = {"chosen": {"classification": "deep_b", "fine-grained": "birds"}}  # a round 2 proxy is found
    assert "deep_b" in F.limitations(d, on_proxy, proxy) and "98.0" in F.limitations(d, on_proxy, proxy)
    proxy = {"chosen": {"classification": "cls_b", "fine-grained": "birds"},   # the choice given, not re-read
             "how": {"classification": "qualified", "fine-grained": "qualified"}}
    text = F.limitations(d, on_proxy, proxy)
    assert "cls_b" in text and "81.0" in text and "0.7-5.0" not in text       # the chosen proxy's numbers alone


def test_the_tally_counts_each_kind_in_its_verdicts_order_and_timed_claims_apart():
    t = tally(RESULTS["claims"])
    assert [k.kind for k in t.kinds] == ["paper claim", "reviewer objection", "consistency check", "our hypothesis"]
    assert t.kinds[0].verdicts == (("reproduced", 1), ("not reproduced", 1), ("not testable here", 1))
    assert t.kinds[1].verdicts == (("upheld", 1), ("rejected", 1))
    assert t.claims == 8 and t.timed == 1
    other = [dict(c, verdict="inconclusive") if c["id"] == "h" else c for c in RESULTS["claims"]]
    assert tally_text(tally(other)) == tally_text(t)   # a timed verdict that differs does not move the tally
    with pytest.raises(ValueError, match="claim kind"):
        tally([_claim("z", "opinion", "reproduced")])


def test_the_top_line_splits_the_papers_claims_by_what_decided_them():
    from tokenprune.study.proxy.chosen import FINE_GRAINED_BAR, PROXY_CHOSEN

    claims = [_claim("m", "paper claim", "reproduced", setting="analytic at paper scale"),
              _claim("n", "paper claim", "not reproduced", setting="from the sources"),
              _claim("p", "paper claim", "reproduced", premises=[FINE_GRAINED_BAR]),
              _claim("q", "paper claim", "not testable here", setting="paper-scale run"),
              _claim("r", "paper claim", "not testable here", why=f"premise failed: {PROXY_CHOSEN} (x)"),
              _claim("s", "reviewer objection", "inconclusive"),
              _claim("t", "consistency check", "consistent"),
              _claim("u", "paper claim", "reproduced", timed=True, setting="timed on this machine")]
    chosen = {"chosen": {"classification": None, "fine-grained": "birds"}, "how": {"fine-grained": "fallback"}}
    line = F.top_line({"claims": claims}, chosen)
    numbers = [int(w) for w in line.replace("(", " ").split() if w.isdigit()]
    # 3 of 6 decided (2 for, 1 against), 2 without training, 1 on the fallback; 1 GPU, 1 proxy, 1 other
    assert numbers[:6] == [3, 6, 2, 1, 2, 1] and "`birds`" in line and "fallback" in line
    assert [int(w) for w in line.split("Not decided:")[1].replace(";", " ").split() if w.isdigit()] == [1, 1, 1]
    assert F.top_line({"claims": claims[-2:]}, chosen) == ""


def test_headlines_put_the_papers_own_claims_first_then_what_was_decided_against_it():
    claims = [_claim("a", "paper claim", "not testable here", headline=True),
              _claim("b", "paper claim", "reproduced", headline=True),
              _claim("c", "paper claim", "reproduced", timed=True, headline=True, setting="timed on this machine"),
              _claim("d", "paper claim", "not reproduced", setting="proxy"),
              _claim("e", "transcription", "inconsistent", setting="from the sources"),
              _claim("f", "reviewer objection", "upheld", setting="analytic at paper scale"),
              _claim("g", "consistency check", "inconsistent", setting="from the sources"),
              _claim("h", "paper claim", "reproduced")]
    shown, more = F.headlines({"claims": claims})
    assert [c["id"] for c in shown] == ["b", "c", "a", "e", "f", "d"] and more == 0
    many = claims + [_claim(f"x{i}", "paper claim", "not reproduced", setting="proxy") for i in range(F.MAX_AGAINST)]
    shown, more = F.headlines({"claims": many})
    assert len(shown) == 3 + F.MAX_AGAINST and more == 3   # 7 against: e, f and the first two on the proxy shown


def test_the_committed_surfaces_show_the_same_tallies():
    """What a reader opens without running anything: the top-level README's findings, the ledger, each report's
    findings and the study page each give every notebook's tally, and the study's, as the committed results say."""
    import html
    import re

    from tokenprune.study import site
    from tokenprune.study.ledger import load_results
    from tokenprune.utils.environment import REPO_ROOT

    reports = REPO_ROOT / "reports"
    results = [r for r in load_results(reports) if r["claims"]]
    assert results, "no committed results"
    expected = {r["_dir"]: tally_text(tally(r["claims"])) for r in results}
    expected["all"] = tally_text(tally(c for r in results for c in r["claims"]))
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    ledger = (reports / "README.md").read_text(encoding="utf-8")
    for nb, text in expected.items():
        assert text in readme and text in ledger, nb
        if nb != "all":
            assert text in (reports / nb / publish.FINDINGS_FILE).read_text(encoding="utf-8"), nb
    page = (reports / site.SITE_FILE).read_text(encoding="utf-8")
    shown = {m.group(2): html.unescape(m.group(3)) for m in
             re.finditer(r'<(span|p) class="tally" data-notebook="([^"]+)">(.*?)</\1>', page, re.S)}
    assert shown == expected
