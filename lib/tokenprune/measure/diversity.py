"""Diversity of a token set: the mean pairwise cosine distance and the effective rank (Roy & Vetterli, 2007),
which make BAT's argument (Long et al., CVPR 2023) that attentive tokens alone are redundant measurable.

Every function here is pure: ``[N, C]`` or ``[B, N, C]`` tokens in, float64 tensors or a small dataclass out.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

__all__ = ["mean_pairwise_cosine_distance", "effective_rank", "Diversity", "diversity"]


def _tokens3(tokens: np.ndarray | torch.Tensor) -> torch.Tensor:
    t = tokens if isinstance(tokens, torch.Tensor) else torch.as_tensor(np.asarray(tokens))
    t = t.detach().cpu().to(torch.float64)
    if t.ndim == 2:
        t = t.unsqueeze(0)
    if t.ndim != 3:
        raise ValueError(f"tokens must be [N, C] or [B, N, C], got {tuple(t.shape)}")
    return t


def mean_pairwise_cosine_distance(tokens: np.ndarray | torch.Tensor) -> torch.Tensor:
    """Mean of ``1 - cos(x_i, x_j)`` over ordered pairs ``i != j``; float64 ``[B]``.

    0 when all tokens point the same way (a collapsed, redundant set), larger when they are
    spread out. Zero vectors are treated as orthogonal to everything. Needs N >= 2.
    """
    t = _tokens3(tokens)
    n = t.shape[1]
    if n < 2:
        raise ValueError("need at least two tokens for a pairwise distance")
    u = F.normalize(t, dim=-1)
    sim = u @ u.transpose(1, 2)  # [B, N, N]
    off = sim.sum(dim=(1, 2)) - sim.diagonal(dim1=1, dim2=2).sum(-1)
    return 1.0 - off / (n * (n - 1))


def effective_rank(tokens: np.ndarray | torch.Tensor, center: bool = False) -> torch.Tensor:
    """Effective rank (Roy & Vetterli, 2007) of each token matrix; float64 ``[B]``.

    ``exp(H(p))`` with ``p = s / sum(s)`` the normalised singular values of the ``[N, C]`` token
    matrix and ``H`` the Shannon entropy: 1 for a rank-one set, ``min(N, C)`` for a set of
    orthogonal equal-norm tokens. ``center`` subtracts the token mean first (so that a shared
    offset, common in ViT features, does not count as a dimension).
    """
    t = _tokens3(tokens)
    if center:
        t = t - t.mean(dim=1, keepdim=True)
    s = torch.linalg.svdvals(t)  # [B, min(N, C)]
    total = s.sum(-1, keepdim=True)
    p = s / total.clamp_min(1e-300)
    ent = -(torch.where(p > 0, p * p.log(), torch.zeros_like(p))).sum(-1)
    return torch.where(total.squeeze(-1) > 0, ent.exp(), torch.zeros_like(ent))


@dataclass(frozen=True)
class Diversity:
    """Diversity of a token set, averaged over the batch."""

    mean_cosine_distance: float
    effective_rank: float


def diversity(tokens: np.ndarray | torch.Tensor, center: bool = False) -> Diversity:
    """Diversity of the kept token set: mean pairwise cosine distance and effective rank.

    BAT (Long et al., CVPR 2023) argues that keeping only attentive tokens loses token
    diversity and keeps inattentive ones merged to preserve it; these two numbers make that
    argument measurable. Both are batch means of :func:`mean_pairwise_cosine_distance` and
    :func:`effective_rank` over ``[B, N, C]`` (or a single ``[N, C]``) tokens.
    """
    return Diversity(
        float(mean_pairwise_cosine_distance(tokens).mean()),
        float(effective_rank(tokens, center=center).mean()),
    )
