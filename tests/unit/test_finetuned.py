"""Cached fine-tunes of the audits' classification model (model_recipes.finetune_recipes) and the outcome of notebook
00's calibration that the audits read (chosen.CHOSEN and the proxy premises)."""

import pytest
import torch

from tokenprune.core.config import PruneConfig
from tokenprune.study.proxy import chosen as C
from tokenprune.training import base_models as B, checkpoints, model_recipes, recipe_data
from tokenprune.training.finetune import finetune_trainable


def test_finetune_recipes_name_their_base_by_hash_and_cover_every_condition_and_seed():
    d = model_recipes.default_recipes()
    fts = {k: v for k, v in d.items() if v.arch.get("builder") == "finetune"}
    assert len(fts) == sum(len(model_recipes.FINETUNE_CONDITIONS) * len(seeds) for *_, seeds in model_recipes.FINETUNED_BASES.values())
    for prefix, (base_name, trainable, images, seeds) in model_recipes.FINETUNED_BASES.items():
        base = d[base_name]
        mine = {k: v for k, v in fts.items() if v.arch["base"] == base_name}
        assert len(mine) == len(model_recipes.FINETUNE_CONDITIONS) * len(seeds)
        assert list(d).index(base_name) < min(list(d).index(k) for k in mine)  # bases are built first
        for name, r in mine.items():
            cond = r.extra["finetune"]
            keep, reducer, warm = model_recipes.FINETUNE_CONDITIONS[cond]
            assert r.arch == {"builder": "finetune", "base": base_name, "base_hash": base.recipe_hash()}
            assert r.keep_rate == keep and r.keep_length == warm and r.epochs == 1.0
            assert r.train_subset == images and r.trainable == trainable
            assert (r.prune["reducer"] == reducer) if keep < 1 else True
            assert name == model_recipes.finetuned_name(cond, r.seed, prefix=prefix)
            assert model_recipes.finetune_prefix(base_name) == prefix
    assert len({r.recipe_hash() for r in fts.values()}) == len(fts)
    with pytest.raises(ValueError, match="condition"):
        model_recipes.finetuned_name("fuse50", 0)
    with pytest.raises(ValueError, match="small_vit_fmnist") as err:  # the name given, and those accepted
        model_recipes.finetune_prefix("small_vit_fmnist")
    assert all(base in str(err.value) for base, *_ in model_recipes.FINETUNED_BASES.values())


def test_a_finetune_trains_what_its_base_cached_finetunes_train():
    from tokenprune.training.finetune import finetune_recipe

    s14 = model_recipes.base_recipes()["vit_s14_fmnist_ft"]
    r = finetune_recipe(s14, PruneConfig(keep_rate=0.5), name="x", seed=0, epochs=1.0, batch_size=8, lr=1e-4,
                        min_lr=1e-6)
    assert r.trainable == model_recipes.FINETUNED_BASES["s14"][1] == finetune_trainable("vit_s14_fmnist_ft_smoke")
    small = model_recipes.base_recipes()["small_vit_fmnist"]
    assert finetune_recipe(small, None, name="y", seed=0, epochs=1.0, batch_size=8, lr=1e-4, min_lr=1e-6).trainable is None
    assert finetune_recipe(s14, None, name="z", seed=0, epochs=1.0, batch_size=8, lr=1e-4, min_lr=1e-6,
                           trainable=["head."]).trainable == ["head."]


def test_a_vit_s14_finetune_stores_only_what_trained_and_loads_as_trained(tmp_path):
    recipe = model_recipes.smoke_recipes()["s14_ft_fuse70_s0_smoke"]
    trained, info = B.ensure_model(recipe, tmp_path, progress=False)
    assert info["stored_prefixes"] == recipe.trainable
    loaded, info2 = B.ensure_model(recipe, tmp_path, progress=False)
    assert info2["loaded"] is True
    base, _ = B.load_base_model("vit_s14_fmnist_ft_smoke", train_if_missing=True, progress=False)
    sd_b, sd_l = base.state_dict(), loaded.state_dict()
    changed = {k for k in sd_l if not torch.equal(sd_b[k], sd_l[k])}
    assert changed and all(any(k.startswith(p) for p in recipe.trainable) for k in changed)
    x = torch.rand(2, 3, recipe.img_size, recipe.img_size)
    PruneConfig(keep_rate=0.7).apply(loaded)
    trained.keep_rate = 0.7
    with torch.inference_mode():
        assert torch.allclose(trained.eval()(x), loaded(x), atol=1e-4)


