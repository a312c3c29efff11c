"""Round 3 of the proxy's pre-registration as declared: the near-miss's recipe with only its data changed, the second
candidate's object share computed from its masks, K5's clarification and its control, which candidates' K5 the rule
asks for, and the round's budget and files."""
import math

import pytest

from tokenprune.study.proxy import chosen, plan
from tokenprune.training import model_recipes
from tokenprune.training.proxy import finetunes as pf, round2, round3
from tokenprune.training.proxy.candidates import FINETUNE


def test_the_first_candidate_is_the_near_miss_with_only_its_data_changed():
    near_miss = round2.candidate_recipe(next(c for c in round2.CANDIDATES if c.name == "s14d_fmnist112"))
    first = round3.candidate_recipe(round3.CANDIDATES[0])
    assert near_miss.train_subset == 10000 and first.train_subset is None
    assert first.epochs * round3.TRAIN_ROWS == round3.IMAGES_SEEN == first.extra["images_seen"]
    moved = {k for k, v in vars(first).items() if vars(near_miss)[k] != v}
    assert moved == {"name", "train_subset", "extra"}              # round 2's 3 epochs, now of the whole split
    assert {k for k in first.extra if first.extra[k] != near_miss.extra.get(k)} == {"round", "images_seen"}
    assert round3.CANDIDATES[0].test_images == 5000 and round3.CANDIDATES[0].tokens == 64


def test_the_second_candidate_draws_the_item_at_the_near_misss_magnification_on_196_tokens():
    c = round3.CANDIDATES[1]
    near = next(c for c in round2.CANDIDATES if c.name == "s14d_fmnist112")
    assert c.tokens == 196 and c.img_size / c.canvas == pytest.approx(near.img_size / near.canvas)
    assert round3.candidate_recipe(c).epochs * round3.TRAIN_ROWS == round3.IMAGES_SEEN_196
    assert round3.object_share(c) == pytest.approx(round3.OBJECT_SHARE_196, abs=1e-4)
    assert round3.OBJECT_SHARE_196 <= plan.CRITERIA[0].high     # K1: the object on a minority of the tokens


def test_round3_recipes_are_default_models_with_their_own_hashes():
    recipes = model_recipes.round_recipes(3)
    assert list(recipes) == [c.name for c in round3.CANDIDATES]
    assert model_recipes.find_recipe("s14d_fmnist112_full") == ("default", recipes["s14d_fmnist112_full"])
    hashes = {r.recipe_hash() for r in {**model_recipes.round_recipes(2), **recipes}.values()}
    assert len(hashes) == len(round2.CANDIDATES) + len(round3.CANDIDATES)
    with pytest.raises(ValueError, match="round"):
        model_recipes.round_recipes(4)


def test_k5_has_an_unpruned_control_from_round_3_on():
    c = round3.CANDIDATES[0]
    k5, control = pf.k5_recipe(c, 1), pf.control_recipe(c, 1)
    assert pf.has_control(c) and not pf.has_control(round2.CANDIDATES[0])
    assert k5.keep_rate == FINETUNE["keep_rate"] and control.keep_rate == 1.0
    same = ("seed", "epochs", "batch_size", "lr", "min_lr", "warmup_epochs", "train_subset", "trainable", "augment")
    assert all(getattr(k5, k) == getattr(control, k) for k in same)
    assert k5.recipe_hash() != control.recipe_hash() and control.name.endswith("_ft_unpruned_s1")


def _m(**kw):
    base = {"object_token_share": 0.3, "top1": 90.0, "cost@0.7": 2.0, "cost@0.7_low": 1.0, "cost@0.5": 5.0,
            "cost@0.5_low": 3.0, "tome_cost": 1.5}
    return {**base, **kw}


def test_k5_is_missed_when_the_cost_interval_includes_zero_whatever_the_gain():
    c = round3.CANDIDATES[0]
    gain = {"ft_share_of_cost": 90.0, "ft_gain@0.7_low": 1.0}
    assert plan.judge(c, _m(**gain))["K5"] is True
    assert plan.judge(c, _m(**{"cost@0.7_low": -0.1}, **gain))["K5"] is False
    assert plan.judge(c, _m())["K5"] is None                            # not measured, cost defined
    assert plan.judge(c, _m(**{"cost@0.7_low": 0.0}))["K5"] is False   # decided without a fine-tune
    assert "K5" not in plan.judge(round2.CANDIDATES[3], _m())          # the fine-grained role has no K5


def test_k5_is_asked_of_each_candidate_meeting_every_other_criterion_and_of_the_fallbacks_next_in_line():
    order = round3.CANDIDATES
    a, b = (c.name for c in order)
    measured = {a: _m(), b: _m(top1=80.0)}                              # b misses K6
    assert plan.k5_asked(measured, "classification", order) == [a]
    # neither meets the bands; a is nearer them, so a is the fallback's next in line
    far = {a: _m(**{"cost@0.7": 0.2, "cost@0.7_low": 0.1}), b: _m(**{"cost@0.7": 0.05, "cost@0.7_low": 0.01})}
    assert plan.k5_asked(far, "classification", order) == [a]
    # a cost interval that includes 0 decides K5 already: nothing to ask of that one
    zero = {a: _m(**{"cost@0.7": 0.1, "cost@0.7_low": -0.2}), b: _m(top1=80.0)}
    assert plan.k5_asked(zero, "classification", order) == []
    assert plan.k5_asked(measured, "fine-grained", order) == []


