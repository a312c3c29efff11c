"""MACs of a (pruned) timm ViT: an analytic count and a measured one.

Both count multiply-accumulates of the matrix products (patch-embedding convolution, linear layers,
the two attention products, the [CLS]-row scorer and the fusion sums); norms, activations and
softmax are not counted, as in the papers' counters (EViT used torchprofile at batch 1).
FLOPs = 2 x MACs; every function here returns MACs and says so.

The measured count uses ``torch.utils.flop_counter.FlopCounterMode``. On the CPU, timm's fused
attention dispatches to ``aten._scaled_dot_product_flash_attention_for_cpu``, which that counter
does not know (it would silently count attention as 0): :data:`SDPA_CPU_FORMULA` supplies it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import torch
from torch.utils.flop_counter import FlopCounterMode, sdpa_flop_count
from timm.models.vision_transformer import VisionTransformer

from tokenprune.core.patch import check_img_size
from tokenprune.core.schedule import EVIT_LOCATIONS, Schedule, num_keep

__all__ = ["MacCount", "analytic_macs", "measured_macs", "mac_table", "keep_rate_for_macs", "bracket_keep_rate", "SDPA_CPU_FORMULA"]

aten = torch.ops.aten


def _sdpa_cpu_flops(query_shape, key_shape, value_shape, *args, out_shape=None, **kwargs) -> int:
    return sdpa_flop_count(query_shape, key_shape, value_shape)


#: FlopCounterMode custom mapping that counts the CPU fused-attention kernel (FLOPs, as the counter does)
SDPA_CPU_FORMULA = {aten._scaled_dot_product_flash_attention_for_cpu: _sdpa_cpu_flops}


@dataclass
class MacCount:
    """Analytic MACs of one forward pass of one image, with its parts."""

    total: int
    patch_embed: int
    blocks: list[int]
    head: int
    reduction: int
    tokens_in: list[int] = field(default_factory=list)
    tokens_out: list[int] = field(default_factory=list)

    @property
    def gmacs(self) -> float:
        return self.total / 1e9


def _grid(model: VisionTransformer, img_size) -> tuple[int, int]:
    pe = model.patch_embed
    h, w = check_img_size(model, img_size) if img_size is not None else tuple(pe.img_size)
    conv = pe.proj
    kh, kw = conv.kernel_size
    sh, sw = conv.stride
    ph, pw = conv.padding
    if getattr(pe, "dynamic_img_pad", False):  # timm pads the input up to a multiple of the patch size
        h, w = -(-h // kh) * kh, -(-w // kw) * kw
    return (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1


def analytic_macs(model: VisionTransformer, img_size: Optional[int | Sequence[int]] = None,
                  keep_rate: Optional[float | Sequence[float]] = None) -> MacCount:
    """MACs of ``model`` on one image of ``img_size`` (default: the model's), pruned as configured.

    For a patched model the token count of every block follows its schedule and what its reducer
    outputs (:meth:`~tokenprune.core.reducers.ReducerSpec.output_tokens`, read off the reducer itself: a
    fused token or a cluster counts as a token, fewer pruned tokens than clusters give fewer clusters);
    ``keep_rate`` overrides the configured rate without touching the model.
    Per block with ``n`` tokens into attention and ``m`` into the MLP (dimension ``D``, attention
    width ``A``, MLP hidden ``F``): ``3nDA + 2n^2 A + nAD`` + ``2mDF``; at a location the [CLS]-row
    scorer adds ``nA`` (``q_cls K^T``) when the full map is not computed anyway, and fusion adds the
    weighted sum of the pruned tokens.
    """
    gh, gw = _grid(model, img_size)
    conv = model.patch_embed.proj
    d = model.embed_dim
    patch_embed = gh * gw * d * conv.in_channels * conv.kernel_size[0] * conv.kernel_size[1]
    st = getattr(model, "_tokenprune", None)
    depth = len(model.blocks)
    p = model.num_prefix_tokens
    n = gh * gw
    schedule = st.schedule if st is not None else Schedule({})
    if keep_rate is not None:
        schedule = Schedule.build(depth, keep_rate, schedule.locations if st is not None else EVIT_LOCATIONS)
    # an unpatched model with a keep_rate override is counted as EViT ([CLS] row, one fused token)
    needs_full_map = st is not None and "attn" in st.needs
    needs_cls_row = st is None or "cls_attn" in st.needs
    blocks, tin, tout = [], [], []
    reduction = 0
    for i, blk in enumerate(model.blocks):
        a = blk.attn.attn_dim
        f = blk.mlp.fc1.out_features
        n_in = n + p
        macs = 3 * n_in * d * a + 2 * n_in * n_in * a + n_in * a * d
        r = schedule.at(i)
        if r < 1.0 and num_keep(n, r) < n:
            k = num_keep(n, r)
            if not needs_full_map and needs_cls_row:
                reduction += n_in * a  # q_cls . K^T next to the fused kernel
            if st is not None:
                reduction += st.reducer.cost(n, k, d, blk.attn.head_dim)
            else:
                reduction += (n - k) * d  # EViT's weighted sum of the pruned tokens
            n = st.reducer.output_tokens(n, k) if st is not None else k + 1
        n_out = n + p
        macs += 2 * n_out * d * f
        blocks.append(macs)
        tin.append(n_in)
        tout.append(n_out)
    head = d * model.num_classes if model.num_classes else 0
    total = patch_embed + sum(blocks) + head + reduction
    return MacCount(total, patch_embed, blocks, head, reduction, tin, tout)


def measured_macs(model: torch.nn.Module, img_size: Optional[int | Sequence[int]] = None, in_chans: int = 3) -> int:
    """MACs of one forward pass at batch 1 counted by ``FlopCounterMode`` (FLOPs / 2), attention included."""
    if isinstance(model, VisionTransformer):
        h, w = check_img_size(model, img_size) if img_size is not None else tuple(model.patch_embed.img_size)
        in_chans = model.patch_embed.proj.in_channels
    else:
        h = w = img_size
    param = next(model.parameters())
    x = torch.zeros(1, in_chans, h, w, dtype=param.dtype, device=param.device)
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode(), FlopCounterMode(display=False, custom_mapping=SDPA_CPU_FORMULA) as counter:
            model(x)
    finally:
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
        p = model.num_prefix_tokens
        stages = [count.tokens_in[0] - p] + [count.tokens_out[i - 1] - p for i in sorted(model.keep_rate)]
        row = {"model": model_name, "keep_rate": r, "reducer": reducer, "scorer": scorer,
               "tokens": " -> ".join(str(s) for s in stages), "gmacs": count.total / 1e9}
        if measure:
            row["gmacs_measured"] = measured_macs(model) / 1e9
            row["rel_diff"] = (count.total - row["gmacs_measured"] * 1e9) / (row["gmacs_measured"] * 1e9)
        rows.append(row)
    return rows
