"""The paper profile's training runs from the command line (issue 15, item 3): ``python -m tokenprune paper-train``
runs a recipe file (:mod:`tokenprune.training.recipe_book`) on timm's training stack
(:mod:`tokenprune.training.paper_training`), printing each run's estimated A100-hours first (:func:`gpu_hours`:
from a measured images/s where a GPU measured one, else from the papers' own A100 figures, saying which).

One node: ``torchrun --nproc_per_node=8 -m tokenprune paper-train --recipe evit_deit_s_finetune --data-root
/data/imagenet --init-dir /ckpt --out runs/paper``; several: add ``--nnodes``, ``--node_rank`` and
``--rdzv-endpoint`` (torchrun's own flags). ``--estimate`` prints the GPU-hours and exits.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Sequence

from tokenprune.study.paper_numbers import EVIT
from tokenprune.training.paper_training import Limits, RunSpec, run_specs, train_run
from tokenprune.training.recipe_book import load_recipe, recipe_names

__all__ = ["DATASET_IMAGES", "GpuHours", "gpu_hours", "main"]

#: training images of each dataset's release (for GPU-hour estimates before any file is read)
DATASET_IMAGES = {"imagenet": 1_281_167, "imagenet100": 126_689, "cub200": 5_994, "stanford_cars": 8_144,
                  "fgvc_aircraft": 6_667}
_DATASET_KEYS = {"cub": "cub200", "cars": "stanford_cars", "aircraft": "fgvc_aircraft"}


# ---------------------------------------------------------------------------------------------- GPU-hours
@dataclass(frozen=True)
class GpuHours:
    """An estimate of one run's A100-hours and where its speed comes from."""

    run: str
    images: int
    train_img_per_s: float
    hours: float
    source: str


def _inference_img_per_s(model: str, keep_rate: float) -> tuple[float, str]:
    """A100 inference images/s of ``model`` at ``keep_rate`` from the papers (EViT's README table for DeiT-S), else
    from DeiT-S scaled by MACs."""
    s = EVIT["deit_small_patch16_224"]
    table = {1.0: 3197 * s["keep"][0.9]["gmacs"] / s["baseline"]["gmacs"]}
    table.update({k: e["img_per_s"] for k, e in s["keep"].items()})
    near = min(table, key=lambda k: abs(k - keep_rate))
    ips = table[near]
    src = (f"EViT README, DeiT-S keep {near:g}: {ips:.0f} img/s on one A100 (inference)" if near < 1.0 else
           f"DeiT-S unpruned: EViT's keep-0.9 A100 figure x 4.0/4.6 GMACs = {ips:.0f} img/s (inference)")
    if "base" in model:
        ips *= s["baseline"]["gmacs"] / EVIT["deit_base_patch16_224"]["baseline"]["gmacs"]
        src += ", x 4.6/17.6 GMACs for DeiT-B"
    return ips, src


def gpu_hours(spec: RunSpec, measured_img_per_s: Optional[float] = None, measured_on: str = "") -> GpuHours:
    """A100-hours of ``spec``: its training images (epochs x the dataset's training images) over training
    images/s: ``measured_img_per_s`` when a GPU measured it, else a third of the papers' inference figure (forward
    plus backward cost about three forwards), saying which."""
    key = _DATASET_KEYS.get(spec.dataset, spec.dataset)
    images = int(spec.values["epochs"]) * DATASET_IMAGES[key]
    if measured_img_per_s:
        ips, src = float(measured_img_per_s), f"measured training img/s on {measured_on or 'this GPU'}"
    else:
        inf, src = _inference_img_per_s(spec.model, spec.keep_rate)
        ips, src = inf / 3.0, f"estimated: {src} / 3 (forward + backward ~ 3 forwards); not measured"
    return GpuHours(spec.name, images, ips, images / ips / 3600.0, src)


# ---------------------------------------------------------------------------------------------- CLI
def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tokenprune paper-train", description=__doc__.split("\n\n")[0])
    ap.add_argument("--recipe", required=True, choices=[n for n in recipe_names() if not n.startswith("_")])
    ap.add_argument("--run", type=int, default=None, help="index of one run of the recipe (default: all, in turn)")
    ap.add_argument("--data-root", default=None, help="the dataset's folder in its release format")
    ap.add_argument("--init-dir", default=None, help="folder of the recipe's init checkpoints")
    ap.add_argument("--out", default="runs/paper", help="runs go to OUT/<run name>")
    ap.add_argument("--device", default=None)
    ap.add_argument("--estimate", action="store_true", help="print the GPU-hours of every run and exit")
    ap.add_argument("--batch-per-process", type=int, default=None, help="test limit: images per process and step")
    ap.add_argument("--steps-per-epoch", type=int, default=None, help="test limit: optimiser steps per epoch")
    ap.add_argument("--epochs", type=int, default=None, help="test limit: epochs")
    ap.add_argument("--eval-images", type=int, default=None, help="test limit: evaluation images (class-balanced)")
    ap.add_argument("--workers", type=int, default=8)
    args = ap.parse_args(argv)
    specs = run_specs(load_recipe(args.recipe))
    if args.run is not None:
        if not 0 <= args.run < len(specs):
            raise SystemExit(f"--run: {args.run} out of range; recipe {args.recipe} has runs 0..{len(specs) - 1}")
        specs = [specs[args.run]]
    rank0 = int(os.environ.get("RANK", "0")) == 0
    if rank0:
        total = 0.0
        for s in specs:
            g = gpu_hours(s)
            total += g.hours
            print(f"[estimate] {g.run}: {g.images:,} training images at {g.train_img_per_s:.0f} img/s = "
                  f"{g.hours:.1f} A100-hours ({g.source})", flush=True)
        print(f"[estimate] {args.recipe}: {total:.1f} A100-hours for {len(specs)} run(s)", flush=True)
    if args.estimate:
        return 0
    limits = Limits(args.batch_per_process, args.steps_per_epoch, args.epochs, args.eval_images, args.workers)
    for s in specs:
        summary = train_run(s, Path(args.out) / s.name, args.data_root, args.init_dir, limits, args.device)
        if rank0:
            print(f"[{s.name}] best: {summary['best']}", flush=True)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
