"""The decoupling study's rules give the verdicts of the notebook's former if/elif ladders; its statistics, designs and
premises; and its claims filed from their declarations."""
from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from tokenprune.study import params, report
from tokenprune.study.proxy.chosen import FINE_GRAINED_BAR, PROXY_CHOSEN
from tokenprune.study.decoupling import claims as cl
from tokenprune.study.decoupling import evidence, filing, measurements as meas, settings as st
from tokenprune.study.verdicts import Premise

R, NR, I = "reproduced", "not reproduced", "inconclusive"
MARGIN = 1.0


def iv(e, lo, hi):
    return SimpleNamespace(estimate=e, low=lo, high=hi)


# the ladders as the notebook wrote them before the verdict engine (the reference)
def old_gain(d, seeds_ok):
    if d.low > 0 and seeds_ok:
        return R
    return NR if d.high < MARGIN else I


def within(dd):
    return -MARGIN < dd.low and dd.high < MARGIN


def old_intermediate(g_m, d_e, d_l):
    if g_m.low > 0 and d_e.low > 0 and d_l.low > 0:
        return R
    if d_e.high < 0 or d_l.high < 0 or (within(d_e) and within(d_l)):
        return NR
    return I


def old_low_keep(g_m, d_k):
    if g_m.low > 0 and d_k.low > 0:
        return R
    return NR if d_k.high < 0 or within(d_k) else I


def old_capacity(d, ctrl):
    if all(dd.low > 0 for dd in ctrl.values()) and d.low > 0:
        return R
    if any(dd.high < 0 for dd in ctrl.values()) or any(within(dd) for dd in ctrl.values()):
        return NR
    return I


def old_larger(equivalent, d, dl):
    if equivalent and d.low > 0:
        return R
    return NR if dl.low > MARGIN else I


def old_faith(equivalent, lo90, hi90, m):
    if equivalent:
        return R
    return NR if (lo90 > m or hi90 < -m) else I


# intervals around the thresholds 0 and +-1
POINTS = [-1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5]
IVS = [iv((lo + hi) / 2, lo, hi) for lo, hi in itertools.combinations_with_replacement(POINTS, 2)]


def _rules(cfg) -> dict:
    seeds, m = len(cfg.seeds), cfg.margin
    return {"coverage_gain": cl.coverage_gain_rule(seeds), "coverage_better": cl.coverage_better_rule(seeds, m),
            "beats_centre_prior": cl.BEATS_CENTRE_RULE,
            "centre_prior_everywhere": cl.centre_prior_everywhere_rule(len(cfg.blocks) * len(cfg.keep_rates), m),
            "decoupled": cl.DECOUPLED_RULE, "decoupled_equal_keep": cl.DECOUPLED_EQUAL_KEEP_RULE,
            "early_late_null": cl.early_late_null_rule(m), "human_features": cl.human_features_rule(seeds, m),
            "just_as_fast": cl.JUST_AS_FAST_RULE, "equal_faithfulness": cl.equal_faithfulness_rule(m),
            "just_as_accurate": cl.just_as_accurate_rule(m),
            "intermediate_layer": cl.intermediate_layer_rule(m), "low_keep_rate": cl.low_keep_rate_rule(m),
            "larger_model_null": cl.larger_model_null_rule(m)}


@pytest.fixture(scope="module")
def rules():
    cfg = params.setup("04_decoupling", "smoke", {"margin": MARGIN})
    d = st.Layout(2, 6, 10, 0.25, 0.7, MARGIN / 100)
    return cfg, d, _rules(cfg)


# intervals around the 6-point threshold of "more than six percentage points"
T = cl.GAIN_THRESHOLD_PP
IVS_T = [iv((lo + hi) / 2, lo, hi) for lo, hi in itertools.combinations_with_replacement([0.0, T - 1, T, T + 1, T + 3], 2)]


def test_gain_and_centre(rules):
    _, _, r = rules
    assert T == 6.0
    for g in IVS + IVS_T:
        for ok in (True, False):
            # the sign reading (the old rule) is now coverage_better; coverage_gain is the threshold reading
            assert r["coverage_better"].decide({"gap": g, "seeds_positive": ok}).verdict == old_gain(g, ok)
            want = R if (g.low > T and ok) else NR if g.high < T else I
            assert r["coverage_gain"].decide({"gap": g, "seeds_positive": ok}).verdict == want
    # a sign-only gain (the default run's 4.5 [3.88, 5.11]) no longer reproduces the "more than six points" claim
    assert r["coverage_gain"].decide({"gap": iv(4.5, 3.88, 5.11), "seeds_positive": True}).verdict == NR
    assert r["coverage_better"].decide({"gap": iv(4.5, 3.88, 5.11), "seeds_positive": True}).verdict == R
    for g in IVS:
        want = R if g.low > 0 else NR if g.high < 0 else I
        assert r["beats_centre_prior"].decide(g.estimate, g.low, g.high).verdict == want


def test_intermediate_and_low_keep(rules):
    _, _, r = rules
    for g, a, b in itertools.product(IVS[::3], IVS, IVS[::2]):
        got = r["intermediate_layer"].decide({"gap(intermediate)": g, "gap(intermediate) - gap(early)": a,
                                              "gap(intermediate) - gap(late)": b}).verdict
        assert got == old_intermediate(g, a, b)
    for g, a in itertools.product(IVS, IVS):
        got = r["low_keep_rate"].decide({"gap(low keep)": g, "gap(low keep) - gap(high keep)": a}).verdict
        assert got == old_low_keep(g, a)


def test_capacity(rules):
    for g, a, b in itertools.product(IVS[::3], IVS, IVS[::2]):
        for ctrl in ({"mimic": a}, {"mimic": a, "task": b}):
            got = cl.capacity_control_rule(list(ctrl), MARGIN).decide(
                {"sensitivity - cls_attention": g, **{f"sensitivity - {c}": v for c, v in ctrl.items()}}).verdict
            assert got == old_capacity(g, ctrl)


def test_larger_and_faithfulness(rules):
    _, d, r = rules
    for eq, g, dl in itertools.product((True, False), IVS, IVS):
        got = r["larger_model_null"].decide({"tost_equivalent": eq, "small-model gap": g, "larger-model gap": dl})
        assert got.verdict == old_larger(eq, g, dl)
    for eq, lo, hi in itertools.product((True, False), np.linspace(-0.02, 0.02, 9), np.linspace(-0.02, 0.02, 9)):
        if lo > hi:
            continue
        got = r["equal_faithfulness"].decide({"equivalent": eq, "agreement difference (fraction)": (0.0, lo, hi)})
        assert got.verdict == old_faith(eq, lo, hi, d.margin_frac)
        got = r["just_as_accurate"].decide({"equivalent": eq, "top-1 difference (fraction)": (0.0, lo, hi)})
        assert got.verdict == old_faith(eq, lo, hi, d.margin_frac)


