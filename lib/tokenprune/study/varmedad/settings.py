"""Notebook 03's settings: every parameter with its meaning (:data:`PARAMETERS`), the profile tables
(:data:`PROFILES`), and the constants of the study fixed before any data (keep rate, locations, margins, effects in
dispute). The ``default`` fine-tuning settings are those of the cached runs,
:data:`tokenprune.training.cached_finetunes.VARMEDAD`."""
from __future__ import annotations

from tokenprune.study import paper_runs
from tokenprune.study.proxy import chosen
from tokenprune.study.paper_numbers import VARMEDAD as VM
from tokenprune.training.cached_finetunes import CONFIGS, VARMEDAD as CACHED

__all__ = ["PARAMETERS", "PROFILES", "R_MAIN", "LOCS", "R_AGGRESSIVE", "MEDAD_READINGS", "PAIRS", "JAC_RATES",
           "EQUIV_MARGIN", "TV_MIN", "JAC_SAME", "JAC_DIFFER", "FLAT_SHARE", "UNEVEN_SHARE", "T_FLAT_FROM",
           "SCALE_SAME", "SCALE_DIFFER", "PAPER_PATCHES", "MIN_SEEDS", "OVERLAP_STRIDES", "OVERLAP_TOKENS",
           "BLOCK_ALTERNATIVES", "EFFECTS", "PAPER_RECIPE"]

PARAMETERS = {
    "base_model": "trained base model of the accuracy tests and of fine-tuning (a tokenprune.training.base_models "
                  "name)",
    "s14_model": "trained ViT-S/14 with a linear head for the ranking statistics ('': none)",
    "n_eval": "test images for accuracy",
    "n_rank": "test images for the ranking statistics",
    "photo_size": "side in px of the real photos fed to the pretrained ViT-S/14",
    "photo_variants": "crops/flips per real photo (1-4)",
    "n_figure_photos": "photos in the kept-patch figure",
    "finetune_steps": "optimiser steps per fine-tuning run (0 skips fine-tuning); paper: only 0 (skip) or not, the "
                      "runs train the recipe varmedad_deit_s_imagenet100's schedule (the train_* settings limit it)",
    "finetune_batch": "images per fine-tuning step (paper: unused, the recipe's global batch; train_batch_per_process)",
    "finetune_lr": "AdamW learning rate of fine-tuning (cosine decay to a tenth of it, no warm-up; paper: unused, "
                   "the recipe's base_lr x global batch / 512)",
    "seeds": "fine-tuning seeds",
    "temperature": "Eq. 8 temperature of the main configuration (the paper gives none; > 0; paper: one of the "
                   "recipe varmedad_deit_s_imagenet100's fusion_temperature)",
    "bench_batch": "images per timed batch, DeiT-S at 224 px",
    "bench_rounds": "interleaved timing rounds",
    "bench_warmup": "untimed warm-up rounds",
    "measure_macs": "also count MACs with FlopCounterMode (the overlap models; every model at paper)",
    "dtype": "fp32 | bf16 autocast | auto (paper: bf16 where the CPU has bf16 units, else fp32) for accuracy runs "
             "(the cached fine-tunes' outputs keep the precision they were measured in, their sidecar's eval_dtype)",
    "eval_batch": "images per evaluation batch",
    "threads": "torch threads for the experiments (0: torch default; timing uses the default)",
    "falsify_keep_rates": "keep rates of the high/low-variance/random test",
    "finetune_configs": "configurations fine-tuned per seed",
    "data_root": "paper: ImageNet-100 folder (train/ and val/ class folders)",
    "deit_weights": "paper: local DeiT-S checkpoint (deit_small_patch16_224-cd65a155.pth)",
    "ft_weights_dir": "paper, optional: folder of the user's fine-tuned DeiT-S checkpoints, <config>_s<seed>.pth "
                      "(a finetune_configs name and a seed; loaded instead of training that run)",
    "seed": "seed of every random operation (subsets, bootstrap, random scorer)",
    "birds_model": "trained SynthBirds model (exact object masks) for the background-share test ('': none)",
    "n_birds": "SynthBirds test images for the background-share test",
    **paper_runs.TRAINING_PARAMETERS,
}

