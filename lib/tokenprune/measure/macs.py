"""MACs of a (pruned) timm ViT: an analytic count and a measured one.

Both count multiply-accumulates of the matrix products (patch-embedding convolutions, linear layers,
the two attention products, the [CLS]-row scorer and the fusion sums); norms, activations, softmax and
other elementwise work (rotary position embeddings, LayerScale, pooling means, position-embedding
resampling) are not counted, as in the papers' counters (EViT used torchprofile at batch 1).
FLOPs = 2 x MACs; every function here returns MACs and says so.

The analytic count reads the model's structure rather than its name, for timm's ``VisionTransformer``
(class token or not, registers, ``global_pool`` 'token'/'avg'/'max'/''/'map'/'prr', hybrid CNN
embeddings), ``VisionTransformerDistilled``, ``Eva`` (EVA-02, the rope ViTs: fused or separate q/k/v,
grouped-query attention, SwiGLU/GLU MLPs) and ``VisionTransformerRelPos``: every ``nn.Linear`` counts
``rows x in x out`` for the rows (tokens) it sees, every attention ``2 n_q n_k A`` (``A``: heads x
head width), and a model holding a linear layer or a convolution outside the parts placed here, or an
attention whose products differ, is refused (:func:`check_countable`).

The measured count uses ``torch.utils.flop_counter.FlopCounterMode``. On the CPU, timm's fused
attention dispatches to ``aten._scaled_dot_product_flash_attention_for_cpu``, which that counter
does not know (it would silently count attention as 0): :data:`SDPA_CPU_FORMULA` supplies it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import torch
from torch import nn
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count
from timm.layers import Attention, AttentionPoolLatent, AttentionRope
from timm.layers.attention_pool import AttentionPoolPrr
from timm.models.eva import EvaAttention
from timm.models.vision_transformer import VisionTransformer
from timm.models.vision_transformer_relpos import RelPosAttention

from tokenprune.core.patch import check_img_size, class_token_of, prune_state
from tokenprune.core.schedule import EVIT_LOCATIONS, Schedule, num_keep
from tokenprune.core.state import PruneState

__all__ = ["MacCount", "analytic_macs", "measured_macs", "check_countable", "mac_table", "keep_rate_for_macs",
           "bracket_keep_rate", "SDPA_CPU_FORMULA", "SELF_ATTENTIONS", "ATTENTION_POOLS"]

aten = torch.ops.aten

#: attentions computing ``softmax(q k^T) v`` once over ``num_heads x head_dim`` (grouped k/v expanded to every
#: head): their products cost ``2 n_q n_k A`` (timm's differential attention, for one, costs more)
SELF_ATTENTIONS = (Attention, AttentionRope, EvaAttention, RelPosAttention)
#: timm's pooling heads counted here: a latent-query cross-attention (``'map'``) and PRR's parameter-free
#: self-attention (``'prr'``)
ATTENTION_POOLS = (AttentionPoolLatent, AttentionPoolPrr)
_WEIGHT_LAYERS = (nn.Linear, nn.modules.conv._ConvNd)
_SUPPORTED = "VisionTransformer, VisionTransformerDistilled, Eva or VisionTransformerRelPos"


def _sdpa_cpu_flops(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


#: FlopCounterMode custom mapping that counts the CPU fused-attention kernel (FLOPs, as the counter does)
SDPA_CPU_FORMULA = {aten._scaled_dot_product_flash_attention_for_cpu: _sdpa_cpu_flops}


@dataclass
class MacCount:
    """Analytic MACs of one forward pass of one image, with its parts: the patch embedding (a hybrid's CNN
    included), each block (its relative-position MLP included), the head (pooling attention included), the
    reducers' own work, and ``position``, a position-bias MLP shared by all blocks (``vit_srelpos_*``)."""

    total: int
    patch_embed: int
    blocks: list[int]
    head: int
    reduction: int
    tokens_in: list[int] = field(default_factory=list)
    tokens_out: list[int] = field(default_factory=list)
    position: int = 0

    @property
    def gmacs(self) -> float:
        return self.total / 1e9


def _is_under(name: str, roots: set[str]) -> bool:
    return any(name == r or name.startswith(r + ".") for r in roots)


