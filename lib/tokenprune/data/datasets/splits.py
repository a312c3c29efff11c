"""Fixed, seeded splits: stratified hold-outs, class-balanced subsets, and rows taken from column tables."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["SPLITS", "stratified_split", "class_balanced_indices", "check_fraction", "take_rows", "split_train_val"]

#: The three splits every loader returns, in this order.
SPLITS = ("train", "val", "test")


def stratified_split(labels: Sequence[int] | np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Split indices into (kept, held-out), stratified by label, deterministic in ``seed``.

    Each class ``c`` with ``n_c`` members gives ``floor(fraction * n_c + 0.5)`` held-out
    members, drawn uniformly with ``numpy.random.default_rng(seed)``. Both index arrays are
    sorted, so the original order of the rows is kept inside each part.
    """
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"stratified_split: fraction must be in [0, 1), got {fraction}")
    labels = np.asarray(labels, dtype=np.int64)
    n = labels.shape[0]
    if n == 0 or fraction == 0.0:
        return np.arange(n), np.arange(0)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(n)
    order = perm[np.argsort(labels[perm], kind="stable")]  # grouped by class, shuffled within
    classes, starts, counts = np.unique(labels[order], return_index=True, return_counts=True)
    n_held = np.floor(fraction * counts + 0.5).astype(np.int64)
    group = np.repeat(np.arange(len(classes)), counts)
    rank = np.arange(n) - starts[group]
    held = rank < n_held[group]
    return np.sort(order[~held]), np.sort(order[held])


def class_balanced_indices(labels: Sequence[int] | np.ndarray, n: int, seed: int) -> np.ndarray:
    """``n`` row indices with every class as equally represented as it can be: class counts differ by at most one
    (a class with fewer rows gives all of them and the others fill in), members drawn uniformly with
    ``numpy.random.default_rng(seed)``, returned sorted (the rows keep their order). ``n`` at least the number of
    rows gives all of them. For subsets of class-sorted releases (CUB's test split lists class 1 first), where the
    first ``n`` rows would cover only the first classes."""
    labels = np.asarray(labels, dtype=np.int64)
    total = labels.shape[0]
    if n < 0:
        raise ValueError(f"n: must be >= 0, got {n}")
    if n >= total:
        return np.arange(total)
    rng = np.random.default_rng(seed)
    perm = rng.permutation(total)
    order = perm[np.argsort(labels[perm], kind="stable")]  # grouped by class, shuffled within
    classes, starts, counts = np.unique(labels[order], return_index=True, return_counts=True)
    group = np.repeat(np.arange(len(classes)), counts)
    rank = np.arange(total) - starts[group]  # position of each row within its class
    # take rows round by round: every class's 1st member, then every class's 2nd, ...; within a round, classes in a
    # seeded random order, so the classes that get one more member than the rest are drawn, not the lowest labels
    class_order = rng.permutation(len(classes))
    key = rank * len(classes) + np.argsort(class_order)[group]
    return np.sort(order[np.argsort(key, kind="stable")[:n]])


def check_fraction(name: str, value: float) -> float:
    """``value`` as a float, refused unless it lies in [0, 1) (``name`` is the argument named in the message)."""
    if not 0.0 <= float(value) < 1.0:
        raise ValueError(f"{name} must be in [0, 1), got {value!r}")
    return float(value)


def take_rows(columns: Mapping[str, Any], index: np.ndarray) -> dict[str, Any]:
    """Rows ``index`` of every column (numpy arrays or lists)."""
    out: dict[str, Any] = {}
    for key, col in columns.items():
        if isinstance(col, np.ndarray):
            out[key] = col[index]
        else:
            out[key] = [col[i] for i in index]
    return out


def split_train_val(
    columns: Mapping[str, Any], labels: np.ndarray, val_fraction: float, seed: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The rows of ``columns`` split into (train, val) by :func:`stratified_split` of ``labels``."""
    keep, held = stratified_split(labels, val_fraction, seed)
    return take_rows(columns, keep), take_rows(columns, held)
