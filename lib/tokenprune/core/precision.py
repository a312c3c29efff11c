"""Numeric precision: the accepted dtypes, autocast, and the choice of attention kernel.

One home for what every forward pass (evaluation, benchmarks, training, the split forward pass)
needs: ``fp32`` runs as is, ``bf16`` and ``fp16`` run under ``torch.autocast`` on the model's device.
On CPUs with AVX-512 BF16, bf16 autocast runs ViT inference about 2.6x faster than fp32, but the
fused ``scaled_dot_product_attention`` kernel is slow in bf16 training: :func:`set_eager_attention`
makes timm's ``Attention`` compute ``softmax(q k^T) v`` explicitly instead (README, training table).
"""
from __future__ import annotations

import contextlib
from typing import ContextManager, Optional

import torch
import torch.nn as nn

__all__ = ["DTYPES", "check_dtype", "autocast", "set_eager_attention"]

#: accepted names of a compute or storage precision, and the autocast dtype (None: no autocast)
DTYPES: dict[str, Optional[torch.dtype]] = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def check_dtype(dtype: object, name: str = "dtype") -> str:
    """``dtype`` if it is one of :data:`DTYPES`, else a ValueError naming ``name`` and the accepted values."""
    if dtype not in DTYPES:
        raise ValueError(f"{name}: unknown {dtype!r}; accepted: {sorted(DTYPES)}")
    return dtype  # type: ignore[return-value]


def autocast(dtype: str, device: torch.device | str = "cpu") -> ContextManager:
    """``torch.autocast`` to ``dtype`` (``bf16`` / ``fp16``) on ``device``; nothing for ``fp32``."""
    target = DTYPES[check_dtype(dtype)]
    if target is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=target)


def set_eager_attention(model: nn.Module, eager: bool = True) -> int:
    """Make timm ``Attention`` modules compute ``softmax(q k^T) v`` explicitly (``eager=True``) instead of
    calling ``scaled_dot_product_attention``. On this CPU the fused kernel's bf16 backward is slower
    than the explicit product for short sequences (``python -m tokenprune train-bench``). Returns the
    number of modules set."""
    n = 0
    for m in model.modules():
        if hasattr(m, "fused_attn"):
            m.fused_attn = not eager
            n += 1
    return n
