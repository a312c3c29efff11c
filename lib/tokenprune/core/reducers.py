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

from tokenprune.core.scorers import TokenContext, check_needs, descending_order

__all__ = [
    "Reduction",
    "ReducerSpec",
    "REDUCERS",
    "register_reducer",
    "get_reducer",
    "gather_tokens",
    "prefix_and_size",
    "Selection",
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
        """Prunable tokens this reducer outputs from ``n_tokens`` asked to keep ``n_keep``:
        see :func:`output_tokens`."""
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
        REDUCERS[name] = ReducerSpec(name, fn, frozenset(needs), adds_tokens, reference,  # type: ignore[arg-type]
                                     uses_scores, spec_cost, check)
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


def prefix_and_size(ctx: TokenContext) -> tuple[int, torch.Tensor]:
    """The number of prefix tokens and the sizes ``[B, N]`` of every token (ones when the context carries none)."""
    p = ctx.num_prefix_tokens
    b, n = ctx.x.shape[:2]
    size = ctx.size if ctx.size is not None else ctx.x.new_ones(b, n)
    return p, size


@dataclass(frozen=True)
class Selection:
    """The ``n_keep`` best-scored prunable tokens of a context and the index of the rest: what every selection
    reducer shares before it decides what becomes of the rest (:func:`keep_topk`).

    Attributes:
        keep_idx: ``[B, n_keep]`` indices (into the prunable tokens) of the kept tokens, by descending score.
        rest_idx: ``[B, N - n_keep]`` indices of the others, by descending score.
        kept_x: ``[B, n_keep, C]`` the kept tokens.
        kept_size: ``[B, n_keep]`` original patches each kept token stands for.
        kept_source: ``[B, n_keep, N0]`` which original tokens each kept token stands for (None when not traced).
        size: ``[B, N]`` the sizes of every input token, prefix included (ones when the context carries none).
        rest_x, rest_size, rest_source: the rest's tokens, sizes and sources in the order of ``rest_idx``, when
            :func:`keep_topk` was asked for them (``with_rest``), else None.
    """

    keep_idx: torch.Tensor
    rest_idx: torch.Tensor
    kept_x: torch.Tensor
    kept_size: torch.Tensor
    kept_source: Optional[torch.Tensor]
    size: torch.Tensor
    rest_x: Optional[torch.Tensor] = None
    rest_size: Optional[torch.Tensor] = None
    rest_source: Optional[torch.Tensor] = None


def keep_topk(ctx: TokenContext, scores: torch.Tensor, n_keep: int, *, with_rest: bool = False) -> Selection:
    """Keep the ``n_keep`` best-scored prunable tokens (ties to the lower index,
    :func:`tokenprune.core.scorers.select_topk`).

    With ``with_rest`` (a reducer that fuses the rest) the tokens, their sizes and sources are gathered once each, in
    descending-score order, and split into the kept and the rest: one gather per tensor instead of two, the same
    values."""
    p, size = prefix_and_size(ctx)
    order = descending_order(scores)   # select_topk's order: its first n_keep are kept
    keep_idx, rest_idx = order[:, :n_keep], order[:, n_keep:]
    idx = order if with_rest else keep_idx
    xs, sizes = gather_tokens(ctx.x[:, p:], idx), gather_tokens(size[:, p:], idx)
    sources = None if ctx.source is None else gather_tokens(ctx.source[:, p:], idx)
    rest = ({} if not with_rest else
            {"rest_x": xs[:, n_keep:], "rest_size": sizes[:, n_keep:],
             "rest_source": None if sources is None else sources[:, n_keep:]})
    return Selection(keep_idx=keep_idx, rest_idx=rest_idx, kept_x=xs[:, :n_keep], kept_size=sizes[:, :n_keep],
                     kept_source=None if sources is None else sources[:, :n_keep], size=size, **rest)


def _prefix_then_kept(ctx: TokenContext, selection: Selection, *, fused_x: Optional[torch.Tensor] = None,
                      fused_size: Optional[torch.Tensor] = None,
                      fused_source: Optional[torch.Tensor] = None) -> Reduction:
    """The reduction's tokens: the prefix, the kept tokens, then the fused token when one is given (``fused_x``
    ``[B, 1, C]``, ``fused_size`` ``[B, 1]``, ``fused_source`` ``[B, 1, N0]`` when traced)."""
    p = ctx.num_prefix_tokens
    fused = fused_x is not None
    x = torch.cat([ctx.x[:, :p], selection.kept_x] + ([fused_x] if fused else []), 1)
    size = torch.cat([selection.size[:, :p], selection.kept_size] + ([fused_size] if fused else []), 1)
    source = None
    if ctx.source is not None:
        source = torch.cat([ctx.source[:, :p], selection.kept_source] + ([fused_source] if fused else []), 1)
    return Reduction(x, size, source, selection.keep_idx)


def fuse_rest(ctx: TokenContext, selection: Selection, *, weights: torch.Tensor) -> Reduction:
    """The prefix, the kept tokens and one appended token: the sum of the rest weighted by ``weights``
    (``[B, N_rest]``, in the order of ``selection.rest_idx``), whose size and source are the rest's summed."""
    p, rest_idx = ctx.num_prefix_tokens, selection.rest_idx
    if selection.rest_x is not None:   # gathered with the kept tokens (keep_topk's with_rest)
        rest_x, rest_size, rest_source = selection.rest_x, selection.rest_size, selection.rest_source
    else:
        rest_x, rest_size = gather_tokens(ctx.x[:, p:], rest_idx), gather_tokens(selection.size[:, p:], rest_idx)
        rest_source = None if ctx.source is None else gather_tokens(ctx.source[:, p:], rest_idx)
    fused_x = torch.einsum("bn,bnc->bc", weights.to(rest_x.dtype), rest_x).unsqueeze(1)
    fused_size = rest_size.sum(dim=1, keepdim=True)
    fused_source = None if rest_source is None else rest_source.sum(dim=1, keepdim=True)
    return _prefix_then_kept(ctx, selection, fused_x=fused_x, fused_size=fused_size, fused_source=fused_source)


@register_reducer("drop", reference="EViT without inattentive-token fusion (Table 2, 'w/o fusion')")
def drop(ctx: TokenContext, scores: torch.Tensor, n_keep: int) -> Reduction:
    """Keep the prefix and the ``n_keep`` best-scored tokens; discard the rest."""
    return _prefix_then_kept(ctx, keep_topk(ctx, scores, n_keep))


def fuse_cost(n_tokens, n_kept, dim, head_dim, **_):
    """MACs of fusing the ``n_tokens - n_kept`` pruned tokens into one weighted sum (EViT, Eq. 8 fusion)."""
    return (n_tokens - n_kept) * dim  # the weighted sum of the pruned tokens

