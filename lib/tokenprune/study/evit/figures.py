"""The figures of notebook 01: which tokens are kept (Figure 3), MACs, throughput and accuracy against MACs."""
from __future__ import annotations

from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import torch

from tokenprune.core.config import PruneConfig
from tokenprune.core.patch import patch
from tokenprune.data import datasets as data
from tokenprune.data import pretrained, synthetic
from tokenprune.measure import evaluation
from tokenprune.study import figures as viz
from tokenprune.study.paper_numbers import EVIT
from tokenprune.study.proxy.audit_model import EvaluatedModel, correct_matrix

__all__ = ["centre_square", "masks_figure_photos", "masks_figure_datasets", "figure_macs", "figure_throughput",
           "figure_accuracy_vs_macs", "figure_throughput_vs_accuracy", "figure_finetune_seeds"]

_DEIT_S = EVIT["deit_small_patch16_224"]

_AFTER = ["after block 4", "after block 7", "after block 10"]


def centre_square(img: np.ndarray, size: int) -> np.ndarray:
    """The centre square of ``img`` (``[H, W, 3]`` uint8) resized to ``size`` (bilinear, antialiased)."""
    h, w = img.shape[:2]
    s = min(h, w)
    crop = img[(h - s) // 2:(h - s) // 2 + s, (w - s) // 2:(w - s) // 2 + s]
    t = torch.from_numpy(np.array(crop)).permute(2, 0, 1)[None].float()  # a writable copy
    t = torch.nn.functional.interpolate(t, size=(size, size), mode="bilinear", antialias=True, align_corners=False)
    return t[0].permute(1, 2, 0).round().clamp(0, 255).byte().numpy()


def masks_figure_photos(n_photos: int, size: int):
    """Kept and fused patches after blocks 4/7/10 at keep 0.7 on real photos, pretrained ViT-S/14."""
    photos = data.sample_photos()
    names = list(photos)[:n_photos]
    crops = [centre_square(photos[n], size) for n in names]
    vit_photo = pretrained.load_vit_s14(img_size=size)
    xp = torch.from_numpy(np.stack(crops)).permute(0, 3, 1, 2).float() / 255
    mean = torch.tensor(pretrained.VIT_S14_MEAN).view(1, 3, 1, 1)
    xp = (xp - mean) / torch.tensor(pretrained.VIT_S14_STD).view(1, 3, 1, 1)
    maps_photo = evaluation.patch_status(vit_photo, xp, PruneConfig(keep_rate=0.7))
    fig = viz.status_grid(crops, [m.numpy() for m in maps_photo], row_titles=names, col_titles=_AFTER, scale=1.8)
    fig.suptitle("EViT keep 0.7 on the pretrained ViT-S/14 (off the shelf); orange: fused", fontsize=9, y=1.01)
    return fig


def masks_figure_datasets(model: EvaluatedModel, parts_model: torch.nn.Module, xb: torch.Tensor, yb: torch.Tensor,
                          nd: int):
    """Kept and fused patches after blocks 4/7/10 at keep 0.7 on ``nd`` SynthBirds and Fashion-MNIST images, each
    through its own small ViT (``model.base`` is left unpruned)."""
    rows_img, rows_maps, rows_titles = [], [[], [], []], []
    for model_, x_u8, titles in (
            (parts_model, xb[:nd], ["SynthBirds\n" + synthetic.CLASS_NAMES[int(i)].replace("_", " ") for i in yb[:nd]]),
            (model.base, model.x_raw[:nd], [f"F-MNIST\n{data.FASHION_MNIST_CLASSES[int(i)]}" for i in model.y[:nd]])):
        ms = evaluation.patch_status(model_.cpu(), model_.tp_preprocess(x_u8), PruneConfig(keep_rate=0.7))
        for i in range(len(x_u8)):
            img = x_u8[i].permute(1, 2, 0).numpy()
            rows_img.append(np.repeat(img, 3, -1) if img.shape[-1] == 1 else img)
            for l_ in range(3):
                rows_maps[l_].append(ms[l_][i].numpy())
        rows_titles += titles
    patch(model.base, keep_rate=1.0)
    fig = viz.status_grid(rows_img, rows_maps, row_titles=rows_titles, col_titles=_AFTER, scale=1.5)
    fig.suptitle("EViT keep 0.7 on the small ViTs (off the shelf); orange: fused", fontsize=9, y=1.01)
    return fig


def figure_macs(macs: pd.DataFrame):
    fig, ax = plt.subplots(figsize=(6, 3.6))
    sns.lineplot(data=macs, x="keep_rate", y="gmacs", hue="model", style="reducer", marker="o", ax=ax)
    paper_pts = macs.dropna(subset=["paper_gmacs"])
    ax.scatter(paper_pts.keep_rate, paper_pts.paper_gmacs, marker="x", color="k", s=40, zorder=5, label="paper")
    ax.set(xlabel="keep rate", ylabel="GMACs (224 px, batch 1)", yscale="log", title="EViT MACs: ours vs paper")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def figure_throughput(speed: pd.DataFrame, cfg: Any, device: str):
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    sns.lineplot(data=speed, x="gmacs", y="img_per_s", hue="model", marker="o", ax=axes[0])
    axes[0].set(xlabel="GMACs",
                ylabel=f"images/s ({device}, batch {cfg.batch}, DeiT-B {cfg.batch_deit_b}, {cfg.dtype})",
                title="throughput vs MACs")
    sns.lineplot(data=speed, x="keep_rate", y="speedup_over_mac_ratio", hue="model", marker="o", ax=axes[1])
    axes[1].axhline(1.0, color="k", lw=0.8, ls="--")
    axes[1].set(xlabel="keep rate", ylabel="speedup / MAC ratio", title="how much of the MAC saving becomes speed")
    fig.tight_layout()
    return fig


def figure_accuracy_vs_macs(model: EvaluatedModel, cfg: Any, sweep, ft_table, mq_table, loc_out):
    """Top-1 and agreement against the proxy's GMACs: the sweep, the cached fine-tunes (mean +- seed sd; none on a
    proxy with no cached fine-tunes), the other selections and the MAC-matched locations."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    sw = sweep[sweep.config != "unpruned"].copy()
    sw["selection"] = ["fused" if r == "fuse_attention" else "dropped" for r in sw.reducer]
    for ax, metric_ in zip(axes, ("top1", "agreement")):
        for sel_, g in sw.groupby("selection"):
            g = g.sort_values("gmacs")
            ax.errorbar(g.gmacs, g[metric_], yerr=[g[metric_] - g[f"{metric_}_low"], g[f"{metric_}_high"] - g[metric_]],
                        marker="o", ms=4, capsize=2, label=f"EViT {sel_} (off the shelf)")
        ax.scatter([model.gmacs], [100 * model.full.correct.mean() if metric_ == "top1" else 100], marker="*", s=120,
                   c="k",
                   zorder=5, label="unpruned")
        for name, mk in (("fuse70_warm", "D"), ("fuse70", "s"), ("drop70", "v")):
            if name not in set(ft_table.condition):   # a proxy with no cached fine-tunes
                continue
            r = ft_table.set_index("condition").loc[name]
            ax.errorbar([r.gmacs], [r[metric_]], yerr=[[r[f"{metric_}_seed_sd"]], [r[f"{metric_}_seed_sd"]]], marker=mk,
                        ms=6, ls="none", capsize=3, label=f"fine-tuned: {name} (± seed sd)")
        for n, mk in (("random", "x"), ("mink", "1")):
            r = mq_table[mq_table["mask"] == n]
            ax.scatter(r.gmacs, r[metric_], marker=mk, s=50, label=f"{n} selection")
        ax.scatter(loc_out.gmacs[1:], loc_out[metric_][1:], marker="P", s=40, alpha=0.6,
                   label="locations (matched MACs)")
        what = "top-1" if metric_ == "top1" else "agreement"
        ax.set(xlabel=f"GMACs ({model.name}, {model.img_size} px, one image)",
               ylabel=f"{'top-1' if metric_ == 'top1' else 'agreement with unpruned'} (%)",
               title=f"{what} vs MACs ({model.name}, n={len(model.y)})")
    axes[0].legend(fontsize=6)
    fig.tight_layout()
    return fig


def figure_throughput_vs_accuracy(small_speed: pd.DataFrame, speed: pd.DataFrame, cfg: Any):
    """The small ViT's images/s against its top-1; DeiT-S's images/s on this machine against the paper's top-1."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    ax = axes[0]
    ax.plot(small_speed.img_per_s, small_speed.top1, "o-")
    for r in small_speed.itertuples():
        ax.annotate(f"keep {r.keep_rate:g}", (r.img_per_s, r.top1), fontsize=6, xytext=(3, 3),
                    textcoords="offset points")
    ax.set(xlabel=f"images/s on this CPU (batch {cfg.small_bench_batch}, fp32)", ylabel="top-1 (%)",
           title=f"{cfg.proxy_model}: throughput vs accuracy (ours)")
    ds_ = speed[speed.model == "deit_small_patch16_224"]
    ax = axes[1]
    if len(ds_):
        accs = [_DEIT_S["baseline"]["top1"] if r == 1.0 else _DEIT_S["keep"][r]["top1"] for r in ds_.keep_rate]
        ax.plot(ds_.img_per_s, accs, "s-", color="C3")
        for r, a_ in zip(ds_.itertuples(), accs):
            ax.annotate(f"keep {r.keep_rate:g}", (r.img_per_s, a_), fontsize=6, xytext=(3, 3),
                        textcoords="offset points")
    ax.set(xlabel=f"DeiT-S images/s on this CPU (batch {cfg.batch}, {cfg.dtype}; §3)",
           ylabel="ImageNet top-1 (%), paper",
           title="DeiT-S: our throughput, the paper's accuracy")
    fig.tight_layout()
    return fig


def figure_finetune_seeds(model: EvaluatedModel, cfg: Any, finetuned: dict, preds: dict):
    """Top-1 of every fine-tuned seed per condition (mean +- sd), against the models before fine-tuning (those alone,
    the title saying so, on a proxy with no cached fine-tunes)."""
    fig, ax = plt.subplots(figsize=(7, 3.4))
    for name in finetuned:
        vals = 100 * correct_matrix(finetuned[name]).mean(1)
        ax.scatter([name] * len(vals), vals, s=25)
        ax.errorbar([name], [vals.mean()], yerr=[[vals.std(ddof=1)], [vals.std(ddof=1)]], fmt="_", color="k", ms=20,
                    capsize=4)
    ax.axhline(100 * model.full.correct.mean(), color="k", ls="--", lw=0.8, label="before fine-tuning (unpruned)")
    ax.axhline(100 * preds[f"fuse@{cfg.ft_keep:g}"].correct.mean(), color="C3", ls=":", lw=0.8,
               label=f"before fine-tuning (fuse@{cfg.ft_keep:g})")
    ax.set(ylabel="top-1 (%)", title=f"cached fine-tunes of {model.name}, keep {cfg.ft_keep:g}: seeds "
                                     f"{list(cfg.finetune_seeds)} (mean ± sd)" if finetuned else
           f"{model.name} has no cached fine-tunes: before fine-tuning only")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
