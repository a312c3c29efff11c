"""Turn a timm ViT into a token-pruning one, in place, without forking timm.

Like ToMe (``tome/patch/timm.py``) this swaps classes and keeps the weights: each block becomes its patched
class (timm ``Block`` -> :class:`PruningBlock`) and the model's class becomes a subclass with a ``keep_rate``
knob; one :class:`PruneState` holds the configuration the model and its blocks share. Unlike ToMe's patch, the
block's forward reproduces timm's *current* forward exactly (LayerScale ``ls1``/``ls2``, q/k norm, attention
output norm and gate, drop-path), and it refuses timm versions it was not written for.

A forward pass owns its bookkeeping: :func:`run_blocks` hands each block the sizes, sources and random-generator
state that enter it in the call's own object, so gradient checkpointing (timm's ``set_grad_checkpointing``)
recomputes a block on exactly what its first pass saw and two threads calling one model cannot mix their
tokens. ``prune_state(model)`` reports the last finished call.

Families (:data:`FAMILIES`): timm's ``VisionTransformer`` with its variants (class token or none, GAP / MAP
pooling, registers, hybrid embeddings, ``VisionTransformerDistilled``), and the families that
:mod:`tokenprune.core.families` registers. Methods that read [CLS] attention are refused on a model without a
class token; the others (ToMe's ``bipartite``, ``random``) run. Hierarchical and class-attention models (Swin,
MViT, CaiT, ...) are refused with a reason (:data:`REFUSED`).

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

import contextlib
import numbers
import threading
import warnings
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import timm
import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from timm.layers import Attention
from timm.models.vision_transformer import Block, VisionTransformer

from tokenprune.core.reducers import ReducerSpec, get_reducer
from tokenprune.core.schedule import EVIT_LOCATIONS, Schedule, check_keep_rate, is_rate_sequence, num_keep
from tokenprune.core.scorers import ScorerSpec, TokenContext, get_scorer

__all__ = [
    "NUMERICS_VERSION",
    "SUPPORTED_TIMM",
    "PruneState",
    "PruneRecord",
    "PruningBlock",
    "run_blocks",
    "BlockOps",
    "PruningBlockMixin",
    "Family",
    "FAMILIES",
    "register_family",
    "family_of",
    "class_token_of",
    "patch",
    "prune_state",
    "attend_with_stats",
    "attention_with_stats",
    "attention_residual",
    "mlp_residual",
    "check_timm_version",
    "check_img_size",
    "accepts_any_img_size",
]

#: the version of the patched forward's numbers: cached outputs of pruned models record it in their recipe, so a
#: change that moves the logits of a pruned model (a scorer, a reducer, the block's arithmetic) is bumped here and
#: makes every such cache a new entry instead of a stale one
NUMERICS_VERSION = 1

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
class PruneRecord:
    """What one forward pass did: tokens leaving each block, per-location traces, the final sizes and sources.

    Each call builds its own record, so concurrent calls and gradient checkpointing's recomputation never mix
    their bookkeeping; the model keeps the record of the last call that finished (``PruneState.last``).
    """

    token_counts: list = field(default_factory=list)
    history: list = field(default_factory=list)
    size: Optional[torch.Tensor] = None
    source: Optional[torch.Tensor] = None


@dataclass
class PruneState:
    """The configuration a patched model and its blocks share (ToMe keeps ``model._tome_info`` likewise).

    Configuration: ``schedule`` (where, how much), ``keep_rate`` (the knob as it was given), ``scorer``,
    ``reducer``, ``num_prefix_tokens``, ``trace`` (keep per-location sources/indices for coverage and figures),
    ``prop_attn`` (ToMe's proportional attention, ``attn + log(size)``), ``extras`` (e.g. a random generator).
    Nothing of a forward pass lives here: each call carries its own sizes, sources and random-generator state
    from block to block (:func:`run_blocks`) and leaves a :class:`PruneRecord`; ``size``, ``source``,
    ``history`` and ``token_counts`` read the last finished call's.
    """

    schedule: Schedule
    scorer: ScorerSpec
    reducer: ReducerSpec
    num_prefix_tokens: int
    depth: int
    trace: bool = False
    prop_attn: bool = False
    extras: dict = field(default_factory=dict)
    keep_rate: float | list | tuple = 1.0
    family: str = "vit"
    has_class_token: bool = True
    last: Optional[PruneRecord] = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def __getstate__(self) -> dict:
        # a lock does not pickle and a saved model carries no call's bookkeeping
        return {k: v for k, v in self.__dict__.items() if k not in ("lock", "last")}

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("keep_rate", 1.0)
        self.__dict__.setdefault("family", "vit")
        self.__dict__.setdefault("has_class_token", True)
        self.last = None
        self.lock = threading.Lock()

    @property
    def needs(self) -> frozenset:
        if not self.reducer.uses_scores:
            return self.reducer.needs
        return self.scorer.needs | self.reducer.needs

    @property
    def token_counts(self) -> list:
        """Tokens leaving each block ([CLS] and other prefix tokens included) in the last finished forward pass."""
        return [] if self.last is None else self.last.token_counts

    @property
    def history(self) -> list:
        """Per-location traces of the last finished forward pass (with ``trace=True``)."""
        return [] if self.last is None else self.last.history

    @property
    def size(self) -> Optional[torch.Tensor]:
        return None if self.last is None else self.last.size

    @property
    def source(self) -> Optional[torch.Tensor]:
        return None if self.last is None else self.last.source

    @property
    def prunes(self) -> bool:
        """Whether a forward pass changes anything timm computes (a location below keep 1, or ToMe's bias)."""
        return any(r < 1.0 for r in self.schedule.keep_rates.values())

    def reduces_at(self, block_index: int, num_tokens: int) -> Optional[int]:
        """Prunable tokens to keep at this block, or None when nothing is reduced (evit.py's early return)."""
        r = self.schedule.at(block_index)
        if r >= 1.0:
            return None
        n = num_tokens - self.num_prefix_tokens
        k = num_keep(n, r)
        return k if k < n else None

    def scores(self, ctx: TokenContext) -> torch.Tensor:
        """The scorer's output, checked to hold one score per prunable token: ``[B, N - num_prefix_tokens]``."""
        scores = self.scorer(ctx)
        want = (ctx.x.shape[0], ctx.num_prunable)
        if not isinstance(scores, torch.Tensor) or tuple(scores.shape) != want:
            got = tuple(scores.shape) if isinstance(scores, torch.Tensor) else type(scores).__name__
            raise ValueError(f"scorer {self.scorer.name!r}: returned scores of shape {got}; expected one score per "
                             f"prunable token, [B, N - num_prefix_tokens] = {list(want)} ({self.num_prefix_tokens} "
                             "prefix tokens are never scored)")
        return scores


class _Call:
    """The bookkeeping of one forward pass. Block ``i`` reads what enters it from ``carry[i]`` and writes what
    leaves it to ``carry[i + 1]``; a block that gradient checkpointing recomputes reads the entry its first pass
    read and writes the same values again."""

    def __init__(self, state: PruneState, size, source, rng_state, position=None):
        self.state = state
        self.position = position  # (block index, source map) -> what the family's attention reads of positions
        self.carry: dict[int, tuple] = {0: (size, source, rng_state)}
        self.counts: dict[int, int] = {}
        self.history: dict[int, dict] = {}

    def record(self) -> PruneRecord:
        size, source, _ = self.carry[max(self.carry)]
        return PruneRecord(token_counts=[self.counts[i] for i in sorted(self.counts)],
                           history=[self.history[i] for i in sorted(self.history)], size=size, source=source)


def _reduce(call: _Call, index: int, x: torch.Tensor, stats: dict, n_keep: int, size, source, rng_state):
    """Score and reduce at one location; returns the new tokens, sizes, sources and random-generator state."""
    st = call.state
    extras = st.extras
    gen = None
    if rng_state is not None:
        gen = torch.Generator()
        gen.set_state(rng_state)
        extras = {**st.extras, "generator": gen}
    ctx = TokenContext(x=x, num_prefix_tokens=st.num_prefix_tokens, block_index=index,
                       cls_attn=stats.get("cls_attn"), attn=stats.get("attn"), keys=stats.get("keys"),
                       size=size, source=source, extras=extras)
    scores = st.scores(ctx) if st.reducer.uses_scores else None
    out = st.reducer(ctx, scores, n_keep)
    if st.trace:
        call.history[index] = {"block": index, "keep_idx": out.keep_idx.detach(),
                               "scores": None if scores is None else scores.detach(),
                               "source": out.source.detach()}
    return out.x, out.size, out.source, (gen.get_state() if gen is not None else None)


def _block_step(blk: "PruningBlock", x: torch.Tensor, call: _Call) -> torch.Tensor:
    """One block of a pruning forward pass: what enters it comes from ``call.carry``, so the block is a function
    of its inputs and of that entry (gradient checkpointing may recompute it)."""
    st, index, ops = call.state, blk._tp_index, blk._tp_ops
    size, source, rng_state = call.carry[index]
    n_keep = st.reduces_at(index, x.shape[1])
    bias = size.log()[:, None, None, :] if st.prop_attn and size is not None else None
    position = call.position(index, source) if call.position is not None else None
    x, stats = ops.attention_residual(blk, x, st.needs if n_keep else frozenset(), bias, position)
    if n_keep is not None:
        x, size, source, rng_state = _reduce(call, index, x, stats, n_keep, size, source, rng_state)
    x = ops.mlp_residual(blk, x)
    call.counts[index] = x.shape[1]
    call.carry[index + 1] = (size, source, rng_state)
    return x


def run_blocks(blocks: Sequence["PruningBlock"], x: torch.Tensor, state: PruneState,
               checkpointing: bool = False, position: Optional[Callable] = None) -> torch.Tensor:
    """Run the patched blocks on ``x`` with this call's own bookkeeping and leave its record in ``state.last``.

    Sizes, sources and the random generator's state pass from block to block in the call's own object
    (:class:`_Call`), never in the shared state, so concurrent calls cannot mix and each block is a function of
    what entered it: with ``checkpointing`` (timm's ``set_grad_checkpointing``) each block is wrapped in
    ``torch.utils.checkpoint`` and its recomputation during the backward pass sees exactly what the forward pass
    saw. Blocks are called as modules, so forward hooks see their outputs. A model with a seeded generator (the
    ``random`` scorer) runs one call at a time, so that concurrent calls draw from the stream in turn.

    ``position(block_index, source)`` serves families whose attention reads token positions (rope, relative
    position bias): the call then tracks each token's source map and the hook turns it into what the block's
    attention takes.
    """
    gen = state.extras.get("generator")
    with state.lock if gen is not None else contextlib.nullcontext():
        source = None
        if state.trace or position is not None:
            b, n = x.shape[:2]
            source = torch.eye(n, device=x.device).expand(b, n, n)
        call = _Call(state, None, source, gen.get_state() if gen is not None else None, position)
        use_ckpt = checkpointing and torch.is_grad_enabled() and not torch.jit.is_scripting()
        for blk in blocks:
            if use_ckpt:
                x = torch.utils.checkpoint.checkpoint(blk, x, _tp_call=call, use_reentrant=False)
            else:
                x = blk(x, _tp_call=call)
        record = call.record()
        if gen is not None:
            gen.set_state(call.carry[len(blocks)][2])
    state.last = record
    return x


def attend_with_stats(attn: torch.nn.Module, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                      needs: frozenset = frozenset(), attn_bias: Optional[torch.Tensor] = None
                      ) -> tuple[torch.Tensor, dict]:
    """The softmax attention of timm's attention modules on ``q, k, v`` (``[B, H, N, d]``) with the statistics
    that ``needs`` asks for: timm's fused kernel (``attn_bias`` as its mask) and the [CLS] row beside it, or the
    explicit map when ``"attn"`` is asked for or ``attn.fused_attn`` is off. Reads ``attn.scale``,
    ``attn.fused_attn`` and ``attn.attn_drop``; returns the per-head output ``[B, H, N, d]`` and the statistics."""
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
    return out, stats


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
    out, stats = attend_with_stats(attn, q, k, v, needs, attn_bias)
    if "keys" in needs:
        stats["keys"] = k
    out = out.transpose(1, 2).reshape(B, N, attn.attn_dim)
    out = attn.norm(out)
    if gate is not None:
        out = out * gate
    out = attn.proj_drop(attn.proj(out))
    return out, stats


def attention_residual(blk: Block, x: torch.Tensor, needs: frozenset = frozenset(),
                       bias: Optional[torch.Tensor] = None, position: None = None) -> tuple[torch.Tensor, dict]:
    """The first half of timm's ``Block.forward``, ``x + drop_path1(ls1(attn(norm1(x))))``, with the attention
    statistics that ``needs`` asks for (:func:`attention_with_stats`) and an optional additive logit ``bias``.
    With neither, timm's own ``Attention`` runs. (``position`` is for families whose attention reads positions.)"""
    if not needs and bias is None:
        return x + blk.drop_path1(blk.ls1(blk.attn(blk.norm1(x)))), {}
    out, stats = attention_with_stats(blk.attn, blk.norm1(x), needs, bias)
    return x + blk.drop_path1(blk.ls1(out)), stats


def mlp_residual(blk: Block, x: torch.Tensor) -> torch.Tensor:
    """The second half of timm's ``Block.forward``: ``x + drop_path2(ls2(mlp(norm2(x))))``."""
    return x + blk.drop_path2(blk.ls2(blk.mlp(blk.norm2(x))))


@dataclass(frozen=True)
class BlockOps:
    """How a patched block of one timm block class computes its two residuals, split where EViT reduces.

    ``attention_residual(blk, x, needs, bias, position) -> (x, stats)``: the residual stream after the attention
    residual, and the statistics ``needs`` asks for (``cls_attn``, ``attn``, ``keys``); ``bias`` is an additive
    logit bias over keys (ToMe's ``log(size)``), ``position`` what the family's attention reads of the tokens'
    positions. ``mlp_residual(blk, x) -> x``: the rest of the block.
    """

    attention_residual: Callable
    mlp_residual: Callable


class PruningBlockMixin:
    """What every patched block adds to its timm class: called directly it is the timm block; called by
    :func:`run_blocks` with a call's bookkeeping (``_tp_call``) it reduces tokens where the schedule says."""

    _tp_state: PruneState
    _tp_index: int
    _tp_ops: BlockOps

    def forward(self, x: torch.Tensor, *args, _tp_call: Optional[_Call] = None, **kwargs) -> torch.Tensor:
        if _tp_call is None:
            return super().forward(x, *args, **kwargs)
        return _block_step(self, x, _tp_call)


class PruningBlock(PruningBlockMixin, Block):
    """timm ``Block`` that may reduce tokens between its attention and MLP residuals."""

    _tp_ops = BlockOps(attention_residual, mlp_residual)


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
        raise ValueError(f"scorer, reducer: {' and '.join(who)} read [CLS] attention and this model has no class token; "
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
