"""ToMe (Bolya et al., ICLR 2023, "Token Merging: Your ViT but Faster", arXiv 2210.09461).

Bipartite soft matching (facebookresearch/ToMe, tome/merge.py): tokens alternate into sets a and b, each
a-token finds its most similar b-token (cosine of the head-mean keys), and the ``r`` best-matched
a-tokens merge into their matches by a size-weighted average. :func:`pair_merge` is that step on any
token set (BAT reuses it to pair homogeneous attentive tokens); ``bipartite`` is the reducer.

One matching merges at most half the tokens (``r <= N / 2``), which is why ToMe merges a few tokens at
every block. A keep rate below 0.5 at one location is reached by repeating the matching on the merged
set (:func:`repeated_pair_merge`; ToMe's paper never does this, it spreads ``r`` over the blocks), so a
requested keep rate is what the model keeps for every reducer.
"""
from __future__ import annotations

from typing import Optional

import torch

from tokenprune.core.reducers import Reduction, gather_tokens, prefix_and_size, register_reducer
from tokenprune.core.scorers import TokenContext

__all__ = ["pair_merge", "pair_cost", "matching_rounds", "repeated_pair_merge", "bipartite"]


def pair_merge(x, size, source, metric, r: int):
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


def pair_cost(n: int, r: int, metric_dim: int, d: int) -> int:
    r = min(r, n // 2)
    if r <= 0:
        return 0
    return ((n + 1) // 2) * (n // 2) * metric_dim + r * d  # a x b similarities, size-weighted sums



def matching_rounds(n_tokens: int, n_keep: int) -> list[tuple[int, int]]:
    """``(tokens, merged)`` of each bipartite matching needed to go from ``n_tokens`` to ``n_keep`` tokens:
    one round when ``n_keep >= n_tokens / 2``, else rounds of ``floor(tokens / 2)`` merges until the rest fit."""
    if not 1 <= n_keep <= n_tokens:
        raise ValueError(f"n_keep: expected 1..{n_tokens} (n_tokens), got {n_keep!r}")
    rounds, n = [], n_tokens
    while n > n_keep:
        r = min(n - n_keep, n // 2)
        rounds.append((n, r))
        n -= r
    return rounds


def repeated_pair_merge(x, size, source, metric, n_keep: int):
    """:func:`pair_merge` repeated until ``n_keep`` tokens remain (:func:`matching_rounds`). After the first
    round the metric is merged like the tokens (size-weighted average), so every round matches on the
    merged tokens' mean keys. With one round this is exactly :func:`pair_merge`."""
    rounds = matching_rounds(x.shape[1], n_keep)
    if len(rounds) <= 1:
        return pair_merge(x, size, source, metric, x.shape[1] - n_keep)
    c = x.shape[-1]
    xm = torch.cat([x, metric.to(x.dtype)], -1)
    for _, r in rounds:
        xm, size, source = pair_merge(xm, size, source, xm[..., c:], r)
    return xm[..., :c], size, source


def _bipartite_cost(n_tokens, n_kept, dim, head_dim, **_):
    return sum(pair_cost(n, r, head_dim, dim) for n, r in matching_rounds(n_tokens, n_kept))


@register_reducer("bipartite", needs=("keys",), uses_scores=False,
                  cost=_bipartite_cost,
                  reference="ToMe (Bolya et al., ICLR 2023), tome/merge.py: bipartite soft matching on head-mean keys")
def bipartite(ctx: TokenContext, scores: Optional[torch.Tensor], n_keep: int) -> Reduction:
    """ToMe: split prunable tokens alternately into a / b, merge the ``r = N - n_keep`` a-tokens most similar
    (cosine of the head-mean keys) into their best b-match by size-weighted average. One matching merges
    at most half the tokens (``r <= N / 2``); below keep 0.5 it is repeated on the merged set until
    ``n_keep`` tokens remain (:func:`repeated_pair_merge`). Prefix tokens are protected. Use with
    ``prop_attn=True`` for ToMe's proportional attention. ``keep_idx`` is empty: nothing is selected."""
    p, size = prefix_and_size(ctx)
    keys = ctx.keys.mean(1)[:, p:]
    x, s, src = repeated_pair_merge(ctx.x[:, p:], size[:, p:], None if ctx.source is None else ctx.source[:, p:],
                                    keys, n_keep)
    return Reduction(torch.cat([ctx.x[:, :p], x], 1), torch.cat([size[:, :p], s], 1),
                     None if ctx.source is None else torch.cat([ctx.source[:, :p], src], 1),
                     torch.empty(x.shape[0], 0, dtype=torch.long, device=x.device))
