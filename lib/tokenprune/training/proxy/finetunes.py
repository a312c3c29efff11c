"""K5's fine-tunes of the proxy candidates, cached as their outputs (notebook 00's pre-registered measurement).

A candidate's base model fine-tuned with EViT at keep 0.7 (fused inattentive token, blocks 4/7/10, the target
rate from the first step: EViT's fine-tuning protocol) by :data:`tokenprune.training.proxy.candidates.FINETUNE`:
blocks 4-12, the final norm and the head train, blocks 1-3 and the patch embedding stay frozen; one pass over
``train_images`` training images drawn with the seed. Its weights (nine blocks) do not fit the committed-artefact
budget, so the cache keeps its logits at keep 0.7 on the candidate's test images, keyed by a recipe whose hash covers
the base model's recipe and :data:`tokenprune.core.patch.NUMERICS_VERSION`.

Which candidates are fine-tuned follows the pre-registered rule (a candidate that meets every other criterion of its
role, or the fallback's next in line, in candidate order): :data:`FINETUNED` records the candidates the rule asked
for, and notebook 00 refuses to decide K5 for a candidate the rule asks for and this list lacks.

From round 3 on (:data:`tokenprune.training.proxy.round3.CONTROL`), each fine-tune has a control: the same fine-tune
unpruned (same base, seed, images and length), cached as its logits unpruned and at keep 0.7 (:func:`control_recipe`),
so that K5's gain over the base pruned off the shelf is reported next to its gain over unpruned training alone.
"""
from __future__ import annotations

import copy
from typing import Any, Optional, Sequence

import numpy as np
import torch

from tokenprune.core.config import PruneConfig
from tokenprune.core.patch import NUMERICS_VERSION
from tokenprune.measure.evaluation import predict
from tokenprune.training import base_models, checkpoints, model_recipes, recipe_data
from tokenprune.training.finetune import finetune, finetune_recipe
from tokenprune.training.recipe import TrainRecipe
from tokenprune.training.sources import as_tensors
from tokenprune.training.proxy.candidates import CANDIDATES, FINETUNE, Candidate

__all__ = ["FINETUNED", "trainable", "k5_config", "k5_recipe", "control_recipe", "has_control",
           "train_and_measure", "load", "load_control", "build"]

#: the candidates whose K5 fine-tunes ``make models`` builds (those the pre-registered rule asked for: round 3's
#: ``s14d_fmnist112_full`` met K1-K4 and K6 off the shelf, with a cost at keep 0.7 whose interval excludes 0)
FINETUNED: tuple[str, ...] = ("s14d_fmnist112_full",)


def trainable(depth: int = 12) -> list[str]:
    """The parameter-name prefixes that train: blocks from :data:`FINETUNE`'s ``trainable_from_block`` (1-based) on,
    the final norm and the head."""
    first = int(FINETUNE["trainable_from_block"]) - 1
    return [f"blocks.{i}." for i in range(first, depth)] + ["norm.", "fc_norm.", "head."]


def k5_config() -> PruneConfig:
    """EViT at :data:`FINETUNE`'s keep rate, fused inattentive token, blocks 4/7/10."""
    return PruneConfig(keep_rate=float(FINETUNE["keep_rate"]), name=f"fuse@{FINETUNE['keep_rate']:g}")


def _images(c: Candidate) -> int:
    """The training images of ``c``'s fine-tunes: its own in round 1, round 2's
    :data:`~tokenprune.training.proxy.round2.FINETUNE_IMAGES` after (on whole images with its base's augmentation,
    which the recipe inherits)."""
    if c.round == 1:
        return c.train_images
    from tokenprune.training.proxy import round2

    return round2.FINETUNE_IMAGES


def has_control(c: Candidate) -> bool:
    """Whether candidate ``c``'s K5 has its unpruned control (round 3 on: its pre-registration declares it)."""
    return c.round >= 3


def control_recipe(c: Candidate, seed: int) -> TrainRecipe:
    """The recipe of the control of candidate ``c``'s fine-tune with ``seed`` (``<candidate>_ft_unpruned_s<seed>``):
    :func:`k5_recipe` without pruning."""
    return k5_recipe(c, seed, control=True)


