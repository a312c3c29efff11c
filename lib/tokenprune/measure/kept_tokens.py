"""The token set a pruned ViT carries after a block, and its diversity.

BAT (Long et al., CVPR 2023) argues that keeping only the attentive tokens makes the kept set
redundant, and that merging the inattentive ones by clustering keeps it diverse. This module makes
the argument measurable on a real forward pass: :func:`tokens_after` reads the tokens leaving a
block (a forward hook; after that block's reduction and MLP), and :func:`kept_token_diversity`
returns, per image, the mean pairwise cosine distance and the effective rank of the prunable
tokens there (:func:`tokenprune.measure.diversity.mean_pairwise_cosine_distance`,
:func:`tokenprune.measure.diversity.effective_rank`).
"""
from __future__ import annotations

import numpy as np
import torch

from tokenprune.measure import diversity
from tokenprune.core.precision import autocast

__all__ = ["tokens_after", "kept_token_diversity"]


def tokens_after(model: torch.nn.Module, images: torch.Tensor, block: int, batch: int = 128,
                 dtype: str = "fp32", reduce_fn=None) -> list:
    """Run ``model`` over ``images`` and return, per batch, the tokens leaving block ``block``
    (1-based, as the papers count), ``[B, N, C]`` float32 on the CPU, or ``reduce_fn`` of them."""
    blocks = list(model.blocks)
    if not 1 <= block <= len(blocks):
        raise ValueError(f"block: 1-based block number in 1..{len(blocks)}, got {block!r}")
    out: list = []

    def hook(_m, _inp, x):
        t = x.detach().float().cpu()
        out.append(reduce_fn(t) if reduce_fn is not None else t)

    dev = next(model.parameters()).device
    handle = blocks[block - 1].register_forward_hook(hook)
    try:
        model.eval()
        with torch.inference_mode(), autocast(dtype, str(dev)):
            for i in range(0, len(images), batch):
                model(images[i:i + batch].to(dev))
    finally:
        handle.remove()
    return out


def kept_token_diversity(model: torch.nn.Module, images: torch.Tensor, block: int, batch: int = 128,
                         dtype: str = "fp32", center_rank: bool = True) -> dict[str, np.ndarray]:
    """Per-image diversity of the prunable tokens leaving block ``block`` (prefix tokens excluded).

    Returns ``{"cosine_distance": [N], "effective_rank": [N], "tokens": [N]}``: the mean pairwise
    cosine distance, the effective rank (of the centred token matrix when ``center_rank``, so that the
    offset all ViT tokens share does not count as a dimension) and the token count. Both are NaN where
    fewer than two prunable tokens are left.
    """
    p = getattr(model, "num_prefix_tokens", 1)

    def reduce(t):
        t = t[:, p:].double()
        if t.shape[1] < 2:  # one token left: a pairwise distance is undefined
            nan = np.full(t.shape[0], np.nan)
            return nan, nan, np.full(t.shape[0], t.shape[1])
        return (diversity.mean_pairwise_cosine_distance(t).numpy(),
                diversity.effective_rank(t, center=center_rank).numpy(),
                np.full(t.shape[0], t.shape[1]))

    parts = tokens_after(model, images, block, batch, dtype, reduce)
    cos, rank, n = (np.concatenate(z) for z in zip(*parts))
    return {"cosine_distance": cos, "effective_rank": rank, "tokens": n}

