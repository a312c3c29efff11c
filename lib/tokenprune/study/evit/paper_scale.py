"""§4 of notebook 01: accuracy at the paper's scale. The ``paper`` profile evaluates DeiT-S on ImageNet val off the
shelf and EViT-DeiT-S trained by EViT's recipe; elsewhere the claims about models trained with EViT are filed as not
testable here, each with what would decide it, as are EViT's LV-ViT rows (timm has no LV-ViT) and its Figures 4, 6
and 7; the paper's even-cut rule for the reorganisation layers is checked against the layers it states."""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Optional, Sequence

import pandas as pd
import timm
import torch

from tokenprune.core.config import PruneConfig
from tokenprune.core.patch import patch
from tokenprune.data import datasets as data
from tokenprune.measure import evaluation, intervals
from tokenprune.measure.evaluation import Predictions
from tokenprune.study import paper_runs, verdicts
from tokenprune.study.evit.filing import file
from tokenprune.core.schedule import EVIT_LOCATIONS
from tokenprune.study.claims import unmeasured
from tokenprune.study.evit.claims import CLAIMS
from tokenprune.study.evit.claims_lvvit import REORGANISATION_LAYERS, reorganisation_layers
from tokenprune.study.evit.settings import KEEP_RATES
from tokenprune.study.notebook import ci_columns
from tokenprune.study.paper_numbers import EVIT
from tokenprune.training import loop as tp_train, sources

__all__ = ["training_claims", "lvvit_missing", "locations_claim", "lvvit_and_figure_claims", "paper_runs_wanted",
           "evit_run", "paper_scale_accuracy"]

_DEIT_S = EVIT["deit_small_patch16_224"]
_KEEP07 = "evit.top1.deit_s.keep0.7"
_NEEDS_TRAINING = "needs EViT trained at the paper's scale on ImageNet-1k, which this machine cannot run"


def lvvit_missing() -> str:
    """Why LV-ViT is not built here: timm has no LV-ViT model (the study does not implement the architecture)."""
    if timm.list_models("*lvvit*") or timm.list_models("*lv_vit*"):
        return "this notebook does not build LV-ViT"
    return f"timm {timm.__version__} has no LV-ViT model"


def locations_claim(rep: Any) -> Any:
    """File the check that EViT's even-cut rule gives the layers the paper states (LV-ViT-S 5/9/13, DeiT 4/7/10, and
    the official code's DeiT layers); returns the claim."""
    decl = CLAIMS["evit.lvvit_s.locations_cut_evenly"]
    ours = {m: reorganisation_layers(depth) for m, (depth, _) in REORGANISATION_LAYERS.items()}
    ours["DeiT (official code)"] = tuple(EVIT_LOCATIONS)
    show = "; ".join(f"{m}: {'/'.join(map(str, v))}" for m, v in ours.items())
    paper = "; ".join(f"{m}: {'/'.join(map(str, v))}" for m, (_, v) in REORGANISATION_LAYERS.items())
    return file(rep, decl, decl.rule().decide(ours), paper_value=paper, our_value=show,
                why="the Appendix's rule with t = 3 at each model's depth")


def lvvit_and_figure_claims(rep: Any) -> list[str]:
    """EViT's LV-ViT rows (:func:`locations_claim`; the main results, Table 5's rows and EViT/0.7-LV-ViT-S@448's
    top-1, gain, parameters and throughput) and Figures 4, 6 and 7, each ``not testable here`` with what would decide
    it but the location check. Returns the ids filed."""
    missing = lvvit_missing()
    trained = f"needs LV-ViT-S trained with EViT on ImageNet-1k, which this machine cannot run; {missing}"
    why = {"evit.lvvit_s.speedup_small_drop": trained, "evit.t5.lvvit_s.favourable_higher_res": trained,
           "evit.t5.lvvit_s_448.top1": trained, "evit.t5.lvvit_s_448.beats_lvvit_s_384": trained,
           "evit.t5.lvvit_s_448.params_as_lvvit_s_384": missing,
           "evit.t5.lvvit_s_448.throughput_as_lvvit_s_384": missing,
           "evit.fig4.competitive_tradeoff": "needs EViT-DeiT-S and EViT-LV-ViT-S trained at the paper's scale and "
                                             "the compared ViTs timed on one GPU",
           "evit.fig6.inattentive_stay_inattentive": "needs a pre-trained DeiT-S on ImageNet images; no profile of "
                                                     "this notebook tracks those tokens",
           "evit.fig7.inattentive_converge_to_background": "needs EViT-DeiT-S trained from scratch at the paper's "
                                                           "scale with checkpoints, which this machine cannot run"}
    filed = [locations_claim(rep).id]
    for cid, reason in why.items():
        decl = CLAIMS[cid]
        filed.append(file(rep, decl, verdicts.not_testable(reason), premises=unmeasured(decl, reason)).id)
    return filed


