"""Notebook 03 (tokenprune.study.varmedad): its rules decide as the notebook's claims need, every claim is declared
once with its kind, setting and premises, the experiments file their claims from those declarations with the
verdicts and numbers the rules give, and its profile table passes the parameter check."""
import itertools
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from tokenprune.core.config import PruneConfig
from tokenprune.core.patch import prune_state
from tokenprune.measure import intervals
from tokenprune.measure import rank_statistics as rankstats
from tokenprune.measure.evaluation import Predictions
from tokenprune.measure.power import Design
from tokenprune.study import paper_runs, params, report, verdicts
from tokenprune.study.proxy import chosen
from tokenprune.study.claims import KINDS, SETTINGS
from tokenprune.study.paper_numbers import VARMEDAD
from tokenprune.study.varmedad import claims as vc
from tokenprune.study.varmedad import designs, finetunes, margins, sensitivity, settings, subjects, sweep
from tokenprune.training import cached_finetunes


def _rep(proxy_holds: bool = True) -> report.Report:
    """A report (never written) with the proxy's calibration premises registered."""
    rep = report.Report("03_variance_medad", out_dir="unused")
    rep.add_premise(verdicts.Premise(chosen.PROXY_CHOSEN, proxy_holds, "test"))
    rep.add_premise(verdicts.Premise(chosen.PROXY_BAR, True, "test"))
    return rep


def _claim(rep, cid):
    return next(c for c in rep.claims if c.id == cid)


def _subjects(n_max=None):
    return SimpleNamespace(n_test_split=n_max, base_run=None)


# ---------------------------------------------------------------------------------------------- declarations
def test_every_declaration_is_complete_and_of_this_paper():
    assert vc.CLAIMS.paper == "varmedad" and len(vc.CLAIMS) == 35 - 3 + 2 + len(vc.PAPER_SCALE_TWINS) + 6
    for d in vc.CLAIMS.values():
        assert d.kind in KINDS and d.setting in SETTINGS and d.section.startswith("§")
        assert d.quote.startswith('"') or d.quote == "none: our hypothesis"
        assert (d.rule is None) == (d.would_decide is not None) or d.id.startswith("varmedad.top1.")


def test_paper_scale_twins_replace_the_calibration_by_the_whole_schedule():
    for cid in vc.PAPER_SCALE_TWINS:
        own, twin = vc.CLAIMS[cid], vc.CLAIMS[paper_runs.paper_scale_id(cid)]
        assert twin.setting == "paper-scale run" and twin.kind == own.kind and twin.rule is own.rule
        assert paper_runs.FULL_SCHEDULE in twin.premises and not set(vc.PROXY) & set(twin.premises)
        assert set(vc.PROXY) <= set(own.premises)


def test_kinds_of_the_objections():
    """Which side a rule that holds takes: the checks of the paper's side reject the objection."""
    kind = {i: (d.kind, d.on_rule_holds) for i, d in vc.CLAIMS.items()}
    assert kind["varmedad.obj1.eq6_zero"] == ("transcription", "inconsistent")
    assert kind["varmedad.obj8.table1_drop"] == ("transcription", "consistent")
    assert kind["varmedad.eq7.median_axis"] == ("reviewer objection", "upheld")
    for cid in ("varmedad.obj2.{source}", "varmedad.obj3.high_vs_low_variance",
                "varmedad.obj4.temperature_at_least_1e-2", "varmedad.obj4.temperature_to_zero",
                "varmedad.obj5.variance_vs_evit", "varmedad.obj7.offtheshelf_matched",
                "varmedad.settle.background_share", "varmedad.eq8.normalisation_set"):
        assert kind[cid] == ("reviewer objection", "rejected")
    assert kind["varmedad.obj6.overlap_tokens"] == ("consistency check", "consistent")
    assert kind["varmedad.obj3.diversity_beyond_mean"] == ("our hypothesis", "supported")


def test_cached_finetunes_are_the_default_profile_and_the_paper_numbers():
    import dataclasses

    runs = cached_finetunes.VARMEDAD
    d = settings.PROFILES["default"]
    assert d["base_model"] == chosen.AUDIT_MODEL and runs.base_model == chosen.STAND_IN
    assert (runs.keep_rate, runs.aggressive_keep_rate, runs.locations) == (settings.R_MAIN, settings.R_AGGRESSIVE,
                                                                           settings.LOCS)
    # the default profile runs the cached runs' settings, on the audit model (the cached runs' own base until
    # notebook 00 chooses a proxy)
    default = finetunes.finetune_runs(params.setup("03_variance_medad", "default", {}))
    assert dataclasses.replace(default, base_model=runs.base_model) == runs


def test_the_training_layers_models_command_does_not_import_the_study():
    import subprocess
    import sys

    code = ("import sys, tokenprune.training.models_cli; "
            "sys.exit(len([m for m in sys.modules if m.startswith('tokenprune.study')]))")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


# ---------------------------------------------------------------------------------------------- rules
def _old_beats(lo, hi, p):
    if lo > 0 and p < 0.05:
        return "reproduced"
    if hi < 0 and p < 0.05:
        return "not reproduced"
    return "inconclusive"


def _old_all(vs):
    if all(v == "reproduced" for v in vs):
        return "reproduced"
    return "not reproduced" if any(v == "not reproduced" for v in vs) else "inconclusive"


PARTS = [(0.01, 0.03, 0.01), (-0.03, -0.01, 0.01), (-0.01, 0.02, 0.3), (0.01, 0.03, 0.2), (-0.03, -0.01, 0.2)]


@pytest.mark.parametrize("combo", list(itertools.product(PARTS, repeat=2)))
def test_beats_rule_matches_the_former_rule(combo):
    labels = ["a vs b", "a vs c"]
    values = {}
    for label, (lo, hi, p) in zip(labels, combo):
        values.update(designs.beats_values(label, {"top1_diff": (lo + hi) / 2, "top1_diff_low": lo,
                                                 "top1_diff_high": hi, "mcnemar_p": p}))
    got = vc.beats_rule(labels).decide(values).verdict
    assert got == _old_all([_old_beats(*c) for c in combo])


def _old_robust(alts):
    if any(a["p"] < 0.05 and (a["low"] > 0 or a["high"] < 0) for a in alts):
        return "not reproduced"
    return "reproduced" if all(a["equivalent"] for a in alts) else "inconclusive"


ALTS = [dict(name="x", estimate=0.5, low=0.2, high=0.8, p=0.01, equivalent=True),    # significant and equivalent
        dict(name="y", estimate=0.1, low=-0.5, high=0.7, p=0.6, equivalent=True),
        dict(name="z", estimate=0.1, low=-2.0, high=2.2, p=0.9, equivalent=False, tost_p=0.4),
        dict(name="w", estimate=-3.0, low=-5.0, high=-1.0, p=0.001, equivalent=False)]


@pytest.mark.parametrize("alts", [list(c) for n in (1, 2, 3) for c in itertools.combinations(ALTS, n)])
def test_robustness_matches_the_former_rule(alts):
    d = vc.robust_rule().decide(alts)
    assert d.verdict == _old_robust(alts)
    assert d.rule == vc.robust_rule().text


def test_robustness_needs_alternatives():
    with pytest.raises(ValueError):
        verdicts.Robustness(1.0).decide([])


@pytest.mark.parametrize("rho,jac,want", [((0.95, 0.92, 0.97), (0.8, 0.78, 0.82), "not reproduced"),
                                          ((0.95, 0.92, 0.97), (0.8, 0.70, 0.82), "inconclusive"),
                                          ((0.5, 0.4, 0.6), (0.5, 0.4, 0.6), "reproduced"),
                                          ((0.8, 0.6, 0.95), (0.9, 0.8, 0.95), "inconclusive")])
