"""The rules of notebook 03 (tokenprune.study.audits.varmedad) give the verdicts of the notebook's former
hand-written rules, and its profile table passes the parameter check."""
import itertools

import pytest

from tokenprune.study import params, verdicts
from tokenprune.study.audits import varmedad as audit


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
        values.update(audit.beats_values(label, {"top1_diff": (lo + hi) / 2, "top1_diff_low": lo,
                                                 "top1_diff_high": hi, "mcnemar_p": p}))
    got = audit.beats_rule(labels).decide(values).verdict
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
    d = audit.ROBUST_RULE.decide(alts)
    assert d.verdict == _old_robust(alts)
    assert d.rule == audit.ROBUST_RULE.text


def test_robustness_needs_alternatives():
    with pytest.raises(ValueError):
        verdicts.Robustness(1.0).decide([])


@pytest.mark.parametrize("rho,jac,want", [((0.95, 0.92, 0.97), (0.8, 0.78, 0.82), "not reproduced"),
                                          ((0.95, 0.92, 0.97), (0.8, 0.70, 0.82), "inconclusive"),
                                          ((0.5, 0.4, 0.6), (0.5, 0.4, 0.6), "reproduced"),
                                          ((0.8, 0.6, 0.95), (0.9, 0.8, 0.95), "inconclusive")])
def test_rerank_rule(rho, jac, want):
    assert audit.RERANK_RULE.decide({audit.SPEARMAN: rho, audit.JACCARD: jac}).verdict == want


def test_margin_premises_come_first():
    seeds = verdicts.Premise("at least 3 seeds", False)
    epochs = verdicts.Premise("one epoch", False)
    d = seeds.gate(epochs.gate(audit.MARGIN_RULE.decide(1.0, 0.5, 1.5)))
    assert d.verdict == "inconclusive" and "3 seeds" in d.why


@pytest.mark.parametrize("profile", ["smoke", "default", "paper"])
def test_profiles_pass_the_parameter_check(profile):
    cfg = params.setup("03_variance_medad", profile, {})
    assert set(vars(cfg)) - {"profile"} == set(audit.PARAMETERS)
    with pytest.raises(ValueError):
        params.setup("03_variance_medad", profile, {"no_such_parameter": 1})
