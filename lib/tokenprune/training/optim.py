"""The optimiser's parameter groups and the learning-rate schedule of the training loop (per iteration: linear
warm-up, then cosine decay). The keep-rate schedule is the pruning core's
(:func:`tokenprune.core.schedule.keep_rate_at`).
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import torch.nn as nn

__all__ = ["lr_at", "param_groups"]


def lr_at(step: int, total: int, warmup: int, lr: float, min_lr: float = 0.0) -> float:
    """Learning rate at iteration ``step`` (0-based): linear warm-up over ``warmup`` iterations to
    ``lr`` (the first iteration already gets ``lr / warmup``), then a cosine decay to ``min_lr`` at
    iteration ``total``."""
    if warmup > 0 and step < warmup:
        return lr * (step + 1) / warmup
    t = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_lr + (lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * t))


def _no_decay_names(model: nn.Module) -> set:
    names = set()
    fn = getattr(model, "no_weight_decay", None)
    if callable(fn):
        names = set(fn())
    return names


def param_groups(model: nn.Module, weight_decay: float, trainable: Optional[Sequence[str]] = None) -> list[dict]:
    """AdamW groups: weight decay on matrices, none on biases, norms, position embedding and tokens.

    ``trainable``: parameter-name prefixes to train; every other parameter gets ``requires_grad=False``.
    """
    skip = _no_decay_names(model)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if trainable is not None:
            p.requires_grad_(any(name == t or name.startswith(t.rstrip(".") + ".") for t in trainable))
        if not p.requires_grad:
            continue
        (no_decay if p.ndim <= 1 or name in skip else decay).append(p)
    if not decay and not no_decay:
        raise ValueError(f"trainable={trainable!r} selects no parameter")
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
