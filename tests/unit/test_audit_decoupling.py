"""The decoupling audit's rules (verdicts.Criteria) give the verdicts of the notebook's former if/elif ladders."""
from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch

from tokenprune.study import params
from tokenprune.study.audits import decoupling as dec
from tokenprune.study.verdicts import Criteria, Above, Below, Inside, Beyond, Flag, AllOf, AnyOf

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


@pytest.fixture(scope="module")
def rules():
    cfg = params.setup("04_decoupling", "smoke", {"margin": MARGIN})
    d = dec.Design(2, 6, 10, 0.25, 0.7, MARGIN / 100)
    return cfg, d, dec.claim_rules(cfg, d)


# intervals around the 6-point threshold of "more than six percentage points"
T = dec.GAIN_THRESHOLD_PP
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
            got = dec.capacity_rule(list(ctrl), MARGIN).decide(
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


def test_criteria_text_and_why():
    rule = Criteria(reproduced=(Above("a", 0), Flag("f", "the flag holds")),
                    not_reproduced=(AnyOf((Below("a", 0), AllOf((Inside("a", 1), Beyond("b", 2, level=90))))),))
    assert rule.text.startswith("reproduced when the 95 % interval of a lies above 0 and the flag holds; else not")
    assert "90 % interval of b lies entirely beyond +-2" in rule.text
    nr = rule.decide({"a": (-1, -2, -0.5), "b": (0, 0, 0), "f": True})
    assert nr.verdict == NR and "a -1.00 [-2.00, -0.50]" in nr.why
    inc = rule.decide({"a": (1, 0.5, 1.5), "b": (0, 0, 0), "f": False})
    assert inc.verdict == I and "the flag holds" in inc.why


def test_every_parameter_has_a_meaning():
    for prof in ("smoke", "default", "paper"):
        assert set(dec.PROFILES[prof]) == set(dec.PARAMETERS)
        params.setup("04_decoupling", prof)


# ----------------------------------------------------------------------------------------------
# the claims added by issue 13: every rule driven to each verdict it can give
# ----------------------------------------------------------------------------------------------


def _measurements(per, keep_idx=None, seeds=(0,), n_boot=200):
    return dec.Measurements(per, keep_idx or {}, list(seeds), n_boot, 0)


def test_centre_prior_everywhere(rules):
    cfg, _, r = rules
    rule = r["centre_prior_everywhere"]
    k = len(cfg.blocks) * len(cfg.keep_rates)
    assert f"{100 * (1 - 0.05 / k):.2f} %" in rule.text
    fam = lambda *ivs: [(2, 0.25, v) for v in ivs]  # noqa: E731
    assert rule.decide(dec.centre_values(fam(iv(1, 0.5, 1.5), iv(0, -0.5, 0.5)))).verdict == R
    assert rule.decide(dec.centre_values(fam(iv(1, 0.5, 1.5), iv(-19.5, -21.1, -18.0)))).verdict == NR
    assert rule.decide(dec.centre_values(fam(iv(1, 0.5, 1.5), iv(-1.0, -2.0, 0.0)))).verdict == I


def test_centre_family_is_bonferroni_over_configurations():
    rng = np.random.default_rng(0)
    n = 64
    per = {}
    for b in (2, 6):
        for kp in (0.25, 0.7):
            per[("x", b, kp, "sensitivity", 0)] = {"cov": rng.random(n)}
            per[("x", b, kp, "centre", -1)] = {"cov": rng.random(n)}
    m = _measurements(per)
    fam = dec.centre_family(m, "x", [2, 6], [0.25, 0.7])
    assert len(fam) == 4 and all(v.level == pytest.approx(1 - 0.05 / 4) for _, _, v in fam)
    one = dec.metrics.paired_bootstrap_diff(100 * per[("x", 2, 0.25, "sensitivity", 0)]["cov"],
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
    st = dec.decoupling_stats(_config_measurements(True, n=400), "x", [0.25, 0.7], 300, 0)
    assert st.n_configs == 18 and st.n_strata == 2 and st.strata == {0.25: 9, 0.7: 9}
    assert r["decoupled"].decide({"rank correlation": st.pooled}).verdict == NR
    assert r["decoupled_equal_keep"].decide({"mean within-keep-rate rank correlation": st.stratified}).verdict == NR
    e, lo, hi = st.stratified
    assert lo <= e <= hi
    # too few configurations: NaN, which the claim's premise turns into inconclusive
    few = dec.Measurements({k: v for k, v in list(_config_measurements(False).per.items())[:3]}, {}, [0], 100, 0)
    st = dec.decoupling_stats(few, "x", [0.25, 0.7], 100, 0)
    assert st.n_configs == 3 and st.n_strata == 0 and all(np.isnan(st.pooled)) and all(np.isnan(st.stratified))


def test_stratified_spearman_is_the_mean_of_the_strata():
    rng = np.random.default_rng(2)
    cov, agr = rng.random((10, 30)), (rng.random((10, 30)) < 0.6).astype(float)
    s1, s2 = np.arange(5), np.arange(5, 10)
    e, lo, hi = dec.stratified_spearman_boot(cov, agr, [s1, s2], 200, np.random.default_rng(0))
    e1 = dec.spearman_boot(cov[s1], agr[s1], 10, np.random.default_rng(0))[0]
    e2 = dec.spearman_boot(cov[s2], agr[s2], 10, np.random.default_rng(0))[0]
    assert e == pytest.approx((e1 + e2) / 2) and lo <= hi
    assert all(np.isnan(dec.stratified_spearman_boot(cov, agr, [], 10, np.random.default_rng(0))))


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
    from tokenprune.study.verdicts import Premise
    assert Premise("stand-in", holds=False).gate(rule.decide({name: iv(5, 2, 8), "seeds_positive": True})).verdict == I
    # coverage of the class-defining parts only (beak, tail, crest), through the kept tokens
    from tokenprune.data import synthetic
    n_tok, K = 4, synthetic.N_PARTS
    parts = np.zeros((2, K, n_tok), dtype=bool)
    for p, t in (("beak", 0), ("tail", 1), ("crest", 2), ("body", 3)):
        parts[:, synthetic.PART_NAMES.index(p) - 1, t] = True
    parts[1] = False  # image 1: nothing annotated
    S = SimpleNamespace(parts=torch.as_tensor(parts), patch_tokens=n_tok, name="parts/small")
    got = dec.class_part_coverage(S, torch.tensor([[0, 3], [0, 3]]), "parts")
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
    g, pos, n_seeds, n_valid, cov_s, cov_c, (x, y) = dec.human_features_values(
        S, m, SimpleNamespace(seeds=[0, 1], coverage_variant="parts"))
    assert (pos, n_seeds, n_valid) == (2, 2, B) and g.estimate == pytest.approx(100) and (cov_s, cov_c) == (100, 0)
    assert np.allclose(x, 1) and np.allclose(y, 0)  # the per-image coverages the claim's design is built from


class _Rep:
    def __init__(self):
        self.claims = []

    def add_claim(self, **kw):
        self.claims.append(kw)


def _macs_table(extra_gmacs):
    rows = []
    for arch, unpruned in (("deit_small_patch16_224", 4.6), ("deit_base_patch16_224", 17.6)):
        for keep, pruned in ((0.5, 0.6 * unpruned), (0.7, 0.8 * unpruned)):
            rows.append({"setting": "paper scale (224 px)", "model": arch, "keep_rate": keep,
                         "model_gmacs_unpruned": unpruned, "model_gmacs_pruned_cls_attention": pruned,
                         "model_gmacs_pruned_learned": pruned + extra_gmacs * unpruned / 4.6})
    return pd.DataFrame(rows)


def test_just_as_fast(rules):
    _, _, r = rules
    for extra, want in ((0.02, R), (0.1, NR)):  # 0.43 % and 2.2 % of 4.6 GMACs against the 1 % tolerance
        rep = _Rep()
        dec.just_as_fast_claim(rep, r["just_as_fast"], _macs_table(extra))
        (c,) = rep.claims
        assert c["id"] == "decouple.just_as_fast.deit_s_224" and c["decision"].verdict == want
        assert c["our_value"] == pytest.approx(100 * extra / 4.6, abs=1e-3)
    rep = _Rep()
    dec.just_as_fast_claim(rep, r["just_as_fast"], None)
    assert rep.claims[0]["decision"].verdict == "not testable here"


def test_transcriptions_quote_the_source():
    """Issue 13, item 10: the statements quote the press summary (no 'ViT-B', no '+6 pp')."""
    from pathlib import Path

    here = Path(__file__).resolve()
    found = [p / "shared/papers/decoupling-press-summary.txt" for p in (here.parents[2], here.parents[3])]
    found = [f for f in found if f.exists()]
    if found:
        text = found[0].read_text(encoding="utf-8")
        for key, quote in dec.QUOTE.items():
            if not key.endswith("_value"):
                assert quote in text, key
    assert "ViT-B" not in dec.CLAIM_IDS["larger_model_null"] and "+6" not in dec.CLAIM_IDS["coverage_gain"]
    assert dec.QUOTE["coverage_gain_aircraft_value"] in dec.QUOTE["coverage_gain_aircraft"]


# ----------------------------------------------------------------------------------------------
# issue 14: designs, the effect in dispute, the detectability gate and the part model's premise
# ----------------------------------------------------------------------------------------------

NT = "not testable here"


def test_effects_in_dispute_come_from_the_source_or_the_margin():
    cfg = SimpleNamespace(margin=1.5)
    eff = dec.effects_in_dispute(cfg)
    assert set(eff) == set(dec.COMPARISON_CLAIMS) <= set(dec.CLAIM_IDS)
    assert eff["coverage_gain"] == eff["coverage_better"] == dec.paper_numbers.DECOUPLE["coverage_gain_aircraft_pp"]
    assert all(v == 1.5 for k, v in eff.items() if k not in ("coverage_gain", "coverage_better"))
    # the title claim (a rank correlation) and the MAC claim are not paired differences in points
    assert "decoupled" not in eff and "just_as_fast" not in eff


def test_paired_design_drops_undefined_images_and_scales_the_split():
    rng = np.random.default_rng(0)
    a, b = rng.random(40), rng.random(40)
    d = dec.paired_design(a, b, n_split=400, what="x - y")
    assert (d.unit, d.n, d.n_max) == ("images", 40, 400) and "the full test split (400 images)" == d.max_scale
    assert d.sd == pytest.approx(np.std(100 * (a - b), ddof=1)) and "40 paired per-image differences" in d.sd_source
    assert "x - y" in d.sd_source and d.mde_at_max < d.mde
    a2 = a.copy()
    a2[:10] = np.nan  # a quarter of the images without the metric: the largest scale keeps the same share
    d2 = dec.paired_design(a2, b, n_split=400)
    assert (d2.n, d2.n_max) == (30, 300) and "about 300" in d2.max_scale
    assert d2.sd == pytest.approx(np.std(100 * (a[10:] - b[10:]), ddof=1))
    # the split is never below the images used; a Bonferroni level enters the MDE
    assert dec.paired_design(a, b, n_split=8).n_max == 40
    bonf = dec.paired_design(a, b, n_split=400, alpha=0.05 / 9)
    assert bonf.alpha == pytest.approx(0.05 / 9) and bonf.mde > d.mde
    assert dec.paired_design(a[:1], b[:1], 10) is None and dec.paired_design(np.full(5, np.nan), b[:5], 10) is None
    # the design does not depend on the mean difference
    assert dec.paired_design(a + 0.3, b, 400).sd == pytest.approx(d.sd)


def test_least_precise_takes_the_largest_mde_at_the_largest_scale():
    rng = np.random.default_rng(1)
    a, b = rng.random(50), rng.random(50)
    tight = dec.paired_design(a, a + 0.01 * rng.random(50), 500)
    loose = dec.paired_design(a, b, 500)
    assert dec.least_precise(tight, None, loose) is loose and dec.least_precise(tight) is tight
    assert dec.least_precise(None, None) is None


def _design(sd, n, n_max):
    return dec.power.Design(unit="images", n=n, sd=sd, sd_source="constructed", n_max=n_max, max_scale="the split")


def test_gated_drives_every_verdict():
    from tokenprune.study.verdicts import Decision, Premise

    rep_, nr, inc = Decision(R, "", "rule"), Decision(NR, "no", "rule"), Decision(I, "within noise", "rule")
    big_sd_small_split = _design(40.0, 100, 200)   # MDE at the split 7.9 > 2 x 1
    underpowered = _design(20.0, 100, 10_000)      # MDE 5.6 here, 0.56 at the split
    powered = _design(5.0, 1000, 10_000)           # MDE 0.44 here
    # decisive verdicts pass, with the design record
    for decision in (rep_, nr):
        got, rec = dec.gated(decision, 1.0, big_sd_small_split)
        assert got.verdict == decision.verdict and rec["effect_in_dispute"] == 1.0 and rec["n_max"] == 200
    # inconclusive: not testable when even the full split cannot detect the effect, naming the images it needs
    got, rec = dec.gated(inc, 1.0, big_sd_small_split)
    assert got.verdict == NT and "needs about" in got.why and rec["n_needed"] > 200
    got, _ = dec.gated(inc, 1.0, underpowered)
    assert got.verdict == I and "underpowered" in got.why
    got, _ = dec.gated(inc, 1.0, powered)
    assert got.verdict == I and "underpowered" not in got.why
    # a larger effect in dispute is detectable on the same design
    assert dec.gated(inc, 10.0, big_sd_small_split)[0].verdict == I
    # premises: a failed one wins over everything, the last one named; holding ones change nothing but the rule text
    fail_a, fail_b, ok = Premise("a", False, "da"), Premise("b", False, "db"), Premise("ok", True)
    for decision in (rep_, nr, inc):
        got, _ = dec.gated(decision, 1.0, big_sd_small_split, (fail_a, None, fail_b))
        assert got.verdict == I and got.why.startswith("premise failed: b (db)")
    got, _ = dec.gated(rep_, 1.0, powered, (ok, None))
    assert got.verdict == R and got.rule.startswith("premise: ok; then detectable:")
    # no design (not a paired difference): no gate, no record
    got, rec = dec.gated(inc, 0.0, None, (ok,))
    assert got.verdict == I and rec is None


def _parts_setting(acc=None, dataset="parts", n=2400):
    info = {"name": "small_vit_parts"}
    if acc is not None:
        info["test"] = {"accuracy": acc, "ci95": [acc - 0.02, acc + 0.02], "n": n}
    return SimpleNamespace(dataset=dataset, name=f"{dataset}/small", info=info, x_eval=torch.zeros(8, 1))


def test_part_model_premise_reads_notebook_00s_bar():
    from tokenprune.study import calibration

    assert dec.FINE_GRAINED_BAR == calibration.BARS["fine-grained"]
    assert f">= {calibration.BARS['fine-grained']:g} % top-1" in dec.PART_MODEL_PREMISE
    low = dec.part_model_premise(_parts_setting(0.508))
    assert low.name == dec.PART_MODEL_PREMISE and not low.holds
    assert "50.8 % [48.8, 52.8]" in low.detail and "full test split (2400 images" in low.detail
    bar = calibration.BARS["fine-grained"] / 100
    assert dec.part_model_premise(_parts_setting(bar)).holds and not dec.part_model_premise(_parts_setting(bar - 1e-4)).holds
    # Fashion-MNIST (object coverage) and the paper's datasets are not gated by it
    assert dec.part_model_premise(_parts_setting(0.3, dataset="fmnist")) is None
    assert dec.part_model_premise(_parts_setting(0.3, dataset="cub")) is None
    # without a recorded test accuracy: this run's top-1; without either, the premise fails
    table = pd.DataFrame([{"setting": "parts/small", "top1_unpruned": 0.9, "top1_low": 0.85, "top1_high": 0.95}])
    fallback = dec.part_model_premise(_parts_setting(), table)
    assert fallback.holds and "8 evaluation images" in fallback.detail
    assert not dec.part_model_premise(_parts_setting()).holds


def _family(n=64, shift=0.0, noise=0.05, seed=0):
    rng = np.random.default_rng(seed)
    per = {}
    for b in (2, 6, 10):
        for kp in (0.25, 0.7):
            c = rng.random(n)
            per[("x", b, kp, "centre", -1)] = {"cov": c}
            per[("x", b, kp, "cls_attention", -1)] = {"cov": rng.random(n)}
            per[("x", b, kp, "sensitivity", 0)] = {"cov": np.clip(c + shift + noise * rng.normal(size=n), 0, 1)}
    return _measurements(per)


def test_centre_everywhere_claim_carries_a_bonferroni_design():
    cfg = SimpleNamespace(keep_rates=[0.25, 0.7], margin=1.0, seeds=[0])
    premise = dec.Premise(dec.PART_MODEL_PREMISE, holds=False, detail="50.8 %")
    for n_split, shift, noise, premises, want in ((64, 0.0, 0.5, (), NT),       # noisy, no larger split: not testable
                                                  (100_000, 0.0, 0.5, (), I),    # the same at a larger split: open
                                                  (64, 0.2, 0.05, (), R),        # the head beats the prior everywhere
                                                  (64, -0.2, 0.05, (), NR),      # the prior wins somewhere
                                                  (64, 0.2, 0.05, (premise,), I)):  # a failed premise wins
        m = _family(shift=shift, noise=noise)
        S = SimpleNamespace(blocks=[2, 6, 10], model_label="m", x_eval=torch.zeros(64, 1), n_test_split=n_split)
        rep = _Rep()
        claim = lambda key, **kw: rep.add_claim(id=key, **kw)  # noqa: E731
        dec._centre_everywhere_claim(claim, dec.claim_rules(params.setup("04_decoupling", "smoke"),
                                                            dec.Design(2, 6, 10, 0.25, 0.7, 0.01))["centre_prior_everywhere"],
                                     m, "x", S, "part coverage", cfg,
                                     lambda d0, des: dec.gated(d0, cfg.margin, des, premises))
        (c,) = rep.claims
        assert c["decision"].verdict == want, (n_split, shift, c["decision"].why)
        assert c["design"]["alpha"] == pytest.approx(0.05 / 6) and c["design"]["n"] == 64
        assert c["design"]["effect_in_dispute"] == 1.0


def _fake_run(top1_parts: float, n=40, n_tok=16, seed=0):
    """Settings, measurements and gaps of a constructed run (SynthBirds and Fashion-MNIST, small models only): every
    scorer at every (block, keep rate), the heads with three seeds."""
    from tokenprune.data import synthetic

    rng = np.random.default_rng(seed)
    cfg = params.setup("04_decoupling", "smoke")
    d = dec.Design(cfg.blocks[0], cfg.blocks[len(cfg.blocks) // 2], cfg.blocks[-1], min(cfg.keep_rates),
                   max(cfg.keep_rates), cfg.margin / 100)
    parts = torch.as_tensor(rng.random((n, synthetic.N_PARTS, n_tok)) < 0.2)
    settings, per, keep_idx = {}, {}, {}
    for ds_name, acc in (("parts", top1_parts), ("fmnist", 0.86)):
        name = f"{ds_name}/small"
        settings[name] = SimpleNamespace(
            name=name, dataset=ds_name, parts=parts if ds_name == "parts" else None, x_eval=torch.zeros(n, 1),
            model_label="m", blocks=list(cfg.blocks), grid=(4, 4), patch_tokens=n_tok, n_test_split=10 * n,
            info={"name": f"small_vit_{ds_name}", "test": {"accuracy": acc, "ci95": [acc - 0.02, acc + 0.02], "n": 10 * n}})
        for b in cfg.blocks:
            for kp in cfg.keep_rates:
                for sc in dec.SCORER_ORDER:
                    for s in (cfg.seeds if sc in dec.TRAINED else [-1]):
                        per[(name, b, kp, sc, s)] = {"cov": rng.random(n), "agree": (rng.random(n) < 0.8).astype(float)}
                        keep_idx[(name, sc, s)] = torch.as_tensor(rng.integers(0, n_tok, (n, 4)))
    m = dec.Measurements(per, keep_idx, list(cfg.seeds), 100, 0)
    gaps = dec.gaps_table(m, settings, cfg)
    models_table = pd.DataFrame([{"setting": k, "top1_unpruned": 0.5, "top1_low": 0.45, "top1_high": 0.55}
                                 for k in settings])
    return cfg, d, settings, m, gaps, models_table


@pytest.mark.parametrize("top1_parts", [0.508, 0.95])
def test_file_claims_designs_and_the_part_models_premise(tmp_path, top1_parts):
    from tokenprune.study import report

    cfg, d, settings, m, gaps, models_table = _fake_run(top1_parts)
    rep = report.Report("04_decoupling", out_dir=tmp_path, profile="smoke")
    dec.file_claims(rep, dec.claim_rules(cfg, d), settings, m, gaps, models_table, d, cfg)
    claims = {c.id: c for c in rep.claims}
    eff = dec.effects_in_dispute(cfg)
    for ds_name in ("parts", "fmnist"):
        for key in dec.CLAIM_IDS:
            c = claims[f"decouple.{key}.{ds_name}"]
            measured = c.verdict != NT or c.design is not None
            if key in dec.COMPARISON_CLAIMS and measured:
                assert c.design is not None, c.id
            if c.design is not None:
                assert key in dec.COMPARISON_CLAIMS and c.design["effect_in_dispute"] == eff[key]
                assert c.design["unit"] == "images" and c.design["n_max"] >= c.design["n"]
                assert "paired per-image differences of this run" in c.design["sd_source"]
            gated_by_part_model = c.why.startswith("premise failed: " + dec.PART_MODEL_PREMISE)
            if ds_name == "fmnist" or top1_parts >= dec.FINE_GRAINED_BAR / 100 or not measured:
                assert not gated_by_part_model, c.id
            else:
                assert gated_by_part_model and c.verdict == I, c.id
            if measured and ds_name == "parts":
                assert dec.PART_MODEL_PREMISE in c.test, c.id  # the premise is part of every measured parts rule
    # the comparison claims of the (fully measured) Fashion-MNIST setting all carry a design over the full split
    for key in dec.COMPARISON_CLAIMS:
        c = claims[f"decouple.{key}.fmnist"]
        if key not in ("human_features", "larger_model_null"):  # no parts; no larger model in this run
            assert c.design is not None and c.design["n_max"] == 400, key
