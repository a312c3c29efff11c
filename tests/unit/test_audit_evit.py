"""The EViT audit module: its profile table, its input checks, its comparison helpers and its fine-tuning recipe."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from tokenprune.measure.evaluation import Predictions
from tokenprune.study import params, verdicts
from tokenprune.study.audits import evit


def test_every_parameter_is_explained_and_in_every_profile():
    names = set(evit.PARAMETERS)
    for profile in params.PROFILES:
        assert set(evit.PROFILES[profile]) == names, profile
    cfg = params.setup("01_evit", "default", {"batch": 64})
    assert cfg.batch == 64 and cfg.seed == 0 and cfg.profile == "default"


def test_setup_refuses_unknown_names_and_choices():
    with pytest.raises(ValueError, match="not a parameter"):
        params.setup("01_evit", "smoke", {"bogus": 1})
    with pytest.raises(ValueError, match="not accepted"):
        params.setup("01_evit", "smoke", {"dtype": "fp16"})


def test_check_inputs():
    evit.check_inputs(params.setup("01_evit", "smoke"))
    with pytest.raises(ValueError, match="at least 3 seeds"):
        evit.check_inputs(params.setup("01_evit", "smoke", {"finetune_seeds": [0, 1]}))
    with pytest.raises(ValueError, match="imagenet_root"):
        evit.check_inputs(params.setup("01_evit", "paper"))
    evit.check_inputs(params.setup("01_evit", "default"))
    with pytest.raises(ValueError, match="cached fine-tunes of profile 'smoke'"):
        evit.check_inputs(params.setup("01_evit", "smoke", {"finetune_seeds": [0, 1, 3]}))
    with pytest.raises(ValueError, match="ft_keep"):
        evit.check_inputs(params.setup("01_evit", "smoke", {"ft_keep": 0.5}))


def _preds(correct: list[int]) -> Predictions:
    labels = torch.zeros(len(correct), dtype=torch.long)
    logits = torch.stack([torch.tensor([1.0, 0.0]) if c else torch.tensor([0.0, 1.0]) for c in correct])
    return Predictions(logits, labels)


def _study(full: Predictions, n_max: int = 0) -> evit.SmallViT:
    return evit.SmallViT(base=None, info={}, recipe=None, data=None, x_raw=None, y=full.labels, X=None, device="cpu",
                         eval_batch=8, seed=0, margin_pp=0.5, full=full, name="proxy", n_max=n_max,
                         max_scale="the full test split" if n_max else "")


def test_compare_and_ci_row_in_points():
    rng = np.random.default_rng(0)
    a = _preds(list(rng.random(400) < 0.9))
    b = _preds(list(rng.random(400) < 0.6))
    st = _study(a)
    c = st.compare(a, b)
    assert c["seeds"] == 1 and c["low"] < c["diff"] < c["high"] and c["low"] > 0 and c["p"] < 0.05
    assert verdicts.Direction(">", test=True).decide(c["diff"], c["low"], c["high"], p=c["p"]).verdict == "reproduced"
    c2 = st.compare([a, a, a], [b, b, b])
    assert c2["seeds"] == 3 and c2["p"] is None and c2["per_seed_diff"][0] == pytest.approx((c["diff"]) / 100, abs=1e-4)
    row = st.ci_row(a)
    assert row["agreement"] == 100 and row["top1_low"] <= row["top1"] <= row["top1_high"] and row["seeds"] == 1


def test_every_part_combines_as_the_old_rule():
    yes, no = verdicts.Decision("reproduced", "", "r"), verdicts.Decision("not reproduced", "against", "r")
    maybe = verdicts.Decision("inconclusive", "noise", "r")
    assert evit._every_part([("a", yes), ("b", yes)])[0].verdict == "reproduced"
    assert evit._every_part([("a", maybe), ("b", no)])[0].verdict == "not reproduced"
    d, why = evit._every_part([("a", yes), ("b", maybe)], held="equivalent")
    assert d.verdict == "inconclusive" and why == "a: equivalent; b: noise"


# ----------------------------------------------------------------------------------------------
# issue 13: the claim functions, each driven to every verdict it can give on constructed inputs
# ----------------------------------------------------------------------------------------------

import pandas as pd

from tokenprune.study import report
from tokenprune.study.paper_numbers import EVIT


def _rep(profile="smoke"):
    return report.Report("01_evit", profile=profile)


def _verdicts(rep):
    return {c.id: c.verdict for c in rep.claims}


def _pair(n_a: int, n_b: int, n: int = 400, both: int = 0) -> tuple[Predictions, Predictions]:
    """Two predictions on ``n`` images: ``both`` right in both, ``n_a`` right only in a, ``n_b`` only in b."""
    a = [1] * both + [1] * n_a + [0] * n_b
    b = [1] * both + [0] * n_a + [1] * n_b
    a += [0] * (n - len(a))
    b += [0] * (n - len(b))
    return _preds(a), _preds(b)


def test_speedup_decision_gives_every_verdict():
    d = evit.speedup_decision
    assert d(1.5, 1.52, 1.46, 1.58, 5).verdict == "reproduced"
    assert d(1.5, 1.07, 1.05, 1.09, 5).verdict == "not reproduced"          # a 7 % speedup is not a 50 % one
    assert d(1.5, 1.9, 1.8, 1.95, 5).verdict == "not reproduced"
    wide = d(1.5, 1.3, 1.0, 1.6, 5)
    assert wide.verdict == "inconclusive" and "resolves" in wide.why
    few = d(1.5, 1.5, 1.5, 1.5, 1)
    assert few.verdict == "inconclusive" and "3 timing rounds" in few.why
    assert "10%" in wide.rule and "magnitude" in wide.rule


def test_fusion_claims_follow_the_papers_side_at_every_keep_rate():
    assert evit.paper_fusion_side(0.9) == (-0.1, "<") and evit.paper_fusion_side(0.7) == (0.1, ">")
    fused_ahead = _pair(40, 5, both=300)
    tie = _pair(10, 10, both=300)
    full = _preds([1] * 400)
    st = _study(full)
    P = {"fuse@0.9": fused_ahead[0], "drop@0.9": fused_ahead[1],     # paper: dropping ahead -> not reproduced
         "fuse@0.8": tie[0], "drop@0.8": tie[1],                     # straddles 0 -> inconclusive
         "fuse@0.7": fused_ahead[0], "drop@0.7": fused_ahead[1]}     # paper: fusion ahead -> reproduced
    rep = _rep()
    evit.fusion_claims(rep, st, P)
    v = _verdicts(rep)
    assert v["evit.t2.drop_beats_fusion.keep0.9.off_the_shelf"] == "not reproduced"
    # a tie on 400 images cannot resolve the paper's 0.1 points even at the full split (here: these 400 images)
    assert v["evit.t2.fusion_beats_drop.keep0.8.off_the_shelf"] == "not testable here"
    assert v["evit.t2.fusion_beats_drop.keep0.7.off_the_shelf"] == "reproduced"
    assert v["evit.t2.drop_beats_fusion.keep0.6.off_the_shelf"] == "not testable here"
    assert v["evit.t2.fusion_beats_drop.keep0.5.off_the_shelf"] == "not testable here"
    assert set(v) == {f"evit.t2.{'drop_beats_fusion' if k in (0.9, 0.6) else 'fusion_beats_drop'}.keep{k:g}"
                      f".off_the_shelf" for k in EVIT["deit_small_patch16_224"]["keep"]}
    c = next(c for c in rep.claims if c.id.endswith("keep0.8.off_the_shelf"))
    assert "direction claim about a 0.1-point difference" in c.statement
    assert c.design["effect_in_dispute"] == pytest.approx(0.1) and c.design["unit"] == "images"
    assert c.design["n"] == 400 and "needs about" in c.why
    # a split large enough to resolve 0.1 points: the same tie stays inconclusive (underpowered at this run's n)
    rep = _rep()
    evit.fusion_claims(rep, _study(full, n_max=10**6), P)
    c = next(c for c in rep.claims if c.id.endswith("keep0.8.off_the_shelf"))
    assert c.verdict == "inconclusive" and "underpowered" in c.why and c.design["n_max"] == 10**6


def test_fusion_claim_premise_makes_it_inconclusive():
    a, b = _pair(40, 5, both=300)
    st = _study(_preds([1] * 400))
    c = st.compare(a, b)
    rep = _rep()
    evit.fusion_claim(rep, c, 0.7, "x.held", "s", "w", premise=verdicts.Premise("p", True))
    evit.fusion_claim(rep, c, 0.7, "x.failed", "s", "w", premise=verdicts.Premise("own data", False, "15 % vs 51 %"))
    v = _verdicts(rep)
    assert v == {"x.held": "reproduced", "x.failed": "inconclusive"}
    assert "premise failed: own data" in rep.claims[1].why


def test_own_test_premise():
    info = {"test": {"accuracy": 0.5, "ci95": [0.45, 0.55], "n": 400}}
    assert evit.own_test_premise(_preds([1, 0] * 200), info, 0).holds
    low = evit.own_test_premise(_preds([1] + [0] * 399), info, 0)
    assert not low.holds and "checkpoint 50.00 %" in low.detail


def test_removal_claim_gives_every_verdict():
    for n_full, n_drop, n_max, want in ((40, 5, 0, "reproduced"), (5, 40, 0, "not reproduced"),
                                        (10, 10, 10**6, "inconclusive"), (10, 10, 0, "not testable here")):
        full, drop = _pair(n_full, n_drop, both=300)
        rep = _rep()
        evit.removal_claim(rep, _study(full, n_max=n_max), {"drop@0.7": drop})
        assert _verdicts(rep) == {"evit.t1.removal_without_training_hurts.keep0.7": want}
        assert rep.claims[0].design["effect_in_dispute"] == 0.5
    rep = _rep()
    evit.removal_claim(rep, _study(full), {})
    assert rep.claims[0].verdict == "not testable here"


def _ranked(ranks: list[int], n_cls: int = 10) -> Predictions:
    """Label 0 at rank ``r`` of each image's logits (0: the top class)."""
    rows = []
    for r in ranks:
        order = list(range(1, n_cls))
        order.insert(r, 0)                       # class ids from the highest logit down
        logit = torch.empty(n_cls)
        logit[torch.tensor(order)] = torch.arange(n_cls, 0, -1).float()
        rows.append(logit)
    return Predictions(torch.stack(rows), torch.zeros(len(ranks), dtype=torch.long))


