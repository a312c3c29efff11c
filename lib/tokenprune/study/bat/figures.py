"""Notebook 02's figures: the MAC column, the proxy comparison and its diversity, the ablations, and the tokens
each method keeps and merges on photos (the pretrained ViT-S/14, or a small random ViT at smoke)."""
from __future__ import annotations

import copy
from typing import Any, Mapping, Sequence

import matplotlib
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
import timm
import torch

from tokenprune.core.config import PruneConfig
from tokenprune.core.patch import prune_state
from tokenprune.measure import evaluation
from tokenprune.measure import mac_matching as matching
from tokenprune.measure import macs as flops
from tokenprune.measure.trend import Trend
from tokenprune.study import figures as viz
from tokenprune.study.bat.settings import DEIT_S

__all__ = ["plot_mac_column", "plot_proxy", "plot_ablations", "figure_model", "square", "photo_batch",
           "kept_and_merged", "plot_bat_clusters"]


def plot_mac_column(macs: pd.DataFrame, mac_match: pd.DataFrame) -> plt.Figure:
    """Left: DeiT-S model MACs per schedule vs keep rate, with BAT's printed column and the authors' log
    counter; right: the operator's own share of the MACs (what the column leaves out)."""
    is_s = macs.model == DEIT_S
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    sns.lineplot(data=macs[is_s & (macs.method != "unpruned")], x="keep_rate", y="gmacs_model", hue="method",
                 marker="o", ax=axes[0])
    axes[0].scatter(mac_match.keep_rate, mac_match.paper, marker="x", color="k", s=50, zorder=5, label="BAT printed")
    axes[0].scatter(mac_match.keep_rate, mac_match.authors_log, marker="+", color="crimson", s=70, zorder=5,
                    label="authors' log counter")
    axes[0].set(xlabel="keep rate rho", ylabel="GMACs (transformer only)", title="DeiT-S 224 px: MAC column")
    axes[0].legend(fontsize=7)
    sub2 = macs[is_s & macs.reducer.isin(["merge_dpcknn", "merge_dpcknn_budget", "fuse_attention"])]
    sns.barplot(data=sub2, x="keep_rate", y="reduction_share", hue="method", ax=axes[1])
    axes[1].yaxis.set_major_formatter(matplotlib.ticker.PercentFormatter(1.0))
    axes[1].set(xlabel="keep rate rho", ylabel="operator's own MACs / total", title="what the column leaves out")
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    return fig


def _errorbar(ax: Any, x: Any, grp: pd.DataFrame, y: str, **kw: Any) -> None:
    ax.errorbar(x, grp[y], yerr=[grp[y] - grp[f"{y}_low"], grp[f"{y}_high"] - grp[y]], marker="o", ms=4, capsize=2,
                **kw)


