"""Counter-based random numbers: every number is a hash of ``(seed, image index, variable name, component)``, so
image ``i`` depends only on ``(seed, i)``, any subset of a set regenerates alone, and adding a random variable never
shifts the others (splitmix64, Steele et al. 2014)."""

from __future__ import annotations

import zlib

import numpy as np

__all__ = ["Draw"]


_U64 = np.uint64
_GOLDEN = _U64(0x9E3779B97F4A7C15)


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser on a uint64 array (wrapping arithmetic)."""
    x = x + _GOLDEN
    x = (x ^ (x >> _U64(30))) * _U64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> _U64(27))) * _U64(0x94D049BB133111EB)
    return x ^ (x >> _U64(31))


class Draw:
    """Uniform numbers ``u(seed, index, name, k)`` in [0, 1) for a batch of image indices."""

    def __init__(self, seed: int, index: np.ndarray) -> None:
        self.seed = int(seed) & 0xFFFFFFFFFFFFFFFF
        self.index = np.asarray(index).astype(np.uint64).reshape(-1)

    def uniform(self, name: str, k: int | None = None, low: float = 0.0, high: float = 1.0) -> np.ndarray:
        """``[B]`` (``k`` None) or ``[B, k]`` float64 uniform in ``[low, high)``."""
        stream = zlib.crc32(name.encode()) & 0xFFFFFFFF
        key = _splitmix64(np.array([self.seed], dtype=np.uint64) ^ np.array([stream], dtype=np.uint64))
        kk = 1 if k is None else k
        x = _splitmix64(key + self.index[:, None] * _GOLDEN) + np.arange(kk, dtype=np.uint64)[None, :]
        u = (_splitmix64(x) >> _U64(11)).astype(np.float64) * (1.0 / 9007199254740992.0)
        u = low + (high - low) * u
        return u[:, 0] if k is None else u

    def integers(self, name: str, n: int, k: int | None = None) -> np.ndarray:
        """Integers uniform in ``[0, n)``."""
        return np.minimum((self.uniform(name, k) * n).astype(np.int64), n - 1)
