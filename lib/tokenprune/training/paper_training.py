"""Training at paper scale on timm's training stack: the papers' recipes
(:mod:`tokenprune.training.recipe_book`) run with ``timm.data.create_transform`` (RandAugment, bicubic crops, random
erasing), ``timm.data.Mixup`` (mixup/cutmix with label smoothing, ``SoftTargetCrossEntropy``),
``timm.optim.create_optimizer_v2`` (AdamW at the linearly scaled rate), ``timm.scheduler.create_scheduler_v2``
(cosine with warm-up, stepped per epoch as DeiT's and EViT's main.py do), ``timm.utils.ModelEmaV3`` and timm's
``RepeatAugSampler`` where the recipe asks for them; bf16 autocast on a GPU, fp32 on the CPU; ``torchrun`` DDP.
The project's own code is only what is specific to pruning: the patch (:func:`tokenprune.core.patch.patch`) and
EViT's keep-rate warm-up (:func:`tokenprune.core.schedule.cosine_keep_rate`, per iteration, from
``shrink_start_epoch`` over ``shrink_epochs``).

A run writes ``<out>/checkpoint.pt`` at the end of every epoch (atomically: model, EMA, optimiser, scheduler, the
epoch, the history) and ``<out>/log.jsonl``; started again with the same ``out``, it continues after the last
finished epoch, and refuses a checkpoint of another run (the spec's hash is in it).

The command line, with the GPU-hour estimate printed before a run, is :mod:`tokenprune.study.paper_runs`
(``python -m tokenprune paper-train``).

>>> from tokenprune.training.recipe_book import load_recipe
>>> specs = run_specs(load_recipe("bat_deit_s_finetune"))
>>> [s.keep_rate for s in specs]
[0.6, 0.5, 0.4, 0.3, 0.2]
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

import torch
import torch.nn as nn

from tokenprune.training.recipe_book import PaperRecipe
from tokenprune.utils.io import load_torch, read_json

__all__ = ["RunSpec", "Limits", "run_specs", "build_model", "build_data", "train_run", "load_trained", "model_with_weights",
           "training_limits", "read_summary", "restart_hint"]

@dataclass(frozen=True)
class RunSpec:
    """One training run of a recipe: the recipe's values with every list (models, datasets, keep rates,
    temperatures, seeds) resolved to one entry; ``scorer``/``reducer``/``reducer_options`` say how it prunes."""

    recipe: str
    model: str
    init: Optional[str]
    dataset: str
    keep_rate: float
    seed: int
    scorer: str
    reducer: str
    reducer_options: tuple
    values: dict = field(default_factory=dict, compare=False)
    #: a variant the caller prepares itself (``train_run(prepare=...)``: e.g. notebook 03's configurations); in the
    #: run's name and hash
    tag: str = ""

    def spec_hash(self) -> str:
        body = json.dumps({**{f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                              if f.name != "values" and not (f.name == "tag" and not self.tag)},
                           "values": self.values}, sort_keys=True, default=str)
        return hashlib.sha256(body.encode()).hexdigest()[:12]

    @property
    def name(self) -> str:
        keep = "" if self.keep_rate >= 1 else f"_keep{self.keep_rate:g}"
        tag = f"_{self.tag}" if self.tag else ""
        return f"{self.recipe}_{self.model}_{self.dataset}{keep}{tag}_s{self.seed}"

    def __getitem__(self, key: str) -> Any:
        return self.values[key]


@dataclass(frozen=True)
class Limits:
    """What a test or a short GPU check may shrink, and nothing else: the images per process
    and step, the optimiser steps per epoch, the epochs, the evaluation images, the loader workers."""

    batch_per_process: Optional[int] = None
    steps_per_epoch: Optional[int] = None
    epochs: Optional[int] = None
    eval_images: Optional[int] = None
    workers: int = 8


def _as_list(v: Any) -> list:
    return list(v) if isinstance(v, (list, tuple)) else [v]


def run_specs(recipe: PaperRecipe, scorer: str = "cls_attention", reducer: Optional[str] = None,
              reducer_options: Optional[dict] = None) -> list[RunSpec]:
    """Every run of ``recipe``: models (paired with their ``init`` entry), datasets, keep rates, fusion
    temperatures and seeds. The reducer is the recipe's ``reducer``, else EViT's fused token (``fuse_token``) or
    dropping; a fusion temperature makes it Eq. 8's ``fuse_softmax``."""
    v = recipe.values
    models, inits = _as_list(v["model"]), _as_list(v.get("init"))
    if len(inits) == 1:
        inits = inits * len(models)
    if len(inits) != len(models):
        raise ValueError(f"recipe {recipe.name!r}: {len(models)} models but {len(inits)} init entries")
    temps = _as_list(v.get("fusion_temperature")) if v.get("fusion_temperature") is not None else [None]
    seeds = _as_list(v.get("seeds", v.get("seed", 0)))
    out = []
    for (model, init), ds, keep, temp, seed in itertools.product(
            zip(models, inits), _as_list(v["dataset"]), _as_list(v.get("keep_rate", 1.0)), temps, seeds):
        red = reducer or v.get("reducer") or ("fuse_attention" if v.get("fuse_token", True) else "drop")
        opts = dict(reducer_options or {})
        if temp is not None:
            red, opts = "fuse_softmax", {**opts, "temperature": float(temp)}
        out.append(RunSpec(recipe=recipe.name, model=str(model), init=init, dataset=str(ds), keep_rate=float(keep),
                           seed=int(seed), scorer=scorer, reducer=str(red), reducer_options=tuple(sorted(opts.items())),
                           values=dict(v)))
    return out


