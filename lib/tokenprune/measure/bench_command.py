"""The bench command: EViT-style throughput of a patched timm model, settings side by side.

Our models (the unpruned baseline included) use the attention kernel that
:func:`tokenprune.core.precision.attention_kernel` picks for the device and dtype; bf16 is timed only where the
device computes it natively (:func:`tokenprune.core.precision.native_bf16`). With ``--official-evit`` /
``--official-tome`` the official code, run from the user's checkout and checked to give our logits first, is timed
in the same interleaved rounds (:func:`tokenprune.measure.throughput.benchmark`). With ``--compile`` our models
compiled by ``torch.compile`` are timed in the same rounds as the eager ones, at every batch, and each compiled row
carries its speed over the eager model's (compiled / eager).

Usage::

    python -m tokenprune bench --model deit_small_patch16_224 --keep 1.0 0.7 --tome-r 13 --batch 32

The proxy's speed at DeiT-S's token count, forward and training passes (blocks 4-12 trained)::

    python -m tokenprune bench --model vit_small_patch14_dinov2 --img-size 196 --keep 1.0 0.7 --tome-r 13
    python -m tokenprune bench --model vit_small_patch14_dinov2 --img-size 196 --keep 1.0 0.7 --train-from-block 4
"""
from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Callable, Optional, Sequence

import torch

from tokenprune.core.precision import DEVICES, DTYPES, check_device
from tokenprune.measure.throughput import LOAD_COLUMNS, BenchResult, benchmark, load_warnings, speedup_table
from tokenprune.measure.training_step import TrainingStep
from tokenprune.utils.environment import hardware
from tokenprune.utils.io import input_checks

__all__ = ["SPEEDUP_PER_MAC_TARGET", "OURS_OVER_OFFICIAL_TARGET", "MIN_IMAGES_PER_ROUND", "build_parser", "main"]


def _keep_rate(text: str) -> float:
    value = float(text)
    if not 0.0 < value <= 1.0:
        raise argparse.ArgumentTypeError(f"keep rates lie in (0, 1] (1.0: unpruned), got {text}")
    return value