def test_smoke_finetunes_follow_the_smoke_base():
    s = model_recipes.smoke_recipes()
    ft = s["s14_ft_fuse70_s1_smoke"]
    assert ft.arch["base"] == "vit_s14_fmnist_ft_smoke"
    assert ft.arch["base_hash"] == s["vit_s14_fmnist_ft_smoke"].recipe_hash()
    assert "s14_ft_fuse70_s3_smoke" not in s


def test_a_cached_finetune_loads_as_it_was_trained(tmp_path):
    recipe = model_recipes.smoke_recipes()["s14_ft_fuse70_s0_smoke"]
    trained, info = B.ensure_model(recipe, tmp_path, progress=False)
    assert info["loaded"] is False
    loaded, info2 = B.ensure_model(recipe, tmp_path, progress=False)
    assert info2["loaded"] is True and info2["sha256"] == info["sha256"]
    x = torch.rand(2, 3, recipe.img_size, recipe.img_size)
    PruneConfig(keep_rate=0.7).apply(loaded)
    trained.keep_rate = 0.7
    with torch.inference_mode():
        assert torch.allclose(trained.eval()(x), loaded(x), atol=1e-4)
    # the fine-tune changed the base's weights
    base, _ = B.load_base_model("vit_s14_fmnist_ft_smoke", train_if_missing=True, progress=False)
    assert not torch.equal(base.head.weight, loaded.head.weight)


def test_a_finetune_of_a_changed_base_is_refused():
    recipe = model_recipes.smoke_recipes()["s14_ft_fuse70_s0_smoke"]
    stale = recipe.replace(arch={**recipe.arch, "base_hash": "000000000000"})
    with pytest.raises(checkpoints.CheckpointMismatchError, match="base"):
        B.build_model(stale)


def test_eval_data_of_a_cluttered_candidate_equals_its_recipe_test_split():
    import numpy as np

    r = model_recipes.default_recipes()["s14_fmnist_black64"]
    r = r.replace(dataset_kwargs={**r.dataset_kwargs, "limit": 400})  # the same code path as the full split
    fast = recipe_data.eval_data(r, 50)
    full = recipe_data.load_recipe_data(r)["test"].select(range(50))
    assert np.array_equal(np.asarray(fast["image"]), np.asarray(full["image"]))
    assert list(fast["label"]) == list(full["label"])


def test_the_chosen_proxy_is_the_one_the_committed_calibration_chose():
    """chosen.CHOSEN (the audits' default proxy) must be what notebook 00 chose in the committed reports, and
    the plan applied to the committed caches of the three rounds must choose it too."""
    import json

    from tokenprune.study.proxy import calibration as proxy_calibration
    from tokenprune.utils.environment import REPO_ROOT

    res = json.loads((REPO_ROOT / "reports" / "00_proxy_calibration" / "results.json").read_text())
    assert res["profile"] == "default"
    assert res["values"]["chosen"] == C.CHOSEN and res["values"]["how"] == C.HOW
    from tokenprune.study.proxy import plan as proxy_plan
    from tokenprune.training.proxy import round2, round3

    rows1, chosen1 = proxy_calibration.calibrate()
    rows2, chosen2, _ = proxy_calibration.calibrate_round2(rows1, chosen1)
    _, chosen, _ = proxy_calibration.calibrate_round(round3.ROUND, rows1 + [r for r in rows2 if r["built"]], chosen2,
                                                     proxy_plan.CANDIDATES + round2.CANDIDATES)   # as notebook 00
    assert {role: name for role, (name, _) in chosen.items()} == C.CHOSEN
    assert {role: how for role, (_, how) in chosen.items()} == C.HOW


def test_the_proxy_premise_is_not_testable_without_a_proxy_and_inconclusive_on_another_model(monkeypatch):
    from tokenprune.study import verdicts

    assert C.PROXY is None and C.AUDIT_MODEL
    p = C.proxy_premise(C.AUDIT_MODEL)
    assert not p.holds and p.fails_as == verdicts.NOT_TESTABLE and C.AUDIT_MODEL in p.detail
    monkeypatch.setattr(C, "PROXY", "vit_s14_fmnist_ft")
    assert C.proxy_premise("vit_s14_fmnist_ft").holds and C.proxy_premise("vit_s14_fmnist_ft_smoke").holds
    p = C.proxy_premise("small_vit_cfmnist")
    assert not p.holds and p.fails_as == verdicts.INCONCLUSIVE and "small_vit_cfmnist" in p.detail


