"""BAT (Long et al., "Beyond Attentive Tokens", CVPR 2023, arXiv 2211.11315): token decoupling, DPC-KNN merging
of the inattentive tokens, pairing of homogeneous attentive tokens, and BAT inside EViT's budget.

* Reducer ``merge_dpcknn_budget``: BAT inside EViT's token budget. ``merge_dpcknn`` outputs
  ``n_keep + num_clusters`` prunable tokens (attentive tokens *plus* cluster centres); this variant
  carves the clusters out of EViT's ``n_keep + 1`` (``ceil(rho N)`` attentive tokens and one fused
  token), keeping ``n_keep + 1 - num_clusters`` attentive tokens. Its token counts, and therefore
  its model MACs, equal EViT's at every keep rate: that is the configuration whose model MACs
  reproduce BAT's printed column (3.0 / 2.6 / 2.3 / 2.0 / 1.8 / 1.6 GMACs for DeiT-S at
  rho = 0.7 ... 0.2), which leaves out the clustering's own cost (``MacCount.reduction``).
* The test of BAT's central claim ("diversity matters most at low keep rates") is
  :func:`tokenprune.measure.trend.trend_contrast`.

The official repository (BWLONG/BeyondAttentiveTokens) holds training logs but no code, so the cluster
count, ``k``, the merge weights and the pairing rule are free choices, exposed as reducer options.
"""
from __future__ import annotations

from typing import Optional

import torch

from tokenprune.core.reducers import Reduction, gather_tokens, keep_topk, prefix_and_size, register_reducer
from tokenprune.core.scorers import TokenContext
from tokenprune.methods.tome import pair_cost, pair_merge

__all__ = ["dpc_knn", "merge_dpcknn", "cluster_all", "budget_split", "merge_dpcknn_budget"]


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


def _dpcknn_cost(m: int, groups: int, d: int) -> int:
    return m * m * d + min(groups, m) * m * d  # pairwise distances, one-hot weighted averages


