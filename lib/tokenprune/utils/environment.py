"""Where a result came from: the repository's commit, library versions, the hardware, and the data folder."""
from __future__ import annotations

import datetime as _dt
import os
import platform
import subprocess
import sys
import time
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

__all__ = ["DISTRIBUTION", "PROFILES", "DATA_DIR_ENV", "CACHE_ONLY_ENV", "cache_only", "data_dir", "git_state",
           "library_versions", "hardware", "provenance"]

#: the distribution name on a package index (the import name is ``tokenprune``; that name is taken there)
DISTRIBUTION = "tokenprune-study"
#: the study's profiles: ``smoke`` (seconds; the tests), ``default`` (a 2-core CPU, no download; the committed
#: reports), ``paper`` (the papers' scale, data and weights from local paths)
PROFILES: tuple[str, ...] = ("smoke", "default", "paper")
#: environment variable that moves the data folder
DATA_DIR_ENV = "TOKENPRUNE_DATA_DIR"
REPO_ROOT = Path(__file__).resolve().parents[3]
#: set to 1 to make a missing cached model or output an error instead of a rebuild (CI's ``make reproduce``: the
#: committed caches must be complete, and a silent rebuild would hide that they are not)
CACHE_ONLY_ENV = "TOKENPRUNE_CACHE_ONLY"


def cache_only() -> bool:
    """Whether :data:`CACHE_ONLY_ENV` forbids building a missing cached model or output."""
    return os.environ.get(CACHE_ONLY_ENV, "") not in ("", "0")


def data_dir() -> Path:
    """The folder where datasets, checkpoints and converted weights live: ``$TOKENPRUNE_DATA_DIR``
    (``~`` expanded) when set, else the repository's ``data/`` folder."""
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        return Path(env).expanduser()
    return REPO_ROOT / "data"


# ----------------------------------------------------------------------------------------------
# provenance
# ----------------------------------------------------------------------------------------------


def _git(args: list[str], cwd: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", *args], cwd=cwd, capture_output=True, text=True, timeout=15, check=False
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def git_state(cwd: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """Commit of the repository holding ``cwd`` (default: this package) and whether it is dirty.

    Only read-only commands run (``git rev-parse``, ``git status``). ``dirty`` means tracked
    files differ from the commit outside ``reports/`` (the reports are what a run writes);
    ``commit`` and ``dirty`` are None outside a repository or before the first commit.
    """
    where = Path(cwd) if cwd is not None else Path(__file__).resolve().parent
    while not where.exists() and where != where.parent:
        where = where.parent
    commit = _git(["rev-parse", "--verify", "-q", "HEAD"], where)
    commit = commit.strip() if commit else None
    dirty: bool | None = None
    if commit:
        status = _git(
            ["status", "--porcelain", "--untracked-files=no", "--", ":/", ":(top,exclude)reports"],
            where,
        )
        dirty = None if status is None else bool(status.strip())
    return {"commit": commit, "dirty": dirty, "dirty_ignores": "reports/"}


_VERSIONED = ("torch", "timm", "numpy", "datasets", "scipy", "pandas", "matplotlib", DISTRIBUTION)


def library_versions() -> dict[str, str | None]:
    """Versions of python and the libraries whose behaviour the results depend on."""
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in _VERSIONED:
        mod = sys.modules.get(name)
        version = getattr(mod, "__version__", None) if mod is not None else None
        if version is None:
            try:
                version = metadata.version(name)
            except metadata.PackageNotFoundError:
                version = None
        out[name] = str(version) if version is not None else None
    return out


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "cpu model"):
                    return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _memory_gib() -> float | None:
    try:
        with open("/proc/meminfo", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    return round(int(line.split()[1]) / 2**20, 1)
    except (OSError, ValueError, IndexError):
        pass
    return None


def hardware() -> dict[str, Any]:
    """CPU model, core counts, memory, torch threads and GPU names (None without CUDA)."""
    try:
        available = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        available = os.cpu_count()
    info: dict[str, Any] = {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "cpus_available": available,
        "memory_gib": _memory_gib(),
        "torch_threads": None,
        "gpus": None,
        "cuda": None,
    }
    try:
        import torch
    except ImportError:  # pragma: no cover - torch is a dependency
        return info
    info["torch_threads"] = torch.get_num_threads()
    if torch.cuda.is_available():
        info["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        info["cuda"] = torch.version.cuda
    return info


def provenance(
    params: Mapping[str, Any] | None = None,
    seed: int | None = None,
    started: float | None = None,
    cwd: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Everything needed to say where a result came from.

    ``started`` is a ``time.perf_counter()`` reading; the wall time is measured from it.
    """
    return {
        "git": git_state(cwd),
        "parameters": dict(params or {}),
        "seed": seed,
        "versions": library_versions(),
        "hardware": hardware(),
        "wall_time_s": None if started is None else round(time.perf_counter() - started, 3),
        "timestamp_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
    }


