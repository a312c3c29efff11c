"""§7: BAT's accuracy columns, the training protocol behind its comparisons, and the claims with no test here.

Table 1's top-1 figures need ImageNet-1k training (at the ``paper`` profile BAT-DeiT-S is trained per keep rate as its
logs did, :func:`paper_scale_top1`); the protocol claims are read from the authors' logs and EViT's text
(:func:`protocols`); LV-ViT, DynamicViT and the summary's latency flaw need what this machine does not have.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pandas as pd
import timm

from tokenprune.measure import evaluation, intervals
from tokenprune.study import paper_runs
from tokenprune.study.bat.claims import CLAIMS, HEADLINE_KEEP
from tokenprune.study.bat.settings import DEIT_S, PAPER_KEEP, bat_options
from tokenprune.study.claims import file_claim
from tokenprune.study.notebook import ci_columns
from tokenprune.study.paper_numbers import BAT, EVIT
from tokenprune.study.verdicts import not_testable

__all__ = ["bat_run", "paper_scale_top1", "file_top1_claims", "file_lv_vit_mac_claim", "protocols",
           "file_protocol_claims", "file_unsupported_claims"]

_BAT_S = BAT[DEIT_S]
_EVIT_S = EVIT[DEIT_S]["keep"]
_NO_IMAGENET = "needs ImageNet-1k training"


def bat_run(cfg: Any, r: float) -> paper_runs.TrainedRun:
    """BAT-DeiT-S at keep ``r`` as BAT's log of that row trained it (fine-tuned 30 epochs from DeiT-S, recipe
    ``bat_deit_s_finetune``, or from scratch, ``bat_deit_s_scratch``), with the notebook's operator options; the
    user's ``bat_weights_dir/bat_deit_s_keep<r>.pth`` when it exists."""
    scratch = _BAT_S["log_start"][r] == "from scratch"
    spec = paper_runs.recipe_run("bat_deit_s_scratch" if scratch else "bat_deit_s_finetune", keep_rate=r)
    spec = dataclasses.replace(spec, reducer_options=tuple(sorted(bat_options(cfg).items())))
    given = Path(cfg.bat_weights_dir) / f"bat_deit_s_keep{r:g}.pth" if cfg.bat_weights_dir else None
    return paper_runs.trained_model(spec, cfg, cfg.imagenet_root, None if scratch else cfg.deit_weights,
                                    given=str(given) if given is not None and given.is_file() else None)


def paper_scale_top1(rep: Any, cfg: Any, images: Any) -> pd.DataFrame:
    """``paper`` profile: BAT-DeiT-S trained at each of ``cfg.paper_train_keep_rates`` (:func:`bat_run`) on the
    notebook's ImageNet validation images (``images.full_images``), each Table 1 figure decided under its own id: the
    95 % bootstrap interval contains the printed value, once the run trained the recipe's whole schedule. The last
    epoch's weights are evaluated (the logs report the maximum over epochs, which can only be higher)."""
    rows = []
    for r in cfg.paper_train_keep_rates:
        run = bat_run(cfg, float(r))
        p = evaluation.predict(run.model, images.full_images, images.full_labels, batch=cfg.sweep_batch,
                               dtype=cfg.dtype)
        ci = intervals.bootstrap_ci(p.correct.astype(float), seed=cfg.seed)
        rows.append({"keep_rate": r, "source": run.source, "epochs": run.epochs_trained,
                     **ci_columns(ci, "top1", 100), "paper_top1": _BAT_S["keep"][r]["top1"]})
        paper_runs.file_top1_claim(rep, CLAIMS[f"bat.paper_scale.top1.deit_s.keep{float(r):g}"], ci.estimate * 100,
                                   ci.low * 100, ci.high * 100, runs=[run],
                                   why=f"{len(p.labels)} ImageNet val images, last epoch")
    return pd.DataFrame(rows)


