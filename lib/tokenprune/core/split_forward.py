"""Split a timm ViT's forward pass at a reduction point, to prune many ways from one cached prefix.

Token pruning at a single location ``l`` (1-based, as :mod:`tokenprune.core.schedule`) happens inside block
``l``, after the attention residual and before the MLP (EViT, youweiliang/evit ``evit.py``; the same
place :class:`tokenprune.core.block_forward.PruningBlock` reduces). Everything before that point does not depend on
the scorer, the keep rate or the trained predictor head. This module therefore splits the forward pass:

* :func:`cache_tokens` runs the model once per image set and keeps, for each requested block, the
  tokens at that block's reduction point (``x_l = x + attn(norm1(x))``, ``[B, N, C]``) and the
  per-head [CLS] attention row of that block (``softmax(q_cls K^T / sqrt(d))``, ``[B, H, N]``, what
  EViT's ``cls_attention`` scorer reads), plus the full model's logits and pre-logit features;
* :func:`forward_from` finishes the forward pass from those tokens: optionally keeps only the
  prunable tokens ``keep_idx`` (EViT's selection without fusion, i.e. the ``drop`` reducer), or
  softly gates every prunable token by ``gate`` in ``(0, 1]`` (an additive ``log(gate)`` bias on the
  attention logits of every later block, so that ``gate -> 0`` is exactly dropping the token: the
  relaxation a predictor head is trained through), then the block's MLP, the later blocks, the final
  norm and the head;
* :func:`score_cached` / :func:`prune_cached` apply any registered scorer to cached tokens
  (a :class:`tokenprune.core.scorers.TokenContext` is built from the cache) and finish the forward pass.

The results equal those of a model patched with :func:`tokenprune.core.patch.patch` (one location, reducer
``drop``); ``tests/test_split.py`` checks this. The cost of a sweep over scorers and keep rates drops to
one prefix per image set plus the (pruned) suffix per configuration.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Sequence

import torch
from timm.models.vision_transformer import Block, VisionTransformer

from tokenprune.core.block_forward import attention_residual, mlp_residual
from tokenprune.core.reducers import gather_tokens
from tokenprune.core.schedule import num_keep
from tokenprune.core.scorers import ScorerSpec, TokenContext, get_scorer, select_topk
from tokenprune.core.precision import autocast

__all__ = ["SplitCache", "autocast", "cache_tokens", "forward_from", "score_cached", "prune_cached",
           "kept_source"]


def _check_model(model: torch.nn.Module) -> VisionTransformer:
    if not isinstance(model, VisionTransformer):
        raise TypeError(f"model: expected a timm VisionTransformer, got {type(model).__name__}")
    return model


def _check_block(model: VisionTransformer, block: int) -> int:
    depth = len(model.blocks)
    if isinstance(block, bool) or not isinstance(block, int) or not 1 <= block <= depth:
        raise ValueError(f"block: block numbers count from 1 and must lie in 1..{depth}, got {block!r}")
    return block


@dataclass
class SplitCache:
    """Tokens at the reduction point of some blocks, for one image set (CPU, float32).

    Attributes:
        tokens: block (1-based) -> ``[B, N, C]`` residual stream after that block's attention residual.
        cls_attn: block -> ``[B, H, N]`` per-head softmax attention row of the [CLS] token in that block.
        logits: ``[B, K]`` the full (unpruned) model's logits.
        features: ``[B, D]`` the full model's pre-logit features (pooled [CLS] after the final norm).
        num_prefix_tokens: tokens in front that are never pruned.
    """

    tokens: dict[int, torch.Tensor]
    cls_attn: dict[int, torch.Tensor]
    logits: torch.Tensor
    features: torch.Tensor
    num_prefix_tokens: int
    extras: dict = field(default_factory=dict)

    def __len__(self) -> int:
        return self.logits.shape[0]

    @property
    def blocks(self) -> tuple[int, ...]:
        return tuple(sorted(self.tokens))

    def context(self, block: int, index: slice | torch.Tensor = slice(None), extras: Optional[dict] = None,
                device: torch.device | str = "cpu") -> TokenContext:
        """A scorer context for images ``index`` at ``block`` (what a patched block would expose there)."""
        if block not in self.tokens:
            raise KeyError(f"block: {block} was not cached; cached blocks: {list(self.blocks)}")
        return TokenContext(x=self.tokens[block][index].to(device), num_prefix_tokens=self.num_prefix_tokens,
                            block_index=block - 1, cls_attn=self.cls_attn[block][index].to(device),
                            extras=dict(extras or {}))


def _prefix(model: VisionTransformer, images: torch.Tensor) -> torch.Tensor:
    x = model.patch_embed(images)
    x = model._pos_embed(x)
    x = model.patch_drop(x)
    return model.norm_pre(x)


def _head(model: VisionTransformer, x: torch.Tensor, features: bool = False):
    x = model.norm(x)
    feats = model.forward_head(x, pre_logits=True)
    logits = model.head(feats)
    return (logits, feats) if features else logits


def cache_tokens(model: torch.nn.Module, images: torch.Tensor, blocks: Sequence[int], batch: int = 128,
                 dtype: str = "fp32", device: Optional[str] = None) -> SplitCache:
    """Run ``model`` (unpruned) over ``images`` once and cache the tokens at the reduction point of ``blocks``.

    ``images`` are ready for the model (size, normalisation). A patched model is run as the plain timm model
    (its pruning configuration is ignored). Tokens are stored as float32 on the CPU.
    """
    model = _check_model(model)
    blocks = sorted({_check_block(model, b) for b in blocks})
    dev = torch.device(device or next(model.parameters()).device)
    was_training = model.training
    model.eval()
    toks: dict[int, list] = {b: [] for b in blocks}
    rows: dict[int, list] = {b: [] for b in blocks}
    logits, feats = [], []
    try:
        with torch.inference_mode(), autocast(dtype, dev):
            for i in range(0, len(images), batch):
                x = _prefix(model, images[i:i + batch].to(dev))
                for j, blk in enumerate(model.blocks):
                    if j + 1 in toks:
                        x, stats = attention_residual(blk, x, frozenset({"cls_attn"}))
                        toks[j + 1].append(x.float().cpu())
                        rows[j + 1].append(stats["cls_attn"].float().cpu())
                        x = mlp_residual(blk, x)
                    else:
                        x = Block.forward(blk, x)
                lg, ft = _head(model, x, features=True)
                logits.append(lg.float().cpu())
                feats.append(ft.float().cpu())
    finally:
        model.train(was_training)
    return SplitCache({b: torch.cat(v) for b, v in toks.items()}, {b: torch.cat(v) for b, v in rows.items()},
                      torch.cat(logits), torch.cat(feats), model.num_prefix_tokens)


def forward_from(model: torch.nn.Module, block: int, x: torch.Tensor, keep_idx: Optional[torch.Tensor] = None,
                 gate: Optional[torch.Tensor] = None, features: bool = False):
    """Finish the forward pass of ``model`` from the tokens ``x`` at block ``block``'s reduction point.

    Args:
        model: the timm ViT the tokens came from (its pruning configuration, if patched, is ignored).
        block: 1-based block whose attention residual produced ``x`` (``[B, N, C]``, prefix tokens first).
        keep_idx: ``[B, k]`` indices into the prunable tokens ``x[:, p:]`` to keep (the others are dropped),
            in the order they are kept (as ``select_topk`` returns them).
        gate: ``[B, N - p]`` soft keep weights in ``[0, 1]`` of the prunable tokens (prefix tokens: 1); every
            later attention adds ``log(gate)`` to its logits, so a token with gate 0 is invisible (dropped)
            and a token with gate 1 is untouched. Differentiable; exclusive with ``keep_idx``.
        features: also return the pre-logit features.

    Returns logits ``[B, K]`` (and features ``[B, D]``). Runs under the caller's grad / autocast mode.
    """
    model = _check_model(model)
    _check_block(model, block)
    if keep_idx is not None and gate is not None:
        raise ValueError("keep_idx, gate: pass one of them, not both")
    p = model.num_prefix_tokens
    if keep_idx is not None:
        x = torch.cat([x[:, :p], gather_tokens(x[:, p:], keep_idx.to(x.device))], dim=1)
    bias = None
    if gate is not None:
        if gate.shape != (x.shape[0], x.shape[1] - p):
            raise ValueError(f"gate: expected shape {(x.shape[0], x.shape[1] - p)}, got {tuple(gate.shape)}")
        full = torch.cat([gate.new_ones(x.shape[0], p), gate], dim=1)
        bias = full.log()[:, None, None, :]
    blocks = list(model.blocks)
    x = mlp_residual(blocks[block - 1], x)
    for blk in blocks[block:]:
        if bias is None:
            x = Block.forward(blk, x)
        else:
            x, _ = attention_residual(blk, x, frozenset(), bias)
            x = mlp_residual(blk, x)
    return _head(model, x, features)


def score_cached(cache: SplitCache, block: int, scorer: str | ScorerSpec, batch: int = 256,
                 extras: Optional[dict] = None, device: str = "cpu") -> torch.Tensor:
    """Scores ``[B, N - p]`` of a registered scorer on the cached tokens of ``block`` (float32, CPU).

    Only scorers that need nothing beyond the tokens and the [CLS] attention row work here (not
    ``tokens_to_tokens``, which needs the full attention map). ``extras`` is what the scorer reads from
    ``ctx.extras`` (e.g. ``{"predictors": ...}`` for ``learned``, ``{"generator": ...}`` for ``random``).
    """
    spec = get_scorer(scorer)
    missing = set(spec.needs) - {"cls_attn"}
    if missing:
        raise ValueError(f"scorer {spec.name!r} needs {sorted(missing)}, which a SplitCache does not hold")
    out = []
    with torch.inference_mode():
        for i in range(0, len(cache), batch):
            ctx = cache.context(block, slice(i, i + batch), extras, device)
            out.append(spec(ctx).float().cpu())
    return torch.cat(out)


def prune_cached(model: torch.nn.Module, cache: SplitCache, block: int, scores: torch.Tensor, keep_rate: float,
                 batch: int = 256, dtype: str = "fp32", device: Optional[str] = None,
                 run_model: bool = True) -> tuple[Optional[torch.Tensor], torch.Tensor]:
    """Keep the ``ceil(keep_rate * (N - p))`` best-scored prunable tokens at ``block`` (ties to the lower
    index, as :func:`tokenprune.core.scorers.select_topk`) and finish the forward pass from the cache.

    Returns ``(logits [B, K] or None when not run_model, keep_idx [B, k])``: the prediction of the model
    pruned once at ``block`` with reducer ``drop`` and the kept prunable-token indices (with one location
    these are original patch indices).
    """
    model = _check_model(model)
    n = cache.tokens[block].shape[1] - cache.num_prefix_tokens
    k = num_keep(n, keep_rate)
    keep_idx, _ = select_topk(scores, k)
    if not run_model:
        return None, keep_idx
    dev = torch.device(device or next(model.parameters()).device)
    out = []
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode(), autocast(dtype, dev):
            for i in range(0, len(cache), batch):
                out.append(forward_from(model, block, cache.tokens[block][i:i + batch].to(dev),
                                        keep_idx=keep_idx[i:i + batch].to(dev)).float().cpu())
    finally:
        model.train(was_training)
    return torch.cat(out), keep_idx


def kept_source(keep_idx: torch.Tensor, num_patches: int) -> torch.Tensor:
    """Source map ``[B, k, N0]`` of the kept tokens after one ``drop`` reduction: token ``t`` stands for
    original patch ``keep_idx[b, t]`` alone (what ``PruneState.source[:, p:, p:]`` holds then); the input of
    :func:`tokenprune.measure.coverage.part_coverage`."""
    return torch.nn.functional.one_hot(keep_idx.long(), num_patches).bool()
