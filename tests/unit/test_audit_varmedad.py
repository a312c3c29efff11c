"""The rules of notebook 03 (tokenprune.study.audits.varmedad) give the verdicts of the notebook's former
hand-written rules, and its profile table passes the parameter check."""
import itertools

import pytest

from tokenprune.core.patch import prune_state
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


# ---------------------------------------------------------------------------------------------- added rules (issue 13)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from types import SimpleNamespace  # noqa: E402

from tokenprune.measure.evaluation import Predictions  # noqa: E402


def test_equivalence_margin_is_below_the_effects_in_dispute():
    assert audit.EQUIV_MARGIN * 100 < 0.22 and audit.ROBUST_RULE.margin < 0.22
    assert "+-0.2 top-1 points" in audit.ROBUST_RULE.text


def test_cluster_bootstrap_resamples_the_clusters():
    rng = np.random.default_rng(0)
    # 5 clusters of 3 near-identical values: as 15 independent values the interval is far too narrow
    centres = rng.normal(0, 1, 5)
    v = np.repeat(centres, 3) + rng.normal(0, 0.01, 15)
    g = np.repeat(np.arange(5), 3)
    naive = audit.metrics.bootstrap_ci(v, seed=0)
    clus = audit.cluster_bootstrap_ci(v, g, seed=0)
    assert clus.estimate == pytest.approx(v.mean())
    assert (clus.high - clus.low) > 1.4 * (naive.high - naive.low)
    # one value per cluster: the ordinary bootstrap (same width within Monte Carlo error)
    single = audit.cluster_bootstrap_ci(centres, np.arange(5), seed=0)
    plain = audit.metrics.bootstrap_ci(centres, seed=0)
    assert single.high - single.low == pytest.approx(plain.high - plain.low, rel=0.15)
    # unequal cluster sizes, NaN dropped, no finite value -> NaN
    w = audit.cluster_bootstrap_ci([1.0, 2.0, np.nan, 4.0], ["a", "a", "b", "b"], seed=0)
    assert w.estimate == pytest.approx(7 / 3) and 1.0 <= w.low <= w.high <= 4.0
    assert np.isnan(audit.cluster_bootstrap_ci([np.nan], [0]).estimate)
    with pytest.raises(ValueError):
        audit.cluster_bootstrap_ci([1.0, 2.0], [0])


def _axis_values(jac, acc, p, eq):
    return {audit.MEDAD_JAC: jac, audit.MEDAD_ACC: acc, "McNemar p < 0.05, readings": p < 0.05,
            f"equivalent within +-{audit.EQUIV_MARGIN * 100:g} points": eq}


@pytest.mark.parametrize("jac,acc,p,eq,want", [
    ((0.5, 0.45, 0.55), (1.5, 0.8, 2.2), 0.001, False, "reproduced"),        # different sets, different accuracy
    ((0.5, 0.45, 0.55), (0.0, -0.1, 0.1), 0.9, True, "not reproduced"),       # accuracy equal within 0.2 points
    ((0.9, 0.88, 0.92), (1.5, 0.8, 2.2), 0.001, False, "inconclusive"),       # nearly the same sets
    ((0.5, 0.45, 0.55), (0.3, -0.5, 1.1), 0.4, False, "inconclusive")])       # neither shown
def test_medad_axis_rule(jac, acc, p, eq, want):
    assert audit.MEDAD_AXIS_RULE.decide(_axis_values(jac, acc, p, eq)).verdict == want


@pytest.mark.parametrize("rule,args,want", [
    (audit.VS_MEDAD_RULE, (0.8, 0.3, 1.3, 0.01), "reproduced"),
    (audit.VS_MEDAD_RULE, (-0.8, -1.3, -0.3, 0.01), "not reproduced"),
    (audit.VS_MEDAD_RULE, (0.1, -0.4, 0.6, 0.7), "inconclusive"),
    (audit.MEDAD_R03_RULE, (-1.0, -2.0, -0.1), "reproduced"),
    (audit.MEDAD_R03_RULE, (-6.0, -7.0, -5.0), "not reproduced"),
    (audit.MEDAD_R03_RULE, (-3.0, -4.0, -2.0), "inconclusive"),
    (audit.BACKGROUND_RULE, (-10.0, -12.0, -8.0), "reproduced"),
    (audit.BACKGROUND_RULE, (5.0, 3.0, 7.0), "not reproduced"),
    (audit.BACKGROUND_RULE, (0.5, -1.0, 2.0), "inconclusive")])
