"""The ViT families whose attention reads token positions: timm's ``Eva`` (EVA-02, the rope ViTs) and
``VisionTransformerRelPos`` (relative position bias), registered with :func:`~tokenprune.core.patch.register_family`.

Their blocks take a positional argument that timm computes once per forward pass for the full grid: a rotary
embedding (Eva's ``rope``, ``[N_patches, 2 d]`` or per block for ``rope_type='mixed'``) or a relative position bias
(``[1, H, N0, N0]`` over every original token, prefix included: each attention's own ``rel_pos`` or the model's
``shared_rel_pos``). Once tokens are reduced, the tokens left are no longer the grid, so the forward pass tracks
each token's source map (which original tokens it stands for; :func:`~tokenprune.core.block_forward.run_blocks` with a
``position`` hook) and gives each block the positional argument of the tokens it holds.

The position rule:

* a token that stands for exactly one original token (a kept patch, a prefix token) keeps that token's position:
  its rope row, its rows and columns of the relative position bias;
* a token that stands for several (EViT's fused token, a ToMe merge, a BAT cluster) carries no position: rope
  leaves it unrotated (sin 0, cos 1, as Eva leaves its prefix tokens), and the relative position bias gives it
  the class token's rows and columns where the model has a class token, zero where it has none.

Before anything is reduced each block gets timm's own argument unchanged, so an unpruned model computes what timm
computes. ToMe's matching metric (``keys``) for these families is the keys after q/k norm and before rope: the
similarity of content, not of position (a rotated key of the same content differs from patch to patch).

Eva's ``forward_features`` is timm's: ``_pos_embed`` (absolute embedding, prefix tokens, patch dropout with its
rope rows) computes the rope once per call; ``rope_mixed`` models index it per block. Blocks ``EvaBlock`` and
``EvaBlockPostNorm``, attentions ``EvaAttention`` (fused qkv with separate biases, or separate projections) and
``AttentionRope`` (``attn_type='rope'``, grouped-query included).
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from timm.layers import apply_rot_embed_cat
from timm.layers.attention import AttentionRope
from timm.models.eva import Eva, EvaAttention, EvaBlock, EvaBlockPostNorm
from timm.models.vision_transformer_relpos import (RelPosAttention, RelPosBlock, ResPostRelPosBlock,
                                                   VisionTransformerRelPos)

from tokenprune.core.block_forward import BlockOps, PruningBlockMixin, attend_with_stats, mlp_residual, run_blocks
from tokenprune.core.patch import Family, register_family

__all__ = [
    "token_positions",
    "gather_rope",
    "gather_rel_pos_bias",
    "RopePositions",
    "RelPosPositions",
    "PrunedBias",
    "eva_attention_with_stats",
    "relpos_attention_with_stats",
    "PruningEvaBlock",
    "PruningEvaBlockPostNorm",
    "PruningRelPosBlock",
    "PruningResPostRelPosBlock",
]


def token_positions(source: torch.Tensor) -> torch.Tensor:
    """The original token each current token stands for, from its source map ``[B, N, N0]``: ``[B, N]`` indices
    into the original tokens, -1 for a token that stands for several (the position rule: it has none)."""
    nonzero = source != 0
    single = nonzero.sum(-1) == 1
    return torch.where(single, nonzero.to(torch.uint8).argmax(-1), torch.full_like(single, -1, dtype=torch.long))


def gather_rope(rope: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """The rope rows of tokens at patch positions ``pos`` (``[B, M]``, -1: no position), as
    ``apply_rot_embed_cat`` broadcasts them over heads: ``[B, L, M, 2 d]`` (``L`` = 1, or the heads of a
    per-head rope). ``rope`` is ``[N, 2 d]``, ``[H, N, 2 d]`` (mixed), or either with a batch dimension in front
    (after patch dropout: ``[B, 1, N, 2 d]``, ``[B, H, N, 2 d]``). A token without a position gets the identity
    row: sin 0, cos 1 (``apply_rot_embed_cat`` reads ``sin, cos = emb.chunk(2, -1)``)."""
    r = rope[None, None] if rope.dim() == 2 else rope[None] if rope.dim() == 3 else rope
    b, m = pos.shape
    r = r.expand(b, *r.shape[1:])
    idx = pos.clamp(min=0)[:, None, :, None].expand(b, r.shape[1], m, r.shape[-1])
    rows = torch.gather(r, 2, idx)
    half = r.shape[-1] // 2
    identity = torch.cat([rows.new_zeros(half), rows.new_ones(half)])
    return torch.where((pos < 0)[:, None, :, None], identity, rows)


def gather_rel_pos_bias(bias: torch.Tensor, pos: torch.Tensor, has_class_token: bool) -> torch.Tensor:
    """The relative position bias between tokens at positions ``pos`` (``[B, M]`` over the original tokens,
    prefix included; -1: no position): ``bias[:, :, pos, pos]`` as ``[B, H, M, M]``. A token without a position
    takes the class token's rows and columns (index 0) where the model has one, zeros where it has none."""
    n0 = bias.shape[-1]
    if has_class_token:
        pos = pos.clamp(min=0)
    else:
        bias = F.pad(bias, (0, 1, 0, 1))  # a row and column of zeros at index n0 for tokens without a position
        pos = torch.where(pos < 0, torch.full_like(pos, n0), pos)
    b, m = pos.shape
    full = bias.expand(b, *bias.shape[1:])
    h, n = full.shape[1], full.shape[-1]
    rows = torch.gather(full, 2, pos[:, None, :, None].expand(b, h, m, n))
    return torch.gather(rows, 3, pos[:, None, None, :].expand(b, h, m, m))


