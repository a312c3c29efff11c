"""Notebook 02 (BAT): its settings, its declared claims and the rules and filings behind them (no model runs, but
one smoke run of the notebook that checks every filed claim against the declarations)."""
import json
import re
import shutil

import numpy as np
import pandas as pd
import pytest
import torch

from tokenprune.study import params
from tokenprune.study.proxy import chosen
from tokenprune.study.bat import ablations, claims, comparisons, effects, finetunes, macs, proxy_scale, settings
from tokenprune.study.bat import sources, speed
from tokenprune.study.claims import KINDS, SETTINGS
from tokenprune.study.paper_numbers import BAT
from tokenprune.study.proxy.audit_model import MOVED
from tokenprune.study.report import Report
from tokenprune.study.verdicts import Direction, Premise

DEIT_S = "deit_small_patch16_224"


def _report(proxy_holds=True):
    """A report with the proxy's premises registered (as the notebook does at its start); ``proxy_holds`` False: the
    proxy is notebook 00's choice but misses its bar (as a smoke model does)."""
    rep = Report("t", profile="smoke")
    rep.add_premise(Premise(chosen.PROXY_CHOSEN, True, "test"))
    rep.add_premise(Premise(chosen.PROXY_BAR, proxy_holds, "test"))
    return rep


@pytest.mark.parametrize("profile", ["smoke", "default", "paper"])
def test_every_parameter_is_documented_and_setup_accepts_the_profile(profile):
    assert set(settings.PROFILES[profile]) == set(settings.PARAMETERS)
    cfg = params.setup("02_diversity_merging", profile)
    assert cfg.profile == profile and cfg.seed == 0


def test_overrides_are_checked():
    assert params.setup("02_diversity_merging", "smoke", {"k": 3}).k == 3
    with pytest.raises(ValueError, match="merge_weight"):
        params.setup("02_diversity_merging", "smoke", {"merge_weight": "max"})


# --- the declarations ------------------------------------------------------------------------------------

def test_the_proxy_model_choices_follow_the_audit_model(monkeypatch):
    import importlib

    choices = settings.PROFILES["choices"]["proxy_model"]
    assert {chosen.AUDIT_MODEL, f"{chosen.AUDIT_MODEL}_smoke", chosen.STAND_IN} <= set(choices)
    monkeypatch.setattr(chosen, "AUDIT_MODEL", "s14d_fmnist112_full")   # notebook 00 chose a proxy
    try:
        fresh = importlib.reload(settings)
        assert {"s14d_fmnist112_full", "s14d_fmnist112_full_smoke", chosen.STAND_IN,
                f"{chosen.STAND_IN}_smoke"} <= set(fresh.PROFILES["choices"]["proxy_model"])
        assert params.setup("02_diversity_merging", "smoke").proxy_model == "s14d_fmnist112_full_smoke"
        assert params.setup("02_diversity_merging", "default").proxy_model == "s14d_fmnist112_full"
    finally:
        monkeypatch.undo()
        importlib.reload(settings)


def test_every_declaration_is_complete_and_of_bat():
    assert claims.CLAIMS.paper == "bat" and len(claims.CLAIMS) >= 30
    for d in claims.CLAIMS.values():
        assert d.paper == "bat" and d.kind in KINDS and d.setting in SETTINGS
        assert d.quote.startswith('"') or d.quote == "none: our hypothesis"
        assert d.section in {"§2", "§3", "§4", "§5", "§6", "§7"}
        assert d.rule is not None or d.would_decide  # what nothing here decides says what would


def test_kinds_and_readings_of_the_rule():
    c = claims.CLAIMS
    assert {c["bat.baseline.tome.deit_s.r{r}"].kind, c["bat.macs.deit_s.keep{keep:g}"].kind,
            c["bat.macs.deit_t.baseline"].kind} == {"consistency check"}
    # the summary's flaws are reviewer objections: the clustering-cost rule checks BAT's side (holds: rejected)
    assert c["bat.speed.clustering_cost.keep{keep:g}"].on_rule_holds == "rejected"
    assert c["bat.secondary.flaw_static_scores"].on_rule_holds == "upheld"
    assert c["bat.secondary.flaw_latency_vs_dynamicvit"].kind == "reviewer objection"
    assert c["bat.secondary.loss_objective"].kind == "transcription"
    assert c["bat.proxy.vs_evit.keep0.7"].effect == 0.1 and c["bat.proxy.vs_evit.keep0.5"].effect == 0.5
    assert c["bat.proxy.gap_grows_at_low_keep"].effect == pytest.approx(2.0)
    assert c["bat.finetuned.vs_evit.keep{keep:g}"].premises == (claims.TWO_SEEDS, MOVED, chosen.PROXY_BAR,
                                                                chosen.PROXY_CHOSEN)


