"""The benchmark's command line refuses what it cannot measure and says when a figure was measured under
load (issue 12, findings 9 and 10). Benchmarks print figures; no test asserts a speed."""
import pytest

from tokenprune.measure import throughput as T


def test_keep_rate_out_of_range_is_refused(capsys):
    with pytest.raises(SystemExit):
        T.main(["--keep", "1.5"])
    assert "keep rates lie in (0, 1]" in capsys.readouterr().err


def test_non_vit_model_is_refused(capsys):
    with pytest.raises(SystemExit):
        T.main(["--model", "resnet18", "--keep", "1.0"])
    assert "not a timm VisionTransformer" in capsys.readouterr().err


def test_every_option_has_help():
    actions = [a for a in T.build_parser()._actions if a.option_strings and a.dest != "help"]
    assert len(actions) >= 10 and all(a.help for a in actions), [a.dest for a in actions if not a.help]


def _result(label, rounds, before=0.1, after=0.1):
    import statistics
    return T.BenchResult(label, statistics.median(rounds), rounds, 8, "fp32", "cpu", 2, 1,
                         extra={"load_before": before, "load_after": after,
                                "round_cv": statistics.pstdev(rounds) / statistics.fmean(rounds)})


def test_load_warnings():
    assert T.load_warnings([_result("a", [10.0, 10.2, 9.9])], cores=2) == []
    loaded = T.load_warnings([_result("a", [10.0, 10.2, 9.9], before=1.5)], cores=2)
    assert len(loaded) == 1 and "machine under load" in loaded[0]
    noisy = T.load_warnings([_result("a", [3.4, 85.0, 40.0])], cores=2)
    assert len(noisy) == 1 and "rounds disagree" in noisy[0]


def test_benchmark_records_load_and_spread():
    import timm

    res = T.benchmark({"m": timm.create_model("deit_tiny_patch16_224", img_size=32, patch_size=8, depth=2)},
                      batch=2, img_size=32, warmup=1, rounds=2, iters_per_round=1)
    assert {"load_before", "load_after", "round_cv"} <= set(res[0].extra)
