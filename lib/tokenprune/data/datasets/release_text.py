"""Reading the whitespace-separated text files of the paper datasets' releases (CUB's ``images.txt`` and the
like), with errors that name the file, the line and the pattern expected."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from tokenprune.data.datasets.errors import DatasetFormatError, require_path

__all__ = ["read_rows", "to_number", "id_map", "lookup"]


def read_rows(path: Path, dataset: str, fields: int, pattern: str, hint: str = "") -> list[list[str]]:
    """Rows of a whitespace-separated text file, each split into exactly ``fields`` parts.

    The last field takes the rest of the line (names may contain spaces). Blank lines are
    skipped. A row with fewer fields raises ``DatasetFormatError`` naming file, line, and
    the ``pattern`` expected.
    """
    require_path(path, dataset, hint)
    rows: list[list[str]] = []
    with path.open("r", encoding="utf-8") as handle:
        for lineno, line in enumerate(handle, 1):
            text = line.strip()
            if not text:
                continue
            parts = text.split(None, fields - 1)
            if len(parts) != fields:
                raise DatasetFormatError(f"{dataset}: {path}:{lineno}: expected '{pattern}', got {text!r}")
            rows.append(parts)
    if not rows:
        raise DatasetFormatError(f"{dataset}: {path} is empty; expected lines of '{pattern}'")
    return rows


def to_number(value: str, kind: type, path: Path, dataset: str, pattern: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        raise DatasetFormatError(f"{dataset}: {path}: expected '{pattern}' with numbers, got {value!r}") from None


def id_map(rows: list[list[str]], path: Path, dataset: str, pattern: str, kinds: Sequence[type]) -> dict[int, tuple]:
    """``{int(first field): tuple(other fields converted by kinds)}`` with duplicate check."""
    out: dict[int, tuple] = {}
    for row in rows:
        key = to_number(row[0], int, path, dataset, pattern)
        if key in out:
            raise DatasetFormatError(f"{dataset}: {path}: id {key} appears twice")
        out[key] = tuple(to_number(v, k, path, dataset, pattern) for v, k in zip(row[1:], kinds))
    return out


def lookup(table: Mapping[int, tuple], key: int, path: Path, dataset: str) -> tuple:
    try:
        return table[key]
    except KeyError:
        raise DatasetFormatError(f"{dataset}: {path} has no line for image id {key}") from None
