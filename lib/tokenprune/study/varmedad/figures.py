"""Notebook 03's figures and its closing table: variance against the head mean per patch, the patches each scorer
keeps on real photos, the Eq. 8 fusion weights against T, and one row per claim beside the paper's number."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Sequence

import numpy as np
import pandas as pd

from tokenprune.measure import evaluation
from tokenprune.measure.evaluation import patch_status
from tokenprune.study.figures import overlay_status
from tokenprune.study.varmedad.settings import LOCS, R_MAIN
from tokenprune.study.varmedad.sweep import evit_cfg, fs

__all__ = ["scatter_figure", "kept_patches_figure", "temperature_figure", "ledger_table"]


def scatter_figure(sc_df: pd.DataFrame, srcs: Sequence[str]):
    """Variance across heads against the head-mean attention, one point per patch, per source (log-log)."""
    import matplotlib
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, axes = plt.subplots(1, len(srcs), figsize=(4.2 * len(srcs), 3.8), squeeze=False)
    for ax, src in zip(axes[0], srcs):
        d = sc_df[(sc_df.source == src) & (sc_df["mean"] > 0) & (sc_df["variance"] > 0)]
        sns.scatterplot(data=d, x="mean", y="variance", hue="block", s=5, alpha=0.35, linewidth=0, ax=ax)
        xs = np.geomspace(d["mean"].quantile(0.01), d["mean"].max(), 20)
        c = np.median(d["variance"] / d["mean"] ** 2)
        ax.plot(xs, c * xs ** 2, "k--", lw=1, label="variance = c · mean²")
        ax.set(xscale="log", yscale="log", xlabel="head-mean [CLS] attention", ylabel="variance across heads",
               title=src)
        ax.title.set_fontsize(8)
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.legend(fontsize=7, markerscale=3)
    fig.suptitle("Variance across heads vs mean attention, one point per patch", fontsize=9)
    fig.tight_layout()
    return fig


def kept_patches_figure(subjects: SimpleNamespace, T: float, n_photos: int, photo_size: int, seed: int):
    """Which patches each scorer keeps after the last pruning block on real photos (pretrained ViT-S/14)."""
    import matplotlib.pyplot as plt

    fig_cfgs = [evit_cfg("EViT (mean)"), fs("attention_variance", T, name="variance"),
                fs("attention_medad", T, name="MedAD"), fs("attention_variance_eq6", T, name="Eq. 6 as printed"),
                fs("inverse:attention_variance", T, name="low variance"), fs("random", T, name="random")]
    vit14, names, raw = subjects.vit14, subjects.photo_names, subjects.raw_photo
    pick = [i for i, n in enumerate(names) if n.endswith("#0")][:n_photos]
    imgs = subjects.x_photo[pick]
    final_maps = [patch_status(vit14, imgs, c, seed=seed)[-1] for c in fig_cfgs]
    evaluation.UNPRUNED.apply(vit14)
    fig, axes = plt.subplots(len(pick), len(fig_cfgs) + 1, figsize=(1.7 * (len(fig_cfgs) + 1), 1.8 * len(pick)),
                             squeeze=False)
    for i, k in enumerate(pick):
        axes[i, 0].imshow(raw[k])
        axes[i, 0].set_ylabel(names[k].split("#")[0], fontsize=8)
        for j, c in enumerate(fig_cfgs):
            axes[i, j + 1].imshow(overlay_status(raw[k], final_maps[j][i].numpy()))
    for j, t in enumerate(["input"] + [c.label for c in fig_cfgs]):
        axes[0, j].set_title(t, fontsize=8)
    for ax in axes.ravel():
        ax.set_xticks([])
        ax.set_yticks([])
    locs = ", ".join(map(str, LOCS))
    fig.suptitle(f"Patches kept after block {LOCS[-1]} (r = {R_MAIN} at blocks {locs}), pretrained "
                 f"ViT-S/14, {photo_size} px: as is = kept, orange = fused into the extra token, dark = dropped",
                 fontsize=9)
    fig.tight_layout()
    return fig


def temperature_figure(tw: pd.DataFrame, T_main: float):
    """The effective share of :func:`temperature_spread` against T, the paper's range (0, 1) shaded."""
    import matplotlib.pyplot as plt
    import seaborn as sns

    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    sns.lineplot(data=tw, x="T", y="effective_share", hue="source", style="scorer", ax=ax)
    ax.axvspan(1e-2, 1, color="g", alpha=0.08, label="T = 0.01 ... 1 (the paper: T in (0, 1))")
    ax.axvline(T_main, color="k", ls=":", lw=1)
    ax.set(xscale="log", xlabel="temperature T (Eq. 8)", ylabel="effective share of pruned tokens\nin the fused token",
           title=f"Eq. 8 fusion weights at block {LOCS[0]}, r = {R_MAIN}")
    ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def ledger_table(rep) -> pd.DataFrame:
    """One row per claim: the paper's number, ours with its interval, the unit and the verdict."""
    return pd.DataFrame([{"claim": c.id, "paper": c.paper_value, "ours": c.our_value,
                          "ci": None if c.ci is None else f"[{c.ci[0]:.4g}, {c.ci[1]:.4g}]", "unit": c.unit,
                          "verdict": c.verdict} for c in rep.claims])
