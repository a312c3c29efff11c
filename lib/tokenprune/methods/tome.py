"""ToMe (Bolya et al., ICLR 2023, "Token Merging: Your ViT but Faster", arXiv 2210.09461).

Bipartite soft matching (facebookresearch/ToMe, tome/merge.py): tokens alternate into sets a and b, each
a-token finds its most similar b-token (cosine of the head-mean keys), and the ``r`` best-matched
a-tokens merge into their matches by a size-weighted average. :func:`pair_merge` is that step on any
token set (BAT reuses it to pair homogeneous attentive tokens); ``bipartite`` is the reducer.
"""
from __future__ import annotations

from typing import Optional

import torch

from tokenprune.core.reducers import Reduction, gather_tokens, prefix_and_size, register_reducer
from tokenprune.core.scorers import TokenContext

__all__ = ["pair_merge", "pair_cost", "bipartite"]


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



def _bipartite_cost(n_tokens, n_kept, dim, head_dim, **_):
    return pair_cost(n_tokens, n_tokens - n_kept, head_dim, dim)


@register_reducer("bipartite", needs=("keys",), uses_scores=False,
                  cost=_bipartite_cost,
                  reference="ToMe (Bolya et al., ICLR 2023), tome/merge.py: bipartite soft matching on head-mean keys")
def bipartite(ctx: TokenContext, scores: Optional[torch.Tensor], n_keep: int) -> Reduction:
    """ToMe: split prunable tokens alternately into a / b, merge the ``r = N - n_keep`` a-tokens most similar
    (cosine of the head-mean keys) into their best b-match by size-weighted average. At most half the
    tokens can merge in one step (``r <= N / 2``). Prefix tokens are protected. Use with
    ``prop_attn=True`` for ToMe's proportional attention. ``keep_idx`` is empty: nothing is selected."""
    p, size = prefix_and_size(ctx)
    keys = ctx.keys.mean(1)[:, p:]
    x, s, src = pair_merge(ctx.x[:, p:], size[:, p:], None if ctx.source is None else ctx.source[:, p:],
                            keys, ctx.num_prunable - n_keep)
    return Reduction(torch.cat([ctx.x[:, :p], x], 1), torch.cat([size[:, :p], s], 1),
                     None if ctx.source is None else torch.cat([ctx.source[:, :p], src], 1),
                     torch.empty(x.shape[0], 0, dtype=torch.long, device=x.device))
