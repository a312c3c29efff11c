"""EViT (Liang et al., ICLR 2022, "Not All Patches are What You Need", arXiv 2202.07800).

The method as the official code (youweiliang/evit, evit.py) writes it: score every patch token by the
head-mean [CLS] attention row (``cls_attention``), keep the top ``ceil(keep_rate * (N - 1))`` at blocks
4/7/10, after the attention residual and before the MLP, and fuse the rest into one token weighted by
that attention (``fuse_attention``). ``tokens_to_tokens`` is Table 10's alternative score. Dropping
without fusion is the generic ``drop`` reducer of :mod:`tokenprune.core.reducers`.
"""
from __future__ import annotations

import torch

from tokenprune.core.reducers import Reduction, fuse_cost, fuse_rest, gather_tokens, keep_topk, register_reducer
from tokenprune.core.scorers import TokenContext, register_scorer, require_field

__all__ = ["cls_attention", "tokens_to_tokens", "fuse_attention"]


@register_scorer("cls_attention", needs=("cls_attn",),
                 reference="EViT (Liang et al., ICLR 2022), Sec. 3.2: "
                           "head-mean [CLS] attention, attn[:, :, 0, 1:].mean(1)")
def cls_attention(ctx: TokenContext) -> torch.Tensor:
    """Head-averaged attention of [CLS] to each prunable token (EViT Eq. 1-2; not renormalised)."""
    a = require_field(ctx, "cls_attn", "cls_attention")
    return a[:, :, ctx.num_prefix_tokens:].mean(dim=1)


@register_scorer("tokens_to_tokens", needs=("attn",),
                 reference="EViT appendix (Table 10): attention a token receives from all tokens, head mean")
def tokens_to_tokens(ctx: TokenContext) -> torch.Tensor:
    """Mean attention each prunable token receives from every query token, averaged over heads."""
    a = require_field(ctx, "attn", "tokens_to_tokens")
    return a[..., ctx.num_prefix_tokens:].mean(dim=(1, 2))


@register_reducer("fuse_attention", needs=("cls_attn",), adds_tokens=1, cost=fuse_cost,
                  reference="EViT Sec. 3.2 / evit.py: x_fused = sum_i a_i x_i over inattentive tokens, "
                            "raw [CLS] attention")
def fuse_attention(ctx: TokenContext, scores: torch.Tensor, n_keep: int) -> Reduction:
    """EViT's inattentive-token fusion: keep the top ``n_keep`` and append one token equal to the sum of
    the others weighted by their head-mean [CLS] attention (the raw softmax weights, not renormalised),
    as the official evit.py does. The fused token is appended last and is an ordinary token later."""
    selection = keep_topk(ctx, scores, n_keep, with_rest=True)
    cls_attn = ctx.cls_attn[:, :, ctx.num_prefix_tokens:].mean(dim=1)
    return fuse_rest(ctx, selection, weights=gather_tokens(cls_attn, selection.rest_idx))
