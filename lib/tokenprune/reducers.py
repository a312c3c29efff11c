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
from functools import partial
from typing import Callable, FrozenSet, Optional

import torch

from .scorers import NEEDS, TokenContext, select_topk

__all__ = [
    "Reduction",
    "ReducerSpec",
    "REDUCERS",
    "register_reducer",
    "get_reducer",
    "gather_tokens",
    "drop",
    "fuse_attention",
    "fuse_softmax",
    "dpc_knn",
    "merge_dpcknn",
    "cluster_all",
    "bipartite",
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


@dataclass(frozen=True)
class ReducerSpec:
    """A registered reducer with its options bound."""

    name: str
    fn: ReduceFn
    needs: FrozenSet[str]
    adds_tokens: int
    reference: str
    uses_scores: bool = True
    cost: Callable[..., int] = lambda n_tokens, n_kept, dim, head_dim: 0

    def __call__(self, ctx: TokenContext, scores: torch.Tensor, n_keep: int) -> Reduction:
        return self.fn(ctx, scores, n_keep)


REDUCERS: dict[str, ReducerSpec] = {}


def register_reducer(name: str, needs: tuple[str, ...] = (), adds_tokens: int | Callable[..., int] = 0,
                     reference: str = "", uses_scores: bool = True, cost: Optional[Callable[..., int]] = None):
    """Register a reducer.

    ``adds_tokens`` is how many tokens it appends beyond the ``n_keep`` kept ones (EViT's fused token: 1),
    or a function of the reducer's options that says so (BAT: the number of clusters). ``uses_scores``
    is False for reducers that rank tokens themselves (ToMe's bipartite matching). ``cost(n_tokens, n_kept, dim,
    head_dim, **options)`` gives the reducer's own multiply-accumulates for ``n_tokens`` prunable tokens of
    width ``dim`` of which ``n_kept`` are kept (distances, weighted sums), which the papers' MAC columns leave out.
    """
    unknown = set(needs) - NEEDS
    if unknown:
        raise ValueError(f"needs: unknown entries {sorted(unknown)}; accepted: {sorted(NEEDS)}")

    def deco(fn: ReduceFn) -> ReduceFn:
        if name in REDUCERS:
            raise ValueError(f"reducer {name!r} is already registered")
        spec_cost = cost or (lambda n_tokens, n_kept, dim, head_dim, **_: 0)
        REDUCERS[name] = ReducerSpec(name, fn, frozenset(needs), adds_tokens, reference, uses_scores,  # type: ignore[arg-type]
                                     spec_cost)
        return fn

    return deco


def get_reducer(name: str | ReducerSpec, **options) -> ReducerSpec:
    """Look a reducer up by name and bind its options (e.g. ``get_reducer("fuse_softmax", temperature=0.5)``)."""
    if isinstance(name, ReducerSpec):
        if options:
            raise ValueError("reducer_options: cannot bind options to an already-built ReducerSpec")
        return name
    if isinstance(name, str) and name not in REDUCERS:
        from .scorers import load_plugins

        load_plugins()
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
    adds = spec.adds_tokens(**bound) if callable(spec.adds_tokens) else spec.adds_tokens
    cost = partial(spec.cost, **bound) if bound else spec.cost
    return ReducerSpec(spec.name, fn, spec.needs, adds, spec.reference, spec.uses_scores, cost)


def gather_tokens(t: torch.Tensor, idx: torch.Tensor) -> torch.Tensor:
    """``t[b, idx[b]]`` for ``t`` of shape ``[B, N, *rest]`` and ``idx`` of shape ``[B, K]``."""
    view = idx.reshape(idx.shape + (1,) * (t.dim() - 2))
    return torch.gather(t, 1, view.expand(idx.shape + t.shape[2:]))


def _split(ctx: TokenContext):
    p = ctx.num_prefix_tokens
    b, n = ctx.x.shape[:2]
    size = ctx.size if ctx.size is not None else ctx.x.new_ones(b, n)
    return p, size


def _keep(ctx: TokenContext, scores: torch.Tensor, n_keep: int):
    """Shared part of every selection reducer: prefix + the kept tokens, and the index of the rest."""
    p, size = _split(ctx)
    keep_idx, rest_idx = select_topk(scores, n_keep)
    parts_x = [ctx.x[:, :p], gather_tokens(ctx.x[:, p:], keep_idx)]
    parts_size = [size[:, :p], gather_tokens(size[:, p:], keep_idx)]
    parts_src = None
    if ctx.source is not None:
        parts_src = [ctx.source[:, :p], gather_tokens(ctx.source[:, p:], keep_idx)]
    return keep_idx, rest_idx, parts_x, parts_size, parts_src, size


def _fuse(ctx, keep_idx, rest_idx, parts_x, parts_size, parts_src, size, weights: torch.Tensor) -> Reduction:
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
    keep_idx, _, parts_x, parts_size, parts_src, _ = _keep(ctx, scores, n_keep)
    return Reduction(torch.cat(parts_x, 1), torch.cat(parts_size, 1),
                     None if parts_src is None else torch.cat(parts_src, 1), keep_idx)


def _fuse_cost(n_tokens, n_kept, dim, head_dim, **_):
    return (n_tokens - n_kept) * dim  # the weighted sum of the pruned tokens


@register_reducer("fuse_attention", needs=("cls_attn",), adds_tokens=1, cost=_fuse_cost,
                  reference="EViT Sec. 3.2 / evit.py: x_fused = sum_i a_i x_i over inattentive tokens, raw [CLS] attention")
def fuse_attention(ctx: TokenContext, scores: torch.Tensor, n_keep: int) -> Reduction:
    """EViT's inattentive-token fusion: keep the top ``n_keep`` and append one token equal to the sum of
    the others weighted by their head-mean [CLS] attention (the raw softmax weights, not renormalised),
    as the official evit.py does. The fused token is appended last and is an ordinary token later."""
    keep_idx, rest_idx, parts_x, parts_size, parts_src, size = _keep(ctx, scores, n_keep)
    cls_attn = ctx.cls_attn[:, :, ctx.num_prefix_tokens:].mean(dim=1)
    return _fuse(ctx, keep_idx, rest_idx, parts_x, parts_size, parts_src, size, gather_tokens(cls_attn, rest_idx))


@register_reducer("fuse_softmax", adds_tokens=1, cost=_fuse_cost,
                  reference="Igaue & Aizawa, arXiv 2507.19175, Eq. 8: pruned tokens fused with softmax(score / T)")
def fuse_softmax(ctx: TokenContext, scores: torch.Tensor, n_keep: int, temperature: float = 1.0) -> Reduction:
    """Keep the top ``n_keep`` and append one token: the pruned tokens averaged with weights
    ``softmax(s_i / T)`` over the pruned set (Eq. 8). ``T -> 0`` keeps only the best pruned token,
    ``T -> inf`` gives the plain mean."""
    if not isinstance(temperature, (int, float)) or not temperature > 0:
        raise ValueError(f"temperature: must be a number > 0, got {temperature!r}")
    keep_idx, rest_idx, parts_x, parts_size, parts_src, size = _keep(ctx, scores, n_keep)
    w = torch.softmax(gather_tokens(scores, rest_idx).float() / temperature, dim=1)
    return _fuse(ctx, keep_idx, rest_idx, parts_x, parts_size, parts_src, size, w)


# ----------------------------------------------------------------------------------------------
# Merging: BAT (importance + diversity) and ToMe (bipartite soft matching)
# ----------------------------------------------------------------------------------------------

def _weighted_merge(x: torch.Tensor, assign: torch.Tensor, num_groups: int, weights: torch.Tensor,
                    size: torch.Tensor, source: Optional[torch.Tensor]):
    """Merge tokens ``x [B, M, C]`` into ``num_groups`` groups given ``assign [B, M]`` (group index per
    token): a weighted average per group (``weights [B, M]``, > 0), summed sizes and sources. Batched as
    one matrix product with a one-hot assignment matrix (no loop over images)."""
    onehot = torch.nn.functional.one_hot(assign, num_groups).transpose(1, 2).to(x.dtype)  # [B, G, M]
    w = onehot * weights.to(x.dtype).unsqueeze(1)
    w = w / w.sum(-1, keepdim=True).clamp_min(torch.finfo(x.dtype).tiny)
    merged = w @ x
    new_size = (onehot @ size.to(x.dtype).unsqueeze(-1)).squeeze(-1).to(size.dtype)
    new_source = None if source is None else onehot.to(source.dtype) @ source
    return merged, new_size, new_source


def dpc_knn(x: torch.Tensor, num_clusters: int, k: int = 5) -> tuple[torch.Tensor, torch.Tensor]:
    """Simplified density-peak clustering with k nearest neighbours (DPC-KNN), batched.

    As used by BAT (Long et al., CVPR 2023, Sec. 3.3) following TCFormer's public implementation:
    distances scaled by ``sqrt(C)``; density ``rho_i = exp(-mean of the k nearest squared distances)``;
    ``delta_i`` = distance to the nearest denser token (the farthest distance for the densest);
    centres = the ``num_clusters`` largest ``rho * delta``; every token joins its nearest centre.
    Ties in density are broken by token index (lower index counts as denser), deterministically.
    Returns ``(assign [B, M], centres [B, num_clusters])``. Costs O(M^2 C) per image.
    """
    b, m, c = x.shape
    num_clusters = min(num_clusters, m)
    xf = x.float()
    sq = xf.pow(2).sum(-1)
    d2 = (sq[:, :, None] + sq[:, None, :] - 2 * (xf @ xf.transpose(1, 2))).clamp_min(0)
    d2 = d2 * (1 - torch.eye(m, device=x.device))  # exact zeros on the diagonal
    dist = d2.sqrt() / c ** 0.5
    kk = min(k, m)
    nearest = torch.topk(dist, kk, dim=-1, largest=False).values
    density = (-(nearest ** 2).mean(-1)).exp()
    idx = torch.arange(m, device=x.device)
    denser = (density[:, None, :] > density[:, :, None]) | (
        (density[:, None, :] == density[:, :, None]) & (idx[None, None, :] < idx[None, :, None]))
    far = dist.flatten(1).max(-1).values[:, None, None]
    delta = torch.where(denser, dist, far).min(-1).values
    centres = torch.topk(density * delta, num_clusters, dim=-1).indices
    to_centre = torch.gather(dist, 1, centres.unsqueeze(-1).expand(b, num_clusters, m))  # [B, K, M]
    assign = to_centre.argmin(1)
    assign.scatter_(1, centres, torch.arange(num_clusters, device=x.device).expand(b, num_clusters))
    return assign, centres


def _pair_merge(x, size, source, metric, r: int):
    """ToMe-style bipartite soft matching inside a token set: alternate tokens into sets a / b, merge
    the ``r`` tokens of ``a`` most similar (cosine of ``metric``) to their best match in ``b`` by a
    size-weighted average. Returns the remaining tokens with sizes and sources."""
    b_, n, c = x.shape
    r = min(r, n // 2)
    if r <= 0:
        return x, size, source
    m = metric / metric.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    a_m, b_m = m[:, ::2], m[:, 1::2]
    sim = a_m @ b_m.transpose(-1, -2)
    node_max, node_idx = sim.max(-1)
    order = torch.sort(node_max, dim=-1, descending=True, stable=True).indices
    src_idx, keep_a = order[:, :r], order[:, r:]
    dst_idx = torch.gather(node_idx, 1, src_idx)

    def split(t):
        return t[:, ::2], t[:, 1::2]

    def merge(t, weighted: bool):
        ta, tb = split(t)
        if weighted:
            sa, sb = split(size)
            ta = ta * sa.unsqueeze(-1).to(t.dtype)
            tb = tb * sb.unsqueeze(-1).to(t.dtype)
        src = gather_tokens(ta, src_idx)
        tb = tb.scatter_add(1, dst_idx.reshape(dst_idx.shape + (1,) * (t.dim() - 2)).expand(src.shape), src)
        return torch.cat([gather_tokens(ta, keep_a), tb], 1)

    new_size = merge(size, weighted=False)
    new_x = merge(x, weighted=True) / new_size.unsqueeze(-1).to(x.dtype)
    new_source = None if source is None else merge(source, weighted=False)
    return new_x, new_size, new_source


def _pair_cost(n: int, r: int, metric_dim: int, d: int) -> int:
    r = min(r, n // 2)
    if r <= 0:
        return 0
    return ((n + 1) // 2) * (n // 2) * metric_dim + r * d  # a x b similarities, size-weighted sums


def _dpcknn_cost(m: int, groups: int, d: int) -> int:
    return m * m * d + min(groups, m) * m * d  # pairwise distances, one-hot weighted averages


def _bat_cost(n_tokens, n_kept, dim, head_dim, num_clusters=4, pair_fraction=0.0, **_):
    m = n_tokens - n_kept
    r = int(pair_fraction * n_kept)
    r = min(r, n_kept // 2, m - num_clusters) if m > num_clusters else 0
    return _pair_cost(n_kept, r, dim, dim) + _dpcknn_cost(m, num_clusters + r, dim)


@register_reducer("merge_dpcknn", needs=("cls_attn",), adds_tokens=lambda num_clusters, **_: num_clusters,
                  cost=_bat_cost,
                  reference="BAT (Long et al., CVPR 2023, arXiv 2211.11315), Sec. 3: decouple by [CLS] attention, "
                            "DPC-KNN merge of inattentive tokens, pairing of homogeneous attentive tokens")
def merge_dpcknn(ctx: TokenContext, scores: torch.Tensor, n_keep: int, num_clusters: int = 4, k: int = 5,
                 pair_fraction: float = 0.0, merge_weight: str = "attention") -> Reduction:
    """BAT's token decoupling and merging, with the free choices of an unpublished implementation exposed.

    1. decouple: the ``n_keep`` best-scored tokens are attentive, the rest inattentive;
    2. pair (``pair_fraction`` > 0): ``r = floor(pair_fraction * n_keep)`` pairs of homogeneous attentive
       tokens (cosine of their features, bipartite matching) are combined, freeing ``r`` slots;
    3. merge: the inattentive tokens are clustered by DPC-KNN (``k`` neighbours) into ``num_clusters + r``
       clusters, each replaced by its weighted average (``merge_weight``: ``"attention"`` = head-mean
       [CLS] attention x size, ``"size"``, or ``"uniform"``).
    The output holds ``n_keep + num_clusters`` prunable tokens whatever ``pair_fraction`` is, so MACs do not
    depend on it. Defaults (4 clusters, k = 5, no pairing) are ours: the paper's repository has no code;
    k = 5 follows TCFormer's DPC-KNN; a few clusters keep the cost within a few tokens of EViT's.
    """
    if not isinstance(num_clusters, int) or num_clusters < 1:
        raise ValueError(f"num_clusters: expected an int >= 1, got {num_clusters!r}")
    if not isinstance(k, int) or k < 1:
        raise ValueError(f"k: expected an int >= 1, got {k!r}")
    if not 0.0 <= pair_fraction < 1.0:
        raise ValueError(f"pair_fraction: expected a number in [0, 1), got {pair_fraction!r}")
    if merge_weight not in ("attention", "size", "uniform"):
        raise ValueError(f"merge_weight: unknown {merge_weight!r}; accepted: ['attention', 'size', 'uniform']")
    p, size = _split(ctx)
    keep_idx, rest_idx = select_topk(scores, n_keep)
    x_p = ctx.x[:, p:]
    keep_x, keep_size = gather_tokens(x_p, keep_idx), gather_tokens(size[:, p:], keep_idx)
    keep_src = None if ctx.source is None else gather_tokens(ctx.source[:, p:], keep_idx)
    r = int(pair_fraction * n_keep)
    r = min(r, n_keep // 2, rest_idx.shape[1] - num_clusters) if rest_idx.shape[1] > num_clusters else 0
    if r > 0:
        keep_x, keep_size, keep_src = _pair_merge(keep_x, keep_size, keep_src, keep_x, r)
    rest_x, rest_size = gather_tokens(x_p, rest_idx), gather_tokens(size[:, p:], rest_idx)
    rest_src = None if ctx.source is None else gather_tokens(ctx.source[:, p:], rest_idx)
    groups = num_clusters + r
    assign, _ = dpc_knn(rest_x, groups, k)
    groups = min(groups, rest_x.shape[1])
    if merge_weight == "attention":
        w = gather_tokens(ctx.cls_attn[:, :, p:].mean(1), rest_idx) * rest_size
    elif merge_weight == "size":
        w = rest_size
    else:
        w = torch.ones_like(rest_size)
    merged_x, merged_size, merged_src = _weighted_merge(rest_x, assign, groups, w.clamp_min(1e-12), rest_size, rest_src)
    x = torch.cat([ctx.x[:, :p], keep_x, merged_x], 1)
    new_size = torch.cat([size[:, :p], keep_size, merged_size], 1)
    new_src = None if ctx.source is None else torch.cat([ctx.source[:, :p], keep_src, merged_src], 1)
    return Reduction(x, new_size, new_src, keep_idx)


@register_reducer("cluster_all", uses_scores=False, cost=lambda n_tokens, n_kept, dim, head_dim, **_: _dpcknn_cost(n_tokens, n_kept, dim),
                  reference="BAT ablation 'diversity only': DPC-KNN over all tokens, no importance")
def cluster_all(ctx: TokenContext, scores: torch.Tensor, n_keep: int, k: int = 5) -> Reduction:
    """Diversity only: cluster every prunable token by DPC-KNN into ``n_keep`` clusters and keep their
    size-weighted averages (the scores are ignored)."""
    p, size = _split(ctx)
    x_p, s_p = ctx.x[:, p:], size[:, p:]
    src_p = None if ctx.source is None else ctx.source[:, p:]
    assign, centres = dpc_knn(x_p, n_keep, k)
    merged_x, merged_size, merged_src = _weighted_merge(x_p, assign, centres.shape[1], s_p, s_p, src_p)
    return Reduction(torch.cat([ctx.x[:, :p], merged_x], 1), torch.cat([size[:, :p], merged_size], 1),
                     None if ctx.source is None else torch.cat([ctx.source[:, :p], merged_src], 1), centres)


@register_reducer("bipartite", needs=("keys",), uses_scores=False,
                  cost=lambda n_tokens, n_kept, dim, head_dim, **_: _pair_cost(n_tokens, n_tokens - n_kept, head_dim, dim),
                  reference="ToMe (Bolya et al., ICLR 2023), tome/merge.py: bipartite soft matching on head-mean keys")
def bipartite(ctx: TokenContext, scores: Optional[torch.Tensor], n_keep: int) -> Reduction:
    """ToMe: split prunable tokens alternately into a / b, merge the ``r = N - n_keep`` a-tokens most similar
    (cosine of the head-mean keys) into their best b-match by size-weighted average. At most half the
    tokens can merge in one step (``r <= N / 2``). Prefix tokens are protected. Use with
    ``prop_attn=True`` for ToMe's proportional attention. ``keep_idx`` is empty: nothing is selected."""
    p, size = _split(ctx)
    keys = ctx.keys.mean(1)[:, p:]
    x, s, src = _pair_merge(ctx.x[:, p:], size[:, p:], None if ctx.source is None else ctx.source[:, p:],
                            keys, ctx.num_prunable - n_keep)
    return Reduction(torch.cat([ctx.x[:, :p], x], 1), torch.cat([size[:, :p], s], 1),
                     None if ctx.source is None else torch.cat([ctx.source[:, :p], src], 1),
                     torch.empty(x.shape[0], 0, dtype=torch.long, device=x.device))
