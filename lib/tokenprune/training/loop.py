"""The one training loop: train or fine-tune a model on the CPU, on one GPU, or on several GPUs under ``torchrun``
(DDP), and evaluate it.

* :func:`train` runs a :class:`~tokenprune.training.recipe.TrainRecipe`: AdamW with a linear warm-up and a cosine
  learning-rate decay (per iteration, :mod:`tokenprune.training.optim`), label smoothing, optional
  random-translation / flip augmentation (:mod:`tokenprune.training.sources`), ``bf16`` autocast or ``fp32``, and
  EViT's keep-rate warm-up: on a model patched with :func:`tokenprune.core.patch.patch`, ``model.keep_rate`` is set
  before every iteration to :func:`tokenprune.core.schedule.keep_rate_at` (``epoch`` fractional).
* :func:`evaluate` returns logits and labels (inference mode, optional bf16 autocast); the paper recipes' stack
  (:mod:`tokenprune.training.paper_training`) evaluates through the same path.

Distributed (:mod:`tokenprune.training.distributed`): when ``WORLD_SIZE > 1`` (set by ``torchrun``) :func:`train`
initialises the process group, gives each rank ``1/world`` of every epoch's permutation and of the global batch (so
the recipe means the same thing on any number of processes), wraps the model in ``DistributedDataParallel``, and
all-reduces the evaluation counts. Only rank 0 shows progress.

Speed (``python -m tokenprune train --bench``, :mod:`tokenprune.training.bench`): training images/s of the small ViT
in eager fp32 next to bf16 autocast, eager attention instead of the fused kernel, and ``torch.compile``.
"""
from __future__ import annotations

import dataclasses
import math
import random
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from tokenprune.core.precision import autocast, set_eager_attention
from tokenprune.core.schedule import EVIT_LOCATIONS, keep_rate_at
from tokenprune.training import resume as resume_state
from tokenprune.training.augment import BatchAugment
from tokenprune.training.distributed import DistInfo, all_reduce_sum, setup_distributed
from tokenprune.training.optim import lr_at, param_groups
from tokenprune.training.recipe import TrainRecipe
from tokenprune.training.sources import Preprocess, Source, make_source

__all__ = ["TrainResult", "train", "evaluate", "evaluate_source"]


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


def _generator(device: torch.device, seed: int) -> torch.Generator:
    g = torch.Generator(device=device) if device.type != "cpu" else torch.Generator()
    g.manual_seed(int(seed))
    return g


def _num_classes(model: nn.Module) -> int:
    n = int(getattr(model, "num_classes", 0) or 0)
    if n < 1:
        raise ValueError("augment: Mixup / CutMix need a classification head (num_classes > 0)")
    return n


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
    src = data if isinstance(data, Source) else make_source(data, pre or Preprocess(1), dev, subset, seed, workers)
    return evaluate_source(model, src, batch, dtype, dev, pre, progress, DistInfo(), forward)