def check_countable(model: nn.Module) -> None:
    """Refuse, with a TypeError naming the part, a model whose MACs :func:`analytic_macs` cannot place.

    A countable model has timm's ViT layout: ``patch_embed`` (a convolution ``proj``, optionally after a CNN
    ``backbone``), ``blocks`` each with an ``attn`` from :data:`SELF_ATTENTIONS` and an ``mlp``, an optional
    ``attn_pool`` from :data:`ATTENTION_POOLS`, ``head`` (and ``head_dist``); every linear layer and convolution
    lies in one of those parts (or a shared relative-position MLP), convolutions only in the patch embedding.
    """
    has_parts = all(hasattr(model, a) for a in ("patch_embed", "blocks", "head", "embed_dim", "num_prefix_tokens"))
    if not has_parts or not isinstance(getattr(model.patch_embed, "proj", None), (nn.Conv2d, nn.Identity)):
        raise TypeError(f"model: expected a timm ViT ({_SUPPORTED}) with a convolutional patch embedding, "
                        f"got {type(model).__name__}")
    for i, blk in enumerate(model.blocks):
        attn = getattr(blk, "attn", None)
        if not isinstance(attn, SELF_ATTENTIONS) or not isinstance(getattr(blk, "mlp", None), nn.Module):
            known = ", ".join(c.__name__ for c in SELF_ATTENTIONS)
            raise TypeError(f"model.blocks[{i}]: expected a block with .attn ({known}) and .mlp, got "
                            f"{type(blk).__name__} with attn {type(attn).__name__}")
        rel_pos = getattr(blk.attn, "rel_pos", None)
        if rel_pos is not None:
            _rel_pos_macs(rel_pos, f"model.blocks[{i}].attn.rel_pos")
    pool = getattr(model, "attn_pool", None)
    if pool is not None and not isinstance(pool, ATTENTION_POOLS):
        raise TypeError(f"model.attn_pool: expected one of {', '.join(c.__name__ for c in ATTENTION_POOLS)}, "
                        f"got {type(pool).__name__}")
    if getattr(model, "shared_rel_pos", None) is not None:
        _rel_pos_macs(model.shared_rel_pos, "model.shared_rel_pos")
    placed = {"patch_embed", "attn_pool", "head", "head_dist", "shared_rel_pos"}
    placed |= {f"blocks.{i}.{part}" for i in range(len(model.blocks)) for part in ("attn", "mlp")}
    for name, m in model.named_modules():
        if not isinstance(m, _WEIGHT_LAYERS):
            continue
        if not _is_under(name, placed) or (not isinstance(m, nn.Linear) and not _is_under(name, {"patch_embed"})):
            raise TypeError(f"model.{name}: a {type(m).__name__} outside the parts the analytic count places "
                            "(patch embedding, blocks' attn and mlp, attention pool, heads); count this model with "
                            "measured_macs")


def _linear_macs(module: Optional[nn.Module], rows: int, skip: Optional[nn.Module] = None) -> int:
    """``rows`` tokens through every ``nn.Linear`` of ``module`` (but those of ``skip``): ``rows x in x out``."""
    if module is None:
        return 0
    skipped = set(skip.modules()) if skip is not None else set()
    return rows * sum(m.in_features * m.out_features for m in module.modules()
                      if isinstance(m, nn.Linear) and m not in skipped)


def _rel_pos_macs(rel_pos: nn.Module, where: str = "rel_pos") -> int:
    """A relative-position module's MLP over its log-coordinate table (Swin-V2's continuous bias, timm's
    ``RelPosMlp``: one row per relative offset, ``(2h-1)(2w-1)`` rows); a bias table lookup costs nothing."""
    if not any(isinstance(m, nn.Linear) for m in rel_pos.modules()):
        return 0
    table = getattr(rel_pos, "rel_coords_log", None)
    if table is None or not isinstance(getattr(rel_pos, "mlp", None), nn.Module):
        raise TypeError(f"{where}: a {type(rel_pos).__name__} with linear layers but no mlp over a rel_coords_log "
                        "table; its cost is not known to the analytic count")
    return _linear_macs(rel_pos.mlp, table.shape[:-1].numel())


def _attention_width(attn: nn.Module) -> int:
    """Width ``A`` of the attention products: heads x head width."""
    return attn.num_heads * attn.head_dim


