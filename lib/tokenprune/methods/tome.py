"""ToMe (Bolya et al., ICLR 2023, "Token Merging: Your ViT but Faster", arXiv 2210.09461).

Bipartite soft matching as its authors wrote it (facebookresearch/ToMe, ``tome/merge.py``,
``bipartite_soft_matching`` and ``merge_wavg``):

* the metric is the head mean of the keys, normalised; **all** tokens, [CLS] included, alternate into sets
  ``a = tokens[0::2]`` and ``b = tokens[1::2]`` ([CLS], index 0, falls in ``a``);
* ``scores = a @ b^T``; with a class token ``scores[..., 0, :] = -inf``: the [CLS] row never merges;
* ``node_max, node_idx = scores.max(-1)``; the ``r`` a-tokens with the largest ``node_max`` merge into their
  best b-match (``src``), the rest stay (``unm``, re-sorted by index so that [CLS] stays first);
* the output is ``cat([unm, b])``; tokens merge by a size-weighted average (``merge_wavg``: sum ``x * size``
  and ``size``, divide);
* ``r = min(r, (t - protected) // 2)`` with ``t`` all tokens and ``protected`` = 1 for [CLS] (+1 for a
  distillation token, whose b column is set to -inf). With one prefix token and ``n`` patch tokens this is
  ``n // 2`` -- the a-set holds ``(n + 2) // 2`` tokens of which one is [CLS].

Differences, stated: ToMe's ``argsort`` is not stable; here the a-tokens are ranked in the order of a stable
descending sort (:func:`tokenprune.core.scorers.descending_order`), so ties go to the lower index (ToMe's order on
ties is whatever the kernel gives). A zero metric vector is normalised with a clamped norm (ToMe would divide by
zero).

:func:`pair_merge` is that step on any token set; ``protected=0`` is ToMe with ``class_token=False`` (no
[CLS] in the set, unmerged a-tokens in score order), which BAT uses to pair homogeneous attentive tokens.
``bipartite`` is the reducer (its prefix tokens protected, as ToMe's ``class_token=True``).

ToMe merges ``r`` tokens in every block (:func:`tome_schedule` gives the per-block keep rates that make
``tokenprune.patch`` do exactly that). One matching merges at most half the prunable tokens, so a keep rate
below 0.5 at one location is reached by repeating the matching on the merged set (:func:`repeated_pair_merge`;
ToMe's paper never does this, it spreads ``r`` over the blocks), so a requested keep rate is what the model
keeps for every reducer.
"""
from __future__ import annotations

from typing import Optional

import torch

from tokenprune.core.reducers import Reduction, gather_tokens, prefix_and_size, register_reducer
from tokenprune.core.scorers import TokenContext, descending_order

__all__ = ["pair_merge", "pair_cost", "bipartite_cost", "matching_rounds", "repeated_pair_merge", "tome_schedule",
           "bipartite"]


