"""The bench command's ToMe, kernel, bf16 and torch.compile options: what it refuses, which kernel each model gets,
when bf16 is skipped, and the torch.compile rows. Benchmarks print figures; no test asserts a speed."""
import os

import pytest
import torch

from tokenprune.core import precision as P
from tokenprune.measure import bench_command as B

TINY = ["--model", "deit_tiny_patch16_224", "--batch", "1", "--rounds", "1", "--iters", "1", "--warmup", "0"]


def test_official_tome_refusals(tmp_path, capsys):
    with pytest.raises(SystemExit):
        B.main(TINY + ["--keep", "1.0", "--tome-r", "13", "--official-tome", str(tmp_path)])
    err = capsys.readouterr().err
    assert "--official-tome" in err and "timm.py" in err
    with pytest.raises(SystemExit):
        B.main(TINY + ["--keep", "1.0", "--official-tome", str(tmp_path)])  # no --tome-r to compare at
    assert "--official-tome" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        B.main(["--tome-r", "0"])
    assert "--tome-r" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        B.main(["--attention", "flash"])
    assert "--attention" in capsys.readouterr().err


@pytest.fixture
def kernels_seen(monkeypatch):
    """Records, for every timed run, each model's attention kernel ('fused' / 'explicit' per Attention module)."""
    seen = []
    original = B.benchmark

    def spy(models, **kw):
        seen.append({"dtype": kw["dtype"], **{k: {"fused" if a.fused_attn else "explicit" for a in m.modules()
                                                   if hasattr(a, "fused_attn")} for k, m in models.items()}})
        return original(models, **kw)

    monkeypatch.setattr(B, "benchmark", spy)
    return seen


def test_tome_rows_and_the_rules_kernel_for_every_model_of_ours(kernels_seen, monkeypatch, capsys):
    """On a CPU with AVX512-BF16 and no AMX the rule gives fp32 the fused kernel and bf16 the explicit one."""
    monkeypatch.setattr(P, "cpu_flags", lambda: frozenset({"avx512f", "avx512_bf16"}))
    monkeypatch.setattr(P, "native_bf16", lambda device_type="cpu": "AVX512-BF16")
    rows = B.main(TINY + ["--keep", "1.0", "0.7", "--tome-r", "13", "--dtype", "fp32", "bf16", "--targets"])
    out = capsys.readouterr().out
    assert [(r["dtype"], r["config"]) for r in rows] == [(d, c) for d in ("fp32", "bf16")
                                                         for c in ("keep=1", "keep=0.7", "tome r=13")]
    tome = [r for r in rows if r["tome_r"] == 13]
    assert all(r["keep_rate"] is None and r["mac_ratio"] > 1.5 and "targets_met" in r for r in tome)
    assert {r["attention"] for r in rows if r["dtype"] == "fp32"} == {"fused"}
    assert {r["attention"] for r in rows if r["dtype"] == "bf16"} == {"explicit"}
    # every model of ours, the unpruned baseline included, ran with the rule's kernel
    assert [{k: v for k, v in s.items() if k != "dtype"} for s in kernels_seen] == [
        {c: {"fused" if s["dtype"] == "fp32" else "explicit"} for c in ("keep=1", "keep=0.7", "tome r=13")}
        for s in kernels_seen]
    assert out.count("\n| fp32 | 1 |") == 1 and out.count("\n| bf16 | 1 |") == 1  # the summary table


def test_attention_option_overrides_the_rule(kernels_seen):
    rows = B.main(TINY + ["--keep", "1.0", "0.7", "--dtype", "fp32", "--attention", "explicit"])
    assert {r["attention"] for r in rows} == {"explicit"}
    assert all(v == {"explicit"} for s in kernels_seen for k, v in s.items() if k != "dtype")


def test_bf16_is_skipped_without_native_bf16_unless_forced(monkeypatch, capsys):
    monkeypatch.setattr(P, "native_bf16", lambda device_type="cpu": None)
    rows = B.main(TINY + ["--keep", "1.0", "--dtype", "fp32", "bf16"])
    out = capsys.readouterr().out
    assert {r["dtype"] for r in rows} == {"fp32"}
    assert any("bf16" in line and "--force-bf16" in line for line in out.splitlines())  # the skip names the option
    rows = B.main(TINY + ["--keep", "1.0", "--dtype", "fp32", "bf16", "--force-bf16"])
    assert {r["dtype"] for r in rows} == {"fp32", "bf16"} and "--force-bf16" not in capsys.readouterr().out