def test_every_parameter_has_a_meaning():
    for prof in ("smoke", "default", "paper"):
        assert set(st.PROFILES[prof]) == set(st.PARAMETERS)
        params.setup("04_decoupling", prof)


# ----------------------------------------------------------------------------------------------
# every rule driven to each verdict it can give
# ----------------------------------------------------------------------------------------------


def _measurements(per, keep_idx=None, seeds=(0,), n_boot=200):
    return meas.Measurements(per, keep_idx or {}, list(seeds), n_boot, 0)


def test_centre_prior_everywhere(rules):
    cfg, _, r = rules
    rule = r["centre_prior_everywhere"]
    k = len(cfg.blocks) * len(cfg.keep_rates)
    assert rule.reproduced[0].level == pytest.approx(100 * (1 - 0.05 / k), abs=0.005)
    fam = lambda *ivs: [(2, 0.25, v) for v in ivs]  # noqa: E731
    assert rule.decide(meas.centre_values(fam(iv(1, 0.5, 1.5), iv(0, -0.5, 0.5)))).verdict == R
    assert rule.decide(meas.centre_values(fam(iv(1, 0.5, 1.5), iv(-19.5, -21.1, -18.0)))).verdict == NR
    assert rule.decide(meas.centre_values(fam(iv(1, 0.5, 1.5), iv(-1.0, -2.0, 0.0)))).verdict == I


def test_centre_family_is_bonferroni_over_configurations():
    rng = np.random.default_rng(0)
    n = 64
    per = {}
    for b in (2, 6):
        for kp in (0.25, 0.7):
            per[("x", b, kp, "sensitivity", 0)] = {"cov": rng.random(n)}
            per[("x", b, kp, "centre", -1)] = {"cov": rng.random(n)}
    m = _measurements(per)
    fam = meas.centre_family(m, "x", [2, 6], [0.25, 0.7])
    assert len(fam) == 4 and all(v.level == pytest.approx(1 - 0.05 / 4) for _, _, v in fam)
    one = meas.intervals.paired_bootstrap_diff(100 * per[("x", 2, 0.25, "sensitivity", 0)]["cov"],
                                              100 * per[("x", 2, 0.25, "centre", -1)]["cov"], n_boot=200, seed=0)
    assert fam[0][2].high - fam[0][2].low > one.high - one.low  # wider than the single 95 % interval


def test_decoupled_rules(rules):
    _, _, r = rules
    for key, name in (("decoupled", "rank correlation"), ("decoupled_equal_keep", "mean within-keep-rate rank correlation")):
        rule = r[key]
        assert rule.decide({name: (0.0, -0.1, 0.15)}).verdict == R
        assert rule.decide({name: (0.48, 0.40, 0.53)}).verdict == NR
        assert rule.decide({name: (0.1, -0.1, 0.3)}).verdict == I
        assert rule.decide({name: (-0.5, -0.6, -0.3)}).verdict == I  # opposed: not 'decoupled', nor 'coupled'


def _config_measurements(coupled: bool, n=48, seed=0):
    """Configurations (3 blocks x 2 keep rates x 3 scorers) whose per-image agreement follows coverage (coupled) or
    is drawn independently of it (each image's agreement the same in every configuration: constant means within
    a keep rate would have no rank; so independent noise per configuration)."""
    rng = np.random.default_rng(seed)
    per = {}
    for b in (2, 6, 10):
        for kp in (0.25, 0.7):
            for i, sc in enumerate(("cls_attention", "random", "centre")):
                c = np.clip(rng.normal(0.2 + 0.05 * (b + 3 * i) + kp, 0.05, n), 0, 1)
                a = (rng.random(n) < (c if coupled else 0.5)).astype(float)
                per[("x", b, kp, sc, -1)] = {"cov": c, "agree": a}
    return _measurements(per, n_boot=300)


def test_decoupling_stats_on_constructed_data(rules):
    _, _, r = rules
    stats = meas.decoupling_stats(_config_measurements(True, n=400), "x", [0.25, 0.7], 300, 0)
    assert stats.n_configs == 18 and stats.n_strata == 2 and stats.strata == {0.25: 9, 0.7: 9}
    assert r["decoupled"].decide({"rank correlation": stats.pooled}).verdict == NR
    assert r["decoupled_equal_keep"].decide({"mean within-keep-rate rank correlation": stats.stratified}).verdict == NR
    e, lo, hi = stats.stratified
    assert lo <= e <= hi
    # too few configurations: NaN, which the claim's premise turns into inconclusive
    few = meas.Measurements({k: v for k, v in list(_config_measurements(False).per.items())[:3]}, {}, [0], 100, 0)
    stats = meas.decoupling_stats(few, "x", [0.25, 0.7], 100, 0)
    assert stats.n_configs == 3 and stats.n_strata == 0 and all(np.isnan(stats.pooled))
    assert all(np.isnan(stats.stratified))


def test_stratified_spearman_is_the_mean_of_the_strata():
    rng = np.random.default_rng(2)
    cov, agr = rng.random((10, 30)), (rng.random((10, 30)) < 0.6).astype(float)
    s1, s2 = np.arange(5), np.arange(5, 10)
    e, lo, hi = meas.stratified_spearman_boot(cov, agr, [s1, s2], 200, np.random.default_rng(0))
    e1 = meas.spearman_boot(cov[s1], agr[s1], 10, np.random.default_rng(0))[0]
    e2 = meas.spearman_boot(cov[s2], agr[s2], 10, np.random.default_rng(0))[0]
    assert e == pytest.approx((e1 + e2) / 2) and lo <= hi
    assert all(np.isnan(meas.stratified_spearman_boot(cov, agr, [], 10, np.random.default_rng(0))))