def test_rerank_rule(rho, jac, want):
    assert vc.RERANK_RULE.decide({vc.SPEARMAN: rho, vc.JACCARD: jac}).verdict == want


def test_margin_premises_come_first():
    seeds = verdicts.Premise("at least 3 seeds", False)
    epochs = verdicts.Premise("one epoch", False)
    d = seeds.gate(epochs.gate(vc.MARGIN_RULE.decide(1.0, 0.5, 1.5)))
    assert d.verdict == "inconclusive" and "3 seeds" in d.why


@pytest.mark.parametrize("profile", ["smoke", "default", "paper"])
def test_profiles_pass_the_parameter_check(profile):
    cfg = params.setup("03_variance_medad", profile, {})
    assert set(vars(cfg)) - {"profile"} == set(settings.PARAMETERS)
    with pytest.raises(ValueError):
        params.setup("03_variance_medad", profile, {"no_such_parameter": 1})



@pytest.mark.parametrize("jac,want", [
    ((0.44, 0.40, 0.48), "reproduced"),        # fewer patches kept by both readings than by one: they differ
    ((0.90, 0.85, 0.95), "not reproduced"),    # more than 6/7 of the kept patches shared: the same selection
    ((0.60, 0.55, 0.65), "inconclusive"),      # they differ in part
    ((0.50, 0.40, 0.60), "inconclusive"),      # the interval reaches the bar
    ((0.76, 0.70, 0.80), "inconclusive")])
def test_medad_axis_rule(jac, want):
    """Eq. 7's axis is decided on the kept sets alone: no accuracy quantity enters the rule."""
    assert vc.MEDAD_AXIS_RULE.decide({vc.MEDAD_JAC: jac}).verdict == want


def test_medad_axis_bars_mean_what_they_say():
    """Equal-size kept sets with Jaccard J share 2J / (1 + J) of their patches: below the 'differ' bar fewer patches
    are kept by both readings than by one only; above the 'same' bar more than 6/7 are shared; chance lies below."""
    k = 60
    for shared in range(k + 1):
        j = shared / (2 * k - shared)
        assert (j < settings.JAC_DIFFER) == (shared < 2 * k - 2 * shared)
    assert 2 * settings.JAC_SAME / (1 + settings.JAC_SAME) == pytest.approx(6 / 7)
    assert rankstats.chance_jaccard(256, settings.R_MAIN) < settings.JAC_DIFFER < settings.JAC_SAME


def test_medad_similar_rule_reaches_every_verdict_and_scales_its_margin():
    rule = vc.CLAIMS["varmedad.variance_vs_medad"].rule(1.0)
    assert rule.margin == pytest.approx(settings.EQUIV_MARGIN * 100)
    assert rule.decide(0.02, -0.1, 0.14, -0.08, 0.12).verdict == "reproduced"       # 90 % interval inside +-0.2
    assert rule.decide(2.6, 0.3, 5.2, 0.7, 4.8).verdict == "not reproduced"          # 95 % interval beyond +0.2
    assert rule.decide(2.6, 0.1, 5.2, 0.5, 4.8).verdict == "inconclusive"            # 95 % interval reaches it
    wide = vc.CLAIMS["varmedad.variance_vs_medad"].rule(20.0)                    # a proxy 20 x as sensitive
    assert wide.margin == pytest.approx(4.0) and wide.decide(2.6, 0.3, 3.5, 0.7, 3.2).verdict == "reproduced"
    for bad in (0.0, -1.0, float("nan")):
        with pytest.raises(ValueError):
            vc.medad_similar_rule(bad)


@pytest.mark.parametrize("share,want", [(0.9999, "reproduced"), (0.99, "reproduced"), (0.95, "inconclusive"),
                                        (0.9, "inconclusive"), (0.5, "not reproduced"), (float("nan"), "inconclusive")])
def test_temperature_flat_rule(share, want):
    assert vc.TEMPERATURE_FLAT_RULE.decide(share).verdict == want


def test_exact_bars_refuses_crossed_bars():
    with pytest.raises(ValueError):
        vc.ExactBars("x", 0.5, 0.9)


@pytest.mark.parametrize("smallest,largest,want", [
    (0.995, 1.0, "reproduced"), (0.99, 0.99, "reproduced"), (0.0, 0.4, "not reproduced"), (0.0, 0.95, "inconclusive"),
    (0.5, 0.995, "inconclusive"), (0.0, 0.0, "not testable here"), (float("nan"), float("nan"), "not testable here")])
def test_normalisation_rule_reaches_every_verdict(smallest, largest, want):
    rule = vc.CLAIMS["varmedad.eq8.normalisation_set"].rule()
    assert rule.decide(smallest, largest).verdict == want


def test_scale_bars_refuse_crossed_bars_and_a_range_outside_0_1():
    with pytest.raises(ValueError):
        vc.ScaleBars("x", 0.5, 0.9)
    with pytest.raises(ValueError):
        vc.ScaleBars("x", 0.99, 0.9).decide(0.5, 0.2)


def test_all_tokens_scale_is_at_most_the_pruned_share_and_reaches_it_on_ties():
    """Normalised over all N, the fused token is sum_P softmax(s / T) times the one normalised over P: at most
    |P| / N (the pruned scores are the lowest), |P| / N on tied scores, towards 0 as T -> 0."""
    scores = torch.rand(16, 196, generator=torch.Generator().manual_seed(3)) * 1e-3
    bound = (196 - 118) / 196
    for T in (1e-9, 1e-4, 0.5, 10.0):
        c = sensitivity.all_tokens_scale(scores, 0.6, T)
        assert (c <= bound + 1e-12).all() and (c >= 0).all()
    assert sensitivity.all_tokens_scale(scores, 0.6, 1e-9).max() < 1e-6
    assert sensitivity.all_tokens_scale(torch.zeros(2, 196), 0.6, 0.5).tolist() == pytest.approx([bound] * 2)
    assert sensitivity.all_tokens_scale(scores, 1.0, 0.5).tolist() == [0.0] * 16       # nothing pruned
    with pytest.raises(ValueError):
        sensitivity.all_tokens_scale(scores, 0.6, 0.0)


@pytest.mark.parametrize("photos", [True, False])
def test_normalisation_claim_is_decided_at_deit_s_token_counts(photos):
    """Minor comment 2 is upheld from DeiT-S's token counts alone (196 -> 119 -> 73 at r = 0.6): no proxy premise,
    the photos only in the details."""
    rows = torch.rand(8, 4, 50, generator=torch.Generator().manual_seed(0)).softmax(-1)
    subj = _photo_subjects(rows)
    if not photos:
        subj.photo_source = None
    rep = _rep(proxy_holds=False)
    table = sensitivity.normalisation_claim(rep, subj, 0.5)
    c = _claim(rep, "varmedad.eq8.normalisation_set")
    assert table.tokens_in.tolist() == [196, 119, 73] and table.pruned.tolist() == [78, 47, 29]
    assert (c.verdict, c.setting, c.premises) == ("upheld", "analytic at paper scale", [])
    assert c.our_value == pytest.approx(78 / 196, abs=1e-4) and len(c.why) <= 200
    assert any(k.startswith("on the real photos") for k in c.details) == photos


