"""Turn a timm ViT into a token-pruning one, in place, without forking timm.

Like ToMe (``tome/patch/timm.py``) this swaps classes and keeps the weights: each block becomes its patched
class (timm ``Block`` -> :class:`~tokenprune.core.block_forward.PruningBlock`) and the model's class becomes a
subclass with a ``keep_rate`` knob; one :class:`~tokenprune.core.state.PruneState` holds the configuration the model
and its blocks share. Unlike ToMe's patch, the block's forward (:mod:`tokenprune.core.block_forward`) reproduces
timm's *current* forward exactly, and the patch refuses timm versions it was not written for.

Families (:data:`FAMILIES`): timm's ``VisionTransformer`` with its variants (class token or none, GAP / MAP
pooling, registers, hybrid embeddings, ``VisionTransformerDistilled``), and the families that
:mod:`tokenprune.core.families` registers. Methods that read [CLS] attention are refused on a model without a
class token; the others (ToMe's ``bipartite``, ``random``) run. Hierarchical and class-attention models (Swin,
MViT, CaiT, ...) are refused with a reason (:data:`REFUSED`).

Example::

    model = timm.create_model("deit_small_patch16_224")
    tokenprune.patch(model, keep_rate=0.7)        # EViT: blocks 4/7/10, [CLS] attention, fusion
    model.keep_rate = 0.5                          # the one knob
"""
from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import timm
import torch
from timm.layers import Attention
from timm.models.vision_transformer import Block, VisionTransformer

from tokenprune.core.block_forward import PruningBlock, run_blocks
from tokenprune.core.reducers import ReducerSpec, get_reducer
from tokenprune.core.schedule import EVIT_LOCATIONS, Schedule, check_keep_rate, is_rate_sequence
from tokenprune.core.scorers import ScorerSpec, get_scorer
from tokenprune.core.state import PruneState

__all__ = [
    "NUMERICS_VERSION",
    "SUPPORTED_TIMM",
    "Family",
    "FAMILIES",
    "REFUSED",
    "register_family",
    "family_of",
    "class_token_of",
    "patch",
    "prune_state",
    "check_timm_version",
    "check_img_size",
    "accepts_any_img_size",
]

#: the version of the patched forward's numbers: cached outputs of pruned models record it in their recipe, so a
#: change that moves the logits of a pruned model (a scorer, a reducer, the block's arithmetic) is bumped here and
#: makes every such cache a new entry instead of a stale one
NUMERICS_VERSION = 1

#: timm (major, minor) versions whose ``Block.forward`` and ``Attention.forward`` :mod:`.block_forward` reproduces
SUPPORTED_TIMM: tuple[tuple[int, int], ...] = ((1, 0),)


def check_timm_version(version: str | None = None) -> None:
    """Refuse a timm whose block code :mod:`tokenprune.core.block_forward` was not written against."""
    version = version or timm.__version__
    try:
        major_minor = tuple(int(p) for p in version.split(".")[:2])
    except ValueError as e:
        raise RuntimeError(f"timm version {version!r} cannot be parsed") from e
    if major_minor not in SUPPORTED_TIMM:
        accepted = ", ".join(f"{a}.{b}.x" for a, b in SUPPORTED_TIMM)
        raise RuntimeError(f"tokenprune.core.block_forward reproduces timm's Block.forward for timm {accepted}; "
                           f"installed timm is {version}. Install a supported timm (pyproject.toml pins it) or port "
                           "core/block_forward.py and its tests.")


def accepts_any_img_size(model: torch.nn.Module) -> bool:
    """Whether a timm ViT takes inputs of other sizes than it was built for: timm 1.0 keeps the
    ``dynamic_img_size`` flag on the model (its ``PatchEmbed`` then has ``strict_img_size=False``)."""
    pe = getattr(model, "patch_embed", None)
    return bool(getattr(model, "dynamic_img_size", False) or getattr(pe, "dynamic_img_size", False)
                or (pe is not None and not getattr(pe, "strict_img_size", True)))


