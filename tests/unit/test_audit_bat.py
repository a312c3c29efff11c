"""The BAT audit module: its profile table, parameters and claim declarations (no model runs)."""
import numpy as np
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


def _ft_row(diff=0.01, low=0.005, high=0.015, seeds=3, bat_gain=(0.03, 0.02, 0.04), evit_gain=(0.03, 0.02, 0.04)):
    row = {"keep_rate": 0.5, "bat_mean": 0.8, "bat_std": 0.01, "evit_mean": 0.79, "evit_std": 0.01, "diff_mean": diff,
           "diff_std": 0.001, "diff_low": low, "diff_high": high, "seeds": seeds}
    for k, (g, lo, hi) in (("bat", bat_gain), ("evit", evit_gain)):
        row.update({f"{k}_off_shelf": 0.7, f"{k}_gain": g, f"{k}_gain_low": lo, f"{k}_gain_high": hi})
    return row


@pytest.mark.parametrize("row,per_seed,verdict,why", [
    # moved, interval above 0: reproduced
    (_ft_row(), [0.009, 0.010, 0.011], "reproduced", ""),
    # moved, interval below 0: not reproduced
    (_ft_row(-0.01, -0.015, -0.005), [-0.009, -0.010, -0.011], "not reproduced", "the opposite holds"),
    # the fine-tuning did not move EViT (issue 14: no verdict rests on it), whatever the gap shows
    (_ft_row(evit_gain=(0.001, -0.004, 0.006)), [0.009, 0.010, 0.011], "inconclusive",
     "premise failed: the fine-tuning moved the model"),
    # moved, within noise, the seeds' spread small enough for 5 seeds: inconclusive (the MDE says by how much)
    (_ft_row(0.001, -0.002, 0.004), [0.000, 0.001, 0.002], "inconclusive", "contains 0"),
    # moved, within noise, seeds spread by 3 points: even 5 seeds cannot detect 0.5 points
    (_ft_row(0.01, -0.06, 0.08), [-0.02, 0.01, 0.04], "not testable here", "the MDE at 5 seeds"),
    # one seed: no seed-level interval, no design
    (_ft_row(0.01, float("nan"), float("nan"), seeds=1), [0.01], "inconclusive", "premise failed: at least 2 seeds"),
])
def test_finetune_decision_reaches_every_verdict(row, per_seed, verdict, why):
    decision, record = bat.finetune_decision(pd.Series(row), per_seed, 0.5)
    assert decision.verdict == verdict and why in decision.why
    assert bat.MOVED_PREMISE in decision.rule
    if row["seeds"] >= 2:
        assert record["unit"] == "seeds" and record["n_max"] == 5 and record["effect_in_dispute"] == 0.5
    else:
        assert record is None


def test_finetune_claim_is_decided_on_the_runs_with_its_design():
    cfg = params.setup("02_diversity_merging", "smoke")
    rep = Report("t", profile="smoke")
    bat.file_finetune_claims(rep, pd.DataFrame([_ft_row(evit_gain=(0.0, -0.01, 0.01))]), {0.5: [0.009, 0.01, 0.011]},
                             cfg, "m")
    c = rep.claims[0]
    assert c.id == "bat.finetuned.vs_evit.keep0.5" and c.verdict == "inconclusive" and "premise failed" in c.why
    assert c.design["unit"] == "seeds" and c.design["effect_in_dispute"] == bat.paper_gap(0.5)
    assert "+0.90, +1.00, +1.10 pp" in c.why


# --- effects in dispute, from paper_numbers --------------------------------------------------------------

def test_effects_in_dispute_come_from_the_printed_numbers():
    assert bat.smallest_printed_gap() == 0.1
    assert bat.paper_gap_slope() == pytest.approx(-2.0)  # gaps +0.1 / +0.4 / +0.5 at 0.7 / 0.6 / 0.5
    assert bat.effect_vs_evit(0.5)[0] == 0.5 and bat.effect_vs_evit(0.7)[0] == 0.1
    assert bat.effect_vs_evit(0.3)[0] == 0.1 and "printed no row" in bat.effect_vs_evit(0.3)[1]
    assert bat.effect_ablation("both_vs_importance")[0] == 0.5 and bat.effect_ablation("pairing")[0] == 0.1


# --- the pairwise accuracy claims: a direction gated by its design ---------------------------------------

