"""Numeric precision: the accepted dtypes and devices, autocast, and the choice of attention kernel.

One home for what every forward pass (evaluation, benchmarks, training, the split forward pass)
needs: ``fp32`` runs as is, ``bf16`` and ``fp16`` run under ``torch.autocast`` on the model's device.
On CPUs with AVX-512 BF16, bf16 autocast runs ViT inference about 2.6x faster than fp32, but the
fused ``scaled_dot_product_attention`` kernel is slow in bf16 training: :func:`set_eager_attention`
makes timm's ``Attention`` compute ``softmax(q k^T) v`` explicitly instead (README, training table).
:func:`attention_kernel` is the fixed rule that picks the kernel per device and dtype for timed
inference; :func:`native_bf16` says whether a device computes bf16 natively (else autocast emulates it);
:func:`check_device` refuses a device that is unknown or that this machine does not have;
:func:`resolve_dtype` turns a profile's ``auto`` into ``bf16`` where the device computes it natively, else ``fp32``.
"""
from __future__ import annotations

import contextlib
from typing import ContextManager, Literal, Optional

import torch
import torch.nn as nn

__all__ = ["DTYPES", "AUTO_DTYPE", "DEVICES", "check_dtype", "resolve_dtype", "check_device", "autocast",
           "set_eager_attention", "attention_kernel",
           "cpu_flags", "native_bf16"]

#: accepted names of a compute or storage precision, and the autocast dtype (None: no autocast)
DTYPES: dict[str, Optional[torch.dtype]] = {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}


def check_dtype(dtype: object, name: str = "dtype") -> str:
    """``dtype`` if it is one of :data:`DTYPES`, else a ValueError naming ``name`` and the accepted values."""
    if dtype not in DTYPES:
        raise ValueError(f"{name}: unknown {dtype!r}; accepted: {sorted(DTYPES)}")
    return dtype  # type: ignore[return-value]


#: a profile's precision that is chosen by the machine (:func:`resolve_dtype`)
AUTO_DTYPE = "auto"


def resolve_dtype(dtype: str, device_type: str = "cpu") -> str:
    """``dtype`` itself if it is one of :data:`DTYPES`; for :data:`AUTO_DTYPE`, ``bf16`` where ``device_type``
    computes bf16 natively (:func:`native_bf16`) and ``fp32`` where autocast would emulate it (on an AVX2-only CPU a
    DeiT-S forward and backward in emulated bf16 took 5x the fp32 time). The papers' recipes train in mixed
    precision on GPUs; where a profile says ``auto``, a CPU without bf16 units computes the same in fp32."""
    if dtype == AUTO_DTYPE:
        return "bf16" if native_bf16(device_type) else "fp32"
    return check_dtype(dtype)


#: the devices accepted by name: the CPU, or a CUDA GPU (``cuda``: the current one; ``cuda:N``: the N-th)
DEVICES: tuple[str, ...] = ("cpu", "cuda", "cuda:N")


def check_device(device: str, name: str = "device") -> str:
    """``device`` if it is one of :data:`DEVICES` and this machine has it (CUDA: torch finds a GPU, and the N-th for
    ``cuda:N``); else a ValueError naming ``name`` and the accepted values, or what this machine lacks."""
    kind, sep, index = device.partition(":")
    if kind not in ("cpu", "cuda") or (sep and not (kind == "cuda" and index.isdigit())):
        raise ValueError(f"{name}: unknown {device!r}; accepted: {', '.join(DEVICES)}")
    if kind == "cuda":
        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if count == 0:
            raise ValueError(f"{name}: {device!r} asks for CUDA, which torch {torch.__version__} does not find on this "
                             "machine; accepted here: cpu")
        if sep and int(index) >= count:
            raise ValueError(f"{name}: {device!r}, but this machine has {count} CUDA device(s); accepted here: cpu, "
                             f"cuda, cuda:0 to cuda:{count - 1}")
    return device


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


def attention_kernel(device_type: str, dtype: str, amx: Optional[bool] = None) -> Literal["fused", "explicit"]:
    """The attention kernel our timed models use, by a fixed rule (no autotuning): ``"explicit"``
    (``softmax(q k^T) v``, :func:`set_eager_attention`) for bf16 and fp16 on a CPU without AMX, ``"fused"``
    (timm's default, ``scaled_dot_product_attention``) otherwise. ``amx``: whether the CPU has AMX-BF16 (None:
    read from :func:`cpu_flags`).

    Measured (DeiT-S, 197 tokens, 2 threads, interleaved rounds, medians):

    * CPU with AMX (Sapphire Rapids Xeon, idle): in bf16 the explicit product runs at 0.93 / 0.96 / 0.93 / 0.78
      of the fused kernel's images/s at batches 1 / 8 / 32 / 64 unpruned (EViT keep 0.7: 0.96 / 1.00 / 0.92 /
      0.91): fused. In fp32, 0.98 at batch 1 (and below 0.9 at batches 8-64 in a run shared with another job).
    * CPU without AMX (AMD EPYC, bf16 1.5-1.9x faster than fp32): with the fused kernel our models were 2-10 %
      slower in bf16 at batches 8-64 than the official EViT code, which computes attention explicitly, and with
      the explicit product 1.01-1.03x as fast as it (batch 32): explicit. fp16 follows bf16 (untimed).
    * CUDA: timm's default, the fused kernel (flash / memory-efficient attention; untimed here).

    Both kernels compute the same function: an unpruned patched model with the rule's kernel equals timm within
    the dtype's rounding (``tests/unit/test_attention_kernel.py``)."""
    check_dtype(dtype)
    if device_type != "cpu" or dtype == "fp32":
        return "fused"
    if amx is None:
        amx = "amx_bf16" in cpu_flags()
    return "fused" if amx else "explicit"


def cpu_flags() -> frozenset[str]:
    """The CPU's feature flags (x86 ``flags`` / Arm ``Features`` of ``/proc/cpuinfo``); empty where unreadable."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("flags", "Features"):
                    return frozenset(value.split())
    except OSError:
        pass
    return frozenset()


#: CPU flags that mean native bf16 arithmetic, with the name printed for each
_BF16_FLAGS = (("amx_bf16", "AMX-BF16"), ("avx512_bf16", "AVX512-BF16"), ("bf16", "Arm BF16"))


def native_bf16(device_type: str = "cpu") -> Optional[str]:
    """The hardware feature that computes bf16 natively on ``device_type`` (e.g. ``"AMX-BF16"``), or None where
    bf16 autocast would be emulated in fp32 (several times slower than fp32 itself).

    CPU: the ``/proc/cpuinfo`` flags ``amx_bf16`` or ``avx512_bf16`` (Arm: ``bf16``), else torch's own probe
    (``torch.cpu._is_avx512_bf16_supported``, where it exists). ``torch.backends.cpu.get_cpu_capability()``
    alone cannot tell: it says ``AVX512`` on CPUs with and without the bf16 instructions. CUDA: compute
    capability 8.0 or above (Ampere), what ``torch.cuda.is_bf16_supported(including_emulation=False)`` checks."""
    if device_type == "cuda":
        if torch.cuda.is_available() and torch.cuda.get_device_capability()[0] >= 8:
            return f"CUDA compute capability {'.'.join(map(str, torch.cuda.get_device_capability()))}"
        return None
    if device_type != "cpu":
        return None
    flags = cpu_flags()
    for flag, name in _BF16_FLAGS:
        if flag in flags:
            return name
    probe = getattr(torch.cpu, "_is_avx512_bf16_supported", None)
    if not flags and probe is not None and probe():
        return "AVX512-BF16"
    return None
