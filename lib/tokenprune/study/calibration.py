"""Notebook 00: choosing the accuracy proxy by calibration criteria alone.

The papers' accuracy claims are about DeiT-S on ImageNet (196 patch tokens), where pruning matters: trained
with pruning, EViT at keep 0.7 costs 0.3 points and at keep 0.5 1.3 points, and off the shelf much more. On a
proxy where pruning barely matters (Fashion-MNIST at 28 px, 49 tokens: keep 0.7 off the shelf costs 0.05
points) no accuracy claim about pruning can be decided. So the proxy is chosen first, by criteria fixed here
before any candidate was measured, and before any claim's verdict on it was looked at:

* **C1** off the shelf, EViT (top-k by [CLS] attention, fused inattentive token, blocks 4/7/10) at keep 0.7
  costs at least 1 point of top-1, its 95 % interval above 0;
* **C2** at keep 0.5 it costs at least 3 points, its interval above 0;
* **C3** at keep 0.5, top-k beats random selection and random beats min-k, each by a 95 % interval above 0;
* **C4** fine-tuning with pruning at keep 0.7 wins back a significant part of the off-the-shelf cost: the gain
  (fine-tuned minus off-the-shelf pruned, paired over seeds and images) has its 95 % interval above 0 and is at
  least 30 % of the cost;
* **C5** the base model is good enough for its attention to mean something: at least 70 % top-1 for a
  classification proxy (stated before the cluttered candidate's training finished: DeiT-S reaches 79.8 % on
  ImageNet; on a 10-class task we ask for a model that is clearly trained, not one at its first epochs), and at
  least 80 % for the fine-grained (part) proxy, the issue's bar.

The proxy is the first candidate of :data:`CANDIDATES` (in the order written here, cheapest first) of its role
that meets every criterion; a role with no such candidate has none, and its claims say so. All measurements are
on the first 4,000 images of the candidate's test split at ``default`` (all of a smaller one; the recipe's own data,
:func:`eval_data`; the full splits would add several minutes to ``make reproduce``), paired across configurations.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Optional

import numpy as np
import pandas as pd
import torch

from tokenprune.measure import evaluation, metrics
from tokenprune.core.config import PruneConfig
from tokenprune.training import base_models as tp_models
from tokenprune.training import loop as tp_train

if TYPE_CHECKING:
    from tokenprune.study import verdicts

__all__ = ["PARAMETERS", "PROFILES", "CANDIDATES", "BARS", "FINETUNED", "CRITERIA", "measure_candidate",
           "finetune_seeds", "share_of_cost", "measure_recovery", "cost_figure", "CHOSEN", "PROXY", "judge", "choose",
           "start", "PROXY_CHOSEN", "PROXY_BAR", "FINE_GRAINED_BAR", "proxy_premise", "bar_premise", "proxy_premises"]

PARAMETERS = {
    "seed": "seed of every bootstrap and random selection",
    "candidates": "base models measured, in the order a proxy is chosen (cheapest first)",
    "eval_images": "test images per candidate (0: its full test split)",
    "eval_batch": "images per forward pass",
    "keep_rates": "keep rates of the off-the-shelf EViT sweep (0.7 and 0.5 are the criteria's)",
    "finetuned": "candidate -> name of its cached fine-tunes with pruning at keep 0.7 (C4); seeds -s<k> appended",
    "finetune_seeds": ("seeds of the cached fine-tunes used (of each candidate those it has: "
                       "base_models.FINETUNED_BASES)"),
    "dtype": "precision of the evaluations: fp32 | bf16 (autocast: faster on a CPU with bf16 units, several times "
             "slower on one without)",
}

#: candidates in the order a proxy is chosen, with their role
CANDIDATES = {"small_vit_fmnist": "classification", "small_vit_cfmnist": "classification",
              "vit_s14_fmnist_ft": "classification", "small_vit_parts": "fine-grained"}
#: C5's bar per role (top-1 %)
BARS = {"classification": 70.0, "fine-grained": 80.0}
#: the proxy of each role as notebook 00 chose it, the one home of the audits' defaults (01-03 read it): the committed
#: reports/00_proxy_calibration/results.json must record the same choice (tests/unit/test_finetuned.py checks it), so
#: a rerun of 00 that chooses otherwise fails the tests until this line and the audits' reports follow it
CHOSEN: dict[str, Optional[str]] = {"classification": "vit_s14_fmnist_ft", "fine-grained": None}
#: the classification proxy of notebooks 01-03
PROXY = CHOSEN["classification"]
#: the cached fine-tunes (C4) of each candidate that has them (base_models.FINETUNED_BASES: prefix -> base)
FINETUNED = {base: f"{prefix}_ft_fuse70" for prefix, (base, *_rest) in tp_models.FINETUNED_BASES.items()}
CRITERIA = {
    "C1": "off the shelf, EViT keep 0.7 costs >= 1 point, interval above 0",
    "C2": "off the shelf, EViT keep 0.5 costs >= 3 points, interval above 0",
    "C3": "keep 0.5: top-k > random > min-k, both intervals above 0",
    "C4": "fine-tuning at keep 0.7 wins back >= 30 % of the cost, interval above 0",
    "C5": "base model top-1 >= the role's bar (70 % classification, 80 % fine-grained)",
}

_SMOKE_CANDIDATES = [f"{n}_smoke" for n in CANDIDATES]
PROFILES: dict[str, dict[str, Any]] = {
    "smoke": {"seed": 0, "candidates": _SMOKE_CANDIDATES, "eval_images": 32, "eval_batch": 64,
              "keep_rates": [0.9, 0.7, 0.5, 0.3], "finetuned": {f"{k}_smoke": v for k, v in FINETUNED.items()},
              "finetune_seeds": [0, 1, 2], "dtype": "fp32"},
    "default": {"seed": 0, "candidates": list(CANDIDATES), "eval_images": 4000, "eval_batch": 500,
                "keep_rates": [0.9, 0.7, 0.5, 0.3], "finetuned": dict(FINETUNED), "finetune_seeds": [0, 1, 2, 3, 4],
                "dtype": "fp32"},
    "paper": {"seed": 0, "candidates": list(CANDIDATES), "eval_images": 0, "eval_batch": 1000,
              "keep_rates": [0.9, 0.7, 0.5, 0.3], "finetuned": dict(FINETUNED), "finetune_seeds": [0, 1, 2, 3, 4],
              "dtype": "bf16"},
    "ranges": {"eval_images": (0, None), "eval_batch": (1, None), "keep_rates": (0.001, 1.0), "seed": (0, None),
               "finetune_seeds": (0, None)},
    "choices": {"dtype": ["fp32", "bf16"],
                "candidates": list(CANDIDATES) + _SMOKE_CANDIDATES},
}


def _role(name: str) -> str:
    return CANDIDATES[name.removesuffix("_smoke")]


def start(cfg: Any) -> None:
    """Check the settings and seed torch and numpy."""
    for k in (0.7, 0.5):
        if k not in cfg.keep_rates:
            raise ValueError(f"keep_rates: must contain {k} (criteria C1-C3), got {cfg.keep_rates}")
    unknown = sorted(set(cfg.finetuned) - set(cfg.candidates))
    if unknown:
        raise ValueError(f"finetuned: {unknown} are not among the candidates {cfg.candidates}")
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)


def _load(name: str, cfg: Any) -> tuple[torch.nn.Module, dict, torch.Tensor, torch.Tensor]:
    model, info = tp_models.load_base_model(name, train_if_missing=cfg.profile == "smoke", progress=False)
    recipe = tp_train.TrainRecipe.from_dict(info["recipe"])
    test = tp_models.eval_data(recipe)  # the first eval_images of it, or all of a smaller split
    if 0 < cfg.eval_images < len(test):
        test = test.select(range(cfg.eval_images))
    x, y = tp_train.as_tensors(test)
    return model, info, model.tp_preprocess(x), y


def _diff(a: evaluation.Predictions, b: evaluation.Predictions, seed: int) -> dict:
    pc = evaluation.paired_comparison(a, b, seed=seed)
    return {"diff": 100 * pc["top1_diff"], "low": 100 * pc["top1_diff_low"], "high": 100 * pc["top1_diff_high"]}


def measure_candidate(name: str, cfg: Any) -> tuple[dict, dict]:
    """One candidate off the shelf: unpruned top-1, the EViT cost at each keep rate, and top-k / random / min-k at
    keep 0.5 (all fused, blocks 4/7/10), paired on the same test images. Returns the row and the predictions."""
    model, info, X, y = _load(name, cfg)
    configs = [PruneConfig(keep_rate=k, name=f"fuse@{k:g}") for k in cfg.keep_rates]
    configs += [PruneConfig(keep_rate=0.5, scorer="random", name="random@0.5"),
                PruneConfig(keep_rate=0.5, scorer="inverse:cls_attention", name="mink@0.5")]
    table, P = evaluation.prune_sweep(model, X, y, configs, batch=cfg.eval_batch, dtype=cfg.dtype, seed=cfg.seed)
    full = metrics.bootstrap_ci(P["unpruned"].correct.astype(float), seed=cfg.seed)
    row: dict[str, Any] = {"candidate": name, "role": _role(name), "task": info["recipe"]["dataset"],
                           "img_size": info["recipe"]["img_size"],
                           "tokens": int(model.patch_embed.num_patches), "test_images": int(len(y)),
                           "top1": 100 * full.estimate, "top1_low": 100 * full.low, "top1_high": 100 * full.high}
    for k in cfg.keep_rates:
        c = _diff(P["unpruned"], P[f"fuse@{k:g}"], cfg.seed)
        row.update({f"cost@{k:g}": c["diff"], f"cost@{k:g}_low": c["low"], f"cost@{k:g}_high": c["high"]})
    for lab, a, b in (("topk-random@0.5", "fuse@0.5", "random@0.5"), ("random-mink@0.5", "random@0.5", "mink@0.5")):
        c = _diff(P[a], P[b], cfg.seed)
        row.update({lab: c["diff"], f"{lab}_low": c["low"], f"{lab}_high": c["high"]})
    row["model"], row["X"], row["y"] = model, X, y  # for measure_recovery; dropped from tables
    return row, P


def finetune_seeds(name: str, cfg: Any) -> list[int]:
    """The seeds of ``cfg.finetune_seeds`` that the candidate ``name`` has cached fine-tunes of (smoke: 0-2)."""
    have = tp_models.finetuned_base(name)[3]
    if name.endswith("_smoke"):
        have = tuple(s for s in have if s in tp_models.SMOKE_FINETUNE_SEEDS)
    return [s for s in cfg.finetune_seeds if s in have]


def share_of_cost(gain: float, cost: float) -> float:
    """C4's share: the fine-tuning gain as a percentage of the off-the-shelf cost (both in points of top-1); NaN when
    pruning costs nothing (there is nothing to win back)."""
    return 100.0 * gain / cost if cost > 0 else float("nan")


def measure_recovery(row: dict, P: dict, ft_name: str, cfg: Any) -> dict:
    """C4: the cached fine-tunes ``<ft_name>-s<seed>`` (pruned at keep 0.7 during training; the seeds of
    :func:`finetune_seeds`) against the same candidate pruned off the shelf, on the same images: the gain with its
    two-stage (seeds, images) interval, and its share of the off-the-shelf cost."""
    preds = []
    for s in finetune_seeds(row["candidate"], cfg):
        suffix = "_smoke" if row["candidate"].endswith("_smoke") else ""
        m, _ = tp_models.load_base_model(f"{ft_name}_s{s}{suffix}", train_if_missing=cfg.profile == "smoke",
                                         progress=False)
        PruneConfig(keep_rate=0.7).apply(m)
        preds.append(evaluation.predict(m, row["X"], row["y"], batch=cfg.eval_batch, dtype=cfg.dtype))
    A = np.stack([p.correct.astype(float) for p in preds])
    B = P["fuse@0.7"].correct.astype(float)[None]
    r = metrics.seed_image_bootstrap_diff(A, B, seed=cfg.seed)
    return {"ft_gain@0.7": 100 * r.estimate, "ft_gain@0.7_low": 100 * r.low, "ft_gain@0.7_high": 100 * r.high,
            "ft_share_of_cost": share_of_cost(100 * r.estimate, row["cost@0.7"]),
            "ft_seeds": len(preds), "ft_top1@0.7": 100 * float(A.mean())}


def judge(row: dict) -> dict[str, Optional[bool]]:
    """Each criterion on one candidate's row: True, False, or None when not measured (C4 without fine-tunes)."""
    out: dict[str, Optional[bool]] = {
        "C1": row["cost@0.7"] >= 1.0 and row["cost@0.7_low"] > 0,
        "C2": row["cost@0.5"] >= 3.0 and row["cost@0.5_low"] > 0,
        "C3": row["topk-random@0.5_low"] > 0 and row["random-mink@0.5_low"] > 0,
        "C4": None,
        "C5": row["top1"] >= BARS[row["role"]],
    }
    if "ft_gain@0.7" in row:
        out["C4"] = bool(row["ft_gain@0.7_low"] > 0 and row["ft_share_of_cost"] >= 30.0)
    return out


