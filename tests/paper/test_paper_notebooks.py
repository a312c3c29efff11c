"""Notebooks at the `paper` profile on fixture data (issue 15, item 5): the paper's architectures at 224 px, the
profile's settings shrunk only in batch, steps, benchmark rounds and evaluation images. Each run writes under a
temporary folder, never over the committed reports.

Opt-in (``pytest tests/paper -m paper_notebooks``): 01-03 take about 2 min each on the 2-core CPU, which the
50-minute CI budget does not hold beside `make test` and `make reproduce`. 04 is not here yet: at the paper profile
its finite-difference check of the sensitivity signal (196 tokens x 4 probes of forward passes per image, DeiT-B
at 224 px) alone ran over 12 min on fixtures."""
import json

import pytest

from tokenprune.study import pipeline

pytestmark = [pytest.mark.slow, pytest.mark.paper_notebooks, pytest.mark.timeout(1800)]

#: what the tests may shrink of 01's paper profile, and nothing else
EVIT_SHRUNK = {"batch": 2, "batch_deit_b": 2, "bench_rounds": 1, "warmup": 0, "paper_eval_images": 8,
               "proxy_eval_images": 200, "eval_images": 200, "parts_eval_images": 100, "oracle_images": 64,
               "eval_batch": 100, "small_bench_batch": 8, "small_bench_rounds": 1, "train_bench_rounds": 1,
               "t2t_bench_batch": 2, "t2t_bench_rounds": 1}


#: 02's: evaluation images, the fine-tuning batch, benchmark batch and rounds
BAT_SHRUNK = {"n_eval": 8, "n_div": 8, "bench_batch": 2, "bench_rounds": 1, "sweep_batch": 4, "ft_batch": 2}
#: 03's: evaluation and ranking images, fine-tuning steps and batch, benchmark batch and rounds
VARMEDAD_SHRUNK = {"n_eval": 8, "n_rank": 8, "finetune_steps": 2, "finetune_batch": 2, "bench_batch": 2,
                   "bench_rounds": 1, "bench_warmup": 0, "eval_batch": 4, "seeds": [0, 1, 2], "n_birds": 32}


def _run(notebook: str, over: dict, out) -> dict:
    args = ["--profile", "paper", "--only", notebook, "--reports", str(out)]
    for k, v in over.items():
        args += ["-p", k, json.dumps(v) if not isinstance(v, str) else v]
    assert pipeline.main(args) == 0
    res = json.loads((out / notebook / "results.json").read_text())
    assert res["profile"] == "paper" and res["claims"]
    return res


def test_01_evit_at_paper_on_fixtures(imagenet, tmp_path):
    res = _run("01_evit", {**EVIT_SHRUNK, "imagenet_root": str(imagenet.root),
                           "deit_s_weights": str(imagenet.init_dir / imagenet.init)}, tmp_path)
    assert res["profile"] == "paper"
    claims = {c["id"]: c for c in res["claims"]}
    base = claims["evit.top1.deit_s.baseline"]                         # DeiT-S measured on the fixture's val/
    assert base["our_value"] is not None and base["verdict"] in ("reproduced", "not reproduced", "inconclusive")
    assert claims["evit.top1.deit_s.keep0.7"]["verdict"] == "not testable here"   # no evit_weights given
    assert (tmp_path / "01_evit" / "paper_scale_accuracy.csv").exists()


def test_02_bat_at_paper_on_fixtures(imagenet, tmp_path):
    res = _run("02_diversity_merging", {**BAT_SHRUNK, "imagenet_root": str(imagenet.root),
                                        "deit_weights": str(imagenet.init_dir / imagenet.init)}, tmp_path)
    assert any(c["id"].startswith("bat.") and c["our_value"] is not None for c in res["claims"])


def test_03_varmedad_at_paper_on_fixtures(imagenet, tmp_path):
    """ImageNet-100's release format is ImageNet's (class folders; the fixture's four classes stand in for CMC's
    100): DeiT-S fine-tuned with every configuration and seed for the shrunk steps, then the same claims."""
    res = _run("03_variance_medad", {**VARMEDAD_SHRUNK, "data_root": str(imagenet.root),
                                     "deit_weights": str(imagenet.init_dir / imagenet.init)}, tmp_path)
    claims = {c["id"]: c for c in res["claims"]}
    assert claims["varmedad.top1.attention_variance"]["our_value"] is not None     # the fine-tuned DeiT-S, 3 seeds

