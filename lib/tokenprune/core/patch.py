"""Turn a timm ``VisionTransformer`` into a token-pruning one, in place, without forking timm.

Like ToMe (``tome/patch/timm.py``) this swaps classes and keeps the weights: each ``Block`` becomes a
:class:`PruningBlock` and the model's class becomes a subclass with a ``keep_rate`` knob; one
:class:`PruneState` is shared by the model and all its blocks. Unlike ToMe's patch, the block's
forward reproduces timm's *current* ``Block.forward`` exactly (LayerScale ``ls1``/``ls2``, q/k norm,
attention output norm and gate, drop-path), and it refuses timm versions it was not written for.

Reduction happens where EViT does it (youweiliang/evit, evit.py): inside the block, after the
attention residual and before the MLP. Only what the scorer and reducer ask for is computed: the
[CLS] attention row alone (``q_cls . K^T``, O(N d)) next to timm's fused attention, or the full
attention map for scorers that need it.

Example::

    model = timm.create_model("deit_small_patch16_224")
    tokenprune.patch(model, keep_rate=0.7)        # EViT: blocks 4/7/10, [CLS] attention, fusion
    model.keep_rate = 0.5                          # the one knob
"""
from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass, field
from typing import Optional, Sequence

import timm
import torch
import torch.nn.functional as F
from timm.layers import Attention
from timm.models.vision_transformer import Block, VisionTransformer

from tokenprune.core.reducers import ReducerSpec, get_reducer
from tokenprune.core.schedule import EVIT_LOCATIONS, Schedule, check_keep_rate, num_keep
from tokenprune.core.scorers import ScorerSpec, TokenContext, get_scorer

__all__ = [
    "SUPPORTED_TIMM",
    "PruneState",
    "PruningBlock",
    "patch",
    "prune_state",
    "attention_with_stats",
    "attention_residual",
    "mlp_residual",
    "check_timm_version",
    "check_img_size",
    "accepts_any_img_size",
]

#: timm (major, minor) versions whose ``Block.forward`` and ``Attention.forward`` this module reproduces
SUPPORTED_TIMM: tuple[tuple[int, int], ...] = ((1, 0),)


def check_timm_version(version: str | None = None) -> None:
    """Refuse a timm whose block code this module was not written against."""
    version = version or timm.__version__
    try:
        major_minor = tuple(int(p) for p in version.split(".")[:2])
    except ValueError as e:
        raise RuntimeError(f"timm version {version!r} cannot be parsed") from e
    if major_minor not in SUPPORTED_TIMM:
        accepted = ", ".join(f"{a}.{b}.x" for a, b in SUPPORTED_TIMM)
        raise RuntimeError(f"tokenprune.core.patch reproduces timm's Block.forward for timm {accepted}; installed timm is "
                           f"{version}. Install a supported timm (pyproject.toml pins it) or port patch.py and its tests.")


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


@dataclass
class PruneState:
    """The one state shared by a patched model and its blocks (ToMe keeps ``model._tome_info`` likewise).

    Configuration: ``schedule`` (where, how much), ``scorer``, ``reducer``, ``num_prefix_tokens``,
    ``trace`` (keep per-location sources/indices for coverage and figures), ``prop_attn`` (ToMe's
    proportional attention, ``attn + log(size)``), ``extras`` (e.g. a random generator).
    Per-forward bookkeeping, reset at block 0: ``size``, ``source``, ``history``, ``token_counts``.
    """

    schedule: Schedule
    scorer: ScorerSpec
    reducer: ReducerSpec
    num_prefix_tokens: int
    depth: int
    trace: bool = False
    prop_attn: bool = False
    extras: dict = field(default_factory=dict)
    size: Optional[torch.Tensor] = None
    source: Optional[torch.Tensor] = None
    history: list = field(default_factory=list)
    token_counts: list = field(default_factory=list)

    @property
    def needs(self) -> frozenset:
        if not self.reducer.uses_scores:
            return self.reducer.needs
        return self.scorer.needs | self.reducer.needs

    def begin(self, x: torch.Tensor) -> None:
        """Reset per-forward bookkeeping at the first block."""
        b, n = x.shape[:2]
        self.size = None
        self.source = torch.eye(n, device=x.device).expand(b, n, n) if self.trace else None
        self.history = []
        self.token_counts = []

    def reduces_at(self, block_index: int, num_tokens: int) -> Optional[int]:
        """Prunable tokens to keep at this block, or None when nothing is reduced (evit.py's early return)."""
        r = self.schedule.at(block_index)
        if r >= 1.0:
            return None
        n = num_tokens - self.num_prefix_tokens
        k = num_keep(n, r)
        return k if k < n else None

    def reduce(self, block_index: int, x: torch.Tensor, stats: dict, n_keep: int) -> torch.Tensor:
        ctx = TokenContext(x=x, num_prefix_tokens=self.num_prefix_tokens, block_index=block_index,
                           cls_attn=stats.get("cls_attn"), attn=stats.get("attn"), keys=stats.get("keys"),
                           size=self.size, source=self.source, extras=self.extras)
        scores = self.scorer(ctx) if self.reducer.uses_scores else None
        out = self.reducer(ctx, scores, n_keep)
        self.size, self.source = out.size, out.source
        if self.trace:
            self.history.append({"block": block_index, "keep_idx": out.keep_idx.detach(),
                                 "scores": None if scores is None else scores.detach(),
                                 "source": out.source.detach()})
        return out.x


