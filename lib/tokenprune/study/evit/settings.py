"""Notebook 01's settings: every parameter with its meaning (:data:`PARAMETERS`), the value of each per profile
(:data:`PROFILES`, read by :func:`tokenprune.study.params.setup`), and the checks of inputs no table can express
(:func:`check_inputs`)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from tokenprune.study import paper_runs
from tokenprune.study.proxy import chosen
from tokenprune.training import model_recipes

__all__ = ["PARAMETERS", "PROFILES", "KEEP_RATES", "check_inputs"]

#: the keep rates of EViT's Table 2 / README at the paper's scale
KEEP_RATES = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5]

#: name -> meaning of every setting of :data:`PROFILES`
PARAMETERS: dict[str, str] = {
    "seed": "seed of the evaluation subset, every bootstrap and the global torch generator",
    "batch": "images per timed batch of DeiT-S (§3)",
    "batch_deit_b": "images per timed batch of DeiT-B (§3)",
    "bench_rounds": "interleaved timing rounds of DeiT-S/B (§3)",
    "bench_models": "models whose throughput is measured (§3)",
    "bench_keep_rates": "keep rates timed on DeiT-S (§3)",
    "bench_keep_rates_deit_b": "keep rates timed on DeiT-B (§3)",
    "dtype": "fp32 | bf16: precision of the DeiT timing (EViT measured fp32)",
    "measure_macs": "also count the MACs with torch's FlopCounterMode and check the analytic count (§2)",
    "warmup": "warm-up iterations before the DeiT timing rounds (§3)",
    "sweep_keep_rates": "keep rates of the off-the-shelf sweep of the proxy (§6a)",
    "ft_keep": "keep rate of the cached fine-tunes (model_recipes.FINETUNE_CONDITIONS: 0.7) (§6b)",
    "oracle_keep": "keep rate at block 1 with the oracle's attention (§10)",
    "hires_img_size": "the higher input resolution of §11 (the small ViT's own: 28 px)",
    "margin_pp": "equivalence margin in top-1 points (TOST) and the slack of the cost claim",
    "side_keep_rates": "keep rates of the mask-quality and tokens-to-tokens comparisons (§7, §9)",
    "parts_keep_rates": "keep rates of the SynthBirds sweep (§6c)",
    "proxy_eval_images": "test images of proxy_model evaluated (its first ones; 0: the full split); designs scale to "
                         "the full split",
    "proxy_model": "the classification model of the accuracy claims (chosen.AUDIT_MODEL: notebook 00's proxy, or "
                   "with none chosen the model measured beside claims not testable here), evaluated on the first "
                   "proxy_eval_images of its test split (§5-9; §6b: its cached fine-tunes)",
    "base_model": "the small ViT trained on plain Fashion-MNIST: the oracle (§10) and higher-resolution (§11) "
                  "studies",
    "parts_model": "the fine-grained proxy of notebook 00 on SynthBirds (chosen.FINE_GRAINED; §6c, §12)",
    "eval_images": "plain Fashion-MNIST test images of base_model (§10, §11)",
    "parts_eval_images": "SynthBirds test images (§6c)",
    "eval_batch": "evaluation batch size",
    "finetune_seeds": "seeds of the cached fine-tunes of proxy_model (model_recipes.FINETUNED_BASES; smoke: 0-2), at "
                      "least 3",
    "oracle_images": "test images of the oracle study (§10)",
    "oracle_img_size": "input size of the oracle ViT-S/14 (98 px: a 7x7 grid of 14-px patches)",
    "photo_size": "size of the real photos of Figure 3 (§12)",
    "n_photos": "real photos in Figure 3 (§12)",
    "n_dataset_images": "images per dataset in Figure 3 (§12)",
    "small_bench_batch": "images per timed batch of the small ViT (§9, §13)",
    "small_bench_rounds": "timing rounds of the small ViT (§9, §13)",
    "train_bench_rounds": "interleaved rounds of the small ViT's training-throughput timing (Table 11, §13)",
    "t2t_bench_model": "the timm model on which tokens-to-tokens attention is timed (§9)",
    "t2t_bench_batch": "images per timed batch of t2t_bench_model (§9)",
    "t2t_bench_rounds": "timing rounds of t2t_bench_model (§9)",
    "paper_eval_images": "paper profile: ImageNet validation images evaluated (0: all)",
    "imagenet_root": "paper profile: ImageNet folder with train/ and val/ (required there)",
    "deit_s_weights": "paper profile: local DeiT-S checkpoint (deit_small_patch16_224-cd65a155.pth; required there)",
    "evit_weights": "paper profile, optional: local EViT-DeiT-S checkpoint trained at keep 0.7 with fusion (else "
                    "the notebook trains it: recipe evit_deit_s_finetune)",
    "paper_train_keep_rates": "paper profile: keep rates at which EViT-DeiT-S is fine-tuned (recipe "
                              "evit_deit_s_finetune, 7.3 A100-hours each) for Table 2's trained rows",
    "paper_train_dropped": "paper profile: also fine-tune each of paper_train_keep_rates without fusion (Table 2's "
                           "'without fusion' column)",
    **paper_runs.TRAINING_PARAMETERS,
}

#: the settings every profile shares
_COMMON: dict[str, Any] = {
    "seed": 0,
    "dtype": "fp32",
    "ft_keep": 0.7,
    "oracle_keep": 0.5,
    "hires_img_size": 32,
    "margin_pp": 0.5,
    "paper_eval_images": 0,
    "imagenet_root": "",
    "deit_s_weights": "",
    "evit_weights": "",
    "paper_train_keep_rates": [0.7],
    "paper_train_dropped": False,
    **paper_runs.TRAINING_SETTINGS,
}

_SMOKE: dict[str, Any] = {
    "batch": 2,
    "bench_rounds": 1,
    "bench_models": ["deit_small_patch16_224"],
    "bench_keep_rates": [1.0, 0.7],
    "bench_keep_rates_deit_b": [1.0, 0.8],
    "batch_deit_b": 2,
    "measure_macs": False,
    "warmup": 0,
    "sweep_keep_rates": [0.9, 0.8, 0.7, 0.6, 0.5],
    "side_keep_rates": [0.7],
    "parts_keep_rates": [0.7, 0.5],
    "proxy_model": f"{chosen.AUDIT_MODEL}_smoke",
    "proxy_eval_images": 64,
    "base_model": "small_vit_fmnist_smoke",
    "parts_model": f"{chosen.FINE_GRAINED}_smoke",
    "eval_images": 64,
    "parts_eval_images": 32,
    "eval_batch": 64,
    "finetune_seeds": [0, 1, 2],
    "oracle_images": 16,
    "oracle_img_size": 56,
    "photo_size": 112,
    "n_photos": 2,
    "n_dataset_images": 2,
    "small_bench_batch": 8,
    "small_bench_rounds": 1,
    "train_bench_rounds": 1,
    "t2t_bench_model": "deit_tiny_patch16_224",
    "t2t_bench_batch": 1,
    "t2t_bench_rounds": 1,
}

_DEFAULT: dict[str, Any] = {
    "batch": 32,
    "bench_rounds": 5,
    "bench_models": ["deit_small_patch16_224", "deit_base_patch16_224"],
    "bench_keep_rates": [1.0, 0.9, 0.8, 0.7, 0.6, 0.5],
    "bench_keep_rates_deit_b": [1.0, 0.8],
    "batch_deit_b": 16,
    "measure_macs": True,
    "warmup": 1,
    "sweep_keep_rates": [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3],
    "side_keep_rates": [0.7],
    "parts_keep_rates": [0.7, 0.5],
    "proxy_model": chosen.AUDIT_MODEL,
    "proxy_eval_images": 4000,
    "base_model": "small_vit_fmnist",
    "parts_model": chosen.FINE_GRAINED,
    "eval_images": 2000,
    "parts_eval_images": 1000,
    "eval_batch": 500,
    "finetune_seeds": [0, 1, 2, 3, 4],
    "oracle_images": 1000,
    "oracle_img_size": 98,
    "photo_size": 224,
    "n_photos": 5,
    "n_dataset_images": 4,
    "small_bench_batch": 64,
    "small_bench_rounds": 3,
    "train_bench_rounds": 5,
    "t2t_bench_model": "deit_small_patch16_224",
    "t2t_bench_batch": 8,
    "t2t_bench_rounds": 5,
}

_PAPER: dict[str, Any] = {
    **_DEFAULT,
    "batch": 64,
    "bench_rounds": 10,
    "bench_keep_rates_deit_b": [1.0, 0.9, 0.8, 0.7, 0.6, 0.5],
    "batch_deit_b": 64,
    "warmup": 3,
    "side_keep_rates": [0.7, 0.5],
    "parts_keep_rates": [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3],
    "proxy_eval_images": 0,
    "eval_images": 10000,
    "parts_eval_images": 2400,
    "eval_batch": 1000,
    "oracle_images": 10000,
    "n_dataset_images": 6,
    "small_bench_batch": 256,
    "small_bench_rounds": 10,
    "train_bench_rounds": 10,
    "t2t_bench_batch": 64,
    "t2t_bench_rounds": 10,
}

_UNIT = (0.001, 1.0)

#: the notebook's settings per profile (meanings: :data:`PARAMETERS`), with the inclusive bounds of every numeric
#: setting (None: open) and the accepted values of the others, checked by params.setup before any run
PROFILES: dict[str, dict[str, Any]] = {
    "smoke": {**_COMMON, **_SMOKE},
    "default": {**_COMMON, **_DEFAULT},
    "paper": {**_COMMON, **_PAPER},
    "ranges": {
        "seed": (0, None),
        "proxy_eval_images": (0, None),
        "batch": (1, None),
        "bench_rounds": (1, None),
        "batch_deit_b": (1, None),
        "warmup": (0, None),
        "ft_keep": _UNIT,
        "oracle_keep": _UNIT,
        "hires_img_size": (1, None),
        "margin_pp": (0.0, None),
        "eval_images": (1, None),
        "parts_eval_images": (1, None),
        "eval_batch": (1, None),
        "oracle_images": (1, None),
        "oracle_img_size": (1, None),
        "photo_size": (1, None),
        "n_photos": (0, None),
        "n_dataset_images": (0, None),
        "small_bench_batch": (1, None),
        "small_bench_rounds": (1, None),
        "train_bench_rounds": (1, None),
        "t2t_bench_batch": (1, None),
        "t2t_bench_rounds": (1, None),
        "paper_eval_images": (0, None),
        "bench_keep_rates": _UNIT,
        "bench_keep_rates_deit_b": _UNIT,
        "sweep_keep_rates": _UNIT,
        "side_keep_rates": _UNIT,
        "parts_keep_rates": _UNIT,
        "finetune_seeds": (0, None),
        "paper_train_keep_rates": (0.001, 0.999),
        **paper_runs.TRAINING_RANGES,
    },
    "choices": {
        "dtype": ["fp32", "bf16"],
        "bench_models": ["deit_tiny_patch16_224", "deit_small_patch16_224", "deit_base_patch16_224"],
    },
}


def check_inputs(cfg: Any) -> None:
    """Fail before any work: fewer than 3 fine-tuning seeds, seeds or a keep rate that are not cached
    (:data:`tokenprune.training.model_recipes.FINETUNED_BASES`, smoke: 0-2; keep 0.7), or (``paper`` profile) missing
    local inputs. A proxy without cached fine-tunes passes: its fine-tuned claims are not testable here, each naming
    the fine-tunes that would decide them (:func:`tokenprune.study.evit.experiments.finetune_claims`)."""
    if len(cfg.finetune_seeds) < 3:
        raise ValueError(f"finetune_seeds: every fine-tuned configuration runs at least 3 seeds, got "
                         f"{cfg.finetune_seeds}")
    if model_recipes.has_cached_finetunes(cfg.proxy_model):
        seeds = model_recipes.finetuned_base(cfg.proxy_model)[3]
        cached = [s for s in seeds if s in model_recipes.SMOKE_FINETUNE_SEEDS] if cfg.profile == "smoke" else seeds
        if not set(cfg.finetune_seeds) <= set(cached):
            raise ValueError(f"finetune_seeds: the cached fine-tunes of profile {cfg.profile!r} have seeds "
                             f"{list(cached)}, got {cfg.finetune_seeds}")
    ft_keep = model_recipes.FINETUNE_CONDITIONS["fuse70"][0]
    if cfg.ft_keep != ft_keep:
        raise ValueError(f"ft_keep: the cached fine-tunes prune at keep {ft_keep:g}, got {cfg.ft_keep:g}")
    if cfg.profile != "paper":
        return
    for name in ("imagenet_root", "deit_s_weights"):
        value = getattr(cfg, name)
        if not value:
            raise ValueError(f"{name}: the paper profile needs it (a local path): pass -p {name} PATH; see "
                             "data/README.md for ImageNet and the README of youweiliang/evit or "
                             "facebookresearch/deit for the DeiT-S checkpoint")
        if not Path(value).expanduser().exists():
            raise FileNotFoundError(f"{name}: {value} does not exist")
    if cfg.evit_weights and not Path(cfg.evit_weights).expanduser().is_file():
        raise FileNotFoundError(f"evit_weights: {cfg.evit_weights} is not a file")
