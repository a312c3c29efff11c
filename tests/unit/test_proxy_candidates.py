"""The proxy candidates as recipes and their cached off-the-shelf outputs: each candidate is a base model of the
default profile with its own hash, its scenes are what its knobs say, and a cache that the code no longer
reproduces is refused."""
import numpy as np
import pytest

from tokenprune.core.patch import NUMERICS_VERSION
from tokenprune.training import base_models, checkpoints, model_recipes, recipe_data
from tokenprune.training.proxy import candidates as pc, outputs as po


def test_every_candidate_is_a_default_base_model_with_its_own_hash():
    recipes = model_recipes.recipes_for("default")
    hashes = {recipes[c.name].recipe_hash() for c in pc.CANDIDATES}
    assert len(hashes) == len(pc.CANDIDATES)
    for c in pc.CANDIDATES:
        r = recipes[c.name]
        assert r.img_size == 112 and r.arch["builder"] == "vit_s14" and r.arch["num_classes"] == c.num_classes
        assert r.extra["feature_dtype"] == "fp32"
        assert f"{c.name}_smoke" in model_recipes.recipes_for("smoke")


def test_the_cache_key_covers_the_numerics_and_the_configurations():
    c = pc.CANDIDATES[0]
    r = po.ots_recipe(c)
    assert r.extra["numerics"] == NUMERICS_VERSION
    assert r.extra["configs"] == ["unpruned", "fuse@0.9", "fuse@0.7", "fuse@0.5", "random@0.5", "mink@0.5",
                                  f"tome@r{po.TOME_R}"]
    assert r.extra["base_hash"] == model_recipes.recipes_for("default")[c.name].recipe_hash()
    other = r.replace(extra={**r.extra, "numerics": NUMERICS_VERSION + 1})
    assert other.recipe_hash() != r.recipe_hash()


def test_tome_r_is_the_one_nearest_deit_s_mac_ratio_at_64_tokens():
    import copy

    import timm

    from tokenprune.measure.macs import analytic_macs
    from tokenprune.methods.tome import tome_schedule
    from tokenprune.study.proxy.plan import DEIT_S_MAC_RATIO

    model = timm.create_model("vit_small_patch14_dinov2", pretrained=False, img_size=112, num_classes=10)
    base = analytic_macs(model).total
    cfg = po.ots_configs(64, 12)[-1]
    ratio = {}
    for r in range(1, 8):
        rates, locs = tome_schedule(r, 64, 12)
        ratio[r] = analytic_macs(cfg.with_(keep_rate=rates, locations=locs).apply(copy.deepcopy(model))).total / base
    nearest = min(ratio, key=lambda r: abs(ratio[r] - DEIT_S_MAC_RATIO))
    assert nearest == po.TOME_R


@pytest.mark.parametrize("name", [c.name for c in pc.CANDIDATES if c.role == "classification"])
def test_scene_candidates_generate_what_their_knobs_say(name):
    c = next(c for c in pc.CANDIDATES if c.name == name)
    r = model_recipes.recipes_for("smoke")[f"{name}_smoke"]
    test = recipe_data.eval_data(r, n=16).with_format("numpy")
    img, obj = np.asarray(test["image"]), np.asarray(test["object_mask"]).astype(bool)
    assert img.shape[1:] == (c.canvas, c.canvas)
    empty = ~(obj | np.asarray(test["clutter_mask"]).astype(bool))
    if c.background == "photo":
        assert img[empty].mean() > 5                     # a photo shows where nothing is pasted
    else:
        assert img[empty].max() == 0


def test_recheck_refuses_a_cache_the_code_does_not_reproduce(monkeypatch):
    c = pc.CANDIDATES[0]
    n = 16
    fresh = {"labels": np.arange(n), "logits/unpruned": np.zeros((n, 10), np.float32),
             "logits/fuse@0.7": np.ones((n, 10), np.float32), "logits/random@0.5": np.ones((n, 10), np.float32)}
    monkeypatch.setattr(po, "measure", lambda cand, n=None, progress=False: ({k: v[:n] for k, v in fresh.items()}, {}))
    assert all(r.ok and r.moved == 0 for r in po.recheck(c, fresh, n=n))
    # a near tie broken the other way on one image of a top-k configuration: another CPU's rounding, accepted
    tie = fresh["logits/fuse@0.7"].copy()
    tie[3] += 0.01
    assert {r.label: r.moved for r in po.recheck(c, {**fresh, "logits/fuse@0.7": tie}, n=n)}["fuse@0.7"] == 1
    # every image moved: another model, refused
    with pytest.raises(po.CacheStale, match="fuse@0.7"):
        po.recheck(c, {**fresh, "logits/fuse@0.7": fresh["logits/fuse@0.7"] + 0.01}, n=n)
    # one image of a configuration with fixed indices (random selection) or none: refused
    for key in ("logits/unpruned", "logits/random@0.5"):
        one = fresh[key].copy()
        one[3] += 0.01
        with pytest.raises(po.CacheStale, match=key.split("/")[1]):
            po.recheck(c, {**fresh, key: one}, n=n)
    with pytest.raises(po.CacheStale, match="labels"):
        po.recheck(c, {**fresh, "labels": np.arange(1, n + 1)}, n=n)


def test_cache_only_refuses_to_build_a_missing_model_or_output(tmp_path, monkeypatch):
    from tokenprune.training import checkpoints
    from tokenprune.utils.environment import CACHE_ONLY_ENV

    monkeypatch.setenv(CACHE_ONLY_ENV, "1")
    recipe = model_recipes.recipes_for("smoke")["small_vit_fmnist_smoke"]
    with pytest.raises(checkpoints.CheckpointMissingError, match=CACHE_ONLY_ENV):
        base_models.ensure_model(recipe, tmp_path, progress=False)
    with pytest.raises(checkpoints.CheckpointMissingError, match=CACHE_ONLY_ENV):
        checkpoints.ensure_outputs(recipe, lambda: pytest.fail("built"), tmp_path)
    assert not list(tmp_path.iterdir())


def test_k5_fine_tunes_train_blocks_4_to_12_and_are_keyed_by_base_and_numerics():
    from tokenprune.training.proxy import finetunes as pf

    c = pc.CANDIDATES[0]
    r = pf.k5_recipe(c, 1)
    assert r.trainable == [f"blocks.{i}." for i in range(3, 12)] + ["norm.", "fc_norm.", "head."]
    assert r.keep_rate == pc.FINETUNE["keep_rate"] and r.keep_length == 0.0 and r.train_subset == c.train_images
    assert r.arch["base_hash"] == model_recipes.recipes_for("default")[c.name].recipe_hash()
    assert r.extra["numerics"] == NUMERICS_VERSION and r.seed == 1
    assert len({pf.k5_recipe(c, s).recipe_hash() for s in pc.FINETUNE["seeds"]}) == len(pc.FINETUNE["seeds"])
