"""The data a recipe trains and is evaluated on: the ``DatasetDict`` of a
:class:`~tokenprune.training.recipe.TrainRecipe` (a named dataset, SynthBirds, or cluttered scenes of a source,
generated with the recipe's settings), its test split, and the loaders of a paper run
(:class:`~tokenprune.training.recipe_book.RunSpec`: timm's DeiT transforms and samplers).
"""
from __future__ import annotations

import os
from typing import Any, Optional, Sequence

import torch

from tokenprune.training.proxy.candidates import SCENE_SOURCES
from tokenprune.training.recipe import TrainRecipe
from tokenprune.training.recipe_book import Limits, RunSpec

__all__ = ["CLUTTERED", "load_recipe_data", "eval_data", "build_data"]

_DATA_MEMO: dict[tuple, Any] = {}


def load_recipe_data(recipe: TrainRecipe, data_root: Optional[str | os.PathLike] = None) -> Any:
    """The ``DatasetDict`` a recipe trains on (a generated one is memoised per process: the cached fine-tunes of
    one base share its data, which takes about 40 s to generate)."""
    if recipe.dataset in (*CLUTTERED, "synth_birds"):
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
    if recipe.dataset in CLUTTERED:
        return _cluttered(recipe.dataset, kw, data_root)
    from tokenprune.data.datasets import load_dataset

    return load_dataset(recipe.dataset, root=data_root, **kw)


#: the recipe datasets of cluttered scenes: ``cluttered_<source>`` for each of SCENE_SOURCES
CLUTTERED = tuple(f"cluttered_{s}" for s in SCENE_SOURCES)


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
    if recipe.dataset in CLUTTERED:
        # each split is cluttered from its own items only, so the test split alone gives the same images (7 s, not 40)
        test = _cluttered(recipe.dataset, kw, data_root, splits=("test",))["test"]
    else:
        test = load_recipe_data(recipe, data_root)["test"]
    if n is not None and not 0 <= n <= len(test):
        raise ValueError(f"n: the recipe {recipe.name!r} has {len(test)} test images, asked for {n}")
    return test if n is None else test.select(range(n))


# ----------------------------------------------------------------------------------------------
# a paper run's loaders
# ----------------------------------------------------------------------------------------------


class _Images(torch.utils.data.Dataset):
    """Rows of a split (``path`` or ``image``, ``label``) through a torchvision-style transform."""

    def __init__(self, split: Any, transform, n: Optional[int] = None, seed: int = 0):
        self.split, self.transform = split, transform
        self.index = list(range(len(split)))
        if n is not None and n < len(split):
            from tokenprune.data.datasets import class_balanced_indices

            self.index = sorted(class_balanced_indices(split["label"], n, seed).tolist())

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i: int):
        from PIL import Image

        row = self.split[self.index[i]]
        img = Image.open(row["path"]).convert("RGB") if row.get("path") else row["image"].convert("RGB")
        return self.transform(img), int(row["label"])


def build_data(spec: RunSpec, data_root: Optional[str | os.PathLike], world: int, rank: int, limits: Limits):
    """``(train loader, eval loader, classes, train sampler)``: DeiT's training transform and evaluation crop by
    ``timm.data.create_transform``, the repeated-augmentation sampler when the recipe sets ``repeated_aug``."""
    from timm.data import create_transform
    from timm.data.distributed_sampler import RepeatAugSampler

    from tokenprune.data.datasets import load_dataset

    v = spec.values
    ds = load_dataset(spec.dataset, root=data_root, val_fraction=0.0) if spec.dataset.startswith("imagenet") \
        else load_dataset(spec.dataset, root=data_root)
    size = int(v.get("img_size", 224))
    train_tf = create_transform(size, is_training=True, auto_augment=v.get("auto_augment"),
                                color_jitter=float(v.get("color_jitter", 0.4)),
                                interpolation=v.get("train_interpolation", "bicubic"),
                                re_prob=float(v.get("reprob", 0.0)), re_mode="pixel", re_count=1)
    eval_tf = create_transform(size, is_training=False, interpolation="bicubic",
                               crop_pct=float(v.get("eval_crop_pct", 0.875)))
    train_ds = _Images(ds["train"], train_tf)
    eval_ds = _Images(ds["test"], eval_tf, n=limits.eval_images, seed=spec.seed)
    if v.get("repeated_aug"):
        # DeiT's RASampler (timm's RepeatAugSampler) keeps a multiple of 256 images per epoch: none of a set smaller
        # than 256 x processes (a fixture), which then keeps every image
        rnd = 256 if len(train_ds) >= 256 * world else 0
        sampler = RepeatAugSampler(train_ds, num_replicas=world, rank=rank, shuffle=True, selected_round=rnd)
    elif world > 1:
        sampler = torch.utils.data.DistributedSampler(train_ds, num_replicas=world, rank=rank, shuffle=True,
                                                      seed=spec.seed)
    else:
        sampler = torch.utils.data.RandomSampler(train_ds, generator=torch.Generator().manual_seed(spec.seed))
    batch = limits.batch_per_process or max(1, int(v["global_batch"]) // world)
    kw = dict(num_workers=limits.workers, pin_memory=torch.cuda.is_available(), persistent_workers=limits.workers > 0)
    train_dl = torch.utils.data.DataLoader(train_ds, batch_size=batch, sampler=sampler, drop_last=True, **kw)
    eval_sampler = torch.utils.data.DistributedSampler(eval_ds, world, rank, shuffle=False) if world > 1 else None
    eval_dl = torch.utils.data.DataLoader(eval_ds, batch_size=batch, sampler=eval_sampler, **kw)
    return train_dl, eval_dl, ds["train"].features["label"].num_classes, sampler
