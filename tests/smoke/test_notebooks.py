"""Every notebook: stored without outputs, has a `parameters` cell, runs end to end at `smoke`, shows its
figures inline, and records the values that do not depend on the profile."""
import re
import json
import shutil
from pathlib import Path

import nbformat
import pytest

from tokenprune.study import pipeline
from tokenprune.study.ledger import ledger_verdicts

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# the first test to use `smoke_reports` runs every notebook (about 90 s on an idle 2-core CPU)
pytestmark = pytest.mark.timeout(1500)


def test_there_are_notebooks():
    assert NOTEBOOKS


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_stored_without_outputs_and_parameterised(nb):
    cells = nbformat.read(nb, as_version=4).cells
    assert not any(c.get("outputs") for c in cells if c.cell_type == "code"), f"{nb.name} is stored with outputs"
    assert not any(c.get("execution_count") for c in cells if c.cell_type == "code")
    tagged = [c for c in cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1, f"{nb.name} needs exactly one cell tagged 'parameters'"
    assert "profile" in tagged[0].source and "overrides" in tagged[0].source


@pytest.mark.parametrize("nb", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebooks_are_thin(nb):
    """At most 450 code lines per notebook and 60 per cell (non-blank, non-comment), no function defined in a
    notebook that another notebook also defines."""
    sizes = [len([ln for ln in c.source.splitlines() if ln.strip() and not ln.strip().startswith("#")])
             for c in nbformat.read(nb, as_version=4).cells if c.cell_type == "code"]
    assert sum(sizes) <= 450 and max(sizes) <= 60, (nb.name, sum(sizes), max(sizes))


def test_no_helper_defined_in_two_notebooks():
    import re

    defined = {}
    for nb in NOTEBOOKS:
        src = "\n".join(c.source for c in nbformat.read(nb, as_version=4).cells if c.cell_type == "code")
        for name in re.findall(r"^def (\w+)\(", src, re.M):
            defined.setdefault(name, []).append(nb.stem)
    assert not {k: v for k, v in defined.items() if len(v) > 1}


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
        assert res["profile"] == "smoke", nb.stem
        if nb.stem == "00_proxy_calibration":  # no paper's claim: it chooses the proxy by its criteria
            assert "calibration.csv" in res["tables"] and set(res["values"]["chosen"]) == {"classification",
                                                                                          "fine-grained"}
        else:
            assert res["claims"], nb.stem
        assert (d / f"{nb.stem}.ipynb").exists() and (d / f"{nb.stem}.html").exists()
        for f in res["tables"] + res["figures"]:
            assert (d / f).exists()
    verdicts = ledger_verdicts(out)
    assert verdicts and all(v for v in verdicts.values())
    assert "Claims ledger" in (out / "README.md").read_text()


def _claims(out, nb):
    return {c["id"]: c for c in json.loads((out / nb / "results.json").read_text())["claims"]}


def test_smoke_records_the_deterministic_values(smoke_reports):
    """What the notebooks record and does not depend on the profile: token counts and MACs at the papers'
    scale (computed at DeiT's 224 px in every profile) and the printed Eq. 6 being identically zero."""
    out, _ = smoke_reports
    evit = _claims(out, "01_evit")
    assert evit["evit.tokens.deit_s.keep0.7.fuse_attention"]["our_value"] == "196 -> 139 -> 99 -> 71"
    assert evit["evit.tokens.deit_s.keep0.7.drop"]["our_value"] == "196 -> 138 -> 97 -> 68"
    assert evit["evit.macs.deit_s.keep0.7"]["our_value"] == pytest.approx(3.029, abs=5e-4)
    assert evit["evit.macs.deit_s.keep0.7"]["verdict"] == "reproduced"
    bat = _claims(out, "02_diversity_merging")
    assert bat["bat.macs.deit_s.keep0.5"]["our_value"] == pytest.approx(2.309, abs=5e-4)
    assert bat["bat.params.none_added"]["our_value"] == 22050664
    var = _claims(out, "03_variance_medad")
    assert abs(var["varmedad.obj1.eq6_zero"]["our_value"]) < 1e-6
    assert var["varmedad.obj6.overlap_tokens"]["our_value"] == 324


def test_executed_notebooks_show_their_figures_inline(smoke_reports):
    out, _ = smoke_reports
    for nb in NOTEBOOKS:
        res = json.loads((out / nb.stem / "results.json").read_text())
        cells = nbformat.read(out / nb.stem / f"{nb.stem}.ipynb", as_version=4).cells
        shown = sum("image/png" in o.get("data", {}) for c in cells if c.cell_type == "code" for o in c.outputs)
        assert shown >= len(res["figures"]), f"{nb.stem}: {shown} inline figures for {len(res['figures'])} saved"
        assert res["figures"], f"{nb.stem}: no figure saved"


def test_failed_notebook_keeps_previous_report(smoke_reports, tmp_path, capsys):
    """A notebook that fails mid-run leaves the previous report as it was and no staging folder."""
    out, _ = smoke_reports
    nb = NOTEBOOKS[0]
    broken = nbformat.read(nb, as_version=4)
    at = next(i for i, c in enumerate(broken.cells) if "parameters" in c.metadata.get("tags", [])) + 1
    broken.cells.insert(at, nbformat.v4.new_code_cell('raise RuntimeError("injected failure")'))
    folder = tmp_path / "notebooks"
    folder.mkdir()
    nbformat.write(broken, folder / nb.name)
    before = (out / nb.stem / "results.json").read_bytes()
    rc = pipeline.main(["--profile", "smoke", "--reports", str(out), "--notebooks", str(folder)])
    assert rc == 1
    err = capsys.readouterr().err
    assert nb.stem in err and "injected failure" in err  # the notebook named, the cell's own error passed on
    assert (out / nb.stem / "results.json").read_bytes() == before
    assert not list(out.glob(".staging-*"))


def test_bad_parameters_are_refused_before_any_run(smoke_reports):
    out, _ = smoke_reports
    nb = "01_evit"  # a notebook with a `batch` parameter
    before = (out / nb / "results.json").read_bytes()
    with pytest.raises(ValueError, match="keep_ratez"):
        pipeline.main(["--profile", "smoke", "--reports", str(out), "--only", nb, "-p", "keep_ratez", "0.7"])
    with pytest.raises(ValueError, match=r"batch\b"):
        pipeline.main(["--profile", "smoke", "--reports", str(out), "--only", nb, "-p", "batch", "'two'"])
    assert (out / nb / "results.json").read_bytes() == before


def test_unknown_profile_and_notebook():
    with pytest.raises(ValueError, match="profile(.|\n)*'fast'"):
        pipeline.main(["--profile", "fast"])
    with pytest.raises(ValueError, match="only(.|\n)*'99'"):
        pipeline.main(["--only", "99"])
