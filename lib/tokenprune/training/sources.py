"""The data of a training run, batched: in-memory splits as uint8 tensors on the training device, lazy (on-disk)
splits through a DataLoader, and the batched preprocessing and augmentation (:class:`Preprocess`).

Data: the HF ``datasets`` splits of :mod:`tokenprune.data.datasets` / :mod:`tokenprune.data.synthetic` (columns
``image`` uint8 and ``label``). In-memory splits are converted once to uint8 tensors (on the training
device) and batched by indexing; augmentation and normalisation are batched tensor operations, so
there is no per-sample Python in the hot path and no DataLoader process. Splits whose ``image`` column
is a lazy ``datasets.Image`` (CUB, ImageNet folders: ``paper`` profile) are decoded by a DataLoader
with worker processes instead (RandomResizedCrop for training, resize + centre crop for evaluation).
A pair of tensors ``(x, y)`` works too; floating-point ``x`` (e.g. cached features) is used as is.
"""
from __future__ import annotations

from typing import Any, Iterable, Iterator, Optional, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from tokenprune.training.recipe import TrainRecipe

__all__ = ["as_tensors", "Preprocess", "Source", "LoaderSource", "make_source"]


def _is_lazy_split(split: Any) -> bool:
    feats = getattr(split, "features", None)
    if feats is None or "image" not in feats:
        return False
    import datasets

    return isinstance(feats["image"], datasets.Image)


