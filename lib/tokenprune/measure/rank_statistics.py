"""How much two token scorers agree: rank correlations, overlap of kept sets, and variance vs mean.

It tests whether a new importance score is more than a re-ranking of an old one (arXiv 2507.19175's
cross-head variance and MedAD against EViT's head-mean [CLS] attention; the same tools apply to any pair of
scorers in :mod:`tokenprune.core.scorers`).

- :func:`score_rows`: every named scorer that needs only the [CLS] row, on rows ``[B, H, N]`` (e.g. the
  ``cls_attn`` of :func:`tokenprune.core.split_forward.cache_tokens`, read from an unpruned forward pass),
  so all scorers
  are compared on the same attention.
- :func:`rank_correlations`: per-image Spearman's rho and Kendall's tau-b (``scipy.stats``; ties averaged).
- :func:`topk_jaccard`: per-image Jaccard overlap of the kept sets ``|A and B| / |A or B|`` at a keep rate,
  with kept sets chosen exactly as pruning does (``ceil(r N)`` tokens, ties to the lower index), and
  :func:`chance_jaccard`, the expected overlap of two independent uniformly random kept sets.
- :func:`loglog_fit`: per-image least squares of ``log var`` on ``log mean`` across patches: slope 2 with
  R^2 near 1 means the variance is (a constant times) the mean squared, i.e. the same ranking as the mean.
"""
from __future__ import annotations

from typing import Iterable, Optional

import numpy as np
import torch
from scipy import stats as _st

from tokenprune.core.schedule import num_keep
from tokenprune.core.scorers import TokenContext, get_scorer, select_topk

__all__ = ["score_rows", "rank_correlations", "topk_jaccard", "chance_jaccard",
           "loglog_fit"]


def score_rows(cls_attn: torch.Tensor, names: Iterable[str], num_prefix_tokens: int = 1,
               generator: Optional[torch.Generator] = None) -> dict[str, torch.Tensor]:
    """Each scorer in ``names`` (needing at most ``cls_attn``) on rows ``[B, H, N]``: ``{name: [B, N - p]}``."""
    b, h, n = cls_attn.shape
    out = {}
    for name in names:
        spec = get_scorer(name)
        if not spec.needs <= {"cls_attn"}:
            raise ValueError(f"names: scorer {name!r} needs {sorted(spec.needs)}, not only the [CLS] row")
        ctx = TokenContext(x=cls_attn.new_zeros(b, n, 1), num_prefix_tokens=num_prefix_tokens, block_index=0,
                           cls_attn=cls_attn, extras={"generator": generator} if generator is not None else {})
        out[name] = spec(ctx).float()
    return out


def rank_correlations(a: torch.Tensor, b: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Per-image Spearman's rho and Kendall's tau-b between score rows ``a`` and ``b`` (``[B, N]``).
    A constant row gives NaN (no ranking to correlate)."""
    a_, b_ = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if a_.shape != b_.shape or a_.ndim != 2:
        raise ValueError(f"a, b: expected two [B, N] arrays of one shape, got {a_.shape} and {b_.shape}")
    rho, tau = np.full(len(a_), np.nan), np.full(len(a_), np.nan)
    for i, (x, y) in enumerate(zip(a_, b_)):
        if np.ptp(x) == 0 or np.ptp(y) == 0:
            continue
        rho[i] = _st.spearmanr(x, y).statistic
        tau[i] = _st.kendalltau(x, y).statistic
    return rho, tau


def _kept_mask(scores: torch.Tensor, k: int) -> torch.Tensor:
    keep, _ = select_topk(scores, k)
    return torch.zeros_like(scores, dtype=torch.bool).scatter_(1, keep, True)


def topk_jaccard(a: torch.Tensor, b: torch.Tensor, keep_rate: float) -> np.ndarray:
    """Per-image Jaccard overlap of the ``ceil(keep_rate * N)`` tokens kept by scores ``a`` and by ``b``."""
    if a.shape != b.shape:
        raise ValueError(f"a, b: shapes differ: {tuple(a.shape)} vs {tuple(b.shape)}")
    k = num_keep(a.shape[1], keep_rate)
    ma, mb = _kept_mask(a, k), _kept_mask(b, k)
    return ((ma & mb).sum(1).double() / (ma | mb).sum(1).double()).numpy()


def chance_jaccard(n: int, keep_rate: float) -> float:
    """Expected Jaccard overlap of two independent uniformly random k-subsets of n tokens, k = ceil(r n)."""
    k = num_keep(n, keep_rate)
    i = np.arange(max(0, 2 * k - n), k + 1)
    p = _st.hypergeom.pmf(i, n, k, k)
    return float(np.sum(p * i / (2 * k - i)))


def loglog_fit(mean: torch.Tensor, var: torch.Tensor) -> dict[str, np.ndarray]:
    """Per image, least squares of ``log var = c + slope * log mean`` over the patches (``[B, N]`` each).

    Returns ``slope``, ``intercept`` and ``r2`` (share of the spread of log variance that log mean explains),
    each ``[B]``. Patches with a zero mean or variance are left out.
    """
    m, v = np.asarray(mean, dtype=np.float64), np.asarray(var, dtype=np.float64)
    out = {k: np.full(len(m), np.nan) for k in ("slope", "intercept", "r2")}
    for i, (x, y) in enumerate(zip(m, v)):
        ok = (x > 0) & (y > 0)
        if ok.sum() < 3:
            continue
        lx, ly = np.log(x[ok]), np.log(y[ok])
        fit = _st.linregress(lx, ly)
        out["slope"][i], out["intercept"][i], out["r2"][i] = fit.slope, fit.intercept, fit.rvalue ** 2
    return out
