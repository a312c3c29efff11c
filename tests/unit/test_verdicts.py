"""Each rule of the verdict engine returns each of its verdicts on constructed inputs, with its own text."""
import math

import pytest

from tokenprune.study import verdicts as V
from tokenprune.study.claims import OUTCOMES

R, N, I = "reproduced", "not reproduced", "inconclusive"


def test_decision_requires_a_reason_unless_reproduced():
    assert V.Decision(R, "", "rule").verdict == R
    with pytest.raises(ValueError, match="why: required"):
        V.Decision(N, " ", "rule")
    with pytest.raises(ValueError, match="verdict: unknown"):
        V.Decision("maybe", "x", "rule")
    assert V.not_testable("needs ImageNet").verdict == "not testable here"
    assert V.Decision(N, "a", "r").because("b").why == "a; b"


def test_exact():
    rule = V.Exact([196, 139, 99, 71], what="token counts")
    assert rule.decide([196, 139, 99, 71]).verdict == R
    d = rule.decide([196, 138, 97, 68])
    assert d.verdict == N and "token counts" in d.why and d.rule == rule.text


def test_rounded():
    rule = V.Rounded(3.0, 1)
    assert rule.decide(3.0295).verdict == R
    assert rule.decide(3.06).verdict == N
    assert "rounded to 1 decimal" in rule.text


def test_magnitude():
    rule = V.Magnitude(6.0, 1.0, unit="points")
    assert rule.decide(4.5, 3.9, 5.1).verdict == R          # meets [5, 7]
    d = rule.decide(3.0, 2.0, 4.0)
    assert d.verdict == N and "below" in d.why
    assert rule.decide(9.0, 8.5, 9.5).verdict == N
    assert rule.decide(math.nan, math.nan, math.nan).verdict == I
    assert "6.0 +- 1.0 points" in rule.text


def test_at_least():
    rule = V.AtLeast(1.5, 0.85, what="speedup")
    assert rule.decide(1.3).verdict == R
    assert rule.decide(1.2).verdict == N
    assert "0.85 x" in rule.text


@pytest.mark.parametrize("expected", [">", "<"])
def test_direction_without_test(expected):
    rule = V.Direction(expected)
    sign = 1 if expected == ">" else -1
    assert rule.decide(sign * 1.0, *sorted([sign * 0.5, sign * 1.5])).verdict == R
    assert rule.decide(-sign * 1.0, *sorted([-sign * 0.5, -sign * 1.5])).verdict == N
    assert rule.decide(0.1, -0.4, 0.6).verdict == I


def test_direction_with_test_requires_both():
    rule = V.Direction(">", test=True)
    assert rule.decide(1.0, 0.5, 1.5, p=0.01).verdict == R
    assert rule.decide(-1.0, -1.5, -0.5, p=0.01).verdict == N
    d = rule.decide(1.0, 0.5, 1.5, p=0.2)
    assert d.verdict == I and "disagree" in d.why
    assert rule.decide(0.1, -0.4, 0.6, p=0.6).verdict == I
    assert rule.decide(1.0, 0.5, 1.5, p=None).verdict == R  # no p-value: the interval decides
    assert "McNemar p < 0.05" in rule.text
    with pytest.raises(ValueError, match="expected"):
        V.Direction("=")


def test_equivalence():
    rule = V.Equivalence(0.5)
    assert rule.decide(0.1, -0.35, 0.55, low90=-0.3, high90=0.45).verdict == R
    assert rule.decide(1.0, 0.7, 1.3, low90=0.75, high90=1.25).verdict == N
    assert rule.decide(0.3, -0.2, 0.8, low90=-0.1, high90=0.7).verdict == I
    assert rule.decide(0.0, -0.1, 0.1, equivalent=True).verdict == R
    assert rule.decide(0.0, -0.1, 0.1).verdict == I  # no 90 % interval, no TOST result
    assert "+-0.5 points" in rule.text


def test_condition():
    rule = V.Condition("consistent when printed drop = accuracy - baseline within 0.01")
    assert rule.decide(True, "").verdict == R
    d = rule.decide(False, "a reporting error")
    assert d.verdict == N and d.rule == rule.text


def test_premise_gates_a_decision():
    inner = V.Direction(">").decide(1.0, 0.5, 1.5)
    held = V.Premise("the oracle beats the model", True).gate(inner)
    assert held.verdict == R and held.rule.startswith("premise: the oracle beats the model")
    failed = V.Premise("the oracle beats the model", False, "84.6 vs 85.6").gate(inner)
    assert failed.verdict == I and "premise failed: the oracle beats the model (84.6 vs 85.6)" == failed.why
    assert V.first_failed([V.Premise("a", True), V.Premise("b", False)]).name == "b"
    assert V.first_failed([V.Premise("a", True)]) is None


def test_every_verdict_is_reachable():
    """Across the rule kinds, every verdict of the ledger can be returned."""
    seen = {V.Direction(">").decide(1, 0.5, 1.5).verdict, V.Direction(">").decide(-1, -1.5, -0.5).verdict,
            V.Direction(">").decide(0, -1, 1).verdict, V.not_testable("x").verdict}
    assert seen == set(OUTCOMES)


def test_criteria_returns_each_verdict():
    rule = V.Criteria(reproduced=(V.Above("gap", 0.0), V.Flag("larger", "the gap is the largest")),
                      not_reproduced=(V.Below("gap", 0.0),))
    assert rule.decide({"gap": (1.0, 0.5, 1.5), "larger": True}).verdict == R
    d = rule.decide({"gap": (-1.0, -1.5, -0.5), "larger": False})
    assert d.verdict == N and "lies below 0" in d.why
    d = rule.decide({"gap": (1.0, 0.5, 1.5), "larger": False})
    assert d.verdict == I and "not shown: the gap is the largest" in d.why
    assert "reproduced when the 95 % interval of gap lies above 0 and the gap is the largest" in rule.text
    inside = V.AllOf((V.Inside("d", 1.0, level=90),))
    beyond = V.AnyOf((V.Beyond("d", 1.0),))
    assert inside.holds({"d": (0.1, -0.5, 0.5)}) and not beyond.holds({"d": (0.1, -0.5, 0.5)})
    assert beyond.holds({"d": (2.0, 1.5, 2.5)}) and "90 % interval of d lies inside +-1" in inside.text


def test_robustness_returns_each_verdict():
    rule = V.Robustness(1.0)
    same = {"name": "T=0.1", "estimate": 0.1, "low": -0.3, "high": 0.5, "p": 0.6, "equivalent": True}
    open_ = {"name": "T=2", "estimate": 0.4, "low": -0.6, "high": 1.4, "p": 0.3, "equivalent": False, "tost_p": 0.2}
    differs = {"name": "blocks 2/6/10", "estimate": -2.0, "low": -2.8, "high": -1.2, "p": 0.001, "equivalent": False}
    assert rule.decide([same]).verdict == R
    d = rule.decide([same, open_])
    assert d.verdict == I and "T=2" in d.why and "TOST p=0.2" in d.why
    d = rule.decide([same, open_, differs])
    assert d.verdict == N and "blocks 2/6/10" in d.why
    with pytest.raises(ValueError, match="alternatives"):
        rule.decide([])
