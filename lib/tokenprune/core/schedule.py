"""Where and how much to reduce: locations, keep rates, token counts, EViT's keep-rate warm-up.

Conventions (EViT, youweiliang/evit evit.py):
- locations are block numbers counted from 1 as in the papers (EViT: 4, 7, 10 of 12), stored
  0-based inside the model (3, 6, 9);
- at a location with N tokens of which p are prefix tokens, ``ceil(keep_rate * (N - p))`` prunable
  tokens are kept, computed in floating point exactly as evit.py does (``math.ceil``);
- a fused token appended by an earlier location is an ordinary prunable token later;
- nothing happens when ``keep_rate == 1`` or when the count keeps every token.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Iterable, Sequence

import torch

__all__ = [
    "EVIT_LOCATIONS",
    "Schedule",
    "num_keep",
    "check_keep_rate",
    "as_real_scalar",
    "is_rate_sequence",
    "token_counts",
    "cosine_keep_rate",
    "keep_rate_at",
]

#: EViT's reorganisation locations, 1-based (blocks 4, 7 and 10 of a 12-block ViT)
EVIT_LOCATIONS: tuple[int, ...] = (4, 7, 10)


def as_real_scalar(value: object, name: str) -> float:
    """``value`` as a Python float if it is one real number: a Python int or float, a numpy scalar or 0-d array, or
    a 0-d real tensor; a TypeError naming ``name`` otherwise (bools and strings are refused)."""
    if isinstance(value, bool) or isinstance(value, (str, bytes)):
        raise TypeError(f"{name}: expected a real number, got {type(value).__name__} {value!r}")
    if isinstance(value, numbers.Real):
        return float(value)
    if hasattr(value, "ndim") and hasattr(value, "dtype") and getattr(value, "ndim") == 0:
        kind = getattr(value.dtype, "kind", None)  # numpy: 'f', 'i', 'u'; torch dtypes have is_floating_point
        is_real = (kind in ("f", "i", "u") if kind is not None
                   else not (value.dtype.is_complex or value.dtype == torch.bool))
        if is_real:
            return float(value.item())
    raise TypeError(f"{name}: expected a real number (Python, numpy scalar or 0-d tensor), got "
                    f"{type(value).__name__} {value!r}")


def check_keep_rate(keep_rate: object, name: str = "keep_rate") -> float:
    """Validate a keep rate: one real number in (0, 1] (Python, numpy or a 0-d tensor); returns it as a float."""
    rate = as_real_scalar(keep_rate, name)
    if not 0.0 < rate <= 1.0:  # NaN fails this too
        raise ValueError(f"{name}: must lie in (0, 1], got {keep_rate!r}")
    return rate


def is_rate_sequence(keep_rate: object) -> bool:
    """Whether ``keep_rate`` is one keep rate per location (a list or tuple) rather than one for all."""
    return isinstance(keep_rate, (list, tuple))


def num_keep(num_prunable: int, keep_rate: float) -> int:
    """Prunable tokens kept at a location: ``ceil(keep_rate * num_prunable)`` (evit.py), at least 1."""
    return max(1, math.ceil(keep_rate * num_prunable))


@dataclass(frozen=True)
class Schedule:
    """Reduction locations (0-based block indices) and the keep rate at each."""

    keep_rates: dict[int, float]

    @classmethod
    def build(cls, depth: int, keep_rate: float | Sequence[float],
              locations: Iterable[int] = EVIT_LOCATIONS) -> "Schedule":
        """From 1-based ``locations`` and one keep rate, or one keep rate per location."""
        if isinstance(locations, (int, str)) or locations is None:
            raise TypeError(f"locations: expected a sequence of block numbers in 1..{depth}, got {locations!r}")
        locs = list(locations)
        if not locs:
            raise ValueError(f"locations: expected at least one block number in 1..{depth} (to prune nothing, "
                             "use keep_rate=1.0)")
        for loc in locs:
            if isinstance(loc, bool) or not isinstance(loc, int) or not 1 <= loc <= depth:
                raise ValueError(f"locations: block numbers count from 1 and must lie in 1..{depth} for this "
                                 f"{depth}-block model, got {loc!r}")
        if len(set(locs)) != len(locs):
            raise ValueError(f"locations: duplicates in {locs}")
        if is_rate_sequence(keep_rate):
            if len(keep_rate) != len(locs):
                raise ValueError(f"keep_rate: got {len(keep_rate)} rates for {len(locs)} locations {locs}")
            rates = [check_keep_rate(r) for r in keep_rate]
        else:
            rates = [check_keep_rate(keep_rate)] * len(locs)
        return cls({loc - 1: r for loc, r in sorted(zip(locs, rates))})

    def at(self, block_index: int) -> float:
        """Keep rate at a 0-based block (1.0 where nothing happens)."""
        return self.keep_rates.get(block_index, 1.0)

    @property
    def locations(self) -> tuple[int, ...]:
        """1-based block numbers."""
        return tuple(i + 1 for i in sorted(self.keep_rates))


def token_counts(num_patches: int, depth: int, schedule: Schedule, num_prefix_tokens: int = 1,
                 adds_tokens: int = 1) -> list[int]:
    """Tokens entering each block's MLP (i.e. after that block's reduction), prefix tokens included.

    ``adds_tokens`` is what the reducer appends (EViT fusion: 1; drop: 0). The count entering block
    ``i``'s attention is the previous block's entry (``num_patches + prefix`` for block 0).
    DeiT-S, keep 0.7 at 4/7/10: patches 196 -> 139 -> 99 -> 71 with fusion, 196 -> 138 -> 97 -> 68 without.
    """
    n = num_patches
    out = []
    for i in range(depth):
        r = schedule.at(i)
        if r < 1.0:
            k = num_keep(n, r)
            if k < n:
                n = k + adds_tokens
        out.append(n + num_prefix_tokens)
    return out


def cosine_keep_rate(step: float, target: float, start: float = 0.0, length: float = 1.0) -> float:
    """EViT's keep-rate warm-up (evit main.py ``adjust_keep_rate``): 1 before ``start``, then
    ``target + (1 - target) * (cos(pi * (step - start) / length) + 1) / 2`` down to ``target`` at
    ``start + length``, and ``target`` after. ``step``, ``start`` and ``length`` share a unit
    (epochs or iterations). EViT from scratch: start 10 epochs; fine-tuning: start 0."""
    check_keep_rate(target, "target")
    if length <= 0:
        raise ValueError(f"length: must be > 0, got {length!r}")
    if step < start:
        return 1.0
    if step >= start + length:
        return float(target)
    t = (step - start) / length
    return float(target + (1.0 - target) * (math.cos(math.pi * t) + 1.0) / 2.0)


def keep_rate_at(epoch: float, target: float, start: float = 0.0, length: float = 0.0) -> float:
    """The keep rate of EViT's training schedule at (fractional) ``epoch``: 1 for an unpruned ``target`` (>= 1);
    otherwise 1 before ``start``, then the cosine warm-up of :func:`cosine_keep_rate` over ``length`` epochs down to
    ``target``, or, with ``length == 0`` (EViT's fine-tuning: ``--shrink_start_epoch 0 --shrink_epochs 0``), the
    target from ``start`` on. Every model the project trains with pruning follows it."""
    if target >= 1.0:
        return 1.0
    if length <= 0:
        return float(target) if epoch >= start else 1.0
    return cosine_keep_rate(epoch, target, start, length)
