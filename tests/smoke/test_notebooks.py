"""Every notebook: stored without outputs, has a `parameters` cell, and runs end to end at `smoke`."""
import json
import shutil
from pathlib import Path

import nbformat
import pytest

from tokenprune.study import pipeline
from tokenprune.study.report import ledger_verdicts

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_without_outputs_and_parameterised(nb):
    cells = nbformat.read(nb, as_version=4).cells
    assert not any(c.get("outputs") for c in cells if c.cell_type == "code"), f"{nb.name} is stored with outputs"
    assert not any(c.get("execution_count") for c in cells if c.cell_type == "code")
    tagged = [c for c in cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{nb.name} needs exactly one cell tagged 'parameters'"
    assert "profile" in tagged[0].source


@pytest.fixture(scope="module")
def smoke_reports(tmp_path_factory):
    out = tmp_path_factory.mktemp("reports")
    rc = pipeline.main(["--profile", "smoke", "--reports", str(out)])
    return out, rc


def test_every_notebook_runs_at_smoke(smoke_reports):
    out, rc = smoke_reports
    assert rc == 0
    for nb in NOTEBOOKS:
        d = out / nb.stem
        res = json.loads((d / "results.json").read_text())
        assert res["profile"] == "smoke" and res["claims"], nb.stem
        assert (d / f"{nb.stem}.ipynb").exists() and (d / f"{nb.stem}.html").exists()
        for f in res["tables"] + res["figures"]:
            assert (d / f).exists()
    verdicts = ledger_verdicts(out)
    assert verdicts and all(v for v in verdicts.values())
    assert "Claims ledger" in (out / "README.md").read_text()


def test_failed_notebook_keeps_previous_report(smoke_reports, capsys):
    out, _ = smoke_reports
    nb = NOTEBOOKS[0].stem
    before = (out / nb / "results.json").read_bytes()
    rc = pipeline.main(["--profile", "smoke", "--reports", str(out), "--only", nb, "-p", "batch", "'two'"])
    assert rc == 1
    err = capsys.readouterr().err
    assert f"notebook {nb} failed in cell" in err and "batch: expected int" in err
    assert (out / nb / "results.json").read_bytes() == before
    assert not list(out.glob(".staging-*"))


def test_unknown_profile_and_notebook():
    with pytest.raises(ValueError, match="profile: unknown 'fast'"):
        pipeline.main(["--profile", "fast"])
    with pytest.raises(ValueError, match="only: no notebook '99'"):
        pipeline.main(["--only", "99"])