def test_top5_helpers():
    p = _ranked([0, 4, 5, 9])
    assert evit.top5_correct(p).tolist() == [True, True, False, False]
    assert evit.top5_view(p).correct.tolist() == [True, True, False, False]
    table = evit.add_top5(pd.DataFrame({"config": ["unpruned"]}), {"unpruned": p}, 0)
    assert table.top5[0] == 50.0 and table.top5_low[0] <= 50 <= table.top5_high[0]


def test_top5_claim_gives_every_verdict():
    n = 1000
    cases = {
        "inconclusive": ([0] * n, [0] * n),                                   # at its ceiling: the premise fails
        "reproduced": ([0] * 800 + [7] * 200, [0] * 800 + [7] * 200),         # 80 % both, identical
        "not reproduced": ([0] * 800 + [7] * 200, [0] * 500 + [7] * 500),     # 30 points lost
    }
    for want, (full_r, fused_r) in cases.items():
        rep = _rep()
        st = _study(_ranked(full_r))
        evit.top5_claim(rep, st, {"fuse@0.7": _ranked(fused_r)})
        c = rep.claims[0]
        assert c.verdict == want, (want, c.why)
        if want == "inconclusive":
            assert "ceiling" in c.why
    rep = _rep()
    evit.top5_claim(rep, _study(_ranked([0])), {})
    assert rep.claims[0].verdict == "not testable here"