def test_early_late_null(rules):
    _, _, r = rules
    rule = r["early_late_null"]
    small, big = iv(0.1, -0.5, 0.6), iv(5, 3, 7)
    assert rule.decide({"early_equivalent": True, "late_equivalent": True, "gap(early)": small, "gap(late)": small}).verdict == R
    assert rule.decide({"early_equivalent": True, "late_equivalent": False, "gap(early)": small, "gap(late)": big}).verdict == NR
    assert rule.decide({"early_equivalent": False, "late_equivalent": True, "gap(early)": iv(-5, -7, -3),
                        "gap(late)": small}).verdict == NR
    assert rule.decide({"early_equivalent": False, "late_equivalent": True, "gap(early)": iv(0.5, -1, 2),
                        "gap(late)": small}).verdict == I


def test_human_features_rule_and_stand_in(rules):
    _, _, r = rules
    rule = r["human_features"]
    name = "gap (class-defining parts)"
    assert rule.decide({name: iv(5, 2, 8), "seeds_positive": True}).verdict == R
    assert rule.decide({name: iv(5, 2, 8), "seeds_positive": False}).verdict == I
    assert rule.decide({name: iv(0, -0.5, 0.5), "seeds_positive": True}).verdict == NR
    assert Premise("stand-in", holds=False).gate(rule.decide({name: iv(5, 2, 8), "seeds_positive": True})).verdict == I
    # coverage of the class-defining parts only (beak, tail, crest), through the kept tokens
    from tokenprune.data import synthetic
    n_tok, K = 4, synthetic.N_PARTS
    parts = np.zeros((2, K, n_tok), dtype=bool)
    for p, t in (("beak", 0), ("tail", 1), ("crest", 2), ("body", 3)):
        parts[:, synthetic.PART_NAMES.index(p) - 1, t] = True
    parts[1] = False  # image 1: nothing annotated
    S = SimpleNamespace(parts=torch.as_tensor(parts), patch_tokens=n_tok, name="parts/small")
    got = meas.class_part_coverage(S, torch.tensor([[0, 3], [0, 3]]), "parts")
    assert got[0] == pytest.approx(1 / 3) and np.isnan(got[1])  # the body patch does not count


def test_human_features_values_per_seed():
    from tokenprune.data import synthetic
    n_tok, K, B = 4, synthetic.N_PARTS, 6
    parts = np.zeros((B, K, n_tok), dtype=bool)
    parts[:, synthetic.PART_NAMES.index("beak") - 1, 0] = True
    S = SimpleNamespace(parts=torch.as_tensor(parts), patch_tokens=n_tok, name="parts/small")
    keep = {("parts/small", "cls_attention", -1): torch.full((B, 1), 3),
            ("parts/small", "sensitivity", 0): torch.zeros((B, 1), dtype=torch.long),
            ("parts/small", "sensitivity", 1): torch.zeros((B, 1), dtype=torch.long)}
    m = _measurements({}, keep, seeds=(0, 1))
    hf = meas.human_features_values(S, m, SimpleNamespace(seeds=[0, 1], coverage_variant="parts"))
    assert (hf.positive, hf.seeds, hf.n_valid) == (2, 2, B) and hf.gap.estimate == pytest.approx(100)
    assert (hf.coverage_head, hf.coverage_cls) == (100, 0)
    assert np.allclose(hf.x, 1) and np.allclose(hf.y, 0)  # the per-image coverages the claim's design is built from


OUR_HEAD_PARAMS = 1000


def _macs_table(extra_gmacs):
    rows = []
    for arch, unpruned in (("deit_small_patch16_224", 4.6), ("deit_base_patch16_224", 17.6)):
        for keep, pruned in ((0.5, 0.6 * unpruned), (0.7, 0.8 * unpruned)):
            rows.append({"setting": "paper scale (224 px)", "model": arch, "keep_rate": keep,
                         "head_params": OUR_HEAD_PARAMS,
                         "model_gmacs_unpruned": unpruned, "model_gmacs_pruned_cls_attention": pruned,
                         "model_gmacs_pruned_learned": pruned + extra_gmacs * unpruned / 4.6})
    return pd.DataFrame(rows)


def _report(tmp_path, part_model_holds=None, proxy=True):
    rep = report.Report("04_decoupling", out_dir=tmp_path, profile="smoke")
    if part_model_holds is not None:
        rep.add_premise(Premise(FINE_GRAINED_BAR, part_model_holds, "constructed"))
        rep.add_premise(Premise(PROXY_CHOSEN, proxy, "constructed", fails_as="not testable here"))
    return rep


def test_just_as_fast(tmp_path, monkeypatch):
    """The rule judges the head's extra MACs against 1 %; it counts only when the sources give the head's size and
    the head counted has it (today no source gives it: inconclusive, the rule alone kept)."""
    assert cl.HEAD_PARAMS_FROM_SOURCES is None
    assert cl.HEAD_SIZE_GIVEN in cl.CLAIMS["decouple.just_as_fast.deit_s_224"].premises
    for given, extra, want in ((None, 0.02, I), (None, 0.1, I),                        # no source: inconclusive
                               (OUR_HEAD_PARAMS, 0.02, R), (OUR_HEAD_PARAMS, 0.1, NR),   # 0.43 % and 2.2 %, tol. 1 %
                               (OUR_HEAD_PARAMS + 1, 0.02, I)):                          # a head not the sources'
        monkeypatch.setattr(cl, "HEAD_PARAMS_FROM_SOURCES", given)
        c = filing.file_cost_claim(_report(tmp_path), _macs_table(extra))
        assert c.id == "decouple.just_as_fast.deit_s_224" and c.verdict == want, (given, extra)
        assert (c.kind, c.setting) == ("paper claim", "analytic at paper scale")
        assert c.our_value == pytest.approx(100 * extra / 4.6, abs=1e-3)
        if want == I:
            assert c.details["rule alone"]["verdict"] == ("holds" if extra == 0.02 else "fails")
            assert cl.HEAD_SIZE_GIVEN in c.details["failed premises"]
        else:
            assert "rule alone" not in (c.details or {})
    monkeypatch.setattr(cl, "HEAD_PARAMS_FROM_SOURCES", None)
    assert filing.file_cost_claim(_report(tmp_path), None).verdict == "not testable here"


def _summary_text():
    from pathlib import Path

    here = Path(__file__).resolve()
    found = [p / "shared/papers/decoupling-press-summary.txt" for p in (here.parents[2], here.parents[3])]
    found = [f for f in found if f.exists()]
    return found[0].read_text(encoding="utf-8") if found else None