def plot_proxy(sweep: pd.DataFrame, gaps: pd.DataFrame, trend: Trend, keep_rates: Sequence[float],
               div_block: int) -> tuple[plt.Figure, plt.Figure]:
    """Top-1 and agreement at matched MACs and the BAT - EViT gap with its slope; the diversity of the kept set."""
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    plot = sweep[sweep.method != "unpruned"]
    base_row = sweep[sweep.config == "unpruned"].iloc[0]
    for ax, y in zip(axes[:2], ("top1", "agreement")):
        for name, grp in plot.groupby("method"):
            grp = grp.sort_values("mmacs")
            _errorbar(ax, grp.mmacs, grp, y, label=name)
        ax.axhline(base_row[y], color="k", ls="--", lw=0.8, label="unpruned")
        ax.set(xlabel="MMACs (model + operator)", ylabel=y, title=f"{y} at matched MACs")
        ax.legend(fontsize=7)
    axes[2].errorbar(gaps.keep_rate, gaps.top1_diff * 100, yerr=[(gaps.top1_diff - gaps.top1_diff_low) * 100,
                     (gaps.top1_diff_high - gaps.top1_diff) * 100], marker="o", capsize=3, label="BAT - EViT (paired)")
    xs = np.array(keep_rates)
    axes[2].plot(xs, (np.mean(trend.means) + trend.slope * (xs - xs.mean())) * 100, "k--", lw=1,
                 label=f"slope {trend.slope * 100:+.2f} pp/unit [{trend.low * 100:+.2f}, {trend.high * 100:+.2f}]")
    axes[2].axhline(0, color="grey", lw=0.8)
    axes[2].invert_xaxis()
    axes[2].set(xlabel="EViT keep rate of the MAC budget", ylabel="top-1 difference (pp)", title="BAT - EViT gap")
    axes[2].legend(fontsize=7)
    fig.tight_layout()

    fig2, axes = plt.subplots(1, 2, figsize=(11, 3.8))
    for ax, y in zip(axes, ("cosine_distance", "effective_rank")):
        for name, grp in plot.groupby("method"):
            grp = grp.sort_values("budget_keep_rate")
            _errorbar(ax, grp.budget_keep_rate, grp, y, label=name)
        ax.axhline(base_row[y], color="k", ls="--", lw=0.8, label="unpruned")
        ax.invert_xaxis()
        ax.set(xlabel="EViT keep rate of the MAC budget", ylabel=y.replace("_", " "),
               title=f"tokens leaving block {div_block}: {y.replace('_', ' ')}")
        ax.legend(fontsize=7)
    fig2.tight_layout()
    return fig, fig2


