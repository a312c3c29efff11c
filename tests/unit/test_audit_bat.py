"""The BAT audit module: its profile table, parameters and claim declarations (no model runs)."""
import pandas as pd
import pytest
import torch

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
    assert len(rep.claims) == 9 and {c.verdict for c in rep.claims} == {"not testable here"}
    assert all(c.why.startswith("pending issue 14 (real training): ") for c in rep.claims)
    assert "finetune_steps = 0" in rep.claims[-1].why


def test_finetune_claim_is_never_decided_on_the_placeholder_run():
    """Issue 13: a fine-tuning that does not move the model like the paper's decides nothing, whatever it shows."""
    cfg = params.setup("02_diversity_merging", "smoke")
    row = {"keep_rate": 0.5, "bat_mean": 0.8, "bat_std": 0.01, "evit_mean": 0.7, "evit_std": 0.01, "diff_mean": 0.1,
           "diff_std": 0.01, "diff_low": 0.05, "diff_high": 0.15, "seeds": 3}
    rep = Report("t", profile="smoke")
    bat.file_finetune_claims(rep, pd.DataFrame([row]), {0.5: [0.1, 0.1, 0.1]}, cfg, "m")
    c = rep.claims[0]
    assert c.verdict == "not testable here" and c.why.startswith("pending issue 14 (real training): ")
    assert "+10.00 pp" in c.why and "decides nothing" in c.why


# --- bat.macs.deit_s.counts_clustering: decided against the spread between MAC counters ---------------

@pytest.mark.parametrize("rows,verdict", [
    # the clustering moves 1.64 -> 1.66 (printed 1.7): discriminates, follows the total
    ([(0.2, 1.7, 1.640, 1.660, 0.002)], "reproduced"),
    # printed 1.6: follows the transformer-only count
    ([(0.2, 1.6, 1.640, 1.660, 0.002)], "not reproduced"),
    # a 2 % spread between counters swallows the difference: nothing discriminates
    ([(0.2, 1.6, 1.640, 1.660, 0.02)], "inconclusive"),
    # both round to the printed figure: the column cannot tell
    ([(0.7, 3.0, 3.029, 3.032, 0.002)], "inconclusive"),
    # mixed evidence
    ([(0.2, 1.6, 1.640, 1.660, 0.002), (0.4, 2.1, 2.040, 2.060, 0.002)], "inconclusive"),
])
def test_counts_clustering_decision(rows, verdict):
    decision, disc, support, against = bat.counts_clustering_decision(rows)
    assert decision.verdict == verdict
    assert "discriminates" in decision.rule


def _fake_macs(plus_offset=0.08, clustering=0.002, spread=0.002):
    """A mac_table-shaped frame: EViT (fusion) at the printed column, drop a bit lower, BAT's budget variant =
    EViT + ``clustering`` GMACs of operator, the +clusters variant ``plus_offset`` above; DeiT-T 1.25 / 0.82."""
    rows = []
    for r in bat.PAPER_KEEP + [0.9, 0.8]:
        g = BAT["deit_small_patch16_224"]["keep"].get(r, {}).get("gmacs", 3.5) + 0.01
        for red, model, extra in [("fuse_attention", g, 0.0), ("drop", g - 0.03, 0.0),
                                  ("merge_dpcknn_budget", g, clustering), ("merge_dpcknn", g + plus_offset, clustering)]:
            rows.append({"model": bat.DEIT_S, "method": red, "reducer": red, "keep_rate": r, "tokens": "196 -> x",
                         "gmacs_model": model, "gmacs_reduction": extra, "gmacs_total": model + extra,
                         "reduction_share": extra / (model + extra), "counter_spread": spread})
    rows.append({"model": bat.DEIT_T, "method": "unpruned", "reducer": None, "keep_rate": 1.0, "gmacs_model": 1.254})
    rows.append({"model": bat.DEIT_T, "method": "budget", "reducer": "merge_dpcknn_budget", "keep_rate": 0.7,
                 "gmacs_model": 0.821})
    return pd.DataFrame(rows)