def test_background_share_tolerance_is_a_share_of_patches():
    """The background-share claim's rule and effect are in points of background share (patches), not ImageNet top-1
    points, so no proxy sensitivity factor applies to them."""
    decl = vc.CLAIMS["varmedad.settle.background_share"]
    assert vc.BACKGROUND_RULE.unit == "points of background share" and vc.BACKGROUND_RULE.threshold == 0
    assert "background share" in decl.unit and "top-1" not in decl.unit
    assert decl.effect == settings.EFFECTS["background_share"] and decl.premises == (chosen.FINE_GRAINED_BAR,)


@pytest.mark.parametrize("rule,args,want", [
    (vc.MEDAD_R03_RULE, (-1.0, -2.0, -0.1), "reproduced"),
    (vc.MEDAD_R03_RULE, (-6.0, -7.0, -5.0), "not reproduced"),
    (vc.MEDAD_R03_RULE, (-3.0, -4.0, -2.0), "inconclusive"),
    (vc.BACKGROUND_RULE, (-10.0, -12.0, -8.0), "reproduced"),
    (vc.BACKGROUND_RULE, (5.0, 3.0, 7.0), "not reproduced"),
    (vc.BACKGROUND_RULE, (0.5, -1.0, 2.0), "inconclusive")])
def test_direction_rules_reach_every_verdict(rule, args, want):
    assert rule.decide(*args).verdict == want


def test_r07_rules():
    assert vc.R07_MACS_RULE.decide(1.52).verdict == "reproduced"
    assert vc.R07_MACS_RULE.decide(1.3).verdict == "not reproduced"
    key = "speedup vs unpruned, variance r=0.7"
    assert vc.R07_SPEED_RULE.decide({key: (1.5, 1.4, 1.6)}).verdict == "reproduced"
    assert vc.R07_SPEED_RULE.decide({key: (1.1, 1.0, 1.2)}).verdict == "not reproduced"
    assert vc.R07_SPEED_RULE.decide({key: (1.4, 1.2, 1.6)}).verdict == "inconclusive"




def test_equivalence_margin_is_below_the_effects_in_dispute():
    assert settings.EQUIV_MARGIN * 100 < 0.22 and vc.robust_rule().margin < 0.22


@pytest.mark.parametrize("factor", [0.5, 1.0, 4.0])
def test_equivalence_margins_scale_with_the_sensitivity_factor(factor):
    assert vc.robust_rule(factor).margin == pytest.approx(settings.EQUIV_MARGIN * 100 * factor)
    assert vc.medad_similar_rule(factor).margin == pytest.approx(settings.EQUIV_MARGIN * 100 * factor)


@pytest.mark.parametrize("factor", [0.0, -1.0, float("nan"), float("inf")])
def test_a_sensitivity_factor_must_be_finite_and_positive(factor):
    with pytest.raises(ValueError, match="factor"):
        vc.robust_rule(factor)


def test_cluster_bootstrap_resamples_the_clusters():
    rng = np.random.default_rng(0)
    # 5 clusters of 3 near-identical values: as 15 independent values the interval is far too narrow
    centres = rng.normal(0, 1, 5)
    v = np.repeat(centres, 3) + rng.normal(0, 0.01, 15)
    g = np.repeat(np.arange(5), 3)
    naive = intervals.bootstrap_ci(v, seed=0)
    clus = designs.cluster_bootstrap_ci(v, g, seed=0)
    assert clus.estimate == pytest.approx(v.mean())
    assert (clus.high - clus.low) > 1.4 * (naive.high - naive.low)
    single = designs.cluster_bootstrap_ci(centres, np.arange(5), seed=0)
    plain = intervals.bootstrap_ci(centres, seed=0)
    assert single.high - single.low == pytest.approx(plain.high - plain.low, rel=0.15)
    w = designs.cluster_bootstrap_ci([1.0, 2.0, np.nan, 4.0], ["a", "a", "b", "b"], seed=0)
    assert w.estimate == pytest.approx(7 / 3) and 1.0 <= w.low <= w.high <= 4.0
    assert np.isnan(designs.cluster_bootstrap_ci([np.nan], [0]).estimate)
    with pytest.raises(ValueError):
        designs.cluster_bootstrap_ci([1.0, 2.0], [0])


def _preds(correct, n=400):
    labels = torch.zeros(n, dtype=torch.long)
    logits = torch.zeros(n, 2)
    logits[~torch.as_tensor(correct), 1] = 1.0      # wrong images predict class 1
    return Predictions(logits, labels)


def _flip(correct, k, to=True, start=0):
    """``correct`` with ``k`` of its wrong (to=True) or right (to=False) images flipped."""
    out = np.array(correct, copy=True)
    idx = np.flatnonzero(out != to)[start:start + k]
    out[idx] = to
    return out


def _zero_mean_noise(base, k):
    """``base`` with ``k`` wrong images made right and ``k`` right ones made wrong: net 0, 2k discordant."""
    out = np.array(base, copy=True)
    out[np.flatnonzero(~base)[:k]] = True
    out[np.flatnonzero(base)[:k]] = False
    return out


def _cfg(**over):
    return SimpleNamespace(**{"seed": 0, "base_model": "m", "profile": "default", "temperature": 0.5, **over})


def _sensitivity_inputs(cls_scale: float):
    rng = np.random.default_rng(0)
    base = rng.random(400) < 0.8
    preds = {name: _preds(base) for name in ("variance", "variance_T1e-9", "variance_T1e3", "variance_no_fusion")}
    for locs in settings.BLOCK_ALTERNATIVES:
        for matched in (True, False):
            preds[sweep.blocks_name(locs, matched)] = _preds(base)
    table = pd.DataFrame({"config": list(preds), "keep_rate": 0.6, "gmacs": 1.0})
    rows = torch.rand(8, 4, 50, generator=torch.Generator().manual_seed(0)) * cls_scale
    cache = SimpleNamespace(cls_attn={settings.LOCS[0]: rows}, num_prefix_tokens=1)
    subj = SimpleNamespace(rank_sources={"m (trained)": cache}, n_test_split=None, base_run=None)
    return preds, table, _cfg(), subj


def test_temperature_claim_needs_a_temperature_that_moves_the_weights(monkeypatch):
    _sensitivity_factor(monkeypatch, 1.0)
    preds, table, cfg, subj = _sensitivity_inputs(1e-2)
    rep = _rep()
    sensitivity.sensitivity(rep, preds, table, 1.0, cfg, subj)
    t = _claim(rep, "varmedad.obj4.temperature_to_zero")
    assert (t.outcome, t.verdict) == ("holds", "rejected") and t.details["judged"] == ["variance_T1e-9"]
    d = sensitivity.temperature_distance(subj, "m", 0.5, {"a": 1e-9, "b": 1e3})
    assert d["a"] > settings.TV_MIN > d["b"]
    monkeypatch.setattr(sensitivity, "temperature_distance", lambda *a, **k: {"variance_T1e-9": 0.0,
                                                                               "variance_T1e3": 0.5})
    rep = _rep()
    sensitivity.sensitivity(rep, preds, table, 1.0, cfg, subj)
    t = _claim(rep, "varmedad.obj4.temperature_to_zero")       # only T -> 0 counts: T = 1000 moving is not enough
    assert t.verdict == "inconclusive" and vc.TEMPERATURE_MOVES in t.why
    assert t.details["rule alone"]["verdict"] == "holds"
    f = _claim(rep, "varmedad.obj4.temperature_at_least_1e-2")  # no photos here: nothing measured
    assert f.verdict == "not testable here" and f.our_value is None
    b = _claim(rep, "varmedad.obj4.blocks")       # judged on the MAC-matched block sets only
    assert "_matched" in b.unit and b.unit.endswith("at matched MACs")


