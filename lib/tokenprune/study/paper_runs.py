"""The paper profile's training runs from the command line: ``python -m tokenprune paper-train``
runs a recipe file (:mod:`tokenprune.training.recipe_book`) on timm's training stack
(:mod:`tokenprune.training.paper_training`), printing each run's estimated A100-hours first (:func:`gpu_hours`:
from a measured images/s where a GPU measured one, else from the papers' own A100 figures, saying which).

One node: ``torchrun --nproc_per_node=8 -m tokenprune paper-train --recipe evit_deit_s_finetune --data-root
/data/imagenet --init-dir /ckpt --out runs/paper``; several: add ``--nnodes``, ``--node_rank`` and
``--rdzv-endpoint`` (torchrun's own flags). ``--estimate`` prints the GPU-hours and exits.

The notebooks at the ``paper`` profile train through the same code (:func:`trained_model`): a run finished in
``runs_dir`` (by ``paper-train`` on a cluster, with the same ``--out``) is loaded, an unfinished one resumes, a
missing one trains in the notebook's process; a checkpoint the user gives is loaded instead. Their settings
(:data:`TRAINING_SETTINGS`) are one table shared by every notebook. A claim decided on such a run carries an id of
its own (:func:`paper_scale_id`) and the premise that the run trained the recipe's whole schedule
(:func:`full_schedule_premise`), so a run shortened by the tests' limits is never judged.
"""
from __future__ import annotations

import argparse
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from tokenprune.study import verdicts
from tokenprune.study.paper_numbers import EVIT
from tokenprune.training.recipe_book import Limits, RunSpec, training_limits, run_specs
from tokenprune.training.paper_training import PrepareFn, load_trained, model_with_weights, train_run
from tokenprune.training.checkpoints import read_summary
from tokenprune.training.recipe_book import load_recipe, recipe_names
from tokenprune.utils.environment import REPO_ROOT
from tokenprune.core.precision import check_device
from tokenprune.utils.io import InputError, input_checks, load_torch

__all__ = ["DATASET_IMAGES", "GpuHours", "gpu_hours", "main", "TRAINING_SETTINGS", "TRAINING_PARAMETERS",
           "TRAINING_RANGES", "limits_of", "runs_root", "recipe_run", "TrainedRun", "trained_model",
           "full_schedule_premise", "paper_scale_id", "PAPER_SCALE", "file_top1_claim"]

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


# ---------------------------------------------------------------------------------------------- notebooks
#: every notebook's training settings (the same at each profile; only ``paper`` trains with them). The tests shrink
#: the first four (batch, steps and evaluation images) and nothing else
TRAINING_SETTINGS: dict = {"train_batch_per_process": 0, "train_steps_per_epoch": 0, "train_epochs": 0,
                           "train_eval_images": 0, "train_workers": 8, "runs_dir": ""}
TRAINING_PARAMETERS: dict = {
    "train_batch_per_process": "paper: images per process and step of the training runs (0: the recipe's global "
                               "batch; a test limit)",
    "train_steps_per_epoch": "paper: optimiser steps per epoch of the training runs (0: the whole training set; a "
                             "test limit)",
    "train_epochs": "paper: epochs of the training runs (0: the recipe's; a test limit)",
    "train_eval_images": "paper: test images each training run evaluates per epoch (class-balanced; 0: its whole "
                         "test split; a test limit; the notebook's own evaluation is separate)",
    "train_workers": "paper: data-loader workers of the training runs",
    "runs_dir": "paper: folder of the training runs (paper-train's --out; '': runs/paper/train); a finished run "
                "there is loaded, an unfinished one resumes",
}
TRAINING_RANGES: dict = {"train_batch_per_process": (0, None), "train_steps_per_epoch": (0, None),
                         "train_epochs": (0, None), "train_eval_images": (0, None), "train_workers": (0, None)}
#: the part of a claim id that marks a claim decided on a paper-scale run (:func:`paper_scale_id`)
PAPER_SCALE = "paper_scale"


def limits_of(cfg: Any) -> Limits:
    """The :class:`Limits` of a notebook's settings (:data:`TRAINING_SETTINGS`; 0 is no limit)."""
    return Limits(cfg.train_batch_per_process or None, cfg.train_steps_per_epoch or None, cfg.train_epochs or None,
                  cfg.train_eval_images or None, int(cfg.train_workers))


def runs_root(cfg: Any) -> Path:
    """Where a notebook's training runs go: ``cfg.runs_dir``, else ``runs/paper/train`` (git-ignored)."""
    return Path(cfg.runs_dir).expanduser() if cfg.runs_dir else REPO_ROOT / "runs" / "paper" / "train"