class _PositionHook:
    """A ``position(block_index, source)`` hook for one forward pass: timm's own argument while the tokens are
    still the ones that entered the first block (the same source map), else that of the tokens held. The
    positions of a source map are computed once (blocks between reductions share them)."""

    def __init__(self) -> None:
        self.initial: Optional[torch.Tensor] = None
        self._cached: tuple = (None, None)

    def unreduced(self, index: int, source: torch.Tensor) -> bool:
        if index == 0:
            self.initial = source
        return source is self.initial

    def positions(self, source: torch.Tensor) -> torch.Tensor:
        if self._cached[0] is not source:
            self._cached = (source, token_positions(source))
        return self._cached[1]


class RopePositions(_PositionHook):
    """Eva's rope for the tokens each block holds (:func:`gather_rope`); ``rope`` as ``Eva._pos_embed`` returns
    it (per block in front for ``rope_mixed``)."""

    def __init__(self, rope: Optional[torch.Tensor], mixed: bool, num_prefix_tokens: int) -> None:
        super().__init__()
        self.rope, self.mixed, self.num_prefix_tokens = rope, mixed, num_prefix_tokens

    def __call__(self, index: int, source: torch.Tensor) -> Optional[torch.Tensor]:
        rope = self.rope[index] if self.mixed and self.rope is not None else self.rope
        if rope is None or self.unreduced(index, source):
            return rope
        p = self.num_prefix_tokens
        pos = self.positions(source)[:, p:]
        return gather_rope(rope, torch.where(pos < 0, pos, pos - p))  # rope rows count patches only


class PrunedBias:
    """The relative position bias of the tokens a block holds once tokens were reduced (``[B, H, M, M]``), in
    place of what timm's attention reads (its ``rel_pos`` or the shared bias)."""

    def __init__(self, bias: torch.Tensor) -> None:
        self.bias = bias


class RelPosPositions(_PositionHook):
    """The relative position bias for the tokens each block holds: timm's ``shared_rel_pos`` argument while
    nothing is reduced, else a :class:`PrunedBias` gathered from the block's own ``rel_pos`` or the shared one
    (:func:`gather_rel_pos_bias`)."""

    def __init__(self, blocks, shared_rel_pos: Optional[torch.Tensor], has_class_token: bool) -> None:
        super().__init__()
        self.blocks, self.shared, self.has_class_token = blocks, shared_rel_pos, has_class_token

    def __call__(self, index: int, source: torch.Tensor):
        if self.unreduced(index, source):
            return self.shared
        rel_pos = self.blocks[index].attn.rel_pos
        full = rel_pos.get_bias() if rel_pos is not None else self.shared
        if full is None:
            return None
        return PrunedBias(gather_rel_pos_bias(full, self.positions(source), self.has_class_token))