def test_bf16_runs_where_native(monkeypatch, capsys):
    monkeypatch.setattr(P, "native_bf16", lambda device_type="cpu": "AVX512-BF16")
    rows = B.main(TINY + ["--keep", "1.0", "--dtype", "bf16"])
    assert {r["dtype"] for r in rows} == {"bf16"} and "--force-bf16" not in capsys.readouterr().out


def test_compile_times_eager_and_compiled_in_one_run_at_every_batch(monkeypatch, capsys):
    compiled, runs = [], []
    monkeypatch.setattr(torch, "compile", lambda m, **kw: compiled.append(kw) or m)  # the rows' plumbing, not inductor
    timed = B.benchmark
    monkeypatch.setattr(B, "benchmark", lambda models, **kw: runs.append((kw["batch"], sorted(models)))
                        or timed(models, **kw))
    rows = B.main(TINY[:2] + ["--img-size", "112", "--batch", "1", "2", "--rounds", "1", "--iters", "1", "--warmup",
                              "0", "--keep", "1.0", "0.7", "--tome-r", "13", "--compile"])
    assert [(r["batch"], r["compiled"]) for r in rows] == [(1, False)] * 3 + [(1, True)] * 3 + [(2, False)] * 3 + \
        [(2, True)] * 3
    assert compiled == [{"dynamic": False}] * 6  # ours (the baseline, EViT, ToMe) at each batch's static shapes
    ours = ["keep=0.7", "keep=1", "tome r=13"]
    for batch in (1, 2):  # each batch's timed run holds both: eager and compiled in the same interleaved rounds
        assert (batch, sorted(ours + [c + B.COMPILED for c in ours])) in runs
    for r in rows:
        assert ("compiled_over_eager" in r) == r["compiled"] == ("eager_img_per_s" in r)
        if r["compiled"]:
            assert r["compiled_over_eager_low"] <= r["compiled_over_eager"] <= r["compiled_over_eager_high"]
            assert r["eager_img_per_s"] > 0
    summary = capsys.readouterr().out.split("\n|")[1:]
    assert [line.split(" | ")[1] for line in summary[2:]] == ["1", "1 compiled", "2", "2 compiled"]
    assert all(line.count(" | ") == summary[0].count(" | ") for line in summary[2:])  # a cell under every column


def test_compile_failure_is_printed_not_raised(monkeypatch, capsys):
    class Broken(torch.nn.Module):
        def __init__(self, m, **_):
            super().__init__()
            self.m = m
            self.patch_embed = m.patch_embed

        def forward(self, x):
            raise RuntimeError("C++ compiler not found\nmore detail")

    monkeypatch.setattr(torch, "compile", Broken)
    rows = B.main(TINY + ["--keep", "1.0", "0.7", "--compile"])
    out = capsys.readouterr().out
    assert not any(r["compiled"] for r in rows) and len(rows) == 2
    line = next(line for line in out.splitlines() if "torch.compile" in line)  # one line: the error's kind and first line
    assert "RuntimeError" in line and "C++ compiler not found" in line and "more detail" not in out


EVIT, TOME = os.environ.get("TOKENPRUNE_OFFICIAL_EVIT"), os.environ.get("TOKENPRUNE_OFFICIAL_TOME")


@pytest.mark.skipif(not (EVIT and TOME), reason="set TOKENPRUNE_OFFICIAL_EVIT and TOKENPRUNE_OFFICIAL_TOME to checkouts "
                                                "of youweiliang/evit and facebookresearch/ToMe")
def test_bench_times_both_official_implementations_beside_ours(capsys):
    rows = B.main(TINY + ["--keep", "1.0", "0.7", "--tome-r", "13", "--official-evit", EVIT, "--official-tome", TOME,
                          "--targets"])
    by = {r["config"]: r for r in rows}
    assert set(by) == {"keep=1", "keep=0.7", "tome r=13"}
    assert all(by[c]["ours_over_official"] > 0 and by[c]["official_img_per_s"] > 0 for c in ("keep=0.7", "tome r=13"))
    assert "ours_over_official" not in by["keep=1"]


def test_official_tome_refuses_a_model_it_does_not_implement(monkeypatch, capsys):
    """A model with LayerScale (DeiT III), which ToMe's copy of timm's Block skips, is refused in one line before
    anything is timed."""
    from tokenprune.measure import official_tome

    monkeypatch.setattr(official_tome, "load_official_tome", lambda path: object())  # never applied: refused first
    with pytest.raises(SystemExit):
        B.main(["--model", "deit3_small_patch16_224", "--keep", "1.0", "--tome-r", "13", "--official-tome", "x"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--official-tome" in err and "ls1" in err
