"""Cluttered (Fashion-)MNIST: the real item on a larger canvas among crops of other items pasted outside its grown
box, with the exact object mask and box."""

from __future__ import annotations

import zlib
from typing import Any, Sequence

import numpy as np

from tokenprune.data.synthetic.backgrounds import photo_backgrounds
from tokenprune.data.synthetic.counter_random import Draw
from tokenprune.data.synthetic.in_memory import to_dataset
from tokenprune.data.synthetic.raster import mask_boxes

__all__ = ["clutter_items", "cluttered"]


def clutter_items(
    images: np.ndarray,
    labels: np.ndarray,
    *,
    canvas: int = 64,
    seed: int = 0,
    indices: Sequence[int] | np.ndarray | None = None,
    n_clutter: int = 6,
    piece_size: tuple[int, int] = (8, 12),
    threshold: int = 0,
    gap: int = 1,
    n_tries: int = 8,
    background: str = "black",
    background_contrast: float = 0.5,
) -> dict[str, np.ndarray]:
    """Place each item on a ``canvas`` x ``canvas`` black canvas (or a photo) among crops of other items.

    ``images`` is uint8 ``[N, h, w]`` (28x28 for (Fashion-)MNIST), ``labels`` ``[N]``. Output
    image ``k`` is built from item ``i = indices[k]`` (default ``0 .. N-1``) and depends only on
    ``(seed, i)`` and the pool ``images``:

    * the item is pasted unchanged at a random offset; its **object mask** is its pixels
      ``> threshold`` (default: every nonzero pixel) and ``bbox`` the tight box of that mask;
    * up to ``n_clutter`` square pieces (side uniform in ``piece_size``, inclusive) are cut at a
      random place from random *other* items of the pool (``j != i``) and pasted (pixel-wise
      max among pieces) at random places. **Rule:** a piece is only placed where it lies
      entirely outside the object box grown by ``gap`` px; each piece tries ``n_tries``
      positions and is dropped if none qualifies. So the grown box contains exactly the item's
      pixels, and every object pixel keeps the item's value;
    * ``background="photo"``: every pixel that is neither object nor clutter shows a
      ``canvas``-px crop of a greyscale scikit-image photo (:func:`photo_backgrounds`) with its
      luminance times ``background_contrast``; ``"black"`` (the default) leaves them 0.

    Returns ``image [K, C, C] uint8``, ``label [K] int64``, ``object_mask [K, C, C] uint8``
    (0/1), ``clutter_mask [K, C, C] uint8`` (0/1: clutter pixels ``> threshold``), ``bbox
    [K, 4] int32`` (x0, y0, x1, y1, exclusive), ``offset [K, 2] int32`` (x, y of the item's
    top-left corner) and ``index [K] int64`` (the item index ``i``).
    """
    imgs = np.asarray(images)
    if imgs.ndim != 3 or imgs.dtype != np.uint8:
        raise ValueError(f"images must be uint8 [N, h, w], got {imgs.dtype} {imgs.shape}")
    if background not in ("black", "photo"):
        raise ValueError(f"background: {background!r} not accepted; accepted: 'black', 'photo'")
    if not 0.0 <= background_contrast <= 1.0:
        raise ValueError(f"background_contrast: must be in [0, 1], got {background_contrast!r}")
    n, h, w = imgs.shape
    if n < 2:
        raise ValueError("need at least two items (clutter comes from other items)")
    kmin, kmax = int(piece_size[0]), int(piece_size[1])
    if not (1 <= kmin <= kmax <= min(h, w)) or canvas < max(h, w):
        raise ValueError("need 1 <= piece_size[0] <= piece_size[1] <= item size <= canvas")
    idx = np.arange(n, dtype=np.int64) if indices is None else np.asarray(indices, dtype=np.int64).reshape(-1)
    lab = np.asarray(labels).astype(np.int64)[idx]
    b = idx.size
    rd = Draw(seed, idx)
    items = imgs[idx]
    # the item
    off = np.stack([rd.integers("off_x", canvas - w + 1), rd.integers("off_y", canvas - h + 1)], axis=1)
    obj = np.zeros((b, canvas, canvas), dtype=np.uint8)
    bi = np.arange(b)[:, None, None]
    ry = off[:, 1, None, None] + np.arange(h)[None, :, None]
    rx = off[:, 0, None, None] + np.arange(w)[None, None, :]
    obj[bi, ry, rx] = items
    mask = obj > threshold
    box = mask_boxes(mask)
    empty = ~mask.any(axis=(1, 2))
    box[empty] = np.concatenate([off, off + [w, h]], axis=1)[empty]
    grown = box + np.array([-gap, -gap, gap, gap])
    # clutter pieces, on a canvas padded by kmax so every window fits
    pad = canvas + kmax
    clut = np.zeros((b, pad, pad), dtype=np.uint8)
    ar = np.arange(kmax)
    for p in range(n_clutter):
        tag = f"piece{p}"
        k = kmin + rd.integers(tag + "_size", kmax - kmin + 1)
        src = (idx + 1 + rd.integers(tag + "_src", n - 1)) % n
        sy = rd.uniform(tag + "_sy") * (h - k + 1)
        sx = rd.uniform(tag + "_sx") * (w - k + 1)
        sy, sx = sy.astype(np.int64), sx.astype(np.int64)
        # candidate positions; keep the first one whose piece misses the grown box
        cand = (rd.uniform(tag + "_pos", 2 * n_tries).reshape(b, n_tries, 2) * (canvas - k + 1)[:, None, None]).astype(
            np.int64
        )
        x0, y0 = cand[..., 0], cand[..., 1]
        x1, y1 = x0 + k[:, None], y0 + k[:, None]
        g = grown[:, None, :]
        ok = (x1 <= g[..., 0]) | (x0 >= g[..., 2]) | (y1 <= g[..., 1]) | (y0 >= g[..., 3])
        first = np.argmax(ok, axis=1)
        use = ok.any(axis=1)
        px, py = x0[np.arange(b), first], y0[np.arange(b), first]
        inside = ar[None, :] < k[:, None]  # [B, kmax]
        win = inside[:, :, None] & inside[:, None, :] & use[:, None, None]
        gy = np.minimum(sy[:, None] + ar[None, :], h - 1)
        gx = np.minimum(sx[:, None] + ar[None, :], w - 1)
        piece = imgs[src[:, None, None], gy[:, :, None], gx[:, None, :]] * win
        ty = py[:, None, None] + ar[None, :, None]
        tx = px[:, None, None] + ar[None, None, :]
        clut[bi, ty, tx] = np.maximum(clut[bi, ty, tx], piece)
    clut = clut[:, :canvas, :canvas]
    image = np.maximum(obj, clut)
    if background == "photo":
        fg = mask | (clut > threshold)
        image = np.where(fg, image, photo_backgrounds(rd, canvas, background_contrast))
    elif background != "black":
        raise ValueError(f"background: {background!r} not accepted; accepted: 'black', 'photo'")
    return {
        "image": image,
        "label": lab,
        "object_mask": mask.astype(np.uint8),
        "clutter_mask": (clut > threshold).astype(np.uint8),
        "bbox": box.astype(np.int32),
        "offset": off.astype(np.int32),
        "index": idx,
    }