def _smoke_run(tmp_path):
    from tokenprune.study import pipeline
    from tokenprune.utils.environment import REPO_ROOT

    shutil.copytree(REPO_ROOT / "reports" / "00_proxy_calibration", tmp_path / "00_proxy_calibration")
    assert pipeline.main(["--profile", "smoke", "--only", "02", "--reports", str(tmp_path)]) == 0
    return json.loads((tmp_path / "02_diversity_merging" / "results.json").read_text())["claims"]


#: declarations the smoke profile does not file: the paper-scale runs (paper profile only) and BAT vs EViT at 0.5
#: (smoke's keep rates are 0.7 and 0.3)
NOT_RUN_AT_SMOKE = {f"bat.paper_scale.top1.deit_s.keep{r:g}" for r in settings.PAPER_KEEP} | {
    "bat.proxy.vs_evit.keep0.5"}


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_every_filed_claim_is_declared_and_every_declaration_filed_at_smoke(tmp_path):
    filed = _smoke_run(tmp_path)
    by_template = {}
    for decl in claims.CLAIMS.values():
        pattern = decl.id.replace(".", r"\.").replace("{keep:g}", r"[0-9.]+").replace("{r}", r"[0-9]+")
        by_template[decl.id] = pattern
    for c in filed:
        matches = [t for t, p in by_template.items() if re.fullmatch(p, c["id"])]
        assert len(matches) == 1, c["id"]
        decl = claims.CLAIMS[matches[0]]
        assert (c["kind"], c["setting"], c["section"]) == (decl.kind, decl.setting, decl.section)
    used = {t for c in filed for t, p in by_template.items() if re.fullmatch(p, c["id"])}
    assert set(claims.CLAIMS) - used == NOT_RUN_AT_SMOKE


# --- effects in dispute, from paper_numbers --------------------------------------------------------------

def test_effects_in_dispute_come_from_the_printed_numbers():
    assert settings.PAPER_KEEP == list(BAT[DEIT_S]["keep"])
    assert effects.paper_gap(0.7) == 0.1 and effects.paper_gap(0.5) == 0.5 and effects.paper_gap(0.2) is None
    assert effects.smallest_printed_gap() == 0.1
    assert effects.paper_gap_slope() == pytest.approx(-2.0)  # gaps +0.1 / +0.4 / +0.5 at 0.7 / 0.6 / 0.5
    assert effects.effect_vs_evit(0.5)[0] == 0.5 and effects.effect_vs_evit(0.7)[0] == 0.1
    assert effects.effect_vs_evit(0.3)[0] == 0.1
    assert effects.effect_ablation("both_vs_importance")[0] == 0.5 and effects.effect_ablation("pairing")[0] == 0.1
    assert effects.speed_margin(0.7) == pytest.approx(5 / 3) and effects.speed_margin(0.9) is None


# --- §7 and the fine-tuning not run: not testable ----------------------------------------------------------

def test_top1_and_skipped_finetune_claims_are_not_testable():
    rep = _report(proxy_holds=False)  # nothing measured on the proxy: its premises do not turn these inconclusive
    sources.file_top1_claims(rep)
    cfg = params.setup("02_diversity_merging", "smoke", {"finetune_steps": 0})
    finetunes.file_finetune_claims(rep, finetunes.Finetunes(pd.DataFrame(), pd.DataFrame(), {}), cfg, "m")
    assert len(rep.claims) == 10 and {c.verdict for c in rep.claims} == {"not testable here"}
    assert all(c.kind == "paper claim" and len(c.why) <= 200 for c in rep.claims)
    assert rep.claims[0].paper_value == 79.6 and rep.claims[-1].paper_value == 0.5


def test_unsupported_and_lv_vit_claims_are_not_testable():
    rep = Report("t", profile="smoke")
    sources.file_unsupported_claims(rep)
    sources.file_lv_vit_mac_claim(rep)
    assert {c.verdict for c in rep.claims} == {"not testable here"}
    assert [c.kind for c in rep.claims] == ["paper claim", "reviewer objection", "paper claim"]


def test_protocol_claims_from_the_logs():
    rep = Report("t", profile="smoke")
    proto = sources.protocols()
    sources.file_protocol_claims(rep, proto)
    v = {c.id: c.verdict for c in rep.claims}
    assert v == {"bat.protocol.vs_evit.keep0.7": "reproduced", "bat.protocol.vs_evit.keep0.6": "not reproduced",
                 "bat.protocol.vs_evit.keep0.5": "not reproduced",
                 "bat.protocol.one_protocol_across_rates": "not reproduced"}
    assert rep.claims[-1].our_value == "2 protocols"
    rep = Report("t", profile="smoke")
    sources.file_protocol_claims(rep, proto.assign(bat_start="from scratch", bat_epochs=300))
    assert {c.verdict for c in rep.claims} == {"reproduced"}


# --- §6: the fine-tuned claim ------------------------------------------------------------------------------

