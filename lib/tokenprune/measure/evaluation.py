"""Evaluate pruning configurations on one model and one image set, with paired statistics.

What every notebook does the same way lives here: a :class:`PruneConfig` names a configuration
(scorer, reducer, keep rate, locations, options); :func:`predict` runs a model over images in
batches; :func:`prune_sweep` runs the unpruned model once and then every configuration on the *same*
images, and reports top-1, agreement with the unpruned model (faithfulness) and KL(full || pruned),
each with a bootstrap interval, the MACs, and McNemar's paired test against the unpruned model;
:func:`paired_comparison` compares two configurations image by image; :func:`patch_status`
says, after a traced forward, which original patches each location kept intact, merged or dropped.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional

import numpy as np
import torch

from tokenprune.measure import intervals, metrics, significance
from tokenprune.measure.macs import analytic_macs
from tokenprune.core.config import UNPRUNED, PruneConfig
from tokenprune.core.patch import prune_state
from tokenprune.core.precision import autocast

__all__ = ["Predictions", "predict", "prune_sweep", "sweep_predictions", "sweep_table", "check_sweep_labels",
           "paired_comparison", "patch_status",
           "KEPT", "MERGED", "DROPPED"]

#: codes of :func:`patch_status`
DROPPED, MERGED, KEPT = 0, 1, 2


@dataclass
class Predictions:
    """Logits of one model over an image set, in image order."""

    logits: torch.Tensor
    labels: torch.Tensor
    extra: dict = field(default_factory=dict)

    @property
    def preds(self) -> torch.Tensor:
        return self.logits.argmax(-1)

    @property
    def correct(self) -> np.ndarray:
        return (self.preds == self.labels).numpy()


def predict(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor, batch: int = 256,
            dtype: str = "fp32", device: Optional[str] = None, keep_trace: bool = False) -> Predictions:
    """Run ``model`` over ``images`` (a float tensor ready for it) in batches under inference mode.

    With ``keep_trace`` (model patched with ``trace=True``) the final source map of every image is kept in
    ``extra["source"]`` (``[N, N_out, N0]``), for coverage metrics.
    """
    dev = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))
    model.eval().to(dev)
    outs, sources = [], []
    with torch.inference_mode(), autocast(dtype, dev):
        for i in range(0, len(images), batch):
            outs.append(model(images[i:i + batch].to(dev)).float().cpu())
            if keep_trace:
                sources.append(prune_state(model).source.float().cpu())
    extra = {"source": torch.cat(sources)} if keep_trace and sources else {}
    return Predictions(torch.cat(outs), labels.cpu(), extra)


def _ci_row(prefix: str, values: np.ndarray, seed: int) -> dict:
    ci = intervals.bootstrap_ci(values, seed=seed)
    return {prefix: ci.estimate, f"{prefix}_low": ci.low, f"{prefix}_high": ci.high}


def prune_sweep(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor,
                configs: Iterable[PruneConfig], batch: int = 256, dtype: str = "fp32", seed: int = 0,
                progress: bool = False) -> tuple["pd.DataFrame", dict[str, Predictions]]:  # noqa: F821
    """Evaluate the unpruned model and each configuration on the same images.

    Returns a table (one row per configuration: label, scorer, reducer, keep rate, GMACs, top-1, agreement,
    KL, each with a 95% bootstrap interval, and McNemar's p against the unpruned model) and the
    predictions by label, for paired comparisons. ``model`` is patched in place and left unpruned.
    The two steps are :func:`sweep_predictions` and :func:`sweep_table` (a cached sweep,
    :mod:`tokenprune.study.cached_sweeps`, reads the first and computes the second).
    """
    configs = list(configs)
    preds = sweep_predictions(model, images, labels, configs, batch=batch, dtype=dtype, seed=seed, progress=progress)
    return sweep_table(model, preds, configs, seed=seed), preds


def check_sweep_labels(configs: Iterable[PruneConfig]) -> list[PruneConfig]:
    """``configs`` as a list, refused (ValueError naming ``configs``) when two share a label."""
    configs = list(configs)
    labels_seen = [c.label for c in configs]
    if len(set(labels_seen)) != len(labels_seen):
        raise ValueError(f"configs: labels must be unique, got {labels_seen}")
    return configs


def sweep_predictions(model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor,
                      configs: Iterable[PruneConfig], batch: int = 256, dtype: str = "fp32", seed: int = 0,
                      progress: bool = False) -> dict[str, Predictions]:
    """The predictions of the unpruned model (``"unpruned"``) and of each configuration (by label) on ``images``.
    ``model`` is patched in place and left unpruned."""
    from tqdm import tqdm  # not tqdm.auto: in a kernel without ipywidgets it warns with a path

    configs = check_sweep_labels(configs)
    UNPRUNED.apply(model)
    preds = {"unpruned": predict(model, images, labels, batch=batch, dtype=dtype)}
    for cfg in tqdm(configs, desc="configs", disable=not progress):
        cfg.apply(model, seed=seed)
        preds[cfg.label] = predict(model, images, labels, batch=batch, dtype=dtype)
    UNPRUNED.apply(model)
    return preds


def sweep_table(model: torch.nn.Module, preds: dict[str, Predictions], configs: Iterable[PruneConfig],
                seed: int = 0) -> "pd.DataFrame":  # noqa: F821
    """:func:`prune_sweep`'s table from the predictions of :func:`sweep_predictions`: top-1, agreement and KL with
    their bootstrap intervals and McNemar's p per configuration, the GMACs of ``model`` patched with each (left
    unpruned)."""
    import pandas as pd

    full = preds["unpruned"]
    rows = []
    for cfg in check_sweep_labels(configs):
        cfg.apply(model, seed=seed)
        p = preds[cfg.label]
        mc = significance.mcnemar(full.correct, p.correct)
        rows.append({"config": cfg.label, "scorer": cfg.scorer, "reducer": cfg.reducer,
                     "keep_rate": cfg.keep_rate if not isinstance(cfg.keep_rate, tuple) else str(cfg.keep_rate),
                     "locations": ",".join(map(str, cfg.locations)), "gmacs": analytic_macs(model).total / 1e9,
                     **_ci_row("top1", p.correct.astype(float), seed),
                     **_ci_row("agreement", (p.preds == full.preds).numpy().astype(float), seed),
                     **_ci_row("kl", metrics.kl_divergence(full.logits, p.logits, per_image=True), seed),
                     "mcnemar_p_vs_unpruned": mc.p_value})
    UNPRUNED.apply(model)
    base = {"config": "unpruned", "scorer": None, "reducer": None, "keep_rate": 1.0, "locations": "",
            "gmacs": analytic_macs(model).total / 1e9, **_ci_row("top1", full.correct.astype(float), seed),
            "agreement": 1.0, "agreement_low": 1.0, "agreement_high": 1.0, "kl": 0.0, "kl_low": 0.0, "kl_high": 0.0,
            "mcnemar_p_vs_unpruned": 1.0}
    return pd.DataFrame([base] + rows)


def paired_comparison(a: Predictions, b: Predictions, seed: int = 0) -> dict:
    """``a`` minus ``b`` on the same images: top-1 difference with a paired bootstrap interval and p-value,
    and McNemar's test on per-image correctness."""
    if not torch.equal(a.labels, b.labels):
        raise ValueError("a, b: predictions must be on the same images in the same order")
    diff = intervals.paired_bootstrap_diff(a.correct.astype(float), b.correct.astype(float), seed=seed)
    mc = significance.mcnemar(a.correct, b.correct)
    return {"top1_diff": diff.estimate, "top1_diff_low": diff.low, "top1_diff_high": diff.high,
            "bootstrap_p": diff.p_value, "mcnemar_p": mc.p_value, "mcnemar_method": mc.method,
            "n01": mc.n01, "n10": mc.n10, "n": len(a.labels)}