def test_oracle_premise():
    good = evit.oracle_premise({"diff": 2.0, "low": 0.5, "high": 3.5})
    bad = evit.oracle_premise({"diff": -1.0, "low": -2.5, "high": 0.4})
    assert good.holds and not bad.holds
    yes = verdicts.Decision("reproduced", "", "r")
    assert good.gate(yes).verdict == "reproduced"
    d = bad.gate(verdicts.Decision("not reproduced", "worse", "r"))
    assert d.verdict == "inconclusive" and "the oracle guides better" in d.why


def _small_vit():
    from timm.models.vision_transformer import VisionTransformer

    return VisionTransformer(img_size=28, patch_size=4, in_chans=1, num_classes=10, embed_dim=32, depth=12, num_heads=2)


def _patch_adding_parameters(monkeypatch, n: int) -> None:
    """Make the audit's ``patch`` register an ``extra`` parameter of ``n`` elements (a patch that adds parameters)."""
    real_patch = evit.patch

    def patch_adding(model, **kw):
        real_patch(model, **kw)
        model.register_parameter("extra", torch.nn.Parameter(torch.zeros(n)))
        return model

    monkeypatch.setattr(evit, "patch", patch_adding)


def test_no_parameters_claim(monkeypatch):
    rep = _rep()
    out = evit.no_parameters_claim(rep, _small_vit())
    assert rep.claims[0].verdict == "reproduced" and out["after"]["new_names"] == [] and rep.claims[0].our_value == 0
    _patch_adding_parameters(monkeypatch, 3)
    rep = _rep()
    evit.no_parameters_claim(rep, _small_vit())
    c = rep.claims[0]
    assert c.verdict == "not reproduced" and c.our_value == 3 and "extra" in c.why


