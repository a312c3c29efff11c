"""Round 3 of notebook 00's pre-registration, the last: round 2's near-miss trained on its whole split, one declared
alternative, and K5 with its control.

What rounds 1 and 2 showed (notebook 00's committed report): no classification candidate met K1-K6. Round 2's
``s14d_fmnist112`` (64 tokens, one Fashion-MNIST item on a 48-px photo canvas, blocks 4-12 trained with DeiT's
augmentation) met K1-K4 with room and missed only K6 (top-1 83.14 [82.10, 84.20] against 85) after 3 epochs over
10,000 of the ~54,000 training images: an underfit model. At 196 tokens the same recipe stopped pruning from costing
anything (the 28-px items upsampled about 4.7x, a few source pixels per token).

Round 3 keeps the criteria K1-K6, the fallback rule (:func:`tokenprune.study.proxy.plan.choose`) and the measurement
(:mod:`tokenprune.training.proxy.outputs`) unchanged, except two clarifications of K5 (:data:`K5_CLARIFICATIONS`),
and tries at most two classification candidates in a fixed order (:data:`CANDIDATES`), stopping at the first that
meets every criterion (:data:`STOP_AT_FIRST`):

1. ``s14d_fmnist112_full``: ``s14d_fmnist112``'s recipe with one thing changed, the data: the whole training split
   (54,000 rows), for :data:`IMAGES_SEEN` images (:data:`EPOCHS` epochs). Not the augmentation, the item, the canvas,
   the blocks trained, the optimiser or the test images.
2. only if the first does not meet every criterion: ``s14d_fmnist196_c84``, DeiT-S's 196 tokens with the item drawn
   at 2.33x (an 84-px canvas upsampled to 196 px, 6 canvas pixels a token) instead of round 2's 4.7x: the near-miss's
   own magnification (a 48-px canvas at 112 px), on a scene of 14 x 14 tokens instead of 8 x 8; the same scene
   otherwise, trained by the same recipe for :data:`IMAGES_SEEN_196` images. Its object share, computed from the masks
   alone before any model exists, is :data:`OBJECT_SHARE_196` (:func:`object_share`; at 2x, a 98-px canvas, it is
   0.079).

No fourth round follows, whatever happens: notebook 00 reports what each round measured and what it means.

K5 (:data:`K5_CLARIFICATIONS`): it is not met when the 95 % interval of the candidate's off-the-shelf cost at keep
0.7 includes 0 (a share of a cost that may be zero is undefined), whatever a fine-tune gains; beside K5's fine-tunes
(:data:`tokenprune.training.proxy.candidates.FINETUNE`, round 2's :data:`~tokenprune.training.proxy.round2.
FINETUNE_IMAGES` images) runs their control, an unpruned fine-tune from the same base with the same seeds, images and
length, evaluated unpruned and at keep 0.7; K5's gain is reported next to the gain over that control. K5's rule is
unchanged. K5 is measured on every candidate the rule asks for (one that meets every other criterion of its role, or
the fallback's next in line; :func:`tokenprune.study.proxy.plan.k5_asked`), and notebook 00 refuses to decide while
one is missing. A candidate whose K5 the clarification already decides (its cost interval includes 0) needs no
fine-tune: no gain could meet it.

K6 is one measurement: top-1 on the candidate's test images as notebook 00 measures it from the cached outputs, read
by notebook 00 and by the premises of notebooks 01-04 alike.

The sensitivity factor per claim family (:data:`SENSITIVITY`): a tolerance in ImageNet points is scaled by the
proxy's ToMe cost ratio for ToMe-type claims (its ToMe cost at DeiT-S's MAC ratio over DeiT-S's 1.0 point at r = 13,
as before) and by its EViT cost ratio for EViT-type claims. For the EViT ratio's denominator, DeiT-S's off-the-shelf
cost of EViT at keep 0.7, no source verified here gives a figure (EViT's README gives trained models only), so
EViT-type claims whose tolerance is in ImageNet points are decided as directions, and say so.

Sizing (:data:`SIZED_FROM`, :func:`budget`): from the training and forward speeds measured on this project's 2-core
CPU before any round-3 model existed; every base model builds in parts of at most :data:`PART_MINUTES` that resume
(``python -m tokenprune models --round 3``), the round within :data:`ROUND_HOURS` wall-hours.
"""
from __future__ import annotations

import math
from typing import Any, Optional

from tokenprune.training.proxy import round2
from tokenprune.training.proxy.candidates import FINETUNE, Candidate
from tokenprune.training.recipe import TrainRecipe

__all__ = ["ROUND", "TRAIN_ROWS", "EPOCHS", "IMAGES_SEEN", "EPOCHS_196", "IMAGES_SEEN_196", "OBJECT_SHARE_196",
           "CANDIDATES", "K5_CLARIFICATIONS", "CONTROL", "SENSITIVITY", "SIZED_FROM", "PART_MINUTES", "ROUND_HOURS",
           "STOP_AT_FIRST", "CHOICE", "REPO_BUDGET_MB", "BUILT_ON", "candidate_recipe", "candidate_recipes",
           "object_share", "budget"]