def k5_recipe(c: Candidate, seed: int, control: bool = False) -> TrainRecipe:
    """The recipe of candidate ``c``'s fine-tune with ``seed`` (``<candidate>_ft_fuse70_s<seed>``; ``control``: its
    unpruned control, ``<candidate>_ft_unpruned_s<seed>``, evaluated unpruned and at keep 0.7)."""
    base = model_recipes.find_recipe(c.name, "default")[1]
    tag = "unpruned" if control else "fuse70"
    rec = finetune_recipe(base, None if control else k5_config(), name=f"{c.name}_ft_{tag}_s{seed}", seed=seed,
                          epochs=float(FINETUNE["epochs"]), batch_size=int(FINETUNE["batch"]), lr=float(FINETUNE["lr"]),
                          min_lr=float(FINETUNE["min_lr"]), warmup_epochs=float(FINETUNE["warmup"]),
                          keep_length=0.0, keep_start=0.0, train_subset=_images(c), val_subset=None,
                          test_subset=None, trainable=trainable(), weight_decay=float(FINETUNE["weight_decay"]),
                          dtype="fp32")
    return rec.replace(arch={"builder": "finetune", "base": c.name, "base_hash": base.recipe_hash()},
                       extra={**base.extra, "finetune": tag, "numerics": NUMERICS_VERSION,
                              "test_images": c.test_images,
                              "outputs": ("logits unpruned and at keep 0.7" if control else "logits at keep 0.7") +
                                         " on the test images"})


def train_and_measure(c: Candidate, seed: int, progress: bool = False,
                      control: bool = False) -> tuple[dict[str, np.ndarray], dict]:
    """Fine-tune candidate ``c`` with ``seed`` and measure it pruned at keep 0.7 on its test images (fp32);
    ``control``: fine-tune it unpruned and measure it unpruned and at keep 0.7."""
    recipe = k5_recipe(c, seed, control)
    torch.manual_seed(seed)
    model, info = base_models.load_base_model(c.name, progress=False)
    data = recipe_data.load_recipe_data(recipe)
    train_s = finetune(model, recipe, as_tensors(data["train"]), None if control else k5_config(), seed=seed,
                       progress=progress).train_time_s
    model = model.cpu().eval()
    x, y = as_tensors(recipe_data.eval_data(recipe, n=c.test_images))
    X = model.tp_preprocess(x)
    weights = checkpoints.weights_sha256(model, recipe.trainable)
    if control:
        arrays: dict[str, np.ndarray] = {"labels": y.numpy()}
        test: dict[str, Any] = {"n": int(len(y))}
        for cfg in (None, k5_config()):
            m = model if cfg is None else cfg.apply(copy.deepcopy(model), seed=0)
            p = predict(m, X, y, batch=64, dtype="fp32")
            label = "unpruned" if cfg is None else cfg.label
            arrays[f"logits/{label}"] = p.logits.float().numpy()
            test[f"accuracy/{label}"] = float(p.correct.mean())
        return arrays, {"weights_sha256": weights, "train_time_s": round(train_s, 1), "test": test}
    p = predict(model, X, y, batch=64, dtype="fp32")
    acc = float(p.correct.mean())
    return ({"logits": p.logits.float().numpy(), "labels": y.numpy()},
            {"weights_sha256": weights, "train_time_s": round(train_s, 1),
             "test": {"accuracy": acc, "n": int(len(y)), "keep_rate": FINETUNE["keep_rate"]}})


def load(c: Candidate, seed: int, profile: str = "default") -> tuple[dict[str, np.ndarray], dict]:
    """The cached outputs of candidate ``c``'s fine-tune with ``seed`` (missing: an error naming ``make models``)."""
    return checkpoints.load_outputs(k5_recipe(c, seed), checkpoints.checkpoint_dir(profile))


def load_control(c: Candidate, seed: int, profile: str = "default") -> tuple[dict[str, np.ndarray], dict]:
    """The cached outputs of the control of candidate ``c``'s fine-tune with ``seed`` (missing: an error naming
    ``make models``)."""
    return checkpoints.load_outputs(control_recipe(c, seed), checkpoints.checkpoint_dir(profile))


def build(profile: str = "default", progress: bool = True, force: bool = False,
          only: Optional[Sequence[str]] = None, candidates: Sequence[Candidate] = CANDIDATES) -> list[dict[str, Any]]:
    """``make models``: the fine-tunes of :data:`FINETUNED` among ``candidates`` (round 1's by default; ``only``: of
    these candidates), every seed of :data:`FINETUNE` (with its control where :func:`has_control`), beside the
    ``default`` checkpoints (other profiles: nothing). Returns the sidecars."""
    if profile != "default":
        return []
    infos = []
    for c in candidates:
        if c.name not in (FINETUNED if only is None else only):
            continue
        for s in FINETUNE["seeds"]:
            for control in (False, True) if has_control(c) else (False,):
                _, info = checkpoints.ensure_outputs(
                    k5_recipe(c, s, control), lambda c=c, s=s, control=control: train_and_measure(c, s, progress,
                                                                                                  control),
                    checkpoints.checkpoint_dir(profile), force=force)
                if progress:
                    print(checkpoints.describe(info), flush=True)
                infos.append(info)
    return infos