def _ft_row(diff=0.01, low=0.005, high=0.015, seeds=3, bat_gain=(0.03, 0.02, 0.04), evit_gain=(0.03, 0.02, 0.04)):
    row = {"keep_rate": 0.5, "bat_mean": 0.8, "bat_std": 0.01, "evit_mean": 0.79, "evit_std": 0.01, "diff_mean": diff,
           "diff_std": 0.001, "diff_low": low, "diff_high": high, "seeds": seeds}
    for k, (g, lo, hi) in (("bat", bat_gain), ("evit", evit_gain)):
        row.update({f"{k}_off_shelf": 0.7, f"{k}_gain": g, f"{k}_gain_low": lo, f"{k}_gain_high": hi})
    return row


@pytest.mark.parametrize("row,per_seed,verdict,failed", [
    (_ft_row(), [0.009, 0.010, 0.011], "reproduced", None),
    (_ft_row(-0.01, -0.015, -0.005), [-0.009, -0.010, -0.011], "not reproduced", None),
    # the fine-tuning did not move EViT: whatever the gap shows, its premise fails
    (_ft_row(evit_gain=(0.001, -0.004, 0.006)), [0.009, 0.010, 0.011], "inconclusive", MOVED),
    # within noise, the seeds' spread small enough for 5 seeds: inconclusive
    (_ft_row(0.001, -0.002, 0.004), [0.000, 0.001, 0.002], "inconclusive", None),
    # within noise, seeds spread by 3 points: even 5 seeds cannot detect 0.5 points
    (_ft_row(0.01, -0.06, 0.08), [-0.02, 0.01, 0.04], "not testable here", None),
    # one seed: no seed-level interval, no design
    (_ft_row(0.01, float("nan"), float("nan"), seeds=1), [0.01], "inconclusive", claims.TWO_SEEDS),
])
def test_finetune_claim_reaches_every_verdict(row, per_seed, verdict, failed):
    fd = finetunes.finetune_decision(pd.Series(row), per_seed, 0.5)
    assert {name: p.holds for name, p in fd.premises.items()} == {
        claims.TWO_SEEDS: row["seeds"] >= 2, MOVED: failed != MOVED}
    rep = _report()
    cfg = params.setup("02_diversity_merging", "smoke")
    finetunes.file_finetune_claims(rep, finetunes.Finetunes(pd.DataFrame(), pd.DataFrame([row]), {0.5: per_seed}),
                                   cfg, "m")
    c = rep.claims[0]
    assert c.id == "bat.finetuned.vs_evit.keep0.5" and c.verdict == verdict and len(c.why) <= 200
    assert (failed is not None) == ("rule alone" in (c.details or {}))
    if row["seeds"] >= 2:
        assert c.design["unit"] == "seeds" and c.design["n_max"] == 5 and c.design["effect_in_dispute"] == 0.5
    else:
        assert c.design is None


def test_finetune_claim_fails_on_the_proxy_premise():
    rep = _report(proxy_holds=False)
    cfg = params.setup("02_diversity_merging", "smoke")
    finetunes.file_finetune_claims(rep, finetunes.Finetunes(pd.DataFrame(), pd.DataFrame([_ft_row()]),
                                                            {0.5: [0.009, 0.01, 0.011]}), cfg, "m")
    c = rep.claims[0]
    assert c.verdict == "inconclusive" and c.details["rule alone"]["verdict"] == "holds"
    assert c.details["per_seed_pp"] == [0.9, 1.0, 1.1]


# --- §4-5: the pairwise accuracy claims: a direction gated by its design -----------------------------------

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


@pytest.mark.parametrize("args,verdict", [
    ((10000, 0.60, 0.55, 0.2), "reproduced"),
    ((10000, 0.55, 0.60, 0.2), "not reproduced"),
    # a 0.5-point effect, 2 % discordant: MDE at 10,000 about 0.4 points; within noise at 1,000 (underpowered)
    ((1000, 0.600, 0.600, 0.02), "inconclusive"),
    # a 0.1-point effect with 20 % discordant images: MDE at 10,000 about 1.25 points > 2 x 0.1
    ((1000, 0.600, 0.600, 0.2), "not testable here"),
])
def test_paired_decision_reaches_every_verdict(args, verdict):
    n, pa, pb, pd_ = args
    a, b = _correct(n, pa, pb, pd_)
    effect = 0.5 if verdict == "inconclusive" else 0.1
    res = comparisons.paired_decision(a, b, effect, 10000, "the full test split", Direction(">", unit="pp"), seed=0)
    assert res.decision.verdict == verdict and res.n == n
    assert res.design["n"] == n and res.design["n_max"] == 10000 and res.design["effect_in_dispute"] == effect
    assert len(res.brief("sweep images", effect)) <= 200


