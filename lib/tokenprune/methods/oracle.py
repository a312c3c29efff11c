"""Token selection guided by an oracle ViT's [CLS] attention (EViT, Liang et al., ICLR 2022, Appendix, Table 14).

EViT's appendix asks whether a better attention map lets pruning start earlier: it takes the [CLS]
attention of the *last* block of a separate, well-trained ViT (DINO), keeps the patches with the top 50 %
of that attention already at the first block of EViT-DeiT-S, and reports accuracy next to the "Combined
MACs" (oracle forward + pruned model). This module provides the three pieces:

1. :func:`oracle_cls_attention` -- the oracle's [CLS] attention of one block (default: the last), head
   mean, over its patch tokens, as a ``[B, gh, gw]`` map. It is ``softmax(q_cls K^T / sqrt(d))`` of that
   block, computed by :func:`tokenprune.core.block_forward.attention_with_stats` from the block's attention input
   (captured by a forward hook), so it is exactly what EViT's ``cls_attention`` scorer reads.
2. :func:`resample_map` -- that map moved onto the pruned model's patch grid (area average when the
   target grid is coarser, i.e. the attention each target patch's area receives on average; bilinear when
   finer), flattened in raster order: ``[B, gh * gw]``.
3. The scorer ``oracle_attention`` (registered here) and the ways to hand it one map per image:
   the maps live in the pruned model's shared ``PruneState.extras[ORACLE_KEY]``.
   :func:`oracle_feed` is a context manager that feeds precomputed maps batch by batch, in order, to every
   forward pass of the model (so :func:`tokenprune.measure.evaluation.predict` and ``prune_sweep`` work unchanged);
   :class:`OracleGuided` wraps a pruned model and an oracle function and computes the maps on the fly.

The scorer of a token is the oracle attention of the original patches it stands for (the sum over its
``source`` row): before any reduction this is the oracle map itself; after a fusion, the fused token carries
the summed attention of the patches fused into it. Later locations therefore need the source map, which
:func:`oracle_feed` and :class:`OracleGuided` switch on (``trace``) for the duration.

Example::

    maps = resample_map(oracle_cls_attention(vit_s14, to_oracle(images)), small_vit.patch_embed.grid_size)
    patch(small_vit, keep_rate=0.5, locations=(1,), scorer="oracle_attention")
    with oracle_feed(small_vit, maps):
        preds = evaluation.predict(small_vit, images, labels, batch=256)
"""
from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Optional, Sequence

import torch
import torch.nn.functional as F

from tokenprune.core.block_forward import attention_with_stats
from tokenprune.core.patch import accepts_any_img_size, prune_state
from tokenprune.core.scorers import TokenContext, register_scorer

__all__ = ["ORACLE_KEY", "oracle_cls_attention", "resample_map", "set_oracle_map", "oracle_feed",
           "OracleGuided", "oracle_attention", "combined_macs"]

#: key of the per-batch oracle map ``[B, N0 - p]`` in ``PruneState.extras``
ORACLE_KEY = "oracle_map"


