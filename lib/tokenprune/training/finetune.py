"""Fine-tuning a model with pruning in place: EViT's protocol (Liang et al., ICLR 2022, Sec. 4.1: the target
keep rate is reached by a cosine warm-up from ``keep_start`` over ``keep_length`` epochs, 0 when fine-tuning)
on the one training loop, :func:`tokenprune.training.loop.train`.

The caller states the recipe (epochs, images, learning rate, warm-up); :func:`finetune_recipe` derives it from
the model's base recipe, :func:`finetune` patches the model with the configuration, trains and leaves it at
the configuration's keep rate. :data:`FINETUNE_TRAINABLE` says what a fine-tune of a base model trains, for the
cached fine-tunes of :mod:`tokenprune.training.base_models` and a notebook's own alike.
"""
from __future__ import annotations

from typing import Any, Optional

import torch.nn as nn

from tokenprune.core.config import PruneConfig
from tokenprune.training.recipe import TrainRecipe
from tokenprune.training.loop import TrainResult, train

__all__ = ["FINETUNE_TRAINABLE", "finetune_trainable", "prune_spec", "finetune_recipe", "finetune"]

#: base model -> the parameter-name prefixes its fine-tunes train (a base not named here trains everything).
#: ViT-S/14 fine-tunes its last block, final norm and head (all after the last pruning location, block 10) on full
#: forward passes through the frozen, pruned backbone; its checkpoints store only those parts (3.6 MB in bf16, not
#: 44 MB; measured at keep 0.7 with fusion, one seed, 8,192 images: the last block alone reached 86.0 % test top-1,
#: the last two 86.8 %, at twice the size).
FINETUNE_TRAINABLE: dict[str, list[str]] = {
    "vit_s14_fmnist_ft": ["blocks.11.", "norm.", "fc_norm.", "head."],
}


def finetune_trainable(base_name: str) -> Optional[list]:
    """What a fine-tune of the base model ``base_name`` trains (:data:`FINETUNE_TRAINABLE`; a smoke name is its
    default model's; None: everything), so that a notebook's own fine-tunes of a base train what its cached ones do."""
    trainable = FINETUNE_TRAINABLE.get(base_name.removesuffix("_smoke"))
    return None if trainable is None else list(trainable)


def prune_spec(config: PruneConfig) -> dict:
    """The ``prune`` entry of a :class:`TrainRecipe` for ``config`` (locations, scorer, reducer and options)."""
    return {"locations": list(config.locations), "scorer": config.scorer, "reducer": config.reducer,
            "reducer_options": dict(config.reducer_options)}


def finetune_recipe(base: TrainRecipe, config: Optional[PruneConfig], *, name: str, seed: int, epochs: float,
                    batch_size: int, lr: float, min_lr: float, warmup_epochs: float = 0.0,
                    keep_length: float = 0.0, keep_start: float = 0.0, train_subset: Optional[int] = None,
                    **changes: Any) -> TrainRecipe:
    """``base`` changed into a fine-tuning recipe with pruning by ``config`` (None: unpruned fine-tuning).

    ``keep_length`` > 0 is EViT's keep-rate warm-up over that many epochs from ``keep_start``; 0 prunes at
    the target keep rate from the first step. What trains is what the cached fine-tunes of ``base`` train
    (:func:`finetune_trainable`: for the pretrained ViT-S/14 its last block, final norm and head; otherwise
    everything) unless ``changes`` name ``trainable``. Further ``changes`` (image size, preprocessing, subsets) are
    passed to :meth:`TrainRecipe.replace`."""
    keep = 1.0 if config is None else float(config.keep_rate)
    changes.setdefault("trainable", finetune_trainable(base.name))
    rec = base.replace(name=name, seed=int(seed), epochs=epochs, train_subset=train_subset, batch_size=batch_size,
                       lr=lr, min_lr=min_lr, warmup_epochs=warmup_epochs, keep_rate=keep, keep_start=keep_start,
                       keep_length=keep_length, **changes)
    return rec if config is None else rec.replace(prune=prune_spec(config))


def finetune(model: nn.Module, recipe: TrainRecipe, train_data: Any, config: Optional[PruneConfig] = None, *,
             device: Any = None, patch_keep_rate: Optional[float] = None, seed: Optional[int] = 0,
             progress: bool = False) -> TrainResult:
    """Fine-tune ``model`` in place by ``recipe`` on ``train_data`` with pruning by ``config``.

    The model is patched with ``config`` first (at ``patch_keep_rate`` when given, e.g. 1.0 so that the
    recipe's warm-up sets the rate; ``train`` keeps an already patched model as it is) and is left at the
    configuration's keep rate afterwards."""
    if config is not None:
        start = config if patch_keep_rate is None else config.with_(keep_rate=patch_keep_rate)
        start.apply(model, seed=seed)
    result = train(recipe, model, train_data, None, device=device, progress=progress)
    if config is not None and float(config.keep_rate) < 1.0:
        model.keep_rate = config.keep_rate
    return result
