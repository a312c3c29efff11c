"""Accuracy and faithfulness of a (pruned) classifier: top-1, agreement with the unpruned model, KL divergence
and the change of the true class's probability.

Every function here is pure: arrays or tensors in, floats or arrays out. "logits" are ``[B, C]``; "predictions"
are ``[B]`` integer class ids; functions that accept either tell them apart by the number of dimensions.
Intervals and tests on these per-image values: :mod:`tokenprune.measure.intervals`,
:mod:`tokenprune.measure.significance`.
"""
from __future__ import annotations

import numpy as np
import torch

from tokenprune.measure.arrays import ArrayLike, as_numpy

__all__ = [
    "correct",
    "top1",
    "agreement",
    "kl_divergence",
    "true_class_prob_change",
]


def _labels_or_argmax(x: ArrayLike) -> np.ndarray:
    """Predictions ``[B]`` from either logits ``[B, C]`` or predictions ``[B]``."""
    arr = as_numpy(x)
    if arr.ndim == 2:
        return arr.argmax(axis=1)
    if arr.ndim == 1:
        return arr.astype(np.int64)
    raise ValueError(f"expected logits [B, C] or predictions [B], got shape {arr.shape}")


def _log_softmax64(logits: ArrayLike) -> torch.Tensor:
    t = logits if isinstance(logits, torch.Tensor) else torch.as_tensor(as_numpy(logits))
    t = t.detach().to("cpu", torch.float64)
    if t.ndim != 2:
        raise ValueError(f"expected logits [B, C], got shape {tuple(t.shape)}")
    return torch.log_softmax(t, dim=-1)


def correct(logits_or_preds: ArrayLike, labels: ArrayLike) -> np.ndarray:
    """Per-image correctness ``[B]`` (bool): whether the top-1 prediction equals the label.

    This is the per-image input that :func:`mcnemar` and :func:`paired_bootstrap_diff` take.
    """
    preds = _labels_or_argmax(logits_or_preds)
    y = as_numpy(labels).astype(np.int64).reshape(-1)
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
    y = torch.as_tensor(as_numpy(labels).astype(np.int64)).reshape(-1, 1)
    if lp.shape != lq.shape or y.shape[0] != lp.shape[0]:
        raise ValueError("logits_full, logits_pruned and labels must agree in batch size")
    d = (lq.gather(1, y).exp() - lp.gather(1, y).exp()).squeeze(1).numpy()
    return d if per_image else float(d.mean())