def test_declarations_quote_the_source():
    """Every declaration quotes the press summary verbatim; the statements name no model the summary does not."""
    text = _summary_text()
    for d in cl.CLAIMS.values():
        assert d.quote.startswith('"') and d.quote.endswith('"'), d.id
        if text is not None:
            assert d.quote[1:-1] in text, d.id
        assert "ViT-B" not in d.statement and "+6" not in d.statement
    assert cl.QUOTE["coverage_gain_aircraft_value"] in cl.QUOTE["coverage_gain_aircraft"]


def test_declarations_by_dataset():
    """SynthBirds' claims rest on the part model's bar (last), the paper-scale ones on the runs' whole schedule
    (last), Fashion-MNIST's on neither; kinds and settings as declared; the objections' rule checks the paper's side."""
    from tokenprune.study.paper_runs import FULL_SCHEDULE

    for key in cl.KEYS:
        parts, _ = cl.declaration(key, "parts")
        fmnist, _ = cl.declaration(key, "fmnist")
        paper, keys = cl.declaration(key, "cub")
        assert paper.claim_id(keys) == f"decouple.paper_scale.{key}.cub" and keys == {"dataset": "cub"}
        assert (parts.setting, fmnist.setting, paper.setting) == ("proxy", "proxy", "paper-scale run")
        assert parts.premises[-1] == FINE_GRAINED_BAR and FINE_GRAINED_BAR not in fmnist.premises
        assert key == "human_features" or fmnist.premises[-1] == PROXY_CHOSEN
        assert "SynthBirds" in parts.statement and "Fashion-MNIST" in fmnist.statement
        assert FULL_SCHEDULE not in parts.premises + fmnist.premises
        assert key == "human_features" or paper.premises[-1] == FULL_SCHEDULE
        objection = key in ("beats_centre_prior", "centre_prior_everywhere")
        for d in (parts, fmnist, paper):
            assert d.kind == ("reviewer objection" if objection else "paper claim")
            assert d.on_rule_holds == ("rejected" if objection else "reproduced")
    # only SynthBirds has what would decide 'the features humans would use'
    assert cl.declaration("human_features", "fmnist")[0].rule is None
    assert cl.declaration("human_features", "fmnist")[0].would_decide
    assert len(cl.CLAIMS) == 3 * len(cl.KEYS) + 1


# ----------------------------------------------------------------------------------------------
# designs, the effect in dispute and the premises
# ----------------------------------------------------------------------------------------------

NT = "not testable here"
COMPARISON_CLAIMS = ("coverage_gain", "coverage_better", "beats_centre_prior", "centre_prior_everywhere",
                     "equal_faithfulness", "just_as_accurate", "intermediate_layer", "early_late_null",
                     "low_keep_rate", "capacity_control", "human_features", "larger_model_null")


def test_effects_in_dispute_come_from_the_source_or_the_margin():
    """The summary's six points are FGVC-Aircraft's effect only; elsewhere the margin, x the proxy's sensitivity
    where the margin is in ImageNet points (agreement)."""
    cfg = SimpleNamespace(margin=1.5)
    for key in cl.KEYS:
        gain = key in ("coverage_gain", "coverage_better")
        for ds in ("parts", "fmnist", "cub", "cars"):
            assert cl.effect_in_dispute(cl.declaration(key, ds)[0], cfg, ds) == 1.5, (key, ds)
        assert cl.effect_in_dispute(cl.declaration(key, "aircraft")[0], cfg, "aircraft") == (
            cl.GAIN_THRESHOLD_PP if gain else 1.5), key
        scaled = cl.effect_in_dispute(cl.declaration(key, "parts")[0], cfg, "parts", 4.0)
        assert scaled == (6.0 if key in ("equal_faithfulness", "just_as_accurate") else 1.5), key
        assert cl.declaration(key, "parts")[0].effect is None and cl.declaration(key, "fmnist")[0].effect is None
    assert cl.GAIN_THRESHOLD_PP == cl.DECOUPLE["coverage_gain_aircraft_pp"] == 6.0 and cl.GAIN_DATASET == "aircraft"


def test_paired_design_drops_undefined_images_and_scales_the_split():
    rng = np.random.default_rng(0)
    a, b = rng.random(40), rng.random(40)
    d = evidence.paired_design(a, b, n_split=400, what="x - y")
    assert (d.unit, d.n, d.n_max) == ("images", 40, 400)
    assert d.sd == pytest.approx(np.std(100 * (a - b), ddof=1)) and d.mde_at_max < d.mde
    a2 = a.copy()
    a2[:10] = np.nan  # a quarter of the images without the metric: the largest scale keeps the same share
    d2 = evidence.paired_design(a2, b, n_split=400)
    assert (d2.n, d2.n_max) == (30, 300)
    assert d2.sd == pytest.approx(np.std(100 * (a[10:] - b[10:]), ddof=1))
    # the split is never below the images used; a Bonferroni level enters the MDE
    assert evidence.paired_design(a, b, n_split=8).n_max == 40
    bonf = evidence.paired_design(a, b, n_split=400, alpha=0.05 / 9)
    assert bonf.alpha == pytest.approx(0.05 / 9) and bonf.mde > d.mde
    assert evidence.paired_design(a[:1], b[:1], 10) is None
    assert evidence.paired_design(np.full(5, np.nan), b[:5], 10) is None
    # the design does not depend on the mean difference
    assert evidence.paired_design(a + 0.3, b, 400).sd == pytest.approx(d.sd)


def _family(n=64, shift=0.0, noise=0.05, seed=0):
    rng = np.random.default_rng(seed)
    per = {}
    for b in (2, 6, 10):
        for kp in (0.25, 0.7):
            c = rng.random(n)
            per[("parts/small", b, kp, "centre", -1)] = {"cov": c}
            per[("parts/small", b, kp, "cls_attention", -1)] = {"cov": rng.random(n)}
            per[("parts/small", b, kp, "sensitivity", 0)] = {"cov": np.clip(c + shift + noise * rng.normal(size=n),
                                                                            0, 1)}
    return _measurements(per)