def oracle_cls_attention(oracle: torch.nn.Module, images: torch.Tensor, block: int = -1, batch: int = 64,
                         dtype: str = "fp32") -> torch.Tensor:
    """Head-mean [CLS] attention of ``oracle``'s block ``block`` (default: the last) to each patch token.

    Args:
        oracle: a timm ``VisionTransformer`` (patched or not) whose blocks have a timm ``Attention``.
        images: ``[B, C, H, W]`` inputs ready for the oracle (its size and normalisation).
        block: index into ``oracle.blocks`` (Python convention: ``-1`` is the last block).
        batch: images per forward pass.
        dtype: ``fp32`` or ``bf16`` (autocast) for the oracle's forward.

    Returns ``[B, gh, gw]`` float32 maps on the oracle's own patch grid; each row of the softmax sums to 1
    over all tokens, so a map sums to 1 minus the attention [CLS] pays to the prefix tokens.
    """
    if dtype not in ("fp32", "bf16"):
        raise ValueError(f"dtype: unknown {dtype!r}; accepted: ['fp32', 'bf16']")
    blocks = list(oracle.blocks)
    if not -len(blocks) <= block < len(blocks):
        raise ValueError(f"block: {block} is outside this {len(blocks)}-block oracle")
    attn_mod = blocks[block].attn
    p = oracle.num_prefix_tokens
    captured: list[torch.Tensor] = []

    def hook(module, args, output):
        _, stats = attention_with_stats(module, args[0], frozenset({"cls_attn"}))
        captured.append(stats["cls_attn"][:, :, p:].float().mean(dim=1))

    handle = attn_mod.register_forward_hook(hook)
    was_training = oracle.training
    oracle.eval()
    dev = next(oracle.parameters()).device
    ctx = torch.autocast(dev.type, dtype=torch.bfloat16) if dtype == "bf16" else contextlib.nullcontext()
    try:
        with torch.inference_mode(), ctx:
            for i in range(0, len(images), batch):
                oracle(images[i:i + batch].to(dev))
    finally:
        handle.remove()
        oracle.train(was_training)
    if not captured:
        raise RuntimeError(f"oracle: block {block}'s attention module was not called; run the oracle unpruned "
                           "(a patched block at a reduction location computes attention without calling it)")
    maps = torch.cat(captured).cpu()
    gh, gw = oracle.patch_embed.dynamic_feat_size(images.shape[-2:]) if accepts_any_img_size(oracle) else \
        oracle.patch_embed.grid_size
    if maps.shape[1] != gh * gw:
        raise RuntimeError(f"oracle: {maps.shape[1]} patch tokens do not form its {gh}x{gw} grid")
    return maps.reshape(-1, gh, gw)


def resample_map(maps: torch.Tensor, size: Sequence[int]) -> torch.Tensor:
    """Move ``[B, h, w]`` attention maps onto a ``size = (gh, gw)`` patch grid, flattened: ``[B, gh * gw]``.

    A coarser target takes the area average (``F.interpolate(mode="area")``: each target patch gets the mean
    attention of the oracle patches its area covers, fractional overlaps weighted); a finer or equal one
    bilinear interpolation (``align_corners=False``). Only the ranking matters to the scorer; the average keeps
    the scale of one patch's attention.
    """
    if maps.dim() != 3:
        raise ValueError(f"maps: expected [B, h, w], got shape {tuple(maps.shape)}")
    gh, gw = (int(size[0]), int(size[1]))
    if gh < 1 or gw < 1:
        raise ValueError(f"size: expected a positive (gh, gw), got {tuple(size)}")
    h, w = maps.shape[1:]
    x = maps.float().unsqueeze(1)
    if (gh, gw) == (h, w):
        out = x
    elif gh <= h and gw <= w:
        out = F.interpolate(x, size=(gh, gw), mode="area")
    else:
        out = F.interpolate(x, size=(gh, gw), mode="bilinear", align_corners=False)
    return out.reshape(maps.shape[0], gh * gw)


def set_oracle_map(model: torch.nn.Module, maps: Optional[torch.Tensor]) -> None:
    """Put ``[B, N0 - p]`` oracle scores (the pruned model's patch grid, raster order) where the scorer reads
    them, for the next forward pass of ``model`` (a patched model); ``None`` removes them."""
    extras = prune_state(model).extras
    if maps is None:
        extras.pop(ORACLE_KEY, None)
        return
    if maps.dim() != 2:
        raise ValueError(f"maps: expected [B, num_patches], got shape {tuple(maps.shape)}")
    extras[ORACLE_KEY] = maps


@contextlib.contextmanager
def _traced(model: torch.nn.Module) -> Iterator[None]:
    st = prune_state(model)
    old = st.trace
    st.trace = True
    try:
        yield
    finally:
        st.trace = old
        set_oracle_map(model, None)