def _attention_macs(attn: nn.Module, n: int) -> int:
    """One self-attention over ``n`` tokens: its projections, ``q k^T`` and ``a v``, a relative-position MLP."""
    rel_pos = getattr(attn, "rel_pos", None)
    bias = _rel_pos_macs(rel_pos) if rel_pos is not None else 0
    return _linear_macs(attn, n, skip=rel_pos) + 2 * n * n * _attention_width(attn) + bias


def _pool_macs(pool: nn.Module, n: int) -> tuple[int, int]:
    """An attention pool over ``n`` tokens: its MACs and the rows it hands the head."""
    if isinstance(pool, AttentionPoolLatent):  # latent queries: kv over the tokens, the rest over the latents
        q = pool.latent_len
        macs = _linear_macs(pool, q, skip=pool.kv) + _linear_macs(pool.kv, n) + 2 * q * n * _attention_width(pool)
        return macs, 1 if pool.pool in ("token", "avg") else q
    return 2 * n * n * _attention_width(pool), 1  # AttentionPoolPrr: parameter-free self-attention, then pooled


def _head_macs(model: nn.Module, n: int, num_prefix: int) -> int:
    """Pooling attention and classifier(s) after the last block's ``n`` tokens. timm's ``VisionTransformer``
    drops the prefix tokens before its attention pool unless ``pool_include_prefix``; ``Eva`` pools them all;
    without pooling (``global_pool=''``) the classifier runs on every token."""
    pool, macs, rows = getattr(model, "attn_pool", None), 0, n
    if pool is not None:
        macs, rows = _pool_macs(pool, n if getattr(model, "pool_include_prefix", True) else n - num_prefix)
    elif getattr(model, "global_pool", "token"):
        rows = 1
    return macs + _linear_macs(model.head, rows) + _linear_macs(getattr(model, "head_dist", None), rows)


def _backbone_macs(backbone: nn.Module, in_chans: int, size: tuple[int, int]) -> tuple[int, tuple[int, int]]:
    """A hybrid embedding's CNN: every convolution and linear layer as output elements x the fan-in of its
    weight, output sizes read off a shape-only pass (fake tensors: nothing is computed), and its output grid."""
    total = 0

    def count(module, args, out):
        nonlocal total
        total += out.numel() * module.weight[0].numel()

    param = next(backbone.parameters())
    hooks = [m.register_forward_hook(count) for m in backbone.modules() if isinstance(m, _WEIGHT_LAYERS)]
    training = [(m, m.training) for m in backbone.modules()]
    try:
        backbone.eval()
        with torch.no_grad(), FakeTensorMode(allow_non_fake_inputs=True):
            out = backbone(torch.empty(1, in_chans, *size, dtype=param.dtype, device=param.device))
    finally:
        for h in hooks:
            h.remove()
        for m, was_training in training:
            m.training = was_training
    if isinstance(out, (list, tuple)):
        out = out[-1]  # timm's HybridEmbed takes the last feature map
    return int(total), (int(out.shape[-2]), int(out.shape[-1]))


def _in_chans(model: nn.Module) -> int:
    pe = model.patch_embed
    return getattr(pe, "in_chans", None) or pe.proj.in_channels