def test_direction_rules_reach_every_verdict(rule, args, want):
    assert rule.decide(*args).verdict == want


def test_r07_rules():
    assert audit.R07_MACS_RULE.decide(1.52).verdict == "reproduced"
    assert audit.R07_MACS_RULE.decide(1.3).verdict == "not reproduced"
    key = "speedup vs unpruned, variance r=0.7"
    assert audit.R07_SPEED_RULE.decide({key: (1.5, 1.4, 1.6)}).verdict == "reproduced"
    assert audit.R07_SPEED_RULE.decide({key: (1.1, 1.0, 1.2)}).verdict == "not reproduced"
    assert audit.R07_SPEED_RULE.decide({key: (1.4, 1.2, 1.6)}).verdict == "inconclusive"


class _Rep:
    def __init__(self):
        self.claims = []

    def add_claim(self, **kw):
        self.claims.append(kw)


def _preds(correct, n=400):
    labels = torch.zeros(n, dtype=torch.long)
    logits = torch.zeros(n, 2)
    logits[~torch.as_tensor(correct), 1] = 1.0      # wrong images predict class 1
    return Predictions(logits, labels)


def _sensitivity_inputs(cls_scale: float):
    rng = np.random.default_rng(0)
    base = rng.random(400) < 0.8
    preds = {name: _preds(base) for name in ("variance", "variance_T1e-9", "variance_T1e3", "variance_no_fusion")}
    for locs in audit.BLOCK_ALTERNATIVES:
        for matched in (True, False):
            preds[audit._blocks_name(locs, matched)] = _preds(base)
    sweep = audit.pd.DataFrame({"config": list(preds), "keep_rate": 0.6, "gmacs": 1.0})
    # cached [CLS] rows of a trained base model: 8 images, 4 heads, 1 + 49 tokens, scaled to cls_scale
    rows = torch.rand(8, 4, 50, generator=torch.Generator().manual_seed(0)) * cls_scale
    cache = SimpleNamespace(cls_attn={audit.LOCS[0]: rows}, num_prefix_tokens=1)
    cfg = SimpleNamespace(temperature=0.5, base_model="m", seed=0)
    subjects = SimpleNamespace(rank_sources={"m (trained)": cache})
    return preds, sweep, cfg, subjects


def test_temperature_claim_needs_a_temperature_that_moves_the_weights():
    # the same accuracy for every T; a T that moves the weights (T -> 0 always does) is judged, T = 1000 is not
    preds, sweep, cfg, subjects = _sensitivity_inputs(1e-2)
    rep = _Rep()
    audit.sensitivity(rep, preds, sweep, 1.0, cfg, subjects)
    t = next(c for c in rep.claims if c["id"] == "varmedad.obj4.temperature")
    assert t["decision"].verdict == "reproduced" and "variance_T1e-9" in t["why"]
    d = audit.temperature_distance(subjects, "m", 0.5, {"a": 1e-9, "b": 1e3})
    assert d["a"] > audit.TV_MIN > d["b"]


def test_temperature_premise_fails_when_no_tested_t_changes_the_weights(monkeypatch):
    preds, sweep, cfg, subjects = _sensitivity_inputs(1e-2)
    monkeypatch.setattr(audit, "temperature_distance", lambda *a, **k: {"variance_T1e-9": 0.0, "variance_T1e3": 0.0})
    rep = _Rep()
    audit.sensitivity(rep, preds, sweep, 1.0, cfg, subjects)
    t = next(c for c in rep.claims if c["id"] == "varmedad.obj4.temperature")
    assert t["decision"].verdict == "inconclusive" and "premise failed" in t["decision"].why
    # the blocks claim is judged on the MAC-matched block sets only
    b = next(c for c in rep.claims if c["id"] == "varmedad.obj4.blocks")
    assert "_matched" in b["unit"] and "matched" in b["why"]


def test_robust_claim_finds_a_difference_on_the_judged_alternatives_only():
    rng = np.random.default_rng(1)
    base = rng.random(2000) < 0.8
    worse = base.copy()
    worse[np.flatnonzero(base)[:300]] = False           # 15 points worse
    preds = {"variance": _preds(base, 2000), "good": _preds(base, 2000), "bad": _preds(worse, 2000)}
    rep = _Rep()
    audit.robust_claim(rep, preds, "x", "s", ["good", "bad"], "", 0, decide_on=["good"])
    audit.robust_claim(rep, preds, "y", "s", ["good", "bad"], "", 0)
    assert rep.claims[0]["decision"].verdict == "reproduced"
    assert rep.claims[1]["decision"].verdict == "not reproduced"