def test_the_fine_grained_fallback_carries_its_distance_from_the_bands():
    from tokenprune.study.proxy import plan as proxy_plan

    p = C.bar_premise(C.FINE_GRAINED, "fine-grained")
    assert p.holds and p.name == C.FINE_GRAINED_BAR
    assert C.HOW["fine-grained"] == "fallback" and p.limitation
    assert C.fallback_limitation("s14_birds") == "" and C.bar_premise("s14_birds").limitation == ""
    assert C.bar_premise("s14_birds").holds is False  # the generator's own SynthBirds misses the bar (K6)
    assert proxy_plan.BARS["fine-grained"] == 80.0


def test_the_fallback_says_on_which_side_of_each_cost_band_it_lies():
    """The limitation's comparison with DeiT-S is read from where each off-the-shelf cost lies against its band (K2 at
    keep 0.7: 0.3-4, K3 at keep 0.5: 1.5-12), so a fallback inside one band and above the other is not called more
    sensitive at both keep rates."""
    assert C.band_sides({"cost@0.7": 3.87, "cost@0.5": 14.6}) == {"0.7": "inside", "0.5": "above"}
    assert C.band_sides({"cost@0.7": 0.1, "cost@0.5": 1.0}) == {"0.7": "below", "0.5": "below"}
    assert C.band_sides({"cost@0.7": 4.0, "cost@0.5": 1.5}) == {"0.7": "inside", "0.5": "inside"}   # edges inside
    assert C.band_sides({"cost@0.7": None, "cost@0.5": 3.0}) == {} and C.against_deit({"cost@0.7": None}) == ""
    texts = {C.against_deit(c) for c in ({"cost@0.7": 20.0, "cost@0.5": 40.0}, {"cost@0.7": 0.1, "cost@0.5": 1.0},
                                          {"cost@0.7": 2.0, "cost@0.5": 5.0}, {"cost@0.7": 2.0, "cost@0.5": 14.0})}
    assert len(texts) == 4 and "" not in texts


def test_the_sensitivity_factor_is_the_proxys_tome_cost_over_deit_s():
    from tokenprune.study import paper_numbers
    from tokenprune.study.proxy import calibration as proxy_calibration, plan as proxy_plan
    from tokenprune.training.proxy import outputs as proxy_outputs, round2

    c = next(c for c in proxy_plan.CANDIDATES + round2.CANDIDATES if c.name == C.FINE_GRAINED)
    tome = proxy_calibration.measurements(c, proxy_outputs.load(c)[0])["tome_cost"]
    ref = paper_numbers.DEIT_CLASS_OFF_THE_SHELF["tome_deit_s_r13_pp"]
    assert (C.sensitivity_of(C.FINE_GRAINED, "tome") == pytest.approx(tome / ref)
            == C.sensitivity_of(f"{C.FINE_GRAINED}_smoke", "tome"))
    assert C.sensitivity_of(C.FINE_GRAINED, "evit") is None   # a proxy, but EViT-type claims have no factor
    assert C.is_proxy(C.FINE_GRAINED) and C.is_proxy(f"{C.FINE_GRAINED}_smoke")
    assert C.sensitivity_of(C.AUDIT_MODEL, "tome") is None and not C.is_proxy(C.AUDIT_MODEL)   # not a proxy
    assert C.why_no_factor(C.FINE_GRAINED, "evit") == proxy_plan.missing_factor("evit")
    assert C.why_no_factor(C.FINE_GRAINED, "tome") == ""
    assert C.why_no_factor(C.AUDIT_MODEL, "evit") not in ("", proxy_plan.missing_factor("evit"))   # not a proxy
    with pytest.raises(ValueError):
        C.sensitivity_of(C.FINE_GRAINED, "bat")


def test_the_fallback_states_the_factor_its_claims_use():
    """The fallback's limitation on EViT-type claims names their missing factor and not the ToMe factor; on every
    family it gives each one's; both from the same factors as the claims."""
    from tokenprune.study.proxy import plan as proxy_plan

    m = C._proxy_measurements(C.FINE_GRAINED)
    tome = f"{C.sensitivity_of(C.FINE_GRAINED, 'tome'):.2f}"
    evit = C.fallback_limitation(C.FINE_GRAINED, "evit")
    assert evit.endswith(proxy_plan.missing_factor("evit")) and tome not in evit.split(";")[-1]
    assert C.sensitivity_text(m, "evit") == proxy_plan.missing_factor("evit")
    assert tome in C.sensitivity_text(m, "tome") and tome in C.fallback_limitation(C.FINE_GRAINED)
    assert C.bar_premise(C.FINE_GRAINED, "fine-grained", family="evit").limitation == evit