#: this round's number in notebook 00's report
ROUND = 3
#: the training rows of Fashion-MNIST once the stratified validation tenth is carved out (the whole split)
TRAIN_ROWS = 54000
#: the first candidate's length: epochs over the whole training split, and the images it sees (5.4x round 2's 30,000,
#: each training image seen three times): the most that leaves room in :data:`ROUND_HOURS` for its measurement, K5's
#: fine-tunes and their control at :data:`SIZED_FROM`'s speeds
EPOCHS = 3
IMAGES_SEEN = EPOCHS * TRAIN_ROWS
#: the second candidate's length: one pass over the whole split (1.8x round 2's 196-token candidates' 30,000)
EPOCHS_196 = 1
IMAGES_SEEN_196 = EPOCHS_196 * TRAIN_ROWS
#: the second candidate's object share, the mean over the first 2,000 training scenes of the share of its 196 patch
#: tokens the item's mask touches (:func:`object_share`), computed before any round-3 model existed
OBJECT_SHARE_196 = 0.0991

#: K5's two clarifications, fixed before any K5 is measured (:func:`tokenprune.study.proxy.plan.judge` applies the
#: first; :mod:`tokenprune.training.proxy.finetunes` builds the control of the second)
K5_CLARIFICATIONS = {
    "undefined_cost": "K5 is not met when the 95 % interval of the off-the-shelf cost at keep 0.7 includes 0",
    "control": "beside K5's fine-tunes, an unpruned fine-tune from the same base, seeds, images and length, evaluated "
               "unpruned and at keep 0.7; K5's gain is reported next to the gain over it (K5's rule unchanged)",
}
#: K5's control: the fine-tune of :data:`tokenprune.training.proxy.candidates.FINETUNE` at keep 1.0, the same seeds
CONTROL = {"keep_rate": 1.0, "seeds": FINETUNE["seeds"], "evaluated_at": (1.0, FINETUNE["keep_rate"])}

#: the sensitivity factor per claim family: the proxy's measurement, DeiT-S's reference in points (None: no verified
#: source gives it, and the family's claims with a tolerance in ImageNet points are decided as directions)
SENSITIVITY = {
    "tome": {"measure": "tome_cost", "reference": "DEIT_CLASS_OFF_THE_SHELF['tome_deit_s_r13_pp']"},
    "evit": {"measure": "cost@0.7", "reference": None},
}

#: the speeds the sizing used, images per second by input size, fp32, on this project's 2-core CPU (an AMD EPYC with
#: AVX2 and no AVX-512): training steps of blocks 4-12 at batch 32, unpruned and at keep 0.7, by ``python -m
#: tokenprune bench --model vit_small_patch14_dinov2 --img-size S --keep 1.0 0.7 --train-from-block 4 --batch 32
#: --rounds 3``, and unpruned forward passes at batch 64 (the same command without ``--train-from-block``)
SIZED_FROM: dict[str, dict[int, float]] = {"train_img_per_s": {112: 12.1, 196: 3.5},
                                           "pruned_train_img_per_s": {112: 20.1, 196: 6.1},
                                           "forward_img_per_s": {112: 33.7, 196: 7.9}}
#: the longest part of a base model's build; an epoch of the whole split is longer here (74 min at 112 px), so a build
#: pauses inside an epoch and resumes at its next batch (:func:`tokenprune.training.loop.train`'s ``within_epochs``)
PART_MINUTES = 60
#: the wall-hours round 3 may take on this CPU: its candidates, K5's fine-tunes and their control. At
#: :data:`SIZED_FROM`'s speeds the first candidate with its measurement, K5 and control takes 4.9 h, and the second
#: would take 8.1 h more (a 196-token epoch alone is 4.3 h, its K5 and control 3.1 h): it cannot be built on this CPU
#: within the round. So the second is built only where a GPU is lent (by the same recipes, the machine recorded); on
#: this CPU alone the round ends after the first, and notebook 00 reports the second as not built, over budget
ROUND_HOURS = 7.0
#: where each candidate may be built: ``cpu`` (this CPU, within :data:`ROUND_HOURS`) or ``gpu`` (only where a GPU is
#: lent), fixed with :func:`budget`'s figures
BUILT_ON = {"s14d_fmnist112_full": "cpu", "s14d_fmnist196_c84": "gpu"}
#: candidates are built and measured in order; the round stops at its first candidate that meets every criterion
STOP_AT_FIRST = True
#: how the three rounds make one choice: :func:`tokenprune.study.proxy.plan.choose`, unchanged, over round 1's
#: candidates, then round 2's, then round 3's, once round 3 is complete (built in order up to its first candidate that
#: meets every criterion, or to its last); until then the choice of rounds 1-2 stands
CHOICE = "plan.choose over rounds 1, 2 and 3, once round 3 is complete"
#: the repository's growth round 3 may cause (each base model stores blocks 4-12, the norm and the head in bf16, about
#: 32 MB; cached outputs are a few MB)
REPO_BUDGET_MB = 100