def test_full_split_runs_only_the_pairs_it_can_decide():
    from timm.models.vision_transformer import VisionTransformer

    from tokenprune.core.config import PruneConfig
    from tokenprune.measure.evaluation import Predictions

    # 2 % discordant: MDE at 10,000 images about 0.4 points, within 2 x 0.5 but not 2 x 0.1
    a, b = _correct(1000, 0.6, 0.6, 0.02)
    assert comparisons.full_split_pays(a, b, 0.5, 10000) and not comparisons.full_split_pays(a, b, 0.1, 10000)
    a2, b2 = _correct(1000, 0.61, 0.6, 0.02)  # the rule ignores the mean: the same spread pays the same
    assert comparisons.full_split_pays(a2, b2, 0.5, 10000)

    def pr(x, y):
        return Predictions(torch.stack([torch.from_numpy(x), torch.from_numpy(1 - x)], 1).float(),
                           torch.zeros(len(x), dtype=torch.long))

    preds = {"A @ 0.5": pr(a, b), "B @ 0.5": pr(b, a), "C @ 0.5": pr(*_correct(1000, 0.6, 0.6, 0.2)[::-1])}
    preds["D @ 0.5"] = pr(*_correct(1000, 0.6, 0.6, 0.2))
    m = VisionTransformer(img_size=32, patch_size=8, num_classes=3, embed_dim=32, depth=4, num_heads=2).eval()
    configs = [PruneConfig(reducer="fuse_attention", keep_rate=0.5, locations=(2,), name=f"{n} @ 0.5")
               for n in ("A", "B", "C", "D")]
    x, y = torch.randn(4000, 3, 32, 32), torch.zeros(4000, dtype=torch.long)
    out = comparisons.decisive_predictions(m, x, y, configs, preds, [("A @ 0.5", "B @ 0.5", 0.5),
                                                                     ("C @ 0.5", "D @ 0.5", 0.1)], 500, "fp32", 0)
    assert set(out) == {"A @ 0.5", "B @ 0.5"} and len(out["A @ 0.5"].labels) == 4000


def _predictions(rng, n, p):
    from tokenprune.measure.evaluation import Predictions

    ok = torch.from_numpy(rng.random(n) < p)
    return Predictions(torch.stack([ok.float(), (~ok).float()], 1), torch.zeros(n, dtype=torch.long))


def test_trend_design_is_the_slope_contrasts():
    from tokenprune.measure.trend import trend_contrast

    rng = np.random.default_rng(0)
    keep = [0.7, 0.5, 0.3]
    preds = {f"{m} @ {r:g}": _predictions(rng, 400, 0.6) for r in keep for m in ("BAT", "EViT (fusion)")}
    diffs = [preds[f"BAT @ {r:g}"].correct.astype(float) - preds[f"EViT (fusion) @ {r:g}"].correct.astype(float)
             for r in keep]
    d = proxy_scale.trend_design(preds, keep, 10000, "the full test split")
    t = trend_contrast(np.stack(diffs), keep)
    assert d.n == 400 and d.n_max == 10000
    # the slope is the mean of the contrasts, so their sd / sqrt(n) is its standard error (points per unit)
    assert d.sd / np.sqrt(400) == pytest.approx(100 * (t.high - t.low) / (2 * 1.96), rel=0.15)


def test_proxy_and_ablation_claims_carry_designs():
    from tokenprune.measure.trend import trend_contrast

    rng = np.random.default_rng(1)
    keep = [0.7, 0.5, 0.3]
    preds = {f"{m} @ {r:g}": _predictions(rng, 300, 0.6) for r in keep for m in ("BAT", "EViT (fusion)")}
    div = {k: {"cosine_distance": rng.random(32), "tokens": np.full(32, 20.0)} for k in preds}
    table = pd.DataFrame([{"keep_rate": r, "cosdist_diff": 0.01, "cosdist_diff_low": 0.0, "cosdist_diff_high": 0.02}
                          for r in keep])
    trend = trend_contrast(np.stack([preds[f"BAT @ {r:g}"].correct.astype(float)
                                     - preds[f"EViT (fusion) @ {r:g}"].correct.astype(float) for r in keep]), keep)
    rep = _report()
    full = {k: preds[k] for k in ("BAT @ 0.5", "EViT (fusion) @ 0.5")}  # as if only keep 0.5 ran again
    proxy_scale.file_proxy_claims(rep, proxy_scale.Gaps(table, trend), proxy_scale.Sweep(pd.DataFrame(), preds, div),
                                  full, keep, "m", 10000, "the full test split", 0)
    abl = {f"{n} @ 0.3": _predictions(rng, 300, 0.6) for n in ("both: BAT", "importance only: EViT (fusion)",
                                                               "diversity only: DPC-KNN of all tokens",
                                                               "both + pairing 0.25")}
    assert {x for a, b, _ in ablations.ablation_pairs(0.3) for x in (a, b)} == set(abl)
    ablations.file_ablation_claims(rep, abl, {}, 0.3, 10000, "the full test split", 0)
    c = {x.id: x for x in rep.claims}
    # the diversity claims are not decided on the accuracy model (file_photo_diversity_claims)
    assert set(c) == {"bat.proxy.gap_grows_at_low_keep",
                      "bat.proxy.vs_evit.keep0.7", "bat.proxy.vs_evit.keep0.5",
                      "bat.ablation.both_vs_importance.keep0.3",
                      "bat.ablation.both_vs_diversity.keep0.3", "bat.ablation.pairing.keep0.3"}
    assert all(x.design is not None and len(x.why) <= 200 and x.setting == "proxy" for x in c.values())
    assert c["bat.proxy.gap_grows_at_low_keep"].design["effect_in_dispute"] == pytest.approx(2.0)
    assert c["bat.proxy.vs_evit.keep0.5"].design["effect_in_dispute"] == 0.5
    # independent 60 % models on 300 images: a 0.1-point effect is out of reach even at 10,000 images
    assert c["bat.proxy.vs_evit.keep0.7"].verdict == "not testable here"
    assert c["bat.proxy.vs_evit.keep0.7"].design["mde_at_max"] > 2 * 0.1
    assert c["bat.proxy.vs_evit.keep0.7"].paper_value == 0.1 and c["bat.proxy.vs_evit.keep0.5"].paper_value == 0.5


