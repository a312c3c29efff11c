"""Notebook 02's settings: what each parameter means and the profile tables (smoke, default, paper)."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import pandas as pd

from tokenprune.study import paper_runs
from tokenprune.study.proxy import chosen
from tokenprune.study.paper_numbers import BAT

__all__ = ["PARAMETERS", "PROFILES", "DEIT_S", "DEIT_T", "PAPER_KEEP", "bat_options", "check_paper_files",
           "design_choices"]

DEIT_S, DEIT_T = "deit_small_patch16_224", "deit_tiny_patch16_224"
#: the keep rates of BAT's Table 1 (DeiT-S)
PAPER_KEEP: list[float] = list(BAT[DEIT_S]["keep"])

#: what each parameter of the profile table means
PARAMETERS: dict[str, str] = {
    "seed": "seed of every random operation (bootstraps, subsets, random weights)",
    "proxy_model": "the accuracy proxy (tokenprune.training.base_models): the calibrated proxy of notebook 00, chosen "
                   "by its criteria alone; paper profile: DeiT-S",
    "n_eval": "test images of the sweep tables, the trend and the fine-tuning (every configuration runs on them)",
    "n_full": "test images of the claim-deciding pairwise comparisons (0: the proxy's full test split)",
    "n_div": "test images for the diversity of the kept set on the accuracy model (shown; the diversity claims are "
             "decided on the photo model, figure_model)",
    "keep_rates": "EViT keep rates that set the MAC budgets of the proxy comparison",
    "ablation_keep_rates": "keep rates (MAC budgets) of the ablations",
    "bench_batch": "images per timed batch at DeiT-S scale",
    "bench_rounds": "interleaved timing rounds",
    "bench_keep_rates": "keep rates timed at DeiT-S scale",
    "bench_model": "the timm model timed (DeiT-S; smoke: DeiT-T, to stay within seconds)",
    "measure_macs": "check the analytic MAC count against FlopCounterMode's",
    "finetune_steps": "pruning-aware fine-tuning steps per run (0: skip)",
    "finetune_seeds": "seeds of the fine-tuning runs",
    "finetune_keep_rates": "keep rates fine-tuned",
    "ft_batch": "images per fine-tuning step",
    "num_clusters": "BAT: clusters of inattentive tokens per location",
    "k": "BAT: neighbours of the DPC-KNN density",
    "pair_fraction": "BAT: share of attentive tokens paired and combined (0: no pairing)",
    "merge_weight": "BAT: weights of the cluster averages: attention | size | uniform",
    "ablations": "which ablations: few (importance / diversity / pairing) | all (also k, clusters, weights)",
    "dtype": "precision of the proxy's evaluations and of its in-notebook fine-tunes: fp32 | bf16 (autocast) | auto "
             "(paper: bf16 where the CPU has bf16 units, else fp32)",
    "sweep_batch": "images per batch of the proxy evaluation",
    "threads": "torch threads (0: torch's default); 1 is robust on a shared 2-core CPU",
    "figure_model": "model of the photo figures and of the kept-set diversity claims: vit_s14 (pretrained) | "
                    "random_tiny (smoke)",
    "figure_img": "image size of the photo figures and of the diversity claims' photo crops",
    "photos": "photos shown",
    "deit_weights": "paper profile: local DeiT-S checkpoint (deit_small_patch16_224-cd65a155.pth)",
    "imagenet_root": "paper profile: ImageNet folders (see data/README.md)",
    "paper_train_keep_rates": "paper profile: keep rates of Table 1 at which BAT-DeiT-S is trained as its logs did "
                              "(0.6-0.2: recipe bat_deit_s_finetune, about 6 A100-hours each; 0.7: bat_deit_s_scratch, "
                              "300 epochs, about 73)",
    "bat_weights_dir": "paper profile, optional: folder of the user's BAT-DeiT-S checkpoints, bat_deit_s_keep<r>.pth "
                       "(loaded instead of training that keep rate)",
    **paper_runs.TRAINING_PARAMETERS,
}

_COMMON: dict[str, Any] = {
    "seed": 0,
    "num_clusters": 4,
    "k": 5,
    "pair_fraction": 0.0,
    "merge_weight": "attention",
    "deit_weights": None,
    "imagenet_root": None,
    "paper_train_keep_rates": [0.6, 0.5, 0.4, 0.3, 0.2],
    "bat_weights_dir": "",
    **paper_runs.TRAINING_SETTINGS,
}

_SMOKE: dict[str, Any] = {
    "proxy_model": f"{chosen.AUDIT_MODEL}_smoke",
    "n_eval": 128,
    "n_full": 128,
    "n_div": 32,
    "keep_rates": [0.7, 0.3],
    "ablation_keep_rates": [0.3],
    "bench_batch": 1,
    "bench_rounds": 1,
    "finetune_steps": 1,
    "finetune_seeds": [0],
    "finetune_keep_rates": [0.5],
    "dtype": "fp32",
    "bench_keep_rates": [0.7],
    "bench_model": DEIT_T,
    "measure_macs": False,
    "figure_model": "random_tiny",
    "figure_img": 112,
    "photos": 1,
    "ft_batch": 16,
    "ablations": "few",
    "sweep_batch": 128,
    "threads": 1,
}

_DEFAULT: dict[str, Any] = {
    "proxy_model": chosen.AUDIT_MODEL,
    "n_eval": 1000,
    "n_full": 0,
    "n_div": 256,
    "keep_rates": [0.9, 0.7, 0.5, 0.3, 0.2],
    "ablation_keep_rates": [0.3],
    "bench_batch": 8,
    "bench_rounds": 5,
    "finetune_steps": 20,
    "finetune_seeds": [0, 1, 2],
    "finetune_keep_rates": [0.5],
    "dtype": "fp32",
    "bench_keep_rates": [0.7, 0.3],
    "bench_model": DEIT_S,
    "measure_macs": True,
    "figure_model": "vit_s14",
    "figure_img": 224,
    "photos": 4,
    "ft_batch": 64,
    "ablations": "all",
    "sweep_batch": 250,
    "threads": 1,
}

_PAPER: dict[str, Any] = {
    "proxy_model": DEIT_S,
    "n_eval": 10000,
    "n_full": 0,
    "n_div": 1000,
    "keep_rates": [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3, 0.2],
    "ablation_keep_rates": [0.5, 0.3],
    "bench_batch": 64,
    "bench_rounds": 10,
    "finetune_steps": 0,
    "finetune_seeds": [0, 1, 2],
    "finetune_keep_rates": [0.7],
    "dtype": "auto",
    "bench_keep_rates": [0.7, 0.5, 0.3],
    "bench_model": DEIT_S,
    "measure_macs": True,
    "figure_model": "vit_s14",
    "figure_img": 224,
    "photos": 5,
    "ft_batch": 64,
    "ablations": "all",
    "sweep_batch": 256,
    "threads": 0,
}

#: inclusive bounds of every numeric setting (None: open), checked by params.setup before any run
_RANGES: dict[str, tuple] = {
    "num_clusters": (1, None),
    "k": (1, None),
    "pair_fraction": (0.0, 0.999),
    "n_eval": (1, None),
    "n_full": (0, None),
    "n_div": (1, None),
    "bench_batch": (1, None),
    "bench_rounds": (1, None),
    "finetune_steps": (0, None),
    "figure_img": (1, None),
    "photos": (0, None),
    "ft_batch": (1, None),
    "sweep_batch": (1, None),
    "threads": (0, None),
    "keep_rates": (0.001, 1.0),
    "ablation_keep_rates": (0.001, 1.0),
    "finetune_seeds": (0, None),
    "finetune_keep_rates": (0.001, 1.0),
    "bench_keep_rates": (0.001, 1.0),
    "seed": (0, None),
    **paper_runs.TRAINING_RANGES,
}

_CHOICES: dict[str, list] = {
    "paper_train_keep_rates": [0.7, 0.6, 0.5, 0.4, 0.3, 0.2],
    "merge_weight": ["attention", "size", "uniform"],
    "dtype": ["fp32", "bf16", "auto"],
    "ablations": ["few", "all"],
    "figure_model": ["vit_s14", "random_tiny"],
    # the audit model notebook 00's outcome names (chosen.AUDIT_MODEL, a chosen proxy once there is one) and the
    # stand-in measured while none is chosen, each with its smoke version; the small ViT; DeiT-S (paper)
    "proxy_model": list(dict.fromkeys([chosen.AUDIT_MODEL, f"{chosen.AUDIT_MODEL}_smoke", chosen.STAND_IN,
                                       f"{chosen.STAND_IN}_smoke", "small_vit_fmnist", "small_vit_fmnist_smoke",
                                       DEIT_S])),
}

PROFILES: dict[str, dict[str, Any]] = {
    "smoke": {**_COMMON, **_SMOKE},
    "default": {**_COMMON, **_DEFAULT},
    "paper": {**_COMMON, **_PAPER},
    "ranges": _RANGES,
    "choices": _CHOICES,
}


def bat_options(cfg: Any) -> dict:
    """BAT's reducer options from the settings (``num_clusters``, ``k``, ``pair_fraction``, ``merge_weight``)."""
    return {"num_clusters": cfg.num_clusters, "k": cfg.k, "pair_fraction": cfg.pair_fraction,
            "merge_weight": cfg.merge_weight}


