"""Training at paper scale on timm's training stack: the papers' recipes
(:mod:`tokenprune.training.recipe_book`, resolved into :class:`~tokenprune.training.recipe_book.RunSpec` runs) run with
``timm.data.create_transform`` (RandAugment, bicubic crops, random erasing:
:func:`tokenprune.training.recipe_data.build_data`), ``timm.data.Mixup`` (mixup/cutmix with label smoothing,
``SoftTargetCrossEntropy``),
``timm.optim.create_optimizer_v2`` (AdamW at the linearly scaled rate), ``timm.scheduler.create_scheduler_v2``
(cosine with warm-up, stepped per epoch as DeiT's and EViT's main.py do), ``timm.utils.ModelEmaV3`` and timm's
``RepeatAugSampler`` where the recipe asks for them; bf16 autocast on a GPU, fp32 on the CPU; ``torchrun`` DDP.

It shares with the small models' loop (:mod:`tokenprune.training.loop`) the model builder
(:func:`tokenprune.training.base_models.build_model`), the keep-rate schedule
(:func:`tokenprune.core.schedule.keep_rate_at`, per iteration, from ``shrink_start_epoch`` over ``shrink_epochs``),
the distributed setup (:mod:`tokenprune.training.distributed`) and the evaluation
(:func:`tokenprune.training.loop.evaluate_source`). What stays its own is what timm's stack does differently from
that loop: per-epoch learning-rate steps, DataLoader transforms, Mixup/CutMix, EMA, and resumable per-epoch state.

A run writes ``<out>/checkpoint.pt`` at the end of every epoch (atomically: model, EMA, optimiser, scheduler, the
epoch, the history) and ``<out>/log.jsonl``; started again with the same ``out``, it continues after the last
finished epoch, and refuses a checkpoint of another run (the spec's hash is in it).

The command line, with the GPU-hour estimate printed before a run, is :mod:`tokenprune.study.paper_runs`
(``python -m tokenprune paper-train``).
"""
from __future__ import annotations

import dataclasses
import json
import os
import time
from pathlib import Path
from typing import Callable, Optional

import torch
import torch.nn as nn

from tokenprune.core.precision import autocast
from tokenprune.core.schedule import keep_rate_at
from tokenprune.training.base_models import build_model
from tokenprune.training.checkpoints import read_summary, restart_hint, save_run_state
from tokenprune.training.distributed import DistInfo, all_reduce_sum, setup_distributed
from tokenprune.training.loop import evaluate_source
from tokenprune.training.recipe import TrainRecipe
from tokenprune.training.recipe_book import Limits, RunSpec, training_limits
from tokenprune.training.recipe_data import build_data
from tokenprune.training.sources import LoaderSource
from tokenprune.utils.io import load_torch

__all__ = ["run_model", "train_run", "load_trained", "model_with_weights"]


def run_model(spec: RunSpec, num_classes: int, init_dir: Optional[str | os.PathLike] = None,
              init_file: Optional[str | os.PathLike] = None, load_init: bool = True) -> nn.Module:
    """``spec``'s model by :func:`~tokenprune.training.base_models.build_model` (builder ``timm_model``:
    ``timm.create_model(spec.model)`` with the recipe's drop path), its weights from ``init_file`` or else
    ``init_dir / spec.init`` (a local file; a head of another size is left fresh; ``load_init`` False: none, for a
    model whose trained weights are loaded next), patched with ``spec``'s scorer and reducer at keep 1 (the
    keep-rate warm-up of :func:`train_run` moves it)."""
    from tokenprune.core.patch import patch

    path = None
    if spec.init and load_init:
        path = Path(init_file) if init_file else Path(init_dir or ".") / spec.init
        if not path.is_file():
            raise FileNotFoundError(f"init: {spec.name} starts from {str(path) if init_file else repr(spec.init)}, "
                                    f"not found{'' if init_file else f' in {init_dir!r}'} (pass --init-dir, the "
                                    f"folder holding the checkpoint files)")
    arch = {"builder": "timm_model", "model": spec.model, "num_classes": num_classes,
            "drop_path_rate": float(spec.values.get("drop_path", 0.0)), "init_name": spec.init}
    model = build_model(TrainRecipe(name=spec.name, arch=arch, img_size=int(spec.values.get("img_size", 224))),
                        init=path)
    locs = tuple(int(i) + 1 for i in spec.values.get("locations", (3, 6, 9)))   # recipe: 0-based; patch: 1-based
    return patch(model, keep_rate=1.0, locations=locs, scorer=spec.scorer, reducer=spec.reducer,
                 reducer_options=dict(spec.reducer_options))