def test_is_proxy_follows_the_choice(monkeypatch):
    from tokenprune.training.proxy import round2

    name = round2.CANDIDATES[0].name
    assert not C.is_proxy(name) and not C.is_proxy("no_such_model")
    monkeypatch.setattr(C, "CHOSEN", {**C.CHOSEN, round2.CANDIDATES[0].role: name})
    assert C.is_proxy(name) and C.is_proxy(f"{name}_smoke")


# ---------------------------------------------------------------------------------------------- round 3 as a proxy


def _round3_built(monkeypatch, built: set, top1: float = 88.0):
    """Make the cached off-the-shelf outputs of the candidates in ``built`` loadable (the others missing), each with
    notebook 00's measurement giving ``top1`` and a ToMe cost of 2 points."""
    from tokenprune.study.proxy import calibration as proxy_calibration
    from tokenprune.training.proxy import outputs as proxy_outputs

    def load(c, profile="default"):
        if c.name not in built:
            raise checkpoints.CheckpointMissingError(f"{c.name}: not built")
        return {"labels": c.name}, {}

    def measurements(c, arrays, seed=0):
        return {"candidate": c.name, "role": c.role, "top1": top1, "top1_low": top1 - 1, "top1_high": top1 + 1,
                "test_images": c.test_images, "tome_cost": 2.0, "cost@0.7": 1.0, "cost@0.5": 3.0}

    monkeypatch.setattr(proxy_outputs, "load", load)
    monkeypatch.setattr(proxy_calibration, "measurements", measurements)
    C.k6_measurement.cache_clear()
    C._proxy_measurements.cache_clear()


@pytest.fixture
def fresh_caches():
    yield
    C.k6_measurement.cache_clear()
    C._proxy_measurements.cache_clear()


def test_round3_candidates_are_known_to_the_premises(monkeypatch, fresh_caches):
    from tokenprune.training.proxy import round3

    for c in round3.CANDIDATES:
        assert C._candidate(c.name) is c and C._candidate(f"{c.name}_smoke") is c and C._role(c.name) == c.role
    name = round3.CANDIDATES[0].name
    _round3_built(monkeypatch, {name}, top1=88.0)
    assert C.k6_measurement(name) == {"top1": 88.0, "low": 87.0, "high": 89.0, "n": round3.CANDIDATES[0].test_images}
    assert C.k6_measurement(f"{name}_smoke") is None   # a smoke model is judged as such
    p = C.bar_premise(name)
    assert p.holds and p.name == C.PROXY_BAR and "88.00" in p.detail


def test_a_round3_proxy_without_cached_outputs_fails_its_bar_as_not_testable(monkeypatch, fresh_caches):
    from tokenprune.study import verdicts
    from tokenprune.training.proxy import round3

    name = round3.CANDIDATES[0].name
    _round3_built(monkeypatch, set())
    monkeypatch.setattr(C, "CHOSEN", {**C.CHOSEN, "classification": name})
    monkeypatch.setattr(C, "HOW", {**C.HOW, "classification": "meets every criterion"})
    p = C.bar_premise(name)
    assert not p.holds and p.fails_as == verdicts.NOT_TESTABLE and name in p.detail and "--round 3" in p.detail
    # the measurements the proxy's claims scale by are absent, not an error
    assert C.sensitivity_of(name, "tome") is None and C.fallback_limitation(name) == ""
    _round3_built(monkeypatch, {name})
    assert C.sensitivity_of(name, "tome") == pytest.approx(2.0 / 1.0) and C.fallback_limitation(name) == ""


def test_recheck_caches_rechecks_round3_candidates_as_they_are_built(monkeypatch, fresh_caches):
    from types import SimpleNamespace

    from tokenprune.training.proxy import outputs as proxy_outputs, round2, round3

    built = {c.name for c in C.plan.CANDIDATES + round2.CANDIDATES} | {round3.CANDIDATES[0].name}
    _round3_built(monkeypatch, built)
    seen = []

    def recheck(c, arrays, n):
        seen.append(c.name)
        return [SimpleNamespace(agreeing_max=0.0, label="unpruned", moved=0)]

    monkeypatch.setattr(proxy_outputs, "recheck", recheck)
    out = C.recheck_caches(proxy_outputs.MEASURE_BATCH)
    assert round3.CANDIDATES[0].name in out and round3.CANDIDATES[1].name not in out   # the second is not built
    assert seen == [c.name for c in C._CANDIDATES if c.name in built]