def recipe_run(recipe: str, **match: Any) -> RunSpec:
    """The one run of ``recipe`` (:func:`run_specs`) whose fields equal ``match`` (e.g. ``keep_rate=0.5``,
    ``model=..., dataset=...``); ValueError naming the runs there are when none or several match."""
    specs = run_specs(load_recipe(recipe))
    hits = [s for s in specs if all(getattr(s, k) == v for k, v in match.items())]
    if len(hits) != 1:
        raise ValueError(f"recipe {recipe}: {len(hits)} runs match {match}; runs: {[s.name for s in specs]}")
    return hits[0]


@dataclass
class TrainedRun:
    """A model a notebook evaluates at paper scale, and where it comes from: ``source`` is ``trained`` (here),
    ``loaded`` (a finished run of ``runs_dir``) or ``given`` (the user's checkpoint); ``summary`` is the run's
    (None for a given checkpoint)."""

    spec: RunSpec
    model: Any
    source: str
    summary: Optional[dict] = None
    path: str = ""

    @property
    def epochs_trained(self) -> Optional[int]:
        return None if self.summary is None else len(self.summary["history"])

    @property
    def full_schedule(self) -> bool:
        """The run trained the recipe's whole schedule (every epoch, every step, the recipe's batch), or is the
        user's own checkpoint."""
        if self.summary is None:
            return True
        return not self.summary.get("shortened", True) and self.epochs_trained == int(self.summary["recipe_epochs"])

    def describe(self) -> str:
        if self.summary is None:
            return f"the given checkpoint {self.path}"
        lim = {k: v for k, v in self.summary["limits"].items()
               if v is not None and k not in ("workers", "eval_images")}   # what shortens the training
        return (f"{self.spec.name} ({self.source}; recipe {self.spec.recipe}, {self.epochs_trained} of "
                f"{self.summary['recipe_epochs']} epochs, {self.summary['steps_per_epoch']} steps of "
                f"{self.summary['global_batch']} images per epoch, lr {self.summary['lr']:.3g}"
                + (f"; shortened by {lim}" if lim else "") + f"; {self.path})")


def _classes(spec: RunSpec, data_root: Optional[str]) -> int:
    """The classes of ``spec``'s model: the recipe's ``num_classes``, else those of its dataset's training split."""
    from tokenprune.data.datasets import load_dataset

    if "num_classes" in spec.values:
        return int(spec.values["num_classes"])
    kw = {"val_fraction": 0.0} if spec.dataset.startswith("imagenet") else {}
    return load_dataset(spec.dataset, root=data_root, **kw)["train"].features["label"].num_classes


def _finished(spec: RunSpec, out: Path, limits: Limits) -> bool:
    """Whether ``out`` holds ``spec`` finished under ``limits`` (a run under other limits is not: training it again
    there is refused by :func:`train_run`, naming the limits)."""
    if not (out / "summary.json").is_file():
        return False
    summary = read_summary(out, spec)
    lim = summary.get("limits", {})
    same = {k: lim.get(k) for k in training_limits(limits)} == training_limits(limits)
    epochs = int(limits.epochs or spec.values["epochs"])
    return summary.get("spec_hash") == spec.spec_hash() and same and len(summary.get("history", ())) >= epochs


def trained_model(spec: RunSpec, cfg: Any, data_root: Optional[str], init_file: Optional[str],
                  given: Optional[str] = None, prepare: Optional[PrepareFn] = None,
                  device: Optional[str] = None) -> TrainedRun:
    """The model of ``spec`` for a notebook at ``paper``: the user's checkpoint ``given`` (a file: ``{'model': sd}``,
    ``{'state_dict': sd}`` or a state dict), else the finished run in :func:`runs_root` ``/ spec.name``, else that
    run trained there now (resuming a started one) from ``init_file`` on ``data_root`` under :func:`limits_of`
    ``(cfg)``. ``prepare``: see :func:`tokenprune.training.paper_training.train_run`."""
    if given:
        path = Path(given).expanduser()
        if not path.is_file():
            raise FileNotFoundError(f"{spec.name}: the given checkpoint {given} is not a file")
        sd = load_torch(path, "give a checkpoint file saved by torch.save ({'model': state_dict}, "
                        "{'state_dict': state_dict} or a state dict)", kind=f"the checkpoint given for {spec.name}",
                        weights_only=False)
        model = model_with_weights(spec, _classes(spec, data_root), sd.get("model", sd.get("state_dict", sd)), prepare)
        return TrainedRun(spec, model, "given", None, str(path))
    out = runs_root(cfg) / spec.name
    limits = limits_of(cfg)
    source = "loaded" if _finished(spec, out, limits) else "trained"
    if source == "trained":
        g = gpu_hours(spec)
        print(f"[estimate] {spec.name}: {g.hours:.1f} A100-hours for the recipe's schedule ({g.source}); training "
              f"into {out}" + (f" under limits {training_limits(limits)}, {limits.epochs or spec.values['epochs']} "
                               "epoch(s)" if training_limits(limits) != training_limits(Limits()) or limits.epochs
                               else ""), flush=True)
        train_run(spec, out, data_root, None, limits, device, progress=True, init_file=init_file, prepare=prepare)
    model, summary = load_trained(spec, out, prepare=prepare)   # its classes from the run's summary
    return TrainedRun(spec, model, source, summary, str(out))