def _macs(fuse: dict, drop: dict, model="deit_small_patch16_224") -> pd.DataFrame:
    rows = [{"model": model, "keep_rate": k, "reducer": red, "gmacs": g,
             "tokens": "196 -> 138 -> 97 -> 68"} for red, d in (("fuse_attention", fuse), ("drop", drop))
            for k, g in d.items()]
    return pd.DataFrame(rows)


def test_fusion_overhead_claim():
    keeps = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5]
    drop = {k: round(4.6 * k, 1) + 0.01 for k in keeps}  # 4.15, 3.69, ... : 0.04 GMACs below the next print step
    for extra, want in ((0.02, "reproduced"), (0.06, "not reproduced")):
        rep = _rep()
        table = evit.fusion_overhead_claim(rep, _macs({k: g + extra for k, g in drop.items()}, drop))
        assert rep.claims[0].verdict == want and len(table) == 5, rep.claims[0].why
        assert rep.claims[0].our_value == pytest.approx(max(extra / drop[k] for k in keeps if k < 1), abs=1e-5)


def test_oracle_init_macs_claim():
    keeps = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5]
    for g07, want in ((4.6 * 0.64, "reproduced"), (4.6 * 0.70, "not reproduced")):
        fuse = {k: 4.6 * (1 - 0.1 * (1 - k) / 0.1 * 0.02) for k in keeps} | {0.7: g07}
        rep = _rep()
        out = evit.oracle_init_macs_claim(rep, _macs(fuse, fuse))
        assert rep.claims[0].verdict == want and out["nearest"] == 0.7, rep.claims[0].why
        assert 0.6 < out["keep_needed"] < 0.75


def test_dynamicvit_claims(monkeypatch):
    t = {0.7: 3.0}
    for evit_g, want in ((3.09, "reproduced"), (2.5, "not reproduced")):
        rep = _rep()
        table = evit.dynamicvit_claims(rep, _macs({0.7: evit_g}, t))
        v = _verdicts(rep)
        assert v["evit.t7.fewer_params_than_dynamicvit"] == "reproduced"
        assert v["evit.t7.same_macs_as_dynamicvit.keep0.7"] == want
        assert table.parameters[1] > table.parameters[0]
    _patch_adding_parameters(monkeypatch, 10_000_000)
    rep = _rep()
    evit.dynamicvit_claims(rep, _macs({0.7: 3.0}, t))
    assert _verdicts(rep)["evit.t7.fewer_params_than_dynamicvit"] == "not reproduced"