def test_centre_everywhere_claim_carries_a_bonferroni_design(tmp_path):
    cfg = SimpleNamespace(keep_rates=[0.25, 0.7], blocks=[2, 6, 10], margin=1.0, seeds=[0])
    for n_split, shift, noise, holds, want in ((64, 0.0, 0.5, True, NT),        # noisy, no larger split: not testable
                                               (100_000, 0.0, 0.5, True, I),    # the same at a larger split: open
                                               (64, 0.2, 0.05, True, "holds"),  # the head beats the prior everywhere
                                               (64, -0.2, 0.05, True, "fails"),  # the prior wins somewhere
                                               (64, 0.2, 0.05, False, I)):      # a failed premise wins
        S = SimpleNamespace(blocks=[2, 6, 10], model_label="m", x_eval=torch.zeros(64, 1), n_test_split=n_split,
                            parts=torch.zeros(1), run=None)
        ev = evidence.Evidence("parts", S, {"parts/small": S}, _family(shift=shift, noise=noise), pd.DataFrame(),
                               pd.DataFrame(), st.Layout(2, 6, 10, 0.25, 0.7, 0.01), cfg)
        rep = _report(tmp_path, holds)
        filing._centre_everywhere(rep, ev)
        (c,) = rep.claims
        assert c.outcome == want and c.kind == "reviewer objection", (n_split, shift, c.why)
        assert c.verdict == {"holds": "rejected", "fails": "upheld"}.get(want, want)
        assert c.design["alpha"] == pytest.approx(0.05 / 6) and c.design["n"] == 64
        assert c.design["effect_in_dispute"] == 1.0
        assert c.unit.endswith("(the lowest estimate; 99.17 % Bonferroni interval over 6 configurations)")


def _fake_run(n=40, n_tok=16, seed=0, datasets=("parts", "fmnist")):
    """Settings, measurements and gaps of a constructed run (small models only): every scorer at every (block, keep
    rate), the heads with three seeds; a paper dataset's model is a given checkpoint."""
    from tokenprune.data import synthetic
    from tokenprune.study import paper_runs
    from tokenprune.study.decoupling import data

    rng = np.random.default_rng(seed)
    cfg = params.setup("04_decoupling", "smoke")
    d = st.layout(cfg)
    parts = torch.as_tensor(rng.random((n, synthetic.N_PARTS, n_tok)) < 0.2)
    settings, per, keep_idx = {}, {}, {}
    for ds_name in datasets:
        name = f"{ds_name}/small"
        run = None
        if ds_name in data.PAPER_DIRS:
            run = paper_runs.TrainedRun(data.paper_run_spec(name), None, "given", None, "/ckpt/x.pth")
        settings[name] = SimpleNamespace(
            name=name, dataset=ds_name, parts=parts if ds_name == "parts" else None, x_eval=torch.zeros(n, 1),
            model_label="m", blocks=list(cfg.blocks), grid=(4, 4), patch_tokens=n_tok, n_test_split=10 * n, run=run)
        for b in cfg.blocks:
            for kp in cfg.keep_rates:
                for sc in st.SCORER_ORDER:
                    for s in (cfg.seeds if sc in st.TRAINED else [-1]):
                        per[(name, b, kp, sc, s)] = {"cov": rng.random(n),
                                                     "agree": (rng.random(n) < 0.8).astype(float),
                                                     "correct": (rng.random(n) < 0.6).astype(float)}
                        keep_idx[(name, sc, s)] = torch.as_tensor(rng.integers(0, n_tok, (n, 4)))
    m = meas.Measurements(per, keep_idx, list(cfg.seeds), 100, 0)
    gaps = meas.gaps_table(m, settings, cfg)
    models_table = pd.DataFrame([{"setting": k, "top1_unpruned": 0.5, "top1_low": 0.45, "top1_high": 0.55}
                                 for k in settings])
    return cfg, d, settings, m, gaps, models_table


SENS = 5.0  # the constructed proxy's sensitivity factor (SynthBirds); Fashion-MNIST's model has none


def _file_all(rep, cfg, d, settings, m, gaps, models_table, scorer_macs=None, sensitivity=None):
    sensitivity = {"parts": {"evit": SENS}} if sensitivity is None else sensitivity
    ev = filing.evidence(settings, m, gaps, models_table, d, cfg, sensitivity=sensitivity)
    filing.file_coverage_claims(rep, ev, settings)
    filing.file_faithfulness_claims(rep, ev, settings)
    filing.file_decoupling_claims(rep, ev, settings)
    filing.file_cost_claim(rep, scorer_macs)
    return {c.id: c for c in rep.claims}


@pytest.mark.parametrize("part_model_holds", [False, True])
def test_file_claims_designs_and_the_part_models_premise(tmp_path, part_model_holds):
    cfg, d, settings, m, gaps, models_table = _fake_run()
    claims = _file_all(_report(tmp_path, part_model_holds), cfg, d, settings, m, gaps, models_table)
    for ds_name in ("parts", "fmnist"):
        for key in cl.KEYS:
            c = claims[f"decouple.{key}.{ds_name}"]
            measured = c.our_value is not None
            if key in COMPARISON_CLAIMS and measured:
                assert c.design is not None, c.id
            if c.design is not None:
                assert key in COMPARISON_CLAIMS
                assert c.design["effect_in_dispute"] == cl.effect_in_dispute(
                    cl.declaration(key, ds_name)[0], cfg, ds_name, SENS if ds_name == "parts" else None)
                assert c.design["unit"] == "images" and c.design["n_max"] >= c.design["n"]
            gated_by_part_model = (c.details or {}).get("rule alone") is not None and FINE_GRAINED_BAR in c.why
            if ds_name == "fmnist" or part_model_holds or not measured:
                assert not gated_by_part_model, c.id
            elif key == "coverage_gain":   # aircraft's figure: not testable on SynthBirds, whatever the part model
                assert c.verdict == NT and cl.FIGURE_FOR_DATASET in c.details["failed premises"], c.id
            else:
                assert gated_by_part_model and c.verdict == I, c.id
            if measured and ds_name == "parts":
                assert FINE_GRAINED_BAR in c.test and FINE_GRAINED_BAR in c.premises, c.id
            assert len(c.why) <= 200
    # the comparison claims of the (fully measured) Fashion-MNIST setting all carry a design over the full split
    for key in COMPARISON_CLAIMS:
        c = claims[f"decouple.{key}.fmnist"]
        if key not in ("human_features", "larger_model_null"):  # no parts; no larger model in this run
            assert c.design is not None and c.design["n_max"] == 400, key
    # a larger model not run: not testable, no unit, the part model's bar not read
    c = claims["decouple.larger_model_null.parts"]
    assert (c.verdict, c.unit, c.premises) == (NT, "", [])


