"""What a patched model and its blocks share (:class:`PruneState`: where and how much to reduce, the scorer, the
reducer, the options) and what one forward pass did (:class:`PruneRecord`: tokens leaving each block, the traces,
the final sizes and sources). ToMe keeps ``model._tome_info`` likewise (tome/patch/timm.py)."""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Optional

import torch

from tokenprune.core.reducers import ReducerSpec
from tokenprune.core.schedule import Schedule, num_keep
from tokenprune.core.scorers import ScorerSpec, TokenContext

__all__ = ["PruneRecord", "PruneState"]


@dataclass
class PruneRecord:
    """What one forward pass did: tokens leaving each block, per-location traces, the final sizes and sources.

    Each call builds its own record, so concurrent calls and gradient checkpointing's recomputation never mix
    their bookkeeping; the model keeps the record of the last call that finished (``PruneState.last``).
    """

    token_counts: list = field(default_factory=list)
    history: list = field(default_factory=list)
    size: Optional[torch.Tensor] = None
    source: Optional[torch.Tensor] = None


@dataclass
class PruneState:
    """The configuration a patched model and its blocks share (ToMe keeps ``model._tome_info`` likewise).

    Configuration: ``schedule`` (where, how much), ``keep_rate`` (the knob as it was given), ``scorer``,
    ``reducer``, ``num_prefix_tokens``, ``trace`` (keep per-location sources/indices for coverage and figures),
    ``prop_attn`` (ToMe's proportional attention, ``attn + log(size)``), ``extras`` (e.g. a random generator).
    Nothing of a forward pass lives here: each call carries its own sizes, sources and random-generator state
    from block to block (:func:`run_blocks`) and leaves a :class:`PruneRecord`; ``size``, ``source``,
    ``history`` and ``token_counts`` read the last finished call's.
    """

    schedule: Schedule
    scorer: ScorerSpec
    reducer: ReducerSpec
    num_prefix_tokens: int
    depth: int
    trace: bool = False
    prop_attn: bool = False
    extras: dict = field(default_factory=dict)
    keep_rate: float | list | tuple = 1.0
    family: str = "vit"
    has_class_token: bool = True
    last: Optional[PruneRecord] = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __getstate__(self) -> dict:
        # a lock does not pickle and a saved model carries no call's bookkeeping
        return {k: v for k, v in self.__dict__.items() if k not in ("lock", "last")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("keep_rate", 1.0)
        self.__dict__.setdefault("family", "vit")
        self.__dict__.setdefault("has_class_token", True)
        self.last = None
        self.lock = threading.Lock()

    @property
    def needs(self) -> frozenset:
        if not self.reducer.uses_scores:
            return self.reducer.needs
        return self.scorer.needs | self.reducer.needs

    @property
    def token_counts(self) -> list:
        """Tokens leaving each block ([CLS] and other prefix tokens included) in the last finished forward pass."""
        return [] if self.last is None else self.last.token_counts

    @property
    def history(self) -> list:
        """Per-location traces of the last finished forward pass (with ``trace=True``)."""
        return [] if self.last is None else self.last.history

    @property
    def size(self) -> Optional[torch.Tensor]:
        return None if self.last is None else self.last.size

    @property
    def source(self) -> Optional[torch.Tensor]:
        return None if self.last is None else self.last.source

    @property
    def prunes(self) -> bool:
        """Whether a forward pass changes anything timm computes (a location below keep 1, or ToMe's bias)."""
        return any(r < 1.0 for r in self.schedule.keep_rates.values())

    def reduces_at(self, block_index: int, num_tokens: int) -> Optional[int]:
        """Prunable tokens to keep at this block, or None when nothing is reduced (evit.py's early return)."""
        r = self.schedule.at(block_index)
        if r >= 1.0:
            return None
        n = num_tokens - self.num_prefix_tokens
        k = num_keep(n, r)
        return k if k < n else None

    def scores(self, ctx: TokenContext) -> torch.Tensor:
        """The scorer's output, checked to hold one score per prunable token: ``[B, N - num_prefix_tokens]``."""
        scores = self.scorer(ctx)
        want = (ctx.x.shape[0], ctx.num_prunable)
        if not isinstance(scores, torch.Tensor) or tuple(scores.shape) != want:
            got = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
            raise ValueError(f"scorer {self.scorer.name!r}: returned scores of shape {got}; expected one score per "
                             f"prunable token, [B, N - num_prefix_tokens] = {list(want)} ({self.num_prefix_tokens} "
                             "prefix tokens are never scored)")
        return scores