def _photo_subjects(rows):
    """Subjects whose only ranking source is the real photos, [CLS] rows ``rows`` at every pruning block."""
    cache = SimpleNamespace(cls_attn={loc: rows for loc in settings.LOCS}, num_prefix_tokens=1)
    return SimpleNamespace(rank_sources={"photos": cache}, rank_groups={}, photo_source="photos",
                           n_test_split=None, base_run=None)


@pytest.mark.parametrize("scale,want", [(1e-2, "rejected"), (0.1, "inconclusive"), (1.0, "upheld")])
def test_temperature_at_least_1e2_is_decided_from_the_weights(scale, want):
    """Scores tiny against T = 0.01 leave the fused token a plain mean (the objection is rejected for T >= 0.01);
    scores of the order of T make the weights uneven (upheld); the claim rests on no accuracy proxy."""
    rows = torch.rand(8, 4, 50, generator=torch.Generator().manual_seed(0)) * scale
    rep = _rep(proxy_holds=False)
    table = sensitivity.temperature_flat_claim(rep, _photo_subjects(rows))
    c = _claim(rep, "varmedad.obj4.temperature_at_least_1e-2")
    assert c.verdict == want and c.premises == [] and c.our_value == pytest.approx(table.effective_share.min())
    assert set(table.block) == set(settings.LOCS) and table["T"].min() == pytest.approx(settings.T_FLAT_FROM)
    assert "49 patches" in c.statement               # 50 columns: the [CLS] column and 49 patches


def test_temperature_spread_rises_with_t():
    rows = torch.rand(8, 4, 50, generator=torch.Generator().manual_seed(1))
    cache = SimpleNamespace(cls_attn={settings.LOCS[0]: rows}, num_prefix_tokens=1)
    t = sensitivity.temperature_spread({"s": cache})
    assert "block" not in t and len(t) == 2 * len(sensitivity.T_GRID)
    for _, g in t.groupby("scorer"):
        assert (g.sort_values("T").effective_share.diff().dropna() >= -1e-12).all()
    with pytest.raises(ValueError):
        sensitivity.temperature_spread({"s": cache}, reduce="max")


def test_a_failed_calibration_premise_makes_a_claim_inconclusive(monkeypatch):
    _sensitivity_factor(monkeypatch, 1.0)
    preds, table, cfg, subj = _sensitivity_inputs(1e-2)
    rep = _rep(proxy_holds=False)
    sensitivity.sensitivity(rep, preds, table, 1.0, cfg, subj)
    f = _claim(rep, "varmedad.obj4.fusion")
    assert f.verdict == "inconclusive" and chosen.PROXY_CHOSEN in f.why and f.premises == list(vc.PROXY)


def test_robust_claim_finds_a_difference_on_the_judged_alternatives_only(monkeypatch):
    _sensitivity_factor(monkeypatch, 1.0)
    rng = np.random.default_rng(1)
    base = rng.random(2000) < 0.8
    worse = base.copy()
    worse[np.flatnonzero(base)[:300]] = False           # 15 points worse
    preds = {"variance": _preds(base, 2000), "good": _preds(base, 2000), "bad": _preds(worse, 2000)}
    rep = _rep()
    sensitivity.robust_claim(rep, preds, "varmedad.obj4.fusion", ["good", "bad"], _cfg(), _subjects(),
                             decide_on=["good"])
    assert _claim(rep, "varmedad.obj4.fusion").verdict == "rejected"
    rep = _rep()
    sensitivity.robust_claim(rep, preds, "varmedad.obj4.fusion", ["good", "bad"], _cfg(), _subjects())
    c = _claim(rep, "varmedad.obj4.fusion")
    assert c.verdict == "upheld" and c.our_value == pytest.approx(-15.0)


def test_robust_claim_files_a_design_and_can_be_not_testable(monkeypatch):
    _sensitivity_factor(monkeypatch, 1.0)
    rng = np.random.default_rng(7)
    base = rng.random(200) < 0.8
    noisy = _flip(_flip(base, 10), 10, to=False, start=5)   # 20 discordant images, net 0: not equivalent at n = 200
    preds = {"variance": _preds(base, 200), "alt": _preds(noisy, 200)}
    verdicts_ = []
    for n_max in (400, 10 ** 7):
        rep = _rep()
        sensitivity.robust_claim(rep, preds, "varmedad.obj4.fusion", ["alt"], _cfg(), _subjects(n_max))
        c = _claim(rep, "varmedad.obj4.fusion")
        verdicts_.append(c.verdict)
        assert c.design["n_max"] == n_max and c.design["effect_in_dispute"] == pytest.approx(0.2)
    assert verdicts_ == ["not testable here", "inconclusive"]


def test_robust_claim_scales_its_margin_by_the_proxy_and_needs_one(monkeypatch):
    """The margin in ImageNet points becomes factor x margin on a proxy: 40 discordant images of 2,000 with a net
    difference of 0 are not equivalent within 0.2 points but are within 10 x 0.2 = 2 points; a model with no factor
    leaves the claim not testable."""
    base = np.random.default_rng(5).random(2000) < 0.8
    preds = {"variance": _preds(base, 2000), "alt": _preds(_flip(_flip(base, 20), 20, to=False, start=5), 2000)}
    got = {}
    for factor in (1.0, 10.0, None):
        _sensitivity_factor(monkeypatch, factor)
        rep = _rep()
        sensitivity.robust_claim(rep, preds, "varmedad.obj4.fusion", ["alt"], _cfg(), _subjects(10 ** 7))
        c = _claim(rep, "varmedad.obj4.fusion")
        got[factor] = c.verdict
        if factor:
            assert c.design["effect_in_dispute"] == pytest.approx(0.2 * factor)
    assert got == {1.0: "inconclusive", 10.0: "rejected", None: "not testable here"}


def _sensitivity_factor(monkeypatch, factor):
    """The base model ``m`` as a proxy whose sensitivity factor for EViT-type claims is ``factor`` (None: not a
    proxy)."""
    monkeypatch.setattr(chosen, "sensitivity_of", lambda name, family: factor if (name, family) == ("m", "evit")
                        else None)


def test_an_evit_family_margin_on_a_proxy_has_no_factor(monkeypatch):
    """The paper's margins are EViT-type: on a proxy notebook 00 chose, whose ToMe factor exists, they have no factor
    (no verified DeiT-S reference), so the equivalence claims are inconclusive with that missing premise named (on a
    model that is not a proxy: not testable); at the paper profile the margin applies as given."""
    from tokenprune.study.proxy import plan
    from tokenprune.training.proxy import round2

    name = round2.CANDIDATES[0].name
    monkeypatch.setattr(chosen, "CHOSEN", {**chosen.CHOSEN, round2.CANDIDATES[0].role: name})
    monkeypatch.setattr(chosen, "_proxy_measurements", lambda n: {"tome_cost": 2.0, "cost@0.7": 3.0}
                        if chosen.is_proxy(n) else None)
    cfg = _cfg(base_model=name)
    assert designs.FAMILY == "evit" and chosen.sensitivity_of(name, "tome") == pytest.approx(2.0)
    assert designs.margin_factor(cfg) is None and designs.margin_factor(_cfg(profile="paper")) == 1.0
    assert plan.missing_factor("evit") in designs.no_margin_factor(cfg).why
    assert plan.missing_factor("evit") not in designs.no_margin_factor(_cfg()).why      # "m": not a proxy
    assert designs.no_margin_factor(cfg).verdict == "inconclusive"
    assert designs.no_margin_factor(_cfg()).verdict == "not testable here"
    base = np.random.default_rng(4).random(400) < 0.8
    preds = {n: _preds(base) for n in ("variance", "medad", "variance_r03", "medad_r03")}
    rep = _rep()
    sweep.variance_vs_medad(rep, preds, cfg, _subjects())
    c = _claim(rep, "varmedad.variance_vs_medad")
    assert c.verdict == "inconclusive" and c.our_value == pytest.approx(0.0)
    assert plan.missing_factor("evit") in c.why + str((c.details or {}).get("rule's reason", ""))