def check_img_size(model: VisionTransformer, img_size: int | Sequence[int]) -> tuple[int, int]:
    """Validate an input size for ``model``; raise a ValueError naming ``img_size`` and what it accepts."""
    size = (img_size, img_size) if isinstance(img_size, int) else tuple(img_size)
    pe = model.patch_embed
    if len(size) != 2 or not all(isinstance(s, int) and s > 0 for s in size):
        raise ValueError(f"img_size: expected a positive int or (H, W), got {img_size!r}")
    if accepts_any_img_size(model):
        ok = all(s >= p for s, p in zip(size, pe.patch_size))
        accepted = f"any size >= patch size {tuple(pe.patch_size)}"
    else:
        ok = tuple(size) == tuple(pe.img_size)
        accepted = f"{tuple(pe.img_size)} (build the model with img_size=... or dynamic_img_size=True for others)"
    if not ok:
        raise ValueError(f"img_size: this model takes {accepted}, got {tuple(size)}")
    return size  # type: ignore[return-value]


@dataclass(frozen=True)
class Family:
    """A timm ViT family the patch runs: its model class, the block classes it accepts (timm class -> patched
    class), the attention classes those blocks may hold, and its ``forward_features`` run through
    :func:`run_blocks` (``forward_features(model, x, *args, **kwargs)``)."""

    name: str
    model_class: type
    blocks: dict
    attentions: tuple
    forward_features: Callable


#: the families :func:`patch` accepts, by name; the first whose ``model_class`` the model is an instance of runs it
FAMILIES: dict[str, Family] = {}

#: model classes refused with a reason: their blocks see tokens on a grid or attend from a class token apart
REFUSED: dict[str, str] = {
    "SwinTransformer": "hierarchical: windowed attention over a fixed grid and patch merging between stages",
    "SwinTransformerV2": "hierarchical: windowed attention over a fixed grid and patch merging between stages",
    "MultiScaleVit": "hierarchical: pooling attention over a fixed grid between stages",
    "Cait": "class attention: the class token enters in separate class-attention blocks",
    "PyramidVisionTransformerV2": "hierarchical: spatial-reduction attention over a fixed grid",
    "Twins": "hierarchical: locally grouped attention over a fixed grid",
    "XCiT": "cross-covariance attention over channels and a class-attention stage",
}


def register_family(family: Family) -> Family:
    """Add a family (``tokenprune.core.families`` registers Eva and the relative-position ViT)."""
    FAMILIES[family.name] = family
    return family


def family_of(model: torch.nn.Module) -> Family:
    """The family that runs ``model``; a TypeError with a one-line reason for any other model."""
    for family in FAMILIES.values():
        if isinstance(model, family.model_class):
            return family
    name = type(model).__name__
    for base in type(model).__mro__:
        if base.__name__ in REFUSED:
            raise TypeError(f"model: {name} cannot prune tokens ({REFUSED[base.__name__]}); accepted: timm "
                            f"{', '.join(f.model_class.__name__ for f in FAMILIES.values())}")
    raise TypeError(f"model: expected a timm {' / '.join(f.model_class.__name__ for f in FAMILIES.values())}, "
                    f"got {name}")


def _vit_forward_features(model: VisionTransformer, x: torch.Tensor, attn_mask: Optional[torch.Tensor] = None,
                          is_causal: bool = False) -> torch.Tensor:
    """timm's ``VisionTransformer.forward_features`` (timm 1.0.x) with the blocks run by :func:`run_blocks`."""
    st = model._tokenprune
    if attn_mask is not None or is_causal:
        if st.prunes:
            raise ValueError("attn_mask, is_causal: not supported together with token reduction (set "
                             "model.keep_rate = 1.0 to run timm's masked forward pass)")
        return super(type(model), model).forward_features(x, attn_mask=attn_mask, is_causal=is_causal)
    x = model.patch_embed(x)
    x = model._pos_embed(x)
    x = model.patch_drop(x)
    x = model.norm_pre(x)
    x = run_blocks(model.blocks, x, st, checkpointing=model.grad_checkpointing)
    return model.norm(x)


register_family(Family("vit", VisionTransformer, {Block: PruningBlock}, (Attention,), _vit_forward_features))