def test_added_claim_functions_file_their_claims():
    rng = np.random.default_rng(2)
    base = rng.random(400) < 0.8
    worse = base.copy()
    worse[np.flatnonzero(base)[:60]] = False            # 15 points worse
    preds = {"unpruned": _preds(base), "variance": _preds(base), "medad": _preds(worse),
             "medad_per_head_reading": _preds(base), "variance_r03": _preds(base), "medad_r03": _preds(worse)}
    cfg = SimpleNamespace(seed=0, base_model="m")
    rep = _Rep()
    audit.variance_vs_medad(rep, preds, cfg)
    audit.medad_r03_claims(rep, preds, cfg)
    rows = torch.rand(6, 4, 50, generator=torch.Generator().manual_seed(0))
    subjects = SimpleNamespace(rank_sources={"m (trained)": SimpleNamespace(cls_attn={audit.LOCS[0]: rows},
                                                                            num_prefix_tokens=1)}, rank_groups={})
    table = audit.medad_axis(rep, preds, subjects, cfg)
    got = {c["id"]: c["decision"].verdict for c in rep.claims}
    assert got["varmedad.variance_vs_medad"] == "reproduced"                # variance 15 points above MedAD
    assert got["varmedad.medad_r03.offtheshelf"] == "not reproduced"        # MedAD r=0.3 15 points below
    assert "varmedad.medad_r03.finetuned" not in got                       # filed with the fine-tuned margins
    # every comparison files its design, with the effect in dispute from paper_numbers
    by_id = {c["id"]: c for c in rep.claims}
    assert by_id["varmedad.variance_vs_medad"]["design"]["effect_in_dispute"] == pytest.approx(0.08)
    assert by_id["varmedad.medad_r03.offtheshelf"]["design"]["effect_in_dispute"] == pytest.approx(3.0)
    assert by_id["varmedad.eq7.median_axis"]["design"]["effect_in_dispute"] == pytest.approx(audit.EQUIV_MARGIN * 100)
    assert got["varmedad.eq7.median_axis"] == "reproduced"                 # random rows: the readings differ
    assert 0 <= table.jaccard.iloc[0] < audit.JAC_SAME


# ---------------------------------------------------------------------------------------------- designs (issue 14)
from tokenprune.measure.power import Design  # noqa: E402
from tokenprune.study.paper_numbers import VARMEDAD  # noqa: E402


def test_effects_in_dispute_come_from_the_paper_numbers():
    t = VARMEDAD["matched"]["top1"]
    assert audit.EFFECTS["variance_vs_medad"] == pytest.approx(t["attention_variance"] - t["attention_medad"])
    assert audit.EFFECTS["variance_vs_medad"] == pytest.approx(0.08)
    assert audit.EFFECTS["variance_vs_evit"] == pytest.approx(0.22)
    assert audit.EFFECTS["variance_vs_tome"] == pytest.approx(0.54)
    assert audit.EFFECTS["overlap_vs_unpruned"] == VARMEDAD["overlap"]["margin"]
    assert audit.EFFECTS["medad_r03"] == VARMEDAD["medad_r03"]["max_drop"]
    assert all(v > 0 for v in audit.EFFECTS.values())


def _flip(correct, k, to=True, start=0):
    """``correct`` with ``k`` of its wrong (to=True) or right (to=False) images flipped."""
    out = np.array(correct, copy=True)
    idx = np.flatnonzero(out != to)[start:start + k]
    out[idx] = to
    return out


def test_image_design_is_paired_per_image_correctness():
    base = np.random.default_rng(3).random(1000) < 0.7
    other = _flip(base, 50)                                     # 50 discordant images, all one way
    d = audit.image_design(_preds(other, 1000), _preds(base, 1000), n_max=10000)
    assert d.unit == "images" and d.n == 1000 and d.n_max == 10000 and d.max_scale == "the full test split"
    assert d.sd == pytest.approx(np.std(100.0 * (other.astype(float) - base), ddof=1))
    assert d.mde_at_max < d.mde and "1000 paired per-image differences" in d.sd_source
    # without n_max the largest scale is the images here
    d0 = audit.image_design(_preds(other, 1000), _preds(base, 1000))
    assert d0.n_max == 1000 and d0.mde_at_max == d0.mde


def test_seed_design_needs_two_seeds():
    assert audit.seed_design([0.5], "x") is None
    d = audit.seed_design([0.1, 0.3, 0.2], "x")
    assert d.unit == "seeds" and d.n == 3 and d.n_max == 5 and d.sd == pytest.approx(0.1)
    assert audit.seed_design([0.1] * 6, "x").n_max == 6


