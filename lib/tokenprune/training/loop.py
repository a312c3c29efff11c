"""Train or fine-tune a ViT on the CPU, on one GPU, or on several GPUs under ``torchrun`` (DDP).

One recipe, one loop:

* :class:`TrainRecipe` holds everything that determines a checkpoint (architecture, data and
  preprocessing, optimiser, schedules, augmentation, seed, dtype, the keep-rate warm-up);
  :meth:`TrainRecipe.recipe_hash` names it (12 hex of the SHA-256 of its canonical JSON).
  Runtime choices that do not change what is learnt beyond floating-point noise (device, number
  of processes, ``torch.compile``, progress bars, data paths, loader workers) are *not* part of it.
* :func:`train` runs AdamW with a linear warm-up and a cosine learning-rate decay (per iteration),
  label smoothing, optional random-translation / flip augmentation, ``bf16`` autocast or ``fp32``,
  and EViT's keep-rate warm-up: on a model patched with :func:`tokenprune.core.patch.patch`,
  ``model.keep_rate`` is set before every iteration to
  ``tokenprune.core.schedule.cosine_keep_rate(epoch, target, start, length)`` (``epoch`` fractional).
* :func:`evaluate` returns logits and labels (inference mode, optional bf16 autocast).

Data: the HF ``datasets`` splits of :mod:`tokenprune.data.datasets` / :mod:`tokenprune.data.synthetic` (columns
``image`` uint8 and ``label``). In-memory splits are converted once to uint8 tensors (on the training
device) and batched by indexing; augmentation and normalisation are batched tensor operations, so
there is no per-sample Python in the hot path and no DataLoader process. Splits whose ``image`` column
is a lazy ``datasets.Image`` (CUB, ImageNet folders: ``paper`` profile) are decoded by a DataLoader
with worker processes instead (RandomResizedCrop for training, resize + centre crop for evaluation).
A pair of tensors ``(x, y)`` works too; floating-point ``x`` (e.g. cached features) is used as is.

Distributed: when ``WORLD_SIZE > 1`` (set by ``torchrun``) :func:`train` initialises the process
group (``nccl`` on CUDA, ``gloo`` on CPU), gives each rank ``1/world`` of every epoch's permutation and
of the global batch (so the recipe means the same thing on any number of processes), wraps the model
in ``DistributedDataParallel``, and all-reduces the evaluation counts. Only rank 0 shows progress;
writing files is the caller's job, on rank 0 (:func:`is_main_process`).

Speed (``python -m tokenprune train --bench``): training images/s of the small ViT in eager fp32 next
to bf16 autocast (AMX on this CPU), eager attention instead of the fused kernel, and
``torch.compile``.
"""
from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Mapping, Optional, Sequence

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from tokenprune.core.schedule import EVIT_LOCATIONS, cosine_keep_rate
from tokenprune.core.precision import autocast, check_dtype, set_eager_attention

__all__ = [
    "CODE_VERSION",
    "TrainRecipe",
    "TrainResult",
    "Preprocess",
    "DistInfo",
    "dist_info",
    "setup_distributed",
    "is_main_process",
    "barrier",
    "as_tensors",
    "lr_at",
    "keep_rate_at",
    "param_groups",
    "train",
    "evaluate",
    "set_eager_attention",
    "bench_training",
    "main",
]

#: Bump when a change of this file changes what a recipe trains into (invalidates cached checkpoints).
CODE_VERSION = 1



# ----------------------------------------------------------------------------------------------
# the recipe
# ----------------------------------------------------------------------------------------------