def _candidate(name: str, img_size: int, canvas: int, test_images: int, train_images: int) -> Candidate:
    return Candidate(name=name, role="classification", img_size=img_size, patch=14, source="fashion_mnist",
                     canvas=canvas, n_clutter=0, background="photo", background_contrast=0.5, head="deep",
                     train_images=train_images, test_images=test_images, round=ROUND)


#: the candidates of round 3 in the order they are built and tried
CANDIDATES: tuple[Candidate, ...] = (
    _candidate("s14d_fmnist112_full", 112, 48, 5000, TRAIN_ROWS),
    _candidate("s14d_fmnist196_c84", 196, 84, 3000, TRAIN_ROWS),
)

_EPOCHS = {"s14d_fmnist112_full": EPOCHS, "s14d_fmnist196_c84": EPOCHS_196}


def candidate_recipe(c: Candidate) -> TrainRecipe:
    """The recipe of round-3 candidate ``c``'s base model: round 2's recipe of the same scene
    (:func:`tokenprune.training.proxy.round2.candidate_recipe`) on the whole training split for the round's length."""
    if c not in CANDIDATES:
        raise ValueError(f"candidate: {c.name!r} not accepted; accepted: {[k.name for k in CANDIDATES]}")
    base = round2.candidate_recipe(c)
    return base.replace(train_subset=None, epochs=_EPOCHS[c.name],
                        extra={**base.extra, "round": ROUND, "images_seen": _EPOCHS[c.name] * TRAIN_ROWS})


def candidate_recipes() -> dict[str, TrainRecipe]:
    """Every round-3 candidate's base-model recipe, in :data:`CANDIDATES` order."""
    return {c.name: candidate_recipe(c) for c in CANDIDATES}


def object_share(c: Candidate, n: int = 2000) -> float:
    """The mean share of ``c``'s patch tokens that its item's mask touches, over the first ``n`` training scenes:
    computed from the masks alone, before any model is built (K1's measurement on the training split)."""
    import numpy as np
    import torch

    from tokenprune.measure.coverage import mask_to_patch_grid
    from tokenprune.training import recipe_data

    recipe = candidate_recipe(c)
    train = recipe_data._cluttered(recipe.dataset, {**recipe.dataset_kwargs, "limit": n}, splits=["train"])["train"]
    mask = np.asarray(train.with_format("numpy")["object_mask"]) > 0
    grid = c.img_size // c.patch
    side = mask.shape[-1]
    if side % grid:
        raise ValueError(f"canvas: {side} px is not a multiple of the {grid}x{grid} token grid")
    return float(mask_to_patch_grid(torch.from_numpy(mask), side // grid, grid=(grid, grid)).float().mean())


def budget(speeds: Optional[dict[str, dict[int, float]]] = None) -> list[dict[str, Any]]:
    """Each candidate's planned wall-minutes on this CPU from ``speeds`` (default :data:`SIZED_FROM`): training
    (images seen at the unpruned training speed), its epochs and the parts it is built in, the off-the-shelf
    measurement (seven configurations on the test images at the unpruned forward speed, an upper bound), K5's three
    fine-tunes at the pruned training speed and their control at the unpruned one, and the running total against
    :data:`ROUND_HOURS` (where :data:`BUILT_ON` says the candidate is built on this CPU)."""
    speeds = SIZED_FROM if speeds is None else speeds
    rows, total = [], 0.0
    for order, c in enumerate(CANDIDATES, 1):
        epochs = _EPOCHS[c.name]
        train = epochs * TRAIN_ROWS / speeds["train_img_per_s"][c.img_size] / 60
        epoch = train / epochs
        measure = 7 * c.test_images / speeds["forward_img_per_s"][c.img_size] / 60
        seeds = len(FINETUNE["seeds"])
        k5 = seeds * round2.FINETUNE_IMAGES / speeds["pruned_train_img_per_s"][c.img_size] / 60
        control = seeds * round2.FINETUNE_IMAGES / speeds["train_img_per_s"][c.img_size] / 60
        total += train + measure + k5 + control
        rows.append({"order": order, "candidate": c.name, "role": c.role, "tokens": c.tokens,
                     "images_seen": epochs * TRAIN_ROWS, "built_on": BUILT_ON[c.name], "train_minutes": round(train, 1),
                     "epoch_minutes": round(epoch, 1), "parts": math.ceil(train / PART_MINUTES),
                     "measure_minutes": round(measure, 1), "k5_minutes": round(k5, 1),
                     "control_minutes": round(control, 1), "cumulative_hours": round(total / 60, 2)})
    return rows