def choose(rows: list[dict]) -> dict[str, Optional[str]]:
    """Per role, the first candidate (in the given order) that meets every criterion (C4 must be measured)."""
    chosen: dict[str, Optional[str]] = {}
    for row in rows:
        role = row["role"]
        chosen.setdefault(role, None)
        if chosen[role] is None and all(v is True for v in judge(row).values()):
            chosen[role] = row["candidate"]
    return chosen


def calibration_table(rows: list[dict]) -> pd.DataFrame:
    """One row per candidate: what was measured and each criterion's outcome (``not measured`` for C4 without
    cached fine-tunes)."""
    out = []
    for row in rows:
        j = judge(row)
        r = {k: v for k, v in row.items() if k not in ("model", "X", "y")}
        r.update({c: ("not measured" if v is None else ("met" if v else "missed")) for c, v in j.items()})
        r["meets_all"] = all(v is True for v in j.values())
        out.append(r)
    df = pd.DataFrame(out)
    last = list(CRITERIA) + ["meets_all"]
    return df[[c for c in df.columns if c not in last] + last]


def cost_figure(rows: list[dict], keep_rates: Any) -> Any:
    """Each candidate's off-the-shelf EViT cost (points of top-1, 95 % interval) against the keep rate, with the
    thresholds of C1 (keep 0.7) and C2 (keep 0.5) marked, and the cost left after fine-tuning at keep 0.7 where
    it was measured (C4)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    ks = sorted(float(k) for k in keep_rates)
    for row in rows:
        c = np.array([row[f"cost@{k:g}"] for k in ks])
        lo = c - np.array([row[f"cost@{k:g}_low"] for k in ks])
        hi = np.array([row[f"cost@{k:g}_high"] for k in ks]) - c
        line = ax.errorbar(ks, c, yerr=[lo, hi], marker="o", capsize=3,
                           label=f"{row['candidate']} ({row['tokens']} tokens)")
        if "ft_gain@0.7" in row:
            left = row["cost@0.7"] - row["ft_gain@0.7"]
            ax.plot([0.7], [left], marker="*", markersize=12, color=line[0].get_color(), linestyle="none",
                    label=f"{row['candidate']}: fine-tuned at 0.7")
    ax.plot([0.7], [1.0], marker="_", markersize=30, color="k", linestyle="none", label="C1 / C2 thresholds")
    ax.plot([0.5], [3.0], marker="_", markersize=30, color="k", linestyle="none")
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_xlabel("keep rate (blocks 4/7/10, fused inattentive token)")
    ax.set_ylabel("top-1 cost of pruning (points)")
    ax.set_yscale("symlog", linthresh=1.0)
    ax.invert_xaxis()
    ax.legend(fontsize=7)
    ax.set_title("off-the-shelf cost of EViT per candidate proxy")
    fig.tight_layout()
    return fig


def drop_tensors(row: dict) -> None:
    """Free a candidate's model and images once it is measured."""
    for k in ("model", "X", "y"):
        row.pop(k, None)


