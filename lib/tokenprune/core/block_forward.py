"""The forward pass of a patched block: timm's ``Block.forward`` split where EViT reduces tokens (youweiliang/evit,
evit.py: inside the block, after the attention residual and before the MLP), and the run of the blocks that carries
each call's bookkeeping from block to block.

Only what the scorer and reducer ask for is computed: the [CLS] attention row alone (``q_cls . K^T``, O(N d)) next
to timm's fused attention, or the full attention map for scorers that need it. The residuals reproduce timm's
*current* forward exactly (LayerScale ``ls1``/``ls2``, q/k norm, attention output norm and gate, drop-path).

A forward pass owns its bookkeeping: :func:`run_blocks` hands each block the sizes, sources and random-generator
state that enter it in the call's own object, so gradient checkpointing (timm's ``set_grad_checkpointing``)
recomputes a block on exactly what its first pass saw and two threads calling one model cannot mix their
tokens. :func:`tokenprune.core.patch.prune_state` reports the last finished call.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch
import torch.nn.functional as F
import torch.utils.checkpoint
from timm.layers import Attention
from timm.models.vision_transformer import Block

from tokenprune.core.scorers import TokenContext
from tokenprune.core.state import PruneRecord, PruneState

__all__ = [
    "attend_with_stats",
    "attention_with_stats",
    "attention_residual",
    "mlp_residual",
    "BlockOps",
    "run_blocks",
    "PruningBlockMixin",
    "PruningBlock",
]


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