def test_added_claim_functions_file_their_claims(monkeypatch):
    _sensitivity_factor(monkeypatch, 2.0)
    rng = np.random.default_rng(2)
    base = rng.random(400) < 0.8
    worse = base.copy()
    worse[np.flatnonzero(base)[:60]] = False            # 15 points worse
    preds = {"unpruned": _preds(base), "variance": _preds(base), "medad": _preds(worse),
             "medad_per_head_reading": _preds(base), "variance_r03": _preds(base), "medad_r03": _preds(worse)}
    rep = _rep()
    sweep.variance_vs_medad(rep, preds, _cfg(), _subjects())
    sweep.medad_r03_claims(rep, preds, _cfg(), _subjects())
    got = {c.id: (c.outcome, c.verdict) for c in rep.claims}
    assert got["varmedad.variance_vs_medad"] == ("fails", "not reproduced")          # 15 points apart: not similar
    assert got["varmedad.medad_r03.offtheshelf"] == ("fails", "not reproduced")      # MedAD r=0.3 15 points below
    by_id = {c.id: c for c in rep.claims}
    assert by_id["varmedad.variance_vs_medad"].design["effect_in_dispute"] == pytest.approx(0.4)   # 0.2 x 2
    assert by_id["varmedad.variance_vs_medad"].paper_value == pytest.approx(0.08)
    assert by_id["varmedad.medad_r03.offtheshelf"].design["effect_in_dispute"] == pytest.approx(3.0)
    assert by_id["varmedad.medad_r03.offtheshelf"].paper_value == pytest.approx(-3.0)
    assert all(len(c.why) <= 200 for c in rep.claims)


def test_variance_vs_medad_is_similar_when_equal_and_needs_a_sensitivity_factor(monkeypatch):
    base = np.random.default_rng(4).random(400) < 0.8
    preds = {n: _preds(base) for n in ("variance", "medad", "variance_r03", "medad_r03")}
    _sensitivity_factor(monkeypatch, 1.5)
    rep = _rep()
    sweep.variance_vs_medad(rep, preds, _cfg(), _subjects())
    assert _claim(rep, "varmedad.variance_vs_medad").verdict == "reproduced"          # the same predictions
    _sensitivity_factor(monkeypatch, None)
    rep = _rep()
    sweep.variance_vs_medad(rep, preds, _cfg(), _subjects())
    c = _claim(rep, "varmedad.variance_vs_medad")
    assert c.verdict == "not testable here" and c.our_value == pytest.approx(0.0)


def _axis_rows(kind: str, n: int = 64, patches: int = 49) -> torch.Tensor:
    """[CLS] rows [n, 4 heads, 1 + patches] on which Eq. 7's two readings give unrelated ('differ') or identical
    ('same') scores."""
    g = torch.Generator().manual_seed(3)
    if kind == "differ":   # the patches' levels set the per-head reading, head noise alone the per-patch one
        level = torch.rand(n, 1, patches + 1, generator=g)
        return level + 1e-3 * torch.rand(n, 4, patches + 1, generator=g)
    # a_hp = 0.5 + s_p e_h, with e of lower median 0 over the heads and s of median 0 over the (odd) patches: both
    # medians are 0.5, so both readings score |s_p e_h|, the same numbers
    s = torch.rand(n, 1, patches + 1, generator=g) - 0.5
    s[..., 1:] -= s[..., 1:].median(dim=-1, keepdim=True).values
    e = torch.tensor([-1.0, 0.0, 1.0, 2.0]).view(1, 4, 1)
    return 0.5 + 0.1 * s * e


@pytest.mark.parametrize("kind,want", [("differ", "upheld"), ("same", "rejected")])
def test_medad_axis_is_decided_on_the_photos_kept_sets(kind, want):
    """Eq. 7's axis is filed from the real photos' kept sets, whatever the accuracy proxy's premise says."""
    rep = _rep(proxy_holds=False)
    subj = _photo_subjects(_axis_rows(kind))
    table = sweep.medad_axis(rep, {}, subj, _cfg())
    c = _claim(rep, "varmedad.eq7.median_axis")
    assert c.verdict == want and c.premises == [] and c.design is None
    assert c.our_value == pytest.approx(table.jaccard.iloc[0], abs=1e-4) and "49 patches" in c.statement
    if kind == "same":
        assert table.jaccard.iloc[0] == pytest.approx(1.0)


def test_medad_axis_without_photos_is_not_testable():
    rep = _rep()
    subj = _photo_subjects(_axis_rows("differ"))
    subj.photo_source = None
    sweep.medad_axis(rep, {}, subj, _cfg())
    assert _claim(rep, "varmedad.eq7.median_axis").verdict == "not testable here"


def test_effects_in_dispute_come_from_the_paper_numbers():
    t = VARMEDAD["matched"]["top1"]
    e = settings.EFFECTS
    assert e["variance_vs_medad"] == pytest.approx(t["attention_variance"] - t["attention_medad"])
    assert e["variance_vs_medad"] == pytest.approx(0.08)
    assert (e["variance_vs_evit"], e["variance_vs_tome"]) == (pytest.approx(0.22), pytest.approx(0.54))
    assert e["overlap_vs_unpruned"] == VARMEDAD["overlap"]["margin"]
    assert e["medad_r03"] == VARMEDAD["medad_r03"]["max_drop"]
    assert all(v > 0 for v in e.values())


def test_image_design_is_paired_per_image_correctness():
    base = np.random.default_rng(3).random(1000) < 0.7
    other = _flip(base, 50)                                     # 50 discordant images, all one way
    d = designs.image_design(_preds(other, 1000), _preds(base, 1000), n_max=10000)
    assert d.unit == "images" and d.n == 1000 and d.n_max == 10000 and d.max_scale == "the full test split"
    assert d.sd == pytest.approx(np.std(100.0 * (other.astype(float) - base), ddof=1))
    assert d.mde_at_max < d.mde
    d0 = designs.image_design(_preds(other, 1000), _preds(base, 1000))
    assert d0.n_max == 1000 and d0.mde_at_max == d0.mde


def test_seed_design_needs_two_seeds():
    assert designs.seed_design([0.5], "x") is None
    d = designs.seed_design([0.1, 0.3, 0.2], "x")
    assert d.unit == "seeds" and d.n == 3 and d.n_max == 5 and d.sd == pytest.approx(0.1)
    assert designs.seed_design([0.1] * 6, "x").n_max == 6


def test_cluster_design_uses_the_cluster_as_the_unit():
    diffs = np.array([1.0, 1.2, 0.0, 0.2, 2.0, 2.2])
    d = designs.cluster_design(diffs, ["a", "a", "b", "b", "c", "c"], "photos", 3, "the 3 photos")
    assert d.unit == "photos" and d.n == 3 and d.n_max == 3
    assert d.sd == pytest.approx(np.std([1.1, 0.1, 2.1], ddof=1))


def _design(sd, n=1000, n_max=10000):
    return Design(unit="images", n=n, sd=sd, sd_source="test", n_max=n_max, max_scale="the full test split")