def test_pending_training_claims_are_not_testable_with_what_it_takes():
    rep = _rep()
    ids = evit.pending_training_claims(rep)
    assert "evit.top1.deit_s.keep0.7" not in ids and "evit.top1.deit_s.keep0.7.dropped" in ids
    assert {"evit.t4.longer_training_improves", "evit.t6.oracle_init_accuracy", "evit.t7.beats_dynamicvit_accuracy",
            "evit.t8.deit_b_cost_keep0.8", "evit.t9.fusion_beats_drop_high_res", "evit.t12.finetune_high_res"} <= set(ids)
    for c in rep.claims:
        assert c.verdict == "not testable here" and c.why.startswith("pending issue 14 (real training): ")
    assert next(c for c in rep.claims if c.id == "evit.t8.deit_b_cost_keep0.8").paper_value == 0.1


def test_eval_data_uses_every_setting_of_the_recipe():
    from tokenprune.data import synthetic
    from tokenprune.training import base_models

    recipe = base_models.smoke_recipes()["small_vit_parts_smoke"]
    kw = dict(recipe.dataset_kwargs)
    assert kw["scale_range"] and "n_distractors" in kw
    test = base_models.eval_data(recipe, 4)
    full = base_models.load_recipe_data(recipe)["test"]
    assert len(test) == 4 and np.array_equal(np.asarray(test["image"]), np.asarray(full["image"])[:4])
    gen = {k: v for k, v in kw.items() if k not in ("n_train", "n_val", "n_test")}
    default_cfg = synthetic.part_dataset(0, 0, 4, seed=gen["seed"], img_size=gen["img_size"])["test"]
    assert not np.array_equal(np.asarray(test["image"]), np.asarray(default_cfg["image"]))  # the settings matter
    with pytest.raises(ValueError, match="test images"):
        base_models.eval_data(recipe, kw["n_test"] + 1)


def test_training_throughput_claim_gives_every_verdict(monkeypatch):
    from tokenprune.core.patch import patch
    from tokenprune.measure import throughput as bench

    def fake(base_rounds, evit_rounds):
        def _train_results(models, x, y, rounds, warmup, steps=2):
            extra = {"load_before": 0.1, "load_after": 0.1, "other_cores": 0.0, "cores": 2, "round_cv": 0.01}
            return [bench.BenchResult(n, float(np.median(v)), list(v), len(x), "fp32", "cpu", 2, steps, extra=extra)
                    for n, v in zip(models, (base_rounds, evit_rounds))]
        return _train_results

    model = patch(_small_vit(), keep_rate=1.0)
    x = torch.randn(8, 1, 28, 28)
    st = evit.SmallViT(base=model, info={}, recipe=None, data=None, x_raw=None, y=torch.zeros(8, dtype=torch.long), X=x,
                       device="cpu", eval_batch=8, seed=0, margin_pp=0.5)
    cfg = SimpleNamespace(small_bench_batch=8, train_bench_rounds=5, seed=0, profile="default")
    base = [100, 101, 99, 100, 102]
    for evit_rounds, want in (([130, 131, 129, 133, 128], "reproduced"), ([80, 81, 79, 82, 78], "not reproduced"),
                              ([90, 112, 95, 108, 101], "inconclusive")):
        monkeypatch.setattr(evit, "_train_results", fake(base, evit_rounds))
        rep = _rep("default")
        evit.training_throughput(rep, st, cfg)
        c = rep.claims[0]
        assert c.id == "evit.t11.trains_faster.keep0.7" and c.timed and c.verdict == want, (want, c.why)
    monkeypatch.setattr(evit, "_train_results", fake([100], [130]))
    rep = _rep("smoke")
    evit.training_throughput(rep, st, cfg)
    assert rep.claims[0].verdict == "inconclusive" and "3 timing rounds" in rep.claims[0].why


