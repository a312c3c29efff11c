"""Notebook 04's trained heads cached as their outputs (:mod:`tokenprune.training.checkpoints`): per setting of the
``default`` profile, every head's scores on the evaluation images, the oracle signal of the evaluation images, the
training log, and the one head the split path is checked with (:func:`.heads.check_head_key`). Training them is most
of the notebook's time on a 2-core CPU (the heads of the 196-token fine-grained proxy above all), so ``make models``
trains them once (:func:`build_cached`) and the notebook loads them (:func:`trained_heads`).

An entry is found by a recipe (:func:`heads_recipe`) that holds what the heads depend on: the setting's model (name,
recipe hash and SHA-256 of its checkpoint), the digest of its integer data (labels, evaluation images, part and
object patch sets), its blocks and image counts, and every parameter of the notebook that training reads
(:data:`TRAINING_PARAMETERS`). Loading rechecks the entry against the model in hand (:func:`recheck`): the oracle
signal recomputed on 64 evaluation images, and the checked head's scores on all of them, must equal the cached
ones. Any other profile, or a recipe with no entry, trains the heads in the notebook (an entry missing at
``default`` under ``TOKENPRUNE_CACHE_ONLY`` is an error instead).
"""
from __future__ import annotations

import hashlib
from types import SimpleNamespace
from typing import Optional

import numpy as np
import pandas as pd
import torch

from tokenprune.core import split_forward as split
from tokenprune.methods import learned
from tokenprune.study import params
from tokenprune.study.decoupling import data, settings
from tokenprune.study.decoupling import heads as trained
from tokenprune.study.decoupling.data import Setting
from tokenprune.study.decoupling.settings import mid_block
from tokenprune.study.notebook import Stopwatch
from tokenprune.training import checkpoints
from tokenprune.training.recipe import TrainRecipe

__all__ = ["TRAINING_PARAMETERS", "RECHECK_IMAGES", "RECHECK_RTOL", "data_sha256", "heads_recipe", "to_arrays",
           "from_arrays", "recheck", "trained_heads", "build_cached"]

#: the notebook's parameters that the heads, their signals and their scores depend on
TRAINING_PARAMETERS = ("seed", "seeds", "steps", "head_batch", "head_lr", "signal", "signal_target", "probes",
                       "fd_probes", "rank_loss", "task_tau", "keep_rates", "dtype")
#: evaluation images on which a loaded entry is recomputed, and the relative tolerance of the recomputation
RECHECK_IMAGES = 64
RECHECK_RTOL = 1e-3


def data_sha256(S: Setting) -> str:
    """SHA-256 over the setting's integer data: training and evaluation labels, the evaluation images (uint8), the
    part and object patch sets (exact on every CPU, unlike the preprocessed float images)."""
    h = hashlib.sha256()
    for a in (S.y_train, S.y_eval, S.raw_eval, S.parts, S.obj):
        if a is not None:
            t = np.ascontiguousarray(a.numpy() if isinstance(a, torch.Tensor) else np.asarray(a))
            h.update(f"{t.dtype}|{t.shape}|".encode())
            h.update(t.tobytes())
    return h.hexdigest()


def heads_recipe(name: str, S: Setting, cfg: SimpleNamespace) -> TrainRecipe:
    """The record an entry of setting ``name`` is found by (``dc_heads_<dataset>_<size>``; see the module)."""
    model = {k: S.info.get(k) for k in ("name", "recipe_hash", "sha256")}
    return TrainRecipe(
        name=f"dc_heads_{name.replace('/', '_')}", arch={"builder": "predictor_head"}, dataset=S.dataset,
        epochs=1.0, batch_size=int(cfg.head_batch), lr=float(cfg.head_lr), seed=int(cfg.seed), dtype=cfg.dtype,
        extra={"setting": name, "model": model, "grid": list(S.grid), "blocks": list(S.blocks),
               "n_train": len(S.x_train), "n_eval": len(S.x_eval), "data_sha256": data_sha256(S),
               "task_head": name in cfg.task_settings,
               "parameters": {k: getattr(cfg, k) for k in TRAINING_PARAMETERS}})


def _key(kind: str, key: tuple) -> str:
    return f"{kind}.{key[1]}.{key[2]}.{key[3]}" if kind == "scores" else f"{kind}.{key[1]}"


def to_arrays(name: str, S: Setting, t: trained.TrainedHeads, cfg: SimpleNamespace) -> tuple[dict, dict]:
    """The arrays and the sidecar's part of one setting's :class:`~.heads.TrainedHeads`."""
    arrays = {_key("scores", k): v.numpy() for k, v in t.scores.items()}
    arrays.update({_key("signal", k): v.numpy() for k, v in t.signal_eval.items()})
    head = t.heads[trained.check_head_key(name, S, cfg)]
    arrays.update({f"check_head.{k}": v.detach().numpy() for k, v in head.state_dict().items()})
    digest = hashlib.sha256("".join(checkpoints.weights_sha256(h) for h in t.heads.values()).encode()).hexdigest()
    info = {"weights_sha256": digest, "weights_hashed": f"the {len(t.heads)} heads, in the order of the scores",
            "scores": [list(k) for k in t.scores], "log": t.log.to_dict(orient="split", index=False),
            "train_time_s": round(float(t.log.train_s.sum()), 1), "torch_threads": torch.get_num_threads()}
    return arrays, info