def check_paper_files(profile: str, deit_weights: Optional[str], imagenet_root: Optional[str]) -> None:
    """At the paper profile, fail at once (not after the timing sections) when the paper's files are missing."""
    if profile != "paper":
        return
    if not deit_weights or not Path(deit_weights).is_file():
        raise FileNotFoundError(f"profile paper: deit_weights must name a local DeiT-S checkpoint file "
                                f"(deit_small_patch16_224-cd65a155.pth); got {deit_weights!r}. "
                                "Pass -p deit_weights PATH.")
    if not imagenet_root or not Path(imagenet_root).is_dir():
        raise FileNotFoundError(f"profile paper: imagenet_root must name the ImageNet folders (see data/README.md); "
                                f"got {imagenet_root!r}. Pass -p imagenet_root PATH.")


def design_choices(cfg: Any) -> pd.DataFrame:
    """The free choices of BAT's operator, the values used and why."""
    return pd.DataFrame([
        {"choice": "num_clusters", "value": cfg.num_clusters,
         "reason": "a few tokens beyond EViT's fused token; model MACs within 4% of EViT's"},
        {"choice": "k", "value": cfg.k, "reason": "TCFormer's public DPC-KNN (k = 5)"},
        {"choice": "merge_weight", "value": cfg.merge_weight,
         "reason": "[CLS] attention x size: the importance BAT already computes (EViT fuses with it)"},
        {"choice": "pair_fraction", "value": cfg.pair_fraction,
         "reason": "pairing rule unspecified: off by default, ablated in section 5"},
    ])
