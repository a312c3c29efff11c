"""Minimum detectable effects (tokenprune.measure.power) and the Detectable gate of the verdict engine."""
import math

import numpy as np
import pytest

from tokenprune.measure import power
from tokenprune.study import claims as CL
from tokenprune.study import ledger as L
from tokenprune.study import report as R
from tokenprune.study import verdicts as V


def _claim(cid: str, verdict: str, **over) -> CL.Claim:
    fields = dict(id=cid, paper="evit", statement="s", quote='"q"', source="t", kind="paper claim", setting="proxy",
                  section="§1", verdict=verdict, outcome=CL.OUTCOMES[verdict], why="" if verdict == "reproduced"
                  else "because")
    fields.update(over)
    return CL.Claim(**fields)


def test_mde_normal_formula_and_scaling():
    # (1.95996 + 0.84162) * sd / sqrt(n)
    assert power.mde(1.0, 100) == pytest.approx(2.80158 / 10, rel=1e-4)
    assert power.mde(2.0, 400) == pytest.approx(power.mde(1.0, 100))
    assert power.mde(1.0, 1) == math.inf


def test_mde_uses_student_t_for_few_units():
    # 5 seeds: t_{0.975,4} + t_{0.8,4} = 2.7764 + 0.9410
    assert power.mde(1.0, 5) == pytest.approx((2.77645 + 0.94096) / math.sqrt(5), rel=1e-4)
    assert power.mde(1.0, 5) > 2.80158 / math.sqrt(5)


def test_mde_has_80_percent_power_by_simulation():
    rng = np.random.default_rng(0)
    n, sd = 400, 1.0
    effect = power.mde(sd, n)
    hits = 0
    for _ in range(2000):
        d = rng.normal(effect, sd, n)
        se = d.std(ddof=1) / math.sqrt(n)
        hits += d.mean() - 1.959964 * se > 0
    assert 0.77 < hits / 2000 < 0.83


def test_n_for_mde_is_the_smallest_n():
    n = power.n_for_mde(0.3, 5.0)
    assert power.mde(5.0, n) <= 0.3 < power.mde(5.0, n - 1)
    n5 = power.n_for_mde(1.0, 0.5)
    assert power.mde(0.5, n5) <= 1.0 < power.mde(0.5, n5 - 1)  # in the t range
    with pytest.raises(ValueError, match="target"):
        power.n_for_mde(0.0, 1.0)


def test_paired_sd_of_binary_outcomes_does_not_depend_on_direction():
    a = np.array([1, 0, 1, 1, 0, 1, 1, 1] * 50)
    b = np.array([1, 1, 0, 1, 0, 1, 1, 1] * 50)
    assert power.paired_sd(a, b, 100) == pytest.approx(power.paired_sd(b, a, 100))
    # 2 of 8 discordant, balanced: sd = 100 * sqrt(0.25) (ddof 1 correction)
    assert power.paired_sd(a, b, 100) == pytest.approx(100 * math.sqrt(0.25 * 400 / 399))
    with pytest.raises(ValueError, match="a, b"):
        power.paired_sd([1], [0])


def test_design_validation_and_record():
    d = power.Design.paired(np.ones(100), np.r_[np.ones(90), np.zeros(10)], unit="images", n_max=10000,
                            max_scale="the full test split")
    rec = d.record(0.5)
    assert rec["n"] == 100 and rec["mde_at_max"] < rec["mde"] and rec["effect_in_dispute"] == 0.5
    assert power.mde(d.sd, rec["n_needed"]) <= 0.5
    with pytest.raises(ValueError, match="unit"):
        power.Design(unit="apples", n=5, sd=1.0, sd_source="", n_max=5, max_scale="")
    with pytest.raises(ValueError, match="n_max"):
        power.Design(unit="seeds", n=5, sd=1.0, sd_source="", n_max=3, max_scale="")


def _design(sd, n, n_max):
    return power.Design(unit="images", n=n, sd=sd, sd_source="constructed", n_max=n_max, max_scale="the full split")


INCONCLUSIVE = V.Decision(V.INCONCLUSIVE, "difference +0.1 [-0.4, +0.6] contains 0", "direction")


