"""Files written atomically, deterministic JSON, file digests, checked reads and output folders held by one run:
the I/O every layer shares.

A temporary file in the same folder is filled and then ``os.replace``-d over the target, so a reader
never sees a half-written file and a failed write leaves the old content in place.

Reading goes the other way: a checkpoint, a cache entry or its JSON sidecar is read through
:func:`read_json` or :func:`load_torch`, which turn a missing, empty, truncated or foreign file into a
:class:`CheckpointError` naming the file and the caller's fix. Bad input of any kind is an
:class:`InputError`: the command line (``python -m tokenprune``) prints it on one line and exits 2.

A run that rewrites an output folder as a whole (its staging folders, its ledger) holds it by :func:`folder_lock`
for its life, so a second run into the same folder is refused instead of deleting the first one's work.
"""
from __future__ import annotations

import contextlib
import dataclasses
import datetime as _dt
import hashlib
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

__all__ = ["InputError", "CheckpointError", "input_checks", "LOCK_FILE", "folder_lock", "atomic_write",
           "atomic_write_text", "atomic_write_bytes", "to_jsonable", "dumps_json", "write_json", "read_json",
           "load_torch", "sha256_file"]


# ----------------------------------------------------------------------------------------------
# refusals
# ----------------------------------------------------------------------------------------------


class InputError(ValueError):
    """Input refused before any work: a parameter, a path or a file's content. The message names it and the
    accepted values or the fix; ``python -m tokenprune`` prints it on one line and exits 2."""


class CheckpointError(InputError):
    """A checkpoint, cache entry or sidecar that cannot be used (missing, empty, truncated, another run's): the
    message names the file and how to mend it."""


@contextlib.contextmanager
def input_checks() -> Iterator[None]:
    """Inside this block a ``ValueError``, ``TypeError`` or ``KeyError`` is a refusal of the input being checked:
    it leaves as an :class:`InputError` with the same message. Wrap validation only, never the work itself, so a
    genuine failure keeps its type and traceback."""
    try:
        yield
    except InputError:
        raise
    except KeyError as err:
        raise InputError(f"unknown key {err}") from err
    except (ValueError, TypeError) as err:
        raise InputError(str(err)) from err


# ----------------------------------------------------------------------------------------------
# output folders held by one run
# ----------------------------------------------------------------------------------------------

#: the file in an output folder that :func:`folder_lock` locks (it stays, empty of meaning, once no run holds it)
LOCK_FILE = ".lock"


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike[str], option: str) -> Iterator[Path]:
    """Hold the output folder ``folder`` (created if missing) for one run, for the life of the block: an exclusive
    ``flock`` on ``folder/.lock``, which records the holder's process id. While another process (or another
    block) holds it, the folder is refused: an :class:`InputError` naming ``option``, the folder and the holder.
    The operating system drops the lock when its process ends, however it ends, so a killed run leaves no stale
    lock; the descriptor is not inherited by child processes (a notebook's kernel), which therefore never hold it."""
    import fcntl

    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "another process"
            raise InputError(f"{option}: {path} is being written by another run ({holder}); wait until it ends "
                             "or give another folder") from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"process {os.getpid()}\n".encode(), 0)
        yield path
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------------------------
# atomic files
# ----------------------------------------------------------------------------------------------


def _current_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _current_umask()


