"""The benchmark's command line refuses what it cannot measure and says when a figure was measured under
load. Benchmarks print figures; no test asserts a speed."""
import pytest

from tokenprune.measure import bench_command as B
from tokenprune.measure import throughput as T


def test_keep_rate_out_of_range_is_refused(capsys):
    with pytest.raises(SystemExit):
        B.main(["--keep", "1.5"])
    assert "--keep" in capsys.readouterr().err


def test_non_vit_model_is_refused(capsys):
    with pytest.raises(SystemExit):
        B.main(["--model", "resnet18", "--keep", "1.0"])
    err = capsys.readouterr().err
    assert "--model" in err and "resnet18" in err


def test_every_option_has_help():
    actions = [a for a in B.build_parser()._actions if a.option_strings and a.dest != "help"]
    assert len(actions) >= 10 and all(a.help for a in actions), [a.dest for a in actions if not a.help]


def _result(label, rounds, before=0.1, after=0.1, other=0.0):
    import statistics
    return T.BenchResult(label, statistics.median(rounds), rounds, 8, "fp32", "cpu", 2, 1,
                         extra={"load_before": before, "load_after": after, "other_cores": other, "cores": 2,
                                "round_cv": statistics.pstdev(rounds) / statistics.fmean(rounds)})


def test_load_warnings():
    assert T.load_warnings([_result("a", [10.0, 10.2, 9.9])], cores=2) == []
    loaded = T.load_warnings([_result("a", [10.0, 10.2, 9.9], before=1.5, other=1.0)], cores=2)
    assert len(loaded) == 1 and "machine under load" in loaded[0]
    # a high load average alone is this process's own earlier work (a notebook's previous cells): no flag
    assert T.load_warnings([_result("a", [10.0, 10.2, 9.9], before=1.9, after=1.9, other=0.1)], cores=2) == []
    noisy = T.load_warnings([_result("a", [3.4, 85.0, 40.0])], cores=2)
    assert len(noisy) == 1 and "rounds disagree" in noisy[0]
    rec = T.load_record([_result("a", [10.0, 10.2, 9.9], other=1.0), _result("b", [3.4, 85.0, 40.0])])
    assert rec["under_load"] and len(rec["warnings"]) == 2 and rec["max_round_cv"] > 0.5
    assert not T.load_record([_result("a", [10.0, 10.2, 9.9])])["under_load"]


def _alternate(rest, work, pairs: int = 4, slice_s: float = 0.25) -> dict:
    """Alternate ``pairs`` slices of ``rest(slice_s)`` and ``work(slice_s)``, each read by its own
    :func:`other_cpu_meter`: the mean reading of each kind, what the whole machine kept busy while resting (this
    process sleeps then: the other jobs) and this process's own share while working. Interleaving short slices
    makes the two kinds see the same background load, whatever other jobs run on the machine meanwhile."""
    import os
    import statistics
    import time

    seen = {"rest": [], "work": [], "machine": [], "own": []}
    for _ in range(pairs):
        for kind, act in (("rest", rest), ("work", work)):
            read = T.other_cpu_meter()
            busy0, own0, t0 = T._busy_cpu_s(), time.process_time(), time.perf_counter()
            act(slice_s)
            seen[kind].append(read())
            wall = time.perf_counter() - t0
            if kind == "rest":
                seen["machine"].append((T._busy_cpu_s() - busy0) / wall)
            else:
                seen["own"].append((time.process_time() - own0) / wall)
    out = {k: statistics.fmean(v) for k, v in seen.items()}
    out["free"] = (os.cpu_count() or 1) - out["machine"]
    return out


def _need_a_free_core(m: dict) -> None:
    if m["free"] < 0.8:
        pytest.skip(f"other jobs keep all but {m['free']:.2f} cores busy: no room to measure one more busy process")


@pytest.mark.skipif(T._busy_cpu_s() is None, reason="no /proc/stat")
def test_other_cpu_meter_does_not_count_this_process():
    """This process busy for a slice reads as much as this process asleep (against a baseline of the same test,
    so other jobs on the machine cancel out); a meter that counted this process would read about one core more."""
    import time

    def spin(s: float) -> None:
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < s:
            sum(range(1000))

    m = _alternate(time.sleep, spin)
    _need_a_free_core(m)
    assert m["own"] > 0.5, m                  # the working slices did keep this process busy
    assert m["work"] - m["rest"] < 0.5, m


@pytest.mark.skipif(T._busy_cpu_s() is None, reason="no /proc/stat")
def test_other_cpu_meter_sees_another_process():
    """A child process spinning (resumed with SIGCONT) reads as about one more core than the same child stopped
    (SIGSTOP), in slices interleaved with it: at least half of the free capacity, at most one core."""
    import os
    import signal
    import subprocess
    import sys
    import time

    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    os.kill(child.pid, signal.SIGSTOP)

    def run(s: float) -> None:
        os.kill(child.pid, signal.SIGCONT)
        time.sleep(s)
        os.kill(child.pid, signal.SIGSTOP)

    try:
        m = _alternate(time.sleep, run)
    finally:
        child.kill()
        child.wait()
    _need_a_free_core(m)
    assert 0.5 * min(1.0, m["free"]) < m["work"] - m["rest"] < 1.3, m