def training_claims(rep: Any) -> list[str]:
    """The claims of Tables 2, 4, 6, 7, 8, 9 and 12 that need a model trained with EViT at the paper's scale, each
    ``not testable here`` with what would decide it (Table 2's keep-0.7 row: :func:`paper_scale_accuracy`), then
    EViT's LV-ViT rows and Figures 4, 6 and 7 (:func:`lvvit_and_figure_claims`). Returns the ids filed."""
    filed = []
    for k in sorted(_DEIT_S["keep"], reverse=True):
        for template in ("evit.top1.deit_s.keep{keep:g}", "evit.top1.deit_s.keep{keep:g}.dropped"):
            if template.format(keep=k) == _KEEP07:
                continue
            column = "top1" if template.endswith("}") else "top1_no_fusion"
            claim = file(rep, CLAIMS[template], verdicts.not_testable(_NEEDS_TRAINING),
                         keys={"keep": k, "top1": _DEIT_S["keep"][k][column]})
            filed.append(claim.id)
    for cid in ("evit.t4.longer_training_improves", "evit.t6.oracle_init_accuracy", "evit.t7.beats_dynamicvit_accuracy",
                "evit.t8.deit_b_cost_keep0.8", "evit.t9.fusion_beats_drop_high_res", "evit.t12.finetune_high_res"):
        filed.append(file(rep, CLAIMS[cid], verdicts.not_testable(_NEEDS_TRAINING)).id)
    return filed + lvvit_and_figure_claims(rep)


def _top1_row(weights: str, reducer: Optional[str], keep: float, p: Predictions, ref: Optional[Predictions],
              paper_top1: float, seed: int) -> dict:
    ci = intervals.bootstrap_ci(p.correct, seed=seed)
    agreement = 1.0 if ref is None else float((p.preds == ref.preds).float().mean())
    return {"weights": weights, "reducer": reducer, "keep_rate": keep, **ci_columns(ci, "top1", 100),
            "agreement": agreement, "paper_top1": paper_top1}


def paper_runs_wanted(cfg: Any) -> list[tuple[float, str]]:
    """``(keep rate, reducer)`` of every EViT-DeiT-S the paper profile trains: each of ``paper_train_keep_rates``
    with fusion, and without it when ``paper_train_dropped``."""
    reducers = ["fuse_attention"] + (["drop"] if cfg.paper_train_dropped else [])
    return [(float(k), red) for k in cfg.paper_train_keep_rates for red in reducers]


def evit_run(cfg: Any, keep: float, reducer: str) -> "paper_runs.TrainedRun":
    """EViT-DeiT-S at ``keep`` with ``reducer``: ``cfg.evit_weights`` for keep 0.7 with fusion when given, else the
    recipe ``evit_deit_s_finetune`` (EViT's finetune.sh) at that keep rate, trained from ``cfg.deit_s_weights`` on
    ``cfg.imagenet_root`` (or loaded from ``cfg.runs_dir`` when a run finished there)."""
    spec = paper_runs.recipe_run("evit_deit_s_finetune")
    if (keep, reducer) != (spec.keep_rate, spec.reducer):
        spec = dataclasses.replace(spec, keep_rate=keep, reducer=reducer)
    given = cfg.evit_weights if (keep, reducer) == (0.7, "fuse_attention") and cfg.evit_weights else None
    return paper_runs.trained_model(spec, cfg, cfg.imagenet_root, cfg.deit_s_weights, given=given)


def _keep07_not_here(rep: Any, why: str) -> None:
    file(rep, CLAIMS[_KEEP07], verdicts.not_testable(why))