def test_detectable_turns_an_undetectable_inconclusive_into_not_testable():
    gate = V.Detectable(effect=0.3, design=_design(sd=20.0, n=1000, n_max=10000))  # MDE at max 0.56 > 0.6? no
    assert gate.design.mde_at_max == pytest.approx(0.5603, rel=1e-3)
    assert gate.gate(INCONCLUSIVE).verdict == V.INCONCLUSIVE  # 0.56 <= 2 x 0.3: testable, underpowered here
    assert "underpowered" in gate.gate(INCONCLUSIVE).why
    weak = V.Detectable(effect=0.2, design=_design(sd=20.0, n=1000, n_max=10000))
    out = weak.gate(INCONCLUSIVE)
    assert out.verdict == V.NOT_TESTABLE and "needs about" in out.why and "detectable" in out.rule
    strong = V.Detectable(effect=3.0, design=_design(sd=20.0, n=1000, n_max=10000))
    assert strong.gate(INCONCLUSIVE).verdict == V.INCONCLUSIVE and "underpowered" not in strong.gate(INCONCLUSIVE).why


def test_detectable_passes_decisive_verdicts_and_failed_premises():
    weak = V.Detectable(effect=0.01, design=_design(sd=20.0, n=100, n_max=100))
    for verdict in (V.REPRODUCED, V.NOT_REPRODUCED):
        dec = V.Decision(verdict, "" if verdict == V.REPRODUCED else "the opposite holds", "direction")
        assert weak.gate(dec).verdict == verdict
    failed = V.Premise("the model can do the task", False).gate(INCONCLUSIVE)
    assert weak.gate(failed).verdict == V.INCONCLUSIVE
    with pytest.raises(ValueError, match="effect"):
        V.Detectable(effect=0.0, design=_design(1.0, 10, 10))


def test_claim_design_is_validated_and_shown_in_the_ledger(tmp_path):
    gate = V.Detectable(effect=0.3, design=_design(sd=20.0, n=1000, n_max=10000))
    with pytest.raises(ValueError, match="design"):
        _claim("x", "reproduced", design={"mde": 1})
    rep = R.Report("01_evit", out_dir=tmp_path / "01_evit", profile="smoke")
    d = gate.gate(INCONCLUSIVE)
    rep.add_claim(_claim("a.b", d.verdict, why=d.why, test=d.rule, design=gate.record()))
    rep.add_claim(_claim("a.c", "reproduced"))
    rep.write()
    ledger = L.build_ledger(tmp_path)
    assert "| MDE |" in ledger
    assert "1.77 (1000 images; 0.56 at 10000) vs 0.3" in ledger
    assert "Designs: 1 claims state their minimum detectable effect" in ledger
    assert "0 of the 1 with an effect in dispute detect it at this run's scale" in ledger
    assert L.ledger_verdicts(tmp_path) == {("01_evit", "a.b"): "inconclusive", ("01_evit", "a.c"): "reproduced"}


def test_rename_claims_keeps_order_and_refuses_unknown_or_repeated_ids(tmp_path):
    rep = R.Report("03_variance_medad", out_dir=tmp_path / "03", profile="paper")
    for cid in ("varmedad.a", "varmedad.b"):
        rep.add_claim(_claim(cid, "reproduced", paper="varmedad"))
    rep.rename_claims({"varmedad.a": "varmedad.paper_scale.a"})
    assert [c.id for c in rep.claims] == ["varmedad.paper_scale.a", "varmedad.b"]
    assert rep.claims[0].verdict == "reproduced" and rep.claims[0].profile == "paper"
    with pytest.raises(ValueError, match="not filed"):
        rep.rename_claims({"varmedad.a": "x"})
    with pytest.raises(ValueError, match="repeat"):
        rep.rename_claims({"varmedad.b": "varmedad.paper_scale.a"})

def test_bar_premise_reads_the_checkpoint_and_the_role_bar():
    from tokenprune.study.proxy import chosen as C

    p = C.bar_premise("small_vit_fmnist_smoke")  # a smoke model is far below any bar
    assert p.holds is False and p.name == C.PROXY_BAR and "small_vit_fmnist_smoke" in p.detail
    fine = C.bar_premise("small_vit_fmnist_smoke", role="fine-grained")
    assert fine.name == C.FINE_GRAINED_BAR and "bar 80 %" in fine.detail