def test_benchmark_records_load_and_spread():
    import timm

    res = T.benchmark({"m": timm.create_model("deit_tiny_patch16_224", img_size=32, patch_size=8, depth=2)},
                      batch=2, img_size=32, warmup=1, rounds=2, iters_per_round=1)
    assert {"load_before", "load_after", "other_cores", "cores", "round_cv"} <= set(res[0].extra)


def test_bench_refuses_a_missing_official_checkout_and_other_methods(tmp_path, capsys):
    with pytest.raises(SystemExit):
        B.main(["--model", "deit_tiny_patch16_224", "--keep", "1.0", "0.7", "--official-evit", str(tmp_path)])
    err = capsys.readouterr().err
    assert "--official-evit" in err and "evit.py" in err
    with pytest.raises(SystemExit):
        B.main(["--keep", "1.0", "0.7", "--official-evit", str(tmp_path), "--reducer", "drop"])
    assert "--official-evit" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        B.main(["--batch", "0"])
    assert "--batch" in capsys.readouterr().err


@pytest.mark.parametrize("bf16", ["as this CPU reports it", "reported absent"])
def test_bench_several_batches_and_dtypes_with_targets(capsys, tmp_path, monkeypatch, bf16):
    """The rows are those the library says it times on this CPU: bf16 only where the CPU computes it natively
    (core.precision.native_bf16). Reporting bf16 absent runs the AVX2 path on any CPU."""
    from tokenprune.core import precision as P

    if bf16 == "reported absent":
        monkeypatch.setattr(P, "native_bf16", lambda device_type="cpu": None)
    timed = ("fp32", "bf16") if P.native_bf16("cpu") else ("fp32",)
    rows = B.main(["--model", "deit_tiny_patch16_224", "--keep", "1.0", "0.5", "--batch", "1", "2", "--dtype", "fp32",
                   "bf16", "--rounds", "2", "--iters", "1", "--warmup", "0", "--targets", "--json", str(tmp_path / "b.json")])
    out = capsys.readouterr().out
    assert len(rows) == 4 * len(timed)
    assert {(r["dtype"], r["batch"]) for r in rows} == {(d, b) for d in timed for b in (1, 2)}
    assert out.count("## ") == 2 * len(timed) and "targets:" in out
    assert ("bf16 skipped" in out) == ("bf16" not in timed)
    assert all("targets_met" in r for r in rows if r["keep_rate"] < 1)
    assert (tmp_path / "b.json").is_file()


OFFICIAL = __import__("os").environ.get("TOKENPRUNE_OFFICIAL_EVIT")


@pytest.mark.skipif(not OFFICIAL, reason="set TOKENPRUNE_OFFICIAL_EVIT to a checkout of youweiliang/evit")
def test_official_evit_computes_what_our_patch_computes():
    import copy

    import timm

    from tokenprune import patch
    from tokenprune.measure import official_evit as O

    mod = O.load_official_evit(OFFICIAL)
    m = timm.create_model("deit_tiny_patch16_224").eval()
    assert type(timm.create_model("deit_tiny_patch16_224")).__name__ == "VisionTransformer"  # timm's registry intact
    for r in (0.7, 0.5):
        assert O.check_same_outputs(patch(copy.deepcopy(m), keep_rate=r), O.official_evit_like(mod, m, r)) < 1e-4


def test_training_step_trains_only_the_blocks_from_k_on():
    """A training step updates blocks K to the last, the norm and the head, and leaves the blocks before untouched."""
    import timm
    import torch

    from tokenprune.measure.training_step import TrainingStep

    model = timm.create_model("deit_tiny_patch16_224", img_size=32, patch_size=8, depth=4, num_classes=3)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    step = TrainingStep(model, 3, batch=2, lr=1e-2)
    loss = step(torch.randn(2, 3, 32, 32))
    assert loss.ndim == 0 and torch.isfinite(loss)
    after = model.state_dict()
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    assert moved and all(k.startswith(("blocks.2.", "blocks.3.", "norm.", "head.")) for k in moved), sorted(moved)
    assert any(k.startswith("blocks.2.") for k in moved) and any(k.startswith("head.") for k in moved)
    with pytest.raises(ValueError, match="from_block"):
        TrainingStep(model, 5, batch=2)


def test_bench_times_training_steps_at_an_input_size(capsys):
    """--train-from-block times training steps of each configuration (pruned ones train pruned) at --img-size; the
    official code, compiling and the speed targets are refused with it, as is a block the model does not have."""
    rows = B.main(["--model", "vit_small_patch14_dinov2", "--img-size", "28", "--keep", "1.0", "0.5",
                   "--train-from-block", "11", "--batch", "2", "--rounds", "2", "--iters", "1", "--warmup", "0"])
    assert [r["config"] for r in rows] == ["keep=1", "keep=0.5"] and all(r["img_per_s"] > 0 for r in rows)
    assert rows[1]["gmacs"] < rows[0]["gmacs"]
    for extra in (["--targets"], ["--compile"], ["--train-from-block", "13"]):
        with pytest.raises(SystemExit):
            B.main(["--model", "vit_small_patch14_dinov2", "--img-size", "28", "--train-from-block", "4", *extra])
        assert "--train-from-block" in capsys.readouterr().err