def test_every_declaration_is_filed_or_not_run_at_the_profile(tmp_path):
    """At the smoke profile (SynthBirds and Fashion-MNIST), every claim filed has a declaration and every declaration
    but the paper-scale ones is filed; at paper scale (here CUB, a given checkpoint) the paper-scale ones are."""
    cfg, d, settings, m, gaps, models_table = _fake_run()
    claims = _file_all(_report(tmp_path, True), cfg, d, settings, m, gaps, models_table, _macs_table(0.02))
    proxy_ids = {i for i in cl.CLAIMS if ".paper_scale." not in i}
    assert set(claims) == proxy_ids
    cfg, d, settings, m, gaps, models_table = _fake_run(datasets=("cub",))
    claims = _file_all(_report(tmp_path), cfg, d, settings, m, gaps, models_table, _macs_table(0.02))
    paper_ids = {cl.CLAIMS[i].claim_id({"dataset": "cub"}) for i in cl.CLAIMS if ".paper_scale." in i}
    assert set(claims) == paper_ids | {"decouple.just_as_fast.deit_s_224"}
    assert all(c.setting == "paper-scale run" for i, c in claims.items() if i in paper_ids)
    # the model was given, so its whole schedule holds; CUB's human features cannot be decided here
    assert claims["decouple.paper_scale.human_features.cub"].verdict == NT
    assert "every training run trained its recipe's whole schedule" in claims[
        "decouple.paper_scale.coverage_gain.cub"].premises


def test_a_gap_with_several_seeds_takes_its_interval_over_seeds_and_images():
    rng = np.random.default_rng(0)
    n = 200
    base = rng.random(n)
    per = {("s", 6, 0.5, "cls_attention", -1): {"cov": base}}
    for s, shift in zip((0, 1, 2), (0.02, 0.10, 0.18)):       # heads that disagree across seeds
        per[("s", 6, 0.5, "sensitivity", s)] = {"cov": base + shift + 0.01 * rng.standard_normal(n)}
    m = _measurements(per, seeds=(0, 1, 2), n_boot=2000)
    g = m.gap("s", 6, 0.5)
    images_only = meas.intervals.paired_bootstrap_diff(100 * m.per_image("s", 6, 0.5, "sensitivity", "cov"),
                                                       100 * base, n_boot=2000, seed=0)
    assert g.estimate == pytest.approx(images_only.estimate)
    assert (g.high - g.low) > 3 * (images_only.high - images_only.low)   # the seeds' spread is in the interval
    one = _measurements({k: v for k, v in per.items() if k[-1] in (-1, 0)}, seeds=(0,))
    assert one.gap("s", 6, 0.5).estimate == pytest.approx(2.0, abs=0.2)


def test_without_a_classification_proxy_the_fashion_mnist_claims_are_not_testable(tmp_path):
    cfg, d, settings, m, gaps, models_table = _fake_run()
    claims = _file_all(_report(tmp_path, True, proxy=False), cfg, d, settings, m, gaps, models_table)
    for key in cl.KEYS:
        fm, parts = claims[f"decouple.{key}.fmnist"], claims[f"decouple.{key}.parts"]
        assert fm.verdict == "not testable here", key
        if fm.our_value is not None:                   # what was measured is kept beside the verdict
            assert PROXY_CHOSEN in fm.why and (fm.details or {}).get("rule alone"), key
        assert PROXY_CHOSEN not in parts.premises


# ----------------------------------------------------------------------------------------------
# the study's rules on a proxy: ImageNet tolerances scaled by its sensitivity factor; a figure kept to its dataset;
# premises about the dataset and the sources
# ----------------------------------------------------------------------------------------------


def _evidence(per, dataset="parts", sensitivity=SENS, n=400, seeds=(0,)):
    cfg = SimpleNamespace(keep_rates=[0.25, 0.7], blocks=[2, 6, 10], margin=1.0, seeds=list(seeds), ceiling=0.98,
                          n_boot=200, seed=0)
    S = SimpleNamespace(name=f"{dataset}/small", blocks=[2, 6, 10], model_label="m", x_eval=torch.zeros(n, 1),
                        n_test_split=n, parts=None, run=None)
    return evidence.Evidence(dataset, S, {f"{dataset}/small": S}, _measurements(per, seeds=seeds), pd.DataFrame(),
                             pd.DataFrame(), st.Layout(2, 6, 10, 0.25, 0.7, 0.01), cfg, {"evit": sensitivity},
                             proxy=True)


def _agreement(n, agree_to):
    """Per-image agreement: 1 on images [0, agree_to), 0 elsewhere; nested sets keep the order of the means in every
    bootstrap resample of the images."""
    return (np.arange(n) < agree_to).astype(float)


def test_equal_faithfulness_margin_is_scaled_by_the_proxys_sensitivity(tmp_path):
    # the rule: +-margin x factor (fractions)
    rule = cl.equal_faithfulness_rule(1.0, 20.0)
    assert rule.decide({"equivalent": False, "agreement difference (fraction)": (0.25, 0.22, 0.28)}).verdict == NR
    assert rule.decide({"equivalent": False, "agreement difference (fraction)": (0.19, 0.15, 0.23)}).verdict == I
    assert rule.decide({"equivalent": True, "agreement difference (fraction)": (0.10, 0.05, 0.15)}).verdict == R
    assert cl.scaled_margin(1.0, 20.0) == 20.0 and cl.scaled_margin(1.0, None) == 1.0
    # filed: the head agrees with the unpruned model on 10 % more images than [CLS] attention (about +-1.5 pp)
    n = 400
    y = _agreement(n, 300)
    x = _agreement(n, 340)
    per = {("parts/small", 6, 0.25, "sensitivity", 0): {"cov": np.zeros(n), "agree": x},
           ("parts/small", 6, 0.25, "cls_attention", -1): {"cov": np.zeros(n), "agree": y}}
    for factor, want in ((20.0, "holds"), (1.0, "fails"), (10.0, I), (None, I)):
        ev = _evidence(per, sensitivity=factor)
        rep = _report(tmp_path, True)
        filing.file_faithfulness_claims(rep, [ev], ev.settings)
        c = {c.id: c for c in rep.claims}["decouple.equal_faithfulness.parts"]
        assert c.outcome == want, (factor, c.why)
        assert c.our_value == pytest.approx(10.0)
        assert c.details["margin, pp"] == pytest.approx(1.0 if factor is None else factor)
        if factor is None:   # a proxy without the factor: inconclusive, the unscaled rule's verdict kept alone
            assert cl.SENSITIVITY_KNOWN in c.details["failed premises"]
            assert c.details["rule alone"]["verdict"] == "fails"
        else:
            assert c.design["effect_in_dispute"] == pytest.approx(factor)
    # at paper scale the margin applies as given (no proxy, no factor needed)
    paper = {(k[0].replace("parts", "cub"), *k[1:]): v for k, v in per.items()}
    ev = _evidence(paper, dataset="cub", sensitivity=None)
    assert ev.sensitivity_premise("equal_faithfulness").holds and ev.scale("equal_faithfulness") is None
    assert ev.band is None


