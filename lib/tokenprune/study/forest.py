"""One figure per paper: its claims with a number, ours against the paper's with intervals (a forest plot).

Each panel holds the claims of one unit (GMACs, % top-1, points, x, ...): a row per claim, our estimate with its
95 % interval, the paper's number as an open diamond where it gives one; the colour says the verdict's side (for the
paper, against it, undecided, a check) and the marker the setting that decided it. Built from a results.json alone.
"""
from __future__ import annotations

import io
from typing import Any, Mapping, Optional

__all__ = ["plotted_claims", "forest_figure", "forest_png", "SIDE_COLOURS", "SETTING_MARKERS"]

SIDE_COLOURS = {"for the paper": "#1b7837", "against the paper": "#b2182b", "undecided": "#7f7f7f",
                "check": "#2166ac"}
SETTING_MARKERS = {"from the sources": "s", "analytic at paper scale": "h", "timed on this machine": "^",
                   "proxy": "o", "paper-scale run": "*"}


def _number(v: Any) -> Optional[float]:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def side_of(claim: Mapping[str, Any]) -> str:
    """Which side a claim's verdict falls on, for the colour."""
    from tokenprune.study.findings import AGAINST_THE_PAPER, CHECKS, FOR_THE_PAPER

    if claim["kind"] in CHECKS:
        return "check"
    if claim["verdict"] == FOR_THE_PAPER.get(claim["kind"]):
        return "for the paper"
    if claim["verdict"] == AGAINST_THE_PAPER.get(claim["kind"]):
        return "against the paper"
    return "undecided"


def panel_unit(unit: str) -> str:
    """The panel a unit belongs to: its words before any parenthesis (``top-1 points (fused - dropped)`` and
    ``top-1 points (oracle - own)`` share the panel ``top-1 points``)."""
    return (unit or "value").split(" (")[0].strip() or "value"


def plotted_claims(results: Mapping[str, Any]) -> dict[str, list[dict]]:
    """The claims with a numeric value of ours, by unit (in the notebook's order): each a dict of id, ours, the
    interval (or None), the paper's number (or None), side and setting."""
    panels: dict[str, list[dict]] = {}
    for c in results.get("claims", []):
        ours = _number(c.get("our_value"))
        if ours is None:
            continue
        ci = c.get("ci")
        panels.setdefault(panel_unit(c.get("unit", "")), []).append({
            "id": c["id"], "ours": ours, "ci": ci if ci and None not in ci else None,
            "paper": _number(c.get("paper_value")), "side": side_of(c), "setting": c["setting"]})
    return panels


def forest_figure(results: Mapping[str, Any]) -> Optional[Any]:
    """The forest plot of one results.json (None when no claim has a number)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D

    panels = plotted_claims(results)
    if not panels:
        return None
    heights = [max(1.2, 0.28 * len(rows) + 0.6) for rows in panels.values()]
    top = 1.3   # inches above the panels: the title and the legend
    total = sum(heights) + top
    fig, axes = plt.subplots(len(panels), 1, figsize=(9.5, total),
                             gridspec_kw={"height_ratios": heights}, squeeze=False)
    for ax, (unit, rows) in zip(axes[:, 0], panels.items()):
        ys = list(range(len(rows)))[::-1]
        for y, r in zip(ys, rows):
            colour = SIDE_COLOURS[r["side"]]
            if r["ci"]:
                ax.plot(r["ci"], [y, y], color=colour, lw=1.6)
            ax.plot(r["ours"], y, SETTING_MARKERS.get(r["setting"], "o"), color=colour, ms=6)
            if r["paper"] is not None:
                ax.plot(r["paper"], y, "D", mfc="none", mec="black", ms=7)
        ax.set_yticks(ys)
        ax.set_yticklabels([r["id"] for r in rows], fontsize=7)
        ax.set_xlabel(unit, fontsize=8)
        ax.tick_params(axis="x", labelsize=7)
        ax.grid(axis="x", alpha=0.3)
    handles = [Line2D([], [], color=c, lw=2, label=s) for s, c in SIDE_COLOURS.items()]
    handles += [Line2D([], [], ls="", marker=m, color="black", label=s) for s, m in SETTING_MARKERS.items()]
    handles += [Line2D([], [], ls="", marker="D", mfc="none", mec="black", label="the paper's number")]
    fig.suptitle(f"{results.get('title') or results.get('name')}: ours (95 % interval) against the paper's",
                 fontsize=10, y=1 - 0.12 / total, va="top")
    fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1 - 0.42 / total), ncol=4, fontsize=7,
               frameon=False)
    fig.tight_layout(rect=(0, 0, 1, 1 - top / total))
    return fig


def forest_png(results: Mapping[str, Any], dpi: int = 110) -> Optional[bytes]:
    """:func:`forest_figure` as PNG bytes (None when nothing is plotted)."""
    import matplotlib.pyplot as plt

    fig = forest_figure(results)
    if fig is None:
        return None
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return buf.getvalue()