def test_mac_claims_name_their_variant_and_the_plus_clusters_variant_can_go_both_ways():
    for offset, verdict in [(0.08, "not reproduced"), (0.0, "reproduced")]:
        macs = _fake_macs(plus_offset=offset)
        rep = Report("t", profile="smoke")
        bat.file_mac_claims(rep, macs, bat.mac_column_match(macs), 4)
        claims = {c.id: c for c in rep.claims}
        assert claims["bat.macs.deit_s.plus_clusters_variant"].verdict == verdict
        assert "BAT inside EViT's budget" in claims["bat.macs.deit_s.keep0.7"].statement
        assert "chosen because it reproduces the printed column" in claims["bat.macs.deit_s.keep0.7"].why
    # the clustering too small to discriminate within the counters' spread: inconclusive
    macs = _fake_macs(clustering=0.002)
    rep = Report("t", profile="smoke")
    bat.file_mac_claims(rep, macs, bat.mac_column_match(macs), 4)
    assert {c.id: c for c in rep.claims}["bat.macs.deit_s.counts_clustering"].verdict == "inconclusive"
    macs = _fake_macs(clustering=0.06, spread=0.001)  # moves every figure by 0.06: discriminates, against
    rep = Report("t", profile="smoke")
    bat.file_mac_claims(rep, macs, bat.mac_column_match(macs), 4)
    assert {c.id: c for c in rep.claims}["bat.macs.deit_s.counts_clustering"].verdict == "not reproduced"


def test_layer_norm_macs_is_fvcores_convention_measured():
    import timm

    m = timm.create_model("deit_tiny_patch16_224").eval()
    from tokenprune.measure import macs as flops

    c = flops.analytic_macs(m)
    assert bat.fvcore_style_macs(m) == c.total + bat.layer_norm_macs(c, m.embed_dim)
    assert bat.layer_norm_macs(c, m.embed_dim) == 5 * 192 * 197 * 25


# --- bat.secondary.loss_objective: a transcription check ----------------------------------------------

def test_loss_claim_is_a_transcription_check(monkeypatch):
    text = "The overall objective function combines ...: $L = \\alpha L_{imp} + \\beta L_{div}$, where ..."
    assert bat.summary_states(text, BAT["secondary_summary_loss"]) is True
    rep = Report("t", profile="smoke")
    bat.file_loss_claim(rep, summary_text=text)
    assert rep.claims[0].verdict == "not reproduced" and "differs from" in rep.claims[0].why
    rep = Report("t", profile="smoke")
    bat.file_loss_claim(rep, summary_text="a summary that states no objective")
    assert rep.claims[0].verdict == "inconclusive" and "premise failed" in rep.claims[0].why
    rep = Report("t", profile="smoke")
    bat.file_loss_claim(rep, summary_text=None)  # the file is not on this machine: the quoted text is used
    assert rep.claims[0].verdict == "not reproduced" and "not on this machine" in rep.claims[0].why
    monkeypatch.setitem(BAT, "secondary_summary_loss", BAT["training_loss"])  # a summary that got it right
    rep = Report("t", profile="smoke")
    bat.file_loss_claim(rep, summary_text=BAT["training_loss"])
    assert rep.claims[0].verdict == "reproduced"


# --- bat.speed.clustering_cost: the margin the printed column can hide --------------------------------

def _overhead(keep_rate, est, lo, hi, passes=5):
    from tokenprune.measure import throughput as bench

    row = {"keep_rate": keep_rate, "variant": "BAT in EViT's budget", "throughput_vs_evit": 0.98, "throughput_low": 0.97,
           "throughput_high": 0.99, "operator_time_share": 0.1, "evit_operator_time_share": 0.05,
           "extra_share": est / 100, "extra_share_low": lo / 100, "extra_share_high": hi / 100, "passes": passes}
    row.update({k: 0.0 for k in bench.LOAD_COLUMNS})
    row.update({"under_load": False, "load_warnings": ""})
    return pd.DataFrame([row])


@pytest.mark.parametrize("args,verdict", [
    ((0.3, 3.7, 3.5, 3.9), "not reproduced"),   # the issue's +3.7 % [3.5, 3.9] at 1.8 GMACs (margin 2.78 %)
    ((0.7, 1.7, 1.4, 2.0), "inconclusive"),      # +1.7 % [1.4, 2.0] straddles 1.67 %
    ((0.7, 0.5, 0.3, 0.6), "reproduced"),
    ((0.7, 0.5, 0.3, 0.6, 2), "inconclusive"),   # too few timed passes
    ((0.9, 0.5, 0.3, 0.6), "inconclusive"),      # no printed figure
])
def test_speed_claim_margin(args, verdict):
    assert bat.speed_margin(0.7) == pytest.approx(5 / 3) and bat.speed_margin(0.9) is None
    rep = Report("t", profile="smoke")
    bat.file_speed_claims(rep, _overhead(*args), "cpu", "cpu", "deit", 1)
    assert rep.claims[0].verdict == verdict and rep.claims[0].timed


