"""The errors a dataset loader raises, and the checks that raise them naming the file or folder expected."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

__all__ = ["DatasetNotFoundError", "DatasetFormatError", "require_path", "check_images_exist"]


class DatasetNotFoundError(FileNotFoundError):
    """A dataset file or folder is missing; the message names the path expected."""


class DatasetFormatError(ValueError):
    """A dataset file exists but does not follow the release format; the message names it."""


def require_path(path: Path, dataset: str, hint: str = "", *, folder: bool = False) -> Path:
    """Return ``path`` if it is a file (a folder with ``folder=True``), else raise naming what was expected, where."""
    if path.is_dir() if folder else path.is_file():
        return path
    expected = f"folder '{path.name}/'" if folder else f"file '{path.name}'"
    msg = f"{dataset}: expected {expected} at {path}, but it does not exist."
    if hint:
        msg += " " + hint
    raise DatasetNotFoundError(msg)


def check_images_exist(paths: Sequence[str], dataset: str, hint: str) -> None:
    """Raise naming the first missing picture files (a stat per file, no decoding)."""
    missing = [p for p in paths if not os.path.isfile(p)]
    if missing:
        shown = ", ".join(missing[:3]) + (f" (+{len(missing) - 3} more)" if len(missing) > 3 else "")
        raise DatasetNotFoundError(f"{dataset}: {len(missing)} image file(s) listed but missing: {shown}. {hint}")
