"""Where a patched model's time goes, block by block: ``python -m tokenprune bench --profile``.

A few forward passes run under :mod:`torch.profiler` with every block, our scorer and our reducer labelled for the
duration of the profile only (forward hooks on the blocks, the scorer's and reducer's functions wrapped in
:func:`torch.profiler.record_function`; nothing of the model's own code changes). Each operator the profiler saw is
assigned to the block it ran in and to a phase:

* ``scoring``: inside the scorer (EViT's head mean of the [CLS] row, the variance scorers' statistics);
* ``top-k``: sorts and top-k selections inside the reducer (:func:`tokenprune.core.scorers.descending_order`);
* ``gather``: gathers and indexing inside the reducer (the kept tokens, their sizes and sources);
* ``merge``: the rest of the reducer: the weighted sums, scatters and concatenations, and ToMe's matching
  (similarities and their maxima), which ToMe computes inside its reducer;
* ``rest``: the block outside the scorer and the reducer (attention and MLP).

Per block it reports the kernels launched (CUDA kernels on a GPU; on a CPU, the leaf operators that ran), the host
synchronisations (``aten::item`` / ``_local_scalar_dense`` / ``nonzero`` calls, which make a GPU wait for its
queue, and the CUDA runtime's synchronise calls), which attention kernel ran (the ``scaled_dot_product`` variant the
dispatcher chose, or the explicit ``softmax(q k^T) v``) and the milliseconds per pass in each phase (self time of
the operators: CPU time on a CPU, kernel time on a GPU). Times under the profiler are inflated by its own
bookkeeping; the counts are exact. The official models, when given, are profiled by their blocks alone.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any, Iterator, Optional, Sequence

import torch

from tokenprune.core.precision import autocast

__all__ = ["PHASES", "BlockProfile", "profile_model", "profile_rows", "print_profile", "print_profile_summary"]

#: the phases a block's time is split into, in the order printed
PHASES = ("scoring", "top-k", "gather", "merge", "rest")
#: operators of the top-k phase (inside the reducer)
TOPK_OPS = frozenset({"aten::sort", "aten::topk", "aten::argsort", "aten::kthvalue", "aten::msort"})
#: operators of the gather phase (inside the reducer)
GATHER_OPS = frozenset({"aten::gather", "aten::index", "aten::index_select", "aten::take_along_dim",
                        "aten::masked_select"})
#: operators and runtime calls that synchronise the host with a GPU's queue
SYNC_OPS = frozenset({"aten::item", "aten::_local_scalar_dense", "aten::nonzero", "aten::equal",
                      "cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize"})
#: the label prefix of a block's profiler scope
_BLOCK = "tokenprune block "
_SCORING, _REDUCTION = "tokenprune scoring", "tokenprune reduction"


@dataclass
class BlockProfile:
    """One block of one model, per forward pass: kernels launched, host synchronisations, the attention kernel,
    milliseconds per phase (:data:`PHASES`) and in all."""

    block: int
    kernels: float = 0.0
    syncs: float = 0.0
    attention: str = ""
    ms: dict = field(default_factory=lambda: {p: 0.0 for p in PHASES})

    @property
    def total_ms(self) -> float:
        return sum(self.ms.values())


def _labelled_fn(fn, label: str):
    @functools.wraps(fn)
    def run(*args, **kwargs):
        with torch.profiler.record_function(label):
            return fn(*args, **kwargs)
    return run


@contextlib.contextmanager
def _labels(model: torch.nn.Module) -> Iterator[None]:
    """Label each block's forward pass and, in a patched model, its scorer and reducer, for the profile only."""
    scopes: dict[int, Any] = {}
    handles = []
    for i, blk in enumerate(getattr(model, "blocks", ())):
        def enter(_mod, _args, i=i):
            scopes[i] = torch.profiler.record_function(f"{_BLOCK}{i + 1}")
            scopes[i].__enter__()

        def leave(_mod, _args, _out, i=i):
            scopes.pop(i).__exit__(None, None, None)

        handles += [blk.register_forward_pre_hook(enter), blk.register_forward_hook(leave)]
    state = getattr(model, "_tokenprune", None)
    saved = None if state is None else (state.scorer, state.reducer)
    try:
        if state is not None:
            state.scorer = dataclasses.replace(state.scorer, fn=_labelled_fn(state.scorer.fn, _SCORING))
            state.reducer = dataclasses.replace(state.reducer, fn=_labelled_fn(state.reducer.fn, _REDUCTION))
        yield
    finally:
        for h in handles:
            h.remove()
        if saved is not None:
            state.scorer, state.reducer = saved


def _scopes(evt) -> tuple[Optional[int], Optional[str], Optional[str]]:
    """The block an event ran in, the labelled phase scope around it, and the outermost operator inside that
    scope (the event itself when it is one): what decides its phase."""
    block, scope, outer = None, None, None
    e = evt
    while e is not None:
        name = e.name
        if name.startswith(_BLOCK):
            block = int(name[len(_BLOCK):])
            break
        if name in (_SCORING, _REDUCTION):
            scope = scope or name
        elif scope is None and name.startswith("aten::"):
            outer = name
        e = e.cpu_parent
    return block, scope, outer


def _inside_sync(evt) -> bool:
    """Whether a synchronising call runs inside another (``aten::item`` calls ``_local_scalar_dense``, which on a GPU
    calls the runtime's synchronise): one synchronisation, counted once."""
    e = evt.cpu_parent
    while e is not None and not e.name.startswith(_BLOCK):
        if e.name in SYNC_OPS:
            return True
        e = e.cpu_parent
    return False


def _phase(scope: Optional[str], outer: Optional[str]) -> str:
    if scope == _SCORING:
        return "scoring"
    if scope == _REDUCTION:
        return "top-k" if outer in TOPK_OPS else "gather" if outer in GATHER_OPS else "merge"
    return "rest"


