"""Metrics for the token-pruning study: accuracy, faithfulness, statistics and part coverage.

Every function here is pure: arrays or tensors in, floats, tensors or small frozen dataclasses
out. Nothing reads files or global state; every random choice takes an explicit ``seed``.

Sections
--------
* Accuracy and faithfulness: :func:`correct`, :func:`top1`, :func:`agreement`,
  :func:`kl_divergence`, :func:`true_class_prob_change`.
* Uncertainty and tests: :func:`bootstrap_ci`, :func:`paired_bootstrap_diff`, :func:`mcnemar`,
  :func:`tost_paired`, :func:`seed_summary`.
* Part and object coverage: :func:`patch_grid_shape`, :func:`mask_to_patch_grid`,
  :func:`keypoints_to_patch_index`, :func:`represented_patches`, :func:`part_coverage`,
  :func:`object_coverage`.
* Token-set diversity: :func:`mean_pairwise_cosine_distance`, :func:`effective_rank`,
  :func:`diversity`.

Conventions
-----------
* "logits" are ``[B, C]``; "predictions" are ``[B]`` integer class ids. Functions that accept
  either tell them apart by the number of dimensions.
* Patch indices are row-major over the patch grid (``index = row * grid_w + col``) and exclude
  the [CLS] token, matching the order of timm's patch tokens.
* ``kept_source`` is ``[B, N_kept, N_patches]``: entry ``[b, t, p]`` is non-zero when kept
  output token ``t`` of image ``b`` stands for original patch ``p`` (a merged or fused token
  has several non-zero entries). This is what the reducers return.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from scipy import stats as _st

ArrayLike = np.ndarray | torch.Tensor | Sequence[float]

__all__ = [
    "Interval",
    "PairedDiff",
    "McNemarResult",
    "TostResult",
    "SeedSummary",
    "Diversity",
    "correct",
    "top1",
    "agreement",
    "kl_divergence",
    "true_class_prob_change",
    "bootstrap_ci",
    "bootstrap_ci_or_nan",
    "paired_bootstrap_diff",
    "mcnemar",
    "tost_paired",
    "seed_summary",
    "patch_grid_shape",
    "mask_to_patch_grid",
    "keypoints_to_patch_index",
    "represented_patches",
    "part_coverage",
    "object_coverage",
    "mean_pairwise_cosine_distance",
    "effective_rank",
    "diversity",
]


# ----------------------------------------------------------------------------------------------
# helpers
# ----------------------------------------------------------------------------------------------


def _np(x: ArrayLike, dtype: type | None = None) -> np.ndarray:
    """Return ``x`` as a numpy array (tensors are detached and moved to the CPU)."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        if x.dtype in (torch.bfloat16, torch.float16):
            x = x.float()
        x = x.numpy()
    arr = np.asarray(x)
    return arr.astype(dtype) if dtype is not None else arr


def _labels_or_argmax(x: ArrayLike) -> np.ndarray:
    """Predictions ``[B]`` from either logits ``[B, C]`` or predictions ``[B]``."""
    arr = _np(x)
    if arr.ndim == 2:
        return arr.argmax(axis=1)
    if arr.ndim == 1:
        return arr.astype(np.int64)
    raise ValueError(f"expected logits [B, C] or predictions [B], got shape {arr.shape}")


def _pair(v: int | Sequence[int], name: str) -> tuple[int, int]:
    if isinstance(v, (int, np.integer)):
        return int(v), int(v)
    t = tuple(int(i) for i in v)
    if len(t) != 2:
        raise ValueError(f"{name} must be an int or a pair (h, w), got {v!r}")
    return t  # type: ignore[return-value]


def _log_softmax64(logits: ArrayLike) -> torch.Tensor:
    t = logits if isinstance(logits, torch.Tensor) else torch.as_tensor(_np(logits))
    t = t.detach().to("cpu", torch.float64)
    if t.ndim != 2:
        raise ValueError(f"expected logits [B, C], got shape {tuple(t.shape)}")
    return torch.log_softmax(t, dim=-1)


# ----------------------------------------------------------------------------------------------
# accuracy and faithfulness
# ----------------------------------------------------------------------------------------------


def correct(logits_or_preds: ArrayLike, labels: ArrayLike) -> np.ndarray:
    """Per-image correctness ``[B]`` (bool): whether the top-1 prediction equals the label.

    This is the per-image input that :func:`mcnemar` and :func:`paired_bootstrap_diff` take.
    """
    preds = _labels_or_argmax(logits_or_preds)
    y = _np(labels).astype(np.int64).reshape(-1)
    if preds.shape != y.shape:
        raise ValueError(f"{preds.shape[0]} predictions but {y.shape[0]} labels")
    return preds == y


