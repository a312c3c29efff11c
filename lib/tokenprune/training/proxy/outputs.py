"""The proxy candidates measured off the shelf, cached as their outputs (notebook 00's pre-registered measurement).

For each candidate of :data:`tokenprune.training.proxy.candidates.CANDIDATES`, its base model runs unpruned and
pruned by every configuration of :func:`ots_configs` on the same test images (the first ``test_images`` of the
recipe's test split, fp32); the logits of each, the labels and the share of patch tokens the object touches per
image are cached by :mod:`tokenprune.training.checkpoints` under a recipe whose hash covers the base model's recipe,
the configurations and :data:`tokenprune.core.patch.NUMERICS_VERSION`. ``make models`` builds them;
:func:`recheck` recomputes the first images of every configuration and fails when the cache no longer matches the
code, by the rule of :mod:`tokenprune.training.recheck` that tells another CPU's rounding from a real change (notebook
00 calls it; in CI a missing cache is an error, never a silent rebuild).
"""
from __future__ import annotations

import copy
from typing import Any, Optional, Sequence

import numpy as np
import torch

from tokenprune.core.config import UNPRUNED, PruneConfig
from tokenprune.core.patch import NUMERICS_VERSION
from tokenprune.measure.evaluation import predict
from tokenprune.measure.coverage import mask_to_patch_grid
from tokenprune.methods.tome import tome_schedule
from tokenprune.training import base_models, checkpoints, model_recipes, recipe_data
from tokenprune.training import recheck as recheck_rule
from tokenprune.training.recipe import TrainRecipe
from tokenprune.training.sources import as_tensors
from tokenprune.training.proxy.candidates import CANDIDATES, Candidate

__all__ = ["KEEP_RATES", "TOME_R", "tome_r_of",
           "RECHECK_IMAGES", "ots_configs", "ots_recipe", "test_set",
           "measure", "load", "build", "recheck", "CacheStale", "MEASURE_BATCH"]

#: EViT with its fused token at blocks 4/7/10 at these keep rates (0.7 and 0.5: the cost bands)
KEEP_RATES = (0.9, 0.7, 0.5)
#: ToMe's r at 64 tokens whose MAC ratio (0.621) is nearest DeiT-S's at r = 13 (2.7 / 4.6 = 0.587; r = 5 gives
#: 0.528); notebook 00 recomputes the nearest r from its MACs and refuses a cache of another r
TOME_R = 4
#: images of every configuration that :func:`recheck` recomputes (by the rule of :mod:`tokenprune.training.recheck`)
RECHECK_IMAGES = 64
#: images per forward pass of :func:`measure` (random selection draws per batch: a recheck uses whole batches)
MEASURE_BATCH = 64


class CacheStale(RuntimeError):
    """Cached outputs that the code no longer reproduces."""


def ots_configs(num_patches: int, depth: int, tome_r: int = TOME_R) -> list[PruneConfig]:
    """The configurations a candidate is measured with, unpruned aside: EViT with fusion at :data:`KEEP_RATES`,
    random and min-k selection (the inverse [CLS] attention) with fusion at keep 0.5, and ToMe at ``tome_r``
    (:func:`tome_r_of` the candidate; bipartite merging in every block, proportional attention)."""
    out = [PruneConfig(keep_rate=k, name=f"fuse@{k:g}") for k in KEEP_RATES]
    out += [PruneConfig(keep_rate=0.5, scorer="random", name="random@0.5"),
            PruneConfig(keep_rate=0.5, scorer="inverse:cls_attention", name="mink@0.5")]
    rates, locations = tome_schedule(tome_r, num_patches, depth)
    out.append(PruneConfig(scorer="cls_attention", reducer="bipartite", keep_rate=rates, locations=locations,
                           prop_attn=True, name=f"tome@r{tome_r}"))
    return out


def tome_r_of(c: Candidate) -> int:
    """ToMe's r for candidate ``c``: :data:`TOME_R` in round 1 (64 tokens), the round's own per token count after
    (:data:`tokenprune.training.proxy.round2.TOME_R`)."""
    if c.round == 1:
        return TOME_R
    from tokenprune.training.proxy import round2

    return round2.TOME_R[c.tokens]


def _labels(c: Candidate) -> list[str]:
    return ["unpruned"] + [cfg.label for cfg in ots_configs(c.tokens, 12, tome_r_of(c))]


def ots_recipe(c: Candidate) -> TrainRecipe:
    """The cache's recipe: the base model's, renamed ``<candidate>_ots``, with the configurations, the numerics
    version and the images in ``extra`` (so any of them makes a new entry)."""
    base = model_recipes.find_recipe(c.name, "default")[1]
    return base.replace(name=f"{c.name}_ots", extra={
        **base.extra, "outputs": "off-the-shelf logits", "base_hash": base.recipe_hash(), "configs": _labels(c),
        "numerics": NUMERICS_VERSION, "test_images": c.test_images, "dtype": "fp32"})


