"""Tests of tokenprune.study.report and .ledger: claim validation, atomic writes, results.json, the claims ledger."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from tokenprune.study import claims as C  # noqa: E402
from tokenprune.study import ledger as L  # noqa: E402
from tokenprune.study import report as R  # noqa: E402
from tokenprune.utils import io as IO  # noqa: E402


class Unencodable:
    """Stands for a value that cannot be serialised."""

    def __repr__(self) -> str:
        return "Unencodable()"


def _claim(**over):
    fields = dict(
        id="evit.macs.deit_s.keep0.7",
        paper="evit",
        statement="DeiT-S with keep rate 0.7 costs 3.0 GMACs",
        source="Table 1",
        paper_value=3.0,
        our_value=3.02,
        ci=None,
        unit="GMACs",
        verdict="reproduced",
        test="MAC count at 224 px, rounded to 0.1 as the paper does",
        quote='"3.0 GMACs"',
        kind="paper claim",
        setting="analytic at paper scale",
        section="§2",
    )
    fields.update(over)
    fields.setdefault("outcome", {"reproduced": "holds", "not reproduced": "fails"}.get(fields["verdict"],
                                                                                       fields["verdict"]))
    return C.Claim(**fields)


# ---------------------------------------------------------------- claims


def test_invalid_verdict_names_the_parameter_and_accepted_values():
    with pytest.raises(ValueError) as err:
        _claim(verdict="partially reproduced")
    msg = str(err.value)
    assert "verdict" in msg
    for v in C.verdicts_of("paper claim"):
        assert repr(v) in msg


@pytest.mark.parametrize("verdict", ["inconclusive", "not testable here", "not reproduced"])
def test_why_required_unless_reproduced(verdict):
    with pytest.raises(ValueError, match="why"):
        _claim(verdict=verdict)
    with pytest.raises(ValueError, match="why"):
        _claim(verdict=verdict, why="   ")
    assert _claim(verdict=verdict, why="needs ImageNet").why == "needs ImageNet"


def test_claim_rejects_unknown_paper_and_bad_ci_and_normalises_scalars():
    with pytest.raises(ValueError, match="paper"):
        _claim(paper="vit")
    with pytest.raises(ValueError, match="ci"):
        _claim(ci=[1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="ci"):
        _claim(ci=[2.0, 1.0])

    class Iv:  # any object with low/high, e.g. intervals.Interval
        low, high = np.float32(0.5), np.float64(0.75)

    c = _claim(our_value=np.float32(0.25), paper_value=torch.tensor(3.0), ci=Iv())
    assert type(c.our_value) is float and c.paper_value == 3.0
    assert c.ci == [0.5, 0.75]
    assert _claim(our_value=float("nan")).our_value is None


# ---------------------------------------------------------------- atomic writes and JSON


def test_write_json_failing_midway_leaves_old_file_intact(tmp_path):
    target = tmp_path / "results.json"
    IO.write_json(target, {"a": 1})
    before = target.read_bytes()
    # keys sort as "a" < "b" < "c": "a" and "b" are streamed before "c" fails
    with pytest.raises(TypeError, match="Unencodable"):
        IO.write_json(target, {"a": 2, "b": list(range(1000)), "c": Unencodable()})
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["results.json"]  # no temp file left


def test_atomic_write_writer_raising_partway(tmp_path):
    target = tmp_path / "table.csv"
    target.write_text("old\n")

    def writer(fh):
        fh.write("new partial content\n")
        raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        IO.atomic_write(target, writer)
    assert target.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]


def test_json_is_deterministic_and_handles_numpy_and_torch():
    obj = {"b": np.float32(1.5), "a": torch.tensor(2), "c": [np.int64(3), np.array([1.0, np.nan])],
           "d": torch.tensor([0.5, 0.25]), "e": {"z": np.bool_(True), "y": float("inf")}}
    text = IO.dumps_json(obj)
    assert text == IO.dumps_json(dict(reversed(list(obj.items()))))
    assert json.loads(text) == {"a": 2, "b": 1.5, "c": [3, [1.0, None]], "d": [0.5, 0.25],
                                "e": {"y": None, "z": True}}
    assert list(json.loads(text)) == ["a", "b", "c", "d", "e"]


# ---------------------------------------------------------------- Report


def _report(out_dir: Path, name: str = "01_evit") -> R.Report:
    rep = R.Report(name, out_dir, params={"profile": "smoke", "seed": 7}, profile="smoke", title="EViT")
    rep.add_claim(_claim(profile="paper"))
    rep.add_claim(_claim(id="evit.top1.deit_s.keep0.7", paper="evit", statement="top-1 drops by 0.3",
                  source="Table 1", paper_value=-0.3, our_value=np.float64(-0.41), ci=[-0.9, 0.1],
                  unit="pp", verdict="inconclusive", why="smoke profile: 64 images"))
    rep.add_table("tokens", pd.DataFrame({"keep": [0.5, 0.7], "tokens": [50, 99]}))
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [1, 0])
    rep.add_figure("curve", fig)
    plt.close(fig)
    rep.add_value("n_images", np.int64(64))
    return rep


def test_report_writes_files_and_provenance(tmp_path):
    out = tmp_path / "01_evit"
    rep = _report(out)
    assert rep.claims[1].profile == "smoke"  # filled from the report
    path = rep.write()
    assert path == out / "results.json"
    data = json.loads(path.read_text())
    assert data["name"] == "01_evit" and data["title"] == "EViT" and data["profile"] == "smoke"
    assert data["params"] == {"profile": "smoke", "seed": 7}
    assert data["tables"] == ["tokens.csv"] and data["figures"] == ["curve.png"]
    assert data["values"] == {"n_images": 64}
    assert [c["id"] for c in data["claims"]] == ["evit.macs.deit_s.keep0.7", "evit.top1.deit_s.keep0.7"]
    prov = data["provenance"]
    assert prov["seed"] == 7 and prov["parameters"] == data["params"]
    assert set(prov["git"]) >= {"commit", "dirty"}
    assert prov["versions"]["python"] and prov["versions"]["torch"] and prov["versions"]["numpy"]
    assert {"timm", "datasets"} <= set(prov["versions"])
    hw = prov["hardware"]
    assert hw["cpu_model"] and hw["cpu_count"] >= 1 and hw["torch_threads"] >= 1 and "gpus" in hw
    assert prov["wall_time_s"] >= 0 and prov["timestamp_utc"].endswith("+00:00")
    assert pd.read_csv(out / "tokens.csv")["tokens"].tolist() == [50, 99]
    assert (out / "curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]


def test_report_write_with_bad_value_changes_nothing(tmp_path):
    out = tmp_path / "01_evit"
    rep = _report(out)
    rep.write()
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    rep.add_table("tokens", pd.DataFrame({"keep": [0.1]}))
    rep.add_value("oops", Unencodable())
    with pytest.raises(TypeError, match="Unencodable"):
        rep.write()
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_duplicate_claim_ids_and_bad_file_names_refused(tmp_path):
    rep = _report(tmp_path / "x")
    with pytest.raises(ValueError, match="duplicate"):
        rep.add_claim(_claim())
    with pytest.raises(ValueError, match="name"):
        rep.add_table("../escape", pd.DataFrame({"a": [1]}))


# ---------------------------------------------------------------- the ledger


def _two_notebooks(reports: Path) -> None:
    _report(reports / "01_evit").write()
    rep = R.Report("02_bat", reports / "02_bat", params={"seed": 0}, profile="default", title="BAT | beyond")
    rep.add_claim(_claim(id="bat.params", paper="bat", statement="no extra parameters | no extra loss",
                  source="Sec. 3", paper_value="0", our_value=0, unit="parameters", verdict="reproduced",
                  test="count of trainable parameters"))
    rep.add_claim(_claim(id="bat.top1.imagenet", paper="bat", statement="79.6 top-1 on ImageNet",
                  source="Table 2", paper_value=79.6, unit="%", profile="paper",
                  verdict="not testable here", why="needs ImageNet and a GPU"))
    rep.write()


def test_ledger_is_deterministic_and_lists_every_claim(tmp_path):
    reports = tmp_path / "reports"
    _two_notebooks(reports)
    text = L.build_ledger(reports)
    # the same results written again later (new timestamps and wall times) give the same bytes
    other = tmp_path / "again" / "reports"
    _two_notebooks(other)
    assert L.build_ledger(other) == text
    assert "make reproduce" in text and "never edit" in text.lower()
    assert text.index("## 01_evit") < text.index("## 02_bat")
    for cid in ("evit.macs.deit_s.keep0.7", "evit.top1.deit_s.keep0.7", "bat.params", "bat.top1.imagenet"):
        assert f"`{cid}`" in text
    assert "-0.41 [-0.9, 0.1]" in text
    assert "| 3.0 | 3.02 | GMACs |" in text  # the paper's 3.0 is not shown as 3
    assert "no extra parameters \\| no extra loss" in text
    assert ("- [01_evit](01_evit/results.json): 2 claims: 2 paper claims (1 reproduced, 1 inconclusive)."
            in text)   # the study's one tally
    assert "- **all notebooks**: 4 claims: 4 paper claims (2 reproduced, 1 inconclusive, 1 not testable here)." in text
    assert "| **all** | | 4 | 2 reproduced, 1 inconclusive, 1 not testable here |" in text
    assert "timestamp" not in text and "wall" not in text
    path = L.write_ledger(reports)
    assert path == reports / "README.md" and path.read_text() == text


def test_ledger_verdicts_from_folder_and_from_markdown_agree(tmp_path):
    reports = tmp_path / "reports"
    _two_notebooks(reports)
    ledger = L.write_ledger(reports)
    from_json = L.ledger_verdicts(reports)
    assert from_json == {
        ("01_evit", "evit.macs.deit_s.keep0.7"): "reproduced",
        ("01_evit", "evit.top1.deit_s.keep0.7"): "inconclusive",
        ("02_bat", "bat.params"): "reproduced",
        ("02_bat", "bat.top1.imagenet"): "not testable here",
    }
    assert L.ledger_verdicts(ledger) == from_json


def test_compare_verdicts_finds_a_flipped_verdict(tmp_path):
    reports = tmp_path / "reports"
    _two_notebooks(reports)
    saved = tmp_path / "committed_README.md"
    shutil.copy(L.write_ledger(reports), saved)
    old = L.ledger_verdicts(saved)
    assert L.compare_verdicts(old, L.ledger_verdicts(reports)) == []

    # regenerate 01_evit with one verdict flipped and one claim removed
    path = reports / "01_evit" / "results.json"
    data = json.loads(path.read_text())
    data["claims"][0]["verdict"] = "not reproduced"
    data["claims"][0]["why"] = "3.4 GMACs measured"
    del data["claims"][1]
    path.write_text(json.dumps(data))
    diffs = L.compare_verdicts(old, L.ledger_verdicts(reports))
    assert [(d.notebook, d.claim_id, d.old, d.new, d.kind) for d in diffs] == [
        ("01_evit", "evit.macs.deit_s.keep0.7", "reproduced", "not reproduced", "changed"),
        ("01_evit", "evit.top1.deit_s.keep0.7", "inconclusive", None, "removed"),
    ]
    # the command line check fails on the difference and regenerates the ledger
    assert L.main([str(reports), "--check-against", str(saved)]) == 1
    assert L.main([str(reports), "--check-against", str(reports), "--no-write"]) == 0
    assert "not reproduced" in (reports / "README.md").read_text()


_IDLE = {"load_before": 0.1, "load_after": 0.1, "other_cores": 0.0, "cores": 2, "max_round_cv": 0.01,
         "under_load": False, "warnings": []}


def test_timed_claim_records_its_load_and_the_ledger_flags_load(tmp_path):
    """A timed claim carries the conditions it was timed under; under load the ledger says so."""
    fields = dict(paper="evit", statement="1.5x throughput", source="Table 2", paper_value=1.5, our_value=1.4,
                  unit="x", verdict="reproduced", timed=True)
    with pytest.raises(ValueError, match="timed claim needs load"):
        _claim(id="a", **fields)
    with pytest.raises(ValueError, match="timed claims only"):
        _claim(id="a", **{**fields, "timed": False}, load=_IDLE)
    reports = tmp_path / "reports"
    rep = R.Report("01_evit", reports / "01_evit", params={}, profile="default")
    rep.add_claim(_claim(id="idle", **fields, load=_IDLE))
    loaded = {**_IDLE, "other_cores": 1.1, "under_load": True,
              "warnings": ["machine under load: other processes kept 1.10 of 2 cores busy while timing"]}
    rep.add_claim(_claim(id="busy", **fields, load=loaded))
    rep.write()
    ledger = L.build_ledger(reports)
    busy = next(line for line in ledger.splitlines() if "`busy`" in line)
    idle = next(line for line in ledger.splitlines() if "`idle`" in line)
    assert L.UNDER_LOAD_MARK in busy and "1.10 of 2 cores" in busy and L.UNDER_LOAD_MARK not in idle
    again = json.loads((reports / "01_evit" / "results.json").read_text())["claims"]
    assert C.Claim.from_dict(again[1]).load["other_cores"] == 1.1


def test_timed_verdict_change_is_listed_but_does_not_fail_the_check(tmp_path, capsys):
    reports = tmp_path / "reports"
    rep = R.Report("01_evit", reports / "01_evit", params={}, profile="default")
    rep.add_claim(_claim(id="evit.speedup", paper="evit", statement="1.5x throughput", source="Table 2",
                  paper_value=1.5, our_value=1.4, unit="x", verdict="reproduced", timed=True, load=_IDLE))
    rep.add_claim(_claim(id="evit.macs", paper="evit", statement="3.0 GMACs", source="Table 2",
                  paper_value=3.0, our_value=3.0, unit="GMACs", verdict="reproduced"))
    rep.write()
    saved = tmp_path / "committed_README.md"
    shutil.copy(L.write_ledger(reports), saved)
    assert "| default (timed) | reproduced |" in saved.read_text()
    assert L.timed_claims(saved) == L.timed_claims(reports) == {("01_evit", "evit.speedup")}

    path = reports / "01_evit" / "results.json"
    data = json.loads(path.read_text())
    data["claims"][0].update(verdict="inconclusive", why="interval straddles 0.85")
    path.write_text(json.dumps(data))
    assert L.main([str(reports), "--check-against", str(saved), "--no-write"]) == 0
    assert "timed on this machine; listed, not failed" in capsys.readouterr().out
    # the same change on an untimed claim fails
    data["claims"][1].update(verdict="not reproduced", why="3.4 GMACs")
    path.write_text(json.dumps(data))
    assert L.main([str(reports), "--check-against", str(saved), "--no-write"]) == 1
    with pytest.raises(ValueError, match="timed must be True or False"):
        _claim(id="x", timed="yes")


def test_ledger_rejects_invalid_results(tmp_path):
    reports = tmp_path / "reports"
    _two_notebooks(reports)
    path = reports / "02_bat" / "results.json"
    data = json.loads(path.read_text())
    data["claims"][0]["verdict"] = "sort of"
    path.write_text(json.dumps(data))
    with pytest.raises(ValueError, match="02_bat.*verdict"):
        L.build_ledger(reports)


def test_the_ledger_shows_a_claims_whole_statement_and_source(tmp_path):
    """A long statement and source stand whole in the ledger's row (a cut would drop the statement's scope)."""
    reports = tmp_path / "reports"
    rep = R.Report("01_evit", reports / "01_evit", params={}, profile="default")
    rep.add_claim(_claim(statement="a long statement | on the proxy " * 10 + "(on SynthBirds)", source="Table 2 " * 40))
    rep.write()
    rows = [line for line in L.build_ledger(reports).splitlines() if line.startswith("| `")]
    cells = [c.strip() for row in rows for c in L._split_row(row)]
    assert "a long statement \\| on the proxy " * 9 + "a long statement \\| on the proxy (on SynthBirds)" in cells
    assert ("Table 2 " * 40).strip() in cells and not any(c.endswith("…") for c in cells)
