"""Token reducers: what happens to the tokens once a scorer has ranked them.

A reducer is a pure function ``reduce(ctx, scores, n_keep, **options) -> Reduction``. It keeps the
prefix tokens ([CLS] etc.) untouched and in front, keeps ``n_keep`` prunable tokens chosen by
``scores`` (highest first, ties to the lower index), and decides what becomes of the rest.
Every reducer also carries the bookkeeping that later analysis needs: ``size`` (how many original
patches a token stands for) and ``source`` (which original patches, ``[B, N, N0]``), so coverage
metrics and visualisations work for merged tokens too.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from functools import lru_cache, partial
from typing import Callable, FrozenSet, Optional

import torch

from tokenprune.core.scorers import TokenContext, check_needs, select_topk

__all__ = [
    "Reduction",
    "ReducerSpec",
    "REDUCERS",
    "register_reducer",
    "get_reducer",
    "gather_tokens",
    "prefix_and_size",
    "keep_topk",
    "fuse_rest",
    "fuse_cost",
    "drop",
    "output_tokens",
]


@dataclass
class Reduction:
    """Tokens after a reduction, with their bookkeeping.

    Attributes:
        x: ``[B, N', C]`` tokens: prefix first, then kept tokens (descending score), then any fused token.
        size: ``[B, N']`` original patches each token stands for.
        source: ``[B, N', N0]`` which original tokens each token stands for (None when not traced).
        keep_idx: ``[B, n_keep]`` indices (into the prunable tokens of the input) that were kept.
    """

    x: torch.Tensor
    size: torch.Tensor
    source: Optional[torch.Tensor]
    keep_idx: torch.Tensor


ReduceFn = Callable[..., Reduction]


def no_cost(n_tokens: int, n_kept: int, dim: int, head_dim: int, **_) -> int:
    """The own MACs of a reducer that only selects (``drop``): none. A module-level function, not a lambda,
    so that a patched model pickles (``torch.save(model)``)."""
    return 0


@dataclass(frozen=True)
class ReducerSpec:
    """A registered reducer with its options bound."""

    name: str
    fn: ReduceFn
    needs: FrozenSet[str]
    adds_tokens: int
    reference: str
    uses_scores: bool = True
    cost: Callable[..., int] = no_cost
    check: Optional[Callable[..., None]] = None

    def __call__(self, ctx: TokenContext, scores: torch.Tensor, n_keep: int) -> Reduction:
        return self.fn(ctx, scores, n_keep)

    def output_tokens(self, n_tokens: int, n_keep: int) -> int:
        """Prunable tokens this reducer outputs from ``n_tokens`` asked to keep ``n_keep``: see :func:`output_tokens`."""
        return output_tokens(self, n_tokens, n_keep)


REDUCERS: dict[str, ReducerSpec] = {}


def register_reducer(name: str, needs: tuple[str, ...] = (), adds_tokens: int | Callable[..., int] = 0,
                     reference: str = "", uses_scores: bool = True, cost: Optional[Callable[..., int]] = None,
                     check: Optional[Callable[..., None]] = None):
    """Register a reducer.

    ``adds_tokens`` is how many tokens it appends beyond the ``n_keep`` kept ones (EViT's fused token: 1),
    or a function of the reducer's options that says so (BAT: the number of clusters). ``uses_scores``
    is False for reducers that rank tokens themselves (ToMe's bipartite matching). ``cost(n_tokens, n_kept, dim,
    head_dim, **options)`` gives the reducer's own multiply-accumulates for ``n_tokens`` prunable tokens of
    width ``dim`` of which ``n_kept`` are kept (distances, weighted sums), which the papers' MAC columns leave out.
    ``check(**options)`` raises ValueError for options the reducer cannot run with; :func:`get_reducer` calls it
    when the options are bound (at ``patch()`` time), not at the first forward pass.
    """
    check_needs(needs)

    def deco(fn: ReduceFn) -> ReduceFn:
        if name in REDUCERS:
            raise ValueError(f"reducer {name!r} is already registered")
        spec_cost = cost or no_cost
        REDUCERS[name] = ReducerSpec(name, fn, frozenset(needs), adds_tokens, reference, uses_scores,  # type: ignore[arg-type]
                                     spec_cost, check)
        return fn

    return deco


def get_reducer(name: str | ReducerSpec, **options) -> ReducerSpec:
    """Look a reducer up by name and bind its options (e.g. ``get_reducer("fuse_softmax", temperature=0.5)``)."""
    if isinstance(name, ReducerSpec):
        if options:
            raise ValueError("reducer_options: cannot bind options to an already-built ReducerSpec")
        return name
    if not isinstance(name, str) or name not in REDUCERS:
        raise ValueError(f"reducer: unknown name {name!r}; accepted: {sorted(REDUCERS)}")
    spec = REDUCERS[name]
    accepted = [p for p in inspect.signature(spec.fn).parameters if p not in ("ctx", "scores", "n_keep")]
    unknown = set(options) - set(accepted)
    if unknown:
        raise ValueError(f"reducer_options: {sorted(unknown)} not accepted by reducer {name!r}; accepted: {accepted}")
    fn = partial(spec.fn, **options) if options else spec.fn
    defaults = {p.name: p.default for p in inspect.signature(spec.fn).parameters.values()
                if p.default is not inspect.Parameter.empty}
    bound = {**defaults, **options}
    if spec.check is not None:
        spec.check(**bound)
    adds = spec.adds_tokens(**bound) if callable(spec.adds_tokens) else spec.adds_tokens
    cost = partial(spec.cost, **bound) if bound else spec.cost
    return ReducerSpec(spec.name, fn, spec.needs, adds, spec.reference, spec.uses_scores, cost, spec.check)


#: widths of the probe that :func:`output_tokens` runs a reducer on (token counts do not depend on them)
_PROBE_HEADS, _PROBE_HEAD_DIM = 2, 4


@lru_cache(maxsize=4096)
def output_tokens(spec: ReducerSpec, n_tokens: int, n_keep: int) -> int:
    """Prunable tokens ``spec`` outputs from ``n_tokens`` prunable tokens asked to keep ``n_keep`` (its own
    count: kept tokens plus whatever it appends or merges into, e.g. ``min(num_clusters, n_tokens - n_keep)``
    clusters).

    Read off the reducer's output on a probe (one image, one prefix token, ``n_tokens`` random tokens of
    width 8, random scores and attention), not from a formula kept beside the reducer, so the MAC count
    (:func:`tokenprune.measure.macs.analytic_macs`) follows whatever the reducer does, including when it is
    rewritten. Deterministic and cached; token counts do not depend on the values.
    """
    if not 1 <= n_keep <= n_tokens:
        raise ValueError(f"n_keep: expected 1..{n_tokens} (n_tokens), got {n_keep!r}")
    g = torch.Generator().manual_seed(0)
    h, hd, n = _PROBE_HEADS, _PROBE_HEAD_DIM, n_tokens + 1
    x = torch.randn(1, n, h * hd, generator=g)
    ctx = TokenContext(x=x, num_prefix_tokens=1, block_index=0,
                       cls_attn=torch.randn(1, h, n, generator=g).softmax(-1),
                       attn=torch.randn(1, h, n, n, generator=g).softmax(-1) if "attn" in spec.needs else None,
                       keys=torch.randn(1, h, n, hd, generator=g))
    scores = torch.rand(1, n_tokens, generator=g) if spec.uses_scores else None
    with torch.inference_mode():
        out = spec(ctx, scores, n_keep)
    return out.x.shape[1] - 1


def gather_tokens(t: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``t[b, idx[b]]`` for ``t`` of shape ``[B, N, *rest]`` and ``idx`` of shape ``[B, K]``."""
    view = idx.reshape(idx.shape + (1,) * (t.dim() - 2))
    return torch.gather(t, 1, view.expand(idx.shape + t.shape[2:]))


def prefix_and_size(ctx: TokenContext):
    p = ctx.num_prefix_tokens
    b, n = ctx.x.shape[:2]
    size = ctx.size if ctx.size is not None else ctx.x.new_ones(b, n)
    return p, size


def keep_topk(ctx: TokenContext, scores: torch.Tensor, n_keep: int):
    """Shared part of every selection reducer: prefix + the kept tokens, and the index of the rest."""
    p, size = prefix_and_size(ctx)
    keep_idx, rest_idx = select_topk(scores, n_keep)
    parts_x = [ctx.x[:, :p], gather_tokens(ctx.x[:, p:], keep_idx)]
    parts_size = [size[:, :p], gather_tokens(size[:, p:], keep_idx)]
    parts_src = None
    if ctx.source is not None:
        parts_src = [ctx.source[:, :p], gather_tokens(ctx.source[:, p:], keep_idx)]
    return keep_idx, rest_idx, parts_x, parts_size, parts_src, size


def fuse_rest(ctx, keep_idx, rest_idx, parts_x, parts_size, parts_src, size, weights: torch.Tensor) -> Reduction:
    """Append one token: the sum of the rest weighted by ``weights`` ([B, N_rest]), with summed bookkeeping."""
    p = ctx.num_prefix_tokens
    rest_x = gather_tokens(ctx.x[:, p:], rest_idx)
    parts_x.append(torch.einsum("bn,bnc->bc", weights.to(rest_x.dtype), rest_x).unsqueeze(1))
    parts_size.append(gather_tokens(size[:, p:], rest_idx).sum(dim=1, keepdim=True))
    if parts_src is not None:
        parts_src.append(gather_tokens(ctx.source[:, p:], rest_idx).sum(dim=1, keepdim=True))
    return Reduction(torch.cat(parts_x, 1), torch.cat(parts_size, 1),
                     None if parts_src is None else torch.cat(parts_src, 1), keep_idx)


@register_reducer("drop", reference="EViT without inattentive-token fusion (Table 2, 'w/o fusion')")
def drop(ctx: TokenContext, scores: torch.Tensor, n_keep: int) -> Reduction:
    """Keep the prefix and the ``n_keep`` best-scored tokens; discard the rest."""
    keep_idx, _, parts_x, parts_size, parts_src, _ = keep_topk(ctx, scores, n_keep)
    return Reduction(torch.cat(parts_x, 1), torch.cat(parts_size, 1),
                     None if parts_src is None else torch.cat(parts_src, 1), keep_idx)


def fuse_cost(n_tokens, n_kept, dim, head_dim, **_):
    """MACs of fusing the ``n_tokens - n_kept`` pruned tokens into one weighted sum (EViT, Eq. 8 fusion)."""
    return (n_tokens - n_kept) * dim  # the weighted sum of the pruned tokens