@dataclass
class TrainRecipe:
    """Everything that determines a trained checkpoint; :meth:`recipe_hash` names it.

    Units: ``epochs``, ``warmup_epochs``, ``keep_start`` and ``keep_length`` are epochs of the
    training split (fractions allowed); ``batch_size`` is the *global* batch (split across DDP
    ranks); ``lr`` is the peak learning rate at that batch.

    ``arch`` is read by whoever builds the model (``tokenprune.training.base_models``): e.g.
    ``{"builder": "timm_vit", "embed_dim": 128, ...}``. ``dataset`` / ``dataset_kwargs`` name the data
    (``tokenprune.training.base_models.load_recipe_data``). ``preprocess``: ``channels`` (1, or 3 to replicate a
    grayscale channel), ``mean``/``std`` (per channel, pixels in [0, 1]), ``resize`` (``"pad"``:
    centred zero padding; ``"bilinear"``/``"bicubic"``/``"nearest"``: interpolation) to ``img_size``.
    ``augment``: ``crop_pad`` (random translation by up to that many pixels, zero fill, before
    resizing), ``hflip`` (random horizontal flip), ``random_resized_crop`` (lazy image datasets only).
    Pruning-aware training: ``keep_rate < 1`` patches the model (if it is not patched yet) with
    ``prune`` (``locations``, ``scorer``, ``reducer``) and follows EViT's cosine warm-up from 1 to
    ``keep_rate`` between epochs ``keep_start`` and ``keep_start + keep_length`` (``keep_length == 0``:
    the target from ``keep_start`` on). ``trainable``: parameter-name prefixes to train (None: all).
    ``train_subset`` / ``val_subset`` / ``test_subset``: use that many rows of the split, drawn with
    ``seed`` (None: all).
    ``store_dtype``: the dtype the checkpoint stores weights in. ``extra``: free-form, hashed.
    """

    name: str = "model"
    arch: dict = field(default_factory=dict)
    dataset: str = "fashion_mnist"
    dataset_kwargs: dict = field(default_factory=dict)
    img_size: int = 28
    preprocess: dict = field(default_factory=lambda: {"channels": 1, "mean": [0.5], "std": [0.5], "resize": "pad"})
    train_subset: Optional[int] = None
    val_subset: Optional[int] = None
    test_subset: Optional[int] = None
    epochs: float = 10.0
    batch_size: int = 128
    lr: float = 1e-3
    min_lr: float = 1e-5
    weight_decay: float = 0.05
    warmup_epochs: float = 1.0
    label_smoothing: float = 0.1
    grad_clip: Optional[float] = 1.0
    augment: dict = field(default_factory=dict)
    seed: int = 0
    dtype: str = "bf16"
    keep_rate: float = 1.0
    keep_start: float = 0.0
    keep_length: float = 1.0
    prune: dict = field(default_factory=lambda: {"locations": list(EVIT_LOCATIONS), "scorer": "cls_attention",
                                                 "reducer": "fuse_attention"})
    trainable: Optional[list] = None
    store_dtype: str = "fp32"
    extra: dict = field(default_factory=dict)
    code_version: int = CODE_VERSION

    def __post_init__(self) -> None:
        check_dtype(self.dtype, "dtype")
        check_dtype(self.store_dtype, "store_dtype")
        if not self.epochs > 0:
            raise ValueError(f"epochs: must be > 0, got {self.epochs!r}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size: must be >= 1, got {self.batch_size!r}")
        if not 0.0 < float(self.keep_rate) <= 1.0:
            raise ValueError(f"keep_rate: must lie in (0, 1], got {self.keep_rate!r}")
        if self.keep_length < 0 or self.keep_start < 0 or self.warmup_epochs < 0:
            raise ValueError("keep_start, keep_length, warmup_epochs: must be >= 0")

    def to_dict(self) -> dict:
        """Plain JSON types (tuples become lists)."""
        return json.loads(self.canonical_json())

    def canonical_json(self) -> str:
        """Sorted keys, no whitespace, strict JSON: the text :meth:`recipe_hash` hashes."""
        from tokenprune.utils.io import to_jsonable

        return json.dumps(to_jsonable(dataclasses.asdict(self)), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=True, allow_nan=False)

    def recipe_hash(self) -> str:
        """First 12 hex digits of the SHA-256 of :meth:`canonical_json`."""
        return hashlib.sha256(self.canonical_json().encode("utf-8")).hexdigest()[:12]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TrainRecipe":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"TrainRecipe: unknown fields {unknown}")
        return cls(**dict(data))

    def replace(self, **changes: Any) -> "TrainRecipe":
        return dataclasses.replace(self, **changes)


@dataclass
class TrainResult:
    """What :func:`train` did. ``history``: one dict per epoch (train loss, val loss/accuracy, lr,
    keep rate, seconds, images/s); ``keep_rates`` / ``losses``: one value per iteration (this rank's
    loss); times in seconds (``train_time_s`` excludes evaluation)."""

    recipe_hash: str
    history: list = field(default_factory=list)
    keep_rates: list = field(default_factory=list)
    losses: list = field(default_factory=list)
    steps: int = 0
    steps_per_epoch: int = 0
    images_seen: int = 0
    train_time_s: float = 0.0
    wall_time_s: float = 0.0
    world_size: int = 1
    rank: int = 0
    device: str = "cpu"
    dtype: str = "fp32"
    compiled: bool = False
    fused_optimizer: bool = False

    @property
    def final_val_accuracy(self) -> Optional[float]:
        for h in reversed(self.history):
            if h.get("val_acc") is not None:
                return h["val_acc"]
        return None

    def summary(self) -> dict:
        """Everything but the per-iteration lists."""
        d = dataclasses.asdict(self)
        d.pop("keep_rates")
        d.pop("losses")
        d["final_val_accuracy"] = self.final_val_accuracy
        return d