def _eva_qkv(attn: EvaAttention | AttentionRope, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """q, k, v (``[B, heads, N, d]``; k and v with the key/value heads) as ``EvaAttention`` / ``AttentionRope``
    project them (timm 1.0.x): fused qkv with Eva's separate biases, or three projections."""
    B, N, _ = x.shape
    if attn.qkv is not None:
        q_bias = getattr(attn, "q_bias", None)
        if q_bias is None:
            qkv = attn.qkv(x)
        else:
            qkv_bias = torch.cat((attn.q_bias, attn.k_bias, attn.v_bias))
            if attn.qkv_bias_separate:
                qkv = attn.qkv(x)
                qkv += qkv_bias
            else:
                qkv = F.linear(x, weight=attn.qkv.weight, bias=qkv_bias)
        return qkv.reshape(B, N, 3, attn.num_heads, -1).permute(2, 0, 3, 1, 4).unbind(0)
    kv_heads = getattr(attn, "num_kv_heads", attn.num_heads)
    return (attn.q_proj(x).reshape(B, N, attn.num_heads, -1).transpose(1, 2),
            attn.k_proj(x).reshape(B, N, kv_heads, -1).transpose(1, 2),
            attn.v_proj(x).reshape(B, N, kv_heads, -1).transpose(1, 2))


def eva_attention_with_stats(attn: EvaAttention | AttentionRope, x: torch.Tensor, needs: frozenset = frozenset(),
                             attn_bias: Optional[torch.Tensor] = None, rope: Optional[torch.Tensor] = None
                             ) -> tuple[torch.Tensor, dict]:
    """timm ``EvaAttention.forward`` / ``AttentionRope.forward`` (timm 1.0.x) that also returns the statistics
    ``needs`` asks for (``cls_attn``, ``attn`` from the rotated queries and keys; ``keys`` after q/k norm and
    before rope, ``[B, H, N, d]``), with an additive ``attn_bias`` over keys (ToMe's ``log(size)``) and the
    ``rope`` of the tokens held (:class:`RopePositions`)."""
    B, N, _ = x.shape
    gate = attn.gate(x).sigmoid() if attn.gate is not None else None
    q, k, v = _eva_qkv(attn, x)
    q, k = attn.q_norm(q), attn.k_norm(k)
    groups = getattr(attn, "num_kv_groups", 1)
    keys = k.repeat_interleave(groups, dim=1) if groups > 1 else k
    if rope is not None:
        npt, half = attn.num_prefix_tokens, getattr(attn, "rotate_half", False)
        q = torch.cat([q[:, :, :npt, :], apply_rot_embed_cat(q[:, :, npt:, :], rope, half=half)], dim=2).type_as(v)
        k = torch.cat([k[:, :, :npt, :], apply_rot_embed_cat(k[:, :, npt:, :], rope, half=half)], dim=2).type_as(v)
    if groups > 1:
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    out, stats = attend_with_stats(attn, q, k, v, needs, attn_bias)
    if "keys" in needs:
        stats["keys"] = keys
    out = out.transpose(1, 2).reshape(B, N, -1)
    out = attn.norm(out)
    if gate is not None:
        out = out * gate
    return attn.proj_drop(attn.proj(out)), stats


def _eva_attention(blk, x: torch.Tensor, needs: frozenset, bias, rope) -> tuple[torch.Tensor, dict]:
    if not needs and bias is None:
        return blk.attn(x, rope=rope), {}
    return eva_attention_with_stats(blk.attn, x, needs, bias, rope)


def eva_attention_residual(blk: EvaBlock, x: torch.Tensor, needs: frozenset = frozenset(),
                           bias: Optional[torch.Tensor] = None, position: Optional[torch.Tensor] = None
                           ) -> tuple[torch.Tensor, dict]:
    """The first half of timm's ``EvaBlock.forward``: ``x + drop_path1(gamma_1 * attn(norm1(x), rope))``."""
    out, stats = _eva_attention(blk, blk.norm1(x), needs, bias, position)
    if blk.gamma_1 is not None:
        out = blk.gamma_1 * out
    return x + blk.drop_path1(out), stats


def eva_mlp_residual(blk: EvaBlock, x: torch.Tensor) -> torch.Tensor:
    """The second half of timm's ``EvaBlock.forward``: ``x + drop_path2(gamma_2 * mlp(norm2(x)))``."""
    out = blk.mlp(blk.norm2(x))
    if blk.gamma_2 is not None:
        out = blk.gamma_2 * out
    return x + blk.drop_path2(out)


def eva_post_norm_attention_residual(blk: EvaBlockPostNorm, x: torch.Tensor, needs: frozenset = frozenset(),
                                     bias: Optional[torch.Tensor] = None, position: Optional[torch.Tensor] = None
                                     ) -> tuple[torch.Tensor, dict]:
    """The first half of timm's ``EvaBlockPostNorm.forward``: ``x + drop_path1(norm1(attn(x, rope)))``."""
    out, stats = _eva_attention(blk, x, needs, bias, position)
    return x + blk.drop_path1(blk.norm1(out)), stats


def post_norm_mlp_residual(blk: EvaBlockPostNorm | ResPostRelPosBlock, x: torch.Tensor) -> torch.Tensor:
    """The second half of timm's post-norm blocks (``EvaBlockPostNorm``, ``ResPostRelPosBlock``):
    ``x + drop_path2(norm2(mlp(x)))``."""
    return x + blk.drop_path2(blk.norm2(blk.mlp(x)))


class PruningEvaBlock(PruningBlockMixin, EvaBlock):
    """timm ``EvaBlock`` that may reduce tokens between its attention and MLP residuals."""

    _tp_ops = BlockOps(eva_attention_residual, eva_mlp_residual)


class PruningEvaBlockPostNorm(PruningBlockMixin, EvaBlockPostNorm):
    """timm ``EvaBlockPostNorm`` that may reduce tokens between its attention and MLP residuals."""

    _tp_ops = BlockOps(eva_post_norm_attention_residual, post_norm_mlp_residual)


def _refuse_masks(model: torch.nn.Module, attn_mask, is_causal: bool) -> bool:
    """Whether to run timm's own masked forward pass (nothing pruned); refused while pruning."""
    if attn_mask is None and not is_causal:
        return False
    if model._tokenprune.prunes:
        raise ValueError("attn_mask, is_causal: not supported together with token reduction (set "
                         "model.keep_rate = 1.0 to run timm's masked forward pass)")
    return True


def _eva_forward_features(model: Eva, x: torch.Tensor, attn_mask: Optional[torch.Tensor] = None,
                          is_causal: bool = False) -> torch.Tensor:
    """timm's ``Eva.forward_features`` (timm 1.0.x) with the blocks run by :func:`run_blocks`, each given the
    rope of the tokens it holds (:class:`RopePositions`)."""
    if _refuse_masks(model, attn_mask, is_causal):
        return super(type(model), model).forward_features(x, attn_mask=attn_mask, is_causal=is_causal)
    x = model.patch_embed(x)
    x, rope = model._pos_embed(x)
    x = model.norm_pre(x)
    hook = None if rope is None else RopePositions(rope, bool(getattr(model, "rope_mixed", False)),
                                                   model.num_prefix_tokens)
    x = run_blocks(model.blocks, x, model._tokenprune, checkpointing=model.grad_checkpointing, position=hook)
    return model.norm(x)


def relpos_attention_with_stats(attn: RelPosAttention, x: torch.Tensor, needs: frozenset = frozenset(),
                                attn_bias: Optional[torch.Tensor] = None, position=None) -> tuple[torch.Tensor, dict]:
    """timm ``RelPosAttention.forward`` (timm 1.0.x) that also returns the statistics ``needs`` asks for, with an
    additive ``attn_bias`` over keys (ToMe's ``log(size)``). ``position`` is timm's ``shared_rel_pos`` argument
    while nothing is reduced (the attention's own ``rel_pos`` wins, as in timm) or a :class:`PrunedBias`."""
    B, N, C = x.shape
    q, k, v = attn.qkv(x).reshape(B, N, 3, attn.num_heads, attn.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
    q, k = attn.q_norm(q), attn.k_norm(k)
    if isinstance(position, PrunedBias):
        pos_bias = position.bias
    else:
        pos_bias = attn.rel_pos.get_bias() if attn.rel_pos is not None else position
    if attn_bias is not None:
        pos_bias = attn_bias if pos_bias is None else pos_bias + attn_bias.to(pos_bias.dtype)
    out, stats = attend_with_stats(attn, q, k, v, needs, pos_bias)
    if "keys" in needs:
        stats["keys"] = k
    out = out.transpose(1, 2).reshape(B, N, C)
    return attn.proj_drop(attn.proj(out)), stats


def _relpos_attention(blk, x: torch.Tensor, needs: frozenset, bias, position) -> tuple[torch.Tensor, dict]:
    if not needs and bias is None and not isinstance(position, PrunedBias):
        return blk.attn(x, shared_rel_pos=position), {}
    return relpos_attention_with_stats(blk.attn, x, needs, bias, position)


def relpos_attention_residual(blk: RelPosBlock, x: torch.Tensor, needs: frozenset = frozenset(),
                              bias: Optional[torch.Tensor] = None, position=None) -> tuple[torch.Tensor, dict]:
    """The first half of timm's ``RelPosBlock.forward``: ``x + drop_path1(ls1(attn(norm1(x), shared_rel_pos)))``."""
    out, stats = _relpos_attention(blk, blk.norm1(x), needs, bias, position)
    return x + blk.drop_path1(blk.ls1(out)), stats


def res_post_relpos_attention_residual(blk: ResPostRelPosBlock, x: torch.Tensor, needs: frozenset = frozenset(),
                                       bias: Optional[torch.Tensor] = None, position=None
                                       ) -> tuple[torch.Tensor, dict]:
    """The first half of timm's ``ResPostRelPosBlock.forward``: ``x + drop_path1(norm1(attn(x, shared_rel_pos)))``."""
    out, stats = _relpos_attention(blk, x, needs, bias, position)
    return x + blk.drop_path1(blk.norm1(out)), stats


class PruningRelPosBlock(PruningBlockMixin, RelPosBlock):
    """timm ``RelPosBlock`` that may reduce tokens between its attention and MLP residuals."""

    _tp_ops = BlockOps(relpos_attention_residual, mlp_residual)


class PruningResPostRelPosBlock(PruningBlockMixin, ResPostRelPosBlock):
    """timm ``ResPostRelPosBlock`` that may reduce tokens between its attention and MLP residuals."""

    _tp_ops = BlockOps(res_post_relpos_attention_residual, post_norm_mlp_residual)


def _relpos_forward_features(model: VisionTransformerRelPos, x: torch.Tensor) -> torch.Tensor:
    """timm's ``VisionTransformerRelPos.forward_features`` (timm 1.0.x) with the blocks run by :func:`run_blocks`,
    each given the relative position bias of the tokens it holds (:class:`RelPosPositions`)."""
    x = model.patch_embed(x)
    if model.cls_token is not None:
        x = torch.cat((model.cls_token.expand(x.shape[0], -1, -1), x), dim=1)
    shared = model.shared_rel_pos.get_bias() if model.shared_rel_pos is not None else None
    hook = RelPosPositions(model.blocks, shared, model.cls_token is not None)
    x = run_blocks(model.blocks, x, model._tokenprune, checkpointing=model.grad_checkpointing, position=hook)
    return model.norm(x)


register_family(Family("eva", Eva, {EvaBlock: PruningEvaBlock, EvaBlockPostNorm: PruningEvaBlockPostNorm},
                       (EvaAttention, AttentionRope), _eva_forward_features))
register_family(Family("relpos", VisionTransformerRelPos,
                       {RelPosBlock: PruningRelPosBlock, ResPostRelPosBlock: PruningResPostRelPosBlock},
                       (RelPosAttention,), _relpos_forward_features))