def _as_uint8_stack(column: Any) -> np.ndarray:
    """A dataset image column (arrays, lists or PIL images) as uint8 ``[N, h, w]``."""
    try:
        arr = np.asarray(column)
    except (ValueError, TypeError):
        arr = np.empty(0)
    if arr.dtype == object or arr.ndim != 3:
        arr = np.stack([np.asarray(x) for x in column])
    if arr.ndim == 4 and arr.shape[-1] == 1:
        arr = arr[..., 0]
    return arr.astype(np.uint8)


def cluttered(dataset_dict: Any, canvas: int = 64, seed: int = 0, **kwargs: Any) -> Any:
    """Cluttered version of a DatasetDict with ``image`` and ``label`` columns (e.g. from
    ``tokenprune.data.datasets.load_fashion_mnist()``), split by split; each split draws its clutter
    from its own items only. ``kwargs`` go to :func:`clutter_items`. Columns: ``image``,
    ``object_mask``, ``clutter_mask`` (Array2D uint8 ``[C, C]``), ``label`` (the input's label
    feature), ``bbox`` (4 int32), ``offset`` (2 int32), ``index`` (int64, row in the split)."""
    import datasets

    out = {}
    for split, ds in dataset_dict.items():
        fmt = ds.with_format("numpy", dtype=None)
        imgs = _as_uint8_stack(fmt["image"])
        labels = np.asarray(fmt["label"])
        split_seed = (int(seed) * 1000003 + zlib.crc32(str(split).encode())) & 0xFFFFFFFFFFFFFFFF
        arr = clutter_items(imgs, labels, canvas=canvas, seed=split_seed, **kwargs)
        label_feat = ds.features["label"] if "label" in ds.features else datasets.Value("int64")
        feats = datasets.Features(
            {
                "image": datasets.Array2D((canvas, canvas), "uint8"),
                "label": label_feat,
                "object_mask": datasets.Array2D((canvas, canvas), "uint8"),
                "clutter_mask": datasets.Array2D((canvas, canvas), "uint8"),
                "bbox": datasets.List(datasets.Value("int32"), length=4),
                "offset": datasets.List(datasets.Value("int32"), length=2),
                "index": datasets.Value("int64"),
            }
        )
        out[split] = to_dataset(arr, feats, f"cluttered {split}, canvas={canvas}, seed={seed}, {kwargs}")
    return datasets.DatasetDict(out)
