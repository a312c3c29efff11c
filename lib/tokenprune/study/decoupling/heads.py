"""The sensitivity signal of notebook 04, the heads trained on it and their capacity-matched controls
(:func:`train_setting`, one setting; :func:`combine`, all of them), the split path checked against the patched model
(:func:`split_path_checks`), every scorer's scores on the evaluation images (:func:`score_all`), how well each head
learns its target (:func:`head_fit_table`) and the finite-difference check of the signal (:func:`fd_check_table`)."""
from __future__ import annotations

import math
import time
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Optional

import numpy as np
import pandas as pd
import torch

from tokenprune.core import split_forward as split
from tokenprune.core.config import PruneConfig
from tokenprune.core.patch import prune_state
from tokenprune.measure.intervals import bootstrap_ci_or_nan
from tokenprune.measure.rank_statistics import rank_correlations
from tokenprune.methods import learned, sensitivity
from tokenprune.study.decoupling.data import Setting
from tokenprune.study.decoupling.settings import Layout, mid_block
from tokenprune.study.notebook import Stopwatch

__all__ = ["TrainedHeads", "train_signal", "check_head_key", "train_setting", "eval_signal", "combine",
           "check_split_path", "split_path_checks", "score_all", "head_fit_table", "fd_tokens_drawn", "fd_check_table"]


def train_signal(S: Setting, cache: split.SplitCache, block: int, labels: torch.Tensor,
                 cfg: SimpleNamespace) -> torch.Tensor:
    """The sensitivity signal of the cached block-``block`` tokens (``cfg.signal``: gradient or finite difference)."""
    toks = cache.tokens[block]
    if cfg.signal == "grad":
        return sensitivity.gradient_sensitivity(S.model, toks, block, target=cfg.signal_target, labels=labels,
                                                probes=cfg.probes, seed=cfg.seed, dtype=cfg.dtype)
    return sensitivity.finite_difference_sensitivity(S.model, toks, block, target=cfg.signal_target, labels=labels,
                                                     probes=cfg.fd_probes, seed=cfg.seed)


@dataclass
class TrainedHeads:
    """``heads``: ``{(setting, block, kind, seed): head}`` (of a setting loaded from the cache,
    :mod:`.cached_heads`, only the head the split path is checked with, :func:`check_head_key`); ``log``: a DataFrame
    of the training runs; ``signal_eval``: ``{(setting, block): oracle signal}`` of the evaluation images;
    ``scores``: ``{(setting, block, kind, seed): [B, N] scores}`` of every head on the evaluation images."""

    heads: dict
    log: pd.DataFrame
    signal_eval: dict
    scores: dict


def check_head_key(name: str, S: Setting, cfg: SimpleNamespace) -> tuple:
    """The head the split path is checked with in setting ``name``: the first seed's sensitivity head at the
    intermediate block (:func:`split_path_checks`)."""
    return (name, mid_block(S.blocks), "sensitivity", cfg.seeds[0])


def train_setting(name: str, S: Setting, ctr: split.SplitCache, cev: split.SplitCache, cfg: SimpleNamespace,
                  sw: Stopwatch) -> TrainedHeads:
    """For every scoring block of setting ``name``: the signal of the training images, then per seed the sensitivity
    head, the mimic control and (in ``task_settings``, intermediate block) the task-loss control, all
    capacity-matched; at the intermediate block the oracle signal of the evaluation images; every head's scores on
    the evaluation images."""
    heads_out: dict = {}
    log: list = []
    signal_ev: dict = {}
    p = ctr.num_prefix_tokens
    dim = ctr.tokens[S.blocks[0]].shape[-1]
    mid = mid_block(S.blocks)
    for block in S.blocks:
        with sw.section("sensitivity signal (train)"):
            sig = train_signal(S, ctr, block, S.y_train, cfg)
        attn = ctr.cls_attn[block][:, :, p:].mean(1)
        # the sensitivity heads and the mimic controls of every seed train together (stacked, same result as one
        # by one: learned.train_rankers); head g of seed s starts from make_head(dim, s) and sees seed s's batches
        jobs = [("sensitivity", s, sig) for s in cfg.seeds] + [("mimic", s, attn) for s in cfg.seeds]
        heads = [learned.make_head(dim, s) for _, s, _ in jobs]
        t0 = time.perf_counter()
        with sw.section("train heads (sensitivity, mimic)"):
            hist = learned.train_rankers(heads, ctr.tokens[block], [j[2] for j in jobs], [j[1] for j in jobs],
                                         num_prefix_tokens=p, steps=cfg.steps, batch=cfg.head_batch, lr=cfg.head_lr,
                                         loss=cfg.rank_loss, dtype=cfg.dtype)
        per_head_s = (time.perf_counter() - t0) / len(jobs)
        results = [(kind, s, head, losses, per_head_s) for (kind, s, _), head, losses in zip(jobs, heads, hist)]
        if name in cfg.task_settings and block == mid:
            for s in cfg.seeds:
                head = learned.make_head(dim, s)
                t0 = time.perf_counter()
                with sw.section("train heads (task)"):
                    losses = learned.train_task(head, S.model, block, ctr.tokens[block], S.y_train, cfg.keep_rates,
                                                steps=cfg.steps, batch=cfg.head_batch, lr=cfg.head_lr, seed=s,
                                                tau=cfg.task_tau, dtype=cfg.dtype)
                results.append(("task", s, head, losses, time.perf_counter() - t0))
        for kind, s, head, losses, secs in results:
            heads_out[(name, block, kind, s)] = head
            log.append({"setting": name, "block": block, "kind": kind, "seed": s,
                        "params": sum(q.numel() for q in head.parameters()),
                        "loss_first": float(np.mean(losses[:5])), "loss_last": float(np.mean(losses[-5:])),
                        "train_s": secs})
        if block == mid:
            with sw.section("sensitivity signal (eval, oracle)"):
                signal_ev[(name, block)] = eval_signal(S, cev, block, cfg)
    with sw.section("score evaluation images"):
        scores = {key: split.score_cached(cev, key[1], "learned", extras=learned.predictor_extras({key[1]: head}))
                  for key, head in heads_out.items()}
    print(f"{name}: {len(heads_out)} heads trained")
    return TrainedHeads(heads_out, pd.DataFrame(log), signal_ev, scores)