def evaluate_source(model, src: Source, batch: int, dtype: str, dev: torch.device, pre: Optional[Preprocess],
                    progress: bool, shard: DistInfo, forward=None) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits and labels (CPU) of ``model`` on this rank's ``shard`` of ``src``, uint8 batches prepared by ``pre``,
    under ``dtype`` autocast: the evaluation of both training stacks."""
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
    logits, labels = evaluate_source(_unwrap(model), src, batch, dtype, dev, pre, False, info)
    if len(labels):
        correct = (logits.argmax(1) == labels).sum().item()
        loss = F.cross_entropy(logits, labels, reduction="sum", label_smoothing=label_smoothing).item()
    else:
        correct, loss = 0.0, 0.0
    t = torch.tensor([correct, loss, float(len(labels))], dtype=torch.float64, device=dev)
    t = all_reduce_sum(t, info).cpu()
    n = max(1.0, t[2].item())
    return t[0].item() / n, t[1].item() / n


def train(recipe: TrainRecipe, model: nn.Module, train_split: Any, val_split: Any = None,
          device: Optional[str | torch.device] = None, progress: bool = True, compile: bool = False,
          eager_attention: Optional[bool] = None, fused_optimizer: bool = False, workers: int = 4,
          eval_batch: Optional[int] = None,
          on_step: Optional[Callable[[int, nn.Module, torch.Tensor], None]] = None,
          resume: Optional[Path] = None, deadline: Optional[float] = None,
          within_epochs: bool = False) -> TrainResult:
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
            update up to floating-point rounding, faster for small models
            (see :func:`tokenprune.training.bench.bench_training`).
        workers: DataLoader workers for lazy (on-disk) image splits.
        on_step: called after each optimiser step with ``(step, unwrapped_model, loss)`` (tests, logging).
        resume: a path for the run's state (:mod:`tokenprune.training.resume`): saved after every epoch, and
            restored first when it is there, so the run goes on after its last finished epoch.
        deadline: a ``time.monotonic()`` value (needs ``resume``): after an epoch, when the next one, as long as
            the last, would end past it, the state is saved and :class:`~tokenprune.training.resume.TrainingPaused`
            raised.
        within_epochs: with ``deadline``, also pause inside an epoch, after the step that reaches it (the state
            then holds the step within the epoch, and the run resumes at the next batch of the same epoch, to the
            weights an uninterrupted run gives): for epochs longer than a part.

    A recipe's ``augment`` may ask for random erasing and Mixup / CutMix
    (:class:`tokenprune.training.augment.BatchAugment`, then soft-target cross-entropy) besides the preprocessing's
    crops and flips.

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

    src = make_source(train_split, pre, dev, recipe.train_subset, recipe.seed, workers)
    val_src = None if val_split is None else make_source(val_split, pre, dev, recipe.val_subset, recipe.seed, workers)
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
    batch_aug = None
    if BatchAugment.wanted(recipe.augment):
        batch_aug = BatchAugment(recipe.augment, _num_classes(core), recipe.label_smoothing, dev)
        np.random.seed(recipe.seed + info.rank)   # timm's Mixup / CutMix draw from NumPy, random erasing from Python
        random.seed(recipe.seed + info.rank)
    result = TrainResult(recipe_hash=recipe.recipe_hash(), steps_per_epoch=steps_per_epoch, world_size=world,
                         rank=info.rank, device=str(dev), dtype=recipe.dtype, compiled=compiled,
                         fused_optimizer=fused_optimizer)
    show = progress and info.rank == 0
    step = 0
    train_time = 0.0
    first = 0
    if deadline is not None and (resume is None or info.distributed):
        raise ValueError("deadline: a run that may pause needs a resume path for its state and one process (the "
                         "processes of a torchrun would not pause together)")
    saved = resume_state.load_state(resume, result.recipe_hash)
    if saved is not None:
        core.load_state_dict(saved["model"])
        opt.load_state_dict(saved["optimizer"])
        resume_state.restore_rng(saved["rng"], gen)
        first, step, train_time = saved["epoch"], saved["step"], saved["train_time"]
        result.history, result.losses, result.keep_rates = saved["history"], saved["losses"], saved["keep_rates"]
    # a state saved inside an epoch: the steps of that epoch already done, their losses and time
    within = saved.get("within_epoch") if saved is not None else None
    for epoch in range(first, n_epochs):
        model.train()
        perm = torch.randperm(src.n, generator=torch.Generator().manual_seed(recipe.seed * 100_003 + epoch))
        n_steps = min(steps_per_epoch, total - step)
        perm = perm[: n_steps * recipe.batch_size]
        rows = perm.view(n_steps, recipe.batch_size)
        mine = rows[:, info.rank * local_batch:(info.rank + 1) * local_batch].reshape(-1)
        done, ep_losses, before = 0, [], 0.0
        if within is not None and epoch == first:
            done, before = within["steps"], within["time_s"]
            ep_losses = [torch.tensor(v) for v in within["losses"]]
            mine = mine[done * local_batch:]
        bar = tqdm(total=n_steps, initial=done, desc=f"{recipe.name} epoch {epoch + 1}/{n_epochs}", unit="it",
                   disable=not show, leave=True, mininterval=1.0, dynamic_ncols=True)
        t0 = time.perf_counter() - before
        kr = 1.0
        for x, y in src.batches(mine, local_batch, train=True):
            lr = lr_at(step, total, warmup, recipe.lr, recipe.min_lr)
            for g in opt.param_groups:
                g["lr"] = lr
            if pruning:
                kr = keep_rate_at(step / steps_per_epoch, recipe.keep_rate, recipe.keep_start, recipe.keep_length)
                core.keep_rate = kr
            result.keep_rates.append(kr)
            x = pre(x, train=True, generator=gen)
            target = y
            if batch_aug is not None:
                x, target = batch_aug(x, y)
            with autocast(recipe.dtype, dev):
                out = fwd(x)
                loss = (batch_aug.loss(out.float(), target) if batch_aug is not None
                        else F.cross_entropy(out.float(), y, label_smoothing=recipe.label_smoothing))
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
            done += 1
            if show:
                bar.update(1)
                if step % 10 == 0:
                    bar.set_postfix(loss=f"{ld.item():.3f}", lr=f"{lr:.2e}", keep=f"{kr:.2f}", refresh=False)
            if within_epochs and deadline is not None and done < n_steps and time.monotonic() > deadline:
                resume_state.save_state(resume, {
                    "recipe_hash": result.recipe_hash, "epoch": epoch, "step": step, "train_time": train_time,
                    "model": core.state_dict(), "optimizer": opt.state_dict(), "rng": resume_state.rng_state(gen),
                    "history": result.history, "losses": result.losses, "keep_rates": result.keep_rates,
                    "within_epoch": {"steps": done, "time_s": time.perf_counter() - t0,
                                     "losses": [float(v) for v in ep_losses]}})
                bar.close()
                raise resume_state.TrainingPaused(recipe.name, epoch, n_epochs, resume, steps=(done, n_steps))
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        dt = time.perf_counter() - t0
        train_time += dt
        losses = torch.stack(ep_losses).float().cpu() if ep_losses else torch.zeros(0)
        result.losses.extend(losses.tolist())
        tl = all_reduce_sum(torch.tensor([losses.sum().item(), float(len(losses))], dtype=torch.float64,
                                         device=dev), info)
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
        if resume is not None and epoch + 1 < n_epochs and info.rank == 0:   # every rank holds the same weights
            resume_state.save_state(resume, {
                "recipe_hash": result.recipe_hash, "epoch": epoch + 1, "step": step, "train_time": train_time,
                "model": core.state_dict(), "optimizer": opt.state_dict(), "rng": resume_state.rng_state(gen),
                "history": result.history, "losses": result.losses, "keep_rates": result.keep_rates})
            next_end = time.monotonic() + (time.perf_counter() - t0)
            if deadline is not None and not within_epochs and next_end > deadline:
                raise resume_state.TrainingPaused(recipe.name, epoch + 1, n_epochs, resume)
    result.steps = step
    result.images_seen = step * recipe.batch_size
    result.train_time_s = round(train_time, 3)
    result.wall_time_s = round(time.perf_counter() - t_wall, 3)
    for m, flag in fused_before.items():
        m.fused_attn = flag
    core.eval()
    return result