def attention_with_stats(attn: Attention, x: torch.Tensor, needs: frozenset = frozenset(),
                         attn_bias: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, dict]:
    """timm ``Attention.forward`` (timm 1.0.x) that also returns what a scorer needs.

    ``needs`` may hold ``"cls_attn"`` (softmax row of the first token, ``[B, H, N]``, computed as
    ``softmax(q_cls K^T * scale)`` next to the fused kernel), ``"attn"`` (the full map ``[B, H, N, N]``;
    then the output is computed from that same map) and ``"keys"`` (``[B, H, N, d]``). ``attn_bias`` is an
    additive bias over keys broadcastable to ``[B, H, N, N]`` (ToMe's ``log(size)``).
    """
    B, N, _ = x.shape
    gate = attn.gate(x).sigmoid() if getattr(attn, "gate", None) is not None else None
    qkv = attn.qkv(x).reshape(B, N, 3, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4)
    q, k, v = qkv.unbind(0)
    q, k = attn.q_norm(q), attn.k_norm(k)
    stats: dict = {}
    if attn_bias is not None:
        attn_bias = attn_bias.to(q.dtype)
    if "attn" in needs or not attn.fused_attn:
        a = (q * attn.scale) @ k.transpose(-2, -1)
        if attn_bias is not None:
            a = a + attn_bias
        a = a.softmax(dim=-1)
        stats["attn"] = a
        stats["cls_attn"] = a[:, :, 0]
        out = attn.attn_drop(a) @ v
    else:
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=attn_bias,
                                             dropout_p=attn.attn_drop.p if attn.training else 0.0)
        if "cls_attn" in needs:
            row = (q[:, :, :1] * attn.scale) @ k.transpose(-2, -1)
            if attn_bias is not None:
                row = row + attn_bias[..., :1, :]
            stats["cls_attn"] = row.softmax(dim=-1).squeeze(2)
    if "keys" in needs:
        stats["keys"] = k
    out = out.transpose(1, 2).reshape(B, N, attn.attn_dim)
    out = attn.norm(out)
    if gate is not None:
        out = out * gate
    out = attn.proj_drop(attn.proj(out))
    return out, stats


def attention_residual(blk: Block, x: torch.Tensor, needs: frozenset = frozenset(),
                       bias: Optional[torch.Tensor] = None) -> tuple[torch.Tensor, dict]:
    """The first half of timm's ``Block.forward``, ``x + drop_path1(ls1(attn(norm1(x))))``, with the attention
    statistics that ``needs`` asks for (:func:`attention_with_stats`) and an optional additive logit ``bias``."""
    out, stats = attention_with_stats(blk.attn, blk.norm1(x), needs, bias)
    return x + blk.drop_path1(blk.ls1(out)), stats


def mlp_residual(blk: Block, x: torch.Tensor) -> torch.Tensor:
    """The second half of timm's ``Block.forward``: ``x + drop_path2(ls2(mlp(norm2(x))))``."""
    return x + blk.drop_path2(blk.ls2(blk.mlp(blk.norm2(x))))


