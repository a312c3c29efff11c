"""Tolerances the whole study shares, each with the reason it has the value it has; a claim that needs one reads it
from here, so that the same words ("the same cost") mean the same number in every notebook."""
from __future__ import annotations

__all__ = ["SAME_COST_GMACS", "PRINTED_REDUCTION_PP"]

SAME_COST_GMACS = 0.1
"""Two models have "the same computational cost" when their analytic MACs differ by at most this many GMACs: the
precision to which EViT and BAT print their MAC columns (in GMACs or GFLOPs), below which neither table can show
a difference. A claim that rests on a smaller difference is decided by this tolerance, not by rounding each number to
the printed precision (which splits 3.444 and 3.477 GMACs across a rounding edge)."""

PRINTED_REDUCTION_PP = 1.0
"""A MAC reduction a paper prints in whole percent ("-36 %", "35 % fewer FLOPs") is reproduced when our analytic
reduction lies within this many percentage points of it: the text rounds to whole percent, and MAC counters differ by
up to about 1 % of the MACs (fvcore's LayerNorms, torchprofile's attention products)."""