FULL_SCHEDULE = "every training run trained its recipe's whole schedule"
"""The premise of every claim decided on models trained here at paper scale (:func:`full_schedule_premise`)."""


def full_schedule_premise(runs: Sequence[TrainedRun]) -> verdicts.Premise:
    """:data:`FULL_SCHEDULE`: a run shortened by the tests' limits (batch, steps, epochs) is not the paper's training,
    and a claim on it is ``inconclusive`` with this premise named. No runs (a model given, not trained here): holds."""
    short = [r for r in runs if not r.full_schedule]
    if not runs:
        return verdicts.Premise(FULL_SCHEDULE, True, "no run trained here: the model was given")
    # the detail is short (it becomes part of a claim's one-sentence why): counts and the first shortened recipe
    return verdicts.Premise(FULL_SCHEDULE, not short,
                            (f"{len(short)} of {len(runs)} run(s) shortened, first {short[0].spec.recipe}: "
                             f"{short[0].epochs_trained} of {short[0].summary['recipe_epochs']} epochs") if short
                            else f"{len(runs)} run(s) trained in full")


def file_top1_claim(rep: Any, decl: Any, top1: float, low: float, high: float, *, keys: Mapping[str, Any] = {},
                    why: str = "", runs: Sequence[TrainedRun] = ()) -> Any:
    """File the paper-scale top-1 claim ``decl`` (a :class:`tokenprune.study.claims.Declaration` whose rule decides
    a 95 % interval ``[low, high]`` in percent, e.g. ``Magnitude(paper_top1, 0.0)``, and which declares
    :data:`FULL_SCHEDULE`), its premise judged on the ``runs`` it was measured on."""
    from tokenprune.study.claims import file_claim

    return file_claim(rep, decl, decl.rule().decide(top1, low, high), keys=keys, our_value=round(top1, 2),
                      ci=[round(low, 2), round(high, 2)], why=why,
                      premises={FULL_SCHEDULE: full_schedule_premise(runs)})


def paper_scale_id(claim_id: str) -> str:
    """The id of a claim decided at paper scale on the paper's data and training (ids of their own, as the verdicts
    may differ from the proxy's): ``<paper>.paper_scale.<rest>``.

    >>> paper_scale_id("evit.top1.deit_s.keep0.7")
    'evit.paper_scale.top1.deit_s.keep0.7'
    """
    paper, _, rest = claim_id.partition(".")
    if not rest:
        raise ValueError(f"claim_id: expected '<paper>.<name>', got {claim_id!r}")
    return f"{paper}.{PAPER_SCALE}.{rest}"


# ---------------------------------------------------------------------------------------------- CLI
def _checked_specs(args: argparse.Namespace) -> list[RunSpec]:
    """The runs ``paper-train`` trains, after refusing (InputError, naming the option) a run index out of range, a
    test limit below 1, fewer than 0 workers, folders that are not there and a device that is unknown or absent,
    before anything is written."""
    specs = run_specs(load_recipe(args.recipe))
    if args.run is not None and not 0 <= args.run < len(specs):
        raise InputError(f"--run: {args.run} out of range; recipe {args.recipe} has runs 0..{len(specs) - 1}")
    for option, value, low in (("--batch-per-process", args.batch_per_process, 1),
                               ("--steps-per-epoch", args.steps_per_epoch, 1), ("--epochs", args.epochs, 1),
                               ("--eval-images", args.eval_images, 1), ("--workers", args.workers, 0)):
        if value is not None and value < low:
            raise InputError(f"{option}: expected an int >= {low}, got {value}")
    for option, path in (("--data-root", args.data_root), ("--init-dir", args.init_dir)):
        if path is not None and not Path(path).expanduser().is_dir():
            raise InputError(f"{option}: {path} is not a folder")
    if Path(args.out).exists() and not Path(args.out).is_dir():
        raise InputError(f"--out: {args.out} exists and is not a folder")
    if args.device is not None:
        with input_checks():
            check_device(args.device, "--device")
    return specs if args.run is None else [specs[args.run]]


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
    specs = _checked_specs(args)
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
