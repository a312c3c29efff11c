"""A training run in parts: the state at the end of an epoch, saved and restored, so that a run cut by a time limit
continues where it stopped and ends with the weights an uninterrupted run gives.

:func:`tokenprune.training.loop.train` saves the state after every epoch when given a path (the weights and the
optimiser's moments, the step, the history, and every random generator the run draws from: torch's global one
(stochastic depth), the loop's own (crops, flips), NumPy's and Python's (timm's Mixup / CutMix and random erasing));
given a deadline, it stops after the epoch that would let the next one run past it and raises :class:`TrainingPaused`.
Started again with the same path, it restores the state and goes on from the next epoch. The state names its recipe's
hash and is refused for any other recipe.
"""
from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any, Optional

import numpy as np
import torch

__all__ = ["TrainingPaused", "state_path", "save_state", "load_state", "rng_state", "restore_rng"]


class TrainingPaused(RuntimeError):
    """A run stopped by its deadline at an epoch boundary (or, ``steps`` = (done, of), inside the next epoch); its
    state is saved at ``path``."""

    def __init__(self, name: str, epochs_done: int, epochs: int, path: Path,
                 steps: Optional[tuple[int, int]] = None) -> None:
        where = (f"after epoch {epochs_done} of {epochs}" if steps is None else
                 f"in epoch {epochs_done + 1} of {epochs}, after step {steps[0]} of {steps[1]}")
        super().__init__(f"{name}: paused {where} (state in {path.name}); run the same command again to continue")
        self.name, self.epochs_done, self.epochs, self.path, self.steps = name, epochs_done, epochs, path, steps


def state_path(cache_dir: str | os.PathLike, name: str, recipe_hash: str) -> Path:
    """Where a run's state lies between its parts: ``<cache_dir>/partial/<name>-<hash>.state.pt`` (not committed)."""
    return Path(cache_dir) / "partial" / f"{name}-{recipe_hash}.state.pt"


def rng_state(generator: torch.Generator) -> dict[str, Any]:
    """Every generator a training run draws from, as a state to restore."""
    return {"torch": torch.get_rng_state(), "generator": generator.get_state(), "numpy": np.random.get_state(),
            "python": random.getstate(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None}


def restore_rng(state: dict[str, Any], generator: torch.Generator) -> None:
    torch.set_rng_state(state["torch"])
    generator.set_state(state["generator"])
    np.random.set_state(state["numpy"])
    random.setstate(state["python"])
    if state.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_state(path: Path, state: dict[str, Any]) -> None:
    """Write ``state`` atomically (a temporary file renamed over the old state)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(state, tmp)
    os.replace(tmp, path)


def load_state(path: Optional[Path], recipe_hash: str) -> Optional[dict[str, Any]]:
    """The saved state at ``path`` (None: no path, or nothing saved); ValueError when it is another recipe's."""
    if path is None or not path.is_file():
        return None
    state = torch.load(path, map_location="cpu", weights_only=False)
    if state.get("recipe_hash") != recipe_hash:
        raise ValueError(f"resume: {path} holds the state of recipe {state.get('recipe_hash')}, not {recipe_hash}; "
                         "delete it to start again")
    return state