# ---------------------------------------------------------------------------------------------- model and data
def build_model(spec: RunSpec, num_classes: int, init_dir: Optional[str | os.PathLike] = None,
                init_file: Optional[str | os.PathLike] = None, load_init: bool = True) -> nn.Module:
    """``timm.create_model(spec.model)`` with the recipe's drop path, its weights from ``init_file`` or else
    ``init_dir / spec.init`` (a local file; a head of another size is left fresh; ``load_init`` False: none, for a
    model whose trained weights are loaded next), patched with ``spec``'s scorer and reducer at keep 1 (the
    keep-rate warm-up of :func:`train_run` moves it)."""
    import timm

    from tokenprune.core.patch import patch

    def create():
        return timm.create_model(spec.model, pretrained=False, num_classes=num_classes,
                                 drop_path_rate=float(spec.values.get("drop_path", 0.0)),
                                 img_size=int(spec.values.get("img_size", 224)))

    if not (spec.init and load_init):
        model = create()
    else:
        path = Path(init_file) if init_file else Path(init_dir or ".") / spec.init
        if not path.is_file():
            raise FileNotFoundError(f"init: {spec.name} starts from {str(path) if init_file else repr(spec.init)}, "
                                    f"not found{'' if init_file else f' in {init_dir!r}'} (pass --init-dir, the "
                                    f"folder holding the checkpoint files)")
        sd = load_torch(path, f"put an intact copy of {spec.init or path.name} there (the file the recipe names)",
                        kind=f"the init checkpoint of {spec.name}")
        sd = sd.get("model", sd.get("state_dict", sd))
        with torch.device("meta"):     # every weight but a fresh head comes from the checkpoint: skip timm's init
            model = create()
        own = model.state_dict()
        sd = {k: v for k, v in sd.items() if k in own and own[k].shape == v.shape}
        missing = [k for k in own if k not in sd]
        if [k for k in missing if not k.startswith("head")]:
            raise ValueError(f"init: {path} lacks {missing[:5]} of {spec.model}")
        if any(n not in own for n, _ in model.named_buffers()):   # a buffer no state dict holds: initialise all
            model = create()
        else:
            model = model.to_empty(device="cpu")
        model.load_state_dict(sd, strict=False)
        head = model.get_classifier()
        if missing and isinstance(head, nn.Linear):
            nn.init.trunc_normal_(head.weight, std=0.02)
            nn.init.zeros_(head.bias)
    locs = tuple(int(i) + 1 for i in spec.values.get("locations", (3, 6, 9)))   # recipe: 0-based; patch: 1-based
    return patch(model, keep_rate=1.0, locations=locs, scorer=spec.scorer, reducer=spec.reducer,
                 reducer_options=dict(spec.reducer_options))


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


# ---------------------------------------------------------------------------------------------- training
def _keep_rate(spec: RunSpec, epoch: float) -> float:
    """EViT's keep rate at fractional ``epoch``: 1 before ``shrink_start_epoch``, the cosine warm-up over
    ``shrink_epochs``, then the target (0 shrink epochs: the target from the start epoch on)."""
    from tokenprune.core.schedule import cosine_keep_rate

    start, length = float(spec.values.get("shrink_start_epoch", 0)), float(spec.values.get("shrink_epochs", 0))
    if spec.keep_rate >= 1.0:
        return 1.0
    if length <= 0:
        return 1.0 if epoch < start else spec.keep_rate
    return cosine_keep_rate(epoch, spec.keep_rate, start, length)