class PruningBlock(Block):
    """timm ``Block`` whose forward may reduce tokens between the attention and the MLP residuals."""

    _tp_state: PruneState
    _tp_index: int

    def forward(self, x: torch.Tensor, attn_mask: Optional[torch.Tensor] = None, is_causal: bool = False) -> torch.Tensor:
        st = self._tp_state
        if self._tp_index == 0:
            st.begin(x)
        n_keep = st.reduces_at(self._tp_index, x.shape[1])
        bias = None
        if st.prop_attn and st.size is not None:
            bias = st.size.log()[:, None, None, :]
        if n_keep is None and bias is None:
            x = x + self.drop_path1(self.ls1(self.attn(self.norm1(x), attn_mask=attn_mask, is_causal=is_causal)))
        else:
            if attn_mask is not None or is_causal:
                raise ValueError("attn_mask/is_causal: not supported together with token reduction")
            x, stats = attention_residual(self, x, st.needs if n_keep else frozenset(), bias)
            if n_keep is not None:
                x = st.reduce(self._tp_index, x, stats, n_keep)
        x = mlp_residual(self, x)
        st.token_counts.append(x.shape[1])
        return x


def _pruning_model_class(cls: type) -> type:
    if getattr(cls, "_tp_patched", False):
        return cls

    class PruningVisionTransformer(cls):
        """A timm VisionTransformer patched by tokenprune; ``keep_rate`` sets every location's keep rate."""

        _tp_patched = True

        @property
        def keep_rate(self) -> dict[int, float]:
            return {i + 1: r for i, r in self._tokenprune.schedule.keep_rates.items()}

        @keep_rate.setter
        def keep_rate(self, value: float | Sequence[float]) -> None:
            st = self._tokenprune
            st.schedule = Schedule.build(st.depth, value, st.schedule.locations)

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
        model: a timm ``VisionTransformer`` whose blocks are timm ``Block`` with timm ``Attention``.
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
    if not isinstance(model, VisionTransformer):
        raise TypeError(f"model: expected a timm VisionTransformer, got {type(model).__name__}")
    blocks = list(model.blocks)
    for i, blk in enumerate(blocks):
        if not isinstance(blk, Block) or type(blk) not in (Block, PruningBlock):
            raise TypeError(f"model.blocks[{i}]: only timm Block is supported, got {type(blk).__name__}")
        if type(blk.attn) is not Attention:
            raise TypeError(f"model.blocks[{i}].attn: only timm Attention is supported, got {type(blk.attn).__name__}")
    if not isinstance(trace, bool) or not isinstance(prop_attn, bool):
        raise TypeError("trace, prop_attn: expected True or False")
    if model.num_prefix_tokens < 1 or not getattr(model, "has_class_token", True):
        raise ValueError("model: token pruning by [CLS] attention needs a class token (num_prefix_tokens >= 1)")
    if isinstance(keep_rate, (list, tuple)):
        [check_keep_rate(r) for r in keep_rate]
    else:
        check_keep_rate(keep_rate)
    pool = getattr(model, "global_pool", "token")
    if pool not in ("token", "") or getattr(model, "attn_pool", None) is not None:
        warnings.warn(f"model.global_pool={pool!r}: after a reduction the head pools the tokens that remain, a "
                      "fused or merged token counting once (not the original patches); EViT and DeiT classify from "
                      "the [CLS] token (global_pool='token')", stacklevel=2)
    scorer_spec = get_scorer(scorer)
    reducer_spec = get_reducer(reducer, **(reducer_options or {}))
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise ValueError(f"seed: expected an int (the seed of the random scorer's generator) or None, got {seed!r}")
    extras = {}
    if seed is not None:
        extras["generator"] = torch.Generator().manual_seed(int(seed))
    state = PruneState(schedule=Schedule.build(len(blocks), keep_rate, locations), scorer=scorer_spec,
                       reducer=reducer_spec, num_prefix_tokens=model.num_prefix_tokens, depth=len(blocks),
                       trace=trace, prop_attn=prop_attn, extras=extras)
    model.__class__ = _pruning_model_class(model.__class__)
    model._tokenprune = state
    for i, blk in enumerate(blocks):
        blk.__class__ = PruningBlock
        blk._tp_state = state
        blk._tp_index = i
    return model


def prune_state(model: VisionTransformer) -> PruneState:
    """The shared state of a patched model (raises if ``model`` was not patched)."""
    st = getattr(model, "_tokenprune", None)
    if st is None:
        raise ValueError("model: not patched; call tokenprune.patch(model, ...) first")
    return st