def test_binding_gate_takes_the_undecided_part_with_the_largest_mde_per_effect():
    tight, wide = _design(5.0), _design(40.0)
    det, label = designs.binding_gate([("decided", 0.2, wide, True), ("open", 0.2, tight, False)])
    assert label == "open" and det.design is tight
    det, label = designs.binding_gate([("a", 0.2, tight, True), ("b", 0.2, wide, True)])
    assert label == "b"
    det, label = designs.binding_gate([("a", 0.1, tight, False), ("b", 1.0, wide, False)])
    assert label == "a"
    with pytest.raises(ValueError):
        designs.binding_gate([])


def test_variance_vs_medad_gate(monkeypatch):
    _sensitivity_factor(monkeypatch, 1.0)
    rng = np.random.default_rng(6)
    base = rng.random(400) < 0.8
    noisy = _zero_mean_noise(base, 20)                  # 40 discordant images, difference 0
    preds = {"variance": _preds(noisy), "medad": _preds(base), "variance_r03": _preds(base), "medad_r03": _preds(base)}
    got = []
    for n_max in (10000, 10 ** 9):
        rep = _rep()
        sweep.variance_vs_medad(rep, preds, _cfg(), _subjects(n_max))
        got.append(_claim(rep, "varmedad.variance_vs_medad"))
    assert got[0].verdict == "not testable here" and got[0].design["n_max"] == 10000   # +-0.2 is out of reach
    assert got[1].verdict == "inconclusive"                                             # reachable at 1e9 images


def test_matched_offtheshelf_gate_binds_on_the_open_part():
    rng = np.random.default_rng(8)
    base = rng.random(2000) < 0.7
    var = _flip(base, 300)                                   # +15 points over EViT: that part is won
    preds = {"variance": _preds(var, 2000), "evit": _preds(base, 2000), "medad": _preds(base, 2000),
             "tome": _preds(_zero_mean_noise(var, 60), 2000)}   # ToMe: open, 120 discordant images, net 0
    table = pd.DataFrame({"config": ["evit", "tome", "medad"], "gmacs": [1.0, 1.0, 1.0]})
    rep = _rep()
    sweep.matched_offtheshelf(rep, preds, table, SimpleNamespace(rel_error=0.0), _cfg(), _subjects(2000))
    c = _claim(rep, "varmedad.obj7.offtheshelf_matched")
    assert c.verdict == "not testable here" and "variance vs tome" in c.why
    assert c.design["effect_in_dispute"] == pytest.approx(0.54) and c.paper_value == pytest.approx(0.54)
    preds["tome"] = preds["evit"]          # won on both parts: the paper's side holds whatever the power
    rep = _rep()
    sweep.matched_offtheshelf(rep, preds, table, SimpleNamespace(rel_error=0.0), _cfg(), _subjects(2000))
    assert _claim(rep, "varmedad.obj7.offtheshelf_matched").verdict == "rejected"


# ---------------------------------------------------------------------------------------------- fine-tuned margins
def _finetunes(ft: dict, refs: dict, n=4000, runs=None) -> finetunes.Finetunes:
    return finetunes.Finetunes(pd.DataFrame(), ft, refs, 60000, n, runs or {}, "the setting")


def _margin_inputs(moved: bool, gains=(72, 80, 88), seeds=(0, 1, 2)):
    """Fine-tuned variance and EViT on 4000 images: EViT 1 point below the fine-tuned start, variance ``gains[i]``
    images (40 = 1 point) above EViT at seed i; the fine-tuned start is 5 points above the off-the-shelf models
    when ``moved``, the same model otherwise."""
    n = 4000
    ots = np.arange(n) < 2400
    ft_base = ots.copy()
    if moved:
        ft_base[2400:2600] = True
    ft = {}
    for i, s in enumerate(seeds):
        ev = ft_base.copy()
        ev[:40] = False
        va = ev.copy()
        g = gains[i]
        if g >= 0:
            va[3000:3000 + g] = True
        else:
            va[100:100 - g] = False
        ft[("evit", s)], ft[("variance", s)] = _preds(ev, n), _preds(va, n)
    cfg = _cfg(finetune_configs=["variance", "evit"], finetune_steps=2000, finetune_batch=32, finetune_lr=3e-4,
               seeds=list(seeds))
    return _finetunes(ft, {"variance": _preds(ots, n), "evit": _preds(ots, n)}), cfg


@pytest.mark.parametrize("moved,gains,seeds,want", [
    (True, (72, 80, 88), (0, 1, 2), "rejected"),                  # +1.8/+2.0/+2.2 points: the margin holds
    (True, (-88, -80, -72), (0, 1, 2), "upheld"),
    (False, (72, 80, 88), (0, 1, 2), "inconclusive"),             # the fine-tuning did not move the model
    (True, (80,), (0,), "inconclusive"),                          # one seed
    (True, (-40, 80, 200), (0, 1, 2), "not testable here"),       # 5 seeds cannot detect 0.22
])
def test_margin_claim_verdicts(moved, gains, seeds, want):
    ft, cfg = _margin_inputs(moved, gains, seeds)
    rep = _rep()
    margins.margin_claim(rep, ft, cfg, "varmedad.obj5.variance_vs_evit")
    c = _claim(rep, "varmedad.obj5.variance_vs_evit")
    assert c.verdict == want and c.paper_value == pytest.approx(0.22) and len(c.why) <= 200
    if not moved:
        assert c.why.startswith(f"premise failed: {vc.MOVED}")
    if len(seeds) == 1:
        assert c.why.startswith(f"premise failed: {vc.SEEDS}") or c.design is None
    if len(seeds) > 1:
        assert c.design["unit"] == "seeds" and c.design["effect_in_dispute"] == pytest.approx(0.22)
    else:
        assert c.design is None


def test_margin_claim_medad_r03_and_unrun_configs():
    n = 4000
    ots = np.arange(n) < 2000
    ft = {}
    for s, k in zip((0, 1, 2), (76, 80, 84)):                   # -1.9/-2.0/-2.1 points
        un = ots.copy()
        un[2000:2400] = True
        md = un.copy()
        md[:k] = False
        ft[("unpruned", s)], ft[("medad_r03", s)] = _preds(un, n), _preds(md, n)
    cfg = _cfg(finetune_configs=["medad_r03", "unpruned"], finetune_steps=128, seeds=[0, 1, 2])
    rep = _rep(proxy_holds=False)       # a claim not measured is not testable whatever the premises
    rep2 = _rep()
    margins.margin_claim(rep2, _finetunes(ft, {"medad_r03": _preds(ots, n)}), cfg, "varmedad.medad_r03.finetuned")
    c = _claim(rep2, "varmedad.medad_r03.finetuned")
    assert c.verdict == "reproduced" and c.our_value == pytest.approx(-2.0) and c.paper_value == -3.0
    assert c.design["effect_in_dispute"] == pytest.approx(3.0)
    margins.margin_claim(rep, _finetunes(ft, {}), _cfg(finetune_configs=["variance"], finetune_steps=128,
                                                       seeds=[0]), "varmedad.medad_r03.finetuned")
    assert _claim(rep, "varmedad.medad_r03.finetuned").verdict == "not testable here"


_ROUND3 = "s14d_fmnist112_full"   # round 3's first candidate: a proxy with no cached fine-tunes