def top1(logits_or_preds: ArrayLike, labels: ArrayLike) -> float:
    """Top-1 accuracy in [0, 1]: share of images whose arg-max class equals the label.

    The standard ImageNet metric used by EViT (Liang et al., 2022, Table 1) and BAT
    (Long et al., 2023). Accepts logits ``[B, C]`` or predicted class ids ``[B]``.
    """
    c = correct(logits_or_preds, labels)
    if c.size == 0:
        raise ValueError("top1 of an empty batch is undefined")
    return float(c.mean())


def agreement(pred_a: ArrayLike, pred_b: ArrayLike) -> float:
    """Prediction agreement in [0, 1]: share of images where two models predict the same class.

    A label-free faithfulness measure of a pruned model to its unpruned reference (the
    "faithfulness" axis of the part-coverage/faithfulness decoupling study). Accepts logits
    ``[B, C]`` or predictions ``[B]`` for either argument.
    """
    a, b = _labels_or_argmax(pred_a), _labels_or_argmax(pred_b)
    if a.shape != b.shape:
        raise ValueError(f"shape mismatch: {a.shape} vs {b.shape}")
    if a.size == 0:
        raise ValueError("agreement of an empty batch is undefined")
    return float((a == b).mean())


def kl_divergence(
    logits_full: ArrayLike, logits_pruned: ArrayLike, per_image: bool = False
) -> float | np.ndarray:
    """KL(p_full || p_pruned) in nats between the softmax outputs of the full and pruned model.

    ``sum_c p_full[c] * (log p_full[c] - log p_pruned[c])`` per image, computed in float64 from
    log-softmax so that tiny probabilities do not underflow. This is the distribution-level
    faithfulness measure (how far pruning moves the reference model's predictive distribution).
    Returns the mean over images, or the per-image values ``[B]`` when ``per_image``.
    """
    lp, lq = _log_softmax64(logits_full), _log_softmax64(logits_pruned)
    if lp.shape != lq.shape:
        raise ValueError(f"shape mismatch: {tuple(lp.shape)} vs {tuple(lq.shape)}")
    kl = (lp.exp() * (lp - lq)).sum(dim=-1).clamp_min(0.0).numpy()
    return kl if per_image else float(kl.mean())


def true_class_prob_change(
    logits_full: ArrayLike,
    logits_pruned: ArrayLike,
    labels: ArrayLike,
    per_image: bool = False,
) -> float | np.ndarray:
    """Change of the softmax probability of the true class: ``p_pruned[y] - p_full[y]``.

    Negative values mean pruning lowered the model's confidence in the correct class (the
    "probability drop" used in deletion-style faithfulness evaluations). Returns the mean over
    images, or per-image values ``[B]`` when ``per_image``.
    """
    lp, lq = _log_softmax64(logits_full), _log_softmax64(logits_pruned)
    y = torch.as_tensor(_np(labels).astype(np.int64)).reshape(-1, 1)
    if lp.shape != lq.shape or y.shape[0] != lp.shape[0]:
        raise ValueError("logits_full, logits_pruned and labels must agree in batch size")
    d = (lq.gather(1, y).exp() - lp.gather(1, y).exp()).squeeze(1).numpy()
    return d if per_image else float(d.mean())


# ----------------------------------------------------------------------------------------------
# uncertainty and tests
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Interval:
    """A point estimate with a confidence interval ``[low, high]`` at confidence ``level``."""

    estimate: float
    low: float
    high: float
    level: float = 0.95

    def __iter__(self) -> Iterator[float]:
        """Unpack as ``estimate, low, high``."""
        return iter((self.estimate, self.low, self.high))

    @property
    def ci(self) -> list[float]:
        """``[low, high]``, the form a :class:`tokenprune.study.report.Claim` takes."""
        return [self.low, self.high]

    @property
    def half_width(self) -> float:
        return (self.high - self.low) / 2.0


def _apply_stat(stat: Callable[..., np.ndarray], samples: np.ndarray) -> np.ndarray:
    """Apply ``stat`` to each row of ``samples`` (vectorised when ``stat`` takes ``axis``)."""
    try:
        out = np.asarray(stat(samples, axis=1), dtype=np.float64)
        if out.shape == (samples.shape[0],):
            return out
    except TypeError:
        pass
    return np.apply_along_axis(stat, 1, samples).astype(np.float64)


