"""Notebook 03's claims on fine-tuned models: the paper's single-run margins across seeds (objections 5 and 7),
MedAD within 3 % at r = 0.3 after fine-tuning, and the paper's absolute top-1 numbers at its own scale."""
from __future__ import annotations

from types import SimpleNamespace
from typing import Optional

import pandas as pd

from tokenprune.measure import intervals
from tokenprune.measure.evaluation import paired_comparison
from tokenprune.study import paper_runs, verdicts
from tokenprune.study.proxy import audit_model
from tokenprune.study.proxy.audit_model import MOVED
from tokenprune.study.varmedad.claims import CLAIMS, SEEDS, TOP1, TRAINS_OVERLAP
from tokenprune.study.claims import unmeasured
from tokenprune.study.varmedad.designs import file, file_on_base, seed_design
from tokenprune.study.varmedad.finetunes import Finetunes, trains_overlap_premise
from tokenprune.study.varmedad.settings import EFFECTS, MIN_SEEDS
from tokenprune.study.paper_numbers import VARMEDAD as VM

__all__ = ["MARGINS", "margin_claim", "margin_claims", "top1_claims"]

#: claim id -> (configuration a, configuration b, the paper's margin a - b in top-1 points)
MARGINS = {
    "varmedad.obj5.variance_vs_evit": ("variance", "evit", EFFECTS["variance_vs_evit"]),
    "varmedad.obj5.overlap_vs_unpruned": ("overlap_variance", "unpruned", EFFECTS["overlap_vs_unpruned"]),
    "varmedad.obj7.variance_vs_tome_matched": ("variance", "tome", EFFECTS["variance_vs_tome"]),
    "varmedad.medad_r03.finetuned": ("medad_r03", "unpruned", -VM["medad_r03"]["max_drop"]),
}


def _moved(ft: Finetunes, configs: tuple[str, ...], seeds, seed: int) -> verdicts.Premise:
    """'The fine-tuning moved the model' for the pruned configurations of ``configs``: fine-tuned minus the same
    configuration off the shelf on the same images, two-stage bootstrap over seeds and images."""
    gains = {}
    for c in configs:
        if c == "unpruned":
            continue
        ref = ft.refs.get(c)
        gains[c] = None if ref is None else audit_model.two_stage_diff(
            audit_model.correct_matrix([ft.preds[(c, s)] for s in seeds]), audit_model.correct_matrix(ref),
            seed).scaled(100)
    return audit_model.moved_premise(gains)


