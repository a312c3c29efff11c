"""Named variants of the scores of Igaue & Aizawa, arXiv 2507.19175 (Eq. 6 and Eq. 7), for sensitivity checks.

The primary readings, registered below: ``attention_variance`` (Eq. 6 with the
square restored: population variance over the H heads of the [CLS] attention a patch receives),
``attention_variance_eq6`` (Eq. 6 as printed, identically 0), ``attention_medad`` (Eq. 7 read per patch:
lower median over heads of ``|a_h - median_h a|``) and ``attention_medad_global`` (Eq. 7 with the inner median
per head over the patches). This module registers the remaining readings, so a notebook can show how much
each free choice moves the ranking:

- ``attention_variance_eq6_float``: Eq. 6 as printed, evaluated elementwise in floating point. The exact
  value is 0; what is left is rounding residue (about 1e-10 for attention weights), whose signs rank the
  tokens: a naive implementation keeps an arbitrary, input-dependent set, not the tie-break's first k.
- ``attention_medad_midpoint``: Eq. 7 per patch with numpy's median convention (mean of the two middle values
  for an even head count, H = 6 for DeiT-S), both for the inner and the outer median.
- ``attention_medad_pooled``: Eq. 7 with the inner median over all heads and patches of the image, the outer
  (lower) median over heads per patch.
- ``attention_cv2``: the squared coefficient of variation across heads, ``var_h(a) / mean_h(a)^2``. Not in the
  paper: it is the part of the variance that the mean does not already determine (if heads' attention were
  ``mean x`` an i.i.d. spread, the variance would be ``cv^2 x mean^2`` and rank patches exactly as the mean
  does). It tests whether "diversity" carries information beyond the mean.

Importing this module registers them. :func:`fusion_weight_spread` measures what Eq. 8's temperature does to the
fusion weights on given scores (the paper gives T only as a number in (0, 1)).
"""
from __future__ import annotations

from typing import Optional

import torch

from tokenprune.core.schedule import num_keep
from tokenprune.core.reducers import Reduction, fuse_cost, fuse_rest, gather_tokens, keep_topk, register_reducer
from tokenprune.core.scorers import SCORERS, TokenContext, register_scorer, require_field, select_topk

__all__ = ["attention_variance_eq6_float", "attention_medad_midpoint", "attention_medad_pooled", "attention_cv2",
           "VARIANT_SCORERS", "fusion_weight_spread", "fusion_weights", "fusion_weight_distance"]

#: the scorers this module registers
VARIANT_SCORERS: tuple[str, ...] = ("attention_variance_eq6_float", "attention_medad_midpoint",
                                    "attention_medad_pooled", "attention_cv2")


def _register(name: str, reference: str):
    """Register once (re-importing the module, e.g. under a notebook kernel restart, must not fail)."""
    def deco(fn):
        if name in SCORERS:
            return fn
        return register_scorer(name, needs=("cls_attn",), reference=reference)(fn)
    return deco


def _prunable_cls(ctx: TokenContext, name: str) -> torch.Tensor:
    return require_field(ctx, "cls_attn", name)[:, :, ctx.num_prefix_tokens:]


@_register("attention_variance_eq6_float",
           "arXiv 2507.19175, Eq. 6 as printed, evaluated elementwise in floating point (rounding residue only)")
def attention_variance_eq6_float(ctx: TokenContext) -> torch.Tensor:
    """``(1/H) sum_h (a_h - mean_h a)`` computed term by term: 0 up to rounding, so it ranks by rounding error."""
    a = _prunable_cls(ctx, "attention_variance_eq6_float")
    return (a - a.mean(dim=1, keepdim=True)).mean(dim=1)


def _mid_median(t: torch.Tensor, dim: int) -> torch.Tensor:
    """numpy's median: the mean of the two middle values for an even count."""
    return t.float().quantile(0.5, dim=dim).to(t.dtype)


@_register("attention_medad_midpoint",
           "arXiv 2507.19175, Eq. 7 per patch, numpy median convention (mean of the two middle values)")
def attention_medad_midpoint(ctx: TokenContext) -> torch.Tensor:
    """Per-patch MedAD across heads with midpoint medians (numpy's ``median``), inner and outer."""
    a = _prunable_cls(ctx, "attention_medad_midpoint")
    med = _mid_median(a, dim=1).unsqueeze(1)
    return _mid_median((a - med).abs(), dim=1)