def _embedding(model: nn.Module, img_size) -> tuple[int, tuple[int, int]]:
    """MACs of the patch embedding on one image of ``img_size`` and the grid of patch tokens it outputs."""
    pe = model.patch_embed
    h, w = check_img_size(model, img_size) if img_size is not None else tuple(pe.img_size)
    macs = 0
    if getattr(pe, "backbone", None) is not None:
        macs, (h, w) = _backbone_macs(pe.backbone, _in_chans(model), (h, w))
    conv = pe.proj
    if not isinstance(conv, nn.Conv2d):  # a hybrid whose CNN outputs the embedding itself
        return macs, (h, w)
    kh, kw = conv.kernel_size
    sh, sw = conv.stride
    ph, pw = conv.padding
    if getattr(pe, "dynamic_img_pad", False):  # timm pads the input up to a multiple of the patch size
        h, w = -(-h // kh) * kh, -(-w // kw) * kw
    gh, gw = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    return macs + gh * gw * conv.out_channels * conv.weight[0].numel(), (gh, gw)


def _state(model: nn.Module) -> Optional[PruneState]:
    try:
        return prune_state(model)
    except ValueError:
        return None


def _schedule(model: nn.Module, st: Optional[PruneState], keep_rate) -> Schedule:
    """The model's schedule, or ``keep_rate`` at its locations (EViT's for an unpatched model)."""
    if keep_rate is None:
        return st.schedule if st is not None else Schedule({})
    if st is None:
        rates = keep_rate if isinstance(keep_rate, (list, tuple)) else [keep_rate]
        if all(isinstance(r, (int, float)) and r == 1.0 for r in rates):
            return Schedule({})
        if not class_token_of(model):
            raise ValueError("keep_rate: an unpatched model is counted as EViT, which prunes by [CLS] attention, and "
                             "this model has no class token; pass keep_rate=1.0 or count a patched model")
    return Schedule.build(len(model.blocks), keep_rate, st.schedule.locations if st is not None else EVIT_LOCATIONS)


def analytic_macs(model: nn.Module, img_size: Optional[int | Sequence[int]] = None,
                  keep_rate: Optional[float | Sequence[float]] = None) -> MacCount:
    """MACs of ``model`` (a timm ViT, patched or not: :func:`check_countable`) on one image of ``img_size``
    (default: the model's), pruned as configured.

    For a patched model the token count of every block follows its schedule and what its reducer
    outputs (:meth:`~tokenprune.core.reducers.ReducerSpec.output_tokens`, read off the reducer itself: a
    fused token or a cluster counts as a token, fewer pruned tokens than clusters give fewer clusters);
    ``keep_rate`` overrides the configured rate without touching the model (an unpatched model is then
    counted as EViT: blocks 4/7/10, [CLS] row, one fused token). The ``p`` prefix tokens (class, distillation,
    register tokens; the state's count for a patched model) are never pruned.
    Per block with ``n`` tokens into attention and ``m`` into the MLP: the attention's linear layers on ``n``
    rows (``3nDA + nAD`` for timm's), ``2n^2 A``, a relative-position MLP over its table, and the MLP's linear
    layers on ``m`` rows (``2mDF``, ``3mDF`` for SwiGLU); at a location the [CLS]-row scorer adds ``nA``
    (``q_cls K^T``) when the full map is not computed anyway, and fusion adds the weighted sum of the pruned
    tokens. The patch embedding counts its convolution(s) on the grid the model really has (a hybrid's CNN
    output); the head counts an attention pool and one row per classifier (every token without pooling).
    """
    check_countable(model)
    patch_embed, (gh, gw) = _embedding(model, img_size)
    st = _state(model)
    p = st.num_prefix_tokens if st is not None else model.num_prefix_tokens
    schedule = _schedule(model, st, keep_rate)
    # an unpatched model with a keep_rate override is counted as EViT ([CLS] row, one fused token)
    needs_full_map = st is not None and "attn" in st.needs
    needs_cls_row = st is None or "cls_attn" in st.needs
    d = model.embed_dim
    n = gh * gw
    blocks, tin, tout = [], [], []
    reduction = 0
    for i, blk in enumerate(model.blocks):
        n_in = n + p
        macs = _attention_macs(blk.attn, n_in)
        r = schedule.at(i)
        if r < 1.0 and num_keep(n, r) < n:
            k = num_keep(n, r)
            if not needs_full_map and needs_cls_row:
                reduction += n_in * _attention_width(blk.attn)  # q_cls . K^T next to the fused kernel
            if st is not None:
                reduction += st.reducer.cost(n, k, d, blk.attn.head_dim)
            else:
                reduction += (n - k) * d  # EViT's weighted sum of the pruned tokens
            n = st.reducer.output_tokens(n, k) if st is not None else k + 1
        n_out = n + p
        macs += _linear_macs(blk.mlp, n_out)
        blocks.append(macs)
        tin.append(n_in)
        tout.append(n_out)
    head = _head_macs(model, n + p, p)
    position = _rel_pos_macs(model.shared_rel_pos) if getattr(model, "shared_rel_pos", None) is not None else 0
    total = patch_embed + sum(blocks) + head + reduction + position
    return MacCount(total, patch_embed, blocks, head, reduction, tin, tout, position)


def measured_macs(model: torch.nn.Module, img_size: Optional[int | Sequence[int]] = None, in_chans: int = 3) -> int:
    """MACs of one forward pass at batch 1 counted by ``FlopCounterMode`` (FLOPs / 2), attention included.

    A timm ViT gets an image of ``img_size`` (default: its own) with its embedding's input channels (a hybrid's
    CNN's, not its projection's); another model a square ``img_size`` image with ``in_chans`` channels. The
    parameters stop requiring gradients while counting (the counter's module tracker would otherwise hook the
    gradient of a parameter used as an input, e.g. an attention pool's latent query, and fail in inference mode).
    """
    if hasattr(model, "patch_embed"):
        h, w = check_img_size(model, img_size) if img_size is not None else tuple(model.patch_embed.img_size)
        in_chans = _in_chans(model)
    else:
        h = w = img_size
    param = next(model.parameters())
    x = torch.zeros(1, in_chans, h, w, dtype=param.dtype, device=param.device)
    was_training = model.training
    grads = [(q, q.requires_grad) for q in model.parameters()]
    model.eval()
    try:
        for q, _ in grads:
            q.requires_grad_(False)
        with torch.inference_mode(), FlopCounterMode(display=False, custom_mapping=SDPA_CPU_FORMULA) as counter:
            model(x)
    finally:
        for q, req in grads:
            q.requires_grad_(req)
        model.train(was_training)
    return counter.get_total_flops() // 2


def bracket_keep_rate(macs_at: Callable[[float], int], target_macs: float, lo: float = 0.01,
                      tol: float = 1e-4) -> tuple[float, float]:
    """Bisection on the keep rate in ``[lo, 1]``: ``(a, b)`` with ``b - a <= tol``, ``macs_at(b) >= target_macs``
    and (unless ``a == lo``) ``macs_at(a) < target_macs``. ``macs_at(rate)`` must not decrease with the rate."""
    a, b = lo, 1.0
    while b - a > tol:
        mid = (a + b) / 2
        if macs_at(mid) >= target_macs:
            b = mid
        else:
            a = mid
    return a, b


def keep_rate_for_macs(model: VisionTransformer, target_macs: float, img_size=None,
                       lo: float = 0.01, tol: float = 1e-4) -> float:
    """Smallest keep rate (same at every location) whose analytic MACs reach ``target_macs``: the rate at
    which a method is compared with another at matched compute. Bisection; MACs grow with the rate."""
    if analytic_macs(model, img_size, keep_rate=1.0).total < target_macs:
        raise ValueError(f"target_macs: {target_macs:.4g} exceeds the unpruned model's MACs")
    return bracket_keep_rate(lambda r: analytic_macs(model, img_size, keep_rate=r).total, target_macs, lo, tol)[1]


def mac_table(model_name: str, keep_rates: Sequence[float], reducer: str = "fuse_attention",
              scorer: str = "cls_attention", locations: Sequence[int] = EVIT_LOCATIONS,
              measure: bool = True, **model_kwargs) -> list[dict]:
    """One row per keep rate: token counts per stage, analytic GMACs and (``measure``) counted GMACs.

    Weights are random: MACs and token counts do not depend on them. ``model_kwargs`` go to
    ``timm.create_model`` (e.g. ``img_size``).
    """
    import timm

    from tokenprune.core.patch import patch

    model = timm.create_model(model_name, pretrained=False, **model_kwargs).eval()
    patch(model, keep_rate=1.0, locations=locations, scorer=scorer, reducer=reducer)
    rows = []
    for r in keep_rates:
        model.keep_rate = r
        count = analytic_macs(model)
        st = prune_state(model)
        p = st.num_prefix_tokens
        stages = [count.tokens_in[0] - p] + [count.tokens_out[i] - p for i in sorted(st.schedule.keep_rates)]
        row = {"model": model_name, "keep_rate": r, "reducer": reducer, "scorer": scorer,
               "tokens": " -> ".join(str(s) for s in stages), "gmacs": count.total / 1e9}
        if measure:
            row["gmacs_measured"] = measured_macs(model) / 1e9
            row["rel_diff"] = (count.total - row["gmacs_measured"] * 1e9) / (row["gmacs_measured"] * 1e9)
        rows.append(row)
    return rows
