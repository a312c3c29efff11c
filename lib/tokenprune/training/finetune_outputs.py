"""The proxy's cached fine-tunes (:data:`tokenprune.training.model_recipes.FINETUNED_BASES`, every condition of
:data:`~tokenprune.training.model_recipes.FINETUNE_CONDITIONS` and seed) as their outputs on their base model's test
split (:mod:`tokenprune.training.checkpoints`' cached outputs): each fine-tune pruned as it was trained
(:func:`eval_config`), its fp32 logits on every test image. Notebook 01 evaluates these 20 models on the first
images of that split, which is most of its time on a 2-core CPU; ``make models`` measures them once (:func:`build`)
and the notebook reads the rows of its images (:func:`cached_logits`), each fine-tune rechecked on
:data:`RECHECK_IMAGES` of them against its checkpoint.

An entry is named ``<fine-tune>_test``; its recipe is the fine-tune's with the images and the pruning recorded in
``extra`` (:func:`outputs_recipe`), so a retrained fine-tune is a new entry.
"""
from __future__ import annotations

import functools
from typing import Optional

import numpy as np
import torch

from tokenprune.core.config import PruneConfig
from tokenprune.measure.evaluation import predict
from tokenprune.training import base_models, checkpoints, recipe_data
from tokenprune.training import recheck as recheck_rule
from tokenprune.training.model_recipes import FINETUNE_CONDITIONS, FINETUNED_BASES, recipes_for
from tokenprune.training.recipe import TrainRecipe
from tokenprune.training.sources import as_tensors

__all__ = ["EVAL_BATCH", "RECHECK_IMAGES", "eval_config", "outputs_recipe", "finetunes_of", "measure",
           "cached_logits", "build"]

#: the batch the outputs are computed in: notebook 01's at ``default``, so that the rows of its images are computed
#: in the same batches (the batch changes logits by floating-point noise at most)
EVAL_BATCH = 500
#: images on which a cached entry is recomputed from its checkpoint when it is read (compared by the rule of
#: :mod:`tokenprune.training.recheck`)
RECHECK_IMAGES = 64


def eval_config(recipe: TrainRecipe) -> PruneConfig:
    """How fine-tune ``recipe`` is evaluated: pruned as its condition trains it (keep 1.0: unpruned)."""
    keep, reducer, _ = FINETUNE_CONDITIONS[recipe.extra["finetune"]]
    return PruneConfig(keep_rate=keep, reducer=reducer)


def outputs_recipe(recipe: TrainRecipe) -> TrainRecipe:
    """The record of fine-tune ``recipe``'s outputs (``<name>_test``): its recipe, with its name, its hash, the images
    and the pruning of the evaluation in ``extra``."""
    return recipe.replace(name=f"{recipe.name}_test", extra={
        **recipe.extra, "outputs_of": recipe.name, "outputs_of_hash": recipe.recipe_hash(),
        "images": f"the test split of {recipe.arch['base']}", "eval_config": repr(eval_config(recipe)),
        "eval_dtype": "fp32"})


def finetunes_of(base: str, profile: str = "default") -> dict[str, TrainRecipe]:
    """The cached fine-tunes of base model ``base`` at ``profile``, by name."""
    return {n: r for n, r in recipes_for(profile).items() if r.arch.get("builder") == "finetune"
            and r.arch.get("base") == base}


def measure(name: str, images: torch.Tensor, labels: torch.Tensor) -> tuple[dict, dict]:
    """Fine-tune ``name`` (its committed checkpoint) pruned by :func:`eval_config` on ``images``: the arrays and the
    sidecar part of its entry."""
    m, info = base_models.load_base_model(name, progress=False)
    recipe = TrainRecipe.from_dict(info["recipe"])
    eval_config(recipe).apply(m)
    p = predict(m, images, labels, batch=EVAL_BATCH, dtype="fp32", device="cpu")
    correct = p.correct.astype(float)
    return {"logits": p.logits.numpy(), "labels": p.labels.numpy().astype(np.int16)}, {
        "weights_sha256": checkpoints.weights_sha256(m), "source_checkpoint": info["checkpoint"],
        "source_checkpoint_sha256": info["sha256"], "eval_batch": EVAL_BATCH, "torch_threads": torch.get_num_threads(),
        "test": {"n": int(len(labels)), "accuracy": float(correct.mean()), "eval_dtype": "fp32"}}