@contextlib.contextmanager
def oracle_feed(model: torch.nn.Module, maps: torch.Tensor, check_all_used: bool = True) -> Iterator[None]:
    """Feed precomputed oracle maps ``[N, num_patches]`` to ``model``'s forward passes, in order.

    Each forward pass with a batch of ``B`` images receives the next ``B`` rows of ``maps`` (a forward
    pre-hook on the model), so any loop that runs the images in their order and in batches (e.g.
    :func:`tokenprune.measure.evaluation.predict`) gets each image's own map. Tracing is switched on inside (the
    scorer needs the source map at later locations) and restored on exit. With ``check_all_used`` the exit
    raises if the forward passes did not consume exactly ``N`` rows (a sign that images and maps were not
    aligned). Raises inside a forward pass that asks for more rows than are left.
    """
    pos = 0

    def pre_hook(module, args):
        nonlocal pos
        b = args[0].shape[0]
        if pos + b > len(maps):
            raise RuntimeError(f"oracle_feed: a batch of {b} images asks for maps {pos}..{pos + b}, "
                               f"but only {len(maps)} were given")
        set_oracle_map(module, maps[pos:pos + b])
        pos += b

    handle = model.register_forward_pre_hook(pre_hook)
    try:
        with _traced(model):
            yield
    finally:
        handle.remove()
    if check_all_used and pos != len(maps):
        raise RuntimeError(f"oracle_feed: the forward passes used {pos} of {len(maps)} maps; images and maps "
                           "are not aligned")


class OracleGuided(torch.nn.Module):
    """A pruned model whose ``oracle_attention`` scorer gets each batch's maps from ``oracle_fn``.

    ``oracle_fn(x)`` takes the pruned model's input batch and returns ``[B, num_patches]`` scores on the
    pruned model's patch grid (e.g. ``lambda x: resample_map(oracle_cls_attention(oracle, to_oracle(x)),
    grid)``). The oracle's cost counts: see :func:`combined_macs`.
    """

    def __init__(self, model: torch.nn.Module, oracle_fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__()
        prune_state(model)  # fail early on an unpatched model
        self.model = model
        self.oracle_fn = oracle_fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        maps = self.oracle_fn(x)
        with _traced(self.model):
            set_oracle_map(self.model, maps)
            return self.model(x)


@register_scorer("oracle_attention",
                 reference="EViT Appendix, Table 14: select tokens by the last-block [CLS] attention of an oracle "
                           "ViT (DINO), head mean, from the first block")
def oracle_attention(ctx: TokenContext) -> torch.Tensor:
    """Oracle attention of the original patches each prunable token stands for (summed over its source row).

    Reads ``ctx.extras[ORACLE_KEY]``, ``[B, N0 - p]`` on the pruned model's original patch grid (set by
    :func:`oracle_feed`, :class:`OracleGuided` or :func:`set_oracle_map`)."""
    maps = ctx.extras.get(ORACLE_KEY)
    if maps is None:
        raise RuntimeError("scorer 'oracle_attention' needs per-image oracle maps in PruneState.extras"
                           f"[{ORACLE_KEY!r}]; run the model inside tokenprune.methods.oracle.oracle_feed(model, maps) "
                           "or wrap it in OracleGuided")
    b = ctx.x.shape[0]
    if maps.shape[0] != b:
        raise RuntimeError(f"scorer 'oracle_attention': {maps.shape[0]} oracle maps for a batch of {b} images")
    maps = maps.to(device=ctx.x.device, dtype=torch.float32)
    p = ctx.num_prefix_tokens
    if ctx.source is not None:
        src = ctx.source[:, p:, p:].float()
        if src.shape[-1] != maps.shape[1]:
            raise RuntimeError(f"scorer 'oracle_attention': oracle maps have {maps.shape[1]} patches, the model "
                               f"{src.shape[-1]}")
        return torch.einsum("bnm,bm->bn", src, maps)
    if ctx.num_prunable != maps.shape[1]:
        raise RuntimeError("scorer 'oracle_attention': tokens were reduced before this location and the model "
                           "does not trace sources; use oracle_feed/OracleGuided (they switch tracing on)")
    return maps


def combined_macs(oracle_macs: float, pruned_macs: float) -> float:
    """MACs of one oracle-guided prediction: the oracle's forward plus the pruned model's (Table 14's
    "Combined MACs"). Both must be counted for the same image (e.g. by
    :func:`tokenprune.measure.macs.analytic_macs`)."""
    if oracle_macs < 0 or pruned_macs < 0:
        raise ValueError("oracle_macs, pruned_macs: MACs cannot be negative")
    return float(oracle_macs) + float(pruned_macs)
