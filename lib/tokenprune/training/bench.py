"""Training throughput of the small ViT under several settings, measured side by side (``python -m tokenprune train
--bench``, :mod:`tokenprune.training.train_cli`): eager fp32 next to bf16 autocast (AMX on a CPU that has it), eager
attention instead of the fused kernel, ``torch.compile`` and AdamW's fused kernel.
"""
from __future__ import annotations

import statistics
import sys
import time
from typing import Callable, Optional, Sequence

import torch
import torch.nn.functional as F

from tokenprune.core.precision import autocast, set_eager_attention
from tokenprune.training.optim import param_groups

__all__ = ["BENCH_SETTING_PARTS", "small_vit_kwargs", "check_bench_setting", "bench_training", "format_table"]


def small_vit_kwargs(embed_dim: int = 128, num_heads: int = 4) -> dict:
    """timm ``VisionTransformer`` kwargs of the small 12-block ViT of the default profile (28x28, patch 4)."""
    return dict(img_size=28, patch_size=4, in_chans=1, num_classes=10, embed_dim=embed_dim, depth=12,
                num_heads=num_heads, mlp_ratio=4.0, class_token=True, global_pool="token")


#: the parts a setting of :func:`bench_training` joins with ``+``
BENCH_SETTING_PARTS = ("fp32", "bf16", "eager_attn", "compile", "fused_adamw")


def check_bench_setting(setting: str) -> set[str]:
    """The parts of a :func:`bench_training` setting; InputError naming an unknown one."""
    from tokenprune.utils.io import InputError

    parts = set(setting.split("+"))
    unknown = parts - set(BENCH_SETTING_PARTS)
    if unknown:
        raise InputError(f"settings: {setting!r} has unknown parts {sorted(unknown)}; accepted parts: "
                         f"{', '.join(BENCH_SETTING_PARTS)} (joined by '+')")
    return parts


def bench_training(settings: Sequence[str] = ("fp32", "fp32+eager_attn", "bf16", "bf16+eager_attn",
                                               "bf16+eager_attn+compile", "bf16+eager_attn+compile+fused_adamw"),
                   embed_dim: int = 128, num_heads: int = 4, batch: int = 64, rounds: int = 5,
                   steps_per_round: int = 2, warmup: int = 2, threads: Optional[int] = None,
                   progress: bool = True) -> list[dict]:
    """Training images/s of the small ViT under several settings, measured side by side.

    Each setting is a ``+``-joined subset of ``fp32``/``bf16``, ``eager_attn`` (explicit attention
    instead of the fused kernel), ``compile`` (``torch.compile``) and ``fused_adamw`` (AdamW's fused
    kernel: ``train(fused_optimizer=True)``). Full training steps (forward,
    backward, AdamW) on a fixed random batch; after ``warmup`` steps (which include compilation),
    ``rounds`` rounds run every setting in turn (interleaved: load drift hits all alike); the figure is
    the median over rounds. The ratio is against the first setting.
    """
    from timm.models.vision_transformer import VisionTransformer

    if threads:
        torch.set_num_threads(threads)
    x = torch.randn(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    runners: dict[str, Callable[[], None]] = {}
    compile_s: dict[str, float] = {}
    for s in settings:
        parts = check_bench_setting(s)
        dtype = "bf16" if "bf16" in parts else "fp32"
        torch.manual_seed(0)
        m = VisionTransformer(**small_vit_kwargs(embed_dim, num_heads))
        set_eager_attention(m, "eager_attn" in parts)
        opt = torch.optim.AdamW(param_groups(m, 0.05), lr=1e-4, fused=("fused_adamw" in parts) or None)
        fwd = torch.compile(m) if "compile" in parts else m

        def step(fwd=fwd, opt=opt, m=m, dtype=dtype) -> None:
            with autocast(dtype, torch.device("cpu")):
                loss = F.cross_entropy(fwd(x).float(), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        t0 = time.perf_counter()
        for _ in range(warmup):
            step()
        compile_s[s] = time.perf_counter() - t0
        if progress:
            print(f"[bench] {s}: warm-up {compile_s[s]:.1f} s", file=sys.stderr, flush=True)
        runners[s] = step
    per = {s: [] for s in settings}
    for r in range(rounds):
        for s, run in runners.items():
            t0 = time.perf_counter()
            for _ in range(steps_per_round):
                run()
            per[s].append(steps_per_round * batch / (time.perf_counter() - t0))
        if progress:
            print(f"[bench] round {r + 1}/{rounds}: " + ", ".join(f"{s} {v[-1]:.0f}" for s, v in per.items()),
                  file=sys.stderr, flush=True)
    base = statistics.median(per[settings[0]])
    rows = []
    for s in settings:
        med = statistics.median(per[s])
        rows.append({"setting": s, "img_per_s": round(med, 1), "ratio": round(med / base, 2),
                     "rounds": [round(v, 1) for v in per[s]], "warmup_s": round(compile_s[s], 1)})
    return rows


def format_table(rows: list[dict], meta: dict) -> str:
    """The rows of :func:`bench_training` as a markdown table under a line saying what was measured where."""
    head = (f"small ViT (12 blocks, width {meta['embed_dim']}, 50 tokens) training images/s, batch {meta['batch']}, "
            f"{meta['torch_threads']} threads, {meta['cpu']}; load average before/after: "
            f"{meta['load_before']} / {meta['load_after']}")
    lines = [head, "",
             f"| setting | img/s | ratio vs {rows[0]['setting']} | warm-up s |", "|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['setting']} | {r['img_per_s']:.1f} | {r['ratio']:.2f}x | {r['warmup_s']:.1f} |")
    return "\n".join(lines)