def test_a_proxy_without_the_familys_factor_is_told_apart_from_a_model_that_is_no_proxy():
    """Every claim here that reads a factor is EViT-type: on a proxy without one the premise names the family's
    missing reference and fails as inconclusive (a premise the sources do not give), on another model it names that
    the model is no proxy and fails as not testable; a ToMe factor scales none of them. Notebook 00's fallback is a
    proxy with no EViT factor."""
    import dataclasses

    from tokenprune.study.proxy import plan

    assert set(cl.SENSITIVITY_FAMILY) == {*cl.SCALED_MARGIN_KEYS, "decoupled", "decoupled_equal_keep"}
    assert set(cl.SENSITIVITY_FAMILY.values()) == {"evit"}
    on_proxy = _evidence({}, sensitivity=None)
    no_proxy = dataclasses.replace(on_proxy, proxy=False)
    for key, family in cl.SENSITIVITY_FAMILY.items():
        a, b = on_proxy.sensitivity_premise(key), no_proxy.sensitivity_premise(key)
        assert not a.holds and not b.holds and a.fails_as == I and b.fails_as == NT
        assert plan.missing_factor(family) in a.detail and plan.missing_factor(family) not in b.detail
    tome_only = dataclasses.replace(on_proxy, sensitivity={"tome": 0.5, "evit": None})
    assert tome_only.scale("just_as_accurate") is None and tome_only.band is None
    assert not tome_only.sensitivity_premise("decoupled").holds
    cfg, d, settings, m, gaps, models_table = _fake_run()
    evs = {e.dataset: e for e in filing.evidence(settings, m, gaps, models_table, d, cfg)}
    assert evs["parts"].proxy and evs["parts"].sensitivity == {"evit": None}
    assert not evs["fmnist"].proxy and evs["fmnist"].sensitivity == {}


def test_just_as_accurate_compares_top1_with_the_standard_method_within_the_scaled_margin(tmp_path):
    """'just as fast and just as accurate': the head-pruned model's top-1 against the [CLS]-attention-pruned one's,
    paired TOST within margin x the proxy's sensitivity factor; at the agreement ceiling it is uninformative; without
    the top-1 measured it is not testable."""
    rule = cl.just_as_accurate_rule(1.0, 20.0)
    assert rule.decide({"equivalent": False, "top-1 difference (fraction)": (0.25, 0.22, 0.28)}).verdict == NR
    assert rule.decide({"equivalent": True, "top-1 difference (fraction)": (0.10, 0.05, 0.15)}).verdict == R
    assert "just_as_accurate" in cl.SCALED_MARGIN_KEYS and cl.PAPER_VALUE["just_as_accurate"] == "just as accurate"
    d = cl.CLAIMS["decouple.just_as_accurate.parts"]
    assert d.quote == '"they can get a system that is just as fast and just as accurate"' and d.section == "§6"
    assert d.premises[:2] == (cl.ACCURACY_CEILING, cl.SENSITIVITY_KNOWN)
    # the head-pruned model is right on 10 % more images than the [CLS]-attention-pruned one (about +-1.5 pp)
    n = 400
    per = {("parts/small", 6, 0.25, "sensitivity", 0): {"cov": np.zeros(n), "agree": _agreement(n, 300),
                                                         "correct": _agreement(n, 240)},
           ("parts/small", 6, 0.25, "cls_attention", -1): {"cov": np.zeros(n), "agree": _agreement(n, 300),
                                                            "correct": _agreement(n, 200)}}
    for factor, want in ((20.0, "holds"), (1.0, "fails"), (10.0, I), (None, I)):
        ev = _evidence(per, sensitivity=factor)
        rep = _report(tmp_path, True)
        filing.file_faithfulness_claims(rep, [ev], ev.settings)
        c = {c.id: c for c in rep.claims}["decouple.just_as_accurate.parts"]
        assert c.outcome == want and c.kind == "paper claim" and c.setting == "proxy", (factor, c.why)
        assert c.our_value == pytest.approx(10.0) and len(c.why) <= 200
        assert c.details["top-1 %"] == {"[CLS] attention": 50.0, "sensitivity head": 60.0}
        assert c.details["margin, pp"] == pytest.approx(1.0 if factor is None else factor)
        if factor is not None:
            assert c.design["effect_in_dispute"] == pytest.approx(factor)
    # both pruned models keep every decision of the unpruned one: uninformative, whatever the rule says
    at_ceiling = {k: {**v, "agree": np.ones(n)} for k, v in per.items()}
    rep = _report(tmp_path, True)
    filing.file_faithfulness_claims(rep, [_evidence(at_ceiling, sensitivity=20.0)], {"parts/small": None})
    c = {c.id: c for c in rep.claims}["decouple.just_as_accurate.parts"]
    assert c.verdict == I and cl.ACCURACY_CEILING in c.details["failed premises"]
    # top-1 not measured: not testable
    bare = {k: {"cov": v["cov"], "agree": v["agree"]} for k, v in per.items()}
    rep = _report(tmp_path, True)
    filing.file_faithfulness_claims(rep, [_evidence(bare, sensitivity=20.0)], {"parts/small": None})
    c = {c.id: c for c in rep.claims}["decouple.just_as_accurate.parts"]
    assert c.verdict == NT and c.our_value is None


def _band_measurements(n=400, in_band_coupled=False):
    """Five configurations at keep 0.25 with agreement 62-86 % (agreement cost 14-38 points) whose coverage is
    unrelated to agreement (rho 0), or follows it; four near chance (agreement 2-5 %, coverage 0-10 %) and four at
    full agreement (coverage 90-100 %), at keep 0.7: across all thirteen, coverage follows agreement."""
    per = {}
    agree = [0.62, 0.68, 0.74, 0.80, 0.86]
    cover = [0.2, 0.5, 0.3, 0.1, 0.4] if not in_band_coupled else [0.1, 0.2, 0.3, 0.4, 0.5]   # ranks 2,5,3,1,4
    for i, (a, c) in enumerate(zip(agree, cover)):
        per[("parts/small", 2 + i, 0.25, "cls_attention", -1)] = {"cov": np.full(n, c),
                                                                  "agree": _agreement(n, int(a * n))}
    for i, (a, c) in enumerate(zip((0.02, 0.03, 0.04, 0.05, 1.0, 1.0, 1.0, 1.0), (0.0, 0.03, 0.06, 0.1, 0.9, 0.93,
                                                                                   0.96, 1.0))):
        per[("parts/small", 20 + i, 0.7, "random", -1)] = {"cov": np.full(n, c), "agree": _agreement(n, int(a * n))}
    return per