def cached_logits(recipe: TrainRecipe, model: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor,
                  cache_dir: Optional[object] = None) -> Optional[torch.Tensor]:
    """The cached logits of fine-tune ``recipe`` on the first ``len(labels)`` images of its test split, or None when
    it has no entry (an error under ``TOKENPRUNE_CACHE_ONLY``). ``model`` is the fine-tune, pruned by
    :func:`eval_config`, and ``images`` are those images preprocessed for it: the first :data:`RECHECK_IMAGES` are
    evaluated again and must agree by the rule of :mod:`tokenprune.training.recheck` (a fine-tune pruned with a
    discrete step may move a few images at a near tie), and ``labels`` must be the entry's, else
    :class:`~tokenprune.training.checkpoints.CheckpointMismatchError`."""
    out = outputs_recipe(recipe)
    folder = checkpoints.checkpoint_dir("default") if cache_dir is None else cache_dir
    if not checkpoints.has_outputs(out, folder):
        checkpoints.refuse_if_cache_only(out.name, checkpoints.output_paths(out, folder)[0])
        return None
    arrays, _ = checkpoints.load_outputs(out, folder)
    n = len(labels)
    if n > len(arrays["labels"]) or not np.array_equal(arrays["labels"][:n], labels.numpy()):
        raise checkpoints.CheckpointMismatchError(
            f"{out.name}: its {len(arrays['labels'])} test labels do not begin with the {n} labels asked for; "
            f"{checkpoints.rebuild_hint(*checkpoints.output_paths(out, folder))}")
    logits = torch.from_numpy(arrays["logits"][:n])
    k = min(RECHECK_IMAGES, n)
    again = predict(model, images[:k], labels[:k], batch=k, dtype="fp32", device="cpu").logits
    r = recheck_rule.compare(out.name, again.numpy(), logits[:k].numpy(),
                             recheck_rule.is_continuous(eval_config(recipe)))
    if not r.ok:
        raise checkpoints.CheckpointMismatchError(
            f"{r.refusal()} against its checkpoint; {checkpoints.rebuild_hint(*checkpoints.output_paths(out, folder))}")
    return logits


def build(profile: str = "default", progress: bool = True, force: bool = False) -> list[dict]:
    """``make models``: every cached fine-tune's outputs on its base model's test split, beside the ``default``
    checkpoints (other profiles: nothing; their notebooks evaluate the fine-tunes). Returns the sidecars."""
    if profile != "default":
        return []
    out = []
    for base, *_ in FINETUNED_BASES.values():
        model, info = base_models.load_base_model(base, progress=False)

        @functools.cache
        def test_split(model=model, info=info) -> tuple[torch.Tensor, torch.Tensor]:
            """The base model's test split, preprocessed as its fine-tunes (and notebook 01) preprocess it: read
            only when an entry is to be measured."""
            x_raw, labels = as_tensors(recipe_data.eval_data(TrainRecipe.from_dict(info["recipe"])))
            return model.tp_preprocess(x_raw), labels

        for name, recipe in finetunes_of(base).items():
            def work(name=name, test_split=test_split):
                return measure(name, *test_split())

            _, side = checkpoints.ensure_outputs(outputs_recipe(recipe), work, checkpoints.checkpoint_dir(profile),
                                                 force=force)
            if progress:
                how = "loaded" if side.get("loaded") else f"measured in {side['wall_time_s']:.0f} s"
                print(f"{side['name']}: test acc {side['test']['accuracy']:.4f} (n={side['test']['n']}), {how}, "
                      f"{side['outputs']} {side['size_bytes'] / 1e6:.2f} MB", flush=True)
            out.append(side)
    return out