def _diversity_table(photo_diffs, rates=(0.5,), crops=3, tokens=4):
    """A :func:`proxy_scale.photo_diversity` table: per photo ``crops`` images, EViT at 0.5 + small per-image offsets,
    BAT that + the photo's difference in ``photo_diffs`` (one per photo)."""
    rows, rng = [], np.random.default_rng(0)
    for r in rates:
        i = 0
        for k, delta in enumerate(photo_diffs):
            for _ in range(crops):
                evit = 0.5 + 0.05 * rng.random()
                for method, value in zip(proxy_scale.DIVERSITY_PAIR, (evit + delta + 0.002 * rng.standard_normal(),
                                                                      evit)):
                    rows.append({"keep_rate": r, "method": method, "image": i, "photo": f"p{k}",
                                 "cosine_distance": value if tokens > 1 else np.nan, "tokens": tokens})
                i += 1
    return pd.DataFrame(rows)


@pytest.mark.parametrize("photo_diffs,verdict", [
    ([0.05, 0.04, 0.06, 0.05, 0.03], "reproduced"),
    ([-0.05, -0.04, -0.06, -0.05, -0.03], "not reproduced"),
    ([0.05, -0.05, 0.04, -0.04, 0.0], "inconclusive"),
])
def test_diversity_claims_are_decided_by_their_rule_whatever_the_accuracy_proxy(photo_diffs, verdict):
    for proxy_holds in (True, False):  # a failed accuracy proxy does not touch a claim on the kept token set
        rep = _report(proxy_holds=proxy_holds)
        proxy_scale.file_diversity_claims(rep, _diversity_table(photo_diffs, rates=(0.2, 0.5)), "m, 224 px", 10, 0)
        c = {x.id: x for x in rep.claims}
        assert set(c) == {"bat.proxy.diversity.keep0.2", "bat.proxy.diversity.keep0.5"}
        for x in c.values():
            assert x.verdict == verdict and x.premises == [] and x.setting == "proxy"
            assert x.our_value == pytest.approx(np.mean(photo_diffs), abs=2e-3)
            assert x.design["unit"] == "photos" and x.design["n"] == len(photo_diffs)
            assert "effect_in_dispute" not in x.design  # the paper prints no diversity


def test_diversity_claims_skip_a_rate_with_no_pairwise_distance():
    rep = _report()
    proxy_scale.file_diversity_claims(rep, _diversity_table([0.05] * 5, tokens=1), "m, 224 px", 10, 0)
    assert not rep.claims


def test_photo_diversity_compares_equal_token_counts_on_the_photo_model():
    pytest.importorskip("skimage")
    cfg = params.setup("02_diversity_merging", "smoke")
    assert cfg.figure_model == "random_tiny"  # the smoke photo model: same code path as the ViT-S/14, in seconds
    rep = _report(proxy_holds=False)
    table = proxy_scale.file_photo_diversity_claims(rep, cfg, settings.bat_options(cfg))
    rates = proxy_scale.diversity_rates(cfg.keep_rates)
    assert sorted(table.keep_rate.unique()) == rates
    assert table.photo.nunique() >= 2 and len(table) == 2 * len(rates) * table.image.nunique()
    wide = table.pivot_table(index=["keep_rate", "image"], columns="method", values="tokens")
    assert (wide[proxy_scale.DIVERSITY_PAIR[0]] == wide[proxy_scale.DIVERSITY_PAIR[1]]).all()  # as many tokens
    filed = {x.id: x for x in rep.claims}
    assert set(filed) == {f"bat.proxy.diversity.keep{r:g}" for r in rates}
    assert all(x.premises == [] and x.verdict != "not testable here" for x in filed.values())


def test_diversity_rates():
    assert proxy_scale.diversity_rates([0.9, 0.7, 0.5, 0.3, 0.2]) == [0.2, 0.5]
    assert proxy_scale.diversity_rates([0.7, 0.3]) == [0.3]


