"""Audit of "Part-Coverage and Faithfulness Decouple in ViT Token Pruning for Fine-Grained Visual Categorization"
(notebook ``04_decoupling``): a sensitivity-trained token scorer against EViT's [CLS] attention.

Every step of the notebook is one function here, with explicit arguments (the settings ``cfg`` of
:func:`tokenprune.study.params.setup`, the :class:`Design` derived from it, and the results of earlier steps):

1. :func:`load_settings` -- the (dataset, model) settings; :func:`cache_settings` -- one pass per image set
   (:func:`tokenprune.core.split_forward.cache_tokens`), the linear probe of ``parts/large``; :func:`settings_table`.
2. :func:`train_heads` -- the sensitivity signal and, per seed, the sensitivity head and its capacity-matched
   controls; :func:`split_path_checks` -- the split path against the patched model.
3. :func:`score_all`, :func:`head_fit_table`, :func:`fd_check_table` -- the scores on the evaluation images, how
   well each head learns its target, and the finite-difference check of the signal.
4. :func:`evaluate_configs` -- coverage and faithfulness per (setting, block, keep rate, scorer, seed), held by
   :class:`Measurements` (per-image values, paired comparisons); :func:`summary_table`, :func:`gaps_table`,
   :func:`faithfulness_table`, :func:`rank_correlation_table`, :func:`scorer_macs_table`, and the figures.
5. :func:`claim_rules` (declared before the data, with the module constants GAIN_THRESHOLD_PP, DECOUPLED_MARGIN,
   FAST_TOLERANCE_PCT, CENTRE_FAMILY_ALPHA) and :func:`file_claims` -- the verdicts. Issue 14: each comparison
   claim's paired design (:func:`paired_design`) and the effect in dispute (:func:`effects_in_dispute`) gate it on
   detectability (:func:`gated`); every claim on SynthBirds' part model is gated on :func:`part_model_premise`
   (notebook 00's bar for the fine-grained proxy).

At the ``paper`` profile (issue 15) the six models of CUB, Cars and Aircraft x DeiT-S / DeiT-B are the user's
checkpoints (``checkpoint_dir``) or the runs of the recipe :data:`PAPER_RECIPE` (:func:`paper_model`, through
:func:`tokenprune.study.paper_runs.trained_model`); every claim on them has a paper-scale id (:func:`claim_id`) and
is gated on the runs' whole schedule (:func:`training_premise`). The finite-difference check perturbs ``fd_tokens``
tokens per image there (:func:`fd_check_table`).

The paper's numbers come from :data:`tokenprune.study.paper_numbers.DECOUPLE`.
"""
from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import timm
import torch
import torch.nn.functional as F

from tokenprune.core import split_forward as split
from tokenprune.core.patch import patch, prune_state
from tokenprune.data import datasets as data
from tokenprune.data import pretrained, synthetic
from tokenprune.measure import macs, metrics
from tokenprune.measure.evaluation import DROPPED, KEPT
from tokenprune.core.config import PruneConfig
from tokenprune.measure import power
from tokenprune.measure.metrics import bootstrap_ci_or_nan
from tokenprune.measure.rank_statistics import rank_correlations
from tokenprune.methods import learned, sensitivity
from tokenprune.study import figures, paper_numbers, paper_runs, verdicts
from tokenprune.study import calibration
from tokenprune.study.notebook import Stopwatch, ci_columns
from tokenprune.study.verdicts import Above, AllOf, Below, Beyond, Criteria, Flag, Inside, Premise, fmt_interval
from tokenprune.training import base_models
from tokenprune.training.loop import Preprocess

__all__ = ["PROFILES", "PARAMETERS", "Design", "design", "Setting", "load_settings", "cache_settings",
           "settings_table", "train_heads", "split_path_checks", "score_all", "head_fit_table", "fd_check_table",
           "evaluate_configs", "Measurements", "summary_table", "gaps_table", "gap_heatmap", "faithfulness_table",
           "rank_correlation_table", "coverage_vs_agreement", "kept_figure", "scorer_macs_table", "claim_rules",
           "file_claims", "definitions", "stratified_spearman_boot", "centre_family", "decoupling_stats",
           "class_part_coverage", "human_features_values", "fast_values", "just_as_fast_claim", "effects_in_dispute",
           "paired_design", "least_precise", "gated", "part_model_top1", "part_model_premise", "FINE_GRAINED_BAR",
           "PART_MODEL_PREMISE", "COMPARISON_CLAIMS", "PAPER_RECIPE", "paper_run_spec", "given_checkpoint",
           "check_paper_inputs", "paper_model", "fd_tokens_drawn", "claim_id", "training_premise"]

# ----------------------------------------------------------------------------------------------
# parameters
# ----------------------------------------------------------------------------------------------

SMALL_SETTINGS = ["parts/small", "fmnist/small"]
ALL_SETTINGS = ["parts/small", "parts/large", "fmnist/small", "fmnist/large"]
PAPER_SETTINGS = [f"{d}/{m}" for d in ("cub", "cars", "aircraft") for m in ("small", "large")]

#: every parameter of the notebook, with its meaning
PARAMETERS = {
    "seed": "seed of the global torch/numpy generators, the bootstraps, the signal probes and the random scorer",
    "n_train": "training images whose cached block-l tokens train the heads",
    "n_eval": "evaluation images (the same images for every scorer: paired statistics)",
    "n_train_large": "training images of the larger model (ViT-S/14)",
    "n_eval_large": "evaluation images of the larger model",
    "blocks": "scoring blocks (1-based) of the small model; the middle one is 'intermediate' (at least 3, increasing)",
    "large_blocks": "scoring blocks of the larger model",
    "keep_rates": "keep rates; the smallest is the 'low keep rate' (at least 2)",
    "seeds": "seeds of every trained head (sensitivity head and each control)",
    "steps": "training steps of every head (the same for all: capacity matching)",
    "head_batch": "images per training step",
    "head_lr": "learning rate of every head",
    "signal": "grad | fd: estimator of the sensitivity signal that trains the head",
    "signal_target": "pred_logit | true_logit | cls_state: the scalar whose sensitivity is measured",
    "probes": "Hutchinson probes (cls_state)",
    "rank_loss": "listnet | pairwise | mse: ranking loss of the heads",
    "task_tau": "temperature of the soft top-k gate (gradient) of the task-loss control",
    "settings": "which (dataset/model) settings run",
    "task_settings": "settings in which the task-loss control is trained (at the intermediate block)",
    "part_source": "keypoints | masks: what a part is on the patch grid",
    "coverage_variant": "parts | patches: share of parts touched, or of part patches kept",
    "margin": "equivalence margin and smallest gain counted, in points (agreement and coverage)",
    "ceiling": "agreement at or above which 'equal faithfulness' is uninformative",
    "parts_large_img_size": "input size of ViT-S/14 on SynthBirds (56: 4x4 patches; 112: 8x8)",
    "n_boot": "bootstrap resamples",
    "fd_images": "images on which the finite-difference and gradient signals are compared",
    "fd_probes": "random directions of the finite-difference estimate",
    "fd_tokens": "tokens per image the finite-difference check perturbs (0: every token), drawn once with seed, the "
                 "same tokens compared for both signals; each costs fd_probes forwards of the rest of the model per "
                 "image. paper: 49 of DeiT's 196 (a quarter): 196 instead of 784 forwards of DeiT-B from block 6 per "
                 "image, and a per-image Spearman over 49 tokens has a standard error of about 1/sqrt(48) = 0.14, "
                 "0.03 over the 32 images. The check only (signal fd trains on every token)",
    "dtype": "bf16 | fp32 (autocast for inference and training; smoke, default: fp32, paper: bf16)",
    "torch_threads": "CPU threads for torch (0: torch's default)",
    "data_root": "paper: folder holding CUB_200_2011/, stanford_cars/, fgvc-aircraft-2013b/",
    "checkpoint_dir": "paper: folder holding the user's <dataset>_<small|large>.pth (DeiT-S / DeiT-B fine-tuned); a "
                      "model whose file is not there is trained by the recipe decoupling_fgvc_finetune ('': all six)",
    "init_dir": "paper: folder holding the recipe's start checkpoints deit_small_patch16_224-cd65a155.pth and "
                "deit_base_patch16_224-b5f2ef4d.pth (facebookresearch/deit's ImageNet DeiT-S / DeiT-B), for the models "
                "checkpoint_dir does not give",
    **paper_runs.TRAINING_PARAMETERS,
}

_common = dict(seed=0, keep_rates=[0.25, 0.5, 0.7], seeds=[0, 1, 2], head_lr=1e-3, signal="grad",
               signal_target="pred_logit", probes=4, rank_loss="listnet", task_tau=0.5, part_source="keypoints",
               coverage_variant="parts", margin=1.0, ceiling=0.98, dtype="fp32", data_root="", checkpoint_dir="",
               torch_threads=1, fd_tokens=0, init_dir="", **paper_runs.TRAINING_SETTINGS)
PROFILES = {
    "smoke": dict(_common, n_train=32, n_eval=32, n_train_large=16, n_eval_large=16, blocks=[2, 6, 10],
                  large_blocks=[6], steps=4, head_batch=8, settings=["parts/small", "parts/large", "fmnist/small"],
                  task_settings=["parts/small"], parts_large_img_size=28, n_boot=200, fd_images=1, fd_probes=1),
    "default": dict(_common, n_train=384, n_eval=512, n_train_large=256, n_eval_large=256, blocks=[2, 6, 10],
                    large_blocks=[6], steps=100, head_batch=16, settings=ALL_SETTINGS,
                    task_settings=["parts/small", "fmnist/small"], parts_large_img_size=56, n_boot=1000, fd_images=2,
                    fd_probes=2),
    "paper": dict(_common, n_train=2048, n_eval=2048, n_train_large=2048, n_eval_large=2048, blocks=[2, 4, 6, 8, 10],
                  large_blocks=[2, 4, 6, 8, 10], steps=1000, head_batch=32, settings=PAPER_SETTINGS,
                  task_settings=[f"{d}/small" for d in ("cub", "cars", "aircraft")], parts_large_img_size=224,
                  n_boot=2000, fd_images=32, fd_probes=4, torch_threads=0, fd_tokens=49, dtype="bf16"),
    # inclusive bounds of every numeric setting (None: open), checked by params.setup before any run
    "ranges": {"head_lr": (0.0, None), "probes": (1, None), "task_tau": (1e-06, None), "margin": (0.0, None), "ceiling": (0.0, 1.0), "torch_threads": (0, None), "n_train": (1, None), "n_eval": (1, None), "n_train_large": (1, None), "n_eval_large": (1, None), "steps": (1, None), "head_batch": (1, None), "parts_large_img_size": (1, None), "n_boot": (1, None), "fd_images": (1, None), "fd_probes": (1, None), "fd_tokens": (0, None), **paper_runs.TRAINING_RANGES, "keep_rates": (0.001, 1.0), "seeds": (0, None), "blocks": (1, None), "large_blocks": (1, None), "seed": (0, None)},
    "choices": {"signal": ["grad", "fd"], "signal_target": list(sensitivity.TARGETS), "rank_loss": list(learned.LOSSES),
                "part_source": ["keypoints", "masks"], "coverage_variant": ["parts", "patches"], "dtype": ["bf16", "fp32"],
                "settings": ALL_SETTINGS + PAPER_SETTINGS, "task_settings": ALL_SETTINGS + PAPER_SETTINGS},
}
assert set(PARAMETERS) == set(PROFILES["default"]), "every parameter has a meaning"

TRAINED = ("sensitivity", "mimic", "task")
SCORER_ORDER = ["cls_attention", "sensitivity", "mimic", "task", "oracle", "random", "centre"]
PAPER = paper_numbers.DECOUPLE
SRC = "press summary of the paper (shared/papers/decoupling-press-summary.txt); paper text not found; unverified"
PAPER_DATASET = {"parts": "SynthBirds (procedural parts, exact keypoints)", "fmnist": "cluttered Fashion-MNIST (object masks)",
                 "cub": "CUB-200-2011 (part keypoints)", "cars": "Stanford Cars (boxes)", "aircraft": "FGVC-Aircraft (boxes)"}


@dataclass(frozen=True)
class Design:
    """The blocks and keep rates the claims are about, derived from ``cfg``."""

    early: int
    mid: int
    late: int
    low_keep: float
    high_keep: float
    margin_frac: float  # the equivalence margin as a fraction (agreement and coverage are fractions per image)


