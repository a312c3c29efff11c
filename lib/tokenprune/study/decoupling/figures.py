"""Notebook 04's figures: the coverage gap over (block, keep rate), coverage against agreement per configuration,
and what each scorer keeps."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from tokenprune.measure.evaluation import DROPPED, KEPT
from tokenprune.study import figures
from tokenprune.study.decoupling.data import Setting
from tokenprune.study.decoupling.measurements import Measurements
from tokenprune.study.decoupling.settings import SCORER_ORDER, TRAINED, mid_block

__all__ = ["gap_heatmap", "coverage_vs_agreement", "kept_figure"]


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
        word = "part" if settings[name].parts is not None else "object"
        ax.set_title(f"{name}\n{word} coverage gap (pp)", fontsize=9)
        ax.set_xlabel("keep rate")
        ax.set_ylabel("scoring block")
    fig.suptitle("sensitivity head minus [CLS] attention (* 95% paired CI excludes 0)", fontsize=10)
    fig.tight_layout()
    return fig


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
                colours = part_colours[np.flatnonzero(vis) % len(part_colours)]
                ax.scatter(kp[vis, 0] - 0.5, kp[vis, 1] - 0.5, c=colours, s=7,
                           edgecolors="white", linewidths=0.3)
            elif S.obj_mask is not None:
                ax.contour(S.obj_mask[i].astype(float), levels=[0.5], colors="cyan", linewidths=0.6)
            ax.set_xticks([]), ax.set_yticks([])
            if i == 0:
                ax.set_title("input" if sc is None else sc, fontsize=7)
    fig.suptitle(f"{name}: kept tokens at block {mid_block(S.blocks)}, keep {low_keep:g}", fontsize=9)
    fig.tight_layout()
    return fig