def _as_given(keep_rate: object) -> float | list | tuple:
    """The keep-rate knob as it reads back: one float, or a list / tuple of floats (one per location), each
    checked by :func:`~tokenprune.core.schedule.check_keep_rate`."""
    if is_rate_sequence(keep_rate):
        return type(keep_rate)(check_keep_rate(r) for r in keep_rate)  # type: ignore[call-arg]
    return check_keep_rate(keep_rate)


def _pruning_model_class(cls: type) -> type:
    if getattr(cls, "_tp_patched", False):
        return cls

    class PruningVisionTransformer(cls):
        """A timm VisionTransformer patched by tokenprune; ``keep_rate`` sets every location's keep rate."""

        _tp_patched = True

        @property
        def keep_rate(self) -> float | list | tuple:
            """The keep rate as it was set: one number, or one per location (as a list or tuple)."""
            return self._tokenprune.keep_rate

        @keep_rate.setter
        def keep_rate(self, value: float | Sequence[float]) -> None:
            st = self._tokenprune
            st.schedule = Schedule.build(st.depth, value, st.schedule.locations)
            st.keep_rate = _as_given(value)

        def forward_features(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
            """timm's ``forward_features`` of the model's family, with the blocks run by :func:`run_blocks`."""
            return FAMILIES[self._tokenprune.family].forward_features(self, x, *args, **kwargs)

        def __reduce_ex__(self, protocol):
            # the class is made at patch time: pickle (torch.save) and deepcopy rebuild it from timm's class
            return (_unpickle_pruning_model, (type(self).__bases__[0],), self.__dict__)

        def forward_intermediates(self, *args, **kwargs):
            """timm's intermediate outputs, unchanged while nothing is pruned; refused while pruning, since the
            blocks after a reduction hold fewer tokens than the patch grid (their feature maps would be scrambled)."""
            pruned = [i + 1 for i, r in sorted(self._tokenprune.schedule.keep_rates.items()) if r < 1.0]
            if pruned:
                raise NotImplementedError(
                    f"forward_intermediates: this model reduces tokens at blocks {pruned}, so the later blocks hold "
                    "fewer tokens than the patch grid and have no feature map; set model.keep_rate = 1.0 for "
                    "intermediate outputs, or patch with trace=True and read prune_state(model).history for which "
                    "tokens each location kept")
            return super().forward_intermediates(*args, **kwargs)

    PruningVisionTransformer.__name__ = f"Pruning{cls.__name__}"
    PruningVisionTransformer.__qualname__ = PruningVisionTransformer.__name__
    return PruningVisionTransformer


def _unpickle_pruning_model(base: type) -> VisionTransformer:
    """An empty instance of the patched class of ``base``, filled by ``__setstate__`` (pickle, deepcopy)."""
    return object.__new__(_pruning_model_class(base))


def patch(model: VisionTransformer,
          keep_rate: float | Sequence[float] = 1.0,
          locations: Sequence[int] = EVIT_LOCATIONS,
          scorer: str | ScorerSpec = "cls_attention",
          reducer: str | ReducerSpec = "fuse_attention",
          reducer_options: Optional[dict] = None,
          trace: bool = False,
          prop_attn: bool = False,
          seed: Optional[int] = None) -> VisionTransformer:
    """Make ``model`` prune tokens, in place (weights untouched), and return it.

    Args:
        model: a timm ViT of a registered family (:data:`FAMILIES`): ``VisionTransformer`` and its variants
            (blocks timm ``Block`` with timm ``Attention``), and those :mod:`tokenprune.core.families` adds.
        keep_rate: share of prunable tokens kept at each location, in (0, 1]; one value, or one per location.
        locations: 1-based block numbers where tokens are reduced (EViT: 4, 7, 10).
        scorer: a name from :data:`tokenprune.core.scorers.SCORERS` (or ``inverse:<name>``).
        reducer: a name from :data:`tokenprune.core.reducers.REDUCERS`.
        reducer_options: options bound to the reducer (e.g. ``{"temperature": 0.5}`` for ``fuse_softmax``).
        trace: record, per location, kept indices, scores and the source map (for coverage and figures).
        prop_attn: ToMe's proportional attention (add ``log(size)`` to attention logits) once tokens are merged.
        seed: seed of the generator that ``random`` scoring uses.

    Calling ``patch`` again on a patched model replaces its configuration. ``forward``, ``forward_features``
    and ``forward_head`` prune; ``forward_intermediates`` (and ``get_intermediate_layers``) equals timm's while
    nothing is pruned and is refused while pruning (no feature map exists after a reduction). With a pooling
    head (``global_pool='avg'``, ``'max'``, an attention pool) the head pools the tokens that remain, a fused or
    merged token counting once; patching such a model warns so.
    """
    check_timm_version()
    family = family_of(model)
    blocks = list(model.blocks)
    patched = {v: k for k, v in family.blocks.items()}
    for i, blk in enumerate(blocks):
        if type(blk) not in family.blocks and type(blk) not in patched:
            raise TypeError(f"model.blocks[{i}]: {type(blk).__name__} is not a block the patch reproduces; accepted: "
                            f"{', '.join(c.__name__ for c in family.blocks)}")
        if type(blk.attn) not in family.attentions:
            raise TypeError(f"model.blocks[{i}].attn: {type(blk.attn).__name__} is not an attention the patch "
                            f"reproduces; accepted: {', '.join(c.__name__ for c in family.attentions)}")
    if not isinstance(trace, bool) or not isinstance(prop_attn, bool):
        raise TypeError("trace, prop_attn: expected True or False")
    given = _as_given(keep_rate)
    scorer_spec = get_scorer(scorer)
    reducer_spec = get_reducer(reducer, **(reducer_options or {}))
    has_cls = class_token_of(model)
    reads_cls = (scorer_spec.needs if reducer_spec.uses_scores else frozenset()) | reducer_spec.needs
    if not has_cls and "cls_attn" in reads_cls:
        who = [f"scorer {scorer_spec.name!r}"] * ("cls_attn" in scorer_spec.needs and reducer_spec.uses_scores) + \
              [f"reducer {reducer_spec.name!r}"] * ("cls_attn" in reducer_spec.needs)
        raise ValueError(f"scorer, reducer: {' and '.join(who)} read [CLS] attention and this model "
                         f"has no class token; "
                         "methods that need none: reducer 'bipartite' (ToMe), scorer 'random'")
    pool = getattr(model, "global_pool", "token")
    if pool not in ("token", "") or getattr(model, "attn_pool", None) is not None:
        warnings.warn(f"model.global_pool={pool!r}: after a reduction the head pools the tokens that remain, a "
                      "fused or merged token counting once (not the original patches); EViT and DeiT classify from "
                      "the [CLS] token (global_pool='token')", stacklevel=2)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise ValueError(f"seed: expected an int (the seed of the random scorer's generator) or None, got {seed!r}")
    extras = {}
    if seed is not None:
        extras["generator"] = torch.Generator().manual_seed(int(seed))
    state = PruneState(schedule=Schedule.build(len(blocks), keep_rate, locations), scorer=scorer_spec,
                       reducer=reducer_spec, num_prefix_tokens=model.num_prefix_tokens, depth=len(blocks),
                       trace=trace, prop_attn=prop_attn, extras=extras, keep_rate=given, family=family.name,
                       has_class_token=has_cls)
    model.__class__ = _pruning_model_class(model.__class__)
    model._tokenprune = state
    for i, blk in enumerate(blocks):
        blk.__class__ = family.blocks.get(type(blk), type(blk))
        blk._tp_state = state
        blk._tp_index = i
    return model


def class_token_of(model: torch.nn.Module) -> bool:
    """Whether the model's first token is a class token ([CLS]): timm keeps ``cls_token`` (None without one)."""
    return getattr(model, "cls_token", None) is not None and getattr(model, "has_class_token", True)


def prune_state(model: VisionTransformer) -> PruneState:
    """The shared state of a patched model (raises if ``model`` was not patched)."""
    st = getattr(model, "_tokenprune", None)
    if st is None:
        raise ValueError("model: not patched; call tokenprune.patch(model, ...) first")
    return st
