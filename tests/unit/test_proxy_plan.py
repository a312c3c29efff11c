"""The pre-registered proxy plan: every criterion can be met and missed, the choice follows the declared order, the
fallback takes the candidate nearest the cost bands among those that meet everything else, and no candidate is below
64 tokens."""
import math

import pytest

from tokenprune.study import paper_numbers as pn
from tokenprune.study.proxy import plan as P

GOOD = {"object_token_share": 0.3, "cost@0.7": 2.0, "cost@0.7_low": 0.5, "cost@0.5": 8.0, "cost@0.5_low": 3.0,
        "tome_cost": 2.0, "ft_share_of_cost": 40.0, "ft_gain@0.7_low": 0.1, "top1": 90.0}
FIRST, SECOND = [c.name for c in P.CANDIDATES if c.role == "classification"][:2]


def _cand(name):
    return next(c for c in P.CANDIDATES if c.name == name)


def test_candidates_have_64_tokens_and_distinct_names():
    assert len({c.name for c in P.CANDIDATES}) == len(P.CANDIDATES)
    assert all(c.tokens >= 64 for c in P.CANDIDATES)
    assert {c.role for c in P.CANDIDATES} == set(P.BARS)


@pytest.mark.parametrize("key, bad", [("object_token_share", 0.6), ("cost@0.7", 0.2), ("cost@0.7", 4.5),
                                      ("cost@0.7_low", -0.1), ("cost@0.5", 1.0), ("cost@0.5", 13.0),
                                      ("cost@0.5_low", 0.0), ("tome_cost", 4.5), ("ft_share_of_cost", 20.0),
                                      ("ft_gain@0.7_low", -0.2), ("top1", 84.0)])
def test_each_criterion_is_met_and_missed(key, bad):
    cand = _cand(FIRST)
    assert all(P.judge(cand, GOOD).values())
    verdicts = P.judge(cand, {**GOOD, key: bad})
    # a keep-0.7 cost whose interval includes 0 misses K2 and, by round 3's clarification, K5 with it
    assert sum(v is False for v in verdicts.values()) == (2 if key == "cost@0.7_low" else 1)


def test_a_criterion_not_measured_is_none_and_blocks_the_choice():
    m = {k: v for k, v in GOOD.items() if not k.startswith("ft_")}
    assert P.judge(_cand(FIRST), m)["K5"] is None
    assert P.choose({FIRST: m}, "classification") == (None, "none")


def test_fine_grained_bar_and_criteria():
    birds = next(c for c in P.CANDIDATES if c.role == "fine-grained")
    assert set(P.judge(birds, GOOD)) == {"K1", "K2", "K3", "K6"}
    assert P.judge(birds, {**GOOD, "top1": 82.0})["K6"] is True
    assert P.judge(_cand(FIRST), {**GOOD, "top1": 82.0})["K6"] is False
    with pytest.raises(ValueError, match="role"):
        P.criteria_of("segmentation")


def test_choose_takes_the_first_in_declared_order():
    both = {SECOND: GOOD, FIRST: GOOD}
    assert P.choose(both, "classification") == (FIRST, "meets every criterion")
    assert P.choose({**both, FIRST: {**GOOD, "top1": 80.0}}, "classification") == (SECOND, "meets every criterion")


def test_fallback_is_nearest_the_bands_among_those_meeting_the_rest():
    far = {**GOOD, "cost@0.7": 8.0}                 # a factor 2 above K2's band
    near = {**GOOD, "cost@0.7": 5.0}                # 1.25 above it
    assert P.choose({FIRST: far, SECOND: near}, "classification") == (SECOND, "fallback")
    assert P.choose({FIRST: far, SECOND: {**near, "top1": 70.0}}, "classification") == (FIRST, "fallback")
    assert P.choose({FIRST: {**far, "tome_cost": 9.0}}, "classification") == (None, "none")


def test_band_distance_is_zero_inside_and_a_log_factor_outside():
    assert P.band_distance(GOOD) == 0.0
    assert P.band_distance({**GOOD, "cost@0.7": 8.0}) == pytest.approx(math.log(2))
    assert P.band_distance({**GOOD, "cost@0.5": 0.75}) == pytest.approx(math.log(2))
    assert P.band_distance({**GOOD, "cost@0.7": -1.0}) == math.inf


def test_the_families_are_round_3s_declaration():
    from tokenprune.training.proxy.round3 import SENSITIVITY

    assert set(P.FAMILIES) == set(SENSITIVITY) == {"tome", "evit"}
    assert all(P.FAMILIES[k].measure == SENSITIVITY[k]["measure"] for k in SENSITIVITY)
    assert P.FAMILIES["tome"].reference == pn.DEIT_CLASS_OFF_THE_SHELF["tome_deit_s_r13_pp"]
    assert P.FAMILIES["evit"].reference is None and P.FAMILIES["evit"].measure == "cost@0.7"


def test_the_tome_factor_scales_by_deit_s_tome_cost_and_evit_has_none():
    ref = pn.DEIT_CLASS_OFF_THE_SHELF["tome_deit_s_r13_pp"]
    m = {"tome_cost": 3 * ref, "cost@0.7": 2.0}
    assert P.family_factor(m, "tome") == pytest.approx(3.0) and P.missing_factor("tome", m) == ""
    assert P.family_factor(m, "evit") is None                    # no verified DeiT-S reference, whatever the cost
    assert P.missing_factor("evit", m) == P.missing_factor("evit") != ""
    for bad in ({"tome_cost": 0.0}, {"tome_cost": -0.4}, {"tome_cost": float("nan")}, {"tome_cost": None}, {}):
        assert P.family_factor(bad, "tome") is None and P.missing_factor("tome", bad) != ""
    assert P.missing_factor("tome", {"tome_cost": 0.0}) != P.missing_factor("tome", {}) != P.missing_factor("evit")
    with pytest.raises(ValueError):
        P.family_factor(m, "bat")
    assert P.DEIT_S_MAC_RATIO == pytest.approx(2.7 / 4.6)
