"""Cached fine-tunes of the calibrated proxy (base_models.finetune_recipes) and the calibration rules of notebook 00."""
import math

import pytest
import torch

from tokenprune.measure.evaluation import PruneConfig
from tokenprune.study.audits import calibration as C
from tokenprune.training import base_models as B


def test_finetune_recipes_name_their_base_by_hash_and_cover_every_condition_and_seed():
    d = B.default_recipes()
    base = d["small_vit_cfmnist"]
    fts = {k: v for k, v in d.items() if v.arch.get("builder") == "finetune"}
    assert len(fts) == len(B.FINETUNE_CONDITIONS) * len(B.FINETUNE_SEEDS)
    assert list(d).index("small_vit_cfmnist") < min(list(d).index(k) for k in fts)  # bases are built first
    for name, r in fts.items():
        cond = r.extra["finetune"]
        keep, reducer, warm = B.FINETUNE_CONDITIONS[cond]
        assert r.arch == {"builder": "finetune", "base": "small_vit_cfmnist", "base_hash": base.recipe_hash()}
        assert r.keep_rate == keep and r.keep_length == warm and r.epochs == 1.0
        assert (r.prune["reducer"] == reducer) if keep < 1 else True
        assert name == B.finetuned_name(cond, r.seed)
    assert len({r.recipe_hash() for r in fts.values()}) == len(fts)
    with pytest.raises(ValueError, match="condition"):
        B.finetuned_name("fuse50", 0)


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