@_register("attention_medad_pooled",
           "arXiv 2507.19175, Eq. 7, reading: inner median over all heads and patches, outer over heads")
def attention_medad_pooled(ctx: TokenContext) -> torch.Tensor:
    """Absolute deviation of each (head, patch) weight from the image's median over all heads and patches,
    then the lower median over heads per patch."""
    a = _prunable_cls(ctx, "attention_medad_pooled")
    med = a.flatten(1).median(dim=1).values[:, None, None]
    return (a - med).abs().median(dim=1).values


@_register("attention_cv2",
           "not in arXiv 2507.19175: variance over heads / squared head mean (diversity beyond the mean)")
def attention_cv2(ctx: TokenContext) -> torch.Tensor:
    """Squared coefficient of variation of a patch's [CLS] attention across heads (scale-free spread)."""
    a = _prunable_cls(ctx, "attention_cv2")
    m = a.mean(dim=1)
    v = (a - m.unsqueeze(1)).pow(2).mean(dim=1)
    return v / m.pow(2).clamp_min(torch.finfo(a.dtype).tiny)


def fusion_weight_spread(scores: torch.Tensor, keep_rate: float, temperature: float) -> torch.Tensor:
    """How evenly Eq. 8 spreads the fused token over the pruned tokens, per image (``[B]``, in (0, 1]).

    The pruned set is what :func:`tokenprune.methods.varmedad.fuse_softmax` fuses at this keep rate (the
    ``N - ceil(r N)`` lowest scores); its weights are ``softmax(s_i / T)``. Returned: the effective number of
    fused tokens, ``exp(entropy of the weights)``, as a fraction of the pruned count: 1 means the plain mean
    (``T`` large against the spread of the scores), ``1 / n_pruned`` means a single token (``T -> 0``).
    """
    if not temperature > 0:
        raise ValueError(f"temperature: must be > 0, got {temperature!r}")
    k = num_keep(scores.shape[1], keep_rate)
    _, rest = select_topk(scores, k)
    if rest.shape[1] == 0:
        return torch.ones(scores.shape[0], dtype=torch.float64)
    s = torch.gather(scores.double(), 1, rest)
    logw = torch.log_softmax(s / temperature, dim=1)
    entropy = -(logw.exp() * logw).sum(1)
    return entropy.exp() / rest.shape[1]


def fusion_weights(scores: torch.Tensor, keep_rate: float, temperature: Optional[float]) -> torch.Tensor:
    """The Eq. 8 weights ``softmax(s_i / T)`` over the pruned set at ``keep_rate`` (the ``N - ceil(r N)`` lowest
    scores, ordered by descending score as :func:`fuse_softmax` sees them), float64 ``[B, n_pruned]``;
    ``temperature=None``: the uniform weights of a plain mean (``T -> inf``)."""
    k = num_keep(scores.shape[1], keep_rate)
    _, rest = select_topk(scores, k)
    if temperature is None:
        return torch.full(rest.shape, 1.0 / max(rest.shape[1], 1), dtype=torch.float64)
    if not temperature > 0:
        raise ValueError(f"temperature: must be > 0 or None, got {temperature!r}")
    return torch.softmax(torch.gather(scores.double(), 1, rest) / temperature, dim=1)


def fusion_weight_distance(scores: torch.Tensor, keep_rate: float, temperature: Optional[float],
                           other: Optional[float] = None) -> torch.Tensor:
    """Per image (``[B]``, in [0, 1)): the total-variation distance ``1/2 sum_i |w_T,i - w_T',i|`` between the
    Eq. 8 weights at ``temperature`` and at ``other`` (None: the uniform weights) on the same pruned set.
    0 means the two temperatures build the same fused token; ``1 - 1/n_pruned`` a single token against the
    plain mean. Whether a tested T *can* change the fused token is this distance, not the value of T."""
    if scores.shape[1] - num_keep(scores.shape[1], keep_rate) <= 0:     # nothing pruned, nothing fused
        return torch.zeros(scores.shape[0], dtype=torch.float64)
    a = fusion_weights(scores, keep_rate, temperature)
    b = fusion_weights(scores, keep_rate, other)
    return 0.5 * (a - b).abs().sum(1)


# ----------------------------------------------------------------------------------------------
# Scores (Eqs. 5-7) and fusion (Eq. 8)
# ----------------------------------------------------------------------------------------------