#: realised speedup / MAC ratio the patch must reach: at batch 1 the per-block cost of scoring, top-k and
#: gathering is exposed, hence a lower bar there
SPEEDUP_PER_MAC_TARGET = {1: 0.90, "other": 0.95}
#: the classes of the head a training step gives a model that has none (the proxy's tasks have 10 or 12)
TRAIN_CLASSES = 10
#: our images/s over the official code's (median of the per-round ratios) must reach this at every batch
OURS_OVER_OFFICIAL_TARGET = 0.97


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive int, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive int, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The options of ``python -m tokenprune bench``, each with its help text."""
    from tokenprune.core.reducers import REDUCERS
    from tokenprune.core.scorers import scorer_names

    ap = argparse.ArgumentParser(prog="python -m tokenprune bench", description=main.__doc__)
    ap.add_argument("--model", default="deit_small_patch16_224",
                    help="a timm VisionTransformer name (default: %(default)s)")
    ap.add_argument("--img-size", type=_positive_int, default=None,
                    help="input size in px, given to timm.create_model (a model that takes it: the ViT-S/14 of the "
                         "proxy at 196 px has DeiT-S's 196 tokens; default: the model's own)")
    ap.add_argument("--train-from-block", type=_positive_int, default=None, metavar="K",
                    help="time training steps instead of forward passes: forward, backward and AdamW on blocks K to "
                         "the last, the final norm and the head, the blocks before frozen (a proxy that trains blocks "
                         "4-12: 4; EViT's fine-tuning: 1); pruned configurations train pruned")
    ap.add_argument("--keep", type=_keep_rate, nargs="+", default=[1.0, 0.7],
                    help="keep rates in (0, 1], the first is the baseline of the ratios (default: %(default)s)")
    ap.add_argument("--reducer", default="fuse_attention", choices=sorted(REDUCERS), help="default: %(default)s")
    ap.add_argument("--scorer", default="cls_attention", help=f"one of {scorer_names()} (default: %(default)s)")
    ap.add_argument("--tome-r", type=_positive_int, nargs="+", default=[], metavar="R",
                    help="also time ToMe merging R tokens in every block (our bipartite reducer with tome_schedule(R) "
                         "and proportional attention; ToMe's DeiT-S setting: 13)")
    ap.add_argument("--batch", type=_positive_int, nargs="+", default=[32],
                    help="images per timed batch; several values give one side-by-side run each "
                         "(EViT: 64; default: %(default)s)")
    ap.add_argument("--dtype", nargs="+", default=["fp32"], choices=sorted(DTYPES),
                    help="autocast dtypes, one run each (EViT: fp32; default: %(default)s); bf16 only where the device "
                         "computes it natively (core.precision.native_bf16), see --force-bf16")
    ap.add_argument("--force-bf16", action="store_true",
                    help="time bf16 even where the CPU has no native bf16 (no AVX512-BF16 / AMX: autocast emulates it)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu",
                    help=f"one of {', '.join(DEVICES)} that this machine has (default: %(default)s)")
    ap.add_argument("--rounds", type=_positive_int, default=7, help="interleaved timed rounds (default: %(default)s)")
    ap.add_argument("--iters", type=_positive_int, default=None,
                    help=f"batches per configuration and round (default: enough for {MIN_IMAGES_PER_ROUND} images, at "
                         "least 2, so that small batches are not timed on a few milliseconds)")
    ap.add_argument("--warmup", type=int, default=2,
                    help="untimed passes per configuration first (default: %(default)s)")
    ap.add_argument("--threads", type=_positive_int, default=None, help="torch CPU threads (default: torch's)")
    ap.add_argument("--official-evit", metavar="DIR", default=None,
                    help="a checkout of github.com/youweiliang/evit: also time its evit.py "
                         "(same weights, checked to give "
                         "the same outputs) at each keep rate below 1, and print ours / official")
    ap.add_argument("--official-tome", metavar="DIR", default=None,
                    help="a checkout of github.com/facebookresearch/ToMe: also time its timm patch (tome.patch.timm, "
                         "model.r = R, checked to give the same outputs) at each --tome-r, and print ours / official")
    ap.add_argument("--attention", default="rule", choices=("rule", "fused", "explicit"),
                    help="attention kernel of our models, the unpruned baseline included: 'rule' (default) "
                         "picks it per "
                         "device and dtype by core.precision.attention_kernel (explicit softmax(q k^T) v, "
                         "as the official "
                         "code computes, for bf16 on a CPU without AMX; timm's fused kernel otherwise)")
    ap.add_argument("--compile", action="store_true",
                    help="at every batch also time our models compiled by torch.compile, in the same interleaved "
                         "run as the eager ones, and print their speedup / MAC ratio and compiled / eager (or why "
                         "compiling failed)")
    ap.add_argument("--targets", action="store_true",
                    help="print whether each row meets the speed targets: speedup / MAC ratio (median) >= "
                         f"{SPEEDUP_PER_MAC_TARGET['other']} ({SPEEDUP_PER_MAC_TARGET[1]} at batch 1) and, with an "
                         f"official implementation, ours / official (median) >= {OURS_OVER_OFFICIAL_TARGET}")
    ap.add_argument("--profile", action="store_true",
                    help="instead of timing, profile a few forward passes of each model at each batch and dtype and "
                         "print per block the kernels launched, host synchronisations, the attention kernel and the "
                         "time in scoring, top-k, gather and merge (measure.kernel_profile), then a summary per model")
    ap.add_argument("--json", metavar="FILE", default=None, help="also write the rows to FILE as JSON")
    return ap


def _fmt_other(v: Optional[float]) -> str:
    return "n/a" if v is None else f"{v:.2f}"


@dataclass
class _Models:
    """What one bench command times: every model by label, its MACs, our labels in table order (the baseline
    first) and {our label: the official implementation's label}."""

    models: dict[str, torch.nn.Module]
    macs: dict[str, float]
    ours: list[str]
    pairs: dict[str, str]
    baseline: str
    img_size: tuple[int, int] = (224, 224)


def _check_official_options(args, ap) -> None:
    import timm

    from tokenprune.core.reducers import get_reducer
    from tokenprune.core.scorers import get_scorer

    if not timm.is_model(args.model):
        ap.error(f"--model: unknown timm model {args.model!r}; accepted: a name of timm.list_models(), "
                 "e.g. deit_small_patch16_224")
    for option, check, value in (("--scorer", get_scorer, args.scorer), ("--reducer", get_reducer, args.reducer)):
        try:
            check(value)
        except ValueError as e:
            ap.error(f"{option}: {e}")
    if args.official_evit and (args.reducer != "fuse_attention" or args.scorer != "cls_attention"):
        ap.error("--official-evit: the official EViT is cls_attention + fuse_attention; drop --scorer/--reducer")
    if args.train_from_block and (args.official_evit or args.official_tome or args.compile or args.targets
                                  or args.profile):
        ap.error("--train-from-block: times training steps of our models alone; drop --official-evit, "
                 "--official-tome, --compile, --targets and --profile")
    if args.profile and (args.compile or args.targets):
        ap.error("--profile: profiles eager forward passes instead of timing them; drop --compile and --targets")
    if args.official_tome and not args.tome_r:
        ap.error("--official-tome: give the tokens merged per block with --tome-r (ToMe's DeiT-S setting: 13)")


def _build_models(args, ap) -> _Models:
    """Our model at each keep rate and ToMe r (and the official EViT's and ToMe's), their MACs and labels."""
    import copy
    from functools import partial

    import timm
    from timm.models.vision_transformer import VisionTransformer

    from tokenprune.core.patch import patch
    from tokenprune.measure.macs import analytic_macs
    from tokenprune.measure.official_evit import check_same_outputs, load_official_evit, official_evit_like
    from tokenprune.measure.official_tome import load_official_tome, official_tome_like
    from tokenprune.methods.tome import tome_schedule

    _check_official_options(args, ap)
    try:
        src = timm.create_model(args.model, **({"img_size": args.img_size} if args.img_size else {}))
    except TypeError as e:
        ap.error(f"--img-size: {args.model} does not take an input size ({e})")
    if not isinstance(src, VisionTransformer):
        ap.error(f"--model: {args.model} is a {type(src).__name__}, not a timm VisionTransformer "
                 "(tokenprune patches timm ViTs only)")
    src.eval()
    loaded = {}
    for option, path, load in (("--official-evit", args.official_evit, load_official_evit),
                               ("--official-tome", args.official_tome, load_official_tome)):
        try:
            loaded[option] = load(path) if path else None
        except FileNotFoundError as e:
            ap.error(f"{option}: {e}")
    evit_mod, tome_mod = loaded["--official-evit"], loaded["--official-tome"]
    if args.train_from_block and src.num_classes == 0:
        src.reset_classifier(TRAIN_CLASSES)
    if args.train_from_block and args.train_from_block > len(src.blocks):
        ap.error(f"--train-from-block: {args.train_from_block} not accepted; accepted: 1 to {len(src.blocks)}")
    out = _Models({}, {}, [], {}, baseline=f"keep={args.keep[0]:g}", img_size=tuple(src.patch_embed.img_size))

    def add(label: str, m: torch.nn.Module, official: Optional[Callable[[], torch.nn.Module]], option: str) -> None:
        out.models[label], out.macs[label] = m, analytic_macs(m).total
        out.ours.append(label)
        if official is not None:
            try:  # a model the official code does not implement, or different outputs: nothing to compare with
                off = official()
                check_same_outputs(m, off, img_size=src.patch_embed.img_size[0], what=f"the code of {option}")
            except (ValueError, AssertionError) as e:
                ap.error(f"{option}: {e}")
            out.models[f"official {label}"], out.macs[f"official {label}"] = off, out.macs[label]
            out.pairs[label] = f"official {label}"

    for r in args.keep:
        m = copy.deepcopy(src)
        if r < 1.0:
            patch(m, keep_rate=r, scorer=args.scorer, reducer=args.reducer)
        official = partial(official_evit_like, evit_mod, src, r) if evit_mod is not None and r < 1.0 else None
        add(f"keep={r:g}", m, official, "--official-evit")
    for r in args.tome_r:
        rates, locations = tome_schedule(r, src.patch_embed.num_patches, len(src.blocks))
        m = patch(copy.deepcopy(src), keep_rate=rates, locations=locations, reducer="bipartite", prop_attn=True)
        official = partial(official_tome_like, tome_mod, src, r) if tome_mod is not None else None
        add(f"tome r={r}", m, official, "--official-tome")
    return out


#: images per configuration and round when --iters is not given
MIN_IMAGES_PER_ROUND = 32


def _iters(args, batch: int) -> int:
    return args.iters or max(2, -(-MIN_IMAGES_PER_ROUND // batch))


def _target(batch: int) -> float:
    return SPEEDUP_PER_MAC_TARGET.get(batch, SPEEDUP_PER_MAC_TARGET["other"])


def _dtypes_to_run(args) -> list[str]:
    """``--dtype`` less bf16 where the device has no native bf16 (unless ``--force-bf16``), saying so."""
    from tokenprune.core.precision import cpu_flags, native_bf16

    dev = torch.device(args.device).type
    if "bf16" not in args.dtype or args.force_bf16 or native_bf16(dev):
        return list(args.dtype)
    why = ("no avx512_bf16 or amx_bf16 flag in /proc/cpuinfo" if dev == "cpu" and cpu_flags()
           else f"{dev} has no native bf16")
    print(f"bf16 skipped: {why}, so autocast would emulate bf16 in fp32 (slower than fp32, not a bf16 figure); "
          "--force-bf16 times it anyway")
    return [d for d in args.dtype if d != "bf16"]


def _set_kernel(ms: _Models, args, dtype: str) -> str:
    """Give our models (the baseline included) the attention kernel of ``--attention`` (or the rule's); returns it."""
    from tokenprune.core.precision import attention_kernel, set_eager_attention

    kernel = attention_kernel(torch.device(args.device).type, dtype) if args.attention == "rule" else args.attention
    for label in ms.ours:
        set_eager_attention(ms.models[label], kernel == "explicit")
    return kernel


#: the label suffix of a compiled model in a run (its rows keep the eager label, with ``compiled`` true)
COMPILED = " compiled"


def _compiled(ms: _Models, args, dtype: str, batch: int) -> tuple[dict, str]:
    """Our models wrapped by ``torch.compile`` and compiled for this run's batch and dtype (an untimed pass of
    :func:`benchmark`), labelled with :data:`COMPILED`; or none and why not (one line). torch's compiled code is
    reset first, so that each run compiles its own models instead of reaching torch's limit of recompilations
    per function (past it, torch would run the eager code unannounced). ``dynamic=False``: our models share the
    pruning block's code with other token counts, which would otherwise make torch mark the token dimension
    dynamic, and inductor's symbolic indexing of ToMe's twelve chained merges then ran for over 20 minutes on
    DeiT-S. The official models are not compiled: each compilation of DeiT-S takes one to several minutes on a
    2-core CPU."""
    torch._dynamo.reset()
    try:
        compiled = {k + COMPILED: torch.compile(ms.models[k], dynamic=False) for k in ms.ours}
        benchmark(compiled, batch=batch, img_size=ms.img_size, dtype=dtype, device=args.device, warmup=1, rounds=1,
                  iters_per_round=1)
    except Exception as e:  # noqa: BLE001 - a missing compiler, an unsupported op or platform: said, not raised
        return {}, f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
    return compiled, ""


def _run(ms: _Models, models: dict, args, dtype: str, batch: int, warmup: int) -> list[BenchResult]:
    if args.train_from_block:
        models = {k: TrainingStep(m, args.train_from_block, batch=batch) for k, m in models.items()}
    return benchmark(models, batch=batch, img_size=ms.img_size, dtype=dtype, device=args.device, warmup=warmup,
                     rounds=args.rounds, iters_per_round=_iters(args, batch), train=bool(args.train_from_block))


def _profile(ms: _Models, args, dtype: str, batch: int) -> list[dict]:
    """``--profile``: every model's per-block profile at this batch and dtype, printed, as rows."""
    from tokenprune.measure.kernel_profile import print_profile, profile_model, profile_rows

    rows = []
    for label, model in ms.models.items():
        blocks = profile_model(model, batch=batch, img_size=ms.img_size, dtype=dtype, device=args.device,
                               passes=max(1, _iters(args, batch) // 2), warmup=max(1, args.warmup))
        rows += profile_rows(label, blocks, batch=batch, dtype=dtype, device=args.device)
    print_profile(rows)
    return rows


def _rows(ms: _Models, res: list[BenchResult], args, dtype: str, batch: int, kernel: str, compiled: bool) -> list[dict]:
    """One row per configuration of ours, eager or ``compiled``: img/s, speedup over the baseline (compiled too), MAC
    ratio, their quotient, and ours / official where paired (eager) or compiled / eager, each with its 95 % bootstrap
    interval over the rounds, and the run's load."""
    suffix = COMPILED if compiled else ""
    by_label = {b.label: b for b in res}
    macs = {**ms.macs, **{k + COMPILED: ms.macs[k] for k in ms.ours}}
    table = {row["config"]: row for row in speedup_table(res, macs, baseline=ms.baseline + suffix)}
    rows = []
    for label in ms.ours:
        row, b = table[label + suffix], by_label[label + suffix]
        mac_ratio = row["mac_ratio"]
        out = {"model": args.model, "config": label,
               "keep_rate": float(label[len("keep="):]) if label.startswith("keep=") else None,
               "tome_r": int(label[len("tome r="):]) if label.startswith("tome r=") else None,
               "attention": kernel, "compiled": compiled, "gmacs": ms.macs[label] / 1e9, "img_per_s": b.img_per_s,
               **{k: row[k] for k in ("speedup", "speedup_low", "speedup_high", "mac_ratio", "speedup_over_mac_ratio")},
               "speedup_over_mac_ratio_low": row["speedup_low"] / mac_ratio,
               "speedup_over_mac_ratio_high": row["speedup_high"] / mac_ratio,
               **{k: v for k, v in b.as_dict().items() if k not in ("label", "img_per_s")},
               **{k: row[k] for k in LOAD_COLUMNS}}
        other, key = (label, "compiled_over_eager") if compiled else (ms.pairs.get(label), "ours_over_official")
        if other in by_label:
            vs = next(x for x in speedup_table(res, macs, baseline=other) if x["config"] == label + suffix)
            out.update({f"{'eager' if compiled else 'official'}_img_per_s": by_label[other].img_per_s,
                        key: vs["speedup"], f"{key}_low": vs["speedup_low"], f"{key}_high": vs["speedup_high"]})
        if args.targets and label != ms.baseline:
            out["targets_met"] = (row["speedup_over_mac_ratio"] >= _target(batch)
                                  and out.get("ours_over_official", 1.0) >= OURS_OVER_OFFICIAL_TARGET)
        rows.append(out)
    return rows


def _print_run(rows: list[dict], res: list[BenchResult], args, paired: bool) -> None:
    """The detailed table of our eager or our compiled models in one interleaved run, then the run's load warnings
    (printed once, after the eager table). An eager table carries ours / official where paired, a compiled one
    compiled / eager."""
    first = rows[0]
    base = res[0].extra
    ratio = "compiled_over_eager" if first["compiled"] else "ours_over_official" if paired else ""
    print(f"## {first['dtype']}, batch {first['batch']}{', torch.compile' if first['compiled'] else ''}, "
          f"{first['attention']} attention: load average {base['load_before']:.2f} before, {base['load_after']:.2f} "
          f"after; other processes {_fmt_other(base.get('other_cores'))} cores")
    print(f"{'dtype':<5} {'batch':>5} {'config':>11} {'GMACs':>6} {'img/s':>8} "
          f"{'speedup [95 % CI]':>24} {'MAC ratio':>9} "
          f"{'speedup/MAC ratio [95 % CI]':>28}"
          + (f" {ratio.replace('_over_', '/') + ' [95 % CI]':>26}" if ratio else "")
          + (f" {'targets':>8}" if args.targets else ""))
    for o in rows:
        line = (f"{o['dtype']:<5} {o['batch']:>5} {o['config']:>11} {o['gmacs']:>6.2f} {o['img_per_s']:>8.1f} "
                f"{o['speedup']:>8.3f} [{o['speedup_low']:.3f}, {o['speedup_high']:.3f}] {o['mac_ratio']:>9.3f} "
                f"{o['speedup_over_mac_ratio']:>12.3f} [{o['speedup_over_mac_ratio_low']:.3f}, "
                f"{o['speedup_over_mac_ratio_high']:.3f}]")
        if ratio in o:
            line += f" {o[ratio]:>10.3f} [{o[ratio + '_low']:.3f}, {o[ratio + '_high']:.3f}]"
        elif ratio:
            line += f" {'':>26}"
        if "targets_met" in o:
            line += f" {'met' if o['targets_met'] else 'MISSED':>8}"
        print(line)
    if not first["compiled"]:
        for w in load_warnings(res):
            print(f"WARNING: {w}")


def _cell(o: dict, key: str) -> str:
    if key not in o:
        return ""
    return f"{o[key]:.2f} [{o[key + '_low']:.2f}, {o[key + '_high']:.2f}]"


def _print_summary(rows: list[dict], ms: _Models) -> None:
    """One Markdown table of every run: unpruned img/s, then per configuration of ours its speedup / MAC ratio and
    ours / official, and with compiled rows each configuration's compiled / eager (medians of the per-round ratios
    with their 95 % intervals)."""
    configs = [c for c in ms.ours if c != ms.baseline]
    compiled_any = any(o["compiled"] for o in rows)
    head = ["dtype", "batch", "attention", f"{ms.baseline} img/s"]
    for c in configs:
        head += [f"{c}: speedup / MAC ratio"] + ([f"{c}: ours / official"] if c in ms.pairs else [])
    head += [f"{c}: compiled / eager" for c in ms.ours if compiled_any]
    print("\n| " + " | ".join(head) + " |\n|" + "---|" * len(head))
    runs: dict[tuple, dict] = {}
    for o in rows:
        runs.setdefault((o["dtype"], o["batch"], o["compiled"]), {})[o["config"]] = o
    for (dtype, batch, compiled), by in runs.items():
        cells = [dtype, f"{batch}{' compiled' if compiled else ''}", by[ms.baseline]["attention"],
                 f"{by[ms.baseline]['img_per_s']:.1f}"]
        for c in configs:
            cells += [_cell(by[c], "speedup_over_mac_ratio")] + ([_cell(by[c], "ours_over_official") or "-"]
                                                                 if c in ms.pairs else [])
        cells += [_cell(by[c], "compiled_over_eager") or "-" for c in ms.ours if compiled_any]
        print("| " + " | ".join(cells) + " |")


def main(argv: Optional[Sequence[str]] = None) -> list[dict]:
    """Print model, configuration, MACs, img/s, speedup with its interval and speedup / MAC ratio, measured side by
    side (one interleaved run per batch and dtype; with --official-evit / --official-tome, the official EViT / ToMe,
    and with --compile our compiled models, in the same run), then one summary table of every run."""
    ap = build_parser()
    args = ap.parse_args(argv)
    with input_checks():   # before any model is built or any file written
        check_device(args.device, "--device")
    if args.threads:
        torch.set_num_threads(args.threads)
    ms = _build_models(args, ap)
    hw = hardware()
    print(f"# {args.model}, keep rates {', '.join(f'{r:g}' for r in args.keep)} by {args.scorer} + {args.reducer}"
          f"{', ToMe r = ' + ', '.join(map(str, args.tome_r)) if args.tome_r else ''}; {args.device}, "
          f"{torch.get_num_threads()} threads; {hw['cpu_model']}{', ' + ', '.join(hw['gpus']) if hw['gpus'] else ''}; "
          f"median of {args.rounds} interleaved rounds x {args.iters or f'max(2, {MIN_IMAGES_PER_ROUND} / batch)'} "
          f"batches; speedup (95 % bootstrap interval over rounds) and MAC ratio relative to {ms.baseline}"
          + ("; ours / official: our img/s over the official code's, same run" if ms.pairs else ""))
    rows: list[dict] = []
    for dtype in _dtypes_to_run(args):
        kernel = _set_kernel(ms, args, dtype)
        for batch in args.batch:
            if args.profile:
                rows += _profile(ms, args, dtype, batch)
                continue
            compiled, why = _compiled(ms, args, dtype, batch) if args.compile else ({}, "")
            if why:
                print(f"torch.compile: not timed ({dtype}, batch {batch}): {why}")
            res = _run(ms, {**ms.models, **compiled}, args, dtype, batch, args.warmup)
            for as_compiled in ([False, True] if compiled else [False]):
                rows += (run := _rows(ms, res, args, dtype, batch, kernel, compiled=as_compiled))
                _print_run(run, res, args, bool(ms.pairs))
    if rows and args.profile:
        from tokenprune.measure.kernel_profile import print_profile_summary

        print_profile_summary(rows)
    elif rows:
        _print_summary(rows, ms)
    if args.targets:
        met = all(o.get("targets_met", True) for o in rows)
        print(f"targets: {'all met' if met else 'some missed'} (speedup / MAC ratio >= "
              f"{SPEEDUP_PER_MAC_TARGET['other']}, {SPEEDUP_PER_MAC_TARGET[1]} at batch 1"
              + (f"; ours / official >= {OURS_OVER_OFFICIAL_TARGET}" if ms.pairs else "") + ")")
    if args.json:
        from tokenprune.utils.io import write_json

        write_json(args.json, {"command": "python -m tokenprune bench "
                                          + " ".join(argv if argv is not None else sys.argv[1:]),
                               "hardware": hw, "rows": rows})
    return rows


if __name__ == "__main__":
    main()
