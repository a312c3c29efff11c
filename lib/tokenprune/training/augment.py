"""DeiT-style augmentation on batches of in-memory images: random-resized crops, random erasing, Mixup / CutMix.

DeiT (Touvron et al., 2021, https://arxiv.org/abs/2012.12877, Table 9) trains with random-resized crops, random
erasing (probability 0.25), Mixup (alpha 0.8) and CutMix (alpha 1.0), switching between them with probability 0.5,
and label smoothing 0.1; EViT fine-tunes with the same recipe. Here the crops are drawn for a whole batch (one box per
image, resized bilinearly as torchvision resizes tensors), and random erasing and Mixup / CutMix are timm's own
(``timm.data.random_erasing.RandomErasing``, ``timm.data.Mixup``; the loss is soft-target cross-entropy), applied to the
normalised batch in that order, as timm's loader and DeiT's ``main.py`` apply them. A recipe names them in its
``augment`` (:data:`AUGMENTATIONS`); the draws come from the generator the loop passes (crops) and from Python's and
NumPy's global generators (timm's), which the loop seeds and a resumed run restores.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence

import torch
import torch.nn.functional as F

__all__ = ["AUGMENTATIONS", "check_augment", "crop_boxes", "random_resized_crops", "BatchAugment"]

#: every key a recipe's ``augment`` may hold, with what it does; any other key is refused before training
AUGMENTATIONS = {
    "crop_pad": "random translation by up to that many pixels, zero fill, at the native size",
    "hflip": "random horizontal flip",
    "random_resized_crop": "torchvision's random-resized crop of lazy (on-disk) images",
    "random_resized_crop_scale": "batched random-resized crops: the crop's share of the image area, [low, high]",
    "random_resized_crop_ratio": "the crop's aspect ratio, [low, high], drawn log-uniformly (default [3/4, 4/3])",
    "random_erasing": "timm's random erasing (per-pixel noise) with this probability, after normalisation",
    "mixup": "timm's Mixup with this alpha (soft targets, label smoothing of the recipe)",
    "cutmix": "timm's CutMix with this alpha",
    "mixup_switch_prob": "the probability of CutMix rather than Mixup when both are on (default 0.5)",
}


def check_augment(augment: dict, recipe_name: str = "") -> None:
    """ValueError naming ``augment`` when it holds a key no part of the training performs."""
    unknown = sorted(set(augment) - set(AUGMENTATIONS))
    if unknown:
        raise ValueError(f"augment: {unknown} not accepted{f' (recipe {recipe_name!r})' if recipe_name else ''}; "
                         f"accepted: {', '.join(AUGMENTATIONS)}")


def crop_boxes(n: int, height: int, width: int, scale: Sequence[float], ratio: Sequence[float],
               generator: Optional[torch.Generator] = None, tries: int = 10) -> torch.Tensor:
    """``n`` boxes ``[x0, y0, x1, y1]`` (pixels, float) drawn as torchvision's ``RandomResizedCrop`` draws them:
    an area share uniform in ``scale``, an aspect ratio log-uniform in ``ratio``, a uniform position; a draw that
    does not fit is retried ``tries`` times, then the whole image's central crop at the nearest ratio is taken."""
    area = height * width
    lo, hi = math.log(ratio[0]), math.log(ratio[1])
    dev = generator.device if generator is not None else torch.device("cpu")
    boxes = torch.zeros(n, 4)
    done = torch.zeros(n, dtype=torch.bool)
    for _ in range(tries):
        s = torch.empty(n, device=dev).uniform_(scale[0], scale[1], generator=generator).cpu() * area
        r = torch.exp(torch.empty(n, device=dev).uniform_(lo, hi, generator=generator).cpu())
        w, h = torch.sqrt(s * r).round(), torch.sqrt(s / r).round()
        ok = ~done & (w >= 1) & (h >= 1) & (w <= width) & (h <= height)
        x0 = torch.floor(torch.rand(n, generator=generator, device=dev).cpu() * (width - w + 1))
        y0 = torch.floor(torch.rand(n, generator=generator, device=dev).cpu() * (height - h + 1))
        boxes[ok] = torch.stack([x0, y0, x0 + w, y0 + h], 1)[ok]
        done |= ok
    if not done.all():   # torchvision's fallback: a central crop at the ratio bounds
        in_ratio = width / height
        w, h = (width, round(width / ratio[0])) if in_ratio < ratio[0] else \
            (round(height * ratio[1]), height) if in_ratio > ratio[1] else (width, height)
        boxes[~done] = torch.tensor([(width - w) // 2, (height - h) // 2, (width - w) // 2 + w,
                                     (height - h) // 2 + h], dtype=torch.float32)
    return boxes


def random_resized_crops(x: torch.Tensor, size: int, scale: Sequence[float], ratio: Sequence[float] = (0.75, 4 / 3),
                         generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """One random-resized crop per image of the float batch ``x`` ``[B, C, H, W]``, each resized to ``size`` x
    ``size`` as torchvision resizes a tensor (bilinear, antialiased when shrinking)."""
    b, _, h, w = x.shape
    boxes = crop_boxes(b, h, w, scale, ratio, generator).long().tolist()
    out = []
    for img, (x0, y0, x1, y1) in zip(x, boxes):
        crop = img[None, :, y0:y1, x0:x1]
        out.append(crop if crop.shape[-2:] == (size, size) else
                   F.interpolate(crop, size=(size, size), mode="bilinear", align_corners=False,
                                 antialias=size < max(crop.shape[-2:])))
    return torch.cat(out)


class BatchAugment:
    """Random erasing, then Mixup / CutMix, on a normalised training batch; :meth:`loss` is the matching loss
    (soft-target cross-entropy under Mixup / CutMix, else cross-entropy with the recipe's label smoothing)."""

    def __init__(self, augment: dict, num_classes: int, label_smoothing: float = 0.0,
                 device: str | torch.device = "cpu") -> None:
        from timm.data import Mixup
        from timm.data.random_erasing import RandomErasing

        check_augment(augment)
        p = float(augment.get("random_erasing", 0.0))
        self.erasing = RandomErasing(probability=p, mode="pixel", device=str(device)) if p > 0 else None
        mixup, cutmix = float(augment.get("mixup", 0.0)), float(augment.get("cutmix", 0.0))
        self.mixup = None
        if mixup > 0 or cutmix > 0:
            self.mixup = Mixup(mixup_alpha=mixup, cutmix_alpha=cutmix, switch_prob=float(augment.get(
                "mixup_switch_prob", 0.5)), label_smoothing=label_smoothing, num_classes=num_classes)
        self.label_smoothing = float(label_smoothing)

    @staticmethod
    def wanted(augment: dict) -> bool:
        """Whether ``augment`` asks for any of the batch augmentations."""
        return any(float(augment.get(k, 0.0)) > 0 for k in ("random_erasing", "mixup", "cutmix"))

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self.erasing is not None:
            x = self.erasing(x)
        if self.mixup is not None:
            if len(x) % 2:
                raise ValueError(f"batch: Mixup / CutMix need an even batch, got {len(x)}")
            x, y = self.mixup(x, y)
        return x, y

    def loss(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        if target.ndim == 2:   # soft targets (Mixup / CutMix with label smoothing)
            return torch.sum(-target * F.log_softmax(logits, dim=-1), dim=-1).mean()
        return F.cross_entropy(logits, target, label_smoothing=self.label_smoothing)