def test_cluster_design_uses_the_cluster_as_the_unit():
    diffs = np.array([1.0, 1.2, 0.0, 0.2, 2.0, 2.2])
    d = audit.cluster_design(diffs, ["a", "a", "b", "b", "c", "c"], "photos", 3, "the 3 photos")
    assert d.unit == "photos" and d.n == 3 and d.n_max == 3
    assert d.sd == pytest.approx(np.std([1.1, 0.1, 2.1], ddof=1))


def _design(sd, n=1000, n_max=10000):
    return Design(unit="images", n=n, sd=sd, sd_source="test", n_max=n_max, max_scale="the full test split")


def test_binding_gate_takes_the_undecided_part_with_the_largest_mde_per_effect():
    tight, wide = _design(5.0), _design(40.0)
    det, label = audit.binding_gate([("decided", 0.2, wide, True), ("open", 0.2, tight, False)])
    assert label == "open" and det.design is tight           # a decided part cannot keep the claim undecided
    det, label = audit.binding_gate([("a", 0.2, tight, True), ("b", 0.2, wide, True)])
    assert label == "b"                                      # all decided: the weakest part
    det, label = audit.binding_gate([("a", 0.1, tight, False), ("b", 1.0, wide, False)])
    assert label == "a"                                      # MDE relative to each part's own effect
    with pytest.raises(ValueError):
        audit.binding_gate([])


def test_moved_premise():
    rng = np.random.default_rng(4)
    base = rng.random(2000) < 0.6
    better = [_preds(_flip(base, 150, start=s), 2000) for s in range(3)]     # +7.5 points per seed
    same = [_preds(base, 2000) for _ in range(3)]
    ots = {"variance": _preds(base, 2000), "evit": _preds(base, 2000)}
    ft = {**{("variance", s): better[s] for s in range(3)}, **{("evit", s): same[s] for s in range(3)},
          **{("unpruned", s): same[s] for s in range(3)}}
    assert audit.moved_premise(ft, ots, ("variance", "unpruned"), [0, 1, 2]).holds     # unpruned is the control
    p = audit.moved_premise(ft, ots, ("variance", "evit"), [0, 1, 2])
    assert not p.holds and "evit: fine-tuned - off the shelf +0.00" in p.detail
    p = audit.moved_premise(ft, {"variance": ots["variance"]}, ("variance", "evit"), [0, 1, 2])
    assert not p.holds and "no off-the-shelf run" in p.detail


def _margin_inputs(moved: bool, gains=(72, 80, 88), seeds=(0, 1, 2)):
    """Fine-tuned variance and EViT on 4000 images: EViT 1 point below the fine-tuned start, variance ``gains[i]``
    images (40 = 1 point) above EViT at seed i; the fine-tuned start is 5 points above the off-the-shelf models
    when ``moved``, the same model otherwise."""
    n = 4000
    ots = np.arange(n) < 2400                                   # 60 % correct, images 0..2399
    ft_base = ots.copy()
    if moved:
        ft_base[2400:2600] = True                               # +5 points
    ft = {}
    for i, s in enumerate(seeds):
        ev = ft_base.copy()
        ev[:40] = False                                         # -1 point
        va = ev.copy()
        g = gains[i]
        if g >= 0:
            va[3000:3000 + g] = True
        else:
            va[100:100 - g] = False
        ft[("evit", s)], ft[("variance", s)] = _preds(ev, n), _preds(va, n)
    ots_preds = {"variance": _preds(ots, n), "evit": _preds(ots, n)}
    cfg = SimpleNamespace(finetune_configs=["variance", "evit"], finetune_steps=2000, finetune_batch=32,
                          finetune_lr=3e-4, seeds=list(seeds), seed=0, base_model="m", profile="default")
    return ft, ots_preds, cfg