def eval_signal(S: Setting, cev: split.SplitCache, block: int, cfg: SimpleNamespace,
                images: Optional[int] = None) -> torch.Tensor:
    """The oracle signal of the evaluation images (of the first ``images``: the same values as the first rows of
    all of them, the probes being drawn per batch of 64 from its first index) at ``block``."""
    n = len(cev) if images is None else images
    return sensitivity.gradient_sensitivity(S.model, cev.tokens[block][:n], block, target=cfg.signal_target,
                                            labels=S.y_eval[:n], probes=cfg.probes, seed=cfg.seed + 1,
                                            dtype=cfg.dtype)


def combine(parts: list[TrainedHeads], settings: dict[str, Setting]) -> TrainedHeads:
    """The settings' heads in one :class:`TrainedHeads`. Asserts that every kind of head of a setting has the same
    parameter count (capacity matching)."""
    head_log = pd.concat([t.log for t in parts], ignore_index=True)
    for name in settings:
        counts = head_log[head_log.setting == name].groupby("kind").params.unique()
        assert all(len(v) == 1 for v in counts) and len({int(v[0]) for v in counts}) == 1, counts
    merged = [{k: v for t in parts for k, v in getattr(t, f).items()} for f in ("heads", "signal_eval", "scores")]
    return TrainedHeads(merged[0], head_log, merged[1], merged[2])


def check_split_path(S: Setting, block: int, keep: float, head) -> dict:
    """The split path (cache + forward_from) against the patched model with the `learned` scorer, fp32, on up
    to 8 evaluation images."""
    n = min(8, len(S.x_eval))
    x = S.x_eval[:n]
    c = split.cache_tokens(S.model, x, [block], dtype="fp32")
    sc = split.score_cached(c, block, "learned", extras=learned.predictor_extras({block: head}))
    logits, keep_idx = split.prune_cached(S.model, c, block, sc, keep, dtype="fp32")
    PruneConfig(scorer="learned", reducer="drop", keep_rate=keep, locations=(block,)).apply(S.model, trace=True)
    learned.attach(S.model, {block: head})
    with torch.inference_mode():
        want = S.model(x)
    st = prune_state(S.model)
    p = st.num_prefix_tokens
    same_src = torch.equal(st.source[:, p:, p:].bool(), split.kept_source(keep_idx, S.patch_tokens))
    PruneConfig(keep_rate=1.0).apply(S.model)  # leave the model unpruned
    return {"setting": S.name, "block": block, "keep_rate": keep, "images": n,
            "same_kept_tokens": bool(torch.equal(st.history[0]["keep_idx"], keep_idx)), "same_source_map": same_src,
            "max_abs_logit_diff": float((want - logits).abs().max())}


def split_path_checks(settings: dict[str, Setting], heads: dict, d: Layout, cfg: SimpleNamespace) -> pd.DataFrame:
    """:func:`check_split_path` per setting at its intermediate block and the low keep rate (first seed's
    sensitivity head); asserts the same kept tokens, source map and logits (within 1e-3)."""
    checks = pd.DataFrame([check_split_path(S, mid_block(S.blocks), d.low_keep, heads[check_head_key(name, S, cfg)])
                           for name, S in settings.items()])
    same = checks.same_kept_tokens.all() and checks.same_source_map.all()
    assert same and (checks.max_abs_logit_diff < 1e-3).all(), checks
    return checks