def _keep_rate_at(spec: RunSpec, epoch: float) -> float:
    """The keep rate of ``spec`` at fractional ``epoch``: EViT's schedule from ``shrink_start_epoch`` over
    ``shrink_epochs`` (0: the target from the start epoch on)."""
    return keep_rate_at(epoch, spec.keep_rate, float(spec.values.get("shrink_start_epoch", 0)),
                        float(spec.values.get("shrink_epochs", 0)))


def _dtype(device: torch.device) -> str:
    """bf16 autocast on a GPU, fp32 on the CPU."""
    return "bf16" if device.type == "cuda" else "fp32"


def _evaluate(model: nn.Module, loader, device: torch.device, world: int) -> float:
    """Top-1 accuracy in percent over every process's share of ``loader`` (its sampler shards it)."""
    logits, labels = evaluate_source(model, LoaderSource(loader, device), 0, _dtype(device), device, None, False,
                                     DistInfo())
    correct = torch.tensor([float((logits.argmax(-1) == labels).sum().item()) if len(labels) else 0.0,
                            float(len(labels))], dtype=torch.float64, device=device)
    correct = all_reduce_sum(correct, DistInfo(world_size=world))
    return float(100.0 * correct[0] / correct[1].clamp(min=1))


PrepareFn = Callable[[nn.Module], nn.Module]


