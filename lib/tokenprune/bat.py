"""BAT (Long et al., "Beyond Attentive Tokens", CVPR 2023, arXiv 2211.11315): what its audit needs
beyond :func:`tokenprune.reducers.merge_dpcknn`.

* Reducer ``merge_dpcknn_budget``: BAT inside EViT's token budget. ``merge_dpcknn`` outputs
  ``n_keep + num_clusters`` prunable tokens (attentive tokens *plus* cluster centres); this variant
  carves the clusters out of EViT's ``n_keep + 1`` (``ceil(rho N)`` attentive tokens and one fused
  token), keeping ``n_keep + 1 - num_clusters`` attentive tokens. Its token counts, and therefore
  its model MACs, equal EViT's at every keep rate: that is the configuration whose model MACs
  reproduce BAT's printed column (3.0 / 2.6 / 2.3 / 2.0 / 1.8 / 1.6 GMACs for DeiT-S at
  rho = 0.7 ... 0.2), which leaves out the clustering's own cost (``MacCount.reduction``).
* :func:`trend_contrast`: the test of BAT's central claim ("diversity matters most at low keep
  rates"): the least-squares slope, over keep rates, of a paired per-image difference (BAT minus
  EViT correctness), with a bootstrap interval over images.

The official repository (BWLONG/BeyondAttentiveTokens) holds training logs but no code, so the cluster
count, ``k``, the merge weights and the pairing rule are free choices, exposed as reducer options.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np
import torch

from . import metrics
from .reducers import Reduction, _bat_cost, merge_dpcknn, register_reducer
from .scorers import TokenContext

__all__ = ["budget_split", "merge_dpcknn_budget", "Trend", "trend_contrast"]


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
                  reference="BAT (Long et al., CVPR 2023) within EViT's token budget: n_keep + 1 - num_clusters "
                            "attentive tokens + num_clusters DPC-KNN clusters of the rest (= EViT's token counts)")
def merge_dpcknn_budget(ctx: TokenContext, scores: torch.Tensor, n_keep: int, num_clusters: int = 4, k: int = 5,
                        pair_fraction: float = 0.0, merge_weight: str = "attention") -> Reduction:
    """BAT's decoupling and merging with EViT's output size: ``n_keep + 1`` prunable tokens.

    The ``n_keep + 1 - num_clusters`` best-scored tokens are attentive (at least one); the rest are
    clustered by DPC-KNN into ``num_clusters`` weighted averages (fewer when ``n_keep < num_clusters``);
    ``pair_fraction`` pairs attentive tokens and spends the freed slots on more clusters, as in
    :func:`tokenprune.reducers.merge_dpcknn` (options have the same meaning). ``keep_idx`` holds the
    attentive tokens only.
    """
    attentive, clusters = budget_split(n_keep, num_clusters)
    return merge_dpcknn(ctx, scores, attentive, num_clusters=clusters, k=k, pair_fraction=pair_fraction,
                        merge_weight=merge_weight)


@dataclass(frozen=True)
class Trend:
    """Slope of a paired difference over a parameter (per unit of the parameter), with a bootstrap CI."""

    slope: float
    low: float
    high: float
    p_value: float
    n: int
    levels: tuple[float, ...]
    means: tuple[float, ...]

    @property
    def ci(self) -> list[float]:
        return [self.low, self.high]


def trend_contrast(diffs: np.ndarray | Sequence[Sequence[float]], levels: Sequence[float], n_boot: int = 2000,
                   seed: int = 0) -> Trend:
    """Least-squares slope of ``mean_i diffs[l, i]`` against ``levels[l]``, with a bootstrap over images.

    ``diffs`` is ``[L, N]``: a paired per-image difference (e.g. BAT correct minus EViT correct) at each
    of ``L`` levels (keep rates), measured on the same ``N`` images. The slope of the level means is
    linear in the images, ``slope = mean_i s_i`` with ``s_i = sum_l w_l diffs[l, i]`` and
    ``w_l = (x_l - mean x) / sum_l (x_l - mean x)^2``, so resampling images resamples ``s_i``
    (:func:`tokenprune.metrics.paired_bootstrap_diff` against zero gives the interval and the
    two-sided p-value). A negative slope means the difference grows as the level falls.
    """
    d = np.asarray(diffs, dtype=np.float64)
    x = np.asarray(levels, dtype=np.float64)
    if d.ndim != 2 or d.shape[0] != x.size:
        raise ValueError(f"diffs: expected [L={x.size}, N], got shape {d.shape}")
    if x.size < 2 or np.ptp(x) == 0:
        raise ValueError("levels: need at least two distinct levels")
    w = (x - x.mean()) / ((x - x.mean()) ** 2).sum()
    s = w @ d
    res = metrics.paired_bootstrap_diff(s, np.zeros_like(s), n_boot=n_boot, seed=seed)
    return Trend(res.estimate, res.low, res.high, res.p_value, res.n, tuple(x.tolist()),
                 tuple(d.mean(axis=1).tolist()))