def test_training_results_time_real_steps():
    from tokenprune.core.patch import patch

    ms = {"keep=1": patch(_small_vit(), keep_rate=1.0), "keep=0.7": patch(_small_vit(), keep_rate=0.7)}
    res = evit._train_results(ms, torch.randn(4, 1, 28, 28), torch.zeros(4, dtype=torch.long), rounds=2, warmup=0,
                              steps=1)
    assert [r.label for r in res] == list(ms) and all(len(r.rounds) == 2 and r.img_per_s > 0 for r in res)
    assert "load_before" in res[0].extra


# ----------------------------------------------------------------------------------------------
# issue 14: designs, the detectability gate, the cached fine-tunes and the moved-model premise
# ----------------------------------------------------------------------------------------------


def _seeds(rights: list[int], n: int = 400) -> list[Predictions]:
    """One prediction per seed on the same ``n`` images: the first ``r`` right."""
    return [_preds([1] * r + [0] * (n - r)) for r in rights]


def test_design_of_one_model_and_of_seeds():
    a, b = _pair(40, 5, both=300)
    d = _study(a, n_max=10000).design(a, b)
    assert (d.unit, d.n, d.n_max, d.max_scale) == ("images", 400, 10000, "the full test split")
    assert d.sd == pytest.approx(float(np.std(100 * (a.correct.astype(float) - b.correct.astype(float)), ddof=1)))
    assert d.mde_at_max < d.mde and "400 paired per-image differences" in d.sd_source
    assert _study(a).design(a, b).n_max == 400                          # no split given: these images
    s = _study(a).design(_seeds([300, 310, 290]), _seeds([280, 280, 285]))
    per_seed = 100 * (np.array([300, 310, 290]) - np.array([280, 280, 285])) / 400
    assert (s.unit, s.n, s.n_max, s.max_scale) == ("seeds", 3, 5, "5 seeds")
    assert s.sd == pytest.approx(float(np.std(per_seed, ddof=1)))
    one = _study(a).design(_seeds([300, 310, 290, 305, 295]), _seeds([250]))  # one untrained reference row
    assert one.n == 5 and one.sd == pytest.approx(float(np.std(100 * np.array([50, 60, 40, 55, 45]) / 400, ddof=1)))


def test_gated_gives_not_testable_underpowered_and_lets_decisions_and_premises_through():
    maybe = verdicts.Decision("inconclusive", "noise", "r")
    yes = verdicts.Decision("reproduced", "", "r")
    a, b = _pair(10, 10, both=300)
    weak = _study(a).design(a, b)                           # MDE ~3 points, at most 400 images
    strong = _study(a, n_max=10**6).design(a, b)
    g = evit.gated(maybe, 0.5, weak)
    assert g["decision"].verdict == "not testable here" and g["design"]["effect_in_dispute"] == 0.5
    g = evit.gated(maybe, 0.5, strong)
    assert g["decision"].verdict == "inconclusive" and "underpowered" in g["decision"].why
    assert evit.gated(yes, 0.5, weak)["decision"].verdict == "reproduced"
    g = evit.gated(maybe, 0.5, weak, verdicts.Premise("moved", False, "no"))
    assert g["decision"].verdict == "inconclusive" and g["decision"].why.startswith("premise failed: moved")
    assert evit.gated(yes, -0.1, weak)["design"]["effect_in_dispute"] == 0.1   # a signed paper difference


def test_claim_parts_gate_on_the_binding_design():
    maybe = verdicts.Decision("inconclusive", "noise", "r")
    yes = verdicts.Decision("reproduced", "", "r")
    a, b = _pair(10, 10, both=300)
    big = _study(a, n_max=10**6).design(a, b)
    small = _study(a).design(a, b)
    out = evit._claim_parts([("x", yes), ("y", maybe)], effect=0.5, designs=[big, small])
    assert out["decision"].verdict == "not testable here" and out["design"]["n_max"] == 400
    out = evit._claim_parts([("x", yes), ("y", maybe)], effect=0.5, designs=[big])
    assert out["decision"].verdict == "inconclusive"
    assert "design" not in evit._claim_parts([("x", yes), ("y", maybe)])