def test_a_base_model_without_cached_runs_trains_none_at_default(monkeypatch):
    cfg = params.setup("03_variance_medad", "default", {"base_model": _ROUND3})
    assert finetunes.missing_runs(params.setup("03_variance_medad", "default", {})) is None   # cached
    assert finetunes.missing_runs(params.setup("03_variance_medad", "smoke", {"base_model": _ROUND3})) is None
    missing = finetunes.missing_runs(cfg)
    assert missing.runs == len(cfg.finetune_configs) * len(cfg.seeds) == 30
    assert missing.images == cfg.finetune_steps * cfg.finetune_batch == 16384 and missing.hours > 1
    monkeypatch.setattr(finetunes.cached, "outputs", lambda *a, **kw: pytest.fail("nothing is trained"))
    subj = SimpleNamespace(base_ds={"train": [0] * 54000}, y_eval=torch.zeros(1000, dtype=torch.long))
    ft = finetunes.finetune_all(subj, None, cfg, "cpu")
    assert ft.missing == missing and ft.table.empty and not ft.preds
    rep = _rep()
    assert margins.margin_claims(rep, ft, cfg).empty
    for cid in margins.MARGINS:
        c = _claim(rep, cid)
        assert c.verdict == "not testable here" and vc.MOVED in c.details["failed premises"], cid
        assert "30 runs" in c.details["failed premises"][vc.MOVED] and "30 runs" in c.why and len(c.why) <= 200
        assert c.details["training images each"] == 16384 and c.details["seeds"] == [0, 1, 2, 3, 4]
        assert c.details["estimated training hours on this CPU"] == round(missing.hours, 2)
    assert _claim(rep, "varmedad.obj5.variance_vs_evit").paper_value == pytest.approx(0.22)


def test_overlap_claim_needs_a_fine_tune_that_trains_the_embeddings():
    ft, cfg = _margin_inputs(True)
    cfg.finetune_configs = ["overlap_variance", "unpruned"]
    preds = {("overlap_variance" if k[0] == "variance" else "unpruned", k[1]): v for k, v in ft.preds.items()}
    ft = _finetunes(preds, {"overlap_variance": ft.refs["variance"]})
    for base, want in (("vit_s14_fmnist_ft", "inconclusive"), ("deit_s_imagenet100", "rejected")):
        cfg.base_model = base                               # the proxy trains only its tail; DeiT-S everything
        rep = _rep()
        margins.margin_claim(rep, ft, cfg, "varmedad.obj5.overlap_vs_unpruned")
        c = _claim(rep, "varmedad.obj5.overlap_vs_unpruned")
        assert c.verdict == want, (base, c.why)
        if want == "inconclusive":
            assert c.why.startswith(f"premise failed: {vc.TRAINS_OVERLAP}")


# ---------------------------------------------------------------------------------------------- cached fine-tunes
def _tiny_subjects():
    """A 12-block, 16-wide timm ViT on 28 px and a 256/32-image split in the layout finetune_all reads."""
    import datasets
    from timm.models.vision_transformer import VisionTransformer

    from tokenprune.training.sources import Preprocess
    from tokenprune.training.recipe import TrainRecipe

    rng = np.random.default_rng(0)

    def split(n):
        return datasets.Dataset.from_dict({"image": rng.integers(0, 255, (n, 28, 28), dtype=np.uint8).tolist(),
                                           "label": rng.integers(0, 3, n).tolist()},
                                          features=datasets.Features({"image": datasets.Array2D((28, 28), "uint8"),
                                                                      "label": datasets.Value("int64")}))
    rec = TrainRecipe(name="tiny", arch={"builder": "timm_vit"}, img_size=28, epochs=1.0, batch_size=16)
    base = VisionTransformer(img_size=28, patch_size=7, in_chans=1, num_classes=3, embed_dim=16, depth=12,
                             num_heads=2).eval()
    base.tp_preprocess = Preprocess.from_recipe(rec)
    return SimpleNamespace(base=base, ft_start=base, base_recipe=rec, base_ds={"train": split(256), "test": split(32)},
                           x_eval=None, y_eval=None)


def test_finetune_all_at_default_loads_its_cached_outputs_and_refuses_missing_ones(tmp_path, monkeypatch):
    from tokenprune.training import checkpoints

    monkeypatch.setattr(checkpoints, "checkpoint_dir", lambda profile="default": tmp_path)
    small = dict(steps=2, batch=16, dtype="fp32")
    runs = cached_finetunes.FinetuneRuns(**{**vars(cached_finetunes.VARMEDAD), **small,
                                            "configs": ("variance", "unpruned"), "seeds": (0,)})
    monkeypatch.setattr(cached_finetunes, "VARMEDAD", runs)     # the cached settings, on a tiny model
    s = _tiny_subjects()
    cfg = params.setup("03_variance_medad", "default", {"finetune_configs": ["variance", "unpruned"], "seeds": [0],
                                                        "finetune_steps": 2, "finetune_batch": 16})
    tome = sweep.sweep_configs(s.base, 0.5, [0.6]).tome_match.config
    x_u8, y = cached_finetunes.as_tensors(s.base_ds["test"])
    built = cached_finetunes.outputs(runs, s.base, s.base_recipe, s.base_ds, tome, lambda: s.base.tp_preprocess(x_u8),
                                     y, cache_dir=tmp_path, build=True, images_note="test")
    assert [(o.config, o.trained, o.info["loaded"]) for o in built] == [("variance", False, False),
                                                                      ("variance", True, False),
                                                                      ("unpruned", True, False)]
    assert all(len(o.info["weights_sha256"]) == 64 for o in built)
    ft = finetunes.finetune_all(s, tome, cfg, "cpu")
    assert ft.table.loaded.all() and ft.n_train_rows == 256 and ft.n_test == 32 and set(ft.refs) == {"variance"}
    assert np.array_equal(ft.preds[("variance", 0)].logits.numpy(), built[1].arrays["logits"].astype(np.float32))
    for f in tmp_path.glob("vm_ft_unpruned_s0-*.npz"):
        f.unlink()
    with pytest.raises(checkpoints.CheckpointMissingError, match="make models"):
        finetunes.finetune_all(s, tome, cfg, "cpu")
    other = params.setup("03_variance_medad", "default", {"finetune_configs": ["unpruned"], "seeds": [0],
                                                          "finetune_steps": 1, "finetune_batch": 16})
    before = sorted(tmp_path.iterdir())
    ft3 = finetunes.finetune_all(s, tome, other, "cpu")       # another setting: trained here and not kept
    assert not ft3.table.loaded.any() and sorted(tmp_path.iterdir()) == before


# ---------------------------------------------------------------------------------------------- paper profile
_TOME = PruneConfig("cls_attention", "bipartite", 0.93, tuple(range(1, 13)), prop_attn=True, name="tome")


def _paper_runs(T=0.5):
    cfg = params.setup("03_variance_medad", "paper", {"temperature": T})
    return finetunes.finetune_runs(cfg)


def _run_of(spec, shortened: bool) -> paper_runs.TrainedRun:
    lim = {"batch_per_process": 2, "steps_per_epoch": 1, "epochs": 1} if shortened else {}
    summary = {"history": [{}] * (1 if shortened else 30), "recipe_epochs": 30, "shortened": shortened,
               "limits": {"batch_per_process": None, "steps_per_epoch": None, "epochs": None, "eval_images": None,
                          "workers": 0, **lim}, "steps_per_epoch": 1 if shortened else 61, "global_batch": 2,
               "lr": 1e-7}
    return paper_runs.TrainedRun(spec, None, "trained", summary, f"runs/{spec.name}")


def _paper_cfg(**over):
    return SimpleNamespace(**{"profile": "paper", "base_model": "deit_s_imagenet100", "temperature": 0.5,
                              **paper_runs.TRAINING_SETTINGS, **over})


