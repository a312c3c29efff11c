"""The effects in dispute of BAT's claims, stated from the printed numbers before any data are used.

BAT's Table 1 and EViT's README print DeiT-S top-1 at shared keep rates; their differences are the gains BAT
presents as wins (:func:`paper_gap`). A claim for which the paper prints no number of its own takes the smallest of
them (:func:`smallest_printed_gap`); the trend claim takes their least-squares slope (:func:`paper_gap_slope`); the
clustering-cost claim takes what the printed column's rounding can hide (:func:`speed_margin`).
"""
from __future__ import annotations

from typing import Optional

import numpy as np

from tokenprune.study.bat.settings import DEIT_S, PAPER_KEEP
from tokenprune.study.paper_numbers import BAT, EVIT

__all__ = ["paper_gap", "printed_gaps", "smallest_printed_gap", "paper_gap_slope", "effect_vs_evit",
           "effect_ablation", "speed_margin"]

_BAT_S = BAT[DEIT_S]
_EVIT_S = EVIT[DEIT_S]["keep"]


def paper_gap(r: float) -> Optional[float]:
    """BAT minus EViT top-1 on DeiT-S as printed (BAT Table 1; EViT README), None where EViT printed none."""
    return round(_BAT_S["keep"][r]["top1"] - _EVIT_S[r]["top1"], 1) if r in _EVIT_S and r in _BAT_S["keep"] else None


def printed_gaps() -> dict[float, float]:
    """The printed BAT - EViT gaps by keep rate, where both print a row."""
    return {r: paper_gap(r) for r in PAPER_KEEP if paper_gap(r) is not None}


def smallest_printed_gap() -> float:
    """The smallest BAT - EViT gain BAT's Table 1 prints (0.1 points at rho 0.7): the smallest difference the paper
    presents as a win, the effect in dispute of a claim for which the paper prints no number of its own."""
    return min(g for g in printed_gaps().values() if g > 0)


def paper_gap_slope() -> float:
    """The least-squares slope of the printed BAT - EViT gap against the keep rate over the rates where both print
    (points per unit keep rate; negative: the gap grows as the keep rate falls), fitted as ours is."""
    g = printed_gaps()
    x, y = np.array(list(g)), np.array(list(g.values()))
    return float(((x - x.mean()) * (y - y.mean())).sum() / ((x - x.mean()) ** 2).sum())


def effect_vs_evit(r: float) -> tuple[float, str]:
    """The effect in dispute of 'BAT beats EViT at keep ``r``' (points) and where it comes from: the paper's own
    printed gap at that rate, else (EViT printed none) :func:`smallest_printed_gap`."""
    g = paper_gap(r)
    if g is not None and g > 0:
        return g, f"BAT's printed gain over EViT at keep {r:g} ({_BAT_S['keep'][r]['top1']} vs {_EVIT_S[r]['top1']})"
    return smallest_printed_gap(), f"the smallest gain over EViT that BAT's Table 1 prints (none at keep {r:g})"


def effect_ablation(cid: str) -> tuple[float, str]:
    """The effect in dispute of the ablation claim ``cid`` (points): the paper's ablation table is not in the
    sources (they quote Table 1 only), so each takes the nearest printed difference."""
    if cid == "both_vs_importance":
        r = min(printed_gaps())
        return paper_gap(r), f"BAT's printed gain over EViT (importance only) at keep {r:g}, the lowest both print"
    return smallest_printed_gap(), "the smallest gain the paper presents as a win (BAT - EViT at keep 0.7)"


def speed_margin(keep_rate: float) -> Optional[float]:
    """The margin of the clustering-cost claim, in % of the forward time: what the printed column can hide.
    BAT prints EViT's GMACs at the same keep rate, i.e. equal cost to within half its last digit, 0.05 GMACs;
    relative to the printed figure that is ``100 x 0.05 / printed`` % (1.7 % at 3.0, 2.8 % at 1.8). None where
    BAT printed no figure."""
    g = _BAT_S["keep"].get(keep_rate, {}).get("gmacs")
    return None if g is None else 100 * 0.05 / g