def plot_ablations(abl: pd.DataFrame) -> plt.Figure:
    """Top-1 with its interval for every ablation, sorted within each budget, against the unpruned model."""
    ab = abl[abl.config != "unpruned"].copy()
    fig, ax = plt.subplots(figsize=(9, 0.35 * len(ab) + 1.5))
    ab["label"] = ab.method + "  (keep " + ab.budget_keep_rate.map(lambda v: f"{v:g}") + ")"
    ab = ab.sort_values(["budget_keep_rate", "top1"])
    ax.errorbar(ab.top1, np.arange(len(ab)), xerr=[ab.top1 - ab.top1_low, ab.top1_high - ab.top1], fmt="o", capsize=2)
    ax.set_yticks(np.arange(len(ab)))
    ax.set_yticklabels(ab.label, fontsize=7)
    ax.axvline(abl[abl.config == "unpruned"].top1.iloc[0], color="k", ls="--", lw=0.8, label="unpruned")
    ax.set(xlabel="top-1 (95% bootstrap CI)", title="ablations at matched MACs (off the shelf)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def figure_model(kind: str, img_size: int) -> tuple[torch.nn.Module, tuple, tuple]:
    """The model of the photo figures with its normalisation: the pretrained ViT-S/14 (``vit_s14``) or a
    small random ViT that exercises the same code path in seconds (``random_tiny``)."""
    if kind == "vit_s14":
        from tokenprune.data import pretrained

        return pretrained.load_vit_s14(img_size=img_size), pretrained.VIT_S14_MEAN, pretrained.VIT_S14_STD
    return timm.create_model("vit_tiny_patch16_224", img_size=img_size).eval(), (0.5, 0.5, 0.5), (0.5, 0.5, 0.5)


def square(img: np.ndarray, size: int) -> torch.Tensor:
    """The centre square of ``img`` (H x W x 3, uint8) resized to ``size`` (antialiased bilinear), 3 x S x S float."""
    h, w = img.shape[:2]
    s = min(h, w)
    crop = img[(h - s) // 2:(h - s) // 2 + s, (w - s) // 2:(w - s) // 2 + s]
    t = torch.from_numpy(np.array(crop)).permute(2, 0, 1)[None].float()
    return torch.nn.functional.interpolate(t, size=(size, size), mode="bilinear", antialias=True,
                                           align_corners=False)[0]


def photo_batch(photos: Mapping[str, np.ndarray], names: Sequence[str], size: int, mean: tuple,
                std: tuple) -> tuple[torch.Tensor, list]:
    """The normalised batch of the named photos and the squared images as shown (uint8)."""
    raw = torch.stack([square(photos[n], size) for n in names])
    x = (raw / 255 - torch.tensor(mean).view(1, 3, 1, 1)) / torch.tensor(std).view(1, 3, 1, 1)
    return x, [raw[i].permute(1, 2, 0).clamp(0, 255).byte().numpy() for i in range(len(names))]


def kept_and_merged(fmodel: torch.nn.Module, x: torch.Tensor, shown: list, names: Sequence[str],
                    methods: Mapping[str, PruneConfig]) -> tuple[plt.Figure, torch.Tensor]:
    """Each method at the MAC budget of EViT keep 0.5: which patches are kept, merged or dropped after block 10
    (the last location at or before it). Returns the figure and BAT's source map there."""
    fprobe = copy.deepcopy(fmodel)
    target = flops.analytic_macs(PruneConfig(reducer="fuse_attention", keep_rate=0.5).apply(fprobe)).total
    every = [tuple(range(1, len(fmodel.blocks) + 1))]
    fig_methods = {name: (c.with_(keep_rate=0.5) if name == "EViT (fusion)" else
                          matching.config_at_macs(fprobe, c, target, fallback_locations=every).config)
                   for name, c in methods.items()}
    last_maps, bat_sources = [], None
    for name, c in fig_methods.items():
        maps = evaluation.patch_status(fmodel, x, c)
        st = prune_state(fmodel)
        idx = [h["block"] for h in st.history]
        li = max(i for i, b in enumerate(idx) if b <= 9) if any(b <= 9 for b in idx) else len(idx) - 1
        last_maps.append(maps[li].numpy())
        if name == "BAT":
            bat_sources = st.history[li]["source"]
    fig = viz.status_grid(shown, last_maps, row_titles=list(names),
                          col_titles=[f"{n}\nkeep {c.keep_rate:.2f} @ "
                                      f"{','.join(map(str, c.locations)) if len(c.locations) < 5 else 'every block'}"
                                      for n, c in fig_methods.items()])
    return fig, bat_sources


def plot_bat_clusters(fmodel: torch.nn.Module, src: torch.Tensor, shown: list, names: Sequence[str],
                      size: int) -> plt.Figure:
    """BAT after block 10: every token that stands for several patches (a cluster, or an earlier merge) in
    its own colour, attentive tokens as they are."""
    gh, gw = fmodel.patch_embed.grid_size
    p0 = fmodel.num_prefix_tokens
    fig, axes = plt.subplots(1, len(names), figsize=(2.6 * len(names), 2.8), squeeze=False)
    cmap = plt.get_cmap("tab10")
    rows = np.minimum((np.arange(size) * gh) // size, gh - 1)
    cols = np.minimum((np.arange(size) * gw) // size, gw - 1)
    for i, n in enumerate(names):
        s_i = src[i, p0:, p0:].float()  # [tokens, patches]
        label = torch.full((gh * gw,), -1)
        for t in range(s_i.shape[0]):
            members = s_i[t] > 0
            if members.sum() > 1:
                label[members] = t
        img = shown[i].astype(float)
        lab = label.view(gh, gw).numpy()[rows[:, None], cols[None, :]]
        ids = [t for t in np.unique(lab) if t >= 0]
        for j, t in enumerate(ids):
            msk = lab == t
            img[msk] = 0.35 * img[msk] + 0.65 * np.array(cmap(j % 10)[:3]) * 255
        axes[0, i].imshow(img.astype(np.uint8))
        axes[0, i].set_title(f"{n}: {len(ids)} merged groups", fontsize=8)
        axes[0, i].axis("off")
    fig.suptitle("BAT after block 10: every token that stands for several patches (a cluster) in its own colour",
                 fontsize=9)
    fig.tight_layout()
    return fig
