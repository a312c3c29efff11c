"""Notebook 04's parameters and profiles (:data:`PARAMETERS`, :data:`PROFILES`), and the blocks and keep rates its
claims are about (:class:`Layout`, :func:`layout`)."""
from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import torch

from tokenprune.methods import learned, sensitivity
from tokenprune.study import paper_runs

__all__ = ["SMALL_SETTINGS", "ALL_SETTINGS", "PAPER_SETTINGS", "PARAMETERS", "PROFILES", "TRAINED", "SCORER_ORDER",
           "Layout", "layout", "mid_block", "definitions"]

SMALL_SETTINGS = ["parts/small", "fmnist/small"]
ALL_SETTINGS = ["parts/small", "parts/large", "fmnist/small", "fmnist/large"]
PAPER_SETTINGS = [f"{d}/{m}" for d in ("cub", "cars", "aircraft") for m in ("small", "large")]
#: the trained scorers (one head per seed) and every scorer, in the tables' order
TRAINED = ("sensitivity", "mimic", "task")
SCORER_ORDER = ["cls_attention", "sensitivity", "mimic", "task", "oracle", "random", "centre"]

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
    "margin": "equivalence margin and smallest gain counted, in points (agreement, top-1 and coverage)",
    "ceiling": "agreement at or above which 'equal faithfulness' and 'just as accurate' are uninformative",
    "parts_large_img_size": "input size of ViT-S/14 on SynthBirds (56: 4x4 patches; 112: 8x8)",
    "n_boot": "bootstrap resamples",
    "fd_images": "images on which the finite-difference and gradient signals are compared",
    "fd_probes": "random directions of the finite-difference estimate",
    "fd_tokens": "tokens per image the finite-difference check perturbs (0: every token), drawn once with seed, the "
                 "same tokens compared for both signals; each costs fd_probes forwards of the rest of the model per "
                 "image. paper: 49 of DeiT's 196 (a quarter): 196 instead of 784 forwards of DeiT-B from block 6 per "
                 "image, and a per-image Spearman over 49 tokens has a standard error of about 1/sqrt(48) = 0.14, "
                 "0.03 over the 32 images. The check only (signal fd trains on every token)",
    "dtype": "bf16 | fp32 | auto (autocast for inference and training; smoke, default: fp32, paper: auto, bf16 "
             "where the CPU has bf16 units, else fp32)",
    "torch_threads": "CPU threads for torch (0: torch's default)",
    "data_root": "paper: folder holding CUB_200_2011/, stanford_cars/, fgvc-aircraft-2013b/",
    "checkpoint_dir": "paper: folder holding the user's <dataset>_<small|large>.pth (DeiT-S / DeiT-B fine-tuned); a "
                      "model whose file is not there is trained by the recipe decoupling_fgvc_finetune ('': all six)",
    "init_dir": "paper: folder holding the recipe's start checkpoints deit_small_patch16_224-cd65a155.pth and "
                "deit_base_patch16_224-b5f2ef4d.pth (facebookresearch/deit's ImageNet DeiT-S / DeiT-B), for the models "
                "checkpoint_dir does not give",
    **paper_runs.TRAINING_PARAMETERS,
}

_COMMON = dict(
    seed=0,
    keep_rates=[0.25, 0.5, 0.7],
    seeds=[0, 1, 2],
    head_lr=1e-3,
    signal="grad",
    signal_target="pred_logit",
    probes=4,
    rank_loss="listnet",
    task_tau=0.5,
    part_source="keypoints",
    coverage_variant="parts",
    margin=1.0,
    ceiling=0.98,
    dtype="fp32",
    data_root="",
    checkpoint_dir="",
    torch_threads=1,
    fd_tokens=0,
    init_dir="",
    **paper_runs.TRAINING_SETTINGS,
)

_SMOKE = dict(
    _COMMON,
    n_train=32,
    n_eval=32,
    n_train_large=16,
    n_eval_large=16,
    blocks=[2, 6, 10],
    large_blocks=[6],
    steps=4,
    head_batch=8,
    settings=["parts/small", "parts/large", "fmnist/small"],
    task_settings=["parts/small"],
    parts_large_img_size=28,
    n_boot=200,
    fd_images=1,
    fd_probes=1,
)