@pytest.mark.parametrize("moved,gains,seeds,want,why", [
    (True, (72, 80, 88), (0, 1, 2), "reproduced", ""),                 # +1.8/+2.0/+2.2 points
    (True, (-88, -80, -72), (0, 1, 2), "not reproduced", "the opposite holds"),
    (False, (72, 80, 88), (0, 1, 2), "inconclusive", "premise failed: the fine-tuning moved the model"),
    (True, (80,), (0,), "inconclusive", "premise failed: at least 3 seeds"),
    (True, (-40, 80, 200), (0, 1, 2), "not testable here", "5 seeds"),  # -1/+2/+5: 5 seeds cannot detect 0.22
])
def test_margin_claim_verdicts(moved, gains, seeds, want, why):
    ft, ots, cfg = _margin_inputs(moved, gains, seeds)
    rep = _Rep()
    audit.margin_claim(rep, ft, 60000, 4000, cfg, "c", "variance", "evit", 0.22, "s", "src", ots_preds=ots)
    c = rep.claims[0]
    assert c["decision"].verdict == want and why in c["decision"].why
    if len(seeds) > 1:
        assert c["design"]["unit"] == "seeds" and c["design"]["effect_in_dispute"] == pytest.approx(0.22)
    else:
        assert c["design"] is None


def test_margin_claim_medad_r03_rule_and_unrun_configs():
    """'MedAD r = 0.3 stays within 3 points of the unpruned model' by the same seed-level claim: 2 points below
    the unpruned fine-tune at every seed is within the margin; a profile that fine-tunes neither is not testable."""
    n = 4000
    ots = np.arange(n) < 2000
    ft = {}
    for s, k in zip((0, 1, 2), (76, 80, 84)):                   # -1.9/-2.0/-2.1 points
        un = ots.copy()
        un[2000:2400] = True                                    # the fine-tunes moved it: +10 points
        md = un.copy()
        md[:k] = False
        ft[("unpruned", s)], ft[("medad_r03", s)] = _preds(un, n), _preds(md, n)
    cfg = SimpleNamespace(finetune_configs=["medad_r03", "unpruned"], finetune_steps=128, finetune_batch=128,
                          finetune_lr=3e-4, seeds=[0, 1, 2], seed=0, base_model="m", profile="default")
    rep = _Rep()
    audit.margin_claim(rep, ft, 60000, n, cfg, "c", "medad_r03", "unpruned", -3.0, "s", "src",
                       ots_preds={"medad_r03": _preds(ots, n)}, rule=audit.MEDAD_R03_RULE)
    c = rep.claims[0]
    assert c["decision"].verdict == "reproduced" and c["our_value"] == pytest.approx(-2.0)
    assert c["design"]["effect_in_dispute"] == pytest.approx(3.0) and "16384 images" in c["why"]
    cfg.finetune_configs = ["variance"]
    audit.margin_claim(rep, ft, 60000, n, cfg, "d", "medad_r03", "unpruned", -3.0, "s", "src", ots_preds={})
    assert rep.claims[1]["decision"].verdict == "not testable here"


def _zero_mean_noise(base, k):
    """``base`` with ``k`` wrong images made right and ``k`` right ones made wrong: net 0, 2k discordant."""
    out = np.array(base, copy=True)
    out[np.flatnonzero(~base)[:k]] = True
    out[np.flatnonzero(base)[:k]] = False
    return out


def test_variance_vs_medad_gate():
    rng = np.random.default_rng(6)
    base = rng.random(400) < 0.8
    noisy = _zero_mean_noise(base, 20)                  # 40 discordant images, difference 0
    preds = {"variance": _preds(noisy), "medad": _preds(base), "variance_r03": _preds(base), "medad_r03": _preds(base)}
    rep = _Rep()
    cfg = SimpleNamespace(seed=0, base_model="m")
    audit.variance_vs_medad(rep, preds, cfg, n_max=10000)
    audit.variance_vs_medad(rep, preds, cfg, n_max=10 ** 9)
    a, b = (c["decision"] for c in rep.claims)
    assert a.verdict == "not testable here" and "deciding it needs about" in a.why      # 0.08 is out of reach
    assert b.verdict == "inconclusive" and "underpowered" in b.why                       # reachable at 1e9 images
    assert rep.claims[0]["design"]["n_max"] == 10000


def test_robust_claim_files_a_design_and_can_be_not_testable():
    rng = np.random.default_rng(7)
    base = rng.random(200) < 0.8
    noisy = _flip(_flip(base, 10), 10, to=False, start=5)   # 20 discordant images, net 0: not equivalent at n = 200
    preds = {"variance": _preds(base, 200), "alt": _preds(noisy, 200)}
    rep = _Rep()
    audit.robust_claim(rep, preds, "x", "s", ["alt"], "", 0, n_max=400)
    audit.robust_claim(rep, preds, "y", "s", ["alt"], "", 0, n_max=10 ** 7)
    a, b = rep.claims
    assert a["decision"].verdict == "not testable here" and a["design"]["n_max"] == 400
    assert b["decision"].verdict == "inconclusive"
    assert a["design"]["effect_in_dispute"] == pytest.approx(audit.EQUIV_MARGIN * 100)


