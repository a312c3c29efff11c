"""Notebook 04 at the paper profile: where its models come from, the ids and premise of its claims, and the
finite-difference check on a drawn subset of tokens."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from timm.models.vision_transformer import VisionTransformer

from tokenprune.core import split_forward as split
from tokenprune.methods import sensitivity
from tokenprune.measure.rank_statistics import rank_correlations
from tokenprune.study import paper_runs, params
from tokenprune.study.decoupling import claims, data, evidence, heads, settings


def test_paper_settings_only_at_paper():
    for prof in ("smoke", "default"):
        cfg = params.setup("04_decoupling", prof)
        assert cfg.fd_tokens == 0 and not {n.split("/")[0] for n in cfg.settings} & set(data.PAPER_DIRS)
    paper = params.setup("04_decoupling", "paper")
    assert paper.fd_tokens == 49 and set(paper.settings) == set(settings.PAPER_SETTINGS)
    for k, v in paper_runs.TRAINING_SETTINGS.items():
        assert all(settings.PROFILES[p][k] == v for p in ("smoke", "default", "paper"))


def _claim_id(key, dataset):
    d, keys = claims.declaration(key, dataset)
    return d.claim_id(keys)


def test_claim_ids_are_paper_scale_on_the_papers_datasets_only():
    assert _claim_id("coverage_gain", "cub") == "decouple.paper_scale.coverage_gain.cub"
    assert _claim_id("larger_model_null", "aircraft") == "decouple.paper_scale.larger_model_null.aircraft"
    assert _claim_id("coverage_gain", "parts") == "decouple.coverage_gain.parts"
    assert _claim_id("decoupled", "fmnist") == "decouple.decoupled.fmnist"


def test_every_setting_maps_to_one_recipe_run():
    specs = {n: data.paper_run_spec(n) for n in settings.PAPER_SETTINGS}
    assert len({s.name for s in specs.values()}) == 6
    assert specs["cars/large"].model == "deit_base_patch16_224" and specs["cars/large"].dataset == "cars"
    assert specs["cub/small"].init == "deit_small_patch16_224-cd65a155.pth" and specs["cub/small"].keep_rate == 1.0


def _cfg(tmp_path, **kw):
    base = dict(settings=["cub/small", "cub/large"], data_root=str(tmp_path), checkpoint_dir="", init_dir="",
                runs_dir=str(tmp_path / "runs"))
    return SimpleNamespace(**{**base, **kw})


def test_missing_inputs_name_the_parameter(tmp_path):
    with pytest.raises(FileNotFoundError, match="data_root"):
        data.check_paper_inputs(_cfg(tmp_path, data_root=""))
    with pytest.raises(FileNotFoundError, match=r"init_dir: .*deit_base_patch16_224-b5f2ef4d\.pth.*init_dir is not set"):
        data.check_paper_inputs(_cfg(tmp_path))
    (tmp_path / "deit_small_patch16_224-cd65a155.pth").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match=r"deit_base_patch16_224-b5f2ef4d\.pth: not found in"):
        data.check_paper_inputs(_cfg(tmp_path, init_dir=str(tmp_path)))
    # a given checkpoint needs no start checkpoint; SynthBirds / Fashion-MNIST need neither
    (tmp_path / "cub_large.pth").write_bytes(b"")
    data.check_paper_inputs(_cfg(tmp_path, init_dir=str(tmp_path), checkpoint_dir=str(tmp_path)))
    assert data.given_checkpoint("cub/large", _cfg(tmp_path, checkpoint_dir=str(tmp_path))) == tmp_path / "cub_large.pth"
    assert data.given_checkpoint("cub/small", _cfg(tmp_path, checkpoint_dir=str(tmp_path))) is None
    data.check_paper_inputs(_cfg(tmp_path, data_root="", settings=["parts/small", "fmnist/small"]))
    # nor does a run finished in runs_dir (paper-train's --out)
    done = tmp_path / "runs" / data.paper_run_spec("cub/large").name
    done.mkdir(parents=True)
    (done / "summary.json").write_text("{}")
    data.check_paper_inputs(_cfg(tmp_path, init_dir=str(tmp_path)))


def _run(shortened: bool):
    spec = data.paper_run_spec("cub/small")
    summary = {"history": [{}], "recipe_epochs": 1 if not shortened else 100, "shortened": shortened,
               "limits": {"batch_per_process": 2 if shortened else None, "workers": 0}, "steps_per_epoch": 1,
               "global_batch": 2, "lr": 1e-7}
    return paper_runs.TrainedRun(spec, None, "trained", summary, "/runs/x")


def test_training_premise_reads_the_runs_of_the_claim():
    s = lambda run: SimpleNamespace(run=run)  # noqa: E731
    assert evidence.training_premise(s(None)) is None                  # the proxies' base models: no training premise
    whole, short = _run(False), _run(True)
    assert evidence.training_premise(s(whole)).holds
    p = evidence.training_premise(s(whole), s(short))
    assert not p.holds and "decoupling_fgvc_finetune" in p.detail and p.name == paper_runs.FULL_SCHEDULE
    given = paper_runs.TrainedRun(whole.spec, None, "given", None, "/ckpt/cub_small.pth")
    assert evidence.training_premise(s(given)).holds


def test_fd_tokens_drawn():
    assert heads.fd_tokens_drawn(196, 0, 0) is None and heads.fd_tokens_drawn(196, 196, 0) is None
    a = heads.fd_tokens_drawn(196, 49, 0)
    assert len(a) == len(set(a.tolist())) == 49 and list(a) == sorted(a) and a.max() < 196
    assert np.array_equal(a, heads.fd_tokens_drawn(196, 49, 0)) and not np.array_equal(a, heads.fd_tokens_drawn(196, 49, 1))


@pytest.mark.parametrize("target", ["pred_logit", "cls_state"])
def test_fd_on_a_subset_estimates_the_same_sensitivity(target):
    """On the drawn tokens, the perturbation estimate of the subset matches the gradient signal (exact for a scalar
    target, Hutchinson for cls_state) and the full finite-difference estimate of the same tokens."""
    torch.manual_seed(0)
    model = VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=4, num_heads=2, num_classes=5).eval()
    toks = split.cache_tokens(model, torch.randn(2, 3, 32, 32), blocks=[2], dtype="fp32").tokens[2]
    idx = heads.fd_tokens_drawn(16, 8, 0)
    got = sensitivity.finite_difference_sensitivity(model, toks, 2, target=target, probes=256, seed=1,
                                                    token_idx=idx)
    assert got.shape == (2, 8) and (got > 0).all()
    grad = sensitivity.gradient_sensitivity(model, toks, 2, target=target, probes=256, seed=0, dtype="fp32")[:, idx]
    full = sensitivity.finite_difference_sensitivity(model, toks, 2, target=target, probes=256, seed=0)[:, idx]
    assert torch.equal(sensitivity.finite_difference_sensitivity(model, toks, 2, target=target, probes=3, seed=0),
                       sensitivity.finite_difference_sensitivity(model, toks, 2, target=target, probes=3, seed=0,
                                                                 token_idx=range(16)))   # every token: unchanged
    with pytest.raises(ValueError, match="token_idx"):
        sensitivity.finite_difference_sensitivity(model, toks, 2, target=target, token_idx=[16])
    for ref in (grad, full):
        rho, _ = rank_correlations(got, ref)
        assert np.nanmean(rho) > 0.85, (target, rho)
        assert (got / ref).median().item() == pytest.approx(1.0, abs=0.1)