PROFILES = {
    "smoke": {
        "base_model": f"{chosen.AUDIT_MODEL}_smoke",
        "s14_model": "vit_s14_fmnist_linear_smoke",
        "n_eval": 96,
        "n_rank": 48,
        "photo_size": 112,
        "photo_variants": 1,
        "n_figure_photos": 2,
        "finetune_steps": 2,
        "finetune_batch": 16,
        "finetune_lr": 5e-5,
        "seeds": [0, 1],
        "temperature": 0.5,
        "bench_batch": 1,
        "bench_rounds": 1,
        "bench_warmup": 0,
        "measure_macs": False,
        "dtype": "fp32",
        "eval_batch": 96,
        "threads": 1,
        "falsify_keep_rates": [0.6],
        "finetune_configs": ["variance", "evit"],
        "data_root": None,
        "deit_weights": None,
        "ft_weights_dir": "",
        "seed": 0,
        "birds_model": f"{chosen.FINE_GRAINED}_smoke",
        "n_birds": 32,
        **paper_runs.TRAINING_SETTINGS,
    },
    # default: the audit model of notebook 00's outcome (chosen.AUDIT_MODEL: its classification proxy, or with none
    # the 16-token stand-in); 1000 of its 10,000 test images, as the sweep runs 35 configurations (the full split
    # would take over 10 min more on a 2-core CPU); every design's MDE is also stated at the full split. Its
    # fine-tunes are the cached runs of `make models` (tokenprune.training.cached_finetunes.VARMEDAD, on the full
    # test split), which the notebook loads; a base model with none cached trains none here (finetunes.missing_runs)
    "default": {
        "base_model": chosen.AUDIT_MODEL,
        "s14_model": "vit_s14_fmnist_linear",
        "n_eval": 1000,
        "n_rank": 256,
        "photo_size": 224,
        "photo_variants": 3,
        "n_figure_photos": 3,
        "finetune_steps": CACHED.steps,
        "finetune_batch": CACHED.batch,
        "finetune_lr": CACHED.lr,
        "seeds": list(CACHED.seeds),
        "temperature": CACHED.temperature,
        "bench_batch": 4,
        "bench_rounds": 4,
        "bench_warmup": 1,
        "measure_macs": True,
        "dtype": CACHED.dtype,
        "eval_batch": CACHED.eval_batch,
        "threads": 1,
        "falsify_keep_rates": [0.6, 0.4],
        "finetune_configs": list(CACHED.configs),
        "data_root": None,
        "deit_weights": None,
        "ft_weights_dir": "",
        "seed": 0,
        "birds_model": chosen.FINE_GRAINED,
        "n_birds": 600,
        **paper_runs.TRAINING_SETTINGS,
    },
    "paper": {
        "base_model": "deit_s_imagenet100",
        "s14_model": "",
        "n_eval": 5000,
        "n_rank": 512,
        "photo_size": 224,
        "photo_variants": 4,
        "n_figure_photos": 3,
        "finetune_steps": 15000,
        "finetune_batch": 256,
        "finetune_lr": 5e-5,
        "seeds": [0, 1, 2],
        "temperature": 0.5,
        "bench_batch": 64,
        "bench_rounds": 10,
        "bench_warmup": 3,
        "measure_macs": True,
        "dtype": "auto",
        "eval_batch": 256,
        "threads": 0,
        "falsify_keep_rates": [0.6, 0.4],
        "finetune_configs": list(CONFIGS),
        "data_root": None,
        "deit_weights": None,
        "ft_weights_dir": "",
        "seed": 0,
        "birds_model": chosen.FINE_GRAINED,
        "n_birds": 2400,
        **paper_runs.TRAINING_SETTINGS,
    },
    # inclusive bounds of every numeric setting (None: open), checked by params.setup before any run
    "ranges": {
        "n_eval": (1, None),
        "n_rank": (1, None),
        "photo_size": (1, None),
        "photo_variants": (1, None),
        "n_figure_photos": (0, None),
        "finetune_steps": (0, None),
        "finetune_batch": (1, None),
        "finetune_lr": (0.0, None),
        "temperature": (1e-06, None),
        "bench_batch": (1, None),
        "bench_rounds": (1, None),
        "bench_warmup": (0, None),
        "eval_batch": (1, None),
        "threads": (0, None),
        "seeds": (0, None),
        "falsify_keep_rates": (0.001, 1.0),
        "seed": (0, None),
        "n_birds": (1, None),
        **paper_runs.TRAINING_RANGES,
    },
    "choices": {
        "dtype": ["fp32", "bf16", "auto"],
        "finetune_configs": list(CONFIGS),
    },
}

R_MAIN = VM["matched"]["keep_rate"]          # 0.6: the paper's matched-compute point
LOCS = tuple(VM["locations"])                # blocks 4, 7, 10
R_AGGRESSIVE = VM["medad_r03"]["keep_rate"]  # 0.3: 'MedAD stays within 3 %'
MEDAD_READINGS = ["attention_medad", "attention_medad_midpoint", "attention_medad_global", "attention_medad_pooled"]
PAIRS = [("attention_variance", "cls_attention"), ("attention_medad", "cls_attention"),
         ("attention_variance", "attention_medad"), ("attention_cv2", "cls_attention")]