def paper_scale_accuracy(rep: Any, cfg: Any) -> pd.DataFrame:
    """``paper`` profile: DeiT-S on ImageNet val off the shelf at every keep rate, fused and dropped, and EViT-DeiT-S
    trained at each of :func:`paper_runs_wanted` (:func:`evit_run`), each with its top-1 claim under an id of its own
    (``evit.paper_scale.*``), decided once the run trained the recipe's whole schedule. Elsewhere the keep-0.7 claim
    is filed as not testable. Returns the table (empty outside ``paper``)."""
    if cfg.profile != "paper":
        _keep07_not_here(rep, "needs ImageNet-1k validation images and DeiT-S / EViT weights, not on this machine")
        return pd.DataFrame([])
    from timm.data import IMAGENET_DEFAULT_MEAN, IMAGENET_DEFAULT_STD
    from timm.models import load_checkpoint

    seed = cfg.seed
    in1k = data.load_dataset("imagenet", root=cfg.imagenet_root, val_fraction=0.0)
    # DeiT's and EViT's evaluation crop: resize to 256 (bicubic), centre 224
    in_pre = sources.Preprocess(224, channels=3, mean=IMAGENET_DEFAULT_MEAN, std=IMAGENET_DEFAULT_STD,
                                 resize="bicubic", crop_ratio=0.875)
    dev_in = "cuda" if torch.cuda.is_available() else "cpu"
    in_dtype = "bf16" if dev_in == "cuda" else "fp32"   # as the recipe's runs evaluate (paper_training)

    val = in1k["test"]
    if 0 < cfg.paper_eval_images < len(val):   # class-balanced
        val = val.select(data.class_balanced_indices(val["label"], cfg.paper_eval_images, seed).tolist())

    def imagenet_predictions(model):
        logits, labels = tp_train.evaluate(model, val, batch=cfg.batch, dtype=in_dtype, device=dev_in,
                                           preprocess=in_pre, progress=False)
        return evaluation.Predictions(logits, labels)

    def top1_claim(cid: str, row: dict, why: str, runs: Sequence = ()) -> None:
        paper_runs.file_top1_claim(rep, CLAIMS[cid], row["top1"], row["top1_low"], row["top1_high"],
                                   why=f"{why}; ImageNet val, {len(val)} images, 95 % bootstrap interval", runs=runs)

    deit = timm.create_model("deit_small_patch16_224", pretrained=False)
    load_checkpoint(deit, str(Path(cfg.deit_s_weights).expanduser()), strict=True)
    deit = patch(deit, keep_rate=1.0)
    in_full = imagenet_predictions(deit)
    paper_rows = []
    for red in ("fuse_attention", "drop"):
        for k in KEEP_RATES[1:]:
            PruneConfig(keep_rate=k, reducer=red).apply(deit)
            paper_rows.append(_top1_row("DeiT-S (off the shelf)", red, k, imagenet_predictions(deit), in_full,
                                        _DEIT_S["keep"][k]["top1" if red == "fuse_attention" else "top1_no_fusion"],
                                        seed))
    paper_rows.insert(0, _top1_row("DeiT-S", None, 1.0, in_full, None, _DEIT_S["baseline"]["top1"], seed))
    top1_claim("evit.paper_scale.top1.deit_s.baseline", paper_rows[0], "the given DeiT-S checkpoint")
    _keep07_not_here(rep, "decided at paper scale as evit.paper_scale.top1.deit_s.keep0.7 (trained EViT-DeiT-S)"
                     if 0.7 in [k for k, _ in paper_runs_wanted(cfg)] else
                     "paper_train_keep_rates does not hold 0.7: EViT-DeiT-S at keep 0.7 is not trained in this run")
    for keep, red in paper_runs_wanted(cfg):
        run = evit_run(cfg, keep, red)
        fused = red == "fuse_attention"
        paper = _DEIT_S["keep"][keep]["top1" if fused else "top1_no_fusion"] if keep in _DEIT_S["keep"] else None
        row = _top1_row(f"EViT-DeiT-S (trained at {keep:g}, {run.source})", red, keep,
                        imagenet_predictions(run.model), in_full, paper, seed)
        paper_rows.append(row)
        if paper is None:
            continue          # a keep rate the paper prints no figure for: in the table only
        cid = f"evit.paper_scale.top1.deit_s.keep{keep:g}" + ("" if fused else ".dropped")
        top1_claim(cid, row, run.describe()[:120], [run])
    return pd.DataFrame(paper_rows)