def from_arrays(name: str, S: Setting, arrays: dict, info: dict, cfg: SimpleNamespace) -> trained.TrainedHeads:
    """One setting's :class:`~.heads.TrainedHeads` from its entry (the checked head as its only head)."""
    scores = {tuple(k): torch.from_numpy(arrays[_key("scores", tuple(k))]) for k in info["scores"]}
    signal = {(name, int(k.split(".")[1])): torch.from_numpy(v) for k, v in arrays.items() if k.startswith("signal.")}
    key = trained.check_head_key(name, S, cfg)
    head = learned.make_head(int(arrays["check_head.in_conv.1.weight"].shape[1]), key[3])
    head.load_state_dict({k.removeprefix("check_head."): torch.from_numpy(v) for k, v in arrays.items()
                          if k.startswith("check_head.")})
    log = pd.DataFrame(info["log"]["data"], columns=info["log"]["columns"])
    return trained.TrainedHeads({key: head}, log, signal, scores)


def _rel_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-12))


def recheck(name: str, S: Setting, cev: split.SplitCache, t: trained.TrainedHeads, cfg: SimpleNamespace) -> dict:
    """A loaded entry against the model and images in hand: the oracle signal recomputed on the first
    :data:`RECHECK_IMAGES` evaluation images, the checked head's scores on all of them. Raises
    :class:`~tokenprune.training.checkpoints.CheckpointMismatchError` beyond :data:`RECHECK_RTOL` (relative to the
    largest value); returns the relative differences."""
    n = min(RECHECK_IMAGES, len(cev))
    key = trained.check_head_key(name, S, cfg)
    mid = mid_block(S.blocks)
    head_scores = split.score_cached(cev, mid, "learned", extras=learned.predictor_extras({mid: t.heads[key]}))
    diffs = {"signal": _rel_diff(trained.eval_signal(S, cev, mid, cfg, images=n), t.signal_eval[(name, mid)][:n]),
             "scores": _rel_diff(head_scores, t.scores[key])}
    bad = {k: v for k, v in diffs.items() if not v <= RECHECK_RTOL}
    if bad:
        raise checkpoints.CheckpointMismatchError(
            f"the cached heads of {name} differ from this model's on its evaluation images (relative {bad}, "
            f"tolerance {RECHECK_RTOL:g}); rebuild them with `python -m tokenprune models` (`make models`)")
    return diffs


def trained_heads(settings: dict[str, Setting], caches, cfg: SimpleNamespace, sw: Stopwatch,
                  cache_dir: Optional[object] = None) -> trained.TrainedHeads:
    """Every setting's heads: at ``default`` loaded from ``cache_dir`` (the committed checkpoints' folder) and
    rechecked (:func:`recheck`) when its recipe has an entry; else trained here (:func:`.heads.train_setting`)."""
    if cache_dir is None and cfg.profile == "default":
        cache_dir = checkpoints.checkpoint_dir("default")
    parts = []
    for name, S in settings.items():
        rec = heads_recipe(name, S, cfg)
        if cache_dir is not None and checkpoints.has_outputs(rec, cache_dir):
            with sw.section("load and recheck cached heads"):
                arrays, info = checkpoints.load_outputs(rec, cache_dir)
                part = from_arrays(name, S, arrays, info, cfg)
                diffs = recheck(name, S, caches.eval[name], part, cfg)
            print(f"{name}: {len(part.scores)} heads loaded ({checkpoints.output_paths(rec, cache_dir)[0].name}, "
                  f"trained in {info['train_time_s']:.0f} s); rechecked, relative difference "
                  f"{max(diffs.values()):.1g}")
        else:
            if cache_dir is not None:
                checkpoints.refuse_if_cache_only(rec.name, checkpoints.output_paths(rec, cache_dir)[0])
            part = trained.train_setting(name, S, caches.train[name], caches.eval[name], cfg, sw)
        parts.append(part)
    return trained.combine(parts, settings)


def build_cached(profile: str = "default", progress: bool = True, force: bool = False) -> list[dict]:
    """``make models``: the ``default`` profile's heads of every setting, trained and cached beside the committed
    checkpoints (other profiles: nothing; their notebooks train their own). Returns the sidecars."""
    if profile != "default":
        return []
    cfg = params.setup("04_decoupling", "default", {})
    settings.layout(cfg)  # the notebook's threads and generators
    found = data.load_settings(cfg)
    folder = checkpoints.checkpoint_dir(profile)
    # the token passes only for the settings whose entry is to be built (each costs a pass over the images)
    todo = {n: S for n, S in found.items() if force or not checkpoints.has_outputs(heads_recipe(n, S, cfg), folder)}
    caches = data.cache_settings(todo, cfg)
    out = []
    for name, S in found.items():
        def work(name=name, S=S):
            return to_arrays(name, S, trained.train_setting(name, S, caches.train[name], caches.eval[name], cfg,
                                                            Stopwatch()), cfg)

        _, info = checkpoints.ensure_outputs(heads_recipe(name, S, cfg), work, folder, force=force)
        if progress:
            how = "loaded" if info.get("loaded") else f"trained in {info['train_time_s']:.0f} s"
            print(f"{info['name']}: {len(info['scores'])} heads, {how}, {info['outputs']} "
                  f"{info['size_bytes'] / 1e6:.2f} MB", flush=True)
        out.append(info)
    return out