def test_the_round_is_sized_within_its_hours_and_what_does_not_fit_is_left_to_a_gpu():
    rows = round3.budget()
    assert [r["candidate"] for r in rows] == [c.name for c in round3.CANDIDATES]
    for r in rows:
        assert math.isfinite(r["train_minutes"]) and r["parts"] == math.ceil(r["train_minutes"] / round3.PART_MINUTES)
        assert (r["cumulative_hours"] <= round3.ROUND_HOURS) == (r["built_on"] == "cpu")
    assert round3.BUILT_ON[round3.CANDIDATES[0].name] == "cpu"


def test_round3_is_a_pre_registration_of_its_own_file():
    assert chosen.ROUND_FILES[3][0] == ("lib/tokenprune/training/proxy/round3.py",)
    assert chosen.ROUND_FILES[3][1:] == chosen.PLAN_FILES


def test_notebook_00_refuses_to_decide_while_an_asked_k5_is_missing():
    from tokenprune.study.proxy import calibration

    order = round3.CANDIDATES
    a, b = (c.name for c in order)
    rows = [{"candidate": a, "role": "classification", "built": True, **_m(), **plan.judge(order[0], _m())},
            {"candidate": b, "role": "classification", "built": False}]
    with pytest.raises(plan.K5Missing, match=a):
        calibration.check_k5(rows, order)
    measured = {**_m(), "ft_share_of_cost": 10.0, "ft_gain@0.7_low": 0.1}
    rows[0].update(measured, **plan.judge(order[0], measured))
    calibration.check_k5(rows, order)                                  # measured (and missed): decided


def test_round3_ends_at_its_first_candidate_on_a_cpu_when_the_second_is_left_to_a_gpu():
    from tokenprune.study.proxy import calibration

    a, b = (c.name for c in round3.CANDIDATES)
    missed = {"candidate": a, "role": "classification", "built": True, **{f"K{i}": True for i in range(1, 6)},
              "K6": False}
    assert not calibration.round_complete([{"candidate": a, "role": "classification", "built": False}],
                                          "classification", 3)
    assert calibration.round_complete([missed, {"candidate": b, "role": "classification", "built": False}],
                                      "classification", 3)
    assert calibration.round_complete([{**missed, "K6": True}], "classification", 3)
    with pytest.raises(ValueError, match="round"):
        calibration.round_complete([], "classification", 4)


def test_k6_is_one_measurement_read_by_notebook_00_and_by_the_audits_premise():
    from tokenprune.study.proxy import calibration
    from tokenprune.training.proxy import outputs as po

    c = next(c for c in round2.CANDIDATES if c.name == "s14d_fmnist112")
    nb00 = calibration.measurements(c, po.load(c)[0])
    k6 = chosen.k6_measurement(c.name)
    assert (k6["top1"], k6["low"], k6["high"]) == (nb00["top1"], nb00["top1_low"], nb00["top1_high"])
    premise = chosen.bar_premise(c.name, "classification")
    assert premise.holds is (nb00["top1"] >= plan.BARS["classification"])
    assert f"{nb00['top1']:.2f}" in premise.detail
    assert chosen.k6_measurement("vit_s14_fmnist_ft") is None          # not a candidate: its sidecar decides
    assert chosen.k6_measurement("s14d_fmnist112_smoke") is None


def test_the_rounds_summary_lists_what_each_round_built_met_and_missed():
    from tokenprune.study.proxy import calibration

    a, b = (c.name for c in round3.CANDIDATES)
    met = {"candidate": a, "role": "classification", "built": True, **{f"K{i}": True for i in range(1, 7)}}
    k5_missed = {**met, "K5": False}
    unmeasured = {"candidate": "f", "role": "fine-grained", "K1": True, "K2": None, "K3": True, "K6": True}
    s = calibration.rounds_summary({1: [unmeasured], 3: [k5_missed, {"candidate": b, "role": "classification",
                                                                     "built": False}]},
                                   {1: "a" * 40, 3: None})
    assert list(s["round"]) == [1, 3] and list(s["declared"]) == [1, 2] and list(s["built"]) == [1, 1]
    assert s.loc[0, "preregistration"] == "a" * 12 and s.loc[1, "preregistration"] == ""
    # a role's own criteria only, a criterion not measured apart from one missed
    assert s.loc[0, "missed"] == "f: none (not measured: K2)" and s.loc[0, "met_every_criterion"] == "none"
    assert s.loc[1, "missed"] == f"{a}: K5" and s.loc[1, "not_built"] == b
    s = calibration.rounds_summary({3: [met]}, {})
    assert s.loc[0, "met_every_criterion"] == a and s.loc[0, "missed"] == ""


def test_without_a_proxy_the_premise_is_not_testable_and_fits_the_ledgers_why(monkeypatch):
    from tokenprune.study import verdicts, why

    monkeypatch.setattr(chosen, "PROXY", None)
    p = chosen.proxy_premise("vit_s14_fmnist_ft_smoke")
    assert not p.holds and p.fails_as == verdicts.NOT_TESTABLE and str(len(chosen.ROUND_FILES)) in p.detail
    reason = p.gate(verdicts.Decision(verdicts.REPRODUCED, "measured", "a rule")).why
    assert p.detail in reason and reason != "measured"
    assert not why.too_long(reason)      # the ledger shows the whole reason, what would decide included


def test_the_models_listing_shows_a_controls_accuracy_per_configuration():
    from tokenprune.training import checkpoints

    info = {"name": "x_ft_unpruned_s0", "train_time_s": 3.0, "outputs": "x.npz", "size_bytes": 1e6,
            "weights_sha256": "f" * 64, "test": {"accuracy/unpruned": 0.873, "accuracy/fuse@0.7": 0.8666, "n": 5}}
    line = checkpoints.describe(info)
    assert "0.8730" in line and "0.8666" in line and "nan" not in line
    info["test"] = {"accuracy": 0.5, "n": 5}
    assert "0.5000" in checkpoints.describe(info)
