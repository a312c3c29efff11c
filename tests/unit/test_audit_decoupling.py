"""The decoupling audit's rules (verdicts.Criteria) give the verdicts of the notebook's former if/elif ladders."""
from __future__ import annotations

import itertools
from types import SimpleNamespace

import numpy as np
import pytest

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


def test_gain_and_centre(rules):
    _, _, r = rules
    for g in IVS:
        for ok in (True, False):
            assert r["coverage_gain"].decide({"gap": g, "seeds_positive": ok}).verdict == old_gain(g, ok)
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
