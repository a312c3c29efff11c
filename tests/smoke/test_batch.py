"""papermill batches: members into their own folders, a failed member neither stops
nor corrupts the others, a rerun skips what is done, shards partition the batch, bad parameters are refused
before any run."""
import json

import nbformat
import pytest
import yaml

from tokenprune.study import batch as B

pytestmark = pytest.mark.timeout(900)

TINY = '''
from tokenprune.study import report
rep = report.Report("99_tiny", out_dir=report_dir, profile=profile, params=dict(overrides))
x = overrides.get("x", 0)
if x < 0:
    raise ValueError("x must be >= 0")
from tokenprune.study.claims import Claim
rep.add_claim(Claim(id="tiny.x", paper="other", statement="x is even", quote="x is even", source="test",
                    kind="paper claim", setting="proxy", section="1", our_value=x,
                    verdict="reproduced" if x % 2 == 0 else "not reproduced",
                    outcome="holds" if x % 2 == 0 else "fails", why="" if x % 2 == 0 else "odd"))
rep.write()
'''


@pytest.fixture()
def tiny(tmp_path):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    nb = nbformat.v4.new_notebook()
    params = nbformat.v4.new_code_cell('profile = "smoke"\noverrides = {}\nreport_dir = None')
    params.metadata["tags"] = ["parameters"]
    nb.cells = [params, nbformat.v4.new_code_cell(TINY)]
    nb.metadata["kernelspec"] = {"name": "tokenprune", "display_name": "Python (tokenprune)", "language": "python"}
    nbformat.write(nb, folder / "99_tiny.ipynb")
    spec = tmp_path / "sweep.yaml"
    spec.write_text(yaml.safe_dump({"notebook": "99_tiny", "profile": "smoke", "members": [{"x": -1}],
                                    "grid": {"x": [2, 3]}}))
    return folder, spec


def test_batch_runs_members_apart_and_skips_done(tiny, tmp_path, capsys):
    folder, spec = tiny
    members = B.members_of(B.load_batch(spec), folder)
    assert len(members) == 3 and len({m.id for m in members}) == 3
    out = tmp_path / "out"
    rc = B.main([str(spec), "--out", str(out), "--notebooks", str(folder), "--jobs", "2"])
    assert rc == 1  # the x = -1 member failed ...
    index = {json.dumps(r["params"]): r for r in json.loads((out / "index.json").read_text())["members"]}
    assert index['{"x": -1}']["status"] == "failed"
    for x, verdict in ((2, "reproduced"), (3, "not reproduced")):  # ... and the others ran
        row = index[json.dumps({"x": x})]
        assert row["status"] == "done" and row["verdicts"][verdict] == 1
        res = json.loads((out / row["folder"] / "results.json").read_text())
        assert res["claims"][0]["our_value"] == x
    assert "| member | parameters | status |" in (out / "index.md").read_text()
    capsys.readouterr()
    B.main([str(spec), "--out", str(out), "--notebooks", str(folder)])
    assert capsys.readouterr().out.count(": ok in") == 0  # the rerun skips the done members
    statuses = {r["status"] for r in json.loads((out / "index.json").read_text())["members"]}
    assert "skipped (done)" in statuses


def test_shards_partition_the_batch(tiny):
    folder, spec = tiny
    members = B.members_of(B.load_batch(spec), folder)
    parts = [B.shard(members, f"{i}/3") for i in range(3)]
    assert sorted(m.id for p in parts for m in p) == sorted(m.id for m in members)
    with pytest.raises(ValueError, match="shard"):
        B.shard(members, "3/3")


def test_bad_study_parameters_are_refused_before_any_run(tmp_path):
    from tokenprune.utils.environment import REPO_ROOT

    spec = tmp_path / "bad.yaml"
    spec.write_text(yaml.safe_dump({"notebook": "03", "profile": "smoke", "members": [{"no_such_setting": 1}]}))
    with pytest.raises(ValueError, match="no_such_setting"):
        B.members_of(B.load_batch(spec), REPO_ROOT / "notebooks")
    spec.write_text(yaml.safe_dump({"notebook": "03", "profile": "smoke", "runs": []}))
    with pytest.raises(ValueError, match="runs"):
        B.load_batch(spec)