def test_set(c: Candidate, recipe: TrainRecipe, n: Optional[int] = None) -> tuple[torch.Tensor, torch.Tensor,
                                                                                   np.ndarray]:
    """The first ``n`` (default: the candidate's ``test_images``) test images as uint8, their labels, and per image
    the share of the 64 patch tokens the object touches (``mask_to_patch_grid`` on the scene's own pixel grid: a
    token covers ``canvas / 8`` scene pixels; for SynthBirds the object is the union of its part masks)."""
    n = c.test_images if n is None else n
    test = recipe_data.eval_data(recipe, n=n)
    x, y = as_tensors(test)
    grid = c.img_size // c.patch
    cols = test.with_format("numpy")
    # SynthBirds: the object is every part (part ids > 0)
    mask = np.asarray(cols["object_mask"] if "object_mask" in test.column_names else cols["part_mask"]) > 0
    side = mask.shape[-1]
    if side % grid:
        raise ValueError(f"canvas: {side} px is not a multiple of the {grid}x{grid} token grid")
    touched = mask_to_patch_grid(torch.from_numpy(mask), side // grid, grid=(grid, grid)).float().mean(-1)
    return x, y, touched.numpy()


def measure(c: Candidate, progress: bool = False, n: Optional[int] = None) -> tuple[dict[str, np.ndarray], dict]:
    """Every configuration's logits on the candidate's test images (fp32; ``n``: only the first ``n``)."""
    model, info = base_models.load_base_model(c.name, progress=False)
    recipe = TrainRecipe.from_dict(info["recipe"])
    x, y, share = test_set(c, recipe, n)
    X = model.tp_preprocess(x)
    arrays: dict[str, np.ndarray] = {"labels": y.numpy(), "object_token_share": share.astype(np.float32)}
    configs = [UNPRUNED] + ots_configs(model.patch_embed.num_patches, len(model.blocks), tome_r_of(c))
    for cfg in configs:
        m = cfg.apply(copy.deepcopy(model), seed=0) if cfg is not UNPRUNED else model
        p = predict(m, X, y, batch=MEASURE_BATCH, dtype="fp32")
        arrays[f"logits/{cfg.label}"] = p.logits.float().numpy()
        if progress:
            print(f"[models] {c.name}: {cfg.label} top-1 {100 * p.correct.mean():.2f} %", flush=True)
    acc = float((arrays["logits/unpruned"].argmax(-1) == arrays["labels"]).mean())
    return arrays, {"weights_sha256": info["sha256"], "test": {"accuracy": acc, "n": int(len(y))},
                    "train_time_s": 0.0}


def load(c: Candidate, profile: str = "default") -> tuple[dict[str, np.ndarray], dict]:
    """The cached outputs of ``c`` (:class:`~tokenprune.training.checkpoints.CheckpointMissingError` when absent,
    naming ``make models``)."""
    return checkpoints.load_outputs(ots_recipe(c), checkpoints.checkpoint_dir(profile))


def recheck(c: Candidate, arrays: dict[str, np.ndarray], n: int = RECHECK_IMAGES) -> list[recheck_rule.Recheck]:
    """Recompute the first ``n`` images of every configuration and compare with the cache by the rule of
    :mod:`tokenprune.training.recheck` (continuous configurations within its tight tolerance; one with a discrete
    step may move a few images at a near tie): each configuration's :class:`~tokenprune.training.recheck.Recheck`, or
    :class:`CacheStale` naming the configuration when one is refused or the labels differ."""
    fresh, _ = measure(c, n=n)
    if not np.array_equal(fresh["labels"], arrays["labels"][:n]):
        raise CacheStale(f"{c.name}: the cached test labels differ from the recipe's test images")
    configs = {cfg.label: cfg for cfg in ots_configs(c.tokens, 12, tome_r_of(c))}
    out = []
    for k, v in fresh.items():
        if not k.startswith("logits/"):
            continue
        label = k[len("logits/"):]
        r = recheck_rule.compare(label, v, arrays[k][:n], recheck_rule.is_continuous(configs.get(label)))
        if not r.ok:
            raise CacheStale(f"{c.name}: {r.refusal()}; rebuild with `python -m tokenprune models --force --only "
                             f"{c.name}`")
        out.append(r)
    return out


def build(profile: str = "default", progress: bool = True, force: bool = False,
          only: Optional[Sequence[str]] = None, candidates: Sequence[Candidate] = CANDIDATES) -> list[dict[str, Any]]:
    """``make models``: the off-the-shelf outputs of every candidate of ``candidates`` (round 1's by default;
    ``only``: these), in candidate order, beside the ``default`` checkpoints (other profiles: nothing). Returns the
    sidecars."""
    if profile != "default":
        return []
    infos = []
    for c in candidates:
        if only is not None and c.name not in only:
            continue
        _, info = checkpoints.ensure_outputs(ots_recipe(c), lambda c=c: measure(c, progress),
                                             checkpoints.checkpoint_dir(profile), force=force)
        if progress:
            print(checkpoints.describe(info), flush=True)
        infos.append(info)
    return infos