def test_matched_offtheshelf_gate_binds_on_the_open_part():
    rng = np.random.default_rng(8)
    base = rng.random(2000) < 0.7
    var = _flip(base, 300)                                   # +15 points over EViT: that part is won
    preds = {"variance": _preds(var, 2000), "evit": _preds(base, 2000), "medad": _preds(base, 2000),
             "tome": _preds(_zero_mean_noise(var, 60), 2000)}   # ToMe: open, 120 discordant images, net 0
    sweep = audit.pd.DataFrame({"config": ["evit", "tome", "medad"], "gmacs": [1.0, 1.0, 1.0]})
    rep = _Rep()
    cfg = SimpleNamespace(seed=0, base_model="m")
    audit.matched_offtheshelf(rep, preds, sweep, SimpleNamespace(rel_error=0.0), cfg, n_max=2000)
    c = rep.claims[0]
    assert c["decision"].verdict == "not testable here" and "variance vs tome, the part that binds" in c["why"]
    assert c["design"]["effect_in_dispute"] == pytest.approx(0.54)
    # the same comparison won on both parts: reproduced whatever the power
    preds["tome"] = preds["evit"]
    audit.matched_offtheshelf(rep, preds, sweep, SimpleNamespace(rel_error=0.0), cfg, n_max=2000)
    assert rep.claims[1]["decision"].verdict == "reproduced"


# ---------------------------------------------------------------------------------------------- cached fine-tunes
def _tiny_subjects():
    """A 12-block, 16-wide timm ViT on 28 px and a 256/32-image split in the layout finetune_all reads."""
    import datasets
    from timm.models.vision_transformer import VisionTransformer

    from tokenprune.training.loop import Preprocess, TrainRecipe

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
    from tokenprune.study.params import setup
    from tokenprune.training import base_models

    monkeypatch.setattr(audit, "_ft_cache", lambda profile: tmp_path if profile == "default" else None)
    s = _tiny_subjects()
    small = {"finetune_steps": 2, "finetune_batch": 16, "dtype": "fp32"}
    for k, v in small.items():                                              # the cached settings, on a tiny model
        monkeypatch.setitem(audit.PROFILES["default"], k, v)
    cfg = setup("03_variance_medad", "default", {"finetune_configs": ["variance", "unpruned"], "seeds": [0]})
    _, var_cfg, tome = audit.sweep_configs(s.base, 0.5, [0.6])
    rows, preds, refs, infos = audit._finetune_runs(s, var_cfg, tome, cfg, "cpu", build=True)
    assert [i["loaded"] for i in infos] == [False, False, False]            # variance's reference, variance, unpruned
    assert set(refs) == {"variance"} and set(preds) == {("variance", 0), ("unpruned", 0)}
    assert all(len(p.labels) == 32 for p in preds.values())                 # the full test split
    ft, preds2, refs2, n = audit.finetune_all(s, var_cfg, tome, cfg, "cpu")
    assert ft.loaded.all() and n == 256
    assert torch.equal(preds2[("variance", 0)].logits, preds[("variance", 0)].logits)
    assert all(len(i["weights_sha256"]) == 64 for i in infos)
    for f in tmp_path.glob("vm_ft_unpruned_s0-*.npz"):
        f.unlink()
    with pytest.raises(base_models.CheckpointMissingError, match="make models"):
        audit.finetune_all(s, var_cfg, tome, cfg, "cpu")
    # another setting is trained in the notebook and not kept
    other = setup("03_variance_medad", "default", {"finetune_configs": ["unpruned"], "seeds": [0],
                                                    "finetune_steps": 1})
    before = sorted(tmp_path.iterdir())
    ft3, _, _, _ = audit.finetune_all(s, var_cfg, tome, other, "cpu")
    assert not ft3.loaded.any() and sorted(tmp_path.iterdir()) == before


def test_overlap_claim_needs_a_fine_tune_that_trains_the_embeddings():
    ft, ots, cfg = _margin_inputs(True)
    cfg.finetune_configs = ["overlap_variance", "unpruned"]
    ft = {("overlap_variance" if k[0] == "variance" else "unpruned", k[1]): v for k, v in ft.items()}
    ots = {"overlap_variance": ots["variance"]}
    for base, want in (("vit_s14_fmnist_ft", "inconclusive"), ("deit_s_imagenet100", "reproduced")):
        cfg.base_model = base                               # the proxy trains only its tail; DeiT-S everything
        rep = _Rep()
        audit.margin_claim(rep, ft, 60000, 4000, cfg, "c", "overlap_variance", "unpruned", 0.42, "s", "src",
                           ots_preds=ots, premises=[audit.trains_overlap_premise(cfg)])
        d = rep.claims[0]["decision"]
        assert d.verdict == want, (base, d.why)
        if want == "inconclusive":
            assert "what the overlapping embedding changes" in d.why