def test_proxy_claims_are_inconclusive_when_the_proxy_fails_its_premise():
    rng = np.random.default_rng(2)
    abl = {f"{n} @ 0.3": _predictions(rng, 10000, p) for n, p in (("both: BAT", 0.8), ("importance only: EViT (fusion)",
                                                                                       0.5),
                                                                 ("diversity only: DPC-KNN of all tokens", 0.5),
                                                                 ("both + pairing 0.25", 0.9))}
    rep = _report(proxy_holds=False)
    ablations.file_ablation_claims(rep, abl, {}, 0.3, 10000, "the full test split", 0)
    assert {c.verdict for c in rep.claims} == {"inconclusive"}
    assert all(c.details["rule alone"]["verdict"] == "holds" for c in rep.claims)


# --- §2: the MAC column ------------------------------------------------------------------------------------

@pytest.mark.parametrize("rows,outcome,discriminating", [
    # the clustering adds 0.15 GMACs (more than the same-cost tolerance); printed 1.8 is the count with it
    ([(0.2, 1.8, 1.64, 1.79)], "reproduced", [0.2]),
    # printed 1.6 is the count without it
    ([(0.2, 1.6, 1.64, 1.79)], "not reproduced", [0.2]),
    # the clustering adds 0.02 GMACs: below the tolerance, the printed column cannot tell, whatever it prints
    ([(0.2, 1.6, 1.64, 1.66)], "inconclusive", []),
    ([(0.2, 1.7, 1.64, 1.66)], "inconclusive", []),
    # a difference just above the tolerance with the printed figure between the counts: within it of both
    ([(0.2, 1.7, 1.64, 1.75)], "inconclusive", [0.2]),
    # mixed evidence: the count with the clustering at one rate, without at another
    ([(0.2, 1.8, 1.64, 1.79), (0.4, 2.0, 2.04, 2.19)], "inconclusive", [0.2, 0.4]),
])
def test_counts_clustering_decision(rows, outcome, discriminating):
    ev = macs.counts_clustering_decision(rows)
    assert ev.decision.verdict == outcome
    assert ev.discriminating == discriminating
    assert ev.largest[0] == max(rows, key=lambda r: r[3] - r[2])[0]
    assert ev.decision.rule == claims.COUNTS_CLUSTERING_RULE.text


def test_counts_clustering_reads_the_studys_same_cost_tolerance():
    from tokenprune.study.tolerances import SAME_COST_GMACS

    gap = 1.5 * SAME_COST_GMACS  # resolvable at the study's tolerance, not at three times it
    rows = [(0.2, 1.6, 1.6, 1.6 + gap)]
    assert macs.counts_clustering_decision(rows).decision.verdict == "not reproduced"
    assert macs.counts_clustering_decision(rows, tolerance=3 * SAME_COST_GMACS).decision.verdict == "inconclusive"
    assert claims.CLAIMS["bat.macs.deit_s.counts_clustering"].rule().text == claims.counts_clustering_rule().text
    assert claims.counts_clustering_rule(0.2).text != claims.counts_clustering_rule().text


def _fake_macs(plus_offset=0.08, clustering=0.002, spread=0.002):
    """A mac table: EViT (fusion) at the printed column, drop a bit lower, BAT's budget variant = EViT +
    ``clustering`` GMACs of operator, the +clusters variant ``plus_offset`` above; DeiT-T 1.25 / 0.82."""
    rows = [{"model": DEIT_S, "method": "unpruned", "reducer": None, "keep_rate": 1.0, "tokens": "196",
             "gmacs_model": 4.6, "gmacs_reduction": 0.0, "gmacs_total": 4.6, "reduction_share": 0.0,
             "counter_spread": spread}]
    for r in settings.PAPER_KEEP + [0.9, 0.8]:
        g = BAT[DEIT_S]["keep"].get(r, {}).get("gmacs", 3.5) + 0.01
        for red, model, extra in [("fuse_attention", g, 0.0), ("drop", g - 0.03, 0.0),
                                  ("merge_dpcknn_budget", g, clustering),
                                  ("merge_dpcknn", g + plus_offset, clustering)]:
            rows.append({"model": DEIT_S, "method": red, "reducer": red, "keep_rate": r, "tokens": "196 -> x",
                         "gmacs_model": model, "gmacs_reduction": extra, "gmacs_total": model + extra,
                         "reduction_share": extra / (model + extra), "counter_spread": spread})
    rows.append({"model": settings.DEIT_T, "method": "unpruned", "reducer": None, "keep_rate": 1.0,
                 "gmacs_model": 1.254})
    rows.append({"model": settings.DEIT_T, "method": "budget", "reducer": "merge_dpcknn_budget", "keep_rate": 0.7,
                 "gmacs_model": 0.821})
    return pd.DataFrame(rows)


def _mac_claims(table):
    rep = Report("t", profile="smoke")
    macs.file_mac_claims(rep, table, macs.mac_column_match(table), 4)
    return {c.id: c for c in rep.claims}


