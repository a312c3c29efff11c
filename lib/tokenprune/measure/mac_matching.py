"""Compare pruning methods at matched compute: pick each configuration's keep rate for a MAC budget.

Methods differ in what they append (EViT: one fused token; BAT: several clusters; drop: none) and in
how much their own operator costs (``MacCount.reduction``: distances, weighted sums), so equal keep
rates are not equal compute. :func:`config_at_macs` finds, for a :class:`~tokenprune.core.config.PruneConfig`,
the uniform keep rate whose analytic MACs (``flops.analytic_macs``, reduction included unless asked
otherwise) come closest to a target, and falls back to more reduction locations when the target is
out of reach at the reducer's lowest published keep rate (:data:`MIN_KEEP_RATE`: one ToMe matching
merges at most half of the tokens at a location; the library reaches lower rates by repeating the
matching, which ToMe never does, so the matcher prefers more locations, e.g. every block, as ToMe does).
Every matched configuration comes with the MACs it actually costs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from timm.models.vision_transformer import VisionTransformer

from tokenprune.core.config import PruneConfig
from tokenprune.measure.macs import analytic_macs, bracket_keep_rate

__all__ = ["MIN_KEEP_RATE", "Matched", "config_macs", "config_at_macs", "as_matched"]

#: lowest keep rate of a reducer's published form at one location (ToMe: one matching merges at most half the
#: tokens; below it ``bipartite`` repeats the matching, which the matcher avoids by adding locations)
MIN_KEEP_RATE = {"bipartite": 0.5}


@dataclass(frozen=True)
class Matched:
    """A configuration matched to a MAC budget, with what it costs."""

    config: PruneConfig
    target_macs: int
    macs: int
    model_macs: int
    reduction_macs: int
    reachable: bool

    @property
    def rel_error(self) -> float:
        return (self.macs - self.target_macs) / self.target_macs


def config_macs(model: VisionTransformer, config: PruneConfig, keep_rate=None) -> tuple[int, int]:
    """``(total, reduction)`` analytic MACs of ``model`` patched with ``config`` (in place) at ``keep_rate``
    (default: the config's)."""
    config.apply(model)
    c = analytic_macs(model, keep_rate=keep_rate)
    return c.total, c.reduction


def _macs(model, keep_rate, include_reduction: bool) -> int:
    c = analytic_macs(model, keep_rate=keep_rate)
    return c.total if include_reduction else c.total - c.reduction


def config_at_macs(model: VisionTransformer, config: PruneConfig, target_macs: float,
                   fallback_locations: Sequence[Sequence[int]] = (), include_reduction: bool = True,
                   lo: Optional[float] = None, tol: float = 1e-4) -> Matched:
    """``config`` with the uniform keep rate whose MACs come closest to ``target_macs``.

    ``model`` is patched in place (weights are not touched; MACs do not depend on them). The search
    is a bisection on the keep rate in ``[lo, 1]`` (``lo`` defaults to :data:`MIN_KEEP_RATE` of the
    reducer, else 0.01); of the two rates bracketing the target the one with the closer count wins.
    When even ``lo`` costs more than the target, each of ``fallback_locations`` is tried in turn
    (e.g. every block); if none reaches it, the cheapest configuration is returned with
    ``reachable=False``. ``include_reduction``: match the total (model + reducer's own MACs), else
    the model MACs only (as the papers' columns count).
    """
    lo = MIN_KEEP_RATE.get(config.reducer, 0.01) if lo is None else lo
    tried = [tuple(config.locations)] + [tuple(locs) for locs in fallback_locations]
    best = None
    for locs in tried:
        cfg = config.with_(locations=locs, keep_rate=1.0)
        cfg.apply(model)
        if _macs(model, lo, include_reduction) > target_macs:
            cand = cfg.with_(keep_rate=round(lo, 6))
            if best is None or _macs(model, lo, include_reduction) < best[1]:
                best = (cand, _macs(model, lo, include_reduction))
            continue
        a, b = bracket_keep_rate(lambda r: _macs(model, r, include_reduction), target_macs, lo, tol)
        ma, mb = _macs(model, a, include_reduction), _macs(model, b, include_reduction)
        r = a if abs(ma - target_macs) < abs(mb - target_macs) else b
        return as_matched(model, cfg.with_(keep_rate=round(r, 6)), target_macs, True)
    assert best is not None
    return as_matched(model, best[0], target_macs, False)


def as_matched(model: VisionTransformer, cfg: PruneConfig, target_macs: float, reachable: bool = True) -> Matched:
    """``cfg`` as it is, described against a MAC budget (what it costs; ``model`` is patched in place)."""
    target = target_macs
    cfg.apply(model)
    c = analytic_macs(model)
    return Matched(cfg, int(target), c.total, c.total - c.reduction, c.reduction, reachable)
