"""A pruning configuration as a value: scorer, reducer, keep rate, locations and options, and how it patches a model.

Training, measurement and the study all name configurations with it, so it lives in ``core`` (it needs only
:func:`tokenprune.core.patch.patch`).
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import torch

from tokenprune.core.patch import patch
from tokenprune.core.schedule import EVIT_LOCATIONS

__all__ = ["PruneConfig", "UNPRUNED"]


@dataclass(frozen=True)
class PruneConfig:
    """One pruning configuration; ``apply`` patches a model with it (in place)."""

    scorer: str = "cls_attention"
    reducer: str = "fuse_attention"
    keep_rate: float | tuple[float, ...] = 1.0
    locations: tuple[int, ...] = EVIT_LOCATIONS
    reducer_options: tuple[tuple[str, object], ...] = ()
    prop_attn: bool = False
    name: Optional[str] = None

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        opts = ",".join(f"{k}={v}" for k, v in self.reducer_options)
        return f"{self.scorer}+{self.reducer}{'(' + opts + ')' if opts else ''}@{self.keep_rate}"

    def with_(self, **changes) -> "PruneConfig":
        if "reducer_options" in changes and isinstance(changes["reducer_options"], dict):
            changes["reducer_options"] = tuple(sorted(changes["reducer_options"].items()))
        return replace(self, **changes)

    def apply(self, model: torch.nn.Module, trace: bool = False, seed: Optional[int] = 0) -> torch.nn.Module:
        return patch(model, keep_rate=self.keep_rate, locations=self.locations, scorer=self.scorer,
                     reducer=self.reducer, reducer_options=dict(self.reducer_options), trace=trace,
                     prop_attn=self.prop_attn, seed=seed)


UNPRUNED = PruneConfig(keep_rate=1.0, name="unpruned")
