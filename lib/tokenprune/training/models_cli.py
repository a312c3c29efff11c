"""``python -m tokenprune models`` (``make models``): train, or load by recipe hash, the base models and cached
fine-tunes of a profile (:mod:`tokenprune.training.model_recipes`,
:func:`tokenprune.training.base_models.build_profile`), then the fine-tuning runs cached as their outputs
(:data:`OUTPUT_BUILDERS`), which start from those models: the variance / MedAD runs
(:mod:`tokenprune.training.cached_finetunes`), the proxy candidates measured off the shelf and their K5 fine-tunes,
and the proxy's cached fine-tunes on their test split (:mod:`tokenprune.training.finetune_outputs`).
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Callable, Optional, Sequence

import torch

from tokenprune.training import cached_finetunes, finetune_outputs
from tokenprune.training.proxy import finetunes as proxy_finetunes, outputs as proxy_outputs
from tokenprune.training.base_models import build_profile
from tokenprune.training.distributed import is_main_process
from tokenprune.training.model_recipes import recipes_for, round_recipes
from tokenprune.utils.environment import PROFILES
from tokenprune.core.precision import check_device
from tokenprune.utils.io import InputError, input_checks

__all__ = ["OUTPUT_BUILDERS", "ROUNDS", "build_parser", "check_args", "build_base_models", "build_round", "main"]

#: the pre-registered rounds whose candidates ``--round`` builds
ROUNDS = (2, 3)


def _summary_line(info: dict) -> str:
    if not info:
        return ""
    t = info["test"]
    lo, hi = t["ci95"]
    how = "loaded" if info.get("loaded") else f"trained in {info['train_time_s']:.0f} s"
    return (f"{info['name']}: test acc {t['accuracy']:.4f} [{lo:.4f}, {hi:.4f}] (n={t['n']}), {how}, "
            f"{info['checkpoint']} {info['size_bytes'] / 1e6:.2f} MB sha256 {info['sha256'][:16]}...")


def build_parser() -> argparse.ArgumentParser:
    """The options of ``python -m tokenprune models``."""
    ap = argparse.ArgumentParser(prog="python -m tokenprune models", description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="default", choices=PROFILES)
    ap.add_argument("--only", nargs="+", default=None, help="model names of the profile")
    ap.add_argument("--cache-dir", default=None, help="default: data/checkpoints (default), data/checkpoints/<profile>")
    ap.add_argument("--force", action="store_true", help="retrain even if a valid checkpoint exists")
    ap.add_argument("--data-root", default=None, help="dataset folder (paper profile)")
    ap.add_argument("--init", default=None, help="initial weights (paper profile: a DeiT-S checkpoint file)")
    ap.add_argument("--device", default=None)
    ap.add_argument("--no-progress", action="store_true")
    ap.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    ap.add_argument("--list", action="store_true", help="print the recipes and their hashes, then exit")
    ap.add_argument("--compile", action="store_true", help="torch.compile the training forward (from-scratch models)")
    ap.add_argument("--max-minutes", type=float, default=None,
                    help="start no new build after this many minutes; rerun the same command to continue (make "
                         "models in parts: each part runs at most this long plus its last build)")
    ap.add_argument("--round", type=int, choices=ROUNDS, default=None,
                    help="build the proxy's candidates of that pre-registered round instead (tokenprune.training."
                         "proxy.round2, round3), in their order (--only: these), each base model in parts of at most "
                         "its recipe's part_minutes that resume when the command runs again, then its off-the-shelf "
                         "outputs and, where the rule asks for them, K5's fine-tunes (and round 3's control)")
    return ap


def build_round(args: argparse.Namespace) -> int:
    """``--round N``: each candidate's base model of round N (a part at a time: a paused build says so and the
    command stops; running it again continues), then its cached off-the-shelf outputs and, where the pre-registered
    rule asks for them (:data:`tokenprune.training.proxy.finetunes.FINETUNED`), K5's fine-tunes (round 3: with their
    control), in the round's order. With ``--list``: the round's recipes and their hashes (``--only``: these), nothing
    built."""
    import importlib

    from tokenprune.training.base_models import ensure_model
    from tokenprune.training.checkpoints import checkpoint_dir
    from tokenprune.training.resume import TrainingPaused

    module = importlib.import_module(f".round{args.round}", "tokenprune.training.proxy")
    recipes = round_recipes(args.round)
    names = [n for n in recipes if args.only is None or n in args.only]
    if args.list:   # the recipes and their hashes, as without --round: nothing is built
        for name in names:
            print(f"{name}-{recipes[name].recipe_hash()}: {recipes[name].canonical_json()}")
        return 0
    deadline = None if args.max_minutes is None else time.monotonic() + 60 * args.max_minutes
    for name in names:
        where = getattr(module, "BUILT_ON", {}).get(name, "cpu")
        if where == "gpu" and not str(args.device or "").startswith("cuda"):
            print(f"[models] {name}: not built: its pre-registration builds it only on a GPU (--device cuda)",
                  flush=True)
            continue
        try:
            _, info = ensure_model(recipes[name], checkpoint_dir("default"), force=args.force,
                                   progress=not args.no_progress, device=args.device, deadline=deadline)
        except TrainingPaused as paused:
            print(f"[models] {paused}", flush=True)
            return 0
        print(_summary_line(info), flush=True)
        proxy_outputs.build(progress=not args.no_progress, force=args.force, only=[name],
                            candidates=module.CANDIDATES)
        if name in proxy_finetunes.FINETUNED:   # K5, where the pre-registered rule asks for it
            proxy_finetunes.build(progress=not args.no_progress, force=args.force, only=[name],
                                  candidates=module.CANDIDATES)
    return 0


def check_args(args: argparse.Namespace) -> None:
    """Refuse (InputError, naming the option) what ``python -m tokenprune models`` cannot build, before anything
    is written: paths that are not there, unknown ``--only`` names, the paper profile without ``--init``, a device
    that is unknown or that this machine does not have."""
    if args.threads is not None and args.threads < 1:
        raise InputError(f"--threads: expected an int >= 1, got {args.threads}")
    if args.device is not None:
        with input_checks():
            check_device(args.device, "--device")
    if args.max_minutes is not None and not args.max_minutes > 0:
        raise InputError(f"--max-minutes: expected a number > 0, got {args.max_minutes}")
    for option, path, kind in (("--init", args.init, "file"), ("--data-root", args.data_root, "folder")):
        if path is not None and not (Path(path).is_file() if kind == "file" else Path(path).is_dir()):
            raise InputError(f"{option}: {path} is not a {kind}")
    if args.round is not None and args.profile != "default":
        raise InputError(f"--round: the proxy's candidates belong to the default profile, not {args.profile!r}")
    # the names; the paper recipe's hash (of --init) is not needed here
    names = recipes_for(args.profile) if args.round is None else round_recipes(args.round)
    unknown = sorted(set(args.only or ()) - set(names))
    if unknown:
        raise InputError(f"only: unknown {unknown}; profile {args.profile!r} has {sorted(names)}")
    if args.profile == "paper" and args.init is None and not args.list:
        raise InputError("--init: the paper profile needs --init PATH (a DeiT-S checkpoint) and --data-root "
                         "(ImageNet folders)")
    if args.cache_dir is not None and Path(args.cache_dir).exists() and not Path(args.cache_dir).is_dir():
        raise InputError(f"--cache-dir: {args.cache_dir} exists and is not a folder")


#: the producers of cached run outputs, each called with the profile, ``progress`` and ``force``
OUTPUT_BUILDERS: tuple[Callable[..., list], ...] = (
    cached_finetunes.build_cached, proxy_outputs.build, proxy_finetunes.build, finetune_outputs.build)


def build_base_models(args: argparse.Namespace) -> int:
    """The base models and cached fine-tunes the options ask for (``--list``: print the recipes and their hashes);
    with ``--max-minutes`` no new model starts once that time has passed, and the rest are named."""
    if args.list:
        for name, r in recipes_for(args.profile, args.init).items():
            print(f"{name}-{r.recipe_hash()}: {r.canonical_json()}")
        return 0
    deadline = None if args.max_minutes is None else time.monotonic() + 60 * args.max_minutes
    left: list[str] = []
    infos = build_profile(args.profile, args.only, args.cache_dir, args.force, not args.no_progress,
                          args.data_root, args.init, args.device, skip_missing_weights=args.profile == "smoke",
                          compile=args.compile, deadline=deadline, left=left)
    if is_main_process():
        for info in infos:
            print(_summary_line(info), flush=True)
        if left:
            print(f"[models] --max-minutes {args.max_minutes:g} reached: {len(left)} model(s) left "
                  f"({', '.join(left)}); rerun the same command to continue", flush=True)
    return 0


def main(argv: Optional[Sequence[str]] = None, builders: Optional[Sequence[Callable[..., list]]] = None) -> int:
    """The base models, then each of ``builders`` (None: :data:`OUTPUT_BUILDERS`; the command adds the study's,
    :mod:`tokenprune.study.cached_results`); with ``--max-minutes M`` no new model and no
    further builder starts after M minutes (each builder is one unit: the longest, notebook 03's fine-tunes, took
    44 min here), and a rerun of the same command continues: everything built is cached as it completes."""
    args = build_parser().parse_args(argv)
    check_args(args)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.round is not None:
        return build_round(args)
    builders = OUTPUT_BUILDERS if builders is None else builders
    start = time.monotonic()
    rc = build_base_models(args)
    if rc == 0 and not args.list and args.only is None and is_main_process():
        for i, build in enumerate(builders):
            if args.max_minutes is not None and time.monotonic() - start > 60 * args.max_minutes:
                left = [f"{b.__module__.removeprefix('tokenprune.')}.{b.__name__}" for b in builders[i:]]
                print(f"[models] --max-minutes {args.max_minutes:g} reached: the cached outputs of {', '.join(left)} "
                      "are left; rerun the same command to continue", flush=True)
                break
            build(profile=args.profile, progress=not args.no_progress, force=args.force)
    return rc


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
