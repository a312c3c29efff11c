"""Content-free spatial prior scorers: the baselines a coverage number must beat.

A scorer that covers object parts well may only be exploiting where objects usually are. Two
baselines at the same keep rate make this visible (used by the decoupling notebook next to
``random``, :func:`tokenprune.core.scorers.random_scores`):

* ``centre`` -- the centre prior: a patch's score is minus the Euclidean distance of its centre from the
  image centre on the patch grid, so the kept set is the disc of patches around the centre (ties, e.g. the
  four central patches of an even grid, go to the lower raster index, as everywhere in
  :func:`tokenprune.core.scorers.select_topk`).

The grid is read from ``ctx.extras["grid"]`` (``(rows, cols)``) when present, else taken as the square
grid of the prunable tokens (which must then be a perfect square). It applies to the original patch
tokens only, i.e. to the first reduction location.
"""
from __future__ import annotations

import math

import torch

from tokenprune.core.scorers import TokenContext, register_scorer

__all__ = ["grid_of", "centre_distance", "centre_prior"]


def grid_of(ctx: TokenContext) -> tuple[int, int]:
    """The patch grid ``(rows, cols)`` of the prunable tokens of ``ctx``."""
    n = ctx.num_prunable
    grid = ctx.extras.get("grid")
    if grid is not None:
        rows, cols = (int(g) for g in grid)
        if rows * cols != n:
            raise ValueError(f"extras['grid']: {rows}x{cols} does not hold the {n} prunable tokens (after a merge?)")
        return rows, cols
    side = math.isqrt(n)
    if side * side != n:
        raise ValueError(f"centre prior: {n} prunable tokens are not a square grid; pass extras['grid'] = (rows, cols)")
    return side, side


def centre_distance(rows: int, cols: int) -> torch.Tensor:
    """Distance of each patch centre from the image centre, in patches, raster order ``[rows * cols]``."""
    r = torch.arange(rows, dtype=torch.float32) + 0.5 - rows / 2
    c = torch.arange(cols, dtype=torch.float32) + 0.5 - cols / 2
    return (r[:, None] ** 2 + c[None, :] ** 2).sqrt().flatten()


@register_scorer("centre",
                 reference="centre prior baseline (decoupling notebook): minus the distance to the image centre")
def centre_prior(ctx: TokenContext) -> torch.Tensor:
    """Minus the distance of each patch from the image centre, the same for every image."""
    rows, cols = grid_of(ctx)
    return (-centre_distance(rows, cols)).to(ctx.x.device).expand(ctx.x.shape[0], -1)
