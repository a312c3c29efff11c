"""The IDX file format of the MNIST-style releases: parse, read (gzip or raw) and write."""

from __future__ import annotations

import gzip
import os
import struct
from pathlib import Path

import numpy as np

from tokenprune.data.datasets.errors import DatasetFormatError, DatasetNotFoundError

__all__ = ["parse_idx", "read_idx", "write_idx"]


_IDX_DTYPES: dict[int, np.dtype] = {
    0x08: np.dtype(np.uint8),
    0x09: np.dtype(np.int8),
    0x0B: np.dtype(">i2"),
    0x0C: np.dtype(">i4"),
    0x0D: np.dtype(">f4"),
    0x0E: np.dtype(">f8"),
}
_IDX_CODES = {dt.newbyteorder("=") if dt.itemsize > 1 else dt: code for code, dt in _IDX_DTYPES.items()}


def parse_idx(raw: bytes, source: str = "<bytes>") -> np.ndarray:
    """Parse the bytes of an (uncompressed) IDX file into an array with native byte order.

    IDX layout: two zero bytes, a type code (0x08 uint8, 0x09 int8, 0x0B int16, 0x0C int32,
    0x0D float32, 0x0E float64), the number of dimensions, then one big-endian uint32 per
    dimension, then the data, big-endian, C order.
    """
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise DatasetFormatError(f"{source}: not an IDX file (the first two bytes must be zero)")
    code, ndim = raw[2], raw[3]
    if code not in _IDX_DTYPES:
        raise DatasetFormatError(f"{source}: unknown IDX type code 0x{code:02X}")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DatasetFormatError(f"{source}: truncated IDX header ({ndim} dimensions announced)")
    dims = struct.unpack(f">{ndim}I", raw[4:header])
    dtype = _IDX_DTYPES[code]
    count = int(np.prod(dims, dtype=np.int64))
    if len(raw) - header != count * dtype.itemsize:
        raise DatasetFormatError(
            f"{source}: IDX header announces shape {dims} of {dtype} "
            f"({count * dtype.itemsize} bytes) but {len(raw) - header} data bytes follow"
        )
    arr = np.frombuffer(raw, dtype=dtype, count=count, offset=header).reshape(dims)
    return arr.astype(dtype.newbyteorder("="), copy=True)


def read_idx(path: str | os.PathLike) -> np.ndarray:
    """Read an IDX file, gzip-compressed or raw (detected by the gzip magic bytes)."""
    path = Path(path)
    if not path.is_file():
        raise DatasetNotFoundError(f"IDX file not found: expected '{path.name}' at {path}")
    raw = path.read_bytes()
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as err:
            raise DatasetFormatError(f"{path}: corrupt gzip stream ({err})") from err
    return parse_idx(raw, source=str(path))


def write_idx(path: str | os.PathLike, array: np.ndarray) -> Path:
    """Write ``array`` as an IDX file; gzip-compressed when the name ends in ``.gz``."""
    path = Path(path)
    arr = np.asarray(array)
    key = arr.dtype.newbyteorder("=") if arr.dtype.itemsize > 1 else arr.dtype
    if key not in _IDX_CODES:
        raise ValueError(f"write_idx: dtype {arr.dtype} has no IDX type code")
    code = _IDX_CODES[key]
    header = bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    payload = header + np.ascontiguousarray(arr, dtype=_IDX_DTYPES[code]).tobytes()
    if path.name.endswith(".gz"):
        payload = gzip.compress(payload, mtime=0)
    path.write_bytes(payload)
    return path