def test_mac_claims_and_the_plus_clusters_variant_can_go_both_ways():
    for offset, verdict in [(0.08, "not supported"), (0.0, "supported")]:
        c = _mac_claims(_fake_macs(plus_offset=offset))
        assert c["bat.macs.deit_s.plus_clusters_variant"].verdict == verdict
        assert c["bat.macs.deit_s.keep0.7"].verdict == "consistent" and c["bat.macs.deit_s.keep0.7"].our_value == 3.01
        assert c["bat.macs.deit_t.baseline"].verdict == "consistent" and c["bat.macs.deit_t.keep0.7"].our_value == 0.821
        assert c["bat.macs.deit_s.authors_log"].verdict == "inconsistent"  # keep 0.4's log rounds to 2.1
        assert all(len(x.why) <= 200 for x in c.values())
    # the clustering below the same-cost tolerance (0.06 GMACs of 0.1): the printed precision cannot tell
    for clustering in (0.002, 0.06):
        c = _mac_claims(_fake_macs(clustering=clustering))["bat.macs.deit_s.counts_clustering"]
        assert c.verdict == "inconclusive" and c.details["authors_log_gmacs"] == {}
    # it adds 0.15 GMACs at every rate while the printed figures are the counts without it: against
    c = _mac_claims(_fake_macs(clustering=0.15))["bat.macs.deit_s.counts_clustering"]
    assert c.verdict == "not reproduced" and set(c.details["authors_log_gmacs"]) == {f"{r:g}" for r in
                                                                                     settings.PAPER_KEEP}


def test_the_summarys_headline_is_read_at_keep_0_7_and_split_in_two_halves():
    """"we reduce FLOPs by 35% with only 0.2% accuracy drop": Table 1's keep 0.7 is the only row that gives both
    (4.6 -> 3.0 GMACs, 79.8 -> 79.6); the MAC half is decided analytically (35 +- 1 points), the accuracy half needs
    the paper's training."""
    assert claims.headline_keep_rates() == [0.7] and claims.HEADLINE_KEEP == 0.7
    macs_half, top1_half = (claims.CLAIMS[f"bat.secondary.headline.{k}"] for k in ("mac_reduction", "top1_drop"))
    assert (macs_half.kind, macs_half.setting, macs_half.section) == ("consistency check", "analytic at paper scale",
                                                                      "§2")
    assert (top1_half.kind, top1_half.setting, top1_half.rule) == ("paper claim", "paper-scale run", None)
    assert "from scratch, 300 epochs" in top1_half.would_decide
    assert macs_half.quote == top1_half.quote == '"On DeiT-S, we reduce FLOPs by 35% with only 0.2% accuracy drop"'
    text = macs._summary_text()
    if text is not None:
        assert macs_half.quote[1:-1] in text
    # keep 0.7 at 3.012 GMACs of 4.6 (clustering counted): -34.5 %; the budget 0.06 GMACs dearer: -33.2 %
    for shift, verdict in [(0.0, "consistent"), (0.06, "inconsistent")]:
        table = _fake_macs()
        sel = (table.reducer == "merge_dpcknn_budget") & (table.keep_rate == 0.7)
        table.loc[sel, "gmacs_total"] += shift
        c = _mac_claims(table)["bat.secondary.headline.mac_reduction"]
        assert c.verdict == verdict and c.paper_value == 35.0 and len(c.why) <= 200
        assert c.our_value == pytest.approx(100 * (1 - (3.012 + shift) / 4.6), abs=0.01)
        assert c.details["keep rates within 1 point of -35 %"] == (["0.7"] if shift == 0 else [])
        assert c.details["keep rate for exactly -35 % (EViT's schedule, analytic)"] == pytest.approx(0.69, abs=0.01)
    rep = Report("t", profile="smoke")
    sources.file_top1_claims(rep)
    c = next(c for c in rep.claims if c.id == "bat.secondary.headline.top1_drop")
    assert c.verdict == "not testable here" and c.paper_value == 0.2


def test_layer_norm_macs_is_fvcores_convention_measured():
    import timm

    from tokenprune.measure import macs as flops

    m = timm.create_model("deit_tiny_patch16_224").eval()
    c = flops.analytic_macs(m)
    assert macs.fvcore_style_macs(m) == c.total + macs.layer_norm_macs(c, m.embed_dim)
    assert macs.layer_norm_macs(c, m.embed_dim) == 5 * 192 * 197 * 25


def test_loss_claim_is_a_transcription_check(monkeypatch):
    text = "The overall objective function combines ...: $L = \\alpha L_{imp} + \\beta L_{div}$, where ..."
    assert macs.summary_states(text, BAT["secondary_summary_loss"]) is True
    for summary, verdict in [(text, "inconsistent"), ("a summary that states no objective", "inconclusive"),
                             (None, "inconsistent")]:  # None: the file is not here, the quoted text is used
        rep = Report("t", profile="smoke")
        macs.file_loss_claim(rep, summary_text=summary)
        assert rep.claims[0].verdict == verdict and rep.claims[0].kind == "transcription"
    monkeypatch.setitem(BAT, "secondary_summary_loss", BAT["training_loss"])  # a summary that got it right
    rep = Report("t", profile="smoke")
    macs.file_loss_claim(rep, summary_text=BAT["training_loss"])
    assert rep.claims[0].verdict == "consistent"


