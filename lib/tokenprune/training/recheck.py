"""How a cached output is rechecked against the model and code in hand, on any CPU: the one rule every cache reads.

fp32 results differ in their last bits between CPU kernels (AVX-512 and AVX2 builds of the same matrix product,
oneDNN's and MKL's instruction sets). A configuration whose output is **continuous** in its inputs (unpruned, or
pruning at indices that do not depend on the input: :data:`FIXED_INDEX_SCORERS` with a reducer that only drops or
fuses) moves by that rounding alone, about 1e-5 on a logit here: its logits are compared within
:data:`TIGHT_ATOL`, as before. A configuration with a **discrete step** (a top-k by score, ToMe's bipartite matching,
DPC-KNN's clusters) can turn a last-bit difference at a near tie into another kept or merged token, and that image's
logits then move far more (6.4e-3 for one of 64 images of ToMe at r = 13, with the same prediction, when an
AVX-512-built cache is rechecked on an AVX2-only CPU). So such a configuration is rechecked per image: an image whose
logits agree within :data:`TIGHT_ATOL` took the same discrete decisions, and at most :func:`allowed_moves` of the
rechecked images may move beyond it (a tie falls on few images). A real change (another checkpoint, another reducer
or scorer, other images) moves nearly every image and is refused; a changed ``NUMERICS_VERSION`` is another recipe
hash, hence no entry at all.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from tokenprune.core.config import PruneConfig

__all__ = ["TIGHT_ATOL", "MOVED_SHARE", "FIXED_INDEX_SCORERS", "CONTINUOUS_REDUCERS", "is_continuous",
           "allowed_moves", "Recheck", "compare"]

#: the largest absolute logit difference of an image whose computation took the same discrete decisions: the
#: tolerance the caches were always rechecked with (CPU rounding moves a logit by about 1e-5 here)
TIGHT_ATOL = 1e-3
#: the share of the rechecked images a configuration with a discrete step may move beyond :data:`TIGHT_ATOL`
#: (rounded down: 4 of 64): a near tie at a discrete step falls on an image or two; another model moves them all
MOVED_SHARE = 1 / 16
#: scorers whose kept indices do not depend on the input (seeded draws, a fixed spatial prior)
FIXED_INDEX_SCORERS = ("random", "centre")
#: reducers that keep or fuse the selected tokens without a decision of their own (fusion weights are continuous)
CONTINUOUS_REDUCERS = ("drop", "fuse_attention", "fuse_softmax")


def is_continuous(config: Optional[PruneConfig]) -> bool:
    """Whether ``config``'s output is continuous in its input (None or keep 1.0: unpruned; else a scorer of
    :data:`FIXED_INDEX_SCORERS` with a reducer of :data:`CONTINUOUS_REDUCERS`)."""
    if config is None:
        return True
    rates = config.keep_rate if isinstance(config.keep_rate, tuple) else (config.keep_rate,)
    if all(float(r) >= 1.0 for r in rates):
        return True
    return config.scorer in FIXED_INDEX_SCORERS and config.reducer in CONTINUOUS_REDUCERS


def allowed_moves(n: int, continuous: bool) -> int:
    """How many of ``n`` rechecked images may move beyond :data:`TIGHT_ATOL`: none for a continuous configuration,
    ``floor(n * MOVED_SHARE)`` for one with a discrete step."""
    return 0 if continuous else math.floor(n * MOVED_SHARE)


@dataclass(frozen=True)
class Recheck:
    """One configuration's recheck: ``n`` images, how many ``moved`` beyond :data:`TIGHT_ATOL` (``allowed`` of them
    may), the largest difference of the images that agree (``agreeing_max``) and of all (``worst``)."""

    label: str
    n: int
    continuous: bool
    moved: int
    allowed: int
    agreeing_max: float
    worst: float

    @property
    def ok(self) -> bool:
        return self.moved <= self.allowed

    def refusal(self) -> str:
        """Why the cache is refused, one sentence (empty when :attr:`ok`)."""
        if self.ok:
            return ""
        how = ("a continuous configuration: none may" if self.continuous else
               f"at most {self.allowed} may, at a near tie of its discrete step")
        return (f"{self.label} logits differ from the cache by more than {TIGHT_ATOL:g} on {self.moved} of {self.n} "
                f"images (up to {self.worst:.2e}; {how})")


def compare(label: str, fresh: np.ndarray, cached: np.ndarray, continuous: bool) -> Recheck:
    """Recheck logits ``fresh`` (images x classes, computed now) against ``cached`` (the same images' cached rows)."""
    fresh, cached = np.asarray(fresh, np.float64), np.asarray(cached, np.float64)
    if fresh.shape != cached.shape:
        raise ValueError(f"fresh: shape {fresh.shape} is not the cached rows' {cached.shape}")
    per_image = np.abs(fresh - cached).reshape(len(fresh), -1).max(-1) if len(fresh) else np.zeros(0)
    per_image = np.where(np.isfinite(per_image), per_image, np.inf)
    agree = per_image <= TIGHT_ATOL
    n = len(per_image)
    return Recheck(label=label, n=n, continuous=continuous, moved=int((~agree).sum()),
                   allowed=allowed_moves(n, continuous),
                   agreeing_max=float(per_image[agree].max()) if agree.any() else 0.0,
                   worst=float(per_image.max()) if n else 0.0)