def design(cfg: SimpleNamespace) -> Design:
    """Check ``blocks``/``keep_rates``, seed the global generators with ``cfg.seed``, set torch's threads, and
    return the :class:`Design`."""
    if len(cfg.blocks) < 3 or sorted(set(cfg.blocks)) != list(cfg.blocks):
        raise ValueError(f"blocks: expected at least 3 increasing block numbers (early, intermediate, late), got {cfg.blocks}")
    if len(cfg.keep_rates) < 2:
        raise ValueError(f"keep_rates: expected at least 2 keep rates, got {cfg.keep_rates}")
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    if cfg.torch_threads > 0:
        # On the shared 2-core CPU of smoke/default, one thread: with two, OpenMP threads wait on each other whenever
        # another process holds a core, and these small models then ran up to 10x slower (measured side by side:
        # head training 57 ms/step on one thread vs 561 ms/step on two under load; two threads win only ~1.6x when
        # the machine is idle)
        torch.set_num_threads(cfg.torch_threads)
    b = cfg.blocks
    return Design(b[0], b[len(b) // 2], b[-1], min(cfg.keep_rates), max(cfg.keep_rates), cfg.margin / 100)


def _mid(blocks: list) -> int:
    return blocks[len(blocks) // 2]


# ----------------------------------------------------------------------------------------------
# 1. settings: data, models, annotations on each model's patch grid
# ----------------------------------------------------------------------------------------------


@dataclass
class Setting:
    """A dataset with a model: training and evaluation images, and the evaluation images' part and object
    patch sets on the model's own patch grid."""

    name: str
    dataset: str
    model_label: str
    model: torch.nn.Module
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_eval: torch.Tensor
    y_eval: torch.Tensor
    raw_eval: np.ndarray                 # uint8 images for figures
    parts: Optional[torch.Tensor]        # [B, K, N] bool patch sets of the parts (None: no parts)
    obj: torch.Tensor                    # [B, N] bool object patches
    grid: tuple
    blocks: list
    keypoints: Optional[np.ndarray] = None   # [B, K, 3] in raw-image pixels, for figures
    obj_mask: Optional[np.ndarray] = None    # [B, H, W] for figures
    info: dict = field(default_factory=dict)
    n_test_split: int = 0                    # images of the full test split the evaluation images come from
    run: Optional[paper_runs.TrainedRun] = None  # paper datasets: where the model comes from (its weights: ``model``)

    @property
    def patch_tokens(self) -> int:
        return self.grid[0] * self.grid[1]


def base_model(name: str, smoke: bool):
    """The project's base model ``name`` (its ``_smoke`` version, trained if missing, at the smoke profile)."""
    model, info = base_models.load_base_model(f"{name}_smoke" if smoke else name, train_if_missing=smoke,
                                              progress=False)
    return model.eval(), info


def annotate_parts(kp: np.ndarray, part_mask: np.ndarray, size: int, grid: tuple, part_source: str):
    """Part patch sets (from keypoints or from the part masks) and object patches on ``grid``."""
    ps = size // grid[0]
    if part_source == "keypoints":
        sets = metrics.keypoints_to_patch_index(kp[..., :2], kp[..., 2] > 0, img_size=size, patch_size=ps)
    else:
        sets = metrics.mask_to_patch_grid(part_mask, patch_size=ps, num_parts=synthetic.N_PARTS)
    obj = metrics.mask_to_patch_grid(part_mask > 0, patch_size=ps)
    return sets, obj


def fit_linear_head(model, feats: torch.Tensor, labels: torch.Tensor, num_classes: int, seed: int,
                    iters: int = 300) -> float:
    """Logistic regression on frozen features (full batch AdamW, weight decay 1e-4), written into model.head;
    returns the last training loss."""
    head = torch.nn.Linear(feats.shape[1], num_classes)
    torch.manual_seed(seed)
    torch.nn.init.zeros_(head.weight), torch.nn.init.zeros_(head.bias)
    opt = torch.optim.AdamW(head.parameters(), lr=1e-2, weight_decay=1e-4)
    mu, sd = feats.mean(0), feats.std(0).clamp_min(1e-6)
    z = (feats - mu) / sd
    for _ in range(iters):
        loss = F.cross_entropy(head(z), labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
    lin = torch.nn.Linear(feats.shape[1], num_classes)
    with torch.no_grad():  # fold the standardisation into the layer
        lin.weight.copy_(head.weight / sd)
        lin.bias.copy_(head.bias - (head.weight * (mu / sd)).sum(1))
    model.head = lin
    return float(loss.detach())


def _recipe(cfg: SimpleNamespace, name: str):
    smoke = cfg.profile == "smoke"
    recipes = base_models.smoke_recipes() if smoke else base_models.default_recipes()
    return recipes[name + ("_smoke" if smoke else "")]


def _sizes(cfg: SimpleNamespace, size_name: str) -> tuple[int, int]:
    return (cfg.n_train, cfg.n_eval) if size_name == "small" else (cfg.n_train_large, cfg.n_eval_large)


def parts_setting(size_name: str, cfg: SimpleNamespace) -> Setting:
    """SynthBirds with the small ViT it was trained on, or ViT-S/14 (frozen) with a linear probe fitted later."""
    nt, ne = _sizes(cfg, size_name)
    # the images the base model was trained and tested on: its recipe's generator settings
    recipe = _recipe(cfg, "small_vit_parts")
    gen = {k: v for k, v in recipe.dataset_kwargs.items() if k not in ("n_train", "n_val", "n_test")}
    size = int(gen.get("img_size", recipe.img_size))
    if size_name == "small":
        model, info = base_model("small_vit_parts", cfg.profile == "smoke")
        pre = model.tp_preprocess
        label = f"small ViT ({info['name']}, {sum(p.numel() for p in model.parameters()) / 1e6:.1f} M params)"
    else:
        model = pretrained.load_vit_s14(img_size=cfg.parts_large_img_size, num_classes=len(synthetic.CLASS_NAMES))
        pre = Preprocess(cfg.parts_large_img_size, channels=3, mean=pretrained.VIT_S14_MEAN, std=pretrained.VIT_S14_STD,
                         resize="bilinear")
        info = {"name": f"vit_s14@{cfg.parts_large_img_size}+linear probe (fitted here)"}
        label = (f"ViT-S/14 at {cfg.parts_large_img_size} px + linear probe "
                 f"({sum(p.numel() for p in model.parameters()) / 1e6:.1f} M params)")
    ds = synthetic.part_dataset(nt, 0, ne, **gen)
    grid = tuple(int(g) for g in model.patch_embed.grid_size)
    tr, te = ds["train"], ds["test"]
    to_x = lambda imgs: pre(torch.from_numpy(np.ascontiguousarray(imgs)).permute(0, 3, 1, 2))  # noqa: E731
    kp, pm = np.asarray(te["keypoints"]), np.asarray(te["part_mask"])
    sets, obj = annotate_parts(kp, pm, size, grid, cfg.part_source)
    raw = np.asarray(te["image"])
    return Setting(f"parts/{size_name}", "parts", label, model, to_x(np.asarray(tr["image"])),
                   torch.as_tensor(np.asarray(tr["label"])).long(), to_x(raw), torch.as_tensor(np.asarray(te["label"])).long(),
                   raw, sets, obj, grid, cfg.blocks if size_name == "small" else cfg.large_blocks, kp, pm > 0, info,
                   n_test_split=max(ne, int(recipe.dataset_kwargs.get("n_test", ne))))


FMNIST_CLUTTER = dict(canvas=28, n_clutter=6, piece_size=(5, 9), gap=1)


def fmnist_setting(size_name: str, cfg: SimpleNamespace) -> Setting:
    """Cluttered Fashion-MNIST (made at the models' 28 px) with the small ViT or ViT-S/14 + linear head."""
    nt, ne = _sizes(cfg, size_name)
    model, info = base_model("small_vit_fmnist" if size_name == "small" else "vit_s14_fmnist_linear",
                             cfg.profile == "smoke")
    pre = model.tp_preprocess
    recipe = _recipe(cfg, "small_vit_fmnist")
    ds = data.load_fashion_mnist(**recipe.dataset_kwargs)  # the base models' split
    out = {}
    for split_name, n, s in (("train", nt, 1), ("test", ne, 2)):
        part = ds[split_name].select(range(n))
        out[split_name] = synthetic.clutter_items(data.to_numpy(part, "image"), data.to_numpy(part, "label"), seed=s,
                                                  **FMNIST_CLUTTER)
    grid = tuple(int(g) for g in model.patch_embed.grid_size)
    ps = FMNIST_CLUTTER["canvas"] // grid[0]
    if FMNIST_CLUTTER["canvas"] % grid[0]:
        raise ValueError(f"fmnist: a {grid} grid does not tile the {FMNIST_CLUTTER['canvas']} px canvas")
    obj_mask = out["test"]["object_mask"].astype(bool)
    obj = metrics.mask_to_patch_grid(obj_mask, patch_size=ps)
    to_x = lambda imgs: pre(torch.from_numpy(imgs)[:, None])  # noqa: E731
    n_params = sum(p.numel() for p in model.parameters()) / 1e6
    label = (f"small ViT ({info['name']}, {n_params:.1f} M params)" if size_name == "small"
             else f"ViT-S/14 + linear head ({info['name']}, {n_params:.1f} M params)")
    return Setting(f"fmnist/{size_name}", "fmnist", label, model, to_x(out["train"]["image"]),
                   torch.as_tensor(out["train"]["label"]).long(), to_x(out["test"]["image"]),
                   torch.as_tensor(out["test"]["label"]).long(), out["test"]["image"], None, obj, grid,
                   cfg.blocks if size_name == "small" else cfg.large_blocks, None, obj_mask, info,
                   n_test_split=max(ne, len(ds["test"])))


PAPER_DIRS = {"cub": "CUB_200_2011", "cars": "stanford_cars", "aircraft": "fgvc-aircraft-2013b"}
PAPER_ARCH = {"small": "deit_small_patch16_224", "large": "deit_base_patch16_224"}


PAPER_RECIPE = "decoupling_fgvc_finetune"


def paper_run_spec(name: str):
    """The run of the recipe :data:`PAPER_RECIPE` that gives the model of the paper setting ``name``
    (``<cub|cars|aircraft>/<small|large>``: DeiT-S / DeiT-B, :data:`PAPER_ARCH`)."""
    ds_name, size_name = name.split("/")
    return paper_runs.recipe_run(PAPER_RECIPE, model=PAPER_ARCH[size_name], dataset=ds_name)


def given_checkpoint(name: str, cfg: SimpleNamespace) -> Optional[Path]:
    """The user's checkpoint of the paper setting ``name``, ``checkpoint_dir/<dataset>_<size>.pth``, when
    ``checkpoint_dir`` is set and the file exists; else None (the recipe's run gives the model)."""
    if not cfg.checkpoint_dir:
        return None
    path = Path(cfg.checkpoint_dir).expanduser() / f"{name.replace('/', '_')}.pth"
    return path if path.is_file() else None


def check_paper_inputs(cfg: SimpleNamespace) -> None:
    """Before any paper setting loads (so a missing file stops the run at once, not after a model has trained):
    ``data_root`` is set, and every model neither ``checkpoint_dir`` gives nor a run of ``runs_dir`` has finished
    (its ``summary.json``) has its recipe's start checkpoint in ``init_dir``. FileNotFoundError naming the parameter
    and the files expected."""
    names = [n for n in cfg.settings if n.split("/")[0] in PAPER_DIRS]
    if not names:
        return
    if not cfg.data_root:
        raise FileNotFoundError("data_root: profile 'paper' needs the folder holding CUB_200_2011/, stanford_cars/ "
                                "and fgvc-aircraft-2013b/ (each in its release format); pass -p data_root ...")
    runs = paper_runs.runs_root(cfg)
    to_train = [n for n in names if given_checkpoint(n, cfg) is None
                and not (runs / paper_run_spec(n).name / "summary.json").is_file()]
    need = sorted({paper_run_spec(n).init for n in to_train})
    if not need:
        return
    missing = [f for f in need if not cfg.init_dir or not (Path(cfg.init_dir).expanduser() / f).is_file()]
    if missing:
        where = f"not found in {cfg.init_dir}" if cfg.init_dir else "init_dir is not set"
        raise FileNotFoundError(
            f"init_dir: {', '.join(to_train)} have no checkpoint in checkpoint_dir "
            f"({cfg.checkpoint_dir or 'not set'}: expected <dataset>_<small|large>.pth) and no finished run in {runs}, "
            "so they are trained by the "
            f"recipe {PAPER_RECIPE}, which starts from {', '.join(need)} (facebookresearch/deit's ImageNet weights, "
            f"{{'model': state_dict}}); {', '.join(missing)}: {where}. Pass -p init_dir <folder holding them>, or "
            "give the fine-tuned checkpoints in checkpoint_dir")


def paper_model(name: str, cfg: SimpleNamespace, data_root: Path):
    """``(timm model in eval mode, TrainedRun)`` of the paper setting ``name``: the user's checkpoint
    (:func:`given_checkpoint`), else the recipe's run through :func:`tokenprune.study.paper_runs.trained_model`
    (a finished run of ``runs_dir`` is loaded, a missing one trained under the notebook's limits). The weights
    are copied into a plain timm model (the run's model is patched at keep 1, which equals timm), so the rest of
    the notebook sees the same model as with a given checkpoint; the TrainedRun keeps no model."""
    spec = paper_run_spec(name)
    given = given_checkpoint(name, cfg)
    init = None if given else str(Path(cfg.init_dir).expanduser() / spec.init)
    tr = paper_runs.trained_model(spec, cfg, str(data_root), init, given=str(given) if given else None)
    num_classes = int(tr.model.get_classifier().out_features)
    model = timm.create_model(spec.model, pretrained=False, num_classes=num_classes)
    model.load_state_dict(tr.model.state_dict(), strict=True)
    return model.eval(), dataclasses.replace(tr, model=None)


def paper_setting(name: str, cfg: SimpleNamespace) -> Setting:
    """CUB (part keypoints + box), Cars and Aircraft (box) at 224 px (resized, no crop, so annotations scale),
    with DeiT-S ("small") / DeiT-B ("large": our stand-in for the source's "much larger, more powerful version")
    fine-tuned on the dataset: the user's checkpoint from checkpoint_dir, else the recipe's run
    (:func:`paper_model`)."""
    ds_name, size_name = name.split("/")
    check_paper_inputs(SimpleNamespace(**{**vars(cfg), "settings": [name]}))
    root = Path(cfg.data_root).expanduser() / PAPER_DIRS[ds_name]
    dsd = data.load_dataset(ds_name, root=root)
    model, run = paper_model(name, cfg, root)
    tag = Path(run.path).name if run.source == "given" else f"{run.spec.name}, {run.source}"
    size, grid = 224, tuple(model.patch_embed.grid_size)
    ps = size // grid[0]
    nt, ne = _sizes(cfg, size_name)
    mean = torch.tensor(timm.data.IMAGENET_DEFAULT_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(timm.data.IMAGENET_DEFAULT_STD).view(1, 3, 1, 1)

    def load(split_name, n):
        split = dsd[split_name]  # a class-balanced subset: CUB lists its test images class by class
        rows = split.select(data.class_balanced_indices(np.asarray(split["label"]), n, seed=cfg.seed))
        imgs, kps, boxes, labels = [], [], [], []
        for r in rows:
            im = np.asarray(r["image"])
            h, w = im.shape[:2]
            t = torch.from_numpy(im).permute(2, 0, 1)[None].float() / 255
            imgs.append(F.interpolate(t, size=(size, size), mode="bilinear", antialias=True, align_corners=False))
            sx, sy = size / w, size / h
            boxes.append(np.asarray(r["bbox"], dtype=np.float64) * [sx, sy, sx, sy])
            if "parts" in r:
                p = np.asarray(r["parts"], dtype=np.float64).copy()
                p[:, 0] *= sx
                p[:, 1] *= sy
                kps.append(p)
            labels.append(int(r["label"]))
        x = torch.cat(imgs)
        raw = (x.permute(0, 2, 3, 1).numpy() * 255).round().astype(np.uint8)
        box_mask = np.zeros((len(boxes), size, size), dtype=bool)
        for i, (x0, y0, x1, y1) in enumerate(boxes):
            box_mask[i, int(y0):int(math.ceil(y1)), int(x0):int(math.ceil(x1))] = True
        return (x - mean) / std, torch.tensor(labels), raw, (np.stack(kps) if kps else None), box_mask

    x_tr, y_tr, _, _, _ = load("train", nt)
    x_ev, y_ev, raw, kp, box_mask = load("test", ne)
    sets = None
    if kp is not None:
        sets = metrics.keypoints_to_patch_index(kp[..., :2], kp[..., 2] > 0, img_size=size, patch_size=ps)
    obj = metrics.mask_to_patch_grid(box_mask, patch_size=ps)
    return Setting(name, ds_name, f"{PAPER_ARCH[size_name]} ({tag})", model, x_tr, y_tr, x_ev, y_ev, raw, sets,
                   obj, grid, cfg.blocks if size_name == "small" else cfg.large_blocks, kp, box_mask,
                   {"name": tag, "run": run.describe()}, n_test_split=max(len(x_ev), len(dsd["test"])), run=run)


def make_setting(name: str, cfg: SimpleNamespace) -> Setting:
    """The setting ``name`` (``dataset/small`` or ``dataset/large``)."""
    ds_name, size_name = name.split("/")
    if ds_name == "parts":
        return parts_setting(size_name, cfg)
    if ds_name == "fmnist":
        return fmnist_setting(size_name, cfg)
    return paper_setting(name, cfg)


def load_settings(cfg: SimpleNamespace) -> dict[str, Setting]:
    """Every setting of ``cfg.settings``, in order (one line printed per setting); the paper settings' inputs are
    checked first (:func:`check_paper_inputs`)."""
    check_paper_inputs(cfg)
    settings = {}
    for name in cfg.settings:
        settings[name] = S = make_setting(name, cfg)
        print(f"{name}: {S.model_label}; grid {S.grid}; {len(S.x_train)} train / {len(S.x_eval)} eval images; "
              f"blocks {S.blocks}")
    return settings


def cache_settings(settings: dict[str, Setting], cfg: SimpleNamespace):
    """One unpruned pass per image set: ``(cache_train, cache_eval)``, each ``{setting: SplitCache}``. The linear
    probe of ``parts/large`` is fitted on the cached training features, and its logits follow from it."""
    cache_tr, cache_ev = {}, {}
    for name, S in settings.items():
        cache_tr[name] = split.cache_tokens(S.model, S.x_train, S.blocks, dtype=cfg.dtype)
        cache_ev[name] = split.cache_tokens(S.model, S.x_eval, S.blocks, dtype=cfg.dtype)
        if name == "parts/large":
            S.info["probe_loss"] = fit_linear_head(S.model, cache_tr[name].features, S.y_train,
                                                   len(synthetic.CLASS_NAMES), cfg.seed)
            with torch.no_grad():
                for c in (cache_tr[name], cache_ev[name]):
                    c.logits = S.model.head(c.features)
    return cache_tr, cache_ev


def settings_table(settings: dict[str, Setting], cache_ev: dict, cfg: SimpleNamespace) -> pd.DataFrame:
    """Per setting: model, grid, image counts, and the unpruned top-1 with its bootstrap interval."""
    rows = []
    for name, S in settings.items():
        ci = metrics.bootstrap_ci(metrics.correct(cache_ev[name].logits, S.y_eval).astype(float), n_boot=cfg.n_boot,
                                  seed=cfg.seed)
        rows.append({"setting": name, "model": S.model_label, "grid": f"{S.grid[0]}x{S.grid[1]}",
                     "patch_tokens": S.patch_tokens, "blocks": ",".join(map(str, S.blocks)), "n_train": len(S.x_train),
                     "n_eval": len(S.x_eval), "top1_unpruned": ci.estimate, "top1_low": ci.low, "top1_high": ci.high})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------
# 2. the sensitivity signal, the heads trained on it, and the split-path check
# ----------------------------------------------------------------------------------------------


def train_signal(S: Setting, cache: split.SplitCache, block: int, labels: torch.Tensor,
                 cfg: SimpleNamespace) -> torch.Tensor:
    """The sensitivity signal of the cached block-``block`` tokens (``cfg.signal``: gradient or finite difference)."""
    toks = cache.tokens[block]
    if cfg.signal == "grad":
        return sensitivity.gradient_sensitivity(S.model, toks, block, target=cfg.signal_target, labels=labels,
                                                probes=cfg.probes, seed=cfg.seed, dtype=cfg.dtype)
    return sensitivity.finite_difference_sensitivity(S.model, toks, block, target=cfg.signal_target, labels=labels,
                                                     probes=cfg.fd_probes, seed=cfg.seed)


def train_heads(settings: dict[str, Setting], cache_tr: dict, cache_ev: dict, cfg: SimpleNamespace, sw: Stopwatch):
    """For every setting and scoring block: the signal of the training images, then per seed the sensitivity head,
    the mimic control and (in ``task_settings``, intermediate block) the task-loss control, all capacity-matched;
    at the intermediate block the oracle signal of the evaluation images.

    Returns ``(heads, head_log, signal_ev)``: ``{(setting, block, kind, seed): head}``, a DataFrame of the
    training runs, ``{(setting, block): oracle signal}``. Asserts that every kind of head of a setting has the
    same parameter count.
    """
    heads_out: dict = {}
    log: list = []
    signal_ev: dict = {}
    for name, S in settings.items():
        ctr, cev = cache_tr[name], cache_ev[name]
        p = ctr.num_prefix_tokens
        dim = ctr.tokens[S.blocks[0]].shape[-1]
        mid = _mid(S.blocks)
        for block in S.blocks:
            with sw.section("sensitivity signal (train)"):
                sig = train_signal(S, ctr, block, S.y_train, cfg)
            attn = ctr.cls_attn[block][:, :, p:].mean(1)
            # the sensitivity heads and the mimic controls of every seed train together (stacked, same result as one
            # by one: learned.train_rankers); head g of seed s starts from make_head(dim, s) and sees seed s's batches
            jobs = [("sensitivity", s, sig) for s in cfg.seeds] + [("mimic", s, attn) for s in cfg.seeds]
            heads = [learned.make_head(dim, s) for _, s, _ in jobs]
            t0 = time.perf_counter()
            with sw.section("train heads (sensitivity, mimic)"):
                hist = learned.train_rankers(heads, ctr.tokens[block], [j[2] for j in jobs], [j[1] for j in jobs],
                                             num_prefix_tokens=p, steps=cfg.steps, batch=cfg.head_batch, lr=cfg.head_lr,
                                             loss=cfg.rank_loss, dtype=cfg.dtype)
            per_head_s = (time.perf_counter() - t0) / len(jobs)
            results = [(kind, s, head, losses, per_head_s) for (kind, s, _), head, losses in zip(jobs, heads, hist)]
            if name in cfg.task_settings and block == mid:
                for s in cfg.seeds:
                    head = learned.make_head(dim, s)
                    t0 = time.perf_counter()
                    with sw.section("train heads (task)"):
                        losses = learned.train_task(head, S.model, block, ctr.tokens[block], S.y_train, cfg.keep_rates,
                                                    steps=cfg.steps, batch=cfg.head_batch, lr=cfg.head_lr, seed=s,
                                                    tau=cfg.task_tau, dtype=cfg.dtype)
                    results.append(("task", s, head, losses, time.perf_counter() - t0))
            for kind, s, head, losses, secs in results:
                heads_out[(name, block, kind, s)] = head
                log.append({"setting": name, "block": block, "kind": kind, "seed": s,
                            "params": sum(q.numel() for q in head.parameters()),
                            "loss_first": float(np.mean(losses[:5])), "loss_last": float(np.mean(losses[-5:])),
                            "train_s": secs})
            if block == mid:
                with sw.section("sensitivity signal (eval, oracle)"):
                    signal_ev[(name, block)] = sensitivity.gradient_sensitivity(
                        S.model, cev.tokens[block], block, target=cfg.signal_target, labels=S.y_eval, probes=cfg.probes,
                        seed=cfg.seed + 1, dtype=cfg.dtype)
        print(f"{name}: {sum(1 for k in heads_out if k[0] == name)} heads trained")
    head_log = pd.DataFrame(log)
    for name in settings:  # capacity matching: every kind of head has the same parameter count in a setting
        counts = head_log[head_log.setting == name].groupby("kind").params.unique()
        assert all(len(v) == 1 for v in counts) and len({int(v[0]) for v in counts}) == 1, counts
    return heads_out, head_log, signal_ev


def check_split_path(S: Setting, block: int, keep: float, head) -> dict:
    """The split path (cache + forward_from) against the patched model with the `learned` scorer, fp32, on up
    to 8 evaluation images."""
    n = min(8, len(S.x_eval))
    x = S.x_eval[:n]
    c = split.cache_tokens(S.model, x, [block], dtype="fp32")
    sc = split.score_cached(c, block, "learned", extras=learned.predictor_extras({block: head}))
    logits, keep_idx = split.prune_cached(S.model, c, block, sc, keep, dtype="fp32")
    PruneConfig(scorer="learned", reducer="drop", keep_rate=keep, locations=(block,)).apply(S.model, trace=True)
    learned.attach(S.model, {block: head})
    with torch.inference_mode():
        want = S.model(x)
    st = prune_state(S.model)
    p = st.num_prefix_tokens
    same_src = torch.equal(st.source[:, p:, p:].bool(), split.kept_source(keep_idx, S.patch_tokens))
    PruneConfig(keep_rate=1.0).apply(S.model)  # leave the model unpruned
    return {"setting": S.name, "block": block, "keep_rate": keep, "images": n,
            "same_kept_tokens": bool(torch.equal(st.history[0]["keep_idx"], keep_idx)), "same_source_map": same_src,
            "max_abs_logit_diff": float((want - logits).abs().max())}


def split_path_checks(settings: dict[str, Setting], heads: dict, d: Design, cfg: SimpleNamespace) -> pd.DataFrame:
    """:func:`check_split_path` per setting at its intermediate block and the low keep rate (first seed's
    sensitivity head); asserts the same kept tokens, source map and logits (within 1e-3)."""
    checks = pd.DataFrame([check_split_path(S, _mid(S.blocks), d.low_keep, heads[(name, _mid(S.blocks), "sensitivity",
                                                                                  cfg.seeds[0])])
                           for name, S in settings.items()])
    assert checks.same_kept_tokens.all() and checks.same_source_map.all() and (checks.max_abs_logit_diff < 1e-3).all(), checks
    return checks


# ----------------------------------------------------------------------------------------------
# 3. scores on the evaluation images; does each head learn its target?
# ----------------------------------------------------------------------------------------------


def score_all(settings: dict[str, Setting], cache_ev: dict, heads: dict, signal_ev: dict,
              cfg: SimpleNamespace) -> dict:
    """``{(setting, block, scorer, seed): [B, N] scores}`` of every scorer on the evaluation images (seed -1 for
    the untrained scorers: cls_attention, random, centre, oracle)."""
    scores: dict = {}
    for name, S in settings.items():
        cev = cache_ev[name]
        for block in S.blocks:
            scores[(name, block, "cls_attention", -1)] = split.score_cached(cev, block, "cls_attention")
            scores[(name, block, "random", -1)] = split.score_cached(
                cev, block, "random", extras={"generator": torch.Generator().manual_seed(cfg.seed + block)})
            scores[(name, block, "centre", -1)] = split.score_cached(cev, block, "centre", extras={"grid": S.grid})
            for (n_, b_, kind, s), head in heads.items():
                if n_ == name and b_ == block:
                    scores[(name, block, kind, s)] = split.score_cached(
                        cev, block, "learned", extras=learned.predictor_extras({block: head}))
            if (name, block) in signal_ev:
                scores[(name, block, "oracle", -1)] = signal_ev[(name, block)]
    return scores


def head_fit_table(scores: dict, cache_ev: dict, signal_ev: dict, cfg: SimpleNamespace) -> pd.DataFrame:
    """Per sensitivity and mimic head: the per-image Spearman correlation of its scores with the signal it was
    trained on (the oracle signal; [CLS] attention), mean over images with a bootstrap interval. Images whose
    scores are constant have no rank correlation and are left out
    (:func:`tokenprune.measure.rank_statistics.rank_correlations`)."""
    rows = []
    for (name, block, kind, s), sc in scores.items():
        if kind not in ("sensitivity", "mimic"):
            continue
        p = cache_ev[name].num_prefix_tokens
        if kind == "mimic":
            target = cache_ev[name].cls_attn[block][:, :, p:].mean(1)
        elif (name, block) in signal_ev:
            target = signal_ev[(name, block)]
        else:
            continue
        rho, _ = rank_correlations(sc, target)
        ci = bootstrap_ci_or_nan(rho, n_boot=cfg.n_boot, seed=cfg.seed)
        rows.append({"setting": name, "block": block, "head": kind, "seed": s,
                     "target": "sensitivity (oracle)" if kind == "sensitivity" else "[CLS] attention",
                     "spearman": ci.estimate, "low": ci.low, "high": ci.high})
    return pd.DataFrame(rows)


def fd_tokens_drawn(n: int, k: int, seed: int) -> Optional[np.ndarray]:
    """The ``k`` prunable tokens (of ``n``) the finite-difference check perturbs, drawn once without replacement
    with ``numpy.random.default_rng(seed)`` and sorted; None (every token) when ``k`` is 0 or at least ``n``."""
    if k <= 0 or k >= n:
        return None
    return np.sort(np.random.default_rng(seed).choice(n, size=k, replace=False))


def fd_check_table(settings: dict[str, Setting], cache_ev: dict, signal_ev: dict, cfg: SimpleNamespace) -> pd.DataFrame:
    """On ``fd_images`` evaluation images at the intermediate block: the finite-difference estimate of the signal
    against the gradient signal (per-image Spearman, mean and min over images; median ratio), on every prunable
    token, or on the ``fd_tokens`` drawn with ``seed`` (:func:`fd_tokens_drawn`; the same tokens of both
    signals: ``finite_difference_sensitivity(token_idx=...)``)."""
    rows = []
    for name, S in settings.items():
        mid = _mid(S.blocks)
        toks = cache_ev[name].tokens[mid][:cfg.fd_images]
        g = signal_ev[(name, mid)][:cfg.fd_images]
        labels = S.y_eval[:cfg.fd_images]
        idx = fd_tokens_drawn(g.shape[1], cfg.fd_tokens, cfg.seed)
        fd = sensitivity.finite_difference_sensitivity(S.model, toks, mid, target=cfg.signal_target, labels=labels,
                                                       probes=cfg.fd_probes, seed=cfg.seed, token_idx=idx)
        if idx is not None:
            g = g[:, torch.as_tensor(idx)]
        rho, _ = rank_correlations(fd, g)
        row = {"setting": name, "block": mid, "images": len(toks), "probes": cfg.fd_probes}
        if cfg.fd_tokens:
            row["tokens"] = g.shape[1]
        row.update({"spearman_fd_vs_grad": float(np.nanmean(rho)) if np.isfinite(rho).any() else math.nan,
                    "min": float(np.nanmin(rho)) if np.isfinite(rho).any() else math.nan,
                    "median_ratio_fd_over_grad": float((fd / g.clamp_min(1e-12)).median())})
        rows.append(row)
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------
# 4. coverage and faithfulness of every scorer
# ----------------------------------------------------------------------------------------------


def coverage_of(S: Setting, keep_idx: torch.Tensor, coverage_variant: str) -> dict:
    """Per-image object coverage, part coverage (NaN without parts) and ``cov`` (part coverage where there are
    parts, else object coverage) of the kept tokens."""
    src = split.kept_source(keep_idx, S.patch_tokens)
    out = {"object_cov": metrics.object_coverage(S.obj, src).numpy()}
    out["part_cov"] = (metrics.part_coverage(S.parts, src, variant=coverage_variant).numpy()
                       if S.parts is not None else np.full(len(keep_idx), np.nan))
    out["cov"] = out["part_cov"] if S.parts is not None else out["object_cov"]
    return out


@dataclass
class Measurements:
    """Per-image values of every evaluated configuration, and the paired comparisons the tables and claims use.

    ``per``: ``{(setting, block, keep, scorer, seed): {metric: [B] array}}`` (metrics ``cov``, ``part_cov``,
    ``object_cov``; with a forward pass also ``agree``, ``kl``, ``dprob``, ``correct``); ``keep_idx``:
    ``{(setting, scorer, seed): kept indices}`` at the intermediate block and the low keep rate.
    """

    per: dict
    keep_idx: dict
    seeds: list
    n_boot: int
    seed: int

    def per_image(self, name, block, keep, scorer, metric, seed_=None):
        """Per-image values; trained heads: averaged over the seeds that have the metric (or one seed). Coverage
        exists for every seed; the forward pass (agreement, KL) for every seed at the intermediate block and for
        the first seed elsewhere."""
        if scorer in TRAINED:
            ss = self.seeds if seed_ is None else [seed_]
            vals = [self.per[(name, block, keep, scorer, s)][metric] for s in ss
                    if metric in self.per.get((name, block, keep, scorer, s), {})]
            return np.mean(vals, axis=0) if vals else None
        d = self.per.get((name, block, keep, scorer, -1))
        return None if d is None else d.get(metric)

    def paired(self, name, block, keep, a, b, metric="cov", scale=100.0, seed_a=None):
        """Paired bootstrap of ``scale x (a - b)`` over images, or None where either was not measured."""
        x, y = self.per_image(name, block, keep, a, metric, seed_a), self.per_image(name, block, keep, b, metric)
        if x is None or y is None:
            return None
        return metrics.paired_bootstrap_diff(np.asarray(x) * scale, np.asarray(y) * scale, n_boot=self.n_boot,
                                             seed=self.seed)

    def gap(self, name, block, keep, a="sensitivity", b="cls_attention"):
        """The coverage gap ``a - b`` in points (paired bootstrap)."""
        return self.paired(name, block, keep, a, b)

    def gap_values(self, name, block, keep, a="sensitivity", b="cls_attention", metric="cov"):
        """Per-image ``a - b`` (unscaled; NaN where either is undefined), or None where either was not measured."""
        x, y = self.per_image(name, block, keep, a, metric), self.per_image(name, block, keep, b, metric)
        return None if x is None or y is None else np.asarray(x, dtype=np.float64) - np.asarray(y, dtype=np.float64)

    def diff_of_gaps(self, name, block1, keep1, block2, keep2):
        """Paired per-image (gap at config 1) - (gap at config 2), in points."""
        pi = self.per_image
        g1 = pi(name, block1, keep1, "sensitivity", "cov") - pi(name, block1, keep1, "cls_attention", "cov")
        g2 = pi(name, block2, keep2, "sensitivity", "cov") - pi(name, block2, keep2, "cls_attention", "cov")
        return metrics.paired_bootstrap_diff(100 * g1, 100 * g2, n_boot=self.n_boot, seed=self.seed)

    def mean_pct(self, name, block, keep, scorer, metric="cov") -> float:
        """100 x the mean (NaN-aware) of a per-image metric."""
        return 100 * np.nanmean(self.per_image(name, block, keep, scorer, metric))


def evaluate_configs(settings: dict[str, Setting], cache_ev: dict, scores: dict, d: Design,
                     cfg: SimpleNamespace) -> Measurements:
    """For every scored (setting, block, scorer, seed) and keep rate: the kept tokens, coverage, and, where the
    forward pass is run, agreement, KL(full || pruned), true-class probability change and correctness. The
    forward pass runs for cls_attention / sensitivity / mimic (first seed) everywhere and for every scorer and
    seed at the intermediate block and the low keep rate."""
    per: dict = {}
    keep_out: dict = {}
    for (name, block, scorer, s), sc in scores.items():
        S = settings[name]
        mid = _mid(S.blocks)
        full = cache_ev[name].logits
        for keep in cfg.keep_rates:
            run = (block == mid and keep == d.low_keep) or \
                (scorer in ("cls_attention", "sensitivity", "mimic") and s in (-1, cfg.seeds[0]))
            logits, keep_idx = split.prune_cached(S.model, cache_ev[name], block, sc, keep, dtype=cfg.dtype,
                                                  run_model=run)
            v = coverage_of(S, keep_idx, cfg.coverage_variant)
            if run:
                v["agree"] = (logits.argmax(1) == full.argmax(1)).numpy().astype(float)
                v["kl"] = metrics.kl_divergence(full, logits, per_image=True)
                v["dprob"] = metrics.true_class_prob_change(full, logits, S.y_eval, per_image=True)
                v["correct"] = metrics.correct(logits, S.y_eval).astype(float)
            per[(name, block, keep, scorer, s)] = v
            if block == mid and keep == d.low_keep:
                keep_out[(name, scorer, s)] = keep_idx
    print(f"{len(per)} configurations evaluated")
    return Measurements(per, keep_out, list(cfg.seeds), cfg.n_boot, cfg.seed)


def _ci(values, prefix: str, scale: float, cfg: SimpleNamespace) -> dict:
    """Interval columns of the mean of ``scale x values`` (NaN columns where not measured)."""
    iv = None if values is None else bootstrap_ci_or_nan(np.asarray(values) * scale, n_boot=cfg.n_boot, seed=cfg.seed)
    return ci_columns(iv, prefix)


def summary_table(m: Measurements, settings: dict[str, Setting], cfg: SimpleNamespace) -> pd.DataFrame:
    """Per (setting, block, keep rate, scorer): coverage and agreement with intervals, object coverage, the
    per-seed spread of coverage (trained heads), KL and true-class probability change."""
    rows = []
    for name, S in settings.items():
        for block in S.blocks:
            for keep in cfg.keep_rates:
                for scorer in SCORER_ORDER:
                    cov = m.per_image(name, block, keep, scorer, "cov")
                    if cov is None:
                        continue
                    row = {"setting": name, "block": block, "keep_rate": keep, "scorer": scorer,
                           "seeds": len(cfg.seeds) if scorer in TRAINED else 1, **_ci(cov, "coverage_pct", 100, cfg),
                           "object_coverage_pct": m.mean_pct(name, block, keep, scorer, "object_cov")}
                    if scorer in TRAINED:
                        per_seed = [100 * np.nanmean(m.per[(name, block, keep, scorer, s)]["cov"]) for s in cfg.seeds]
                        row["coverage_seed_std"] = metrics.seed_summary(per_seed).std
                    row.update(_ci(m.per_image(name, block, keep, scorer, "agree"), "agreement_pct", 100, cfg))
                    kl = m.per_image(name, block, keep, scorer, "kl")
                    row["kl"] = np.nan if kl is None else float(np.mean(kl))
                    dp = m.per_image(name, block, keep, scorer, "dprob")
                    row["true_prob_change_pct"] = np.nan if dp is None else 100 * float(np.mean(dp))
                    rows.append(row)
    return pd.DataFrame(rows)


GAP_COMPARISONS = (("sensitivity", "cls_attention"), ("mimic", "cls_attention"), ("sensitivity", "mimic"),
                   ("sensitivity", "task"), ("oracle", "cls_attention"), ("cls_attention", "random"),
                   ("cls_attention", "centre"), ("sensitivity", "centre"))


def gaps_table(m: Measurements, settings: dict[str, Setting], cfg: SimpleNamespace) -> pd.DataFrame:
    """Coverage gaps (points) of :data:`GAP_COMPARISONS` per (setting, block, keep rate), paired bootstrap; for
    trained heads also the per-seed gaps' summary and how many seeds show a positive gap."""
    rows = []
    for name, S in settings.items():
        for block in S.blocks:
            for keep in cfg.keep_rates:
                for a, b in GAP_COMPARISONS:
                    dd = m.paired(name, block, keep, a, b)
                    if dd is None:
                        continue
                    row = {"setting": name, "block": block, "keep_rate": keep, "comparison": f"{a} - {b}",
                           "gap_pp": dd.estimate, "low": dd.low, "high": dd.high, "p": dd.p_value}
                    if a in TRAINED:
                        per_seed = [100 * (np.nanmean(m.per[(name, block, keep, a, s)]["cov"]) -
                                           np.nanmean(m.per_image(name, block, keep, b, "cov"))) for s in cfg.seeds]
                        ss = metrics.seed_summary(per_seed)
                        row.update({"seed_mean": ss.mean, "seed_std": ss.std, "seed_low": ss.low,
                                    "seed_high": ss.high, "seeds_positive": int(sum(v > 0 for v in per_seed))})
                    rows.append(row)
    return pd.DataFrame(rows)


def gap_heatmap(gaps: pd.DataFrame, settings: dict[str, Setting]):
    """Heatmaps (block x keep rate) of the sensitivity head's coverage gap over [CLS] attention, per setting."""
    main_gap = gaps[gaps.comparison == "sensitivity - cls_attention"]
    names = list(settings)
    fig, axes = plt.subplots(1, len(names), figsize=(3.3 * len(names), 3.2), squeeze=False)
    lim = max(1.0, float(main_gap.gap_pp.abs().max())) if len(main_gap) else 1.0
    for ax, name in zip(axes[0], names):
        g = main_gap[main_gap.setting == name]
        piv = g.pivot(index="block", columns="keep_rate", values="gap_pp")
        sig = g.assign(s=(g.low > 0) | (g.high < 0)).pivot(index="block", columns="keep_rate", values="s")
        ann = piv.map(lambda v: f"{v:+.1f}") + sig.map(lambda s: "*" if s else "")
        sns.heatmap(piv, annot=ann, fmt="", cmap="RdBu_r", vmin=-lim, vmax=lim, cbar=ax is axes[0][-1], ax=ax,
                    annot_kws={"fontsize": 8})
        ax.set_title(f"{name}\n{'part' if settings[name].parts is not None else 'object'} coverage gap (pp)", fontsize=9)
        ax.set_xlabel("keep rate")
        ax.set_ylabel("scoring block")
    fig.suptitle("sensitivity head minus [CLS] attention (* 95% paired CI excludes 0)", fontsize=10)
    fig.tight_layout()
    return fig


def faithfulness_table(m: Measurements, settings: dict[str, Setting], d: Design, cfg: SimpleNamespace) -> pd.DataFrame:
    """Agreement of each head (and the oracle) minus [CLS] attention's, where both were run: paired bootstrap,
    TOST within +-margin, McNemar (first seed), KL and true-class probability differences, ceiling flag."""
    rows = []
    for name, S in settings.items():
        for block in S.blocks:
            for keep in cfg.keep_rates:
                for a, b in (("sensitivity", "cls_attention"), ("mimic", "cls_attention"), ("task", "cls_attention"),
                             ("oracle", "cls_attention")):
                    x, y = m.per_image(name, block, keep, a, "agree"), m.per_image(name, block, keep, b, "agree")
                    if x is None or y is None:
                        continue
                    dd = metrics.paired_bootstrap_diff(100 * x, 100 * y, n_boot=cfg.n_boot, seed=cfg.seed)
                    tost = metrics.tost_paired(x, y, margin=d.margin_frac)
                    first = m.per_image(name, block, keep, a, "agree", cfg.seeds[0]) if a in TRAINED else x
                    mc = metrics.mcnemar(first.astype(bool), y.astype(bool))
                    kl = m.paired(name, block, keep, a, b, "kl", 1.0)
                    dp = m.paired(name, block, keep, a, b, "dprob", 100.0)
                    rows.append({
                        "setting": name, "block": block, "keep_rate": keep, "comparison": f"{a} - {b}",
                        "agreement_a_pct": 100 * x.mean(), "agreement_b_pct": 100 * y.mean(),
                        "agreement_diff_pp": dd.estimate, "low": dd.low, "high": dd.high,
                        "tost_p": tost.p_value, "equivalent": tost.equivalent, "tost_ci90_low_pp": 100 * tost.ci_low,
                        "tost_ci90_high_pp": 100 * tost.ci_high, "mcnemar_p_first_seed": mc.p_value,
                        "kl_diff": kl.estimate, "kl_diff_low": kl.low, "kl_diff_high": kl.high,
                        "true_prob_change_diff_pp": dp.estimate, "true_prob_change_diff_low": dp.low,
                        "true_prob_change_diff_high": dp.high,
                        "at_ceiling": bool(min(x.mean(), y.mean()) >= cfg.ceiling)})
    return pd.DataFrame(rows)


def config_matrix(m: Measurements, name: str):
    """Configurations of ``name`` with a forward pass (trained heads: first seed): keys ``(block, keep, scorer)``
    and per-image coverage and agreement, ``[configs, images]`` each."""
    keys, cov, agr = [], [], []
    for (n_, block, keep, scorer, s), v in m.per.items():
        if n_ != name or "agree" not in v or (scorer in TRAINED and s != m.seeds[0]):
            continue
        keys.append((block, keep, scorer))
        cov.append(v["cov"])
        agr.append(v["agree"])
    return keys, np.array(cov), np.array(agr)


def _spearman_cols(c, a):
    """Column-wise Spearman correlation of two ``[configs, resamples]`` arrays (Pearson of ranks; NaN where a
    column is constant)."""
    from scipy.stats import rankdata

    rc, ra = rankdata(c, axis=0), rankdata(a, axis=0)
    rc, ra = rc - rc.mean(0), ra - ra.mean(0)
    den = np.sqrt((rc ** 2).sum(0) * (ra ** 2).sum(0))
    return np.where(den > 0, (rc * ra).sum(0) / np.where(den > 0, den, 1), np.nan)


def _resampled_means(cov, agr, idx):
    """Per-configuration mean coverage (NaN-aware) and agreement of every image resample (rows of ``idx``):
    two ``[configs, resamples]`` arrays."""
    cov0 = np.nan_to_num(cov, nan=0.0)
    valid = (~np.isnan(cov)).astype(float)
    cb = np.stack([(cov0[:, i].sum(1) / np.maximum(valid[:, i].sum(1), 1)) for i in idx], axis=1)
    ab = np.stack([agr[:, i].mean(1) for i in idx], axis=1)
    return cb, ab


def spearman_boot(cov, agr, n_boot, rng):
    """Spearman correlation of per-configuration means (rows), with a bootstrap over images (columns)."""
    est = float(_spearman_cols(np.nanmean(cov, 1)[:, None], agr.mean(1)[:, None])[0])
    n = cov.shape[1]
    idx = rng.integers(0, n, (n_boot, n))
    boots = _spearman_cols(*_resampled_means(cov, agr, idx))
    if np.isnan(boots).all():
        return est, np.nan, np.nan
    lo, hi = np.nanquantile(boots, [0.025, 0.975])
    return est, float(lo), float(hi)


def stratified_spearman_boot(cov, agr, strata: list, n_boot: int, rng):
    """Mean over ``strata`` (index arrays of configurations, one per keep rate) of the within-stratum Spearman
    correlation of mean coverage and mean agreement, with a bootstrap over images: every resample draws the
    images once and recomputes every stratum's correlation on them (the image is the independent unit; the
    configurations are fixed)."""
    if not strata:
        return math.nan, math.nan, math.nan
    est = float(np.mean([_spearman_cols(np.nanmean(cov[s], 1)[:, None], agr[s].mean(1)[:, None])[0] for s in strata]))
    n = cov.shape[1]
    idx = rng.integers(0, n, (n_boot, n))
    cb, ab = _resampled_means(cov, agr, idx)
    boots = np.stack([_spearman_cols(cb[s], ab[s]) for s in strata]).mean(0)  # NaN where a stratum is constant
    if np.isnan(boots).all():
        return est, np.nan, np.nan
    lo, hi = np.nanquantile(boots, [0.025, 0.975])
    return est, float(lo), float(hi)


def rank_correlation_table(m: Measurements, settings: dict[str, Setting], cfg: SimpleNamespace) -> pd.DataFrame:
    """Per setting: the Spearman correlation of mean coverage and mean agreement across configurations (all, and
    within each keep rate; at least 5 configurations), with a bootstrap over images."""
    rows = []
    for name in settings:
        keys, cov, agr = config_matrix(m, name)
        rng = np.random.default_rng(cfg.seed)
        groups = [("all configurations", np.arange(len(keys)))] + \
                 [(f"keep {k:g}", np.array([i for i, key in enumerate(keys) if key[1] == k])) for k in cfg.keep_rates]
        for label, idx in groups:
            if len(idx) < 5:  # a rank correlation of fewer configurations says little
                continue
            est, lo, hi = spearman_boot(cov[idx], agr[idx], cfg.n_boot, rng)
            rows.append({"setting": name, "configurations": label, "n_configs": len(idx),
                         "spearman_coverage_agreement": est, "low": lo, "high": hi})
    return pd.DataFrame(rows)


def coverage_vs_agreement(summary: pd.DataFrame, settings: dict[str, Setting]):
    """Scatter of mean coverage against mean agreement per configuration, per setting."""
    colours = dict(zip(SCORER_ORDER, sns.color_palette("tab10", len(SCORER_ORDER))))
    names = list(settings)
    fig, axes = plt.subplots(1, len(names), figsize=(3.3 * len(names), 3.2), squeeze=False)
    for ax, name in zip(axes[0], names):
        s = summary[(summary.setting == name) & summary.agreement_pct.notna()]
        sns.scatterplot(data=s, x="coverage_pct", y="agreement_pct", hue="scorer", style="keep_rate", ax=ax, s=30,
                        hue_order=SCORER_ORDER, palette=colours, legend=ax is axes[0][-1])
        ax.set(title=name, xlabel="coverage (%)", ylabel="agreement with unpruned (%)")
    if len(names):
        axes[0][-1].legend(fontsize=6, bbox_to_anchor=(1.02, 1), loc="upper left")
    fig.tight_layout()
    return fig


def kept_figure(S: Setting, m: Measurements, low_keep: float, n_img: int = 4):
    """The first ``n_img`` evaluation images of ``S`` and what each scorer keeps at the intermediate block and the
    low keep rate (dropped patches darkened, kept ones framed; keypoints or the object outline drawn)."""
    name = S.name
    first = lambda sc: m.seeds[0] if sc in TRAINED else -1  # noqa: E731
    cols = [sc for sc in SCORER_ORDER if (name, sc, first(sc)) in m.keep_idx]
    part_colours = plt.cm.tab10(np.arange(10))
    n_img = min(n_img, len(S.x_eval))
    fig, axes = plt.subplots(n_img, len(cols) + 1, figsize=(1.5 * (len(cols) + 1), 1.55 * n_img), squeeze=False)
    for i in range(n_img):
        img = S.raw_eval[i]
        h, w = img.shape[:2]
        for j, sc in enumerate([None] + cols):
            ax = axes[i, j]
            if sc is None:
                ax.imshow(img, cmap="gray", interpolation="nearest")
            else:
                idx = m.keep_idx[(name, sc, first(sc))][i]
                status = np.full(S.patch_tokens, DROPPED, dtype=np.uint8)
                status[idx.numpy()] = KEPT
                ax.imshow(figures.overlay_status(img, status.reshape(S.grid), alpha=0.75), interpolation="nearest")
                ph, pw = h / S.grid[0], w / S.grid[1]
                for t in idx.tolist():  # outline the kept patches (visible on black backgrounds too)
                    r, c = divmod(t, S.grid[1])
                    ax.add_patch(plt.Rectangle((c * pw - 0.5, r * ph - 0.5), pw, ph, fill=False, ec="gold", lw=0.5))
            if S.keypoints is not None:
                kp = S.keypoints[i]
                vis = kp[:, 2] > 0
                ax.scatter(kp[vis, 0] - 0.5, kp[vis, 1] - 0.5, c=part_colours[np.flatnonzero(vis) % len(part_colours)], s=7,
                           edgecolors="white", linewidths=0.3)
            elif S.obj_mask is not None:
                ax.contour(S.obj_mask[i].astype(float), levels=[0.5], colors="cyan", linewidths=0.6)
            ax.set_xticks([]), ax.set_yticks([])
            if i == 0:
                ax.set_title("input" if sc is None else sc, fontsize=7)
    fig.suptitle(f"{name}: kept tokens at block {_mid(S.blocks)}, keep {low_keep:g}", fontsize=9)
    fig.tight_layout()
    return fig


def macs_row(label, model, block, keep, n_tokens, dim) -> dict:
    """MACs of ``model`` pruned once at ``block`` by the learned head (its own MACs added) and by [CLS] attention."""
    head = learned.make_head(dim, 0)
    patch(model, keep_rate=keep, locations=(block,), scorer="learned", reducer="drop")
    pruned = macs.analytic_macs(model)
    patch(model, keep_rate=keep, locations=(block,), scorer="cls_attention", reducer="drop")
    evit = macs.analytic_macs(model)
    PruneConfig(keep_rate=1.0).apply(model)
    full = macs.analytic_macs(model).total
    hm = learned.head_macs(head, n_tokens)
    return {"model": label, "block": block, "keep_rate": keep, "prunable_tokens": n_tokens, "width": dim,
            "head_params": sum(q.numel() for q in head.parameters()), "head_macs": hm,
            "cls_row_macs": evit.reduction, "model_gmacs_unpruned": full / 1e9,
            "model_gmacs_pruned_learned": (pruned.total + hm) / 1e9, "model_gmacs_pruned_cls_attention": evit.total / 1e9,
            "head_share_of_pruned_pct": 100 * hm / (pruned.total + hm)}


def scorer_macs_table(settings: dict[str, Setting], cache_ev: dict, cfg: SimpleNamespace) -> pd.DataFrame:
    """:func:`macs_row` per setting (intermediate block) and keep rate, and for DeiT-S / DeiT-B at 224 px (block 6,
    shapes only)."""
    rows = []
    for name, S in settings.items():
        mid = _mid(S.blocks)
        dim = cache_ev[name].tokens[mid].shape[-1]
        for keep in cfg.keep_rates:
            rows.append({"setting": name, **macs_row(S.model_label, S.model, mid, keep, S.patch_tokens, dim)})
    for arch in ("deit_small_patch16_224", "deit_base_patch16_224"):
        with torch.device("meta"):  # shapes only: MACs need no weights
            model = timm.create_model(arch, pretrained=False).eval()
        for keep in cfg.keep_rates:
            rows.append({"setting": "paper scale (224 px)", **macs_row(arch, model, 6, keep, 196, model.embed_dim)})
    return pd.DataFrame(rows)


# ----------------------------------------------------------------------------------------------
# 5. claims
# ----------------------------------------------------------------------------------------------

QUOTE = PAPER["quotes"]

CLAIM_IDS = {"coverage_gain": "the sensitivity scorer's coverage gain over [CLS] attention is \"more than six percentage "
                              "points\" (the source's figure for FGVC-Aircraft)",
             "coverage_better": "a scorer trained with a sensitivity signal keeps more part coverage than [CLS] attention",
             "beats_centre_prior": "(objection) the sensitivity scorer's coverage is more than a content-free centre prior's",
             "centre_prior_everywhere": "(objection) a content-free centre prior does not cover more than the "
                                        "sensitivity scorer at any scored (block, keep rate)",
             "decoupled": "coverage and faithfulness are decoupled across configurations",
             "decoupled_equal_keep": "coverage and faithfulness are decoupled across configurations of equal keep rate",
             "equal_faithfulness": "faithfulness of the sensitivity scorer is almost identical to [CLS] attention's",
             "intermediate_layer": "the coverage gap is largest when scoring at an intermediate block",
             "early_late_null": "the coverage gap disappears when scoring too early or too late",
             "low_keep_rate": "the coverage gap is largest at low keep rates",
             "capacity_control": "a capacity-matched head not trained with the sensitivity signal does not show the gain",
             "human_features": "the sensitivity scorer selects the patches of the features humans would use",
             "larger_model_null": f"\"{QUOTE['larger_model']}\""}

#: Declared before the data (issue 13). The source's magnitude: "more than six percentage points" is a threshold.
GAIN_THRESHOLD_PP = PAPER["coverage_gain_aircraft_pp"]
#: "decoupled" = the rank correlation of coverage and faithfulness across configurations lies inside +-0.2
#: (a weak correlation at most: |rho| < 0.2 explains under 4 % of the rank variance); "coupled" = above +0.2
DECOUPLED_MARGIN = 0.2
#: "just as fast": the scorer's extra MACs over EViT's [CLS]-attention scorer, at most this share (%) of the unpruned
#: model's MACs (analytic, at every keep rate; the tolerance
#: issue 13 proposes)
FAST_TOLERANCE_PCT = 1.0
#: family-wise error rate of the centre-prior objection over all scored (block, keep rate) configurations
#: (Bonferroni: each configuration's interval at 1 - alpha / K)
CENTRE_FAMILY_ALPHA = 0.05
#: notebook 00's bar for the fine-grained (part) proxy's base model (issue 14): below it, what the model attends to
#: (and what its gradients single out) need not mean anything, so no claim measured on it is judged
FINE_GRAINED_BAR = calibration.BARS["fine-grained"]
PART_MODEL_PREMISE = (f"the part model is good enough for its attention to mean something (>= {FINE_GRAINED_BAR:g} % "
                      "top-1, notebook 00's bar)")
#: the claims that compare two scorers on a per-image metric in points, and so carry a design and its MDE
COMPARISON_CLAIMS = ("coverage_gain", "coverage_better", "beats_centre_prior", "centre_prior_everywhere",
                     "equal_faithfulness", "intermediate_layer", "early_late_null", "low_keep_rate", "capacity_control",
                     "human_features", "larger_model_null")


def effects_in_dispute(cfg: SimpleNamespace) -> dict:
    """The effect in dispute of each comparison claim, in points, stated before the data (issue 14): the source's
    "more than six percentage points" (:data:`GAIN_THRESHOLD_PP`) for the coverage gain and for its sign (the
    source's own difference); where the source gives no number, the smallest difference the claim's rule counts,
    ``cfg.margin`` (also the equivalence margin of the 'almost identical' and 'disappears' claims)."""
    out = {k: float(cfg.margin) for k in COMPARISON_CLAIMS}
    out.update(coverage_gain=float(GAIN_THRESHOLD_PP), coverage_better=float(GAIN_THRESHOLD_PP))
    return out


def paired_design(a, b, n_split: int, what: str = "", scale: float = 100.0,
                  alpha: float = power.ALPHA) -> Optional[power.Design]:
    """The paired design of per-image values ``a`` and ``b`` (``scale`` x: points), over the images where both are
    defined; its largest scale is the full test split ``n_split``, times the share of images where both are
    defined (part coverage is undefined on an image without parts). None with fewer than 2 such images."""
    x, y = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    ok = np.isfinite(x) & np.isfinite(y)
    n, n_all = int(ok.sum()), len(x)
    if n < 2:
        return None
    n_max = max(n, int(round(n_split * n / max(n_all, 1))))
    scale_txt = (f"the full test split ({n_split} images)" if n == n_all else
                 f"the full test split ({n_split} images, of which about {n_max} have it defined)")
    src = (f"sd of the {n} paired per-image differences of this run{f' ({what})' if what else ''} (independent of "
           "their mean)")
    d = power.Design.paired(x[ok], y[ok], unit="images", n_max=n_max, max_scale=scale_txt, scale=scale, sd_source=src)
    return d if alpha == d.alpha else dataclasses.replace(d, alpha=alpha)


def least_precise(*designs: Optional[power.Design]) -> Optional[power.Design]:
    """Of the designs of a claim's several comparisons, the one with the largest MDE at the largest scale (the claim
    is decidable only when each is); chosen by spread alone, never by the differences' means."""
    ds = [x for x in designs if x is not None]
    return max(ds, key=lambda x: x.mde_at_max) if ds else None


def gated(decision: verdicts.Decision, effect: float, design: Optional[power.Design],
          premises: tuple = ()) -> tuple[verdicts.Decision, Optional[dict]]:
    """``decision`` gated on detectability (:class:`tokenprune.study.verdicts.Detectable`: the effect in dispute
    against the design's MDE), then on each premise in turn (the last one outermost: its failure is the one
    named); returns it with the design record the claim stores (None without a design)."""
    record = None
    if design is not None and effect > 0:
        det = verdicts.Detectable(effect=effect, design=design)
        decision, record = det.gate(decision), det.record()
    for p in premises:
        if p is not None:
            decision = p.gate(decision)
    return decision, record


def claim_id(key: str, ds_name: str) -> str:
    """The id of claim ``key`` on dataset ``ds_name``: ``decouple.<key>.<dataset>``; on the paper's datasets
    (:data:`PAPER_DIRS`: the paper profile's models, trained by the recipe or given) the paper-scale id
    (:func:`tokenprune.study.paper_runs.paper_scale_id`, issue 15: its verdict may differ from the proxies')."""
    cid = f"decouple.{key}.{ds_name}"
    return paper_runs.paper_scale_id(cid) if ds_name in PAPER_DIRS else cid


def training_premise(*settings: Setting) -> Optional[Premise]:
    """'Every training run trained its recipe's whole schedule' (:func:`tokenprune.study.paper_runs.full_schedule_premise`)
    of the models of ``settings`` a claim reads (a given checkpoint counts as whole); None when none of them comes
    from a training run (SynthBirds, Fashion-MNIST: the project's base models)."""
    runs = [S.run for S in settings if getattr(S, "run", None) is not None]
    return paper_runs.full_schedule_premise(runs) if runs else None


def part_model_top1(S: Setting, models_table: Optional[pd.DataFrame] = None) -> Optional[tuple]:
    """``(top-1, low, high, where)`` in % of the setting's model: as its checkpoint records it on the full test
    split (the measurement notebook 00 judges), else this run's unpruned top-1 on the evaluation images."""
    test = (S.info or {}).get("test") or {}
    if "accuracy" in test and "ci95" in test:
        lo, hi = test["ci95"]
        return (100 * test["accuracy"], 100 * lo, 100 * hi,
                f"on its full test split ({test.get('n', '?')} images, weights as stored)")
    if models_table is not None and S.name in set(models_table.setting):
        r = models_table.set_index("setting").loc[S.name]
        return (100 * r.top1_unpruned, 100 * r.top1_low, 100 * r.top1_high,
                f"unpruned, on this run's {len(S.x_eval)} evaluation images")
    return None


def part_model_premise(S: Setting, models_table: Optional[pd.DataFrame] = None) -> Optional[Premise]:
    """The premise of every claim measured on SynthBirds' part model (:data:`PART_MODEL_PREMISE`, bar
    :data:`FINE_GRAINED_BAR` from notebook 00); None for any other dataset (Fashion-MNIST's object coverage, the
    paper's datasets). Without a measured top-1 the premise fails."""
    if S.dataset != "parts":
        return None
    t = part_model_top1(S, models_table)
    if t is None:
        return Premise(PART_MODEL_PREMISE, holds=False, detail="its top-1 was not measured")
    top1, lo, hi, where = t
    return Premise(PART_MODEL_PREMISE, holds=bool(top1 >= FINE_GRAINED_BAR),
                   detail=f"{S.info.get('name', S.name)}: top-1 {top1:.1f} % [{lo:.1f}, {hi:.1f}] {where}")


def capacity_rule(controls: list[str], margin: float) -> Criteria:
    """The capacity-control rule for the controls trained (mimic; task where it was trained)."""
    diffs = [f"sensitivity - {c}" for c in controls]
    return Criteria(
        reproduced=tuple(Above(x, 0) for x in diffs) + (Above("sensitivity - cls_attention", 0),),
        not_reproduced=tuple(Below(x, 0) for x in diffs) + tuple(Inside(x, margin) for x in diffs))


def claim_rules(cfg: SimpleNamespace, d: Design) -> dict:
    """The rules of the claims, declared before the data (``capacity_control`` per set of controls). Gaps are in
    points of coverage (sensitivity head, mean of seeds, minus [CLS] attention, paired bootstrap over images)."""
    m, seeds = cfg.margin, len(cfg.seeds)
    mid_e, mid_l = "gap(intermediate) - gap(early)", "gap(intermediate) - gap(late)"
    low_high = "gap(low keep) - gap(high keep)"
    k = len(cfg.blocks) * len(cfg.keep_rates)
    level_k = round(100 * (1 - CENTRE_FAMILY_ALPHA / k), 2)
    all_pos = Flag("seeds_positive", f"every one of the {seeds} seeds' gaps is > 0")
    return {
        # "more than six percentage points": a threshold claim, not a sign claim
        "coverage_gain": Criteria(
            reproduced=(Above("gap", GAIN_THRESHOLD_PP), all_pos),
            not_reproduced=(Below("gap", GAIN_THRESHOLD_PP),)),
        # "significantly better at keeping the patches ...": a direction claim (a gain of at least `margin`)
        "coverage_better": Criteria(reproduced=(Above("gap", 0), all_pos), not_reproduced=(Below("gap", m),)),
        "beats_centre_prior": verdicts.Direction(">", unit="pp"),
        # worst case over the K = blocks x keep rates configurations of the small model, Bonferroni intervals
        "centre_prior_everywhere": Criteria(
            reproduced=(Above("sensitivity - centre, configuration of lowest lower bound", -m, level=level_k),),
            not_reproduced=(Below("sensitivity - centre, configuration of lowest upper bound", -m, level=level_k),)),
        # the title claim, pooled over every configuration with a forward pass and within keep rates
        "decoupled": Criteria(reproduced=(Inside("rank correlation", DECOUPLED_MARGIN),),
                              not_reproduced=(Above("rank correlation", DECOUPLED_MARGIN),)),
        "decoupled_equal_keep": Criteria(reproduced=(Inside("mean within-keep-rate rank correlation", DECOUPLED_MARGIN),),
                                         not_reproduced=(Above("mean within-keep-rate rank correlation",
                                                               DECOUPLED_MARGIN),)),
        "early_late_null": Criteria(
            reproduced=(Flag("early_equivalent", f"the early block's per-image coverage gap is equivalent to 0 (paired "
                                                 f"TOST, alpha 0.05, +-{d.margin_frac:g})"),
                        Flag("late_equivalent", f"the late block's per-image coverage gap is equivalent to 0 (paired "
                                                f"TOST, alpha 0.05, +-{d.margin_frac:g})")),
            not_reproduced=(Beyond("gap(early)", m), Beyond("gap(late)", m))),
        "human_features": Criteria(reproduced=(Above("gap (class-defining parts)", 0), all_pos),
                                   not_reproduced=(Below("gap (class-defining parts)", m),)),
        "just_as_fast": verdicts.Condition(
            f"reproduced when the sensitivity head's extra MACs over EViT's [CLS]-attention scorer (head MACs minus the "
            f"[CLS]-row MACs, analytic) are at most {FAST_TOLERANCE_PCT:g} % of the unpruned model's MACs at every keep "
            "rate; else not reproduced"),
        # the TOST runs on agreement as a fraction: the margin is cfg.margin / 100
        "equal_faithfulness": Criteria(
            reproduced=(Flag("equivalent", f"the paired TOST (Schuirmann, alpha 0.05) of per-image agreement declares "
                                           f"equivalence within +-{d.margin_frac:g}"),),
            not_reproduced=(Beyond("agreement difference (fraction)", d.margin_frac, level=90),)),
        "intermediate_layer": Criteria(
            reproduced=(Above("gap(intermediate)", 0), Above(mid_e, 0), Above(mid_l, 0)),
            not_reproduced=(Below(mid_e, 0), Below(mid_l, 0), AllOf((Inside(mid_e, m), Inside(mid_l, m))))),
        "low_keep_rate": Criteria(
            reproduced=(Above("gap(low keep)", 0), Above(low_high, 0)),
            not_reproduced=(Below(low_high, 0), Inside(low_high, m))),
        "larger_model_null": Criteria(
            reproduced=(Flag("tost_equivalent", f"the larger model's per-image coverage gap is equivalent to 0 "
                                                f"(paired TOST, alpha 0.05, +-{d.margin_frac:g})"),
                        Above("small-model gap", 0)),
            not_reproduced=(Above("larger-model gap", m),)),
    }


def centre_family(m: Measurements, name: str, blocks: list, keep_rates: list, alpha: float = CENTRE_FAMILY_ALPHA,
                  a: str = "sensitivity", b: str = "centre") -> list:
    """``[(block, keep, PairedDiff)]``: ``100 x (a - b)`` coverage per configuration (block x keep rate), paired
    bootstrap over images at the Bonferroni level ``1 - alpha / K`` (K: the configurations measured)."""
    pairs = [(bl, kp, m.per_image(name, bl, kp, a, "cov"), m.per_image(name, bl, kp, b, "cov"))
             for bl in blocks for kp in keep_rates]
    pairs = [p for p in pairs if p[2] is not None and p[3] is not None]
    k = max(len(pairs), 1)
    return [(bl, kp, metrics.paired_bootstrap_diff(100 * np.asarray(x), 100 * np.asarray(y), n_boot=m.n_boot,
                                                   alpha=alpha / k, seed=m.seed)) for bl, kp, x, y in pairs]


def centre_values(family: list) -> dict:
    """The two configurations the centre-prior rule reads: lowest lower bound (reproduced only if even it lies
    above -margin) and lowest upper bound (not reproduced when it lies below -margin)."""
    lo = min(family, key=lambda t: t[2].low)[2]
    hi = min(family, key=lambda t: t[2].high)[2]
    return {"sensitivity - centre, configuration of lowest lower bound": lo,
            "sensitivity - centre, configuration of lowest upper bound": hi}


def decoupling_stats(m: Measurements, name: str, keep_rates: list, n_boot: int, seed: int) -> SimpleNamespace:
    """Rank correlation of mean coverage and mean agreement across the configurations of ``name`` with a forward
    pass (trained heads: first seed), pooled (the ``all configurations`` row of :func:`rank_correlation_table`,
    same resamples) and as the mean of the within-keep-rate correlations (keep rates with at least 5
    configurations); bootstrap over images."""
    keys, cov, agr = config_matrix(m, name)
    nan3 = (math.nan, math.nan, math.nan)
    pooled = spearman_boot(cov, agr, n_boot, np.random.default_rng(seed)) if len(keys) >= 5 else nan3
    strata = [np.array([i for i, key in enumerate(keys) if key[1] == kr]) for kr in keep_rates]
    sizes = {kr: len(s) for kr, s in zip(keep_rates, strata)}
    strata = [s for s in strata if len(s) >= 5]
    strat = stratified_spearman_boot(cov, agr, strata, n_boot, np.random.default_rng(seed)) if strata else nan3
    return SimpleNamespace(n_configs=len(keys), pooled=pooled, stratified=strat, strata=sizes, n_strata=len(strata))


def class_part_coverage(S: Setting, keep_idx: torch.Tensor, coverage_variant: str) -> np.ndarray:
    """Per-image coverage of SynthBirds' class-defining parts (:data:`synthetic.DISCRIMINATIVE_PARTS`: the only
    parts whose appearance depends on the class) by the kept tokens; NaN where none is annotated."""
    sel = [synthetic.PART_NAMES.index(p) - 1 for p in synthetic.DISCRIMINATIVE_PARTS]
    parts = S.parts[:, sel]
    return metrics.part_coverage(parts, split.kept_source(keep_idx, S.patch_tokens), variant=coverage_variant).numpy()


def human_features_values(S: Setting, m: Measurements, cfg: SimpleNamespace):
    """Class-defining-part coverage at the intermediate block and the low keep rate: the paired gap (sensitivity
    head, per image mean over seeds, minus [CLS] attention, points), how many seeds show a positive gap, and the
    number of images with a class-defining part annotated; the mean coverages (%); and the per-image coverages
    ``(x, y)`` of the two (fractions, NaN without such a part), from which the claim's design follows."""
    seeds = [s for s in cfg.seeds if (S.name, "sensitivity", s) in m.keep_idx]
    y = class_part_coverage(S, m.keep_idx[(S.name, "cls_attention", -1)], cfg.coverage_variant)
    per_seed = [class_part_coverage(S, m.keep_idx[(S.name, "sensitivity", s)], cfg.coverage_variant) for s in seeds]
    x = np.mean(per_seed, axis=0)
    n_valid = int(np.sum(~np.isnan(y)))
    g = (metrics.paired_bootstrap_diff(100 * x, 100 * y, n_boot=m.n_boot, seed=m.seed) if n_valid >= 2 else None)
    pos = sum(np.nanmean(v) > np.nanmean(y) for v in per_seed)
    return g, int(pos), len(seeds), n_valid, 100 * np.nanmean(x), 100 * np.nanmean(y), (x, y)


def fast_values(scorer_macs: pd.DataFrame, arch: str = "deit_small_patch16_224") -> pd.DataFrame:
    """Per keep rate of ``arch`` at 224 px: the head's extra MACs over EViT's scorer, as % of the unpruned
    model's MACs and of the [CLS]-attention-pruned model's."""
    r = scorer_macs[(scorer_macs.setting == "paper scale (224 px)") & (scorer_macs.model == arch)]
    extra = r.model_gmacs_pruned_learned - r.model_gmacs_pruned_cls_attention
    return pd.DataFrame({"keep_rate": r.keep_rate.values, "extra_pct_of_unpruned": (100 * extra / r.model_gmacs_unpruned).values,
                         "extra_pct_of_pruned_cls": (100 * extra / r.model_gmacs_pruned_cls_attention).values})


def just_as_fast_claim(rep, rule, scorer_macs: Optional[pd.DataFrame]) -> None:
    """``decouple.just_as_fast.deit_s_224``: the head's extra MACs at the paper's model and scale (analytic)."""
    statement = (f"\"{QUOTE['just_as_fast']}\": the sensitivity-trained scorer costs no more than EViT's [CLS] "
                 "attention (extra MACs of the head, DeiT-S at 224 px, pruned once at block 6)")
    kw = dict(id="decouple.just_as_fast.deit_s_224", paper="decouple", statement=statement, source=SRC,
              paper_value="just as fast")
    if scorer_macs is None or not len(fast_values(scorer_macs)):
        rep.add_claim(**kw, decision=verdicts.not_testable("the scorer MAC table was not computed"))
        return
    v, vb = fast_values(scorer_macs), fast_values(scorer_macs, "deit_base_patch16_224")
    worst = float(v.extra_pct_of_unpruned.max())
    rep.add_claim(**kw, our_value=round(worst, 3), unit="% of the unpruned DeiT-S MACs (largest over keep rates)",
                  decision=rule.decide(worst <= FAST_TOLERANCE_PCT,
                                       f"extra MACs {worst:.3f} % of the unpruned model's exceed {FAST_TOLERANCE_PCT:g} %"),
                  why="per keep rate " + ", ".join(f"{k:g}: {a:.3f} % of unpruned, {b:.2f} % of the [CLS]-pruned model"
                                                   for k, a, b in v.itertuples(index=False)) +
                      f"; DeiT-B up to {vb.extra_pct_of_unpruned.max():.3f} %. Analytic MACs, not wall-clock: the head "
                      "is a dense MLP over every prunable token; the source gives no speed number")


def seeds_agree(gaps: pd.DataFrame, name, block, keep, a="sensitivity", b="cls_attention") -> int:
    """How many seeds show a positive gap ``a - b`` (the gaps table's ``seeds_positive``; 0 where absent)."""
    r = gaps[(gaps.setting == name) & (gaps.block == block) & (gaps.keep_rate == keep) &
             (gaps.comparison == f"{a} - {b}")]
    return int(r.seeds_positive.iloc[0]) if len(r) and "seeds_positive" in r else 0


def _iv(x) -> dict:
    return {"our_value": round(x.estimate, 2), "ci": [round(x.low, 2), round(x.high, 2)]}


def _fmt(x) -> str:
    return fmt_interval(x.estimate, x.low, x.high) + " pp"


def file_claims(rep, rules: dict, settings: dict[str, Setting], m: Measurements, gaps: pd.DataFrame,
                models_table: pd.DataFrame, d: Design, cfg: SimpleNamespace,
                scorer_macs: Optional[pd.DataFrame] = None) -> pd.DataFrame:
    """File the claims of :data:`CLAIM_IDS` per dataset (small model at the intermediate block and the low keep
    rate, unless the claim is about blocks, keep rates or all configurations; the larger model for the null claim)
    and ``just_as_fast`` once (analytic MACs at the paper's scale, from ``scorer_macs``); returns the claims table.

    Every comparison claim (:data:`COMPARISON_CLAIMS`) carries its paired per-image design and is gated on
    detecting the effect in dispute (:func:`effects_in_dispute`, stated before the data); every claim measured on
    SynthBirds' part model is gated on :func:`part_model_premise` (issue 14)."""
    mid, low, hi_k = d.mid, d.low_keep, d.high_keep
    eff = effects_in_dispute(cfg)
    datasets_run = sorted({n.split("/")[0] for n in settings if n.endswith("/small")})
    for ds_name in datasets_run:
        small, large = f"{ds_name}/small", f"{ds_name}/large"
        S = settings[small]
        cov_word = "part coverage" if S.parts is not None else "object coverage"
        where = f"{PAPER_DATASET.get(ds_name, ds_name)}, {S.model_label}, block {mid}, keep {low:g}, {len(S.x_eval)} images"
        claim = lambda key, **kw: rep.add_claim(id=claim_id(key, ds_name), paper="decouple", **kw)  # noqa: E731
        n_split = S.n_test_split or len(S.x_eval)
        part_premise = part_model_premise(S, models_table)
        # the outermost premises of every claim on this dataset: the part model's (SynthBirds only), then the small
        # model's training run's whole schedule (the paper's datasets only)
        outer = (part_premise, training_premise(S))

        def gate(key, decision, design, *inner):
            return gated(decision, eff[key], design, (*inner, *outer))

        def gap_design(block, keep, a="sensitivity", b="cls_attention", what=""):
            x, y = m.per_image(small, block, keep, a, "cov"), m.per_image(small, block, keep, b, "cov")
            if x is None or y is None:
                return None
            return paired_design(x, y, n_split, what or f"{a} - {b}, block {block}, keep {keep:g}" +
                                 ("; trained heads: mean of the seeds per image" if a in TRAINED else ""))

        def diff_design(block1, keep1, block2, keep2):
            g1, g2 = m.gap_values(small, block1, keep1), m.gap_values(small, block2, keep2)
            return paired_design(g1, g2, n_split, f"gap at block {block1}, keep {keep1:g} minus gap at block {block2}, "
                                                  f"keep {keep2:g}")

        # 1. coverage gain
        g = m.gap(small, mid, low)
        g_design = gap_design(mid, low)
        pos = seeds_agree(gaps, small, mid, low)
        pct = {sc: m.mean_pct(small, mid, low, sc) for sc in ("cls_attention", "sensitivity", "random", "centre")}
        measured = (f"{pos} of {len(cfg.seeds)} seeds positive. Measured on {where}; coverage: cls_attention "
                    f"{pct['cls_attention']:.1f} %, sensitivity head {pct['sensitivity']:.1f} %, baselines random "
                    f"{pct['random']:.1f} % and centre {pct['centre']:.1f} %")
        stand_in = ("" if ds_name == "aircraft" else
                    f"; the source states the figure for FGVC-Aircraft only: on {PAPER_DATASET.get(ds_name, ds_name)} the "
                    "same threshold is applied" + ("" if ds_name in PAPER_DIRS else
                                                   " (a stand-in; the paper's datasets run at the paper profile)"))
        dec_, rec = gate("coverage_gain", rules["coverage_gain"].decide({"gap": g, "seeds_positive": pos == len(cfg.seeds)}),
                         g_design)
        claim("coverage_gain",
              statement=f"the sensitivity scorer's {cov_word} exceeds [CLS] attention's by more than "
                        f"{GAIN_THRESHOLD_PP:g} points (source: \"{QUOTE['coverage_gain_aircraft']}\")",
              source=SRC, paper_value=f"> {GAIN_THRESHOLD_PP:g} (\"{QUOTE['coverage_gain_aircraft_value']}\")",
              **_iv(g), unit=f"pp {cov_word}", decision=dec_, design=rec,
              why=f"threshold claim, not a sign claim (the sign is coverage_better); effect in dispute: the source's "
                  f"{GAIN_THRESHOLD_PP:g} points. {measured}{stand_in}")
        dec_, rec = gate("coverage_better",
                         rules["coverage_better"].decide({"gap": g, "seeds_positive": pos == len(cfg.seeds)}), g_design)
        claim("coverage_better",
              statement=f"(direction) a scorer trained with a sensitivity signal keeps more {cov_word} than [CLS] "
                        f"attention (source: \"{QUOTE['coverage_better']}\")",
              source=SRC, paper_value="significantly better", **_iv(g), unit=f"pp {cov_word}", decision=dec_, design=rec,
              why=f"direction claim: a gain of at least {cfg.margin:g} point counts; effect in dispute: the source's own "
                  f"difference, {GAIN_THRESHOLD_PP:g} points. {measured}")

        # 1b. objection: is the gain more than "look at the centre"? (a content-free prior at the same keep rate)
        dc = m.paired(small, mid, low, "sensitivity", "centre")
        dec_, rec = gate("beats_centre_prior", rules["beats_centre_prior"].decide(dc.estimate, dc.low, dc.high,
                                                                                  what="sensitivity - centre"),
                         gap_design(mid, low, "sensitivity", "centre"))
        claim("beats_centre_prior",
              statement=f"(objection) the sensitivity scorer's {cov_word} is more than a content-free centre prior's",
              source="reviewer objection to the coverage claim; " + SRC, paper_value=None, **_iv(dc),
              unit=f"pp {cov_word}, sensitivity head - centre prior", decision=dec_, design=rec,
              why=f"{where}; the source gives no number: effect in dispute the margin, {cfg.margin:g} point")
        _centre_everywhere_claim(claim, rules["centre_prior_everywhere"], m, small, S, cov_word, cfg,
                                 lambda dec0, des: gate("centre_prior_everywhere", dec0, des))

        # 1c. the title claim: do coverage and faithfulness decouple across configurations? (a rank correlation, not
        # a paired difference in points: no design; on SynthBirds gated on the part model's premise)
        _decoupled_claims(claim, rules, m, small, S, cfg, outer)

        # 2. equal faithfulness (premise: not both at the ceiling)
        x = m.per_image(small, mid, low, "sensitivity", "agree")
        y = m.per_image(small, mid, low, "cls_attention", "agree")
        tost = metrics.tost_paired(x, y, margin=d.margin_frac)
        ceiling = Premise(f"at least one agreement below the ceiling {100 * cfg.ceiling:g} % (at the ceiling, "
                          "'equal faithfulness' is uninformative)", holds=not min(x.mean(), y.mean()) >= cfg.ceiling,
                          detail=f"{100 * y.mean():.1f} % and {100 * x.mean():.1f} %")
        dec_, rec = gate("equal_faithfulness", rules["equal_faithfulness"].decide(
            {"equivalent": tost.equivalent, "agreement difference (fraction)": (tost.mean_diff, tost.ci_low, tost.ci_high)}),
            paired_design(x, y, n_split, f"top-1 agreement with the unpruned model, sensitivity - cls_attention, block "
                                         f"{mid}, keep {low:g}; sensitivity head: mean of the seeds per image"), ceiling)
        claim("equal_faithfulness",
              statement="faithfulness (top-1 agreement of the pruned with the unpruned model) of the sensitivity "
                        "scorer is almost identical to [CLS] attention's",
              source=SRC, paper_value=PAPER["faithfulness"], our_value=round(100 * tost.mean_diff, 2),
              ci=[round(100 * tost.ci_low, 2), round(100 * tost.ci_high, 2)], unit="pp agreement (90% CI)",
              decision=dec_, design=rec,
              why=f"effect in dispute: the equivalence margin, {cfg.margin:g} point ('almost identical' has no number); "
                  f"agreement cls_attention {100 * y.mean():.1f} %, sensitivity {100 * x.mean():.1f} %; {where}")

        # 3. intermediate-layer dependence
        d_e, d_l = m.diff_of_gaps(small, mid, low, d.early, low), m.diff_of_gaps(small, mid, low, d.late, low)
        g_e, g_l = m.gap(small, d.early, low), m.gap(small, d.late, low)
        bind, bind_block = min(((d_e, d.early), (d_l, d.late)), key=lambda t: t[0].estimate)
        dec_, rec = gate("intermediate_layer", rules["intermediate_layer"].decide(
            {"gap(intermediate)": g, "gap(intermediate) - gap(early)": d_e, "gap(intermediate) - gap(late)": d_l}),
            least_precise(g_design, diff_design(mid, low, d.early, low), diff_design(mid, low, d.late, low)))
        claim("intermediate_layer",
              statement=f"(direction) the coverage gap is largest when scoring at an intermediate block (source: "
                        f"\"{QUOTE['intermediate']}\"; its disappearance early and late is early_late_null)",
              source=SRC, paper_value="largest at intermediate blocks", **_iv(bind),
              unit=f"pp: gap(block {mid}) - gap(block {bind_block}), the smaller of the two differences",
              decision=dec_, design=rec,
              why=f"gaps at blocks {d.early}/{mid}/{d.late}: {g_e.estimate:+.2f}/{g.estimate:+.2f}/{g_l.estimate:+.2f} pp "
                  f"(keep {low:g}); mid-early {_fmt(d_e)}, mid-late {_fmt(d_l)}; the source gives no number: effect in "
                  f"dispute the margin, {cfg.margin:g} point (design: the least precise of the three intervals the rule reads)")

        # 3b. "the difference ... disappears" early and late: an equivalence claim (a magnitude: zero)
        te, tl = (metrics.tost_paired(m.per_image(small, b, low, "sensitivity", "cov"),
                                      m.per_image(small, b, low, "cls_attention", "cov"), margin=d.margin_frac)
                  for b in (d.early, d.late))
        big, big_block = max(((g_e, d.early), (g_l, d.late)), key=lambda t: abs(t[0].estimate))
        dec_, rec = gate("early_late_null", rules["early_late_null"].decide(
            {"early_equivalent": te.equivalent, "late_equivalent": tl.equivalent, "gap(early)": g_e, "gap(late)": g_l}),
            least_precise(gap_design(d.early, low), gap_design(d.late, low)))
        claim("early_late_null", statement=f"\"{QUOTE['early_late']}\" (coverage gap at the early and the late block)",
              source=SRC, paper_value="the difference disappears", **_iv(big),
              unit=f"pp {cov_word}: gap at block {big_block}, the larger of early/late in absolute value",
              decision=dec_, design=rec,
              why=f"gap at block {d.early} {_fmt(g_e)} (TOST p = {te.p_value:.3f}), at block {d.late} {_fmt(g_l)} "
                  f"(TOST p = {tl.p_value:.3f}); keep {low:g}; effect in dispute: the equivalence margin, "
                  f"{cfg.margin:g} point (design: the less precise of the two blocks)")

        # 4. low-keep-rate dependence
        d_k = m.diff_of_gaps(small, mid, low, mid, hi_k)
        g_hi = m.gap(small, mid, hi_k)
        dec_, rec = gate("low_keep_rate", rules["low_keep_rate"].decide({"gap(low keep)": g,
                                                                         "gap(low keep) - gap(high keep)": d_k}),
                         least_precise(g_design, diff_design(mid, low, mid, hi_k)))
        claim("low_keep_rate", statement=f"(direction) the coverage gap is largest at low keep rates (source: "
                                         f"\"{QUOTE['low_keep']}\")",
              source=SRC, paper_value="largest at low keep rates", **_iv(d_k),
              unit=f"pp: gap(keep {low:g}) - gap(keep {hi_k:g})", decision=dec_, design=rec,
              why=f"gap at keep {low:g}: {g.estimate:+.2f} pp, at keep {hi_k:g}: {g_hi.estimate:+.2f} pp (block {mid}); "
                  f"the source gives no number: effect in dispute the margin, {cfg.margin:g} point (design: the less "
                  "precise of the two intervals the rule reads)")

        # 5. capacity control
        ctrl = {c: m.gap(small, mid, low, "sensitivity", c) for c in ("mimic", "task")}
        ctrl = {c: v for c, v in ctrl.items() if v is not None}
        worst = min(ctrl.values(), key=lambda v: v.estimate)
        dec_, rec = gate("capacity_control", capacity_rule(list(ctrl), cfg.margin).decide(
            {"sensitivity - cls_attention": g, **{f"sensitivity - {c}": v for c, v in ctrl.items()}}),
            least_precise(g_design, *(gap_design(mid, low, "sensitivity", c,
                                       f"sensitivity - {c}, block {mid}, keep {low:g}; both: mean of the seeds per image")
                            for c in ctrl)))
        claim("capacity_control",
              statement="a capacity-matched head not trained with the sensitivity signal does not show the coverage gain",
              source=SRC, paper_value="gain not from capacity", **_iv(worst),
              unit=f"pp {cov_word}: sensitivity head minus the closest control", decision=dec_, design=rec,
              why=", ".join(f"sensitivity - {c}: {_fmt(v)}" for c, v in ctrl.items()) +
                  ("" if "task" in ctrl else "; the task-loss control was not trained for this dataset (task_settings)") +
                  f"; the source gives no number: effect in dispute the margin, {cfg.margin:g} point (design: the least "
                  "precise of the intervals the rule reads)")

        # 5b. "the patches humans would use": SynthBirds' class-defining parts as the stand-in (a premise)
        _human_features_claim(claim, rules["human_features"], m, S, ds_name, where, cfg,
                              lambda dec0, des, *inner: gate("human_features", dec0, des, *inner))

        # 6. larger-model null
        outer_l = (part_premise, training_premise(S, *([settings[large]] if large in settings else [])))
        _larger_model_claim(claim, rules["larger_model_null"], settings, m, models_table, large, S, g, cov_word, d, cfg,
                            lambda dec0, des: gated(dec0, eff["larger_model_null"], des, outer_l), outer_l[1])

    for ds_name in sorted({n.split("/")[0] for n in settings} - set(datasets_run)):
        for cid, statement in CLAIM_IDS.items():
            rep.add_claim(id=claim_id(cid, ds_name), paper="decouple", statement=statement, source=SRC,
                          decision=verdicts.not_testable(f"setting {ds_name}/small was not run (settings parameter)"))
    just_as_fast_claim(rep, rules["just_as_fast"], scorer_macs)
    return pd.DataFrame([c.to_dict() for c in rep.claims])[["id", "paper_value", "our_value", "ci", "unit", "verdict"]]


def _centre_everywhere_claim(claim, rule, m: Measurements, small: str, S: Setting, cov_word: str,
                             cfg: SimpleNamespace, gate=None) -> None:
    """The centre prior against the sensitivity head at every (block, keep rate) of the small model. ``gate(decision,
    design)`` returns the gated decision and the design record (default: no gate); the design is that of the least
    precise configuration, at the family's Bonferroni level."""
    fam = centre_family(m, small, S.blocks, cfg.keep_rates)
    if not fam:
        claim("centre_prior_everywhere", statement=CLAIM_IDS["centre_prior_everywhere"], source=SRC,
              decision=verdicts.not_testable("no configuration with both scorers measured"))
        return
    bl, kp, worst = min(fam, key=lambda t: t[2].estimate)
    beaten = [(b, k) for b, k, v in fam if v.high < -cfg.margin]
    cls_c = [m.paired(small, b, k, "cls_attention", "centre") for b, k, _ in fam]
    cls_c = [v.estimate for v in cls_c if v is not None]
    level = CENTRE_FAMILY_ALPHA / len(fam)
    n_split = S.n_test_split or len(S.x_eval)
    design = least_precise(*(paired_design(m.per_image(small, b, k, "sensitivity", "cov"),
                                           m.per_image(small, b, k, "centre", "cov"), n_split,
                                           f"sensitivity - centre, block {b}, keep {k:g}, the least precise of {len(fam)} "
                                           f"configurations; alpha {level:.3g} (Bonferroni)", alpha=level)
                             for b, k, _ in fam))
    decision, rec = rule.decide(centre_values(fam)), None
    if gate is not None:
        decision, rec = gate(decision, design)
    claim("centre_prior_everywhere",
          statement=f"(objection) the sensitivity scorer's {cov_word} is not exceeded by a content-free centre prior at "
                    f"any scored (block, keep rate); otherwise 'covers parts better' is no more than a spatial bias gives",
          source="reviewer objection to the coverage claim (issue 13); " + SRC, paper_value=None, **_iv(worst),
          unit=f"pp {cov_word}, sensitivity head - centre prior at block {bl}, keep {kp:g} (the lowest estimate; "
               f"{100 * (1 - CENTRE_FAMILY_ALPHA / len(fam)):.2f} % Bonferroni interval over {len(fam)} configurations)",
          decision=decision, design=rec,
          why=f"the centre prior covers more than the head by more than {cfg.margin:g} point at {len(beaten)} of {len(fam)} "
              f"configurations; [CLS] attention - centre ranges {min(cls_c):+.1f} to {max(cls_c):+.1f} pp. What it says "
              "about 'covers parts better': the head's gain is measured against [CLS] attention, which a content-free "
              "prior beats by more; a coverage gain is then no evidence that the head selects parts by their content "
              f"({S.model_label}, {len(S.x_eval)} images, bootstrap over images); the objection gives no number: effect "
              f"in dispute the margin, {cfg.margin:g} point")


def _decoupled_claims(claim, rules: dict, m: Measurements, small: str, S: Setting, cfg: SimpleNamespace,
                      outer: tuple = ()) -> None:
    """The title claim, pooled over configurations and within keep rates (mean of the within-keep-rate rhos);
    ``outer``: premises gating both (the part model's on SynthBirds)."""
    st = decoupling_stats(m, small, cfg.keep_rates, cfg.n_boot, cfg.seed)
    base = (f"across {st.n_configs} configurations of {S.name} with a forward pass (block x keep rate x scorer; "
            f"trained heads: first seed), Spearman of mean coverage and mean agreement, bootstrap over "
            f"{len(S.x_eval)} images")
    for key, iv, what, enough in (
            ("decoupled", st.pooled, "rank correlation", st.n_configs >= 5),
            ("decoupled_equal_keep", st.stratified, "mean within-keep-rate rank correlation", st.n_strata >= 1)):
        premise = Premise("at least 5 configurations with a forward pass" + ("" if key == "decoupled" else
                                                                               " in some keep rate"), holds=enough,
                          detail=f"{st.n_configs} configurations; per keep rate {st.strata}")
        e, lo, hi = iv
        dec, _ = gated(premise.gate(rules[key].decide({what: (e, lo, hi)})), 0.0, None, outer)
        opposed = (f"; the interval lies below -{DECOUPLED_MARGIN:g}: coverage and faithfulness are opposed (the "
                   "source's 'pull in different directions'), which is not 'decoupled' either"
                   if enough and hi < -DECOUPLED_MARGIN else "")
        scope = ("pooled over keep rates (the keep rate drives both coverage and agreement, so this pooled figure is "
                 "mostly compute; decoupled_equal_keep holds the keep rate fixed)" if key == "decoupled" else
                 f"mean over keep rates {', '.join(f'{k:g}' for k, n in st.strata.items() if n >= 5)} of the "
                 "within-keep-rate correlations (same image resamples for all)")
        claim(key, statement=f"coverage and faithfulness are decoupled across configurations"
                             f"{'' if key == 'decoupled' else ' of equal keep rate'} (the title: \"{QUOTE['title']}\"; "
                             f"\"{QUOTE['decouple']}\")",
              source=SRC, paper_value="decoupled",
              our_value=None if not math.isfinite(e) else round(e, 3),
              ci=None if not (math.isfinite(lo) and math.isfinite(hi)) else [round(lo, 3), round(hi, 3)],
              unit="Spearman rho (coverage vs agreement across configurations)", decision=dec,
              why=f"{base}; {scope}{opposed}")


def _human_features_claim(claim, rule, m: Measurements, S: Setting, ds_name: str, where: str,
                          cfg: SimpleNamespace, gate=None) -> None:
    """``gate(decision, design, *premises)``: the gated decision and the design record (default: the premises only)."""
    statement = f"\"{QUOTE['human_features']}\""
    if ds_name != "parts" or S.parts is None:
        claim("human_features", statement=statement, source=SRC, paper_value="consistently",
              decision=verdicts.not_testable(
                  "no annotation of the features humans would use to identify the object: SynthBirds' class-defining "
                  "parts stand in for them where they exist (parts); "
                  + ("Fashion-MNIST has no parts" if ds_name == "fmnist" else
                     f"{PAPER_DATASET.get(ds_name, ds_name)} marks parts or boxes, not which of them humans use")))
        return
    g, pos, n_seeds, n_valid, cov_s, cov_c, (x, y) = human_features_values(S, m, cfg)
    premise = Premise(f"SynthBirds' class-defining parts ({', '.join(synthetic.DISCRIMINATIVE_PARTS)}: by construction "
                      "the only parts whose appearance depends on the class) stand in for 'the features humans would "
                      "use', and at least 2 evaluation images show one", holds=g is not None,
                      detail=f"{n_valid} images with a class-defining part")
    iv = g if g is not None else SimpleNamespace(estimate=math.nan, low=math.nan, high=math.nan)
    decision = rule.decide({"gap (class-defining parts)": iv, "seeds_positive": pos == n_seeds})
    design = paired_design(x, y, S.n_test_split or len(S.x_eval),
                           "class-defining-part coverage, sensitivity - cls_attention, on the images with such a part; "
                           "sensitivity head: mean of the seeds per image")
    if gate is None:
        dec, rec = premise.gate(decision), None
    else:
        dec, rec = gate(decision, design, premise)
    claim("human_features", statement=statement + " (stand-in: coverage of SynthBirds' class-defining parts, sensitivity "
                                                  "head - [CLS] attention)",
          source=SRC, paper_value="consistently", **({} if g is None else _iv(g)),
          unit="pp class-defining-part coverage", decision=dec, design=rec,
          why=f"no human annotation exists; {pos} of {n_seeds} seeds positive; class-defining-part coverage: "
              f"sensitivity head {cov_s:.1f} %, [CLS] attention {cov_c:.1f} % ({n_valid} images with such a part); {where}; "
              f"the source gives no number: effect in dispute the margin, {cfg.margin:g} point")


def _larger_model_claim(claim, rule, settings, m, models_table, large, S, g, cov_word, d, cfg, gate=None,
                        premise: Optional[Premise] = None) -> None:
    """``gate(decision, design)``: the gated decision and the design record (default: no gate). A larger model that
    does not classify the dataset leaves the claim not testable, before any gate but ``premise`` (the training
    runs' whole schedule: a shortened run is why it does not classify)."""
    statement = (f"\"{QUOTE['larger_model']}\" (the source names no model; our stand-in: {PAPER_ARCH['large']} at the "
                 "paper profile, ViT-S/14 below it)")
    paper_value = QUOTE["larger_model_value"]
    if large not in settings:
        claim("larger_model_null", statement=statement, source=SRC, paper_value=paper_value,
              decision=verdicts.not_testable(f"setting {large} was not run (settings parameter)"))
        return
    SL = settings[large]
    acc = models_table.set_index("setting").loc[large]
    chance = 1 / int(SL.model.num_classes)
    if not acc.top1_low > 2 * chance:
        decision = verdicts.not_testable(
            f"the larger model here ({SL.model_label}) does not classify this dataset: unpruned top-1 "
            f"{100 * acc.top1_unpruned:.1f} % [{100 * acc.top1_low:.1f}, {100 * acc.top1_high:.1f}] of "
            f"{int(SL.model.num_classes)} classes (chance {100 * chance:.1f} %), so its coverage gap says nothing "
            "about a larger classifier; a larger model for this dataset needs fine-tuning, beyond the default budget",
            rule="testable when the larger model's unpruned top-1 has a 95 % interval above twice chance")
        claim("larger_model_null", statement=statement, source=SRC, paper_value=paper_value,
              decision=decision if premise is None else premise.gate(decision))
        return
    mid_l = _mid(SL.blocks)
    dl = m.gap(large, mid_l, d.low_keep)
    xl = m.per_image(large, mid_l, d.low_keep, "sensitivity", "cov")
    yl = m.per_image(large, mid_l, d.low_keep, "cls_attention", "cov")
    tl = metrics.tost_paired(xl, yl, margin=d.margin_frac)
    decision, rec = rule.decide({"tost_equivalent": tl.equivalent, "small-model gap": g, "larger-model gap": dl}), None
    if gate is not None:
        decision, rec = gate(decision, paired_design(
            xl, yl, SL.n_test_split or len(SL.x_eval), f"larger model, sensitivity - cls_attention, block {mid_l}, keep "
                                                        f"{d.low_keep:g}; sensitivity head: mean of the seeds per image"))
    claim("larger_model_null", statement=statement, source=SRC, paper_value=paper_value, **_iv(dl),
          unit=f"pp {cov_word} gap of the larger model", decision=decision, design=rec,
          why=f"larger model: {SL.model_label}, grid {SL.grid[0]}x{SL.grid[1]} (small model {S.grid[0]}x{S.grid[1]}), "
              f"block {mid_l}, {len(SL.x_eval)} images; TOST p = {tl.p_value:.3f}; small-model gap {_fmt(g)}. "
              "the source names no model (\"a much larger, more powerful version\"); a coarser grid changes what coverage "
              f"can resolve; effect in dispute: the equivalence margin, {cfg.margin:g} point")


def definitions(cfg: SimpleNamespace) -> dict:
    """Our operationalisation of the paper's terms (recorded in results.json)."""
    return {
        "pruning": "one location (block l), reducer drop, ceil(r (N - 1)) kept",
        "part_coverage": f"{cfg.coverage_variant} variant over {cfg.part_source}; kept tokens through their source map",
        "object_coverage": "share of object-mask patches kept",
        "faithfulness": "top-1 agreement with the unpruned model; KL(full || pruned); change of true-class probability",
        "sensitivity": f"{cfg.signal} estimate of ||dT/dh_i||, T = {cfg.signal_target}",
        "head": "DynamicViT-sized PredictorHead trained with " + cfg.rank_loss,
        "controls": "mimic ([CLS] attention ranking), task (end to end, task loss, soft top-k)",
    }