def _output_order(n_unm: int, n_b: int, protected: int, device) -> torch.Tensor:
    """Index into ``cat([unm, b])`` that puts the protected tokens first in their original order (ToMe with a
    distillation token: ``cat([unm[:1], dst[:1], unm[1:], dst[1:]])``), then the other unmerged a-tokens, then
    the other b-tokens. The identity for ``protected <= 1``."""
    pa, pb = (protected + 1) // 2, protected // 2
    front = [i // 2 if i % 2 == 0 else n_unm + i // 2 for i in range(protected)]
    rest = list(range(pa, n_unm)) + list(range(n_unm + pb, n_unm + n_b))
    return torch.tensor(front + rest, dtype=torch.long, device=device)


def pair_merge(x, size, source, metric, r: int, protected: int = 0):
    """ToMe's bipartite soft matching inside a token set (``tome/merge.py``): alternate tokens into sets
    ``a`` (even positions) / ``b`` (odd), merge the ``r`` tokens of ``a`` most similar (cosine of ``metric``)
    to their best match in ``b`` by a size-weighted average. The first ``protected`` tokens take part in the
    alternation but never merge and are never merged into (ToMe's ``class_token`` / ``distill_token``); with
    ``protected > 0`` the unmerged a-tokens keep their index order (ToMe sorts them so [CLS] stays first) and
    the protected tokens come out first. ``r`` is clamped to ``(N - protected) // 2``. Returns the remaining
    tokens with sizes and sources."""
    b_, n, c = x.shape
    r = min(r, (n - protected) // 2)
    if r <= 0:
        return x, size, source
    m = metric / metric.norm(dim=-1, keepdim=True).clamp_min(1e-12)
    a_m, b_m = m[:, ::2], m[:, 1::2]
    sim = a_m @ b_m.transpose(-1, -2)
    if protected:
        sim[:, :(protected + 1) // 2, :] = -torch.inf  # a protected row never merges ([CLS])
        sim[:, :, :protected // 2] = -torch.inf  # nothing merges into a protected b token (distillation token)
    node_max, node_idx = sim.max(-1)
    order = descending_order(node_max)  # a stable sort's order: ToMe's argsort is not stable
    src_idx, keep_a = order[:, :r], order[:, r:]
    if protected:
        keep_a = keep_a.sort(dim=-1).values  # ToMe: "sort to ensure the class token is at the start"
    dst_idx = torch.gather(node_idx, 1, src_idx)
    perm = _output_order(keep_a.shape[1], n // 2, protected, x.device) if protected > 1 else None

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
        out = torch.cat([gather_tokens(ta, keep_a), tb], 1)
        return out if perm is None else out[:, perm]

    new_size = merge(size, weighted=False)
    new_x = merge(x, weighted=True) / new_size.unsqueeze(-1).to(x.dtype)
    new_source = None if source is None else merge(source, weighted=False)
    return new_x, new_size, new_source


def pair_cost(n: int, r: int, metric_dim: int, d: int, protected: int = 0) -> int:
    """MACs of one :func:`pair_merge` of ``n`` tokens (``protected`` of them in front, in the set but never
    merged): the ``a x b`` similarity product (``ceil(n/2) x floor(n/2) x metric_dim``) and the size-weighted
    sums of the ``r`` merged tokens (``r x d``)."""
    r = min(r, (n - protected) // 2)
    if r <= 0:
        return 0
    return ((n + 1) // 2) * (n // 2) * metric_dim + r * d  # a x b similarities, size-weighted sums


def matching_rounds(n_tokens: int, n_keep: int) -> list[tuple[int, int]]:
    """``(tokens, merged)`` of each bipartite matching needed to go from ``n_tokens`` to ``n_keep`` unprotected
    tokens: one round when ``n_keep >= n_tokens / 2``, else rounds of ``floor(tokens / 2)`` merges until the
    rest fit. With protected tokens beside them (ToMe's [CLS]) the clamp ``(t - protected) // 2`` is the same
    ``floor(tokens / 2)`` of the unprotected ones, so the rounds are too."""
    if not 1 <= n_keep <= n_tokens:
        raise ValueError(f"n_keep: expected 1..{n_tokens} (n_tokens), got {n_keep!r}")
    rounds, n = [], n_tokens
    while n > n_keep:
        r = min(n - n_keep, n // 2)
        rounds.append((n, r))
        n -= r
    return rounds


def repeated_pair_merge(x, size, source, metric, n_keep: int, protected: int = 0):
    """:func:`pair_merge` repeated until ``n_keep`` tokens remain (``n_keep`` counts the ``protected`` ones;
    :func:`matching_rounds` on the unprotected tokens). After the first round the metric is merged like the
    tokens (size-weighted average), so every round matches on the merged tokens' mean keys. With one round
    this is exactly :func:`pair_merge`."""
    rounds = matching_rounds(x.shape[1] - protected, n_keep - protected)
    if len(rounds) <= 1:
        return pair_merge(x, size, source, metric, x.shape[1] - n_keep, protected)
    c = x.shape[-1]
    xm = torch.cat([x, metric.to(x.dtype)], -1)
    for _, r in rounds:
        xm, size, source = pair_merge(xm, size, source, xm[..., c:], r, protected)
    return xm[..., :c], size, source


def bipartite_cost(n_tokens, n_kept, dim, head_dim, **_):
    """Own MACs of ``bipartite`` for ``n_tokens`` prunable tokens and one protected prefix token ([CLS], in
    the alternation as in ToMe): per matching round the ``a x b`` product over ``n + 1`` tokens and the
    weighted sums. (A model with more prefix tokens computes a slightly larger product: ``O(n head_dim)``.)"""
    return sum(pair_cost(n + 1, r, head_dim, dim, protected=1) for n, r in matching_rounds(n_tokens, n_kept))


def tome_schedule(r: int, num_patches: int = 196, depth: int = 12) -> tuple[tuple[float, ...], tuple[int, ...]]:
    """ToMe's own schedule: ``r`` tokens merged in every block (``parse_r`` with a constant ``r``), each clamped
    as ToMe clamps it (``min(r, n // 2)`` of the ``n`` patch tokens left, [CLS] protected). Returns
    ``(keep_rates, locations)`` for ``tokenprune.patch(model, keep_rate=..., locations=..., reducer="bipartite",
    prop_attn=True)``: every block, with per-block keep rates ``(n - r_i - 0.5) / n`` that make
    ``ceil(rate x n)`` (:func:`tokenprune.core.schedule.num_keep`) exactly ``n - r_i`` (1.0 where ``r_i = 0``).
    DeiT-S (196 patches, 12 blocks), r = 13: 196 -> 183 -> ... -> 40 patch tokens."""
    if isinstance(r, bool) or not isinstance(r, int) or r < 0:
        raise ValueError(f"r: expected an int >= 0 (tokens merged per block), got {r!r}")
    if not isinstance(num_patches, int) or num_patches < 1 or not isinstance(depth, int) or depth < 1:
        raise ValueError(f"num_patches, depth: expected ints >= 1, got {num_patches!r}, {depth!r}")
    rates, n = [], num_patches
    for _ in range(depth):
        ri = min(r, n // 2)
        rates.append((n - ri - 0.5) / n if ri > 0 else 1.0)
        n -= ri
    return tuple(rates), tuple(range(1, depth + 1))


@register_reducer("bipartite", needs=("keys",), uses_scores=False,
                  cost=bipartite_cost,
                  reference="ToMe (Bolya et al., ICLR 2023), tome/merge.py: bipartite soft matching on head-mean keys, "
                            "[CLS] in the alternation and protected")
def bipartite(ctx: TokenContext, scores: Optional[torch.Tensor], n_keep: int) -> Reduction:
    """ToMe: all tokens ([CLS] included, index 0 in set a) alternate into a / b; the ``r = N - n_keep`` a-tokens
    most similar (cosine of the head-mean keys) to their best b-match merge into it by size-weighted average;
    the prefix tokens are protected (ToMe's ``class_token=True``: their rows are -inf, they stay first). One
    matching merges at most half the prunable tokens (``r <= N // 2``); below keep 0.5 it is repeated on the
    merged set until ``n_keep`` tokens remain (:func:`repeated_pair_merge`). Use with ``prop_attn=True`` for
    ToMe's proportional attention and :func:`tome_schedule` for its r-per-block schedule. ``keep_idx`` is
    empty: nothing is selected."""
    p, size = prefix_and_size(ctx)
    keys = ctx.keys.mean(1)  # ToMe's metric: k.mean(1), over every token
    x, s, src = repeated_pair_merge(ctx.x, size, ctx.source, keys, n_keep + p, protected=p)
    return Reduction(x, s, src, torch.empty(x.shape[0], 0, dtype=torch.long, device=x.device))
