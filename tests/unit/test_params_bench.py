import pytest
import timm

from tokenprune.measure import bench_command
from tokenprune.measure import throughput as bench
from tokenprune.study import params
from tokenprune.core.patch import patch

TABLE = {"smoke": {"batch": 2, "rate": 0.5, "models": ["a"], "dtype": "fp32"},
         "default": {"batch": 32, "rate": 0.7, "models": ["a", "b"], "dtype": "fp32"},
         "choices": {"dtype": ["fp32", "bf16"], "models": ["a", "b"]},
         "ranges": {"batch": (1, None), "rate": (0.01, 1.0)}}


def test_resolve_profile_and_overrides():
    cfg = params.resolve("smoke", TABLE, batch=None, rate=1)
    assert (cfg.batch, cfg.rate, cfg.models) == (2, 1, ["a"])


@pytest.mark.parametrize("given,match", [
    ({"batch": "two"}, "batch: expected int"),
    ({"batch": 2.5}, "batch: expected int"),
    ({"rate": "x"}, "rate: expected float"),
    ({"models": ["c"]}, r"models: \['c'\] not accepted; accepted: \['a', 'b'\]"),
    ({"dtype": "fp8"}, "dtype.*accepted"),
    ({"nope": 1}, "nope: not a parameter.*accepted"),
    ({"batch": 0}, r"batch: 0 out of range; accepted: values in 1..inf"),
    ({"rate": 1.5}, r"rate: 1.5 out of range; accepted: values in 0.01..1.0"),
])
def test_resolve_rejects_bad_values(given, match):
    with pytest.raises(ValueError, match=match):
        params.resolve("default", TABLE, **given)


def test_resolve_rejects_unknown_profile():
    with pytest.raises(ValueError, match="profile(.|\n)*'fast'"):
        params.resolve("fast", TABLE)
    with pytest.raises(ValueError, match="profile(.|\n)*'paper'"):
        params.resolve("paper", TABLE)


def test_benchmark_and_speedup_table():
    models = {"full": timm.create_model("deit_tiny_patch16_224", img_size=64),
              "pruned": patch(timm.create_model("deit_tiny_patch16_224", img_size=64), keep_rate=0.5)}
    res = bench.benchmark(models, batch=2, img_size=64, warmup=1, rounds=2, iters_per_round=1)
    assert [r.label for r in res] == ["full", "pruned"] and all(r.img_per_s > 0 and len(r.rounds) == 2 for r in res)
    rows = bench.speedup_table(res, {"full": 2.0, "pruned": 1.0})
    assert rows[0]["speedup"] == 1.0 and rows[1]["mac_ratio"] == 2.0
    assert rows[1]["speedup_low"] <= rows[1]["speedup"] <= rows[1]["speedup_high"]
    with pytest.raises(ValueError, match="dtype"):
        bench.benchmark(models, dtype="int4")


def test_bench_cli_prints_table(capsys):
    rows = bench_command.main(["--model", "deit_tiny_patch16_224", "--keep", "1.0", "0.5", "--batch", "2",
                               "--rounds", "1", "--iters", "1", "--warmup", "0"])
    out = capsys.readouterr().out
    assert "speedup/MAC ratio" in out and len(rows) == 2 and rows[1]["mac_ratio"] > 1.4


def test_every_notebook_table_is_consistent_and_checks_its_ranges():
    """Each profile of each notebook passes its own checks; out-of-range values are refused before a run
    (e.g. `-p eval_images -5` and `-p batch 0`, which would otherwise fail deep inside the notebook)."""
    for nb in params.AUDITS:
        for profile in params.profile_table(nb):
            if profile in params.PROFILES:
                params.setup(nb, profile, {})
    with pytest.raises(ValueError, match="eval_images(.|\n)*-5"):
        params.setup("01_evit", "default", {"eval_images": -5})
    with pytest.raises(ValueError, match=r"batch\b"):
        params.setup("01_evit", "default", {"batch": 0})
    with pytest.raises(ValueError, match=r"keep_rates(.|\n)*1\.5"):
        params.setup("02_diversity_merging", "default", {"keep_rates": [0.7, 1.5]})