def train_run(spec: RunSpec, out_dir: str | os.PathLike, data_root: Optional[str | os.PathLike] = None,
              init_dir: Optional[str | os.PathLike] = None, limits: Limits = Limits(),
              device: Optional[str] = None, progress: bool = True, init_file: Optional[str | os.PathLike] = None,
              prepare: Optional[PrepareFn] = None) -> dict:
    """Train ``spec`` into ``out_dir`` (resuming after the last finished epoch there); returns the summary
    ``{"spec", "spec_hash", "history": [{epoch, lr, keep_rate, loss, top1, top1_ema, images, seconds}], "best",
    "resumed_from"}`` (rank 0 writes it as ``summary.json``).

    ``init_file`` names the start checkpoint directly (else ``init_dir / spec.init``). ``prepare(model)`` returns
    the model to train after :func:`run_model` (a configuration of the caller's own, which must set
    ``spec.tag``): the run then keeps the pruning ``prepare`` set, and refuses a recipe with a keep-rate warm-up.
    A checkpoint in ``out_dir`` trained under other ``limits`` is refused, so a shortened run never passes for a
    whole one."""
    from timm.data import Mixup
    from timm.loss import LabelSmoothingCrossEntropy, SoftTargetCrossEntropy
    from timm.optim import create_optimizer_v2
    from timm.scheduler import create_scheduler_v2
    from timm.utils import ModelEmaV3

    info, dev = setup_distributed(device)
    world, rank = info.world_size, info.rank
    out = Path(out_dir)
    torch.manual_seed(spec.seed + rank)
    v = spec.values
    schedule = prepare is None
    if not schedule:
        if not spec.tag:
            raise ValueError(f"prepare: run {spec.name} prepares its own model; give it a RunSpec.tag naming that "
                             "configuration (in the run's name and hash)")
        if float(v.get("shrink_start_epoch", 0)) or float(v.get("shrink_epochs", 0)):
            raise ValueError(f"prepare: recipe {spec.recipe} has a keep-rate warm-up (shrink_start_epoch / "
                             "shrink_epochs), which a prepared model does not follow; accepted: both 0")
    train_dl, eval_dl, classes, sampler = build_data(spec, data_root, world, rank, limits)
    model = run_model(spec, int(v.get("num_classes", classes)), init_dir, init_file)
    if prepare is not None:
        model = prepare(model)
    model = model.to(dev)
    if int(v.get("num_classes", classes)) != classes:
        raise ValueError(f"num_classes: the recipe says {v['num_classes']}, {spec.dataset} has {classes}")
    epochs = int(limits.epochs or v["epochs"])
    steps = len(train_dl) if limits.steps_per_epoch is None else min(len(train_dl), limits.steps_per_epoch)
    global_batch = train_dl.batch_size * world
    lr = float(v["base_lr"]) * global_batch / 512          # DeiT's linear scaling rule at the batch that runs
    opt = create_optimizer_v2(model, opt=v.get("optimizer", "adamw"), lr=lr, weight_decay=float(v["weight_decay"]),
                              eps=float(v.get("opt_eps", 1e-8)))
    sched, _ = create_scheduler_v2(opt, sched=v.get("sched", "cosine"), num_epochs=int(v["epochs"]),
                                   min_lr=float(v["min_lr"]), warmup_lr=float(v.get("warmup_lr", 1e-6)),
                                   warmup_epochs=int(v.get("warmup_epochs", 0)))
    ema = ModelEmaV3(model, decay=float(v["model_ema_decay"])) if v.get("model_ema") else None
    mix = None
    if float(v.get("mixup", 0)) > 0 or float(v.get("cutmix", 0)) > 0:
        mix = Mixup(mixup_alpha=float(v.get("mixup", 0)), cutmix_alpha=float(v.get("cutmix", 0)),
                    prob=float(v.get("mixup_prob", 1.0)), switch_prob=float(v.get("mixup_switch_prob", 0.5)),
                    label_smoothing=float(v.get("smoothing", 0.1)), num_classes=classes)
    smoothing = float(v.get("smoothing", 0.1))
    loss_fn = SoftTargetCrossEntropy() if mix is not None else LabelSmoothingCrossEntropy(smoothing)
    ddp = model
    if world > 1:
        ddp = nn.parallel.DistributedDataParallel(model, device_ids=[dev.index] if dev.type == "cuda" else None)
    history, first, resumed = [], 0, None
    ck = out / "checkpoint.pt"
    if ck.is_file():
        state = load_torch(ck, restart_hint(out), kind=f"the checkpoint of run {spec.name}", weights_only=False)
        if state["spec_hash"] != spec.spec_hash():
            raise ValueError(f"out_dir: {ck} is a checkpoint of run {state['spec_hash']}, not of {spec.spec_hash()} "
                             f"({spec.name}); use another --out")
        if state.get("limits", training_limits(Limits())) != training_limits(limits):
            raise ValueError(f"out_dir: {ck} was trained under limits {state.get('limits')}, not "
                             f"{training_limits(limits)}; use another --out (a shortened run never continues as "
                             "another)")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        if ema is not None:
            ema.load_state_dict(state["ema"])
        history, first, resumed = state["history"], state["epoch"] + 1, state["epoch"]
    clip = v.get("clip_grad")
    for epoch in range(first, epochs):
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)
        sched.step(epoch)
        ddp.train()
        t0, total, n = time.perf_counter(), 0.0, 0
        for i, (x, y) in enumerate(train_dl):
            if i >= steps:
                break
            if schedule:
                model.keep_rate = _keep_rate_at(spec, epoch + i / steps)
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            if mix is not None:
                x, y = mix(x, y)
            with autocast(_dtype(dev), dev):
                loss = loss_fn(ddp(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if clip:
                nn.utils.clip_grad_norm_(model.parameters(), float(clip))
            opt.step()
            if ema is not None:
                ema.update(model)
            total += float(loss.detach()) * len(x)
            n += len(x)
        keep = _keep_rate_at(spec, epoch + 1) if schedule else spec.keep_rate   # the rate the epoch is evaluated at
        if schedule:
            model.keep_rate = keep
        row = {"epoch": epoch, "lr": opt.param_groups[0]["lr"], "keep_rate": keep,
               "loss": total / max(n, 1), "images": n * world, "seconds": round(time.perf_counter() - t0, 2),
               "top1": _evaluate(model, eval_dl, dev, world)}
        if ema is not None:
            if schedule:
                ema.module.keep_rate = keep
            row["top1_ema"] = _evaluate(ema.module, eval_dl, dev, world)
        history.append(row)
        if rank == 0:
            state = {"spec_hash": spec.spec_hash(), "spec": dataclasses.asdict(spec), "epoch": epoch,
                     "limits": training_limits(limits), "epochs": epochs,
                     "history": history, "model": model.state_dict(), "optimizer": opt.state_dict(),
                     "scheduler": sched.state_dict(), "ema": None if ema is None else ema.state_dict()}
            save_run_state(ck, state)
            with open(out / "log.jsonl", "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")
            if progress:
                print(f"[{spec.name}] epoch {epoch + 1}/{epochs}: {row}", flush=True)
        if world > 1:
            import torch.distributed as dist

            dist.barrier()
    best = max(history, key=lambda r: max(r["top1"], r.get("top1_ema", -1.0))) if history else None
    summary = {"spec": dataclasses.asdict(spec), "spec_hash": spec.spec_hash(), "world_size": world,
               "global_batch": global_batch, "lr": lr, "steps_per_epoch": steps, "history": history, "best": best,
               "resumed_from": resumed, "limits": dataclasses.asdict(limits), "epochs": epochs, "num_classes": classes,
               "recipe_epochs": int(v["epochs"]),
               "shortened": training_limits(limits) != training_limits(Limits()) or epochs < int(v["epochs"])}
    if rank == 0:
        from tokenprune.utils.io import write_json

        write_json(out / "summary.json", summary)
    return summary


def model_with_weights(spec: RunSpec, num_classes: int, state_dict: dict,
                       prepare: Optional[PrepareFn] = None) -> nn.Module:
    """``spec``'s model (prepared by ``prepare``) holding ``state_dict``, in eval mode, pruning as the run evaluated
    it (``spec.keep_rate``, or as ``prepare`` set it). It is built on the meta device and takes the weights'
    storage, skipping timm's random initialisation of weights replaced next (1.9 s for DeiT-S here); a model with
    a tensor the state dict does not hold is built the ordinary way."""
    state_dict = {k.removeprefix("module."): v for k, v in state_dict.items()}   # saved from a DDP wrapper
    with torch.device("meta"):
        model = run_model(spec, num_classes, load_init=False)
        if prepare is not None:
            model = prepare(model)
    names = set(model.state_dict())
    if names == set(state_dict) and not any(b.is_meta for n, b in model.named_buffers() if n not in names):
        model.load_state_dict(state_dict, assign=True)
    else:
        model = run_model(spec, num_classes, load_init=False)
        if prepare is not None:
            model = prepare(model)
        model.load_state_dict(state_dict)
    if prepare is None:
        model.keep_rate = spec.keep_rate
    return model.eval()


def load_trained(spec: RunSpec, out_dir: str | os.PathLike, num_classes: Optional[int] = None,
                 prepare: Optional[PrepareFn] = None) -> tuple[nn.Module, dict]:
    """The model of the finished run in ``out_dir`` (its last epoch's weights: :func:`model_with_weights`; its
    classes as the summary records them unless ``num_classes`` is given) and its summary. Raises FileNotFoundError
    when the run has no summary, ValueError when it is another run's."""
    out = Path(out_dir)
    if not (out / "summary.json").is_file():
        raise FileNotFoundError(f"out_dir: {out} holds no finished run of {spec.name} (no summary.json)")
    summary = read_summary(out, spec)
    if summary.get("spec_hash") != spec.spec_hash():
        raise ValueError(f"out_dir: {out} holds run {summary.get('spec_hash')}, not {spec.spec_hash()} ({spec.name})")
    state = load_torch(out / "checkpoint.pt", restart_hint(out), kind=f"the checkpoint of run {spec.name}",
                       weights_only=False)
    if num_classes is None and "num_classes" not in summary:
        raise ValueError(f"num_classes: the summary in {out} does not record the classes; pass them")
    return model_with_weights(spec, num_classes or int(summary["num_classes"]), state["model"], prepare), summary