# ----------------------------------------------------------------------------------------------
# distributed
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def distributed(self) -> bool:
        return self.world_size > 1


def dist_info() -> DistInfo:
    """Rank, world size and local rank from the initialised process group, else from torchrun's env."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return DistInfo(dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0)))
    return DistInfo(int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)),
                    int(os.environ.get("LOCAL_RANK", 0)))


def _default_device(info: DistInfo) -> torch.device:
    if torch.cuda.is_available():
        return torch.device("cuda", info.local_rank % torch.cuda.device_count())
    return torch.device("cpu")


def setup_distributed(device: Optional[str | torch.device] = None) -> tuple[DistInfo, torch.device]:
    """Initialise the process group when ``WORLD_SIZE > 1`` and none exists; pick the device.

    Backend: ``nccl`` for CUDA devices, ``gloo`` otherwise. Default device: ``cuda:LOCAL_RANK`` when a
    GPU is visible, else the CPU.
    """
    import torch.distributed as dist

    info = dist_info()
    dev = torch.device(device) if device is not None else _default_device(info)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", info.local_rank % max(1, torch.cuda.device_count()))
    if info.world_size > 1 and not dist.is_initialized():
        if dev.type == "cuda":
            torch.cuda.set_device(dev)
        dist.init_process_group(backend="nccl" if dev.type == "cuda" else "gloo")
        info = dist_info()
    return info, dev


def is_main_process() -> bool:
    """True on rank 0 (and in a plain, non-distributed run)."""
    return dist_info().rank == 0


def barrier() -> None:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def _all_reduce_sum(t: torch.Tensor, info: DistInfo) -> torch.Tensor:
    if info.distributed:
        import torch.distributed as dist

        dist.all_reduce(t, op=dist.ReduceOp.SUM)
    return t


# ----------------------------------------------------------------------------------------------
# data
# ----------------------------------------------------------------------------------------------


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
    size, before resizing. Floating-point input (cached features) passes through unchanged.
    """

    def __init__(self, img_size: int, channels: int = 1, mean: Sequence[float] = (0.5,),
                 std: Sequence[float] = (0.5,), resize: str = "pad", crop_pad: int = 0, hflip: bool = False,
                 random_resized_crop: bool = False, crop_ratio: float = 0.875) -> None:
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

    @classmethod
    def from_recipe(cls, recipe: TrainRecipe) -> "Preprocess":
        p, a = dict(recipe.preprocess), dict(recipe.augment)
        return cls(recipe.img_size, channels=p.get("channels", 1), mean=p.get("mean", (0.5,)),
                   std=p.get("std", (0.5,)), resize=p.get("resize", "pad"), crop_pad=a.get("crop_pad", 0),
                   hflip=a.get("hflip", False), random_resized_crop=a.get("random_resized_crop", False),
                   crop_ratio=p.get("crop_ratio", 0.875))

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

    def __call__(self, x: torch.Tensor, train: bool = False, generator: Optional[torch.Generator] = None) -> torch.Tensor:
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
        if (h, w) != (s, s):
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


class _Source:
    """Batches of (uint8 or float input, int64 labels) on the device, for a list of row indices."""

    n: int

    def batches(self, index: torch.Tensor, batch: int, train: bool) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        raise NotImplementedError


class _TensorSource(_Source):
    def __init__(self, x: torch.Tensor, y: torch.Tensor, device: torch.device):
        self.x = x.to(device)
        self.y = y.to(device)
        self.n = len(y)

    def batches(self, index, batch, train):
        index = index.to(self.x.device)
        for i in range(0, len(index), batch):
            j = index[i:i + batch]
            yield self.x[j], self.y[j]


class _LazySource(_Source):
    def __init__(self, split: Any, pre: Preprocess, device: torch.device, workers: int, subset: Optional[int], seed: int):
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


def _make_source(data: Any, pre: Preprocess, device: torch.device, subset: Optional[int], seed: int,
                 workers: int) -> _Source:
    if _is_lazy_split(data):
        return _LazySource(data, pre, device, workers, subset, seed)
    x, y = as_tensors(data, subset, seed)
    return _TensorSource(x, y, device)


# ----------------------------------------------------------------------------------------------
# schedules, optimiser
# ----------------------------------------------------------------------------------------------


def lr_at(step: int, total: int, warmup: int, lr: float, min_lr: float = 0.0) -> float:
    """Learning rate at iteration ``step`` (0-based): linear warm-up over ``warmup`` iterations to
    ``lr`` (the first iteration already gets ``lr / warmup``), then a cosine decay to ``min_lr`` at
    iteration ``total``."""
    if warmup > 0 and step < warmup:
        return lr * (step + 1) / warmup
    t = min(1.0, (step - warmup) / max(1, total - warmup))
    return min_lr + (lr - min_lr) * 0.5 * (1.0 + math.cos(math.pi * t))