def atomic_write(path: str | os.PathLike[str], writer: Callable[[IO[Any]], None], binary: bool = False) -> Path:
    """Write ``path`` atomically: ``writer(fh)`` fills a temporary file, which then replaces it.

    The temporary file lives in the same folder (so ``os.replace`` is an atomic rename on one
    file system), is flushed and fsync'ed, gets the usual ``0o666 & ~umask`` permissions, and is
    removed if ``writer`` raises, in which case any existing ``path`` is left untouched.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    tmp = Path(tmp_name)
    try:
        if binary:
            fh: IO[Any] = os.fdopen(fd, "wb")
        else:
            fh = os.fdopen(fd, "w", encoding="utf-8", newline="\n")
        with fh:
            writer(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Atomically write UTF-8 ``text`` (``\\n`` line ends) to ``path``."""
    return atomic_write(path, lambda fh: fh.write(text))


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Atomically write ``data`` to ``path``."""
    return atomic_write(path, lambda fh: fh.write(data), binary=True)


# ----------------------------------------------------------------------------------------------
# JSON
# ----------------------------------------------------------------------------------------------


def to_jsonable(obj: Any) -> Any:
    """Convert ``obj`` into plain JSON types, recursively.

    numpy and torch scalars become Python numbers, arrays and tensors nested lists, dataclasses
    dicts, paths strings, sets sorted lists, and non-finite floats ``None`` (strict JSON has no
    NaN). Objects of other types are left as they are, so that encoding them fails loudly.
    """
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, Mapping):
        out = {}
        for k, v in obj.items():
            if not isinstance(k, (str, int, float, bool)):
                raise TypeError(f"JSON object keys must be str or numbers, got {type(k).__name__}")
            out[str(k)] = to_jsonable(v)
        return out
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, (set, frozenset)):
        return sorted((to_jsonable(v) for v in obj), key=lambda v: json.dumps(v, sort_keys=True))
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_jsonable(dataclasses.asdict(obj))
    if isinstance(obj, os.PathLike):
        return Path(obj).as_posix()
    if isinstance(obj, (_dt.datetime, _dt.date)):
        return obj.isoformat()
    np = sys.modules.get("numpy")
    if np is not None:
        if isinstance(obj, np.generic):
            return to_jsonable(obj.item())
        if isinstance(obj, np.ndarray):
            return to_jsonable(obj.tolist())
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        t = obj.detach().cpu()
        return to_jsonable(t.item() if t.ndim == 0 else t.tolist())
    return obj


def _json_default(obj: Any) -> Any:
    raise TypeError(f"object of type {type(obj).__name__} is not JSON serialisable: {obj!r:.80}")


def _dump_kwargs() -> dict[str, Any]:
    return dict(sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False, default=_json_default)


def dumps_json(obj: Any) -> str:
    """Deterministic JSON text of ``obj``: sorted keys, 2-space indent, strict, final newline."""
    return json.dumps(to_jsonable(obj), **_dump_kwargs()) + "\n"


def write_json(path: str | os.PathLike[str], obj: Any) -> Path:
    """Stream ``obj`` as deterministic JSON into ``path`` atomically (see :func:`atomic_write`).

    Encoding happens while the temporary file is written; if it fails part-way, the temporary
    file is removed and an existing ``path`` keeps its old content.
    """

    def _write(fh: IO[str]) -> None:
        json.dump(to_jsonable(obj), fh, **_dump_kwargs())
        fh.write("\n")

    return atomic_write(path, _write)


# ----------------------------------------------------------------------------------------------
# checked reads of checkpoints, caches and sidecars
# ----------------------------------------------------------------------------------------------


def _unusable(path: Path, kind: str, problem: str, fix: str) -> CheckpointError:
    return CheckpointError(f"{path}: {kind} {problem}; {fix}")


def read_json(path: str | os.PathLike[str], fix: str, kind: str = "the file") -> dict[str, Any]:
    """The JSON object in ``path`` (a sidecar, a run's summary). A missing, empty, truncated or non-object file
    raises :class:`CheckpointError` naming ``path``, what it is (``kind``, e.g. ``"the sidecar of x.pt"``) and
    ``fix`` (what the user does about it)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise _unusable(p, kind, "is missing", fix) from None
    except (OSError, UnicodeDecodeError) as err:
        raise _unusable(p, kind, f"is unreadable ({type(err).__name__})", fix) from err
    if not text.strip():
        raise _unusable(p, kind, "is empty", fix)
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as err:
        raise _unusable(p, kind, f"is truncated or not JSON (JSON error at line {err.lineno}, column {err.colno})",
                        fix) from err
    if not isinstance(obj, dict):
        raise _unusable(p, kind, f"holds a JSON {type(obj).__name__}, not an object", fix)
    return obj


def load_torch(path: str | os.PathLike[str], fix: str, kind: str = "the file", weights_only: bool = True) -> Any:
    """``torch.load(path)`` onto the CPU. A missing, empty, truncated or foreign file raises
    :class:`CheckpointError` naming ``path``, what it is (``kind``) and ``fix``. (Whatever ``torch.load`` raises is
    taken for an unreadable file: on a damaged pickle stream its unpickler fails in many ways, IndexError included.)"""
    import torch

    p = Path(path)
    if not p.is_file():
        raise _unusable(p, kind, "is missing", fix)
    if p.stat().st_size == 0:
        raise _unusable(p, kind, "is empty", fix)
    try:
        return torch.load(p, map_location="cpu", weights_only=weights_only)
    except Exception as err:  # noqa: BLE001 - see the docstring
        first = (str(err).strip().splitlines() or [""])[0][:120]
        raise _unusable(p, kind, f"is truncated or not a torch checkpoint ({type(err).__name__}: {first})",
                        fix) from err


def sha256_file(path: str | os.PathLike, chunk: int = 1 << 20) -> str:
    """SHA-256 hex digest of the file at ``path``, read in ``chunk``-byte blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            h.update(block)
    return h.hexdigest()
