"""Runs at a profile other than default never write into the committed reports/ unless asked to, and a
ledger that mixes profiles says so."""
from tokenprune.study import report as R
from tokenprune.utils.environment import REPO_ROOT


def test_default_folder_per_profile():
    assert R.reports_dir_for("default") == REPO_ROOT / "reports"
    assert R.reports_dir_for("smoke") == REPO_ROOT / "runs" / "smoke"
    assert R.Report("01_evit", profile="smoke").out_dir == REPO_ROOT / "runs" / "smoke" / "01_evit"
    assert R.Report("01_evit", profile="default").out_dir == REPO_ROOT / "reports" / "01_evit"


def _write(tmp_path, name, profile):
    rep = R.Report(name, out_dir=tmp_path / name, profile=profile)
    rep.add_claim(id=f"{name}.c", paper="other", statement="s", source="t", verdict="reproduced")
    rep.write()


def test_ledger_says_when_profiles_are_mixed(tmp_path):
    _write(tmp_path, "01_a", "default")
    assert "Profiles mixed" not in R.build_ledger(tmp_path)
    _write(tmp_path, "02_b", "smoke")
    text = R.build_ledger(tmp_path)
    assert "**Profiles mixed in this ledger** (`default`: 01_a; `smoke`: 02_b)" in text


def test_failed_and_old_copies_are_ignored_by_git():
    ignored = (REPO_ROOT / ".gitignore").read_text()
    assert "/reports/.failed-*" in ignored and "/runs/" in ignored
