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
