"""Notebook 03 at smoke files a claim for every declaration its profile runs, and nothing undeclared."""
import json
import sys
from pathlib import Path

import pytest

from tokenprune.study import pipeline

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "unit"))
from test_audit_varmedad import coverage  # noqa: E402

pytestmark = pytest.mark.timeout(900)


def test_smoke_claims_are_declared_and_every_declaration_is_filed(tmp_path):
    assert pipeline.main(["--profile", "smoke", "--only", "03", "--reports", str(tmp_path)]) == 0
    results = json.loads((tmp_path / "03_variance_medad" / "results.json").read_text())
    assert coverage(results["claims"], "smoke") == ([], [])
    assert all(len(c["why"]) <= 200 for c in results["claims"])