# --- protocol, unsupported and summary-flaw claims -----------------------------------------------------

def test_protocol_claims_from_the_logs():
    rep = Report("t", profile="smoke")
    proto = bat.protocols()
    bat.file_protocol_claims(rep, proto)
    v = {c.id: c.verdict for c in rep.claims}
    assert v == {"bat.protocol.vs_evit.keep0.7": "reproduced", "bat.protocol.vs_evit.keep0.6": "not reproduced",
                 "bat.protocol.vs_evit.keep0.5": "not reproduced",
                 "bat.protocol.one_protocol_across_rates": "not reproduced"}
    same = proto.assign(bat_start="from scratch", bat_epochs=300)
    rep = Report("t", profile="smoke")
    bat.file_protocol_claims(rep, same)
    assert {c.verdict for c in rep.claims} == {"reproduced"}


def test_unsupported_and_lv_vit_claims_are_not_testable():
    rep = Report("t", profile="smoke")
    bat.file_unsupported_claims(rep)
    bat.file_lv_vit_mac_claim(rep)
    assert {c.verdict for c in rep.claims} == {"not testable here"}
    assert rep.claims[0].why.startswith("pending issue 14 (real training): ")
    assert "no LV-ViT" in rep.claims[-1].why


@pytest.mark.parametrize("overlap,verdict", [
    ({"images": 8, "kept": 5, "mean_jaccard": 1.0, "all_identical": True, "distinct_sets": 1}, "reproduced"),
    ({"images": 8, "kept": 5, "mean_jaccard": 0.4, "all_identical": False, "distinct_sets": 8}, "not reproduced"),
    ({"images": 1, "kept": 5, "mean_jaccard": float("nan"), "all_identical": True, "distinct_sets": 1}, "inconclusive"),
])
def test_static_scores_claim(overlap, verdict):
    rep = Report("t", profile="smoke")
    bat.file_static_scores_claim(rep, overlap, 0.5, "m")
    assert rep.claims[0].verdict == verdict


def test_kept_set_overlap_sees_input_dependence():
    from timm.models.vision_transformer import VisionTransformer

    from tokenprune.measure.evaluation import PruneConfig

    m = VisionTransformer(img_size=32, patch_size=4, num_classes=5, embed_dim=32, depth=4, num_heads=2).eval()
    cfg = PruneConfig(reducer="merge_dpcknn", locations=(2,))
    x = torch.randn(6, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    ov = bat.kept_set_overlap(m, x, cfg, 0.5, 6)
    assert ov["images"] == 6 and ov["kept"] == 32 and not ov["all_identical"] and 0 < ov["mean_jaccard"] < 1
    same = bat.kept_set_overlap(m, x[:1].expand(4, -1, -1, -1).contiguous(), cfg, 0.5, 4)
    assert same["all_identical"] and same["mean_jaccard"] == 1.0


@pytest.mark.parametrize("gmacs,verdict", [(2.706, "reproduced"), (2.78, "not reproduced")])
def test_tome_claims(gmacs, verdict):
    rep = Report("t", profile="smoke")
    df = pd.DataFrame([{"r": 13, "tokens": "196 -> 183", "gmacs_model": gmacs - 0.003, "gmacs_matching": 0.003,
                        "gmacs_total": gmacs, "gmacs_fvcore_style": gmacs + 0.005, "paper_gflops": 2.7}])
    bat.file_tome_claims(rep, df, 4.599)
    assert rep.claims[0].verdict == verdict and rep.claims[0].paper == "other"


def test_tome_schedule_on_deit_s_is_tomes_published_macs():
    import timm

    tm = bat.tome_mac_table(timm.create_model("deit_small_patch16_224").eval(), measure_macs=False)
    assert tm.tokens.tolist()[1].endswith("-> 53 -> 40")
    assert [round(v, 1) for v in tm.gmacs_total] == [3.4, 2.7, 2.3]
