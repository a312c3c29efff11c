"""What the measurement functions take as per-image values, and its conversion to numpy."""
from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

__all__ = ["ArrayLike", "as_numpy"]

#: per-image values: a numpy array, a tensor (any device, any float dtype) or a sequence of numbers
ArrayLike = np.ndarray | torch.Tensor | Sequence[float]


def as_numpy(x: ArrayLike, dtype: type | None = None) -> np.ndarray:
    """Return ``x`` as a numpy array (tensors are detached and moved to the CPU)."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu()
        if x.dtype in (torch.bfloat16, torch.float16):
            x = x.float()
        x = x.numpy()
    arr = np.asarray(x)
    return arr.astype(dtype) if dtype is not None else arr