def patch_status(model: torch.nn.Module, images: torch.Tensor, config: Optional[PruneConfig] = None,
                 seed: int = 0) -> list[torch.Tensor]:
    """After each reduction location, what became of every original patch: ``KEPT`` (a token standing for
    that patch alone), ``MERGED`` (part of a token standing for several patches: EViT's fused token, a
    cluster, a ToMe merge) or ``DROPPED``. Returns one ``[B, gh, gw]`` uint8 map per location. The model
    is patched with ``config`` (default: its current configuration) and tracing, in place."""
    st = getattr(model, "_tokenprune", None)
    if config is not None:
        config.apply(model, trace=True, seed=seed)
    elif st is not None:
        st.trace = True
    else:
        raise ValueError("config: the model is not patched; pass a PruneConfig")
    with torch.inference_mode():
        model.eval()(images)
    st = prune_state(model)
    p = st.num_prefix_tokens
    gh, gw = model.patch_embed.grid_size
    maps = []
    for h in st.history:
        src = h["source"][:, p:, p:]  # [B, tokens, patches]
        size = src.sum(-1, keepdim=True)
        represented = src.sum(1) > 0
        alone = ((src > 0) & (size == 1)).any(1)
        status = torch.full(represented.shape, DROPPED, dtype=torch.uint8)
        status[represented] = MERGED
        status[alone] = KEPT
        maps.append(status.reshape(-1, gh, gw))
    return maps

