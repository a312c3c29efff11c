"""The recipe of a trained model as data: :class:`TrainRecipe` holds everything that determines a checkpoint
(architecture, data and preprocessing, optimiser, schedules, augmentation, seed, dtype, the keep-rate warm-up);
:meth:`TrainRecipe.recipe_hash` names it (12 hex of the SHA-256 of its canonical JSON). Runtime choices that do not
change what is learnt beyond floating-point noise (device, number of processes, ``torch.compile``, progress bars,
data paths, loader workers) are *not* part of it. The recipes of each profile are
:mod:`tokenprune.training.model_recipes`; the papers' recipes, read from YAML, are
:mod:`tokenprune.training.recipe_book`.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional

from tokenprune.core.precision import check_dtype
from tokenprune.core.schedule import EVIT_LOCATIONS

__all__ = ["CODE_VERSION", "TrainRecipe"]

#: Bump when a change of the training loop changes what a recipe trains into (invalidates cached checkpoints).
CODE_VERSION = 1


@dataclass
class TrainRecipe:
    """Everything that determines a trained checkpoint; :meth:`recipe_hash` names it.

    Units: ``epochs``, ``warmup_epochs``, ``keep_start`` and ``keep_length`` are epochs of the
    training split (fractions allowed); ``batch_size`` is the *global* batch (split across DDP
    ranks); ``lr`` is the peak learning rate at that batch.

    ``arch`` is read by whoever builds the model (``tokenprune.training.base_models.build_model``): e.g.
    ``{"builder": "timm_vit", "embed_dim": 128, ...}``. ``dataset`` / ``dataset_kwargs`` name the data
    (``tokenprune.training.recipe_data.load_recipe_data``). ``preprocess``: ``channels`` (1, or 3 to replicate a
    grayscale channel), ``mean``/``std`` (per channel, pixels in [0, 1]), ``resize`` (``"pad"``:
    centred zero padding; ``"bilinear"``/``"bicubic"``/``"nearest"``: interpolation) to ``img_size``.
    ``augment``: ``crop_pad`` (random translation by up to that many pixels, zero fill, before
    resizing), ``hflip`` (random horizontal flip), ``random_resized_crop`` (lazy image datasets only).
    Pruning-aware training: ``keep_rate < 1`` patches the model (if it is not patched yet) with
    ``prune`` (``locations``, ``scorer``, ``reducer``) and follows EViT's cosine warm-up from 1 to
    ``keep_rate`` between epochs ``keep_start`` and ``keep_start + keep_length`` (``keep_length == 0``:
    the target from ``keep_start`` on). ``trainable``: parameter-name prefixes to train (None: all).
    ``train_subset`` / ``val_subset`` / ``test_subset``: use that many rows of the split, drawn with
    ``seed`` (None: all).
    ``store_dtype``: the dtype the checkpoint stores weights in. ``extra``: free-form, hashed.
    """

    name: str = "model"
    arch: dict = field(default_factory=dict)
    dataset: str = "fashion_mnist"
    dataset_kwargs: dict = field(default_factory=dict)
    img_size: int = 28
    preprocess: dict = field(default_factory=lambda: {"channels": 1, "mean": [0.5], "std": [0.5], "resize": "pad"})
    train_subset: Optional[int] = None
    val_subset: Optional[int] = None
    test_subset: Optional[int] = None
    epochs: float = 10.0
    batch_size: int = 128
    lr: float = 1e-3
    min_lr: float = 1e-5
    weight_decay: float = 0.05
    warmup_epochs: float = 1.0
    label_smoothing: float = 0.1
    grad_clip: Optional[float] = 1.0
    augment: dict = field(default_factory=dict)
    seed: int = 0
    dtype: str = "bf16"
    keep_rate: float = 1.0
    keep_start: float = 0.0
    keep_length: float = 1.0
    prune: dict = field(default_factory=lambda: {"locations": list(EVIT_LOCATIONS), "scorer": "cls_attention",
                                                 "reducer": "fuse_attention"})
    trainable: Optional[list] = None
    store_dtype: str = "fp32"
    extra: dict = field(default_factory=dict)
    code_version: int = CODE_VERSION

    def __post_init__(self) -> None:
        check_dtype(self.dtype, "dtype")
        check_dtype(self.store_dtype, "store_dtype")
        if not self.epochs > 0:
            raise ValueError(f"epochs: must be > 0, got {self.epochs!r}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size: must be >= 1, got {self.batch_size!r}")
        if not 0.0 < float(self.keep_rate) <= 1.0:
            raise ValueError(f"keep_rate: must lie in (0, 1], got {self.keep_rate!r}")
        if self.keep_length < 0 or self.keep_start < 0 or self.warmup_epochs < 0:
            raise ValueError("keep_start, keep_length, warmup_epochs: must be >= 0")

    def to_dict(self) -> dict:
        """Plain JSON types (tuples become lists)."""
        return json.loads(self.canonical_json())

    def canonical_json(self) -> str:
        """Sorted keys, no whitespace, strict JSON: the text :meth:`recipe_hash` hashes."""
        from tokenprune.utils.io import to_jsonable

        return json.dumps(to_jsonable(dataclasses.asdict(self)), sort_keys=True, separators=(",", ":"),
                          ensure_ascii=True, allow_nan=False)

    def recipe_hash(self) -> str:
        """First 12 hex digits of the SHA-256 of :meth:`canonical_json`."""
        return hashlib.sha256(self.canonical_json().encode("utf-8")).hexdigest()[:12]

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "TrainRecipe":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(data) - names)
        if unknown:
            raise ValueError(f"TrainRecipe: unknown fields {unknown}")
        return cls(**dict(data))

    def replace(self, **changes: Any) -> "TrainRecipe":
        return dataclasses.replace(self, **changes)