def keep_rate_at(epoch: float, recipe: TrainRecipe) -> float:
    """The keep rate the recipe asks for at (fractional) ``epoch``: EViT's cosine warm-up
    (:func:`tokenprune.core.schedule.cosine_keep_rate`), or a step to the target when ``keep_length == 0``."""
    if recipe.keep_rate >= 1.0:
        return 1.0
    if recipe.keep_length <= 0:
        return float(recipe.keep_rate) if epoch >= recipe.keep_start else 1.0
    return cosine_keep_rate(epoch, recipe.keep_rate, recipe.keep_start, recipe.keep_length)


def _no_decay_names(model: nn.Module) -> set:
    names = set()
    fn = getattr(model, "no_weight_decay", None)
    if callable(fn):
        names = set(fn())
    return names


def param_groups(model: nn.Module, weight_decay: float, trainable: Optional[Sequence[str]] = None) -> list[dict]:
    """AdamW groups: weight decay on matrices, none on biases, norms, position embedding and tokens.

    ``trainable``: parameter-name prefixes to train; every other parameter gets ``requires_grad=False``.
    """
    skip = _no_decay_names(model)
    decay, no_decay = [], []
    for name, p in model.named_parameters():
        if trainable is not None:
            p.requires_grad_(any(name == t or name.startswith(t.rstrip(".") + ".") for t in trainable))
        if not p.requires_grad:
            continue
        (no_decay if p.ndim <= 1 or name in skip else decay).append(p)
    if not decay and not no_decay:
        raise ValueError(f"trainable={trainable!r} selects no parameter")
    return [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]


def _generator(device: torch.device, seed: int) -> torch.Generator:
    g = torch.Generator(device=device) if device.type != "cpu" else torch.Generator()
    g.manual_seed(int(seed))
    return g


def _unwrap(model: nn.Module) -> nn.Module:
    return model.module if hasattr(model, "module") and isinstance(getattr(model, "module"), nn.Module) else model


def _ensure_patched(model: nn.Module, recipe: TrainRecipe) -> nn.Module:
    if recipe.keep_rate >= 1.0 or getattr(model, "_tokenprune", None) is not None:
        return model
    from tokenprune.core.patch import patch

    p = dict(recipe.prune)
    return patch(model, keep_rate=1.0, locations=tuple(p.get("locations", EVIT_LOCATIONS)),
                 scorer=p.get("scorer", "cls_attention"), reducer=p.get("reducer", "fuse_attention"),
                 reducer_options=p.get("reducer_options"))


# ----------------------------------------------------------------------------------------------
# evaluation
# ----------------------------------------------------------------------------------------------


def _resolve_preprocess(model: nn.Module, preprocess: Optional[Preprocess]) -> Optional[Preprocess]:
    return preprocess if preprocess is not None else getattr(_unwrap(model), "tp_preprocess", None)