def test_moved_premise_and_variance_ratio_detectable():
    assert evit.moved_premise({"diff": 2.0, "low": 0.4, "high": 3.6}).holds
    bad = evit.moved_premise({"diff": -0.22, "low": -0.95, "high": 0.58})
    assert not bad.holds and "-0.22 [-0.95, +0.58]" in bad.detail
    r5, r10 = evit.variance_ratio_detectable(5, 5), evit.variance_ratio_detectable(10, 10)
    assert r5 > r10 > 1 and 10 < r5 < 30


_FT_IDS = ("evit.t2.fusion_beats_drop.keep0.7.finetuned", "evit.t2.fusion_smaller_seed_spread.keep0.7",
           "evit.warmup.negligible", "evit.t2.cost.keep0.7.finetuned")


def _ft_claims(FT: dict, off_fuse: int = 200) -> dict:
    full = _preds([1] * 390 + [0] * 10)
    rep = _rep()
    cfg = SimpleNamespace(ft_keep=0.7, margin_pp=0.5, profile="default", finetune_seeds=[0, 1, 2, 3, 4],
                          proxy_model="vit_s14_fmnist_ft")
    cmp = evit.finetune_claims(rep, _study(full, n_max=10000), cfg, FT, {"fuse@0.7": _seeds([off_fuse])[0]})
    assert set(cmp) == {"fuse - drop (fine-tuned)", "warm-up - no warm-up", "unpruned - fuse (fine-tuned; the cost)",
                        "fine-tuned - off-the-shelf fuse"}
    return {c.id: c for c in rep.claims}


def test_finetune_claims_give_every_verdict():
    fuse = [300, 302, 298, 301, 299]
    c = _ft_claims({"fuse70": _seeds(fuse), "drop70": _seeds([250, 270, 230, 260, 240]),
                    "fuse70_warm": _seeds(fuse), "unpruned": _seeds(fuse)})
    assert [c[i].verdict for i in _FT_IDS] == ["reproduced"] * 4, [c[i].why for i in _FT_IDS]
    assert c[_FT_IDS[0]].design["unit"] == "seeds" and c[_FT_IDS[0]].design["effect_in_dispute"] == pytest.approx(0.1)
    assert c[_FT_IDS[1]].design is None and "variance ratio" in c[_FT_IDS[1]].why
    assert c[_FT_IDS[2]].design["effect_in_dispute"] == 0.5 and c[_FT_IDS[3]].design["effect_in_dispute"] == 0.5
    assert all("premise: the fine-tuning moved the model" in c[i].test for i in _FT_IDS)
    assert "one pass over 16,384 training images each, training blocks.11, norm, fc_norm, head" in c[_FT_IDS[0]].why

    wide = [300, 320, 280, 310, 290]
    c = _ft_claims({"fuse70": _seeds(wide), "drop70": _seeds([350, 351, 349, 350, 350]),
                    "fuse70_warm": _seeds([200] * 5), "unpruned": _seeds([390] * 5)}, off_fuse=100)
    assert [c[i].verdict for i in _FT_IDS] == ["not reproduced"] * 4, [c[i].why for i in _FT_IDS]

    c = _ft_claims({"fuse70": _seeds([300, 304, 296, 302, 298]), "drop70": _seeds([301, 297, 303, 299, 300]),
                    "fuse70_warm": _seeds(fuse), "unpruned": _seeds(fuse)})
    assert c[_FT_IDS[0]].verdict == "not testable here" and "5 seeds" in c[_FT_IDS[0]].why

    # the fine-tuning did not move the model: every claim is inconclusive with the premise named, whatever its data
    c = _ft_claims({"fuse70": _seeds(fuse), "drop70": _seeds([250, 270, 230, 260, 240]),
                    "fuse70_warm": _seeds(fuse), "unpruned": _seeds(fuse)}, off_fuse=300)
    for i in _FT_IDS:
        assert c[i].verdict == "inconclusive" and "premise failed: the fine-tuning moved the model" in c[i].why