# ---------------------------------------------------------------------------------------------- paper profile (issue 15)
from tokenprune.study import paper_runs  # noqa: E402
from tokenprune.core.config import PruneConfig  # noqa: E402

_TOME = SimpleNamespace(config=PruneConfig("cls_attention", "bipartite", 0.93, tuple(range(1, 13)), prop_attn=True,
                                           name="tome"))
_VAR = audit.fs("attention_variance", 0.5, name="variance")
WHOLE = "premise failed: every training run trained its recipe's whole schedule"


def _run_of(spec, shortened: bool) -> paper_runs.TrainedRun:
    """A finished run of ``spec`` as paper_runs.trained_model returns it (its model dropped): one epoch under the
    tests' limits, or the recipe's whole schedule."""
    lim = {"batch_per_process": 2, "steps_per_epoch": 1, "epochs": 1} if shortened else {}
    summary = {"history": [{}] * (1 if shortened else 30), "recipe_epochs": 30, "shortened": shortened,
               "limits": {"batch_per_process": None, "steps_per_epoch": None, "epochs": None, "eval_images": None,
                          "workers": 0, **lim}, "steps_per_epoch": 1 if shortened else 61, "global_batch": 2,
               "lr": 1e-7}
    return paper_runs.TrainedRun(spec, None, "trained", summary, f"/runs/{spec.name}")


def _paper_cfg(**over):
    return SimpleNamespace(**{"profile": "paper", "base_model": "deit_s_imagenet100", "temperature": 0.5,
                              **paper_runs.TRAINING_SETTINGS, **over})


def test_paper_temperature_is_one_the_recipe_trains():
    assert audit.paper_temperatures() == [0.1, 0.5, 1.0, 2.0]
    cfg = params.setup("03_variance_medad", "paper", {"temperature": 0.3})
    with pytest.raises(ValueError, match=r"temperature: .*varmedad_deit_s_imagenet100.*fusion_temperature"):
        audit.start(cfg)
    threads = torch.get_num_threads()
    with torch.random.fork_rng(devices=[]):
        try:   # start() sets the process's torch threads and seeds: restored, so no later test inherits them
            audit.start(params.setup("03_variance_medad", "default", {"temperature": 0.3}))   # default: any T > 0
        finally:
            torch.set_num_threads(threads)


def test_paper_runs_are_the_recipe_runs_one_per_configuration():
    names = ["variance", "medad", "evit", "tome", "unpruned", "overlap_variance", "medad_r03"]
    specs = {n: audit.paper_ft_spec(n, 1, _VAR, _TOME, 0.5) for n in names}
    assert len({s.name for s in specs.values()}) == len({s.spec_hash() for s in specs.values()}) == len(names)
    assert all(s.recipe == audit.PAPER_RECIPE and s.seed == 1 and s["num_classes"] == 100 for s in specs.values())
    assert {n: s.keep_rate for n, s in specs.items()} == {"variance": 0.6, "medad": 0.6, "evit": 0.6, "tome": 0.93,
                                                          "unpruned": 1.0, "overlap_variance": 0.6, "medad_r03": 0.3}
    assert specs["variance"].tag == "variance_T0.5" and specs["evit"].tag == "evit"
    assert (specs["variance"].scorer, specs["tome"].reducer) == ("attention_variance", "bipartite")
    # another recipe temperature is another run of the Eq. 8 configurations only
    assert audit.paper_ft_spec("variance", 1, _VAR, _TOME, 1.0).name != specs["variance"].name
    assert audit.paper_ft_spec("evit", 1, _VAR, _TOME, 1.0).spec_hash() == specs["evit"].spec_hash()
    with pytest.raises(ValueError, match="0 runs match"):
        audit.paper_ft_spec("evit", 1, _VAR, _TOME, 0.3)


def test_ft_prepare_gives_the_overlap_embedding_and_the_configuration():
    from tokenprune.training.paper_training import build_model

    for name, patches, keep in (("overlap_variance", 18 * 18, 0.6), ("unpruned", 196, 1.0)):
        spec = audit.paper_ft_spec(name, 0, _VAR, _TOME, 0.5)
        m = audit.ft_prepare(name, _VAR, _TOME, 0.5)(build_model(spec, 100, load_init=False))
        assert m.patch_embed.num_patches == patches and prune_state(m).schedule.at(3) == pytest.approx(keep)