def _bootstrap_stats(
    values: np.ndarray,
    stat: Callable[..., np.ndarray],
    n_boot: int,
    seed: int,
    max_elements: int = 4_000_000,
) -> np.ndarray:
    """``n_boot`` statistics of resamples (with replacement) of ``values``, in chunks."""
    n = values.shape[0]
    rng = np.random.default_rng(seed)
    chunk = max(1, min(n_boot, max_elements // max(n, 1)))
    out = np.empty(n_boot, dtype=np.float64)
    for start in range(0, n_boot, chunk):
        stop = min(start + chunk, n_boot)
        idx = rng.integers(0, n, size=(stop - start, n))
        out[start:stop] = _apply_stat(stat, values[idx])
    return out


def bootstrap_ci(
    values: ArrayLike,
    stat: Callable[..., np.ndarray] = np.mean,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> Interval:
    """Percentile bootstrap confidence interval of ``stat(values)`` (Efron & Tibshirani, 1993).

    Resamples the per-image ``values`` with replacement ``n_boot`` times (vectorised, in chunks
    that bound memory), and returns the ``alpha/2`` and ``1 - alpha/2`` quantiles of the
    resampled statistic around the statistic of the original sample. ``stat`` should accept an
    ``axis`` keyword (``np.mean``, ``np.median`` do); other callables are applied row by row.
    Per-image accuracy is ``values = correct(...)``; the interval of its mean is the CI of top-1.
    NaN values are dropped first (for example images without annotated parts).
    """
    v = _np(values, np.float64).reshape(-1)
    v = v[~np.isnan(v)]
    if v.size == 0:
        raise ValueError("bootstrap_ci needs at least one non-NaN value")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    est = float(stat(v))
    boots = _bootstrap_stats(v, stat, n_boot, seed)
    low, high = np.quantile(boots, [alpha / 2.0, 1.0 - alpha / 2.0])
    return Interval(est, float(low), float(high), 1.0 - alpha)


def bootstrap_ci_or_nan(values: ArrayLike, n_boot: int = 2000, alpha: float = 0.05, seed: int = 0) -> Interval:
    """:func:`bootstrap_ci` of the mean, or an all-NaN :class:`Interval` when no value is finite (a quantity
    undefined on every image, such as a rank correlation of constant scores)."""
    v = _np(values, np.float64).reshape(-1)
    if not np.isfinite(v).any():
        return Interval(math.nan, math.nan, math.nan, 1.0 - alpha)
    return bootstrap_ci(v, n_boot=n_boot, alpha=alpha, seed=seed)


@dataclass(frozen=True)
class PairedDiff:
    """Mean of paired differences ``a - b`` with a bootstrap CI and a two-sided p-value."""

    estimate: float
    low: float
    high: float
    p_value: float
    n: int
    level: float = 0.95

    @property
    def ci(self) -> list[float]:
        return [self.low, self.high]


def paired_bootstrap_diff(
    a: ArrayLike,
    b: ArrayLike,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
) -> PairedDiff:
    """Paired bootstrap of ``mean(a) - mean(b)`` for per-image metrics measured on the same images.

    Images are resampled as pairs, so the correlation between the two conditions is kept (the
    unpaired interval would be far too wide). The CI is the percentile interval of the
    resampled mean difference. The two-sided p-value tests H0: mean difference = 0 by
    centring the bootstrap distribution on the null (Hall & Wilson, 1991):
    ``p = (1 + #{|d* - d| >= |d|}) / (n_boot + 1)``.
    """
    x, y = _np(a, np.float64).reshape(-1), _np(b, np.float64).reshape(-1)
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length: {x.size} vs {y.size}")
    keep = ~(np.isnan(x) | np.isnan(y))
    d = x[keep] - y[keep]
    if d.size == 0:
        raise ValueError("paired_bootstrap_diff needs at least one complete pair")
    est = float(d.mean())
    boots = _bootstrap_stats(d, np.mean, n_boot, seed)
    low, high = np.quantile(boots, [alpha / 2.0, 1.0 - alpha / 2.0])
    extreme = np.abs(boots - est) >= abs(est) - 1e-12
    p = float((1 + extreme.sum()) / (n_boot + 1))
    return PairedDiff(est, float(low), float(high), min(p, 1.0), int(d.size), 1.0 - alpha)


@dataclass(frozen=True)
class McNemarResult:
    """McNemar's test on paired correctness. Unpacks as ``statistic, p_value, n01, n10``.

    ``n01``: images model A gets wrong and model B gets right; ``n10``: A right, B wrong.
    ``method`` is ``"exact"`` (two-sided binomial test on the discordant pairs; ``statistic``
    is ``min(n01, n10)``) or ``"chi2_cc"`` (chi-square with continuity correction).
    """

    statistic: float
    p_value: float
    n01: int
    n10: int
    method: str

    def __iter__(self) -> Iterator[float | int]:
        return iter((self.statistic, self.p_value, self.n01, self.n10))


def mcnemar(correct_a: ArrayLike, correct_b: ArrayLike, exact_below: int = 25) -> McNemarResult:
    """McNemar's test (McNemar, 1947) that two classifiers have the same accuracy on paired images.

    Only discordant images carry information. With ``n = n01 + n10 < exact_below`` (25 by
    default, the usual rule) the exact two-sided binomial test of ``n10 ~ Bin(n, 1/2)`` is used;
    otherwise the chi-square statistic with Edwards' continuity correction
    ``(|n01 - n10| - 1)^2 / (n01 + n10)`` on one degree of freedom.
    """
    ca = _np(correct_a).astype(bool).reshape(-1)
    cb = _np(correct_b).astype(bool).reshape(-1)
    if ca.shape != cb.shape:
        raise ValueError(f"paired samples differ in length: {ca.size} vs {cb.size}")
    n01 = int(np.sum(~ca & cb))
    n10 = int(np.sum(ca & ~cb))
    n = n01 + n10
    if n < exact_below:
        k = min(n01, n10)
        p = 1.0 if n == 0 else min(1.0, 2.0 * float(_st.binom.cdf(k, n, 0.5)))
        return McNemarResult(float(k), p, n01, n10, "exact")
    stat = (abs(n01 - n10) - 1.0) ** 2 / n
    return McNemarResult(float(stat), float(_st.chi2.sf(stat, 1)), n01, n10, "chi2_cc")


@dataclass(frozen=True)
class TostResult:
    """Two one-sided tests for equivalence of paired means within ``(-margin, +margin)``."""

    p_value: float
    equivalent: bool
    mean_diff: float
    margin: float
    alpha: float
    p_lower: float
    p_upper: float
    ci_low: float
    ci_high: float
    n: int

    @property
    def ci(self) -> list[float]:
        """The ``1 - 2 alpha`` t-interval of the mean difference; inside the margin iff equivalent."""
        return [self.ci_low, self.ci_high]


def tost_paired(a: ArrayLike, b: ArrayLike, margin: float, alpha: float = 0.05) -> TostResult:
    """Paired TOST equivalence test (Schuirmann, 1987) of ``mean(a - b)`` within ``±margin``.

    Tests H0a: mean difference <= -margin and H0b: mean difference >= +margin with one-sided
    paired t-tests on ``d = a - b`` (df = n - 1); the TOST p-value is the larger of the two, and
    the means are declared equivalent when it is below ``alpha`` (equivalently, the
    ``1 - 2 alpha`` t-interval lies inside the margin). Use it for "same faithfulness" claims,
    where a non-significant difference test would not be evidence of equality.
    """
    if margin <= 0:
        raise ValueError(f"margin must be positive, got {margin}")
    x, y = _np(a, np.float64).reshape(-1), _np(b, np.float64).reshape(-1)
    if x.shape != y.shape:
        raise ValueError(f"paired samples differ in length: {x.size} vs {y.size}")
    keep = ~(np.isnan(x) | np.isnan(y))
    d = x[keep] - y[keep]
    n = int(d.size)
    if n < 2:
        raise ValueError("tost_paired needs at least two complete pairs")
    mean = float(d.mean())
    se = float(d.std(ddof=1) / math.sqrt(n))
    df = n - 1
    if se == 0.0:
        p_lo = 0.0 if mean > -margin else 1.0
        p_hi = 0.0 if mean < margin else 1.0
        lo = hi = mean
    else:
        p_lo = float(_st.t.sf((mean + margin) / se, df))
        p_hi = float(_st.t.cdf((mean - margin) / se, df))
        q = float(_st.t.ppf(1.0 - alpha, df))
        lo, hi = mean - q * se, mean + q * se
    p = max(p_lo, p_hi)
    return TostResult(p, bool(p < alpha), mean, float(margin), alpha, p_lo, p_hi, lo, hi, n)


@dataclass(frozen=True)
class SeedSummary:
    """Mean, sample standard deviation (ddof=1), count and a Student-t interval over seeds."""

    mean: float
    std: float
    n: int
    low: float
    high: float
    level: float = 0.95

    @property
    def ci(self) -> list[float]:
        return [self.low, self.high]


def seed_summary(values: ArrayLike, alpha: float = 0.05) -> SeedSummary:
    """Summarise one metric measured over independent seeds (training runs).

    ``mean ± t_{1-alpha/2, n-1} * std / sqrt(n)``. With a single seed the standard deviation
    and the interval are NaN: one run says nothing about run-to-run spread.
    """
    v = _np(values, np.float64).reshape(-1)
    v = v[~np.isnan(v)]
    n = int(v.size)
    if n == 0:
        raise ValueError("seed_summary needs at least one value")
    mean = float(v.mean())
    if n == 1:
        return SeedSummary(mean, math.nan, 1, math.nan, math.nan, 1.0 - alpha)
    std = float(v.std(ddof=1))
    h = float(_st.t.ppf(1.0 - alpha / 2.0, n - 1)) * std / math.sqrt(n)
    return SeedSummary(mean, std, n, mean - h, mean + h, 1.0 - alpha)


# ----------------------------------------------------------------------------------------------
# part and object coverage
# ----------------------------------------------------------------------------------------------


def patch_grid_shape(
    img_size: int | Sequence[int],
    patch_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
) -> tuple[int, int]:
    """Patch-grid ``(rows, cols)`` of a patch embedding: ``floor((H + 2 pad - p) / s) + 1``.

    This is the output size of the patch-embedding convolution (kernel ``patch_size``, stride
    ``stride``, default = ``patch_size``). A stride below the patch size gives overlapping
    patches (varmedad uses stride = 3/4 of the patch).
    """
    h, w = _pair(img_size, "img_size")
    ph, pw = _pair(patch_size, "patch_size")
    sh, sw = _pair(stride if stride is not None else patch_size, "stride")
    qh, qw = _pair(padding, "padding")
    gh, gw = (h + 2 * qh - ph) // sh + 1, (w + 2 * qw - pw) // sw + 1
    if gh <= 0 or gw <= 0:
        raise ValueError(f"image {h}x{w} is smaller than one patch {ph}x{pw}")
    return gh, gw


def mask_to_patch_grid(
    mask: np.ndarray | torch.Tensor,
    patch_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    grid: Sequence[int] | None = None,
    min_fraction: float = 0.0,
    num_parts: int | None = None,
    padding: int | Sequence[int] = 0,
    flatten: bool = True,
) -> torch.Tensor:
    """Map a per-pixel mask to the patches that contain it.

    ``mask`` is ``[H, W]`` or ``[B, H, W]`` at the model's input resolution (after resize and
    crop), either boolean (object / foreground) or integer part ids (0 = background, parts
    1..K). A patch contains a part when the share of its pixels in that part is positive and at
    least ``min_fraction`` (``0`` = "any pixel"). Patch windows are those of the patch-embedding
    convolution (``patch_size``, ``stride``, ``padding``), so overlapping strides are handled;
    with padding, the share counts only pixels inside the image.

    Returns bool ``[..., N]`` for a boolean mask and ``[..., K, N]`` for a part-id mask
    (``K = num_parts`` or the largest id present), with ``N = rows * cols`` row-major
    (``[..., rows, cols]`` when ``flatten`` is False). If ``grid`` is given it must equal the
    computed grid, which guards against a mask at the wrong resolution.
    """
    m = mask if isinstance(mask, torch.Tensor) else torch.as_tensor(np.asarray(mask))
    m = m.detach().cpu()
    if m.ndim not in (2, 3):
        raise ValueError(f"mask must be [H, W] or [B, H, W], got shape {tuple(m.shape)}")
    batched = m.ndim == 3
    if not batched:
        m = m.unsqueeze(0)
    is_bool = m.dtype == torch.bool
    if is_bool:
        planes = m.unsqueeze(1).to(torch.float32)  # [B, 1, H, W]
    else:
        if m.is_floating_point():
            raise ValueError("mask must be boolean or integer part ids, not floating point")
        k = int(num_parts) if num_parts is not None else int(m.max().item()) if m.numel() else 0
        ids = torch.arange(1, k + 1, dtype=m.dtype).view(1, k, 1, 1)
        planes = (m.unsqueeze(1) == ids).to(torch.float32)  # [B, K, H, W]
    ph, pw = _pair(patch_size, "patch_size")
    s = _pair(stride if stride is not None else patch_size, "stride")
    pad = _pair(padding, "padding")
    expect = patch_grid_shape(tuple(m.shape[-2:]), (ph, pw), s, pad)
    if grid is not None and tuple(int(g) for g in grid) != expect:
        raise ValueError(
            f"mask of size {tuple(m.shape[-2:])} gives a {expect} patch grid, expected "
            f"{tuple(grid)}: is the mask at the model's input resolution?"
        )
    b, c = planes.shape[:2]
    frac = F.avg_pool2d(
        planes.reshape(b * c, 1, *planes.shape[-2:]),
        kernel_size=(ph, pw),
        stride=s,
        padding=pad,
        count_include_pad=False,
    ).reshape(b, c, *expect)
    hit = (frac > 0) & (frac >= min_fraction - 1e-9)
    if is_bool:
        hit = hit[:, 0]
    if flatten:
        hit = hit.flatten(-2)
    return hit if batched else hit[0]


def keypoints_to_patch_index(
    kp_xy: np.ndarray | torch.Tensor,
    visible: np.ndarray | torch.Tensor,
    img_size: int | Sequence[int],
    patch_size: int | Sequence[int],
    stride: int | Sequence[int] | None = None,
    padding: int | Sequence[int] = 0,
) -> torch.Tensor:
    """Patch membership of part keypoints (e.g. CUB-200-2011's 15 part locations).

    ``kp_xy`` is ``[..., K, 2]`` in pixels of the model input (x = column, y = row, already
    mapped through resize and crop); ``visible`` is ``[..., K]``. A keypoint belongs to every
    patch whose window ``[c*s - pad, c*s - pad + p)`` contains it, so with overlapping strides
    it may belong to several patches. Keypoints on the far image border are clamped inside.

    Returns bool ``[..., K, N]``: row ``k`` is the patch set of part ``k``; rows of invisible
    keypoints, or keypoints outside every patch window, are all False (the part then counts as
    not annotated in :func:`part_coverage`). Pass it to :func:`part_coverage` directly.
    """
    xy = kp_xy if isinstance(kp_xy, torch.Tensor) else torch.as_tensor(np.asarray(kp_xy))
    xy = xy.detach().cpu().to(torch.float64)
    vis = visible if isinstance(visible, torch.Tensor) else torch.as_tensor(np.asarray(visible))
    vis = vis.detach().cpu().bool()
    if xy.shape[-1] != 2 or xy.shape[:-1] != vis.shape:
        raise ValueError(f"kp_xy {tuple(xy.shape)} must be [..., K, 2] matching visible {tuple(vis.shape)}")
    h, w = _pair(img_size, "img_size")
    ph, pw = _pair(patch_size, "patch_size")
    sh, sw = _pair(stride if stride is not None else patch_size, "stride")
    qh, qw = _pair(padding, "padding")
    gh, gw = patch_grid_shape((h, w), (ph, pw), (sh, sw), (qh, qw))
    x = xy[..., 0].clamp(0.0, w - 1e-6)
    y = xy[..., 1].clamp(0.0, h - 1e-6)
    x0 = torch.arange(gw, dtype=torch.float64) * sw - qw  # window starts, columns
    y0 = torch.arange(gh, dtype=torch.float64) * sh - qh
    in_col = (x.unsqueeze(-1) >= x0) & (x.unsqueeze(-1) < x0 + pw)  # [..., K, gw]
    in_row = (y.unsqueeze(-1) >= y0) & (y.unsqueeze(-1) < y0 + ph)  # [..., K, gh]
    member = in_row.unsqueeze(-1) & in_col.unsqueeze(-2)  # [..., K, gh, gw]
    member = member.flatten(-2) & vis.unsqueeze(-1)
    return member


def represented_patches(kept_source: torch.Tensor, min_weight: float = 0.0) -> torch.Tensor:
    """Bool ``[B, N_patches]``: patches stood for by at least one kept token.

    A patch counts when some kept token's source weight for it exceeds ``min_weight``; merged
    tokens therefore cover every patch they absorbed. Whether a catch-all fused token (EViT's
    fused token, which stands for every pruned patch) should count is the caller's choice:
    drop its row from ``kept_source`` to measure what the *attentive* tokens keep.
    """
    src = kept_source if isinstance(kept_source, torch.Tensor) else torch.as_tensor(np.asarray(kept_source))
    src = src.detach().cpu()
    if src.ndim == 2:
        src = src.unsqueeze(0)
    if src.ndim != 3:
        raise ValueError(f"kept_source must be [B, N_kept, N_patches], got {tuple(src.shape)}")
    if src.dtype == torch.bool:
        return src.any(dim=1)
    return (src > min_weight).any(dim=1)


def _as_bool(x: np.ndarray | torch.Tensor) -> torch.Tensor:
    t = x if isinstance(x, torch.Tensor) else torch.as_tensor(np.asarray(x))
    return t.detach().cpu().bool()


def part_coverage(
    part_patch_sets: np.ndarray | torch.Tensor,
    kept_source: np.ndarray | torch.Tensor,
    variant: str = "parts",
    min_weight: float = 0.0,
) -> torch.Tensor:
    """Per-image part coverage of a pruned token set, float64 ``[B]`` in [0, 1] (NaN: no parts).

    ``part_patch_sets`` is bool ``[B, K, N_patches]``: the patches of each annotated part (from
    :func:`keypoints_to_patch_index` or a part-id mask through :func:`mask_to_patch_grid`).
    ``kept_source`` is ``[B, N_kept, N_patches]`` (see the module docstring); merged tokens
    count for every patch they stand for.

    * ``variant="parts"``: share of annotated parts (parts with a non-empty patch set) that
      have at least one patch represented by a kept token.
    * ``variant="patches"``: share of part patches (the union over parts) that are represented.

    Average with ``torch.nanmean`` (or :func:`bootstrap_ci`, which drops NaN) over images.
    """
    parts = _as_bool(part_patch_sets)
    if parts.ndim == 2:
        parts = parts.unsqueeze(0)
    src = kept_source if isinstance(kept_source, torch.Tensor) else torch.as_tensor(np.asarray(kept_source))
    rep = represented_patches(src.detach().cpu(), min_weight)
    if parts.ndim != 3 or parts.shape[0] != rep.shape[0] or parts.shape[-1] != rep.shape[-1]:
        raise ValueError(
            f"part_patch_sets {tuple(parts.shape)} must be [B, K, N] matching kept_source "
            f"[B, N_kept, N] with B={rep.shape[0]}, N={rep.shape[-1]} (patch tokens only, no [CLS])"
        )
    if variant == "parts":
        annotated = parts.any(dim=-1)  # [B, K]
        covered = (parts & rep.unsqueeze(1)).any(dim=-1) & annotated
        num, den = covered.sum(-1), annotated.sum(-1)
    elif variant == "patches":
        union = parts.any(dim=1)  # [B, N]
        num, den = (union & rep).sum(-1), union.sum(-1)
    else:
        raise ValueError(f"variant must be 'parts' or 'patches', got {variant!r}")
    num, den = num.to(torch.float64), den.to(torch.float64)
    return torch.where(den > 0, num / den.clamp_min(1), torch.full_like(den, math.nan))


def object_coverage(
    mask_patches: np.ndarray | torch.Tensor,
    kept_source: np.ndarray | torch.Tensor,
    min_weight: float = 0.0,
) -> torch.Tensor:
    """Per-image share of object patches represented by kept tokens, float64 ``[B]`` (NaN: empty).

    ``mask_patches`` is bool ``[B, N_patches]`` (an object mask or bounding box through
    :func:`mask_to_patch_grid`); ``kept_source`` as in :func:`part_coverage`.
    """
    obj = _as_bool(mask_patches)
    if obj.ndim == 1:
        obj = obj.unsqueeze(0)
    return part_coverage(obj.unsqueeze(1), kept_source, variant="patches", min_weight=min_weight)


# ----------------------------------------------------------------------------------------------
# diversity of a token set
# ----------------------------------------------------------------------------------------------


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


# ----------------------------------------------------------------------------------------------
# trained configurations: paired seeds and paired images
# ----------------------------------------------------------------------------------------------

__all__ += ["seed_image_bootstrap_diff", "holm_adjust"]


def _group_index(groups: Optional[ArrayLike], n: int) -> tuple[Optional[np.ndarray], np.ndarray, np.ndarray]:
    """For ``groups`` ``[N]``: the order that sorts them, where each group starts in it, and each group's size;
    ``(None, arange(N), ones(N))`` without groups."""
    if groups is None:
        return None, np.arange(n), np.ones(n, dtype=np.int64)
    g = np.asarray(groups)
    if g.shape != (n,):
        raise ValueError(f"groups: expected shape ({n},), one group per image, got {g.shape}")
    order = np.argsort(g, kind="stable")
    gs = g[order]
    starts = np.r_[0, np.flatnonzero(gs[1:] != gs[:-1]) + 1]
    return order, starts, np.diff(np.r_[starts, n])


def holm_adjust(p_values: ArrayLike) -> np.ndarray:
    """Holm's step-down adjustment of the p-values of one family of tests (Holm, 1979): the ``i``-th smallest
    becomes ``max_{j <= i} min(1, (m - j + 1) p_(j))``; reject at level ``alpha`` where the adjusted p is at most
    ``alpha``. Returns the adjusted p-values in the input's order."""
    p = np.asarray(p_values, dtype=np.float64).reshape(-1)
    if np.isnan(p).any() or (p < 0).any() or (p > 1).any():
        raise ValueError(f"p_values: expected values in [0, 1], got {p.tolist()}")
    m = p.size
    order = np.argsort(p, kind="stable")
    adj = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj
    return out


def seed_image_bootstrap_diff(
    a: ArrayLike,
    b: ArrayLike,
    n_boot: int = 2000,
    alpha: float = 0.05,
    seed: int = 0,
    groups: Optional[ArrayLike] = None,
) -> PairedDiff:
    """Two-stage bootstrap of ``mean(a) - mean(b)`` for per-image metrics of trained models, ``[S, N]``.

    Row ``s`` holds the per-image values (e.g. correctness) of the model trained with seed ``s``, on the same
    ``N`` images in the same order for ``a`` and ``b``; seeds pair too (seed ``s`` of ``a`` and of ``b`` saw
    the same data in the same order). Each resample draws ``S`` seeds with replacement, then ``N`` images with
    replacement (Davison & Hinkley, 1997, Sec. 3.8: resample the top level, then within it), and takes the
    mean difference, so the interval holds both the training noise (across seeds) and the sampling of test
    images. A one-row ``b`` (an untrained reference) is compared with every seed of ``a``. With few seeds the
    seed stage understates the spread by about ``(S - 1) / S``; report the per-seed values beside it.
    The two-sided p-value centres the bootstrap distribution on the null, as :func:`paired_bootstrap_diff`.
    ``n`` of the result is the number of images. ``groups`` (``[N]``, e.g. the source item each test image was made
    from): the second stage resamples groups instead of images, so images that share a source are not counted as
    independent (the mean is then over the drawn groups' images).
    """
    x, y = _np(a, np.float64), _np(b, np.float64)
    if x.ndim == 1:
        x = x[None]
    if y.ndim == 1:
        y = y[None]
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1] or (x.shape[0] != y.shape[0] and 1 not in (x.shape[0], y.shape[0])):
        raise ValueError(f"a, b: expected [S, N] arrays with the same N and the same S (or S = 1), got {x.shape}, {y.shape}")
    if not 0.0 < alpha < 1.0:
        raise ValueError(f"alpha must be in (0, 1), got {alpha}")
    d = x - y
    if np.isnan(d).any():
        raise ValueError("seed_image_bootstrap_diff: NaN values are not supported")
    s, n = d.shape
    order, starts, counts = _group_index(groups, n)
    m = len(starts)
    rng = np.random.default_rng(seed)
    est = float(d.mean())
    boots = np.empty(n_boot, dtype=np.float64)
    chunk = max(1, min(n_boot, 4_000_000 // max(n, 1)))
    for start in range(0, n_boot, chunk):
        stop = min(start + chunk, n_boot)
        k = stop - start
        weights = np.stack([np.bincount(rng.integers(0, s, s), minlength=s) for _ in range(k)]) / s  # [k, S]
        per_image = weights @ d                                                                          # [k, N]
        if order is None:
            idx = rng.integers(0, n, size=(k, n))
            boots[start:stop] = np.take_along_axis(per_image, idx, axis=1).mean(1)
        else:
            sums = np.add.reduceat(per_image[:, order], starts, axis=1)                                  # [k, G]
            idx = rng.integers(0, m, size=(k, m))
            boots[start:stop] = np.take_along_axis(sums, idx, axis=1).sum(1) / counts[idx].sum(1)
    low, high = np.quantile(boots, [alpha / 2.0, 1.0 - alpha / 2.0])
    extreme = np.abs(boots - est) >= abs(est) - 1e-12
    p = float((1 + extreme.sum()) / (n_boot + 1))
    return PairedDiff(est, float(low), float(high), min(p, 1.0), int(n), 1.0 - alpha)
