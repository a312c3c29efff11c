"""Runs at a profile other than default never write into the committed reports/ unless asked to, and a
ledger that mixes profiles says so."""
from tokenprune.study import claims as C
from tokenprune.study import ledger as L
from tokenprune.study import report as R
from tokenprune.utils.environment import REPO_ROOT


def test_default_folder_per_profile():
    assert R.reports_dir_for("default") == REPO_ROOT / "reports"
    assert R.reports_dir_for("smoke") == REPO_ROOT / "runs" / "smoke"
    assert R.Report("01_evit", profile="smoke").out_dir == REPO_ROOT / "runs" / "smoke" / "01_evit"
    assert R.Report("01_evit", profile="default").out_dir == REPO_ROOT / "reports" / "01_evit"


def _write(tmp_path, name, profile):
    rep = R.Report(name, out_dir=tmp_path / name, profile=profile)
    rep.add_claim(C.Claim(id=f"{name}.c", paper="other", statement="s", quote='"q"', source="t", kind="paper claim",
                          setting="proxy", section="§1", verdict="reproduced", outcome="holds"))
    rep.write()


def _profile_lines(text):
    """The ledger's lines that name a profile together with the notebooks run at it."""
    return [line for line in text.splitlines() if "`default`" in line or "`smoke`" in line]


def test_ledger_says_when_profiles_are_mixed(tmp_path):
    _write(tmp_path, "01_a", "default")
    assert not _profile_lines(L.build_ledger(tmp_path))
    _write(tmp_path, "02_b", "smoke")
    lines = _profile_lines(L.build_ledger(tmp_path))
    assert any(all(word in line for word in ("`default`", "01_a", "`smoke`", "02_b")) for line in lines), lines


def test_failed_and_old_copies_are_ignored_by_git():
    ignored = (REPO_ROOT / ".gitignore").read_text()
    assert "/reports/.failed-*" in ignored and "/runs/" in ignored
