"""How notebook 02 decides a pairwise accuracy claim: a direction on a paired interval, gated by its design.

:func:`paired_decision` decides ``A - B`` (per-image correctness on the same images) with the declared rule and
:func:`tokenprune.study.proxy.audit_model.gated` (the effect in dispute against the design's MDE). A pair is run
again on the full test split only when its design on the sweep's images says the full split can detect the effect
(:func:`full_split_pays`, a rule on the spread of the differences alone, never their mean); :func:`decisive_predictions`
runs those pairs and :func:`pick` chooses, per pair, the full split's predictions when both ran there.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import torch

from tokenprune.core.config import PruneConfig
from tokenprune.measure import evaluation, intervals, significance
from tokenprune.measure.power import Design
from tokenprune.study.proxy.audit_model import gated
from tokenprune.study.verdicts import Decision, Direction

__all__ = ["PairedResult", "sd_source", "paired_decision", "full_split_pays", "decisive_predictions", "pick",
           "brief"]


def sd_source(n: int, what: str = "per-image") -> str:
    return f"sd of the {n} paired {what} differences of this run (independent of their mean)"


@dataclass(frozen=True)
class PairedResult:
    """A pairwise claim decided: the decision (gated by its design), ``A - B`` in points with its 95 % bootstrap
    interval, McNemar's p, the number of images and the design's record."""

    decision: Decision
    diff: float
    low: float
    high: float
    mcnemar_p: float
    n: int
    design: dict

    def brief(self, where: str, effect: float) -> str:
        """One sentence with the deciding numbers."""
        return (f"{self.diff:+.2f} [{self.low:+.2f}, {self.high:+.2f}] pp on {self.n} images ({where}); MDE "
                f"{self.design['mde']:.2f}, {self.design['mde_at_max']:.2f} at the largest scale, effect {effect:g}")


def paired_decision(a_correct: Any, b_correct: Any, effect: float, n_max: int, max_scale: str, rule: Direction,
                    seed: int = 0, what: str = "") -> PairedResult:
    """A direction claim on ``a - b`` (per-image 0/1 correctness on the same images, points): the paired bootstrap
    interval decides (``rule``), gated by :class:`~tokenprune.study.verdicts.Detectable` with the effect in dispute
    and the paired design (its MDE at ``n_max``, the largest scale here)."""
    a, b = np.asarray(a_correct, dtype=float), np.asarray(b_correct, dtype=float)
    diff = intervals.paired_bootstrap_diff(a, b, seed=seed)
    mc = significance.mcnemar(a.astype(bool), b.astype(bool))
    design = Design.paired(a, b, unit="images", n_max=max(n_max, len(a)), max_scale=max_scale,
                           sd_source=sd_source(len(a)))
    g = gated(rule.decide(diff.estimate * 100, diff.low * 100, diff.high * 100, what=what), effect, design)
    return PairedResult(decision=g.decision, diff=diff.estimate * 100, low=diff.low * 100, high=diff.high * 100,
                        mcnemar_p=mc.p_value, n=int(len(a)), design=g.design)


def full_split_pays(a_correct: Any, b_correct: Any, effect: float, n_max: int, factor: float = 2.0) -> bool:
    """Whether a pairwise claim is run again on the full test split: when the design measured on the sweep's images
    says the full split can detect the effect in dispute (MDE at ``n_max`` at most ``factor`` x the effect, the
    Detectable bar). It depends on the spread of the paired differences only, never on their mean."""
    d = Design.paired(np.asarray(a_correct, dtype=float), np.asarray(b_correct, dtype=float), unit="images",
                      n_max=max(n_max, len(a_correct)), max_scale="the full test split")
    return d.mde_at_max <= factor * effect


def decisive_predictions(base: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor,
                         configs: Sequence[PruneConfig], preds: Mapping[str, Any],
                         pairs: Sequence[tuple[str, str, float]], batch: int, dtype: str, seed: int) -> dict:
    """The configurations of every pair ``(a, b, effect in dispute)`` that :func:`full_split_pays` (judged on the
    sweep's ``preds``), each run on ``images`` (the full test split): ``{label: Predictions}`` (the sweep's own
    predictions where it already ran on every image, as at the paper profile)."""
    by_label = {c.label: c for c in configs}
    wanted = [lab for a, b, eff in pairs if full_split_pays(preds[a].correct, preds[b].correct, eff, len(labels))
              for lab in (a, b)]
    out = {}
    for lab in dict.fromkeys(wanted):
        if len(preds[lab].labels) == len(labels):  # the sweep already ran on every image (n_eval >= the full set)
            out[lab] = preds[lab]
            continue
        m = copy.deepcopy(base)
        by_label[lab].apply(m, seed=seed)
        out[lab] = evaluation.predict(m, images, labels, batch=batch, dtype=dtype)
    return out


def pick(a: str, b: str, full_preds: Mapping[str, Any], preds: Mapping[str, Any]) -> tuple[Any, Any, str]:
    """The full-split predictions of a pair when both ran there, else the sweep's, and which they are."""
    if a in full_preds and b in full_preds:
        return full_preds[a], full_preds[b], "full test split"
    return preds[a], preds[b], "sweep images"


def brief(decision: Decision, sentence: str, details: Optional[dict] = None) -> tuple[Decision, dict]:
    """``decision`` with ``sentence`` (the deciding numbers, one sentence) as its why, and ``details`` with the
    rule's own reason under ``reason``."""
    return Decision(decision.verdict, sentence, decision.rule), {**(details or {}), "reason": decision.why}