def test_decoupled_counts_only_configurations_in_the_scaled_cost_band(tmp_path):
    assert cl.REGIME_BAND == (0.3, 4.0) and cl.regime_band(10.0) == (3.0, 40.0) and cl.regime_band(None) is None
    agr = np.array([_agreement(10, k) for k in (10, 9, 5, 0)])
    assert meas.in_cost_band(agr, (3.0, 40.0)).tolist() == [False, True, False, False]   # costs 0, 10, 50, 100
    assert meas.in_cost_band(agr, None).all()
    # every rule outcome, on constructed configurations
    cases = (("decoupled", 10.0, False, "holds"),   # band 3-40 points: the five unrelated configurations count
             ("decoupled", None, False, I),         # a proxy without the factor: inconclusive, premise named
             ("decoupled", 2.0, False, I),          # band 0.6-8 points: no configuration in it
             ("decoupled", 10.0, True, "fails"))    # in the band, coverage follows agreement
    for _, factor, coupled, want in cases:
        ev = _evidence(_band_measurements(in_band_coupled=coupled), sensitivity=factor)
        rep = _report(tmp_path, True)
        filing.file_decoupling_claims(rep, [ev], ev.settings)
        got = {c.id: c for c in rep.claims}
        for key in ("decoupled", "decoupled_equal_keep"):
            c = got[f"decouple.{key}.parts"]
            assert c.outcome == want, (key, factor, coupled, c.why)
            assert c.details["configurations measured"] == 13
            assert c.details["configurations"] == {10.0: 5, None: 13, 2.0: 0}[factor]
        if factor is None:
            assert got["decouple.decoupled.parts"].details["rule alone"]["verdict"] == "fails"   # all 13: coupled
    # without the band, all thirteen configurations: coupled
    st_all = meas.decoupling_stats(_measurements(_band_measurements()), "parts/small", [0.25, 0.7], 200, 0)
    st_band = meas.decoupling_stats(_measurements(_band_measurements()), "parts/small", [0.25, 0.7], 200, 0,
                                    cost_band=(3.0, 40.0))
    assert st_all.pooled[1] > cl.DECOUPLED_MARGIN and (st_all.n_configs, st_all.n_measured) == (13, 13)
    assert st_band.pooled == (0.0, 0.0, 0.0) and (st_band.n_configs, st_band.n_strata) == (5, 1)
    assert st_band.strata == {0.25: 5, 0.7: 0} and st_band.cost_band == (3.0, 40.0)


def test_coverage_gain_is_decided_on_aircraft_only(tmp_path):
    """'More than six points' is FGVC-Aircraft's figure: not testable elsewhere (the rule alone kept, the direction
    claim named), decided on aircraft; the baseline's coverage against the centre prior is recorded."""
    cfg, d, settings, m, gaps, models_table = _fake_run()
    claims = _file_all(_report(tmp_path, True), cfg, d, settings, m, gaps, models_table)
    for ds in ("parts", "fmnist"):
        c, better = claims[f"decouple.coverage_gain.{ds}"], claims[f"decouple.coverage_better.{ds}"]
        assert c.verdict == NT and "rule alone" in c.details
        assert cl.FIGURE_FOR_DATASET in c.details["failed premises"]
        assert c.details["direction"] == better.id and cl.FIGURE_FOR_DATASET not in better.premises
        assert c.effect is None and c.design["effect_in_dispute"] == cfg.margin
        base = c.details["[CLS] attention - centre prior, pp"]
        want = m.paired(f"{ds}/small", d.mid, d.low_keep, "cls_attention", "centre").estimate
        assert base["our_value"] == pytest.approx(want, abs=0.01)
    for ds in ("aircraft", "cub"):
        cfg, d, settings, m, gaps, models_table = _fake_run(datasets=(ds,))
        c = _file_all(_report(tmp_path), cfg, d, settings, m, gaps, models_table)[
            f"decouple.paper_scale.coverage_gain.{ds}"]
        if ds == "aircraft":   # decided by the rule (the premise holds), against its own six points
            assert "failed premises" not in (c.details or {}) and c.verdict in (R, NR, I)
            assert c.effect == c.design["effect_in_dispute"] == cl.GAIN_THRESHOLD_PP
        else:
            assert c.verdict == NT and cl.FIGURE_FOR_DATASET in c.details["failed premises"]


def test_early_and_intermediate_claims_rest_on_the_datasets_construction(tmp_path):
    """SynthBirds' parts are located by an early block's local features by construction: the two claims about depth
    are inconclusive there (the rule alone kept); Fashion-MNIST's do not declare the premise."""
    for key in ("intermediate_layer", "early_late_null"):
        assert cl.EARLY_PARTS_HIDDEN in cl.declaration(key, "parts")[0].premises
        assert cl.EARLY_PARTS_HIDDEN not in cl.declaration(key, "fmnist")[0].premises
        assert cl.EARLY_PARTS_HIDDEN not in cl.declaration(key, "cub")[0].premises
    cfg, d, settings, m, gaps, models_table = _fake_run()
    claims = _file_all(_report(tmp_path, True), cfg, d, settings, m, gaps, models_table)
    for key in ("intermediate_layer", "early_late_null"):
        c = claims[f"decouple.{key}.parts"]
        assert c.verdict == I and cl.EARLY_PARTS_HIDDEN in c.details["failed premises"]
        assert "rule alone" in c.details
        assert cl.EARLY_PARTS_HIDDEN not in (claims[f"decouple.{key}.fmnist"].details or {}).get("failed premises", {})
    ev = filing.evidence(settings, m, gaps, models_table, d, cfg, sensitivity={"parts": {"evit": SENS}})
    p = filing.early_parts_premise(next(e for e in ev if e.dataset == "parts"))[cl.EARLY_PARTS_HIDDEN]
    assert not p.holds and p.fails_as == I
    assert filing.early_parts_premise(next(e for e in ev if e.dataset == "fmnist")) == {}
