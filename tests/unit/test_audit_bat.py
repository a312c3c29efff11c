"""The BAT audit module: its profile table, parameters and claim declarations (no model runs)."""
import pandas as pd
import pytest

from tokenprune.study import params
from tokenprune.study.audits import bat
from tokenprune.study.paper_numbers import BAT
from tokenprune.study.report import Report


@pytest.mark.parametrize("profile", ["smoke", "default", "paper"])
def test_every_parameter_is_documented_and_setup_accepts_the_profile(profile):
    assert set(bat.PROFILES[profile]) == set(bat.PARAMETERS)
    cfg = params.setup("02_diversity_merging", profile)
    assert cfg.profile == profile and cfg.seed == 0


def test_overrides_are_checked():
    assert params.setup("02_diversity_merging", "smoke", {"k": 3}).k == 3
    with pytest.raises(ValueError, match="merge_weight"):
        params.setup("02_diversity_merging", "smoke", {"merge_weight": "max"})


def test_paper_gap_and_keep_rates_come_from_paper_numbers():
    assert bat.PAPER_KEEP == list(BAT["deit_small_patch16_224"]["keep"])
    assert bat.paper_gap(0.7) == 0.1 and bat.paper_gap(0.5) == 0.5 and bat.paper_gap(0.2) is None


def test_top1_and_skipped_finetune_claims_are_not_testable():
    rep = Report("t", profile="smoke")
    bat.file_top1_claims(rep)
    cfg = params.setup("02_diversity_merging", "smoke", {"finetune_steps": 0})
    bat.file_finetune_claims(rep, pd.DataFrame(), {}, cfg, "m")
    assert len(rep.claims) == 8 and {c.verdict for c in rep.claims} == {"not testable here"}
    assert rep.claims[-1].why == "finetune_steps = 0"


def test_finetune_claim_needs_three_seeds():
    rep = Report("t", profile="smoke")
    cfg = params.setup("02_diversity_merging", "smoke")
    row = {"keep_rate": 0.5, "bat_mean": 0.8, "bat_std": 0.01, "evit_mean": 0.7, "evit_std": 0.01, "diff_mean": 0.1,
           "diff_std": 0.01, "diff_low": 0.05, "diff_high": 0.15}
    bat.file_finetune_claims(rep, pd.DataFrame([{**row, "seeds": 3}]), {0.5: [0.1, 0.1, 0.1]}, cfg, "m")
    assert rep.claims[0].verdict == "reproduced"
    rep = Report("t", profile="smoke")
    bat.file_finetune_claims(rep, pd.DataFrame([{**row, "seeds": 2}]), {0.5: [0.1, 0.1]}, cfg, "m")
    assert rep.claims[0].verdict == "inconclusive" and "at least 3 seeds" in rep.claims[0].why