def _attention_kernel(names: set[str]) -> str:
    fused = sorted(n[len("aten::"):] for n in names if "scaled_dot_product" in n or "flash_attention" in n
                   or "efficient_attention" in n)
    if fused:  # the deepest variant the dispatcher chose: the longest name, e.g. _scaled_dot_product_flash_...
        return max(fused, key=len)
    return "explicit softmax(q k^T) v" if "aten::softmax" in names or "aten::_softmax" in names else ""


def profile_model(model: torch.nn.Module, *, batch: int, img_size: Sequence[int] = (224, 224), dtype: str = "fp32",
                  device: str = "cpu", passes: int = 3, warmup: int = 1) -> list[BlockProfile]:
    """Profile ``passes`` forward passes of ``model`` (``torch.inference_mode``, autocast ``dtype``, a seeded
    random batch) after ``warmup`` unprofiled ones; returns one :class:`BlockProfile` per block, per pass."""
    if passes < 1:
        raise ValueError(f"passes: expected an int >= 1, got {passes}")
    dev = torch.device(device)
    x = torch.randn(batch, 3, *img_size, generator=torch.Generator().manual_seed(0)).to(dev)
    model = model.to(dev).eval()
    activities = [torch.profiler.ProfilerActivity.CPU]
    if dev.type == "cuda":
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    with torch.inference_mode(), autocast(dtype, dev), _labels(model):
        for _ in range(warmup):
            model(x)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
        with torch.profiler.profile(activities=activities) as prof:
            for _ in range(passes):
                model(x)
            if dev.type == "cuda":
                torch.cuda.synchronize(dev)
    blocks: dict[int, BlockProfile] = {}
    names: dict[int, set] = {}
    for evt in prof.events():
        block, scope, outer = _scopes(evt)
        if block is None or evt.name.startswith(_BLOCK) or evt.name in (_SCORING, _REDUCTION):
            continue
        bp = blocks.setdefault(block, BlockProfile(block))
        names.setdefault(block, set()).add(evt.name)
        if evt.name in SYNC_OPS and not _inside_sync(evt):
            bp.syncs += 1
        if dev.type == "cuda":
            bp.kernels += len(evt.kernels)
            us = evt.self_device_time_total
        else:
            bp.kernels += not any(c.name.startswith("aten::") for c in evt.cpu_children) and evt.name.startswith(
                "aten::")
            us = evt.self_cpu_time_total
        bp.ms[_phase(scope, outer or evt.name)] += us / 1e3
    out = []
    for i in sorted(blocks):
        bp = blocks[i]
        bp.kernels, bp.syncs = bp.kernels / passes, bp.syncs / passes
        bp.ms = {p: v / passes for p, v in bp.ms.items()}
        bp.attention = _attention_kernel(names[i])
        out.append(bp)
    return out


def profile_rows(label: str, blocks: Sequence[BlockProfile], *, batch: int, dtype: str, device: str) -> list[dict]:
    """The profile of one model as rows (one per block, then ``block`` = ``"all"``), for the bench's JSON."""
    rows = [{"config": label, "batch": batch, "dtype": dtype, "device": device, "block": b.block,
             "kernels": b.kernels, "syncs": b.syncs, "attention": b.attention, "total_ms": b.total_ms,
             **{f"{p}_ms": v for p, v in b.ms.items()}} for b in blocks]
    rows.append({"config": label, "batch": batch, "dtype": dtype, "device": device, "block": "all",
                 "kernels": sum(b.kernels for b in blocks), "syncs": sum(b.syncs for b in blocks),
                 "attention": ", ".join(sorted({b.attention for b in blocks if b.attention})),
                 "total_ms": sum(b.total_ms for b in blocks),
                 **{f"{p}_ms": sum(b.ms[p] for b in blocks) for p in PHASES}})
    return rows


def print_profile(rows: Sequence[dict]) -> None:
    """One table per model: per block its kernels, host synchronisations, attention kernel and milliseconds per
    phase, then the model's totals."""
    by_config: dict[str, list[dict]] = {}
    for r in rows:
        by_config.setdefault(r["config"], []).append(r)
    for label, rs in by_config.items():
        r0 = rs[0]
        kind = "CUDA kernels" if str(r0["device"]).startswith("cuda") else "leaf operators"
        print(f"## profile: {label}, {r0['dtype']}, batch {r0['batch']}, {r0['device']} (per forward pass; kernels: "
              f"{kind}; ms: self time under the profiler)")
        print(f"{'block':>5} {'kernels':>8} {'syncs':>6} {'total ms':>9} "
              + " ".join(f"{p + ' ms':>10}" for p in PHASES) + "  attention kernel")
        for r in rs:
            print(f"{r['block']:>5} {r['kernels']:>8.1f} {r['syncs']:>6.1f} {r['total_ms']:>9.3f} "
                  + " ".join(f"{r[p + '_ms']:>10.3f}" for p in PHASES) + f"  {r['attention']}")


def print_profile_summary(rows: Sequence[dict]) -> None:
    """One Markdown table: per model, batch and dtype its totals per forward pass (the ``"all"`` rows)."""
    head = ["config", "dtype", "batch", "kernels", "syncs", "total ms"] + [f"{p} ms" for p in PHASES] + ["attention"]
    print("\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    for r in rows:
        if r["block"] == "all":
            print(f"| {r['config']} | {r['dtype']} | {r['batch']} | {r['kernels']:.0f} | {r['syncs']:.0f} | "
                  f"{r['total_ms']:.2f} | " + " | ".join(f"{r[p + '_ms']:.2f}" for p in PHASES)
                  + f" | {r['attention']} |")