def _correct(n, p_a, p_b, p_disc, seed=0):
    """0/1 correctness of two configurations on ``n`` images: ``p_disc`` of them discordant, split so that A is
    right on a share ``(1 + (p_a - p_b) / p_disc) / 2`` of those."""
    rng = np.random.default_rng(seed)
    b = (rng.random(n) < p_b).astype(float)
    a = b.copy()
    disc = rng.random(n) < p_disc
    a_wins = rng.random(n) < (1 + (p_a - p_b) / p_disc) / 2
    a[disc] = a_wins[disc].astype(float)
    b[disc] = 1 - a[disc]
    return a, b


@pytest.mark.parametrize("args,verdict,why", [
    ((10000, 0.60, 0.55, 0.2), "reproduced", ""),
    ((10000, 0.55, 0.60, 0.2), "not reproduced", "the opposite holds"),
    # a 0.5-point effect, 2 % discordant: MDE at 10,000 about 0.4 points; within noise at 1,000 (underpowered)
    ((1000, 0.600, 0.600, 0.02), "inconclusive", "underpowered"),
    # a 0.1-point effect with 20 % discordant images: MDE at 10,000 about 1.25 points > 2 x 0.1
    ((1000, 0.600, 0.600, 0.2), "not testable here", "needs about"),
])
def test_comparison_decision_reaches_every_verdict(args, verdict, why):
    n, pa, pb, pd_ = args
    a, b = _correct(n, pa, pb, pd_)
    effect = 0.5 if verdict == "inconclusive" else 0.1
    decision, pc, det = bat.comparison_decision(a, b, effect, 10000, "the full test split", seed=0)
    assert decision.verdict == verdict and why in decision.why
    rec = det.record()
    assert rec["n"] == n and rec["n_max"] == 10000 and rec["effect_in_dispute"] == effect and pc["n"] == n
    assert rec["sd_source"].startswith(f"sd of the {n} paired per-image differences")


def test_full_split_runs_only_the_pairs_it_can_decide():
    from timm.models.vision_transformer import VisionTransformer

    from tokenprune.measure.evaluation import Predictions
    from tokenprune.core.config import PruneConfig

    # 2 % discordant: MDE at 10,000 images about 0.4 points, within 2 x 0.5 but not 2 x 0.1
    a, b = _correct(1000, 0.6, 0.6, 0.02)
    assert bat.full_split_pays(a, b, 0.5, 10000) and not bat.full_split_pays(a, b, 0.1, 10000)
    # the rule ignores the mean: a large difference with the same spread pays the same
    a2, b2 = _correct(1000, 0.61, 0.6, 0.02)
    assert bat.full_split_pays(a2, b2, 0.5, 10000)

    def pr(x, y):
        return Predictions(torch.stack([torch.from_numpy(x), torch.from_numpy(1 - x)], 1).float(),
                           torch.zeros(len(x), dtype=torch.long))

    preds = {"A @ 0.5": pr(a, b), "B @ 0.5": pr(b, a), "C @ 0.5": pr(*_correct(1000, 0.6, 0.6, 0.2)[::-1])}
    preds["D @ 0.5"] = pr(*_correct(1000, 0.6, 0.6, 0.2))
    m = VisionTransformer(img_size=32, patch_size=8, num_classes=3, embed_dim=32, depth=4, num_heads=2).eval()
    configs = [PruneConfig(reducer="fuse_attention", keep_rate=0.5, locations=(2,), name=f"{n} @ 0.5")
               for n in ("A", "B", "C", "D")]
    # a full split of 4,000 images: MDE about 0.75 points for A - B (<= 2 x 0.5), about 2 for C - D (> 2 x 0.1)
    x, y = torch.randn(4000, 3, 32, 32), torch.zeros(4000, dtype=torch.long)
    out = bat.decisive_predictions(m, x, y, configs, preds, [("A @ 0.5", "B @ 0.5", 0.5), ("C @ 0.5", "D @ 0.5", 0.1)],
                                   500, "fp32", 0)
    assert set(out) == {"A @ 0.5", "B @ 0.5"} and len(out["A @ 0.5"].labels) == 4000


