"""Cached fine-tunes of the calibrated proxy (base_models.finetune_recipes) and the calibration rules of notebook 00."""
import math

import pytest
import torch

from tokenprune.core.config import PruneConfig
from tokenprune.study import calibration as C
from tokenprune.training import base_models as B


def test_finetune_recipes_name_their_base_by_hash_and_cover_every_condition_and_seed():
    d = B.default_recipes()
    fts = {k: v for k, v in d.items() if v.arch.get("builder") == "finetune"}
    assert len(fts) == sum(len(B.FINETUNE_CONDITIONS) * len(seeds) for *_, seeds in B.FINETUNED_BASES.values())
    for prefix, (base_name, trainable, images, seeds) in B.FINETUNED_BASES.items():
        base = d[base_name]
        mine = {k: v for k, v in fts.items() if v.arch["base"] == base_name}
        assert len(mine) == len(B.FINETUNE_CONDITIONS) * len(seeds)
        assert list(d).index(base_name) < min(list(d).index(k) for k in mine)  # bases are built first
        for name, r in mine.items():
            cond = r.extra["finetune"]
            keep, reducer, warm = B.FINETUNE_CONDITIONS[cond]
            assert r.arch == {"builder": "finetune", "base": base_name, "base_hash": base.recipe_hash()}
            assert r.keep_rate == keep and r.keep_length == warm and r.epochs == 1.0
            assert r.train_subset == images and r.trainable == trainable
            assert (r.prune["reducer"] == reducer) if keep < 1 else True
            assert name == B.finetuned_name(cond, r.seed, prefix=prefix)
            assert B.finetune_prefix(base_name) == prefix
    assert len({r.recipe_hash() for r in fts.values()}) == len(fts)
    with pytest.raises(ValueError, match="condition"):
        B.finetuned_name("fuse50", 0)
    with pytest.raises(ValueError, match="small_vit_fmnist") as err:  # the name given, and those accepted
        B.finetune_prefix("small_vit_fmnist")
    assert all(base in str(err.value) for base, *_ in B.FINETUNED_BASES.values())


def test_a_finetune_trains_what_its_base_cached_finetunes_train():
    from tokenprune.training.finetune import finetune_recipe

    s14 = B.base_recipes()["vit_s14_fmnist_ft"]
    r = finetune_recipe(s14, PruneConfig(keep_rate=0.5), name="x", seed=0, epochs=1.0, batch_size=8, lr=1e-4,
                        min_lr=1e-6)
    assert r.trainable == B.FINETUNED_BASES["s14"][1] == B.finetune_trainable("vit_s14_fmnist_ft_smoke")
    small = B.base_recipes()["small_vit_fmnist"]
    assert finetune_recipe(small, None, name="y", seed=0, epochs=1.0, batch_size=8, lr=1e-4, min_lr=1e-6).trainable is None
    assert finetune_recipe(s14, None, name="z", seed=0, epochs=1.0, batch_size=8, lr=1e-4, min_lr=1e-6,
                           trainable=["head."]).trainable == ["head."]


def test_a_vit_s14_finetune_stores_only_what_trained_and_loads_as_trained(tmp_path):
    recipe = B.smoke_recipes()["s14_ft_fuse70_s0_smoke"]
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
    s = B.smoke_recipes()
    ft = s["cfmnist_ft_fuse70_s1_smoke"]
    assert ft.arch["base"] == "small_vit_cfmnist_smoke"
    assert ft.arch["base_hash"] == s["small_vit_cfmnist_smoke"].recipe_hash()
    assert "cfmnist_ft_fuse70_s3_smoke" not in s


def test_a_cached_finetune_loads_as_it_was_trained(tmp_path):
    recipe = B.smoke_recipes()["cfmnist_ft_fuse70_s0_smoke"]
    trained, info = B.ensure_model(recipe, tmp_path, progress=False)
    assert info["loaded"] is False
    loaded, info2 = B.ensure_model(recipe, tmp_path, progress=False)
    assert info2["loaded"] is True and info2["sha256"] == info["sha256"]
    x = torch.randn(4, 1, 64, 64)
    PruneConfig(keep_rate=0.7).apply(loaded)
    trained.keep_rate = 0.7
    with torch.inference_mode():
        assert torch.allclose(trained.eval()(x), loaded(x), atol=1e-5)
    # the fine-tune changed the base's weights
    base, _ = B.load_base_model("small_vit_cfmnist_smoke", train_if_missing=True, progress=False)
    assert not torch.equal(base.head.weight, loaded.head.weight)


def test_a_finetune_of_a_changed_base_is_refused():
    recipe = B.smoke_recipes()["cfmnist_ft_fuse70_s0_smoke"]
    stale = recipe.replace(arch={**recipe.arch, "base_hash": "000000000000"})
    with pytest.raises(B.CheckpointMismatchError, match="base"):
        B.build_model(stale)


