"""An in-memory Hugging Face ``Dataset`` built straight from numpy columns, as both synthetic sets return them."""

from __future__ import annotations

from typing import Any, Mapping

import numpy as np

__all__ = ["to_dataset"]


def to_dataset(arrays: Mapping[str, np.ndarray], features: Any, description: str) -> Any:
    """An in-memory ``datasets.Dataset`` built straight from numpy columns (no per-row
    conversion), formatted as numpy with stored dtypes kept."""
    import datasets
    import pyarrow as pa
    from datasets.table import InMemoryTable

    cols = {}
    for name, feat in features.items():
        a = np.ascontiguousarray(arrays[name])
        if isinstance(feat, (datasets.Array2D, datasets.Array3D)):
            storage = pa.array(a.astype(feat.dtype, copy=False).reshape(-1))
            for dim in reversed(a.shape[1:]):
                offsets = pa.array(np.arange(0, len(storage) + 1, dim, dtype=np.int32))
                storage = pa.ListArray.from_arrays(offsets, storage)
            cols[name] = pa.ExtensionArray.from_storage(feat(), storage)
        elif a.ndim == 2:  # fixed-length list
            cols[name] = pa.FixedSizeListArray.from_arrays(pa.array(a.reshape(-1)), a.shape[1])
        else:
            cols[name] = pa.array(a)
    info = datasets.DatasetInfo(description=description, features=features)
    table = pa.table(cols).cast(features.arrow_schema)
    return datasets.Dataset(InMemoryTable(table), info=info).with_format("numpy", dtype=None)