JAC_RATES = [0.9, 0.7, 0.6, 0.5, 0.3]
# +-0.2 top-1 points, stated before the data: below the smallest effect in dispute (variance - EViT 0.22, overlap -
# unpruned 0.42, variance - ToMe 0.54 points), so "equivalent within the margin" would rule those effects out
EQUIV_MARGIN = 0.002
TV_MIN = 0.1          # a tested T can change the fused token only if its Eq. 8 weights move >= 0.1 in total variation
JAC_SAME = 0.75       # kept sets sharing less than this Jaccard are different selections (chance at r = 0.6: ~0.43)
# Eq. 7's two readings keep equal-size sets (same keep rate), so a Jaccard J means they share 2J / (1 + J) of their
# kept patches. The same selection: J above JAC_SAME (more than 6/7 of the kept patches shared, at most one in seven
# swapped). Materially different: J below JAC_DIFFER, i.e. fewer patches kept by both readings than by only one of
# them (they disagree on most of what either keeps; under 2/3 of the kept patches shared). Between the two bars they
# differ in part. Both bars are for the claim's r = 0.6, where two unrelated random kept sets give J ~0.43.
JAC_DIFFER = 0.5
# Eq. 8 at T >= T_FLAT_FROM: the fused token is a plain mean when the effective share of the pruned tokens in it
# (exp(entropy of the weights) / n_pruned) is at least FLAT_SHARE (weights as even as a plain mean over 99 % of the
# pruned tokens); T visibly reweights it when the share falls below UNEVEN_SHARE (the fused token effectively draws
# on fewer than nine in ten of the pruned tokens). The share rises with T (the entropy of softmax(s / T) grows with
# T), so its smallest value over T >= T_FLAT_FROM is the one at T_FLAT_FROM, the lower end of the range the
# notebook shows as flat.
T_FLAT_FROM = 1e-2
FLAT_SHARE = 0.99
UNEVEN_SHARE = 0.9
# Eq. 8's normalisation set (the review finds it unstated): normalised over all N patch tokens at the location, the
# fused token is c times the one normalised over the pruned set P, with c = sum over P of softmax(s / T) over all N
# (the weights over P are proportional in both readings, so only the scale differs). The readings build the same
# fused token when c is at least SCALE_SAME for every input and T (within 1 %, the bar FLAT_SHARE sets for the
# weights' spread); they differ when c is below SCALE_DIFFER for every input and T (more than 10 % apart, the bar
# UNEVEN_SHARE sets). c never exceeds n_pruned / N (the pruned tokens have the lowest scores and the weights rise with
# the score), which it reaches when the scores tie.
SCALE_SAME = 0.99
SCALE_DIFFER = 0.9
PAPER_PATCHES = (224 // 16) ** 2   # DeiT-S at 224 px, patch 16: 196 patch tokens enter block 4
MIN_SEEDS = 3
OVERLAP_STRIDES = (16, 14, 12, 10, 8)   # 16: no overlap; 12: the paper's
OVERLAP_TOKENS = 18 * 18   # floor((224 - 16) / 12) + 1 = 18 per side: our derivation (the paper prints no count)
BLOCK_ALTERNATIVES = ((3, 6, 9), (5, 8, 11), (2, 6, 10))
#: the recipe every fine-tuning run of the ``paper`` profile trains (lib/tokenprune/training/recipes/), on timm's
#: training stack (:mod:`tokenprune.training.paper_training`)
PAPER_RECIPE = "varmedad_deit_s_imagenet100"

# effects in dispute, stated before any data: the paper's own difference for a direction claim, the margin for a
# threshold or equivalence claim; where the paper gives no number, the smallest difference the claim would care about
_T1 = VM["matched"]["top1"]
EFFECTS = {
    # Table 2: variance - MedAD, variance - EViT, variance - ToMe at about 2.64 GFLOPs (top-1 points)
    "variance_vs_medad": round(_T1["attention_variance"] - _T1["attention_medad"], 2),
    "variance_vs_evit": round(_T1["attention_variance"] - _T1["evit"], 2),
    "variance_vs_tome": round(_T1["attention_variance"] - _T1["tome"], 2),
    # Table 3: overlap + variance r = 0.6 - unpruned
    "overlap_vs_unpruned": VM["overlap"]["margin"],
    # 'within 3 % at r = 0.3': the distance the threshold claim is about (top-1 points)
    "medad_r03": VM["medad_r03"]["max_drop"],
    # 'MedAD can similarly lead to strong performance' (abstract): equal to variance within the equivalence margin;
    # an equivalence claim's effect in dispute is its margin (ImageNet top-1 points: on a proxy it is scaled by the
    # proxy's sensitivity factor for EViT-type claims, tokenprune.study.varmedad.designs.margin_factor)
    "medad_similar": EQUIV_MARGIN * 100,
    # no number in the paper (falsification, robustness): the equivalence margin, the smallest top-1
    # difference the study cares about (below every effect in dispute above)
    "no_number": EQUIV_MARGIN * 100,
    # the photo test (cosine of the final [CLS] feature, no labels): no number in the paper or the review; 0.01 in
    # cosine, a hundredth of the scale, as the smallest gap that would make one kept set more faithful than another
    "photo_cosine": 0.01,
    # the background-share test: the review gives no number for 'a large fraction'; one point of background share
    # (about one kept patch in a hundred) as the smallest difference from chance that statement would care about.
    # A share of patches, not ImageNet top-1 points: the proxy's sensitivity factor (which carries a tolerance in
    # ImageNet points to a proxy) does not apply to it
    "background_share": 1.0,
}