@register_scorer("attention_variance", needs=("cls_attn",),
                 reference="Igaue & Aizawa, arXiv 2507.19175, Eq. 6 with the square restored")
def attention_variance(ctx: TokenContext) -> torch.Tensor:
    """Population variance over heads of the [CLS] attention each patch receives:
    ``(1/H) sum_h (a_h - mean_h a)^2`` (Eq. 6 as it must read; the printed Eq. 6 omits the square)."""
    a = require_field(ctx, "cls_attn", "attention_variance")[:, :, ctx.num_prefix_tokens:]
    return (a - a.mean(dim=1, keepdim=True)).pow(2).mean(dim=1)


@register_scorer("attention_variance_eq6", needs=("cls_attn",),
                 reference="arXiv 2507.19175, Eq. 6 exactly as printed: (1/H) sum_h (a_h - mean_h a), identically 0")
def attention_variance_eq6(ctx: TokenContext) -> torch.Tensor:
    """Eq. 6 as printed, without the square. The mean deviation from the mean is 0 for every input,
    so selection degenerates to the tie-break: the first k tokens in raster order. Kept to demonstrate
    the defect.

    Evaluated by linearity, ``(1/H) sum_h (a_h - mean) = mean_h(a) - mean_h(a)``, so the floating-point
    result is the exact 0 of the algebra (NaN stays NaN). The literal elementwise evaluation leaves
    rounding residues of order ``eps * mean`` (about 1e-10) whose signs would rank the tokens by
    rounding error instead; ``tokenprune.methods.varmedad`` registers it as ``attention_variance_eq6_float``."""
    a = require_field(ctx, "cls_attn", "attention_variance_eq6")[:, :, ctx.num_prefix_tokens:]
    m = a.mean(dim=1)
    return m - m


def _lower_median(t: torch.Tensor, dim: int) -> torch.Tensor:
    return t.median(dim=dim).values


@register_scorer("attention_medad", needs=("cls_attn",),
                 reference="arXiv 2507.19175, Eq. 7, read per patch: median over heads of |a_h - median_h a|")
def attention_medad(ctx: TokenContext) -> torch.Tensor:
    """Median absolute deviation of a patch's [CLS] attention across heads (Eq. 7, per-patch reading).

    Even-head convention: the *lower* median (torch.median), i.e. the (H/2)-th smallest of H values.
    With H = 6 this is the 3rd smallest; numpy's median would average the 3rd and 4th. We state
    and test this choice (see tests/test_scorers.py).
    """
    a = require_field(ctx, "cls_attn", "attention_medad")[:, :, ctx.num_prefix_tokens:]
    med = _lower_median(a, dim=1).unsqueeze(1)
    return _lower_median((a - med).abs(), dim=1)


@register_scorer("attention_medad_global", needs=("cls_attn",),
                 reference="arXiv 2507.19175, Eq. 7, alternative reading: medians per head over patches")
def attention_medad_global(ctx: TokenContext) -> torch.Tensor:
    """Alternative reading of Eq. 7: per head, the absolute deviation of each patch's attention from
    that head's median over patches, then the (lower) median over heads."""
    a = require_field(ctx, "cls_attn", "attention_medad_global")[:, :, ctx.num_prefix_tokens:]
    med = _lower_median(a, dim=2).unsqueeze(2)
    return _lower_median((a - med).abs(), dim=1)



def check_temperature(temperature: float = 1.0, **_) -> None:
    """Eq. 8's temperature must be a number > 0."""
    if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not temperature > 0:
        raise ValueError(f"temperature: must be a number > 0, got {temperature!r}")


@register_reducer("fuse_softmax", adds_tokens=1, cost=fuse_cost, check=check_temperature,
                  reference="Igaue & Aizawa, arXiv 2507.19175, Eq. 8: pruned tokens fused with softmax(score / T)")
def fuse_softmax(ctx: TokenContext, scores: torch.Tensor, n_keep: int, temperature: float = 1.0) -> Reduction:
    """Keep the top ``n_keep`` and append one token: the pruned tokens averaged with weights
    ``softmax(s_i / T)`` over the pruned set (Eq. 8). ``T -> 0`` keeps only the best pruned token,
    ``T -> inf`` gives the plain mean."""
    check_temperature(temperature)
    selection = keep_topk(ctx, scores, n_keep, with_rest=True)
    w = torch.softmax(gather_tokens(scores, selection.rest_idx).float() / temperature, dim=1)
    return fuse_rest(ctx, selection, weights=w)
