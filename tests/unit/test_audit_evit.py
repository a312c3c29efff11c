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


def _preds(correct: list[int]) -> Predictions:
    labels = torch.zeros(len(correct), dtype=torch.long)
    logits = torch.stack([torch.tensor([1.0, 0.0]) if c else torch.tensor([0.0, 1.0]) for c in correct])
    return Predictions(logits, labels)


def _study(full: Predictions) -> evit.SmallViT:
    return evit.SmallViT(base=None, info={}, recipe=None, data=None, x_raw=None, y=full.labels, X=None, device="cpu",
                         eval_batch=8, seed=0, margin_pp=0.5, full=full)


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


def test_finetune_copy_uses_the_shared_recipe(monkeypatch):
    seen = {}

    def fake_finetune(model, recipe, train_data, config, **kw):
        seen.update(recipe=recipe, config=config, **kw)
        return "result"

    monkeypatch.setattr(evit, "finetune", fake_finetune)
    from tokenprune.training.loop import TrainRecipe

    st = _study(_preds([1, 0]))
    st.base, st.recipe = torch.nn.Linear(2, 2), TrainRecipe()
    cfg = SimpleNamespace(finetune_epochs=2.0, ft_batch=16, ft_lr=1e-3, ft_warmup_frac=0.5, finetune_images=64)
    _, res = evit.finetune_copy(st, cfg, 0.7, "drop", True, 3, None)
    r = seen["recipe"]
    assert res == "result" and seen["patch_keep_rate"] == 1.0 and seen["config"].keep_rate == 0.7
    assert (r.min_lr, r.warmup_epochs, r.keep_length, r.keep_rate, r.seed) == (1e-5, 0.2, 1.0, 0.7, 3)
    assert r.prune["reducer"] == "drop" and r.train_subset == 64 and r.name == "ft-drop-0.7-warm-s3"


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
    assert v["evit.t2.fusion_beats_drop.keep0.8.off_the_shelf"] == "inconclusive"
    assert v["evit.t2.fusion_beats_drop.keep0.7.off_the_shelf"] == "reproduced"
    assert v["evit.t2.drop_beats_fusion.keep0.6.off_the_shelf"] == "not testable here"
    assert v["evit.t2.fusion_beats_drop.keep0.5.off_the_shelf"] == "not testable here"
    assert set(v) == {f"evit.t2.{'drop_beats_fusion' if k in (0.9, 0.6) else 'fusion_beats_drop'}.keep{k:g}"
                      f".off_the_shelf" for k in EVIT["deit_small_patch16_224"]["keep"]}
    c = next(c for c in rep.claims if c.id.endswith("keep0.8.off_the_shelf"))
    assert "direction claim about a 0.1-point difference" in c.statement


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
    for n_full, n_drop, want in ((40, 5, "reproduced"), (5, 40, "not reproduced"), (10, 10, "inconclusive")):
        full, drop = _pair(n_full, n_drop, both=300)
        rep = _rep()
        evit.removal_claim(rep, _study(full), {"drop@0.7": drop})
        assert _verdicts(rep) == {"evit.t1.removal_without_training_hurts.keep0.7": want}
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