PROXY_CHOSEN = "proxy: notebook 00's choice"
"""The premise that a claim was measured on the classification proxy notebook 00 chose (:func:`proxy_premise`)."""
PROXY_BAR = "proxy: C5"
"""The premise that the classification proxy meets the classification bar (:func:`bar_premise`)."""
FINE_GRAINED_BAR = "fine-grained model: C5"
"""The premise that the fine-grained (SynthBirds) model meets the fine-grained bar (:func:`bar_premise`)."""


def bar_premise(name: str, role: Optional[str] = None, label: Optional[str] = None) -> "verdicts.Premise":
    """C5 as a premise of the claims measured on the base model ``name``: its test top-1 (from its checkpoint's
    sidecar, on the recipe's full test split) reaches the bar of its ``role`` (default: the candidate's own role;
    :data:`BARS`). A smoke model is judged as such and says so (its bar cannot be met in a few steps). ``label`` is
    the premise's name (default :data:`PROXY_BAR` for a classification model, :data:`FINE_GRAINED_BAR` else)."""
    from tokenprune.study import verdicts

    key = name.removesuffix("_smoke")
    role = role or CANDIDATES.get(key, "classification")
    prof, recipe = tp_models._find_recipe(name)
    info = tp_models.verify_checkpoint(*tp_models.checkpoint_paths(recipe, tp_models.checkpoint_dir(prof)))
    t = info["test"]
    top1, (lo, hi) = 100 * t["accuracy"], (100 * t["ci95"][0], 100 * t["ci95"][1])
    label = label or (PROXY_BAR if role == "classification" else FINE_GRAINED_BAR)
    return verdicts.Premise(label, bool(top1 >= BARS[role]),
                            f"{name}: {top1:.2f} % [{lo:.2f}, {hi:.2f}] top-1, bar {BARS[role]:g} %")


def proxy_premise(name: str) -> "verdicts.Premise":
    """The model ``name`` is the classification proxy notebook 00 chose by its criteria (:data:`PROXY`; a smoke model
    stands for its default model): a claim measured on another model (an override) rests on a proxy that was not
    shown to be one where pruning matters."""
    from tokenprune.study import verdicts

    key = name.removesuffix("_smoke")
    return verdicts.Premise(PROXY_CHOSEN, key == PROXY, f"measured on {name}, chosen {PROXY}")


def proxy_premises(name: str) -> list["verdicts.Premise"]:
    """The premises of a claim measured on the classification proxy ``name``: :data:`PROXY_CHOSEN` and
    :data:`PROXY_BAR`, to register on a report (``rep.add_premise``)."""
    return [proxy_premise(name), bar_premise(name, "classification")]