def _row(**kw):
    row = {"candidate": "small_vit_cfmnist", "role": "classification", "top1": 75.0,
           "cost@0.7": 2.0, "cost@0.7_low": 1.5, "cost@0.5": 4.0, "cost@0.5_low": 3.2,
           "topk-random@0.5": 5.0, "topk-random@0.5_low": 4.0, "random-mink@0.5": 9.0, "random-mink@0.5_low": 8.0,
           "ft_gain@0.7": 1.0, "ft_gain@0.7_low": 0.5, "ft_gain@0.7_high": 1.5, "ft_share_of_cost": 50.0}
    row.update(kw)
    return row


@pytest.mark.parametrize("change, criterion", [
    ({"cost@0.7": 0.9}, "C1"), ({"cost@0.7_low": -0.1}, "C1"), ({"cost@0.5": 2.9}, "C2"),
    ({"topk-random@0.5_low": -0.2}, "C3"), ({"random-mink@0.5_low": 0.0}, "C3"),
    ({"ft_share_of_cost": 29.0}, "C4"), ({"ft_gain@0.7_low": -0.1}, "C4"), ({"top1": 69.9}, "C5"),
])
def test_each_criterion_can_fail(change, criterion):
    assert all(C.judge(_row()).values())
    j = C.judge(_row(**change))
    assert j[criterion] is False and all(v for k, v in j.items() if k != criterion)
    assert C.choose([_row(**change)]) == {"classification": None}


def test_the_share_of_the_cost_won_back_is_a_percentage_of_points():
    # 7.02 of 10.62 points won back is 66 %, over C4's 30 % (a share computed from the gain as a fraction read 0.66 %)
    assert C.share_of_cost(7.02, 10.62) == pytest.approx(66.1, abs=0.05)
    assert C.judge(_row(**{"ft_share_of_cost": C.share_of_cost(7.02, 10.62)}))["C4"] is True
    assert C.judge(_row(**{"ft_share_of_cost": C.share_of_cost(2.0, 10.0)}))["C4"] is False
    assert math.isnan(C.share_of_cost(1.0, 0.0))


def test_choose_takes_the_first_candidate_meeting_all_and_needs_c4_measured():
    no_ft = {k: v for k, v in _row(candidate="a").items() if not k.startswith("ft_")}
    assert C.judge(no_ft)["C4"] is None
    rows = [no_ft, _row(candidate="b"), _row(candidate="c"),
            _row(candidate="parts", role="fine-grained", top1=79.0)]
    assert C.choose(rows) == {"classification": "b", "fine-grained": None}
    assert C.choose([_row(candidate="parts", role="fine-grained", top1=80.0)]) == {"fine-grained": "parts"}
    table = C.calibration_table(rows)
    assert list(table.columns[-6:]) == [*C.CRITERIA, "meets_all"]
    assert table.loc[0, "C4"] == "not measured" and table.loc[3, "C5"] == "missed"


def test_start_requires_the_criteria_keep_rates():
    from tokenprune.study import params

    cfg = params.setup("00_proxy_calibration", "smoke")
    C.start(cfg)
    with pytest.raises(ValueError, match="keep_rates"):
        C.start(params.setup("00_proxy_calibration", "smoke", {"keep_rates": [0.9, 0.7]}))
    with pytest.raises(ValueError, match="finetuned"):
        C.start(params.setup("00_proxy_calibration", "smoke", {"finetuned": {"nope": "x"}}))


def test_eval_data_of_the_cluttered_proxy_equals_its_recipe_test_split():
    import numpy as np

    r = B.default_recipes()["small_vit_cfmnist"]
    r = r.replace(dataset_kwargs={**r.dataset_kwargs, "limit": 400})  # the same code path as the full split
    fast = B.eval_data(r, 50)
    full = B._load_recipe_data(r)["test"].select(range(50))
    assert np.array_equal(np.asarray(fast["image"]), np.asarray(full["image"]))
    assert list(fast["label"]) == list(full["label"])


def test_the_chosen_proxy_is_the_one_the_committed_calibration_chose():
    """calibration.CHOSEN (the audits' default proxy) must be what notebook 00 chose in the committed reports."""
    import json

    from tokenprune.utils.environment import REPO_ROOT

    res = json.loads((REPO_ROOT / "reports" / "00_proxy_calibration" / "results.json").read_text())
    assert res["profile"] == "default"
    assert res["values"]["chosen"] == C.CHOSEN


def test_the_proxy_premise_fails_on_another_model():
    assert C.proxy_premise(C.PROXY).holds and C.proxy_premise(f"{C.PROXY}_smoke").holds
    p = C.proxy_premise("small_vit_cfmnist")
    assert not p.holds and "small_vit_cfmnist" in p.detail