def score_all(settings: dict[str, Setting], cache_ev: dict, trained: TrainedHeads, cfg: SimpleNamespace) -> dict:
    """``{(setting, block, scorer, seed): [B, N] scores}`` of every scorer on the evaluation images: the untrained
    scorers (cls_attention, random, centre; seed -1), the trained heads' (``trained.scores``) and at the
    intermediate block the oracle (seed -1)."""
    scores: dict = {}
    for name, S in settings.items():
        cev = cache_ev[name]
        for block in S.blocks:
            scores[(name, block, "cls_attention", -1)] = split.score_cached(cev, block, "cls_attention")
            scores[(name, block, "random", -1)] = split.score_cached(
                cev, block, "random", extras={"generator": torch.Generator().manual_seed(cfg.seed + block)})
            scores[(name, block, "centre", -1)] = split.score_cached(cev, block, "centre", extras={"grid": S.grid})
            scores.update({k: v for k, v in trained.scores.items() if k[:2] == (name, block)})
            if (name, block) in trained.signal_eval:
                scores[(name, block, "oracle", -1)] = trained.signal_eval[(name, block)]
    return scores


def head_fit_table(scores: dict, cache_ev: dict, signal_ev: dict, cfg: SimpleNamespace) -> pd.DataFrame:
    """Per sensitivity and mimic head: the per-image Spearman correlation of its scores with the signal it was
    trained on (the oracle signal; [CLS] attention), mean over images with a bootstrap interval. Images whose
    scores are constant have no rank correlation and are left out
    (:func:`tokenprune.measure.rank_statistics.rank_correlations`)."""
    rows = []
    for (name, block, kind, s), sc in scores.items():
        if kind not in ("sensitivity", "mimic"):
            continue
        p = cache_ev[name].num_prefix_tokens
        if kind == "mimic":
            target = cache_ev[name].cls_attn[block][:, :, p:].mean(1)
        elif (name, block) in signal_ev:
            target = signal_ev[(name, block)]
        else:
            continue
        rho, _ = rank_correlations(sc, target)
        ci = bootstrap_ci_or_nan(rho, n_boot=cfg.n_boot, seed=cfg.seed)
        rows.append({"setting": name, "block": block, "head": kind, "seed": s,
                     "target": "sensitivity (oracle)" if kind == "sensitivity" else "[CLS] attention",
                     "spearman": ci.estimate, "low": ci.low, "high": ci.high})
    return pd.DataFrame(rows)


def fd_tokens_drawn(n: int, k: int, seed: int) -> Optional[np.ndarray]:
    """The ``k`` prunable tokens (of ``n``) the finite-difference check perturbs, drawn once without replacement
    with ``numpy.random.default_rng(seed)`` and sorted; None (every token) when ``k`` is 0 or at least ``n``."""
    if k <= 0 or k >= n:
        return None
    return np.sort(np.random.default_rng(seed).choice(n, size=k, replace=False))


def fd_check_table(settings: dict[str, Setting], cache_ev: dict, signal_ev: dict, cfg: SimpleNamespace) -> pd.DataFrame:
    """On ``fd_images`` evaluation images at the intermediate block: the finite-difference estimate of the signal
    against the gradient signal (per-image Spearman, mean and min over images; median ratio), on every prunable
    token, or on the ``fd_tokens`` drawn with ``seed`` (:func:`fd_tokens_drawn`; the same tokens of both
    signals: ``finite_difference_sensitivity(token_idx=...)``)."""
    rows = []
    for name, S in settings.items():
        mid = mid_block(S.blocks)
        toks = cache_ev[name].tokens[mid][:cfg.fd_images]
        g = signal_ev[(name, mid)][:cfg.fd_images]
        labels = S.y_eval[:cfg.fd_images]
        idx = fd_tokens_drawn(g.shape[1], cfg.fd_tokens, cfg.seed)
        fd = sensitivity.finite_difference_sensitivity(S.model, toks, mid, target=cfg.signal_target, labels=labels,
                                                       probes=cfg.fd_probes, seed=cfg.seed, token_idx=idx)
        if idx is not None:
            g = g[:, torch.as_tensor(idx)]
        rho, _ = rank_correlations(fd, g)
        row = {"setting": name, "block": mid, "images": len(toks), "probes": cfg.fd_probes}
        if cfg.fd_tokens:
            row["tokens"] = g.shape[1]
        row.update({"spearman_fd_vs_grad": float(np.nanmean(rho)) if np.isfinite(rho).any() else math.nan,
                    "min": float(np.nanmin(rho)) if np.isfinite(rho).any() else math.nan,
                    "median_ratio_fd_over_grad": float((fd / g.clamp_min(1e-12)).median())})
        rows.append(row)
    return pd.DataFrame(rows)