@torch.inference_mode()
def evaluate(model: nn.Module, data: Any, batch: int = 256, dtype: str = "bf16",
             device: Optional[str | torch.device] = None, preprocess: Optional[Preprocess] = None,
             subset: Optional[int] = None, seed: int = 0, progress: bool = False, workers: int = 4,
             forward: Optional[Callable[[torch.Tensor], torch.Tensor]] = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits (float32, CPU, ``[N, K]``) and labels (int64, CPU) of ``model`` on ``data``.

    ``data``: an HF split, an ``(x, y)`` pair, or an in-memory source. uint8 images are prepared by
    ``preprocess``, else by the ``tp_preprocess`` the model carries (set by :func:`train` and
    ``tokenprune.training.base_models.load_base_model``); floating-point inputs are used as they are. ``dtype``:
    ``bf16`` autocast or ``fp32``. The model is put in eval mode (and left there). ``forward``
    replaces ``model(x)`` (e.g. to read features).
    """
    dev = torch.device(device) if device is not None else next(_unwrap(model).parameters()).device
    pre = _resolve_preprocess(model, preprocess)
    src = data if isinstance(data, _Source) else _make_source(data, pre or Preprocess(1), dev, subset, seed, workers)
    return _evaluate_source(model, src, batch, dtype, dev, pre, progress, DistInfo(), forward)


def _evaluate_source(model, src: _Source, batch: int, dtype: str, dev: torch.device, pre: Optional[Preprocess],
                     progress: bool, shard: DistInfo, forward=None) -> tuple[torch.Tensor, torch.Tensor]:
    from tqdm import tqdm  # not tqdm.auto: in a kernel without ipywidgets it warns with a path

    model.eval()
    fwd = forward or model
    index = torch.arange(src.n)[shard.rank::shard.world_size]
    logits, labels = [], []
    bar = tqdm(total=len(index), desc="eval", unit="img", disable=not progress, leave=False, mininterval=1.0)
    with torch.inference_mode():
        for x, y in src.batches(index, batch, train=False):
            if not x.is_floating_point():
                if pre is None:
                    raise ValueError("evaluate: uint8 images need a Preprocess (pass preprocess=..., or use a model "
                                     "from train()/load_base_model that carries tp_preprocess)")
                x = pre(x, train=False)
            with autocast(dtype, dev):
                out = fwd(x)
            logits.append(out.float().cpu())
            labels.append(y.cpu())
            bar.update(len(y))
    bar.close()
    if not logits:
        return torch.zeros(0, 0), torch.zeros(0, dtype=torch.long)
    return torch.cat(logits), torch.cat(labels)


def _eval_counts(model, src, batch, dtype, dev, pre, info: DistInfo, label_smoothing: float) -> tuple[float, float]:
    """Accuracy and loss over the whole source, each rank evaluating its shard; all-reduced."""
    logits, labels = _evaluate_source(_unwrap(model), src, batch, dtype, dev, pre, False, info)
    if len(labels):
        correct = (logits.argmax(1) == labels).sum().item()
        loss = F.cross_entropy(logits, labels, reduction="sum", label_smoothing=label_smoothing).item()
    else:
        correct, loss = 0.0, 0.0
    t = torch.tensor([correct, loss, float(len(labels))], dtype=torch.float64, device=dev)
    t = _all_reduce_sum(t, info).cpu()
    n = max(1.0, t[2].item())
    return t[0].item() / n, t[1].item() / n


# ----------------------------------------------------------------------------------------------
# training
# ----------------------------------------------------------------------------------------------


def train(recipe: TrainRecipe, model: nn.Module, train_split: Any, val_split: Any = None,
          device: Optional[str | torch.device] = None, progress: bool = True, compile: bool = False,
          eager_attention: Optional[bool] = None, fused_optimizer: bool = False, workers: int = 4,
          eval_batch: Optional[int] = None,
          on_step: Optional[Callable[[int, nn.Module, torch.Tensor], None]] = None) -> TrainResult:
    """Train ``model`` in place by ``recipe`` on ``train_split``; evaluate on ``val_split`` after each epoch.

    Args:
        recipe: the :class:`TrainRecipe`.
        model: a module taking the prepared batch (for ViTs a timm ``VisionTransformer``; with
            ``recipe.keep_rate < 1`` it is patched by :func:`tokenprune.core.patch.patch` unless it already is).
        train_split, val_split: HF splits with ``image`` (uint8) and ``label`` columns, or ``(x, y)`` pairs.
        device: default ``cuda:LOCAL_RANK`` when a GPU is visible, else the CPU.
        progress: a tqdm bar per epoch (rank 0 only).
        compile: ``torch.compile`` the forward (ignored, with a note, while the keep rate changes:
            every new keep rate would recompile).
        eager_attention: compute attention explicitly instead of the fused kernel (default: on the CPU
            with bf16, where it is faster; see :func:`set_eager_attention`).
        fused_optimizer: AdamW's fused kernel (``fused=True``) instead of the per-tensor loop: the same
            update up to floating-point rounding, faster for small models (see :func:`bench_training`).
        workers: DataLoader workers for lazy (on-disk) image splits.
        on_step: called after each optimiser step with ``(step, unwrapped_model, loss)`` (tests, logging).

    Under ``torchrun`` (``WORLD_SIZE > 1``) this initialises the process group, shards every epoch
    and the global batch by rank, and wraps the model in ``DistributedDataParallel``; all ranks
    return the same weights. The global RNG is seeded with ``recipe.seed + rank``.
    """
    from tqdm import tqdm  # not tqdm.auto: in a kernel without ipywidgets it warns with a path

    t_wall = time.perf_counter()
    info, dev = setup_distributed(device)
    torch.manual_seed(recipe.seed + info.rank)
    pre = Preprocess.from_recipe(recipe)
    model = _ensure_patched(model, recipe)
    model.to(dev)
    model.tp_preprocess = pre
    if eager_attention is None:
        eager_attention = dev.type == "cpu" and recipe.dtype == "bf16"
    fused_before = {m: m.fused_attn for m in model.modules() if hasattr(m, "fused_attn")}
    if eager_attention:
        set_eager_attention(model, True)

    src = _make_source(train_split, pre, dev, recipe.train_subset, recipe.seed, workers)
    val_src = None if val_split is None else _make_source(val_split, pre, dev, recipe.val_subset, recipe.seed, workers)
    world = info.world_size
    if recipe.batch_size % world:
        raise ValueError(f"batch_size {recipe.batch_size} is not divisible by the {world} processes")
    local_batch = recipe.batch_size // world
    steps_per_epoch = src.n // recipe.batch_size
    if steps_per_epoch < 1:
        raise ValueError(f"the training split has {src.n} rows, fewer than one batch of {recipe.batch_size}")
    total = max(1, int(round(recipe.epochs * steps_per_epoch)))
    warmup = int(round(recipe.warmup_epochs * steps_per_epoch))
    n_epochs = math.ceil(total / steps_per_epoch)

    groups = param_groups(model, recipe.weight_decay, recipe.trainable)
    params = [p for g in groups for p in g["params"]]
    opt = torch.optim.AdamW(groups, lr=recipe.lr, betas=(0.9, 0.999), fused=fused_optimizer or None)
    core = model
    if info.distributed:
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model, device_ids=[dev.index] if dev.type == "cuda" else None)
    fwd = model
    pruning = recipe.keep_rate < 1.0
    compiled = False
    if compile and pruning:
        if info.rank == 0 and progress:
            print("train: torch.compile skipped (the keep rate changes during training)", file=sys.stderr)
    elif compile:
        fwd = torch.compile(model)
        compiled = True

    gen = _generator(dev, recipe.seed * 1009 + info.rank)
    result = TrainResult(recipe_hash=recipe.recipe_hash(), steps_per_epoch=steps_per_epoch, world_size=world,
                         rank=info.rank, device=str(dev), dtype=recipe.dtype, compiled=compiled,
                         fused_optimizer=fused_optimizer)
    show = progress and info.rank == 0
    step = 0
    train_time = 0.0
    for epoch in range(n_epochs):
        model.train()
        perm = torch.randperm(src.n, generator=torch.Generator().manual_seed(recipe.seed * 100_003 + epoch))
        n_steps = min(steps_per_epoch, total - step)
        perm = perm[: n_steps * recipe.batch_size]
        mine = perm.view(n_steps, recipe.batch_size)[:, info.rank * local_batch:(info.rank + 1) * local_batch].reshape(-1)
        bar = tqdm(total=n_steps, desc=f"{recipe.name} epoch {epoch + 1}/{n_epochs}", unit="it", disable=not show,
                   leave=True, mininterval=1.0, dynamic_ncols=True)
        ep_losses = []
        t0 = time.perf_counter()
        kr = 1.0
        for x, y in src.batches(mine, local_batch, train=True):
            lr = lr_at(step, total, warmup, recipe.lr, recipe.min_lr)
            for g in opt.param_groups:
                g["lr"] = lr
            if pruning:
                kr = keep_rate_at(step / steps_per_epoch, recipe)
                core.keep_rate = kr
            result.keep_rates.append(kr)
            x = pre(x, train=True, generator=gen)
            with autocast(recipe.dtype, dev):
                out = fwd(x)
                loss = F.cross_entropy(out.float(), y, label_smoothing=recipe.label_smoothing)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if recipe.grad_clip:
                torch.nn.utils.clip_grad_norm_(params, recipe.grad_clip)
            opt.step()
            ld = loss.detach()
            ep_losses.append(ld)
            if on_step is not None:
                on_step(step, core, ld)
            step += 1
            if show:
                bar.update(1)
                if step % 10 == 0:
                    bar.set_postfix(loss=f"{ld.item():.3f}", lr=f"{lr:.2e}", keep=f"{kr:.2f}", refresh=False)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        dt = time.perf_counter() - t0
        train_time += dt
        losses = torch.stack(ep_losses).float().cpu() if ep_losses else torch.zeros(0)
        result.losses.extend(losses.tolist())
        tl = _all_reduce_sum(torch.tensor([losses.sum().item(), float(len(losses))], dtype=torch.float64, device=dev), info)
        rec = {"epoch": epoch + 1, "steps": n_steps, "train_loss": (tl[0] / tl[1].clamp(min=1)).item(),
               "lr": lr, "keep_rate": kr, "time_s": round(dt, 3),
               "img_per_s": round(n_steps * recipe.batch_size / max(dt, 1e-9), 1)}
        if val_src is not None:
            acc, vloss = _eval_counts(core, val_src, eval_batch or 2 * local_batch, recipe.dtype, dev, pre, info,
                                      recipe.label_smoothing)
            rec.update(val_acc=acc, val_loss=vloss)
        result.history.append(rec)
        if show:
            bar.set_postfix({k: (f"{v:.4f}" if isinstance(v, float) else v) for k, v in rec.items()
                             if k in ("train_loss", "val_acc")}, refresh=True)
        bar.close()
    result.steps = step
    result.images_seen = step * recipe.batch_size
    result.train_time_s = round(train_time, 3)
    result.wall_time_s = round(time.perf_counter() - t_wall, 3)
    for m, flag in fused_before.items():
        m.fused_attn = flag
    core.eval()
    return result


# ----------------------------------------------------------------------------------------------
# speed comparison
# ----------------------------------------------------------------------------------------------


def small_vit_kwargs(embed_dim: int = 128, num_heads: int = 4) -> dict:
    """timm ``VisionTransformer`` kwargs of the small 12-block ViT of the default profile (28x28, patch 4)."""
    return dict(img_size=28, patch_size=4, in_chans=1, num_classes=10, embed_dim=embed_dim, depth=12,
                num_heads=num_heads, mlp_ratio=4.0, class_token=True, global_pool="token")


#: the parts a setting of :func:`bench_training` joins with ``+``
BENCH_SETTING_PARTS = ("fp32", "bf16", "eager_attn", "compile", "fused_adamw")


def check_bench_setting(setting: str) -> set[str]:
    """The parts of a :func:`bench_training` setting; InputError naming an unknown one."""
    from tokenprune.utils.io import InputError

    parts = set(setting.split("+"))
    unknown = parts - set(BENCH_SETTING_PARTS)
    if unknown:
        raise InputError(f"settings: {setting!r} has unknown parts {sorted(unknown)}; accepted parts: "
                         f"{', '.join(BENCH_SETTING_PARTS)} (joined by '+')")
    return parts


def bench_training(settings: Sequence[str] = ("fp32", "fp32+eager_attn", "bf16", "bf16+eager_attn",
                                               "bf16+eager_attn+compile", "bf16+eager_attn+compile+fused_adamw"),
                   embed_dim: int = 128, num_heads: int = 4, batch: int = 64, rounds: int = 5,
                   steps_per_round: int = 2, warmup: int = 2, threads: Optional[int] = None,
                   progress: bool = True) -> list[dict]:
    """Training images/s of the small ViT under several settings, measured side by side.

    Each setting is a ``+``-joined subset of ``fp32``/``bf16``, ``eager_attn`` (explicit attention
    instead of the fused kernel), ``compile`` (``torch.compile``) and ``fused_adamw`` (AdamW's fused
    kernel: ``train(fused_optimizer=True)``). Full training steps (forward,
    backward, AdamW) on a fixed random batch; after ``warmup`` steps (which include compilation),
    ``rounds`` rounds run every setting in turn (interleaved: load drift hits all alike); the figure is
    the median over rounds. The ratio is against the first setting.
    """
    from timm.models.vision_transformer import VisionTransformer

    if threads:
        torch.set_num_threads(threads)
    x = torch.randn(batch, 1, 28, 28)
    y = torch.randint(0, 10, (batch,))
    runners: dict[str, Callable[[], None]] = {}
    compile_s: dict[str, float] = {}
    for s in settings:
        parts = check_bench_setting(s)
        dtype = "bf16" if "bf16" in parts else "fp32"
        torch.manual_seed(0)
        m = VisionTransformer(**small_vit_kwargs(embed_dim, num_heads))
        set_eager_attention(m, "eager_attn" in parts)
        opt = torch.optim.AdamW(param_groups(m, 0.05), lr=1e-4, fused=("fused_adamw" in parts) or None)
        fwd = torch.compile(m) if "compile" in parts else m

        def step(fwd=fwd, opt=opt, m=m, dtype=dtype) -> None:
            with autocast(dtype, torch.device("cpu")):
                loss = F.cross_entropy(fwd(x).float(), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()

        t0 = time.perf_counter()
        for _ in range(warmup):
            step()
        compile_s[s] = time.perf_counter() - t0
        if progress:
            print(f"[bench] {s}: warm-up {compile_s[s]:.1f} s", file=sys.stderr, flush=True)
        runners[s] = step
    per = {s: [] for s in settings}
    for r in range(rounds):
        for s, run in runners.items():
            t0 = time.perf_counter()
            for _ in range(steps_per_round):
                run()
            per[s].append(steps_per_round * batch / (time.perf_counter() - t0))
        if progress:
            print(f"[bench] round {r + 1}/{rounds}: " + ", ".join(f"{s} {v[-1]:.0f}" for s, v in per.items()),
                  file=sys.stderr, flush=True)
    base = statistics.median(per[settings[0]])
    rows = []
    for s in settings:
        med = statistics.median(per[s])
        rows.append({"setting": s, "img_per_s": round(med, 1), "ratio": round(med / base, 2),
                     "rounds": [round(v, 1) for v in per[s]], "warmup_s": round(compile_s[s], 1)})
    return rows


def _format_table(rows: list[dict], meta: dict) -> str:
    head = (f"small ViT (12 blocks, width {meta['embed_dim']}, 50 tokens) training images/s, batch {meta['batch']}, "
            f"{meta['torch_threads']} threads, {meta['cpu']}; load average before/after: "
            f"{meta['load_before']} / {meta['load_after']}")
    lines = [head, "",
             f"| setting | img/s | ratio vs {rows[0]['setting']} | warm-up s |", "|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['setting']} | {r['img_per_s']:.1f} | {r['ratio']:.2f}x | {r['warmup_s']:.1f} |")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------
# DDP self-check (used by tests/test_train.py through torchrun)
# ----------------------------------------------------------------------------------------------


def tiny_problem(n: int = 512, size: int = 8, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """A tiny learnable problem: uint8 ``[n, 1, size, size]`` textures with noise; label 0: dark,
    1: bright, 2: horizontal stripes, 3: vertical stripes (every patch carries the class)."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(0, 4, (n,), generator=g)
    r = torch.arange(size)
    stripes_h = ((r[:, None] % 2) * 200).expand(size, size)
    stripes_v = ((r[None, :] % 2) * 200).expand(size, size)
    base = torch.stack([torch.full((size, size), 40), torch.full((size, size), 180), stripes_h, stripes_v]).float()
    noise = torch.randn(n, 1, size, size, generator=g) * 25
    x = (base[y][:, None] + noise).clamp(0, 255).to(torch.uint8)
    return x, y


def tiny_vit(size: int = 8, num_classes: int = 4, depth: int = 4) -> nn.Module:
    from timm.models.vision_transformer import VisionTransformer

    return VisionTransformer(img_size=size, patch_size=2, in_chans=1, num_classes=num_classes, embed_dim=16,
                             depth=depth, num_heads=2, mlp_ratio=2.0)


def _ddp_check(out_dir: str) -> int:
    """Train a tiny ViT under torchrun; every rank saves its weights and history to ``out_dir``."""
    import torch.distributed as dist

    recipe = TrainRecipe(name="ddp-check", dataset="tiny", img_size=8, epochs=3, batch_size=32, lr=3e-3,
                         warmup_epochs=0.5, dtype="fp32", label_smoothing=0.0,
                         preprocess={"channels": 1, "mean": [0.5], "std": [0.5], "resize": "pad"},
                         augment={"hflip": False})
    torch.manual_seed(1234 + dist_info().rank)  # different init per rank: DDP must broadcast rank 0's
    model = tiny_vit()
    x, y = tiny_problem(256)
    res = train(recipe, model, (x, y), (x[:64], y[:64]), device="cpu", progress=False)
    info = dist_info()
    os.makedirs(out_dir, exist_ok=True)
    torch.save({"state_dict": model.state_dict(), "losses": res.losses, "history": res.history,
                "world_size": res.world_size, "rank": info.rank}, os.path.join(out_dir, f"rank{info.rank}.pt"))
    barrier()
    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


# ----------------------------------------------------------------------------------------------
# command line
# ----------------------------------------------------------------------------------------------


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tokenprune train", description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", action="store_true", help="training throughput of the small ViT, settings side by side")
    ap.add_argument("--settings", nargs="+", default=None, help="bench settings (default: the five of bench_training)")
    ap.add_argument("--embed-dim", type=int, default=128)
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--json", default=None, help="also write the bench rows to this JSON file")
    ap.add_argument("--ddp-check", metavar="OUT_DIR", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.ddp_check:
        return _ddp_check(args.ddp_check)
    if not args.bench:
        ap.print_help()
        return 0
    for option in ("embed_dim", "heads", "batch", "rounds", "threads"):   # refused before any model is built
        value = getattr(args, option)
        if value is not None and value < 1:
            ap.error(f"--{option.replace('_', '-')}: expected an int >= 1, got {value}")
    for setting in args.settings or ():
        check_bench_setting(setting)
    kw = {} if args.settings is None else {"settings": tuple(args.settings)}
    load_before = round(os.getloadavg()[0], 2)
    rows = bench_training(embed_dim=args.embed_dim, num_heads=args.heads, batch=args.batch, rounds=args.rounds,
                          threads=args.threads, **kw)
    from tokenprune.utils.environment import hardware

    meta = dict(hardware(), batch=args.batch, embed_dim=args.embed_dim, depth=12, tokens=50,
                load_before=load_before, load_after=round(os.getloadavg()[0], 2))
    print(_format_table(rows, meta))
    if args.json:
        from tokenprune.utils.io import write_json

        write_json(args.json, {"rows": rows, "meta": meta})
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
