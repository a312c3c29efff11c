"""Token importance scorers: pure functions ``score(ctx) -> Tensor[B, N - p]``.

Every scorer receives a :class:`TokenContext` built by the pruning block and returns one score
per prunable token (the tokens after the ``p = num_prefix_tokens`` prefix tokens: [CLS], and a
distillation token or registers where the model has them). Higher means "keep".

A scorer declares what it needs (``needs``) so the block computes only that: the [CLS] attention
row costs O(N d) per head, the full N x N attention map costs O(N^2 d) and is materialised only
for scorers that ask for it (``tokens_to_tokens``).

Selection is made by :func:`select_topk` in the order of a stable descending sort, so ties go to the lower token
index (this matters for ``attention_variance_eq6``, which scores every token 0); while a model is exported to ONNX,
which has no stable sort, :func:`descending_order` builds the same order from ``torch.topk``
(:func:`topk_descending_order`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, FrozenSet, Optional

import torch

__all__ = [
    "TokenContext",
    "ScorerSpec",
    "SCORERS",
    "register_scorer",
    "get_scorer",
    "scorer_names",
    "descending_order",
    "topk_descending_order",
    "select_topk",
    "check_needs",
    "require_field",
    "random_scores",
]

#: what a block can expose to a scorer or reducer
NEEDS = frozenset({"cls_attn", "attn", "keys"})


@dataclass
class TokenContext:
    """What a pruning block exposes at a reduction location.

    Attributes:
        x: the residual stream after the attention residual, before the MLP, ``[B, N, C]``.
        num_prefix_tokens: tokens at the front that are never pruned ([CLS], dist token, registers).
        block_index: 0-based index of the block.
        cls_attn: softmax attention row of the first prefix token ([CLS]) per head, over all N keys,
            ``[B, H, N]`` (only when a scorer or reducer needs ``cls_attn``).
        attn: full softmax attention map ``[B, H, N, N]`` (only when needed).
        keys: keys per head ``[B, H, N, d]`` after q/k norm (only when needed).
        size: how many original patches each token stands for, ``[B, N]`` (None until a merge).
        source: which original tokens each token stands for, ``[B, N, N0]`` (when tracing).
        extras: per-model state a scorer may use (random generator, learned predictor, ...).
    """

    x: torch.Tensor
    num_prefix_tokens: int
    block_index: int
    cls_attn: Optional[torch.Tensor] = None
    attn: Optional[torch.Tensor] = None
    keys: Optional[torch.Tensor] = None
    size: Optional[torch.Tensor] = None
    source: Optional[torch.Tensor] = None
    extras: dict = field(default_factory=dict)

    @property
    def num_prunable(self) -> int:
        return self.x.shape[1] - self.num_prefix_tokens


ScoreFn = Callable[[TokenContext], torch.Tensor]


@dataclass(frozen=True)
class ScorerSpec:
    """A registered scorer: its function, what it needs from the block, and a one-line reference."""

    name: str
    fn: ScoreFn
    needs: FrozenSet[str]
    reference: str

    def __call__(self, ctx: TokenContext) -> torch.Tensor:
        return self.fn(ctx)

    def __reduce__(self):
        # the negated form of get_scorer("inverse:<name>") is a closure: rebuild it by name (pickle, deepcopy)
        if self.name.startswith("inverse:"):
            return (get_scorer, (self.name,))
        return super().__reduce__()


SCORERS: dict[str, ScorerSpec] = {}


def check_needs(needs: tuple[str, ...]) -> None:
    """What a scorer or reducer asks of the block must be a subset of :data:`NEEDS`."""
    unknown = set(needs) - NEEDS
    if unknown:
        raise ValueError(f"needs: unknown entries {sorted(unknown)}; accepted: {sorted(NEEDS)}")


def register_scorer(name: str, needs: tuple[str, ...] = (), reference: str = ""):
    """Register ``fn`` as scorer ``name``; ``needs`` is a subset of ``{"cls_attn", "attn", "keys"}``."""
    check_needs(needs)

    def deco(fn: ScoreFn) -> ScoreFn:
        if name in SCORERS:
            raise ValueError(f"scorer {name!r} is already registered")
        SCORERS[name] = ScorerSpec(name, fn, frozenset(needs), reference)
        return fn

    return deco


def scorer_names() -> list[str]:
    """Registered scorer names, plus the ``inverse:<name>`` form accepted by :func:`get_scorer`."""
    return sorted(SCORERS) + ["inverse:<name>"]


def get_scorer(name: str | ScorerSpec) -> ScorerSpec:
    """Look a scorer up by name. ``inverse:<name>`` negates a scorer (EViT's min-k selection, Table 15)."""
    if isinstance(name, ScorerSpec):
        return name
    if not isinstance(name, str):
        raise TypeError(f"scorer: expected a name (str), got {type(name).__name__}; accepted: {scorer_names()}")
    if name.startswith("inverse:"):
        base = get_scorer(name[len("inverse:"):])
        return ScorerSpec(name, lambda ctx, f=base.fn: -f(ctx), base.needs, f"negated {base.name}")
    if name not in SCORERS:
        raise ValueError(f"scorer: unknown name {name!r}; accepted: {scorer_names()}")
    return SCORERS[name]


def descending_order(scores: torch.Tensor) -> torch.Tensor:
    """Indices that order ``scores`` (``[..., N]``) by descending value along the last dimension, ties to the lower
    index: ``torch.sort(scores, dim=-1, descending=True, stable=True).indices``, one kernel, in eager runs and under
    ``torch.compile``; while exporting to ONNX, whose exporters translate no stable sort, the same indices from
    :func:`topk_descending_order` (about ten more kernels per ranking, which batch-1 runs would pay)."""
    if torch.onnx.is_in_onnx_export():
        return topk_descending_order(scores)
    return torch.sort(scores, dim=-1, descending=True, stable=True).indices


def topk_descending_order(scores: torch.Tensor) -> torch.Tensor:
    """The indices of :func:`descending_order` from ops that export to ONNX: the same as ``torch.sort(scores, dim=-1,
    descending=True, stable=True).indices`` on every input (NaN first, as the sort puts it; -0.0 ties with 0.0).

    ``torch.topk`` orders the values, with ties in whatever order its kernel gives; ``run`` counts the distinct
    values before each position, so ``run * N + index`` is a distinct integer per token whose ascending order
    is (descending value, ascending index), and a second ``torch.topk`` on it has no ties to break.
    """
    n = scores.shape[-1]
    values, index = torch.topk(scores, n, dim=-1)
    before, after = values[..., :-1], values[..., 1:]
    starts = (after < before) | (before.isnan() & ~after.isnan())  # a new run of equal values begins
    run = torch.cat([torch.zeros_like(index[..., :1]), starts.long().cumsum(-1)], -1)
    key = torch.topk(run * n + index, n, dim=-1, largest=False).values
    return key - run * n


def select_topk(scores: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices of the ``k`` highest scores and of the rest, each ordered by descending score.

    Ties go to the lower token index (a stable sort's order, :func:`descending_order`), so a constant score
    keeps the first ``k`` tokens in raster order. Returns ``(keep_idx [B, k], rest_idx [B, N - k])``.
    """
    order = descending_order(scores)
    return order[:, :k], order[:, k:]


def require_field(ctx: TokenContext, attr: str, scorer: str) -> torch.Tensor:
    value = getattr(ctx, attr)
    if value is None:
        raise RuntimeError(f"scorer {scorer!r} needs ctx.{attr}, which the block did not compute")
    return value


@register_scorer("random", reference="EViT Table 15 baseline: uniform random selection")
def random_scores(ctx: TokenContext) -> torch.Tensor:
    """Uniform random scores; reproducible through ``ctx.extras['generator']`` when the model has one."""
    gen = ctx.extras.get("generator")
    x = ctx.x
    return torch.rand(x.shape[0], ctx.num_prunable, generator=gen, device="cpu" if gen is not None else x.device,
                      dtype=torch.float32).to(x.device)