def margin_claim(rep, ft: Finetunes, cfg: SimpleNamespace, cid: str) -> Optional[pd.DataFrame]:
    """A fine-tuned margin ``a - b`` (:data:`MARGINS`): per seed a paired comparison on the same test images, across
    seeds a t-interval of the difference, decided by the declared rule, gated on the seed-level design (effect in
    dispute: the paper's margin), then on its declared premises (the overlap trains its embeddings, the fine-tuning
    moved the model, at least 3 seeds; the proxy's calibration, or at ``paper`` every run's whole schedule). With no
    cached runs of the base model (``ft.missing``) it is not testable here, the moved-model premise naming the runs
    that would decide."""
    a, b, paper_value = MARGINS[cid]
    decl = CLAIMS[paper_runs.paper_scale_id(cid) if cfg.profile == "paper" else cid]
    if a not in cfg.finetune_configs or b not in cfg.finetune_configs or cfg.finetune_steps <= 0:
        why = f"profile {cfg.profile!r} does not fine-tune both {a} and {b} (finetune_configs, finetune_steps)"
        file(rep, decl, verdicts.not_testable(why), paper_value=paper_value, premises=unmeasured(decl, why))
        return None
    if ft.missing is not None:   # no cached runs of this base model: the premise names those that would decide
        why = f"no cached fine-tunes of {cfg.base_model}"
        vacuous = {n: p for n, p in unmeasured(decl, why).items() if n in (SEEDS, TRAINS_OVERLAP)}
        file(rep, decl, verdicts.not_testable(why), paper_value=paper_value,
             premises={**vacuous, MOVED: ft.missing.premise()}, details=ft.missing.record())
        return None
    df = pd.DataFrame([{"seed": s, "a": a, "b": b, **paired_comparison(ft.preds[(a, s)], ft.preds[(b, s)],
                                                                       seed=cfg.seed)} for s in cfg.seeds])
    ss = intervals.seed_summary(df.top1_diff.values * 100)
    decision = decl.rule().decide(ss.mean, ss.low, ss.high, what=f"{a} - {b} across seeds")
    design = seed_design(df.top1_diff.values * 100, f"{a} - {b}, top-1 points, each on the same {ft.n_test} images")
    det = verdicts.Detectable(abs(paper_value), design) if design is not None else None
    if det is not None:
        decision = det.gate(decision)
    moved = _moved(ft, (a, b), cfg.seeds, cfg.seed)
    premises = {SEEDS: verdicts.Premise(SEEDS, ss.n >= MIN_SEEDS, f"{ss.n} seed(s)"), moved.name: moved}
    if TRAINS_OVERLAP in decl.premises:
        premises[TRAINS_OVERLAP] = trains_overlap_premise(cfg)
    if cfg.profile == "paper":
        premises[paper_runs.FULL_SCHEDULE] = paper_runs.full_schedule_premise(
            [ft.runs[(c, s)] for c in (a, b) for s in cfg.seeds])
    file_on_base(rep, cid, decision, profile=cfg.profile, premises=premises, paper_value=paper_value,
                 our_value=round(ss.mean, 3), ci=None if ss.n < 2 else [ss.low, ss.high],
                 design=None if det is None else det.record(),
                 why=f"{ss.n} seed(s) on {ft.n_test} test images" + (f", MDE {det.design.mde:.2g}" if det else ""),
                 details={"per seed": [{"seed": r.seed, "diff": r.top1_diff * 100, "mcnemar_p": r.mcnemar_p}
                                       for r in df.itertuples()], "setting": ft.setting,
                          "moved": moved.detail, "design": None if det is None else det.design.text()})
    return df


def margin_claims(rep, ft: Finetunes, cfg: SimpleNamespace) -> pd.DataFrame:
    """Objections 5 and 7 (the paper's single-run margins: variance - EViT, overlap - unpruned, variance - ToMe) and
    'MedAD stays within 3 % at r = 0.3' after fine-tuning, across seeds; returns the per-seed paired comparisons."""
    dfs = [margin_claim(rep, ft, cfg, cid) for cid in MARGINS]
    return pd.concat([d for d in dfs if d is not None] or [pd.DataFrame()])


def top1_claims(rep, ft: Finetunes, cfg: SimpleNamespace) -> None:
    """The paper's absolute top-1 numbers (Tables 2 and 3): at ``paper``, the seed t-interval of our fine-tuned
    DeiT-S must contain the printed value (at least 3 seeds, every run of the recipe's whole schedule), filed under
    the paper-scale ids; elsewhere not testable here."""
    paper = cfg.profile == "paper"
    for key, (name, *_rest) in TOP1.items():
        decl = CLAIMS[f"varmedad.{'paper_scale.' if paper else ''}top1.{key}"]
        table = ft.table
        if not paper or table.empty or name not in set(table.config):
            why = (f"profile 'paper' fine-tunes no {name} here (finetune_configs, finetune_steps)" if paper else
                   "needs ImageNet-100 and DeiT-S weights (profile paper with data_root and deit_weights, a GPU)")
            file(rep, decl, verdicts.not_testable(why), premises=unmeasured(decl, why))
            continue
        runs = table[table.config == name]
        ss = intervals.seed_summary(runs.top1.values * 100)
        premises = {SEEDS: verdicts.Premise(SEEDS, ss.n >= MIN_SEEDS, f"{ss.n} seed(s)"),
                    paper_runs.FULL_SCHEDULE: paper_runs.full_schedule_premise([ft.runs[(name, s)] for s in runs.seed])}
        file(rep, decl, decl.rule().decide(ss.mean, ss.low, ss.high), premises=premises, our_value=round(ss.mean, 2),
             ci=None if ss.n < 2 else [ss.low, ss.high], why="seed t-interval of top-1 of our recipe",
             details={"setting": ft.setting})