def file_top1_claims(rep: Any, cfg: Any = None, images: Any = None) -> pd.DataFrame:
    """BAT's ImageNet top-1 figures (DeiT-S per keep rate, DeiT-T, LV-ViT-S) and the accuracy half of the summary's
    headline (its "0.2% accuracy drop"): not testable here; at the ``paper`` profile also :func:`paper_scale_top1`
    (returned; empty elsewhere)."""
    table = paper_scale_top1(rep, cfg, images) if cfg is not None and cfg.profile == "paper" else pd.DataFrame()
    decl = CLAIMS["bat.top1.deit_s.keep{keep:g}"]
    for r in PAPER_KEEP:
        start, epochs = _BAT_S["log_start"][r], _BAT_S["log_epochs"][r]
        file_claim(rep, decl, not_testable(f"needs DeiT-S trained with BAT on ImageNet-1k as the log did ({start}, "
                                           f"{epochs} epochs); the log reports the {_BAT_S['reported_top1']}",
                                           _NO_IMAGENET), keys={"keep": r})
    start, epochs = _BAT_S["log_start"][HEADLINE_KEEP], _BAT_S["log_epochs"][HEADLINE_KEEP]
    file_claim(rep, CLAIMS["bat.secondary.headline.top1_drop"],
               not_testable(f"needs DeiT-S trained with BAT at keep {HEADLINE_KEEP:g} on ImageNet-1k as the log did "
                            f"({start}, {epochs} epochs) and unpruned DeiT-S on the same val images", _NO_IMAGENET))
    file_claim(rep, CLAIMS["bat.top1.deit_t.keep0.7"],
               not_testable("needs DeiT-T trained with BAT on ImageNet-1k over several seeds", _NO_IMAGENET))
    file_claim(rep, CLAIMS["bat.top1.lv_vit_s"],
               not_testable("needs an LV-ViT-S (timm has none) trained with BAT and token labelling on ImageNet-1k",
                            _NO_IMAGENET))
    return table


def file_lv_vit_mac_claim(rep: Any) -> None:
    """LV-ViT-S's 4.7 GMACs: analytic at the paper's scale if timm had LV-ViT; it has none (checked at run time)."""
    found = timm.list_models("*lv_vit*") + timm.list_models("*lvvit*")
    why = (f"timm {timm.__version__} has no LV-ViT, and the sources give no reduction locations or keep rate for it"
           if not found else f"timm lists {found}, but the sources give no reduction locations or keep rate for it")
    file_claim(rep, CLAIMS["bat.macs.lv_vit_s"], not_testable(why, "analytic MACs need the architecture"))


def protocols() -> pd.DataFrame:
    """Per keep rate: how BAT's logged run started and for how many epochs, against EViT's protocol for the rows
    BAT's Table 1 sets beside it (EViT Sec. 4: from scratch, 300 epochs), and the printed top-1 of both."""
    ev = BAT["evit_protocol"]
    return pd.DataFrame([{"keep_rate": r, "bat_start": _BAT_S["log_start"][r], "bat_epochs": _BAT_S["log_epochs"][r],
                          "evit_start": ev["start"] if r in _EVIT_S else None,
                          "evit_epochs": ev["epochs"] if r in _EVIT_S else None,
                          "bat_top1": _BAT_S["keep"][r]["top1"], "evit_top1": _EVIT_S.get(r, {}).get("top1")}
                         for r in PAPER_KEEP])


def file_protocol_claims(rep: Any, proto: pd.DataFrame) -> None:
    """The training protocol behind the printed comparisons, from the official logs and EViT's text: each
    BAT-vs-EViT row like for like, and one protocol across BAT's own rows (which its 'the gap grows at low keep
    rates' reading needs)."""
    decl = CLAIMS["bat.protocol.vs_evit.keep{keep:g}"]
    for row in proto[proto.evit_epochs.notna()].itertuples():
        bat_p, ev_p = f"{row.bat_start}, {row.bat_epochs} epochs", f"{row.evit_start}, {int(row.evit_epochs)} epochs"
        decision = decl.rule().decide(bat_p == ev_p, f"BAT's run: {bat_p}; EViT's: {ev_p}")
        file_claim(rep, decl, decision, keys={"keep": row.keep_rate}, paper_value=ev_p, our_value=bat_p,
                   details={"printed_top1": {"bat": row.bat_top1, "evit": row.evit_top1},
                            "reported": _BAT_S["reported_top1"]})
    starts = {(row.bat_start, row.bat_epochs) for row in proto.itertuples()}
    decl = CLAIMS["bat.protocol.one_protocol_across_rates"]
    decision = decl.rule().decide(len(starts) == 1, "; ".join(f"{start}, {epochs} epochs" for start, epochs in
                                                            sorted(starts)))
    file_claim(rep, decl, decision, paper_value="one protocol", our_value=f"{len(starts)} protocols",
               details={f"keep {row.keep_rate:g}": f"{row.bat_start}, {row.bat_epochs} epochs"
                        for row in proto.itertuples()})


def file_unsupported_claims(rep: Any) -> None:
    """Claims with no test here: the comparison with DynamicViT and the summary's latency flaw."""
    file_claim(rep, CLAIMS["bat.vs_dynamicvit"],
               not_testable("needs DynamicViT and BAT trained on ImageNet-1k, and the paper's DynamicViT row, which "
                            "the sources do not give", _NO_IMAGENET),
               paper_value="BAT > DynamicViT")
    file_claim(rep, CLAIMS["bat.secondary.flaw_latency_vs_dynamicvit"],
               not_testable("DynamicViT's predictor is not implemented here; BAT's own overhead beyond EViT is timed "
                            "in bat.speed.clustering_cost.*", "needs DynamicViT's predictor"),
               paper_value=BAT["secondary_summary_flaws"][1])