def _bat_cost(n_tokens, n_kept, dim, head_dim, num_clusters=4, pair_fraction=0.0, **_):
    m = n_tokens - n_kept
    r = int(pair_fraction * n_kept)
    r = min(r, n_kept // 2, m - num_clusters) if m > num_clusters else 0
    return pair_cost(n_kept, r, dim, dim) + _dpcknn_cost(m, num_clusters + r, dim)


def check_merge_options(num_clusters: int = 4, k: int = 5, pair_fraction: float = 0.0,
                        merge_weight: str = "attention", **_) -> None:
    """The options of BAT's merging: ``num_clusters`` and ``k`` ints >= 1, ``pair_fraction`` in [0, 1),
    ``merge_weight`` one of attention | size | uniform."""
    if isinstance(num_clusters, bool) or not isinstance(num_clusters, int) or num_clusters < 1:
        raise ValueError(f"num_clusters: expected an int >= 1, got {num_clusters!r}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k: expected an int >= 1, got {k!r}")
    if isinstance(pair_fraction, bool) or not isinstance(pair_fraction, (int, float)) or not 0.0 <= pair_fraction < 1.0:
        raise ValueError(f"pair_fraction: expected a number in [0, 1), got {pair_fraction!r}")
    if merge_weight not in ("attention", "size", "uniform"):
        raise ValueError(f"merge_weight: unknown {merge_weight!r}; accepted: ['attention', 'size', 'uniform']")


def _clusters_added(num_clusters: int = 4, **_) -> int:
    return num_clusters


def _cluster_all_cost(n_tokens, n_kept, dim, head_dim, **_):
    return _dpcknn_cost(n_tokens, n_kept, dim)


@register_reducer("merge_dpcknn", needs=("cls_attn",), adds_tokens=_clusters_added,
                  cost=_bat_cost, check=check_merge_options,
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
    check_merge_options(num_clusters, k, pair_fraction, merge_weight)
    p = ctx.num_prefix_tokens
    selection = keep_topk(ctx, scores, n_keep)
    keep_idx, rest_idx, size = selection.keep_idx, selection.rest_idx, selection.size
    keep_x, keep_size, keep_src = selection.kept_x, selection.kept_size, selection.kept_source
    x_p = ctx.x[:, p:]
    r = int(pair_fraction * n_keep)
    r = min(r, n_keep // 2, rest_idx.shape[1] - num_clusters) if rest_idx.shape[1] > num_clusters else 0
    if r > 0:
        keep_x, keep_size, keep_src = pair_merge(keep_x, keep_size, keep_src, keep_x, r)
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


@register_reducer("cluster_all", uses_scores=False, cost=_cluster_all_cost,
                  check=check_merge_options,
                  reference="BAT ablation 'diversity only': DPC-KNN over all tokens, no importance")
def cluster_all(ctx: TokenContext, scores: torch.Tensor, n_keep: int, k: int = 5) -> Reduction:
    """Diversity only: cluster every prunable token by DPC-KNN into ``n_keep`` clusters and keep their
    size-weighted averages (the scores are ignored)."""
    p, size = prefix_and_size(ctx)
    x_p, s_p = ctx.x[:, p:], size[:, p:]
    src_p = None if ctx.source is None else ctx.source[:, p:]
    assign, centres = dpc_knn(x_p, n_keep, k)
    merged_x, merged_size, merged_src = _weighted_merge(x_p, assign, centres.shape[1], s_p, s_p, src_p)
    return Reduction(torch.cat([ctx.x[:, :p], merged_x], 1), torch.cat([size[:, :p], merged_size], 1),
                     None if ctx.source is None else torch.cat([ctx.source[:, :p], merged_src], 1), centres)


def budget_split(n_keep: int, num_clusters: int) -> tuple[int, int]:
    """``(attentive, clusters)`` for an EViT budget of ``n_keep + 1`` output tokens: ``num_clusters``
    clusters and ``n_keep + 1 - num_clusters`` attentive tokens, at least one attentive token."""
    if not isinstance(num_clusters, int) or num_clusters < 1:
        raise ValueError(f"num_clusters: expected an int >= 1, got {num_clusters!r}")
    attentive = max(1, n_keep + 1 - num_clusters)
    return attentive, n_keep + 1 - attentive


def _budget_cost(n_tokens, n_kept, dim, head_dim, num_clusters=4, pair_fraction=0.0, **_):
    att, clusters = budget_split(n_kept, num_clusters)
    return _bat_cost(n_tokens, att, dim, head_dim, num_clusters=clusters, pair_fraction=pair_fraction)


@register_reducer("merge_dpcknn_budget", needs=("cls_attn",), adds_tokens=1, cost=_budget_cost,
                  check=check_merge_options,
                  reference="BAT (Long et al., CVPR 2023) within EViT's token budget: n_keep + 1 - num_clusters "
                            "attentive tokens + num_clusters DPC-KNN clusters of the rest (= EViT's token counts)")
def merge_dpcknn_budget(ctx: TokenContext, scores: torch.Tensor, n_keep: int, num_clusters: int = 4, k: int = 5,
                        pair_fraction: float = 0.0, merge_weight: str = "attention") -> Reduction:
    """BAT's decoupling and merging with EViT's output size: ``n_keep + 1`` prunable tokens.

    The ``n_keep + 1 - num_clusters`` best-scored tokens are attentive (at least one); the rest are
    clustered by DPC-KNN into ``num_clusters`` weighted averages (fewer when ``n_keep < num_clusters``);
    ``pair_fraction`` pairs attentive tokens and spends the freed slots on more clusters, as in
    :func:`tokenprune.methods.bat.merge_dpcknn` (options have the same meaning). ``keep_idx`` holds the
    attentive tokens only.
    """
    attentive, clusters = budget_split(n_keep, num_clusters)
    return merge_dpcknn(ctx, scores, attentive, num_clusters=clusters, k=k, pair_fraction=pair_fraction,
                        merge_weight=merge_weight)