def test_cached_finetunes_evaluate_every_condition_patched_as_trained(monkeypatch):
    from tokenprune.training import base_models

    seen = []

    def fake_load(condition, seed, profile, *a, **kw):
        seen.append((condition, seed, profile, kw.get("prefix")))
        return _small_vit().eval(), {"name": f"{condition}_s{seed}", "recipe_hash": "h", "sha256": "s",
                                     "test": {"accuracy": 0.5}, "train_time_s": 1.0}

    monkeypatch.setattr(evit.tp_models, "load_finetuned", fake_load)
    applied = []
    real_apply = evit.PruneConfig.apply

    def apply(self, model, *a, **kw):
        applied.append((self.keep_rate, self.reducer))
        return real_apply(self, model, *a, **kw)

    monkeypatch.setattr(evit.PruneConfig, "apply", apply)
    x = torch.randint(0, 255, (6, 1, 28, 28), dtype=torch.uint8)
    model = evit.patch(_small_vit().eval(), keep_rate=1.0)
    st = evit.SmallViT(base=model, info={}, recipe=None, data=None, x_raw=x, y=torch.zeros(6, dtype=torch.long),
                       X=x.float() / 255, device="cpu", eval_batch=8, seed=0, margin_pp=0.5, name="proxy")
    st = evit._predict_unpruned(st)
    P = {"unpruned": st.full, "fuse@0.7": st.full, "drop@0.7": st.full}
    cfg = SimpleNamespace(profile="smoke", finetune_seeds=[0, 1, 2], ft_keep=0.7, proxy_model="vit_s14_fmnist_ft_smoke")
    FT, log, table = evit.cached_finetunes(st, cfg, P)
    assert set(FT) == set(base_models.FINETUNE_CONDITIONS) and all(len(v) == 3 for v in FT.values())
    assert {p for _, _, p, _ in seen} == {"smoke"} and {x for *_, x in seen} == {"s14"} and len(log) == 12 and set(log.sha256) == {"s"}
    assert list(table.condition[:4]) == list(base_models.FINETUNE_CONDITIONS) and len(table) == 7
    assert table.set_index("condition").loc["drop70", "reducer"] == "drop"
    # each fine-tune is patched with its own condition before it is evaluated (then gmacs_of re-patches st.base)
    assert applied[:12] == [(k, red) for k, red, _ in base_models.FINETUNE_CONDITIONS.values() for _ in range(3)]


def test_higher_resolution_files_the_finetuned_claim_as_not_testable():
    from tokenprune.training.loop import Preprocess

    model = _small_vit().eval()
    model.tp_preprocess = Preprocess(28, channels=1, mean=[0.5], std=[0.5])
    x = torch.randint(0, 255, (8, 1, 28, 28), dtype=torch.uint8)
    evit.patch(model, keep_rate=1.0)
    st = evit.SmallViT(base=model, info={}, recipe=None, data=None, x_raw=x, y=torch.zeros(8, dtype=torch.long),
                       X=model.tp_preprocess(x), device="cpu", eval_batch=8, seed=0, margin_pp=0.5, name="fmnist",
                       n_max=10000, max_scale="the full test split")
    st = evit._predict_unpruned(st)
    rep = _rep()
    table = evit.higher_resolution(rep, st, SimpleNamespace(hires_img_size=32))
    c = {c.id: c for c in rep.claims}
    assert len(table) == 3 and c["evit.t5.higher_res_equal_macs.finetuned"].verdict == "not testable here"
    assert "needs models trained at 32 px" in c["evit.t5.higher_res_equal_macs.finetuned"].why
    off = c["evit.t5.higher_res_equal_macs.off_the_shelf"]
    assert off.design["effect_in_dispute"] == 1.0 and off.design["n_max"] == 10000
