"""The one front door: :func:`load_dataset` by name, with the names and aliases it accepts."""

from __future__ import annotations

import os
from typing import Any, Callable

import datasets

from tokenprune.data.datasets.cub import load_cub200
from tokenprune.data.datasets.embedded import load_digits, load_fashion_mnist, load_mnist
from tokenprune.data.datasets.fgvc_aircraft import load_fgvc_aircraft
from tokenprune.data.datasets.image_folders import load_image_folder
from tokenprune.data.datasets.stanford_cars import load_stanford_cars
from tokenprune.utils.environment import data_dir

__all__ = ["DATASET_NAMES", "load_dataset"]


def _imagenet(root: str | os.PathLike | None = None, **kw: Any) -> datasets.DatasetDict:
    return load_image_folder(root if root is not None else data_dir() / "imagenet", title="ImageNet-1k", **kw)


def _imagenet100(root: str | os.PathLike | None = None, **kw: Any) -> datasets.DatasetDict:
    return load_image_folder(root if root is not None else data_dir() / "imagenet100", title="ImageNet-100", **kw)


def _no_root(loader: Callable[..., datasets.DatasetDict], name: str) -> Callable[..., datasets.DatasetDict]:
    def wrapped(root: str | os.PathLike | None = None, **kw: Any) -> datasets.DatasetDict:
        if root is not None:
            raise ValueError(f"load_dataset: dataset {name!r} is bundled with its package and takes no root")
        return loader(**kw)

    return wrapped


_REGISTRY: dict[str, Callable[..., datasets.DatasetDict]] = {
    "fashion_mnist": load_fashion_mnist,
    "mnist": load_mnist,
    "digits": _no_root(load_digits, "digits"),
    "cub200": load_cub200,
    "stanford_cars": load_stanford_cars,
    "fgvc_aircraft": load_fgvc_aircraft,
    "imagenet": _imagenet,
    "imagenet100": _imagenet100,
    "image_folder": load_image_folder,
}
_ALIASES = {
    "fashionmnist": "fashion_mnist",
    "cub": "cub200",
    "cub_200_2011": "cub200",
    "cub200_2011": "cub200",
    "cars": "stanford_cars",
    "aircraft": "fgvc_aircraft",
    "imagenet1k": "imagenet",
    "imagenet_1k": "imagenet",
    "imagenet_100": "imagenet100",
}

#: The canonical names accepted by ``load_dataset`` (aliases: see ``_ALIASES``).
DATASET_NAMES = tuple(_REGISTRY)


def load_dataset(name: str, root: str | os.PathLike | None = None, **kw: Any) -> datasets.DatasetDict:
    """Load a dataset by name: the one front door for notebooks and profiles.

    ``name`` is one of ``DATASET_NAMES`` (case, ``-`` vs ``_`` and a few aliases such as
    ``cub``, ``cars``, ``aircraft``, ``imagenet-1k`` are accepted). ``root`` is the dataset's
    folder (default: under ``data_dir()``); other keywords go to the loader.
    """
    key = str(name).strip().lower().replace("-", "_").replace(" ", "_")
    key = _ALIASES.get(key, key)
    if key not in _REGISTRY:
        accepted = ", ".join(DATASET_NAMES)
        raise ValueError(f"load_dataset: unknown value for parameter name={name!r}; accepted names: {accepted}")
    return _REGISTRY[key](root=root, **kw)
