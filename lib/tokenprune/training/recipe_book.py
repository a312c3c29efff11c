"""The papers' training recipes as data: one YAML file per recipe in ``training/recipes/``, each value with where
it comes from.

A file holds ``name``, ``paper``, ``what``, optionally ``inherits`` (another recipe of the folder whose values it
starts from) and ``values``: ``field: {value: ..., source: "..."}``. The source says where the number is written
(a script's flag, a log line, a default in the official code, or "ours" with why). Field names are checked against
:data:`FIELDS`, so a typo fails when the file is read, not when a run that needs it starts.

A recipe resolves into its runs (:func:`run_specs`: one :class:`RunSpec` per model, dataset, keep rate, fusion
temperature and seed), which :func:`tokenprune.training.paper_training.train_run` trains.

>>> r = load_recipe("evit_deit_s_finetune")
>>> r["shrink_start_epoch"], r["epochs"], r.lr
(0, 30, 8e-05)
>>> [s.keep_rate for s in run_specs(load_recipe("bat_deit_s_finetune"))]
[0.6, 0.5, 0.4, 0.3, 0.2]
"""
from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

__all__ = ["RECIPE_DIR", "FIELDS", "PaperRecipe", "recipe_names", "load_recipe", "RunSpec", "Limits", "run_specs",
           "training_limits"]

#: the folder of the recipe files
RECIPE_DIR = Path(__file__).with_name("recipes")

#: every field a recipe may set, with what it means
FIELDS: dict[str, str] = {
    "model": "timm model name (or a list: one run per model)",
    "init": "checkpoint file the run starts from (null: from scratch)",
    "dataset": "tokenprune.data.datasets name (or a list)",
    "class_list": "file of the class subset (data folder of tokenprune.data)",
    "num_classes": "classes of the head",
    "img_size": "training and evaluation resolution (px)",
    "keep_rate": "EViT-style keep rate of the pruning locations (or a list: one run per rate)",
    "fuse_token": "fuse the inattentive tokens into one (EViT)",
    "reducer": "tokenprune reducer name",
    "locations": "0-based block indices that prune",
    "fusion_temperature": "Eq. 8 temperature of 2507.19175 (a list: swept)",
    "epochs": "training epochs",
    "global_batch": "images per optimiser step over all processes",
    "base_lr": "learning rate before the linear scaling rule",
    "lr_scaling": "how the learning rate follows the global batch",
    "min_lr": "floor of the cosine schedule",
    "warmup_lr": "learning rate at the start of the warm-up",
    "warmup_epochs": "linear learning-rate warm-up (epochs)",
    "weight_decay": "AdamW weight decay",
    "optimizer": "optimiser name (timm.optim.create_optimizer_v2)",
    "opt_eps": "optimiser epsilon",
    "sched": "learning-rate schedule (timm.scheduler.create_scheduler_v2)",
    "shrink_start_epoch": "epoch at which EViT's keep-rate warm-up starts",
    "shrink_epochs": "epochs of EViT's cosine keep-rate warm-up (0: the target from the start)",
    "drop_path": "stochastic depth rate",
    "clip_grad": "gradient-norm clip (null: none)",
    "model_ema": "keep an EMA of the weights (timm.utils.ModelEmaV3)",
    "model_ema_decay": "its decay",
    "smoothing": "label smoothing",
    "mixup": "mixup alpha (timm.data.Mixup)",
    "cutmix": "cutmix alpha",
    "mixup_prob": "probability of mixing a batch",
    "mixup_switch_prob": "probability of cutmix instead of mixup",
    "auto_augment": "RandAugment policy (timm.data.create_transform)",
    "color_jitter": "colour jitter",
    "train_interpolation": "interpolation of the training crops",
    "reprob": "random-erasing probability",
    "repeated_aug": "repeated-augmentation sampler",
    "eval_crop_pct": "centre-crop share at evaluation",
    "select_best_epoch": "report the best epoch's accuracy (the official logs' 'Max accuracy')",
    "seed": "seed of the run",
    "seeds": "seeds run (a claim about seeds needs several)",
}

_BATCH_REFERENCE = 512  # DeiT's linear scaling rule: lr = base_lr * global_batch / 512


@dataclass(frozen=True)
class PaperRecipe:
    """A recipe read from its file: ``values`` (inherited ones included) and ``sources`` (field -> where from)."""

    name: str
    paper: str
    what: str
    values: dict = field(default_factory=dict)
    sources: dict = field(default_factory=dict)
    chain: tuple = ()

    def __getitem__(self, key: str) -> Any:
        if key not in self.values:
            raise KeyError(f"recipe {self.name!r} sets no {key!r}; it sets {sorted(self.values)}")
        return self.values[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.values.get(key, default)

    @property
    def lr(self) -> float:
        """The peak learning rate: ``base_lr * global_batch / 512`` (DeiT's rule, which EViT's main.py applies)."""
        return float(self["base_lr"]) * int(self["global_batch"]) / _BATCH_REFERENCE


def recipe_names() -> list[str]:
    """The recipes of :data:`RECIPE_DIR` (a name starting with ``_`` is a base others inherit from)."""
    return sorted(p.stem for p in RECIPE_DIR.glob("*.yaml"))


def _read(name: str) -> dict:
    import yaml

    path = RECIPE_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"recipe: unknown {name!r}; known: {recipe_names()}")
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    missing = [k for k in ("name", "paper", "what", "values") if k not in doc]
    if missing or doc["name"] != name:
        raise ValueError(f"{path}: needs name (= {name!r}), paper, what and values; missing {missing}")
    for key, entry in doc["values"].items():
        if key not in FIELDS:
            raise ValueError(f"{path}: unknown field {key!r}; known: {sorted(FIELDS)}")
        if not isinstance(entry, dict) or set(entry) != {"value", "source"} or not str(entry["source"]).strip():
            raise ValueError(f"{path}: field {key!r} must be {{value: ..., source: '...'}} with a source")
    return doc


def load_recipe(name: str, _seen: Optional[tuple] = None) -> PaperRecipe:
    """The recipe ``name`` with the values of the recipes it inherits from (its own win)."""
    seen = (_seen or ()) + (name,)
    doc = _read(name)
    values: dict = {}
    sources: dict = {}
    chain: tuple = ()
    parent = doc.get("inherits")
    if parent:
        if parent in seen:
            raise ValueError(f"recipe {name!r}: inherits in a cycle {seen + (parent,)}")
        base = load_recipe(parent, seen)
        values, sources, chain = dict(base.values), dict(base.sources), base.chain + (parent,)
    for key, entry in doc["values"].items():
        values[key], sources[key] = entry["value"], str(entry["source"])
    return PaperRecipe(name=name, paper=str(doc["paper"]), what=str(doc["what"]), values=values, sources=sources,
                       chain=chain)


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


def training_limits(limits: Limits) -> dict:
    """What of ``limits`` changes every epoch's training: the batch and the steps per epoch (a run resumed with
    more epochs, or evaluated on other images, is the same run)."""
    return {"batch_per_process": limits.batch_per_process, "steps_per_epoch": limits.steps_per_epoch}