@pytest.mark.parametrize("gmacs,verdict", [(2.706, "consistent"), (2.78, "inconsistent")])
def test_tome_claims_are_consistency_checks(gmacs, verdict):
    rep = Report("t", profile="smoke")
    df = pd.DataFrame([{"r": 13, "tokens": "196 -> 183", "gmacs_model": gmacs - 0.003, "gmacs_matching": 0.003,
                        "gmacs_total": gmacs, "gmacs_fvcore_style": gmacs + 0.005, "paper_gflops": 2.7}])
    macs.file_tome_claims(rep, df, 4.599)
    c = rep.claims[0]
    assert (c.id, c.verdict, c.kind) == ("bat.baseline.tome.deit_s.r13", verdict, "consistency check")
    assert c.paper_value == 2.7


def test_tome_schedule_on_deit_s_is_tomes_published_macs():
    import timm

    tm = macs.tome_mac_table(timm.create_model(DEIT_S).eval(), measure_macs=False)
    assert tm.tokens.tolist()[1].endswith("-> 53 -> 40")
    assert [round(v, 1) for v in tm.gmacs_total] == [3.4, 2.7, 2.3]


# --- §3: the clustering-cost objection: the margin the printed column can hide -----------------------------

def _overhead(keep_rate, est, lo, hi, passes=5):
    from tokenprune.measure import throughput as bench

    row = {"keep_rate": keep_rate, "variant": "BAT in EViT's budget", "throughput_vs_evit": 0.98,
           "throughput_low": 0.97, "throughput_high": 0.99, "operator_time_share": 0.1,
           "evit_operator_time_share": 0.05, "extra_share": est / 100, "extra_share_low": lo / 100,
           "extra_share_high": hi / 100, "passes": passes}
    row.update({k: 0.0 for k in bench.LOAD_COLUMNS})
    row.update({"under_load": False, "load_warnings": ""})
    return pd.DataFrame([row])


@pytest.mark.parametrize("args,verdict", [
    ((0.3, 3.7, 3.5, 3.9), "upheld"),         # +3.7 % [3.5, 3.9] at 1.8 GMACs: above the 2.78 % margin
    ((0.7, 1.7, 1.4, 2.0), "inconclusive"),   # +1.7 % [1.4, 2.0] straddles 1.67 %
    ((0.7, 0.5, 0.3, 0.6), "rejected"),
    ((0.7, 0.5, 0.3, 0.6, 2), "inconclusive"),  # too few timed passes
    ((0.9, 0.5, 0.3, 0.6), "inconclusive"),   # no printed figure
])
def test_clustering_cost_objection(args, verdict):
    rep = Report("t", profile="smoke")
    speed.file_speed_claims(rep, _overhead(*args), "cpu", "cpu", "deit", 1)
    c = rep.claims[0]
    assert c.verdict == verdict and c.timed and c.kind == "reviewer objection" and c.paper_value == 0.0


# --- §4: the summary's 'static importance' flaw ------------------------------------------------------------

@pytest.mark.parametrize("overlap,verdict", [
    ({"images": 8, "kept": 5, "mean_jaccard": 1.0, "all_identical": True, "distinct_sets": 1}, "upheld"),
    ({"images": 8, "kept": 5, "mean_jaccard": 0.4, "all_identical": False, "distinct_sets": 8}, "rejected"),
    ({"images": 1, "kept": 5, "mean_jaccard": float("nan"), "all_identical": True, "distinct_sets": 1},
     "inconclusive"),
])
def test_static_scores_objection(overlap, verdict):
    rep = Report("t", profile="smoke")
    proxy_scale.file_static_scores_claim(rep, overlap, 0.5, "m")
    assert rep.claims[0].verdict == verdict and rep.claims[0].kind == "reviewer objection"


def test_kept_set_overlap_sees_input_dependence():
    from timm.models.vision_transformer import VisionTransformer

    from tokenprune.core.config import PruneConfig

    m = VisionTransformer(img_size=32, patch_size=4, num_classes=5, embed_dim=32, depth=4, num_heads=2).eval()
    cfg = PruneConfig(reducer="merge_dpcknn", locations=(2,))
    x = torch.randn(6, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    ov = proxy_scale.kept_set_overlap(m, x, cfg, 0.5, 6)
    assert ov["images"] == 6 and ov["kept"] == 32 and not ov["all_identical"] and 0 < ov["mean_jaccard"] < 1
    same = proxy_scale.kept_set_overlap(m, x[:1].expand(4, -1, -1, -1).contiguous(), cfg, 0.5, 4)
    assert same["all_identical"] and same["mean_jaccard"] == 1.0


def test_paper_profile_registers_premises_that_hold():
    cfg = params.setup("02_diversity_merging", "paper")
    premises = proxy_scale.proxy_premises(cfg)
    assert [p.name for p in premises] == [chosen.PROXY_CHOSEN, chosen.PROXY_BAR]
    assert all(p.holds for p in premises)