def as_tensors(data: Any, subset: Optional[int] = None, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``(x, y)`` tensors from an in-memory split (``image`` uint8 -> ``[N, C, H, W]`` uint8, ``label``
    -> int64) or from a pair ``(x, y)`` (returned as tensors; 3-D uint8 images get a channel axis).

    ``subset``: keep ``subset`` rows drawn without replacement with ``numpy.random.default_rng(seed)``,
    in their original order.
    """
    if isinstance(data, (tuple, list)) and len(data) == 2:
        x, y = (torch.as_tensor(np.asarray(v)) if not isinstance(v, torch.Tensor) else v for v in data)
    else:
        if _is_lazy_split(data):
            raise ValueError("as_tensors: this split decodes images lazily (an on-disk dataset); train() and "
                             "evaluate() stream it through a DataLoader instead")
        from tokenprune.data.datasets import to_numpy

        x = torch.from_numpy(np.require(to_numpy(data, "image"), requirements=["C", "W"]))
        y = torch.from_numpy(np.asarray(to_numpy(data, "label")).astype(np.int64))
    y = y.long()
    if x.dtype == torch.uint8:
        if x.ndim == 3:
            x = x[:, None]
        elif x.ndim == 4 and x.shape[-1] in (1, 3) and x.shape[1] not in (1, 3):
            x = x.permute(0, 3, 1, 2)
        x = x.contiguous()
    if len(x) != len(y):
        raise ValueError(f"images ({len(x)}) and labels ({len(y)}) differ in length")
    if subset is not None and subset < len(y):
        idx = np.sort(np.random.default_rng(seed).choice(len(y), size=int(subset), replace=False))
        x, y = x[torch.from_numpy(idx)], y[torch.from_numpy(idx)]
    return x, y


class Preprocess:
    """Batched uint8 ``[B, C, H, W]`` -> normalised float ``[B, channels, img_size, img_size]``.

    Training augmentation (random translation with zero fill, horizontal flip) happens at the native
    size, before resizing; with ``crop_scale`` a random-resized crop of each image (area share in ``crop_scale``,
    aspect ratio in ``crop_aspect``) replaces the resize in training. Floating-point input (cached features) passes
    through unchanged.
    """

    def __init__(self, img_size: int, channels: int = 1, mean: Sequence[float] = (0.5,),
                 std: Sequence[float] = (0.5,), resize: str = "pad", crop_pad: int = 0, hflip: bool = False,
                 random_resized_crop: bool = False, crop_ratio: float = 0.875,
                 crop_scale: Optional[Sequence[float]] = None, crop_aspect: Sequence[float] = (0.75, 4 / 3)) -> None:
        if resize not in ("pad", "bilinear", "bicubic", "nearest"):
            raise ValueError(f"resize: expected pad, bilinear, bicubic or nearest, got {resize!r}")
        self.img_size = int(img_size)
        self.channels = int(channels)
        self.mean = torch.tensor([float(m) for m in mean]).view(1, -1, 1, 1)
        self.std = torch.tensor([float(s) for s in std]).view(1, -1, 1, 1)
        if self.mean.numel() not in (1, self.channels) or self.std.numel() not in (1, self.channels):
            raise ValueError(f"mean/std: expected 1 or {self.channels} values")
        self.resize = resize
        self.crop_pad = int(crop_pad)
        self.hflip = bool(hflip)
        self.random_resized_crop = bool(random_resized_crop)
        self.crop_ratio = float(crop_ratio)
        self.crop_scale = None if crop_scale is None else (float(crop_scale[0]), float(crop_scale[1]))
        self.crop_aspect = (float(crop_aspect[0]), float(crop_aspect[1]))

    @classmethod
    def from_recipe(cls, recipe: TrainRecipe) -> "Preprocess":
        """The recipe's preprocessing; a recipe whose ``augment`` holds a key no part of the training performs is
        refused (:func:`tokenprune.training.augment.check_augment`), never trained without it."""
        from tokenprune.training.augment import check_augment

        p, a = dict(recipe.preprocess), dict(recipe.augment)
        check_augment(a, recipe.name)
        return cls(recipe.img_size, channels=p.get("channels", 1), mean=p.get("mean", (0.5,)),
                   std=p.get("std", (0.5,)), resize=p.get("resize", "pad"), crop_pad=a.get("crop_pad", 0),
                   hflip=a.get("hflip", False), random_resized_crop=a.get("random_resized_crop", False),
                   crop_ratio=p.get("crop_ratio", 0.875), crop_scale=a.get("random_resized_crop_scale"),
                   crop_aspect=a.get("random_resized_crop_ratio", (0.75, 4 / 3)))

    def __repr__(self) -> str:
        return (f"Preprocess(img_size={self.img_size}, channels={self.channels}, mean={self.mean.flatten().tolist()}, "
                f"std={self.std.flatten().tolist()}, resize={self.resize!r}, crop_pad={self.crop_pad}, "
                f"hflip={self.hflip})")

    def _translate(self, x: torch.Tensor, g: Optional[torch.Generator]) -> torch.Tensor:
        p = self.crop_pad
        b, _, h, w = x.shape
        xp = F.pad(x, (p, p, p, p))
        dy = torch.randint(0, 2 * p + 1, (b,), generator=g, device=x.device)
        dx = torch.randint(0, 2 * p + 1, (b,), generator=g, device=x.device)
        rows = dy[:, None] + torch.arange(h, device=x.device)
        cols = dx[:, None] + torch.arange(w, device=x.device)
        bi = torch.arange(b, device=x.device)[:, None, None]
        return xp[bi, :, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)  # [B,H,W,C] -> [B,C,H,W]

    def __call__(self, x: torch.Tensor, train: bool = False,
                 generator: Optional[torch.Generator] = None) -> torch.Tensor:
        if x.is_floating_point():
            return x
        if x.ndim == 3:
            x = x[:, None]
        if train and self.crop_pad > 0:
            x = self._translate(x, generator)
        x = x.float().div_(255.0)
        if train and self.hflip:
            flip = torch.rand(x.shape[0], generator=generator, device=x.device) < 0.5
            x = torch.where(flip[:, None, None, None], x.flip(-1), x)
        h, w = x.shape[-2:]
        s = self.img_size
        if train and self.crop_scale is not None:   # one random-resized crop per image, resized to img_size
            from tokenprune.training.augment import random_resized_crops

            x = random_resized_crops(x, s, self.crop_scale, self.crop_aspect, generator)
        elif (h, w) != (s, s):
            if self.resize == "pad":
                if h > s or w > s:
                    raise ValueError(f"resize='pad': input {h}x{w} is larger than img_size {s}")
                top, left = (s - h) // 2, (s - w) // 2
                x = F.pad(x, (left, s - w - left, top, s - h - top))
            else:
                kw = {"align_corners": False, "antialias": s < max(h, w)} if self.resize != "nearest" else {}
                x = F.interpolate(x, size=(s, s), mode=self.resize, **kw)
        c = x.shape[1]
        if c != self.channels:
            if c == 1:
                x = x.expand(-1, self.channels, -1, -1)
            else:
                raise ValueError(f"input has {c} channels, the model takes {self.channels}")
        return (x - self.mean.to(x.device)) / self.std.to(x.device)


class _LazyImages(torch.utils.data.Dataset):
    """Decode one picture of a lazy split to uint8 ``[3, S, S]`` (runs in DataLoader workers)."""

    def __init__(self, split: Any, img_size: int, train: bool, random_resized_crop: bool, crop_ratio: float):
        self.split = split
        self.img_size = img_size
        self.train = train
        self.rrc = random_resized_crop
        self.crop_ratio = crop_ratio
        self._t = None

    def _transform(self):
        if self._t is None:
            from torchvision.transforms import v2

            s = self.img_size
            if self.train and self.rrc:
                self._t = v2.RandomResizedCrop(s, antialias=True)
            else:
                self._t = v2.Compose([v2.Resize(int(round(s / self.crop_ratio)), antialias=True), v2.CenterCrop(s)])
        return self._t

    def __len__(self) -> int:
        return len(self.split)

    def __getitem__(self, i: int):
        row = self.split[int(i)]
        img = torch.from_numpy(np.require(row["image"], requirements=["C", "W"]))
        if img.ndim == 2:
            img = img[:, :, None].expand(-1, -1, 3)
        return self._transform()(img.permute(2, 0, 1).contiguous()), int(row["label"])


class Source:
    """Batches of (uint8 or float input, int64 labels) on the device, for a list of row indices."""

    n: int

    def batches(self, index: torch.Tensor, batch: int, train: bool) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        raise NotImplementedError


class _TensorSource(Source):
    def __init__(self, x: torch.Tensor, y: torch.Tensor, device: torch.device):
        self.x = x.to(device)
        self.y = y.to(device)
        self.n = len(y)

    def batches(self, index, batch, train):
        index = index.to(self.x.device)
        for i in range(0, len(index), batch):
            j = index[i:i + batch]
            yield self.x[j], self.y[j]


class _LazySource(Source):
    def __init__(self, split: Any, pre: Preprocess, device: torch.device, workers: int, subset: Optional[int],
                 seed: int):
        self.split = split
        self.pre = pre
        self.device = device
        self.workers = workers
        self.n = len(split)
        self.rows = None
        if subset is not None and subset < self.n:
            self.rows = np.sort(np.random.default_rng(seed).choice(self.n, size=int(subset), replace=False))
            self.n = len(self.rows)

    def batches(self, index, batch, train):
        idx = index.cpu().numpy()
        if self.rows is not None:
            idx = self.rows[idx]
        ds = _LazyImages(self.split, self.pre.img_size, train, self.pre.random_resized_crop, self.pre.crop_ratio)
        loader = torch.utils.data.DataLoader(ds, batch_size=batch, sampler=idx.tolist(), num_workers=self.workers,
                                             pin_memory=self.device.type == "cuda",
                                             persistent_workers=False, drop_last=False)
        for x, y in loader:
            yield x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)


def make_source(data: Any, pre: Preprocess, device: torch.device, subset: Optional[int], seed: int,
                 workers: int) -> Source:
    if _is_lazy_split(data):
        return _LazySource(data, pre, device, workers, subset, seed)
    x, y = as_tensors(data, subset, seed)
    return _TensorSource(x, y, device)


class LoaderSource(Source):
    """Batches of a DataLoader as they come (its sampler shards and orders them; the index is not used)."""

    def __init__(self, loader: Iterable, device: torch.device):
        self.loader = loader
        self.device = device
        self.n = len(loader.dataset)

    def batches(self, index, batch, train):
        for x, y in self.loader:
            yield x.to(self.device, non_blocking=True), y