def test_paper_temperature_is_one_the_recipe_trains():
    assert finetunes.paper_temperatures() == [0.1, 0.5, 1.0, 2.0]
    cfg = params.setup("03_variance_medad", "paper", {"temperature": 0.3})
    with pytest.raises(ValueError, match=r"temperature: .*varmedad_deit_s_imagenet100.*fusion_temperature"):
        subjects.start(cfg)
    threads = torch.get_num_threads()
    with torch.random.fork_rng(devices=[]):
        try:
            subjects.start(params.setup("03_variance_medad", "default", {"temperature": 0.3}))
        finally:
            torch.set_num_threads(threads)


def test_paper_runs_are_the_recipe_runs_one_per_configuration():
    names = list(cached_finetunes.CONFIGS)
    runs = _paper_runs()
    specs = {n: finetunes.paper_ft_spec(runs, n, 1, _TOME) for n in names}
    assert len({s.name for s in specs.values()}) == len({s.spec_hash() for s in specs.values()}) == len(names)
    assert all(s.recipe == settings.PAPER_RECIPE and s.seed == 1 and s["num_classes"] == 100 for s in specs.values())
    assert {n: s.keep_rate for n, s in specs.items()} == {"variance": 0.6, "medad": 0.6, "evit": 0.6, "tome": 0.93,
                                                          "unpruned": 1.0, "overlap_variance": 0.6, "medad_r03": 0.3}
    assert specs["variance"].tag == "variance_T0.5" and specs["evit"].tag == "evit"
    other = _paper_runs(1.0)
    assert finetunes.paper_ft_spec(other, "variance", 1, _TOME).name != specs["variance"].name
    assert finetunes.paper_ft_spec(other, "evit", 1, _TOME).spec_hash() == specs["evit"].spec_hash()
    with pytest.raises(ValueError, match="0 runs match"):
        finetunes.paper_ft_spec(_paper_runs(0.3), "evit", 1, _TOME)


def test_ft_prepare_gives_the_overlap_embedding_and_the_configuration():
    from tokenprune.training.paper_training import run_model

    runs = _paper_runs()
    for name, patches, keep in (("overlap_variance", 18 * 18, 0.6), ("unpruned", 196, 1.0)):
        spec = finetunes.paper_ft_spec(runs, name, 0, _TOME)
        m = finetunes.ft_prepare(runs, name, _TOME)(run_model(spec, 100, load_init=False))
        assert m.patch_embed.num_patches == patches and prune_state(m).schedule.at(3) == pytest.approx(keep)


def test_paper_data_must_have_the_recipe_classes(tmp_path):
    from PIL import Image

    for split in ("train", "val"):
        for wnid in ("n01440764", "n99999999"):
            (tmp_path / split / wnid).mkdir(parents=True)
            Image.new("RGB", (8, 8)).save(tmp_path / split / wnid / "a.JPEG")
    with pytest.raises(ValueError, match=r"data_root: .* 2 classes .*num_classes 100.*imagenet100_cmc.txt"):
        subjects._paper_data(SimpleNamespace(data_root=str(tmp_path)))


@pytest.mark.parametrize("profile,shortened,want_id,want", [
    ("default", True, "varmedad.obj5.variance_vs_evit", "rejected"),       # no runs read at default
    ("paper", True, "varmedad.paper_scale.obj5.variance_vs_evit", "inconclusive"),
    ("paper", False, "varmedad.paper_scale.obj5.variance_vs_evit", "rejected"),
])
def test_paper_margin_claim_has_its_own_id_and_needs_whole_runs(profile, shortened, want_id, want):
    ft, cfg = _margin_inputs(True)
    cfg = SimpleNamespace(**{**vars(_paper_cfg(train_epochs=1 if shortened else 0)), **vars(cfg), "profile": profile})
    runs = _paper_runs()
    ft.runs = {k: _run_of(finetunes.paper_ft_spec(runs, k[0], k[1], _TOME), shortened) for k in ft.preds}
    rep = _rep()
    margins.margin_claim(rep, ft, cfg, "varmedad.obj5.variance_vs_evit")
    c = rep.claims[0]
    assert c.id == want_id and c.verdict == want
    assert c.setting == ("paper-scale run" if profile == "paper" else "proxy")
    if want == "inconclusive":
        assert c.why.startswith(f"premise failed: {paper_runs.FULL_SCHEDULE}")


def test_paper_top1_claims_have_their_own_ids_and_need_whole_runs():
    runs = _paper_runs()
    table = pd.DataFrame([{"config": "variance", "seed": s, "top1": t} for s, t in zip((0, 1, 2), (0.85, 0.86, 0.87))])
    for shortened, want in ((True, "inconclusive"), (False, "reproduced")):
        ft = finetunes.Finetunes(table, {}, {}, 100, 10, {("variance", s): _run_of(
            finetunes.paper_ft_spec(runs, "variance", s, _TOME), shortened) for s in (0, 1, 2)}, "the recipe")
        rep = _rep()
        margins.top1_claims(rep, ft, _paper_cfg())
        claims = {c.id: c for c in rep.claims}
        assert claims["varmedad.paper_scale.top1.attention_variance"].verdict == want       # 86 in [85, 87]
        assert claims["varmedad.paper_scale.top1.evit"].verdict == "not testable here"
        assert not any(".top1." in i and ".paper_scale." not in i for i in claims)
    rep = _rep()
    margins.top1_claims(rep, ft, _cfg())
    assert all(c.id.startswith("varmedad.top1.") and c.verdict == "not testable here" for c in rep.claims)
    assert len(rep.claims) == 6


def test_paper_setting_states_the_recipe_and_its_limits():
    whole = finetunes.ft_setting(_paper_cfg(), 126_689)
    assert "varmedad_deit_s_imagenet100" in whole and "30 epochs" in whole and "shortened" not in whole
    short = finetunes.ft_setting(_paper_cfg(train_batch_per_process=2, train_steps_per_epoch=1), 100)
    assert "{'batch_per_process': 2, 'steps_per_epoch': 1}" in short


def test_given_finetune_names_the_users_checkpoint(tmp_path):
    cfg = SimpleNamespace(ft_weights_dir=str(tmp_path))
    assert finetunes.given_finetune(cfg, "variance", 1) is None
    (tmp_path / "variance_s1.pth").write_bytes(b"")
    assert finetunes.given_finetune(cfg, "variance", 1) == str(tmp_path / "variance_s1.pth")
    assert finetunes.given_finetune(SimpleNamespace(ft_weights_dir=""), "variance", 1) is None


# ---------------------------------------------------------------------------------------------- declared and filed
def coverage(claims: list, profile: str) -> tuple[list, list]:
    """(filed claims without a declaration, declarations not filed though run at ``profile``): the paper-scale
    declarations are filed at ``paper`` only, their proxy twins everywhere else."""
    import re

    patterns = {d: re.compile("^" + re.sub(r"\\\{[^}]*\\\}", ".+", re.escape(d)) + "$") for d in vc.CLAIMS}
    filed = {c["id"] for c in claims}
    undeclared = sorted(i for i in filed if not any(p.match(i) for p in patterns.values()))
    scale = f".{paper_runs.PAPER_SCALE}."
    run = [d for d in vc.CLAIMS if (scale in d) == (profile == "paper")
           and not (profile == "paper" and paper_runs.paper_scale_id(d) in vc.CLAIMS)]
    unfiled = sorted(d for d in run if not any(patterns[d].match(i) for i in filed))
    return undeclared, unfiled


def test_the_committed_default_report_files_every_declaration():
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "reports" / "03_variance_medad" / "results.json"
    assert coverage(json.loads(path.read_text())["claims"], "default") == ([], [])
    assert coverage([{"id": "varmedad.obj9.unknown"}], "default")[0] == ["varmedad.obj9.unknown"]