def _evaluate(model: nn.Module, loader, device: torch.device, world: int) -> float:
    correct = torch.zeros(2, dtype=torch.float64, device=device)
    model.eval()
    with torch.inference_mode(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=device.type == "cuda"):
        for x, y in loader:
            out = model(x.to(device, non_blocking=True))
            correct[0] += (out.argmax(-1).cpu() == y).sum().item()
            correct[1] += len(y)
    if world > 1:
        import torch.distributed as dist

        dist.all_reduce(correct)
    return float(100.0 * correct[0] / correct[1].clamp(min=1))


def _save(path: Path, obj: dict) -> None:
    from tokenprune.utils.io import atomic_write

    atomic_write(path, lambda fh: torch.save(obj, fh), binary=True)


PrepareFn = Callable[[nn.Module], nn.Module]


def restart_hint(out: Path) -> str:
    """What to do about a run folder whose checkpoint is broken: the run starts over in an empty folder."""
    return f"delete {out} (or move it away) and train the run again: it starts over"


def read_summary(out: Path, spec: RunSpec) -> dict:
    """``out/summary.json`` of ``spec``'s run; :class:`~tokenprune.utils.io.CheckpointError` naming it and the fix
    when it is empty or truncated (the run's checkpoint holds what it records: training again in ``out`` resumes
    past the last epoch and writes it anew)."""
    return read_json(out / "summary.json", f"delete it and train the run again with the same folder: it resumes "
                     f"from {out / 'checkpoint.pt'} and writes the summary anew", kind=f"the summary of run {spec.name}")


def training_limits(limits: Limits) -> dict:
    """What of ``limits`` changes every epoch's training: the batch and the steps per epoch (a run resumed with
    more epochs, or evaluated on other images, is the same run)."""
    return {"batch_per_process": limits.batch_per_process, "steps_per_epoch": limits.steps_per_epoch}


def train_run(spec: RunSpec, out_dir: str | os.PathLike, data_root: Optional[str | os.PathLike] = None,
              init_dir: Optional[str | os.PathLike] = None, limits: Limits = Limits(),
              device: Optional[str] = None, progress: bool = True, init_file: Optional[str | os.PathLike] = None,
              prepare: Optional[PrepareFn] = None) -> dict:
    """Train ``spec`` into ``out_dir`` (resuming after the last finished epoch there); returns the summary
    ``{"spec", "spec_hash", "history": [{epoch, lr, keep_rate, loss, top1, top1_ema, images, seconds}], "best",
    "resumed_from"}`` (rank 0 writes it as ``summary.json``).

    ``init_file`` names the start checkpoint directly (else ``init_dir / spec.init``). ``prepare(model)`` returns
    the model to train after :func:`build_model` (a configuration of the caller's own, which must set
    ``spec.tag``): the run then keeps the pruning ``prepare`` set, and refuses a recipe with a keep-rate warm-up.
    A checkpoint in ``out_dir`` trained under other ``limits`` is refused, so a shortened run never passes for a
    whole one."""
    from timm.data import Mixup
    from timm.loss import LabelSmoothingCrossEntropy, SoftTargetCrossEntropy
    from timm.optim import create_optimizer_v2
    from timm.scheduler import create_scheduler_v2
    from timm.utils import ModelEmaV3

    from tokenprune.training.loop import setup_distributed

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
    model = build_model(spec, int(v.get("num_classes", classes)), init_dir, init_file)
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
    loss_fn = SoftTargetCrossEntropy() if mix is not None else LabelSmoothingCrossEntropy(float(v.get("smoothing", 0.1)))
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
                model.keep_rate = _keep_rate(spec, epoch + i / steps)
            x, y = x.to(dev, non_blocking=True), y.to(dev, non_blocking=True)
            if mix is not None:
                x, y = mix(x, y)
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
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
        keep = _keep_rate(spec, epoch + 1) if schedule else spec.keep_rate   # the rate the epoch is evaluated at
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
            _save(ck, state)
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
        model = build_model(spec, num_classes, load_init=False)
        if prepare is not None:
            model = prepare(model)
    names = set(model.state_dict())
    if names == set(state_dict) and not any(b.is_meta for n, b in model.named_buffers() if n not in names):
        model.load_state_dict(state_dict, assign=True)
    else:
        model = build_model(spec, num_classes, load_init=False)
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