def test_paper_data_must_have_the_recipe_classes(tmp_path):
    from PIL import Image

    for split in ("train", "val"):
        for wnid in ("n01440764", "n99999999"):
            (tmp_path / split / wnid).mkdir(parents=True)
            Image.new("RGB", (8, 8)).save(tmp_path / split / wnid / "a.JPEG")
    with pytest.raises(ValueError, match=r"data_root: .* 2 classes .*num_classes 100.*imagenet100_cmc.txt"):
        audit._paper_data(SimpleNamespace(data_root=str(tmp_path)))


@pytest.mark.parametrize("profile,shortened,want_id,want", [
    ("default", True, "varmedad.obj5.variance_vs_evit", "reproduced"),       # no runs read at default
    ("paper", True, "varmedad.paper_scale.obj5.variance_vs_evit", "inconclusive"),
    ("paper", False, "varmedad.paper_scale.obj5.variance_vs_evit", "reproduced"),
])
def test_paper_margin_claim_has_its_own_id_and_needs_whole_runs(profile, shortened, want_id, want):
    ft, ots, cfg = _margin_inputs(True)
    cfg = SimpleNamespace(**{**vars(_paper_cfg(train_epochs=1 if shortened else 0)), **vars(cfg), "profile": profile})
    for (name, s), p in ft.items():
        p.extra["run"] = _run_of(audit.paper_ft_spec(name, s, _VAR, _TOME, 0.5), shortened)
    rep = _Rep()
    audit.margin_claim(rep, ft, 60000, 4000, cfg, "varmedad.obj5.variance_vs_evit", "variance", "evit", 0.22, "s",
                       "src", ots_preds=ots)
    c = rep.claims[0]
    assert c["id"] == want_id and c["decision"].verdict == want
    if want == "inconclusive":
        assert c["decision"].why.startswith(WHOLE) and "1 of 30 epochs" in c["decision"].why
    assert (audit.PAPER_RECIPE in c["why"]) == (profile == "paper")           # the recipe, not finetune_steps


def test_paper_top1_claims_have_their_own_ids_and_need_whole_runs():
    import pandas as pd

    ft = pd.DataFrame([{"config": "variance", "seed": s, "top1": t} for s, t in zip((0, 1, 2), (0.85, 0.86, 0.87))])
    for shortened, want in ((True, "inconclusive"), (False, "reproduced")):
        ft.attrs.update(runs={("variance", s): _run_of(audit.paper_ft_spec("variance", s, _VAR, _TOME, 0.5), shortened)
                              for s in (0, 1, 2)}, setting="the recipe")
        rep = _Rep()
        audit.top1_claims(rep, ft, "paper")
        claims = {c["id"]: c for c in rep.claims}
        assert claims["varmedad.paper_scale.top1.attention_variance"]["decision"].verdict == want   # 86 in [85, 87]
        assert claims["varmedad.paper_scale.top1.evit"]["decision"].verdict == "not testable here"
        assert not any(".top1." in i and ".paper_scale." not in i for i in claims)
    rep = _Rep()
    audit.top1_claims(rep, ft, "default")
    assert all(c["id"].startswith("varmedad.top1.") and c["decision"].verdict == "not testable here"
               for c in rep.claims)


def test_paper_setting_states_the_recipe_and_its_limits():
    whole = audit.ft_setting(_paper_cfg(), 126_689)
    assert "varmedad_deit_s_imagenet100" in whole and "30 epochs" in whole and "shortened" not in whole
    short = audit.ft_setting(_paper_cfg(train_batch_per_process=2, train_steps_per_epoch=1), 100)
    assert "shortened by the limits {'batch_per_process': 2, 'steps_per_epoch': 1}" in short


def test_given_finetune_names_the_users_checkpoint(tmp_path):
    from types import SimpleNamespace

    cfg = SimpleNamespace(ft_weights_dir=str(tmp_path))
    assert audit.given_finetune(cfg, "variance", 1) is None                      # no file: the recipe trains it
    (tmp_path / "variance_s1.pth").write_bytes(b"")
    assert audit.given_finetune(cfg, "variance", 1) == str(tmp_path / "variance_s1.pth")
    assert audit.given_finetune(SimpleNamespace(ft_weights_dir=""), "variance", 1) is None