_DEFAULT = dict(
    _COMMON,
    n_train=384,
    n_eval=512,
    n_train_large=256,
    n_eval_large=256,
    blocks=[2, 6, 10],
    large_blocks=[6],
    steps=100,
    head_batch=16,
    settings=ALL_SETTINGS,
    task_settings=["parts/small", "fmnist/small"],
    parts_large_img_size=56,
    n_boot=1000,
    fd_images=2,
    fd_probes=2,
    # torch's default threads: the fine-grained proxy is a 22 M-parameter ViT at 196 tokens, and on an idle 2-core CPU
    # (make reproduce runs alone) two threads ran the notebook in 970 s against 1,334 s on one; the smoke profile keeps
    # one (tests run on a busy machine, see layout)
    torch_threads=0,
)

_PAPER = dict(
    _COMMON,
    n_train=2048,
    n_eval=2048,
    n_train_large=2048,
    n_eval_large=2048,
    blocks=[2, 4, 6, 8, 10],
    large_blocks=[2, 4, 6, 8, 10],
    steps=1000,
    head_batch=32,
    settings=PAPER_SETTINGS,
    task_settings=[f"{d}/small" for d in ("cub", "cars", "aircraft")],
    parts_large_img_size=224,
    n_boot=2000,
    fd_images=32,
    fd_probes=4,
    torch_threads=0,
    fd_tokens=49,
    dtype="auto",
)

#: inclusive bounds of every numeric setting (None: open), checked by params.setup before any run
_RANGES = {
    "head_lr": (0.0, None),
    "probes": (1, None),
    "task_tau": (1e-06, None),
    "margin": (0.0, None),
    "ceiling": (0.0, 1.0),
    "torch_threads": (0, None),
    "n_train": (1, None),
    "n_eval": (1, None),
    "n_train_large": (1, None),
    "n_eval_large": (1, None),
    "steps": (1, None),
    "head_batch": (1, None),
    "parts_large_img_size": (1, None),
    "n_boot": (1, None),
    "fd_images": (1, None),
    "fd_probes": (1, None),
    "fd_tokens": (0, None),
    **paper_runs.TRAINING_RANGES,
    "keep_rates": (0.001, 1.0),
    "seeds": (0, None),
    "blocks": (1, None),
    "large_blocks": (1, None),
    "seed": (0, None),
}

_CHOICES = {
    "signal": ["grad", "fd"],
    "signal_target": list(sensitivity.TARGETS),
    "rank_loss": list(learned.LOSSES),
    "part_source": ["keypoints", "masks"],
    "coverage_variant": ["parts", "patches"],
    "dtype": ["bf16", "fp32", "auto"],
    "settings": ALL_SETTINGS + PAPER_SETTINGS,
    "task_settings": ALL_SETTINGS + PAPER_SETTINGS,
}

PROFILES = {"smoke": _SMOKE, "default": _DEFAULT, "paper": _PAPER, "ranges": _RANGES, "choices": _CHOICES}
assert set(PARAMETERS) == set(PROFILES["default"]), "every parameter has a meaning"


@dataclass(frozen=True)
class Layout:
    """The blocks and keep rates the claims are about, derived from ``cfg``."""

    early: int
    mid: int
    late: int
    low_keep: float
    high_keep: float
    margin_frac: float  # the equivalence margin as a fraction (agreement and coverage are fractions per image)


def mid_block(blocks: list) -> int:
    """The intermediate scoring block of ``blocks`` (the middle one)."""
    return blocks[len(blocks) // 2]


def layout(cfg: SimpleNamespace) -> Layout:
    """Check ``blocks``/``keep_rates``, seed the global generators with ``cfg.seed``, set torch's threads, and
    return the :class:`Layout`."""
    if len(cfg.blocks) < 3 or sorted(set(cfg.blocks)) != list(cfg.blocks):
        raise ValueError(f"blocks: expected at least 3 increasing block numbers (early, intermediate, late), "
                         f"got {cfg.blocks}")
    if len(cfg.keep_rates) < 2:
        raise ValueError(f"keep_rates: expected at least 2 keep rates, got {cfg.keep_rates}")
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)
    if cfg.torch_threads > 0:
        # On a shared 2-core CPU, one thread: with two, OpenMP threads wait on each other whenever another process
        # holds a core, and these small models then ran up to 10x slower (head training 57 ms/step on one thread
        # vs 561 ms/step on two under load; two threads win only ~1.6x when the machine is idle)
        torch.set_num_threads(cfg.torch_threads)
    b = cfg.blocks
    return Layout(b[0], mid_block(b), b[-1], min(cfg.keep_rates), max(cfg.keep_rates), cfg.margin / 100)


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