def test_trend_design_is_the_slope_contrasts():
    from tokenprune.measure.evaluation import Predictions
    from tokenprune.measure.trend import trend_contrast

    rng = np.random.default_rng(0)
    labels = torch.zeros(400, dtype=torch.long)
    preds, diffs = {}, []
    for r in (0.7, 0.5, 0.3):
        for m in ("BAT", "EViT (fusion)"):
            ok = torch.from_numpy(rng.random(400) < 0.6)
            logits = torch.stack([ok.float(), (~ok).float()], 1)  # argmax 0 (the label) where correct
            preds[f"{m} @ {r:g}"] = Predictions(logits, labels)
        diffs.append(preds[f"BAT @ {r:g}"].correct.astype(float) - preds[f"EViT (fusion) @ {r:g}"].correct.astype(float))
    d = bat.trend_design(preds, [0.7, 0.5, 0.3], 10000, "the full test split")
    t = trend_contrast(np.stack(diffs), [0.7, 0.5, 0.3])
    assert d.n == 400 and d.n_max == 10000
    # the slope is the mean of the contrasts, so their sd / sqrt(n) is its standard error (points per unit)
    assert d.sd / np.sqrt(400) == pytest.approx(100 * (t.high - t.low) / (2 * 1.96), rel=0.15)


def test_proxy_and_ablation_claims_carry_designs():
    from tokenprune.measure.evaluation import Predictions
    from tokenprune.measure.trend import trend_contrast

    rng = np.random.default_rng(1)
    labels = torch.zeros(300, dtype=torch.long)

    def pr(p):
        ok = torch.from_numpy(rng.random(300) < p)
        return Predictions(torch.stack([ok.float(), (~ok).float()], 1), labels)

    keep = [0.7, 0.5, 0.3]
    preds = {f"{m} @ {r:g}": pr(0.6) for r in keep for m in ("BAT", "EViT (fusion)")}
    div = {k: {"cosine_distance": rng.random(32), "tokens": np.full(32, 20.0)} for k in preds}
    gaps = pd.DataFrame([{"keep_rate": r, "cosdist_diff": 0.01, "cosdist_diff_low": 0.0, "cosdist_diff_high": 0.02}
                         for r in keep])
    trend = trend_contrast(np.stack([preds[f"BAT @ {r:g}"].correct.astype(float)
                                     - preds[f"EViT (fusion) @ {r:g}"].correct.astype(float) for r in keep]), keep)
    rep = Report("t", profile="smoke")
    full = {k: preds[k] for k in ("BAT @ 0.5", "EViT (fusion) @ 0.5")}  # as if only keep 0.5 ran again
    bat.file_proxy_claims(rep, gaps, trend, preds, div, full, keep, "m", 32, 10, 10000, "the full test split", 0)
    abl = {f"{n} @ 0.3": pr(0.6) for n in ("both: BAT", "importance only: EViT (fusion)",
                                          "diversity only: DPC-KNN of all tokens", "both + pairing 0.25")}
    assert {x for a, b, _ in bat.ablation_pairs(0.3) for x in (a, b)} == set(abl)
    bat.file_ablation_claims(rep, abl, {}, 0.3, 10000, "the full test split", 0)
    c = {x.id: x for x in rep.claims}
    assert set(c) == {"bat.proxy.gap_grows_at_low_keep", "bat.proxy.diversity.keep0.3", "bat.proxy.diversity.keep0.5",
                      "bat.proxy.vs_evit.keep0.7", "bat.proxy.vs_evit.keep0.5", "bat.ablation.both_vs_importance.keep0.3",
                      "bat.ablation.both_vs_diversity.keep0.3", "bat.ablation.pairing.keep0.3"}
    assert all(x.design is not None for x in c.values())
    assert c["bat.proxy.gap_grows_at_low_keep"].design["effect_in_dispute"] == pytest.approx(2.0)
    assert c["bat.proxy.vs_evit.keep0.5"].design["effect_in_dispute"] == 0.5
    assert "effect_in_dispute" not in c["bat.proxy.diversity.keep0.5"].design  # the paper prints no diversity
    # independent 60 % models on 300 images: a 0.1-point effect is out of reach even at 10,000 images
    assert c["bat.proxy.vs_evit.keep0.7"].verdict == "not testable here"
    assert "the sweep's images" in c["bat.proxy.vs_evit.keep0.7"].why
    assert "the full test split (its design" in c["bat.proxy.vs_evit.keep0.5"].why
    assert c["bat.proxy.vs_evit.keep0.7"].design["mde_at_max"] > 2 * 0.1


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

    from tokenprune.core.config import PruneConfig

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
