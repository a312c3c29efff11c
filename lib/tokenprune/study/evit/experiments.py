"""§5-6 of notebook 01: the models compared (the calibrated proxy, the small ViT on plain Fashion-MNIST, the
SynthBirds model), the keep-rate sweep off the shelf with its claims (Tables 1 and 2, top-5), the proxy's cached
fine-tunes and their claims, and the same sweep on SynthBirds."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

import numpy as np
import pandas as pd
import torch
from scipy import stats

from tokenprune.core.config import PruneConfig
from tokenprune.core.patch import patch
from tokenprune.measure import evaluation, intervals
from tokenprune.measure.evaluation import Predictions
from tokenprune.study import cached_sweeps, verdicts
from tokenprune.study.proxy import audit_model, chosen, needed_finetunes as needed
from tokenprune.study.evit.filing import file
from tokenprune.study.evit.claims import CLAIMS, OWN_TEST, TOP5_CEILING, TOP5_NOT_AT_CEILING
from tokenprune.study.paper_numbers import EVIT
from tokenprune.study.proxy.audit_model import AuditModel, EvaluatedModel, correct_matrix, gated, moved_premise
from tokenprune.training import base_models as tp_models, finetune_outputs, model_recipes, recipe_data
from tokenprune.training import sources
from tokenprune.training.recipe import TrainRecipe

__all__ = ["Sweep", "Finetunes", "SynthBirds", "load_audit_model", "load_small_vit", "keep_sweep", "top5_correct",
           "top5_view", "add_top5", "top5_claim", "removal_claim", "paper_fusion_side", "fusion_claims",
           "cached_finetunes", "missing_finetunes", "finetune_claims", "comparisons_table", "variance_ratio_detectable",
           "own_test_premise", "keep_configs", "keep_sweep_inputs", "synthbirds_inputs", "synthbirds_sweep"]

_DEIT_S = EVIT["deit_small_patch16_224"]
_PCT = ("top1", "top1_low", "top1_high", "agreement", "agreement_low", "agreement_high")


@dataclass
class Sweep:
    """The keep-rate sweep off the shelf: its table (with DeiT-S's top-1 of Table 2), the predictions by label
    (``unpruned``, ``fuse@<k>``, ``drop@<k>``; later sections add theirs), the configurations, and fused minus dropped
    per keep rate."""

    table: pd.DataFrame
    preds: dict
    configs: list
    fusion: pd.DataFrame


@dataclass
class Finetunes:
    """The proxy's cached fine-tunes: predictions per condition (one per seed), the per-run log and the table (all
    but the table's off-the-shelf rows empty on a proxy with no cached fine-tunes)."""

    preds: dict
    log: pd.DataFrame
    table: pd.DataFrame


@dataclass
class SynthBirds:
    """The SynthBirds model, its evaluation images (uint8) and labels, its sweep and fused minus dropped."""

    model: torch.nn.Module
    images: torch.Tensor
    labels: torch.Tensor
    sweep: pd.DataFrame
    fusion: pd.DataFrame


def load_audit_model(cfg: Any, device: str) -> AuditModel:
    """The audit model ``cfg.proxy_model`` on its first ``cfg.proxy_eval_images`` test images
    (:func:`tokenprune.study.proxy.audit_model.load_audit_model`; trained here when missing at the smoke profile)."""
    return audit_model.load_audit_model(cfg.proxy_model, cfg.proxy_eval_images, seed=cfg.seed,
                                        eval_batch=cfg.eval_batch, margin_pp=cfg.margin_pp, device=device,
                                        train_if_missing=cfg.profile == "smoke")


def load_small_vit(cfg: Any, device: str) -> EvaluatedModel:
    """Load ``cfg.base_model`` (trained here when missing in the smoke profile), draw the ``cfg.eval_images``
    evaluation images (seeded), patch it unpruned and predict them once."""
    base, info = tp_models.load_base_model(cfg.base_model, train_if_missing=cfg.profile == "smoke", progress=False)
    recipe = TrainRecipe.from_dict(info["recipe"])
    fm = recipe_data.load_recipe_data(recipe)
    x_raw, labels = sources.as_tensors(fm["test"], subset=cfg.eval_images, seed=cfg.seed)
    images = base.tp_preprocess(x_raw)
    patch(base, keep_rate=1.0)
    model = EvaluatedModel(base=base, info=info, recipe=recipe, data=fm, x_raw=x_raw, y=labels, X=images,
                           device=device, eval_batch=cfg.eval_batch, seed=cfg.seed, margin_pp=cfg.margin_pp,
                           name=cfg.base_model, n_max=len(fm["test"]),
                           max_scale=f"the full test split of {cfg.base_model}")
    return audit_model.predict_unpruned(model)


def _percent(table: pd.DataFrame) -> pd.DataFrame:
    """A sweep table's top-1 and agreement columns in percent."""
    for c in _PCT:
        table[c] = 100 * table[c]
    return table


def top5_correct(p: Predictions) -> np.ndarray:
    """Per-image top-5 correctness (top-``C`` for fewer than 5 classes)."""
    k = min(5, p.logits.shape[-1])
    return (p.logits.topk(k, dim=-1).indices == p.labels[:, None]).any(-1).numpy()


def top5_view(p: Predictions) -> Predictions:
    """Predictions whose top-1 correctness is ``p``'s top-5 correctness (so :meth:`EvaluatedModel.compare` and
    :meth:`EvaluatedModel.ci_row` give top-5 figures; their agreement column is then meaningless)."""
    ok = torch.from_numpy(top5_correct(p))
    n_cls = p.logits.shape[-1]
    preds = torch.where(ok, p.labels, (p.labels + 1) % n_cls)
    return Predictions(torch.nn.functional.one_hot(preds, n_cls).float(), p.labels)


def add_top5(table: pd.DataFrame, preds: dict, seed: int) -> pd.DataFrame:
    """Adds top-5 (%, 95 % bootstrap interval) to a sweep table, from the predictions by config."""
    cis = [intervals.bootstrap_ci(top5_correct(preds[c]).astype(float), seed=seed) for c in table.config]
    for name, get in (("top5", lambda ci: ci.estimate), ("top5_low", lambda ci: ci.low),
                      ("top5_high", lambda ci: ci.high)):
        table[name] = [100 * get(ci) for ci in cis]
    return table


def _fusion_rows(model: EvaluatedModel, preds: dict, keep_rates: Sequence[float]) -> list[dict]:
    return [{"keep_rate": k, **{f"{n}_pp": getattr(c, n) for n in ("diff", "low", "high")}, "mcnemar_p": c.p}
            for k in keep_rates for c in [model.compare(preds[f"fuse@{k:g}"], preds[f"drop@{k:g}"])]]


def keep_sweep_inputs(cfg: Any = None, model: Optional[EvaluatedModel] = None) -> "cached_sweeps.SweepInputs":
    """The keep-rate sweep's model, images and configurations (``cfg``: the notebook's settings, None: the ``default``
    profile's, as ``make models`` caches it; ``model``: the audit model on its evaluation images, None: loaded by
    :func:`load_audit_model` on the CPU): fused and dropped at each of ``cfg.sweep_keep_rates``."""
    from tokenprune.study import params

    cfg = params.setup("01_evit", "default") if cfg is None else cfg
    model = load_audit_model(cfg, "cpu") if model is None else model
    return cached_sweeps.SweepInputs(model.base, model.info, model.X, model.y, keep_configs(cfg.sweep_keep_rates),
                                     model.sweep_kw["batch"], model.sweep_kw["dtype"], model.seed, raw=model.x_raw)


def keep_sweep(model: EvaluatedModel, cfg: Any) -> Sweep:
    """``model`` off the shelf, fused and dropped at each of ``cfg.sweep_keep_rates`` (:class:`Sweep`; at ``default``
    the cached sweep, :mod:`tokenprune.study.cached_sweeps`)."""
    keep_rates = cfg.sweep_keep_rates
    inp = keep_sweep_inputs(cfg, model)
    configs = inp.configs
    preds = cached_sweeps.cached_sweep("evit_keep_rates", inp, cfg.profile)
    table = _percent(evaluation.sweep_table(model.base, preds, configs, seed=model.seed))
    add_top5(table, preds, model.seed)
    t2 = _DEIT_S["keep"]
    table["paper_top1_deit_s"] = [
        _DEIT_S["baseline"]["top1"] if r.keep_rate == 1.0 else
        t2.get(r.keep_rate, {}).get("top1" if r.reducer == "fuse_attention" else "top1_no_fusion")
        for r in table.itertuples()]
    rows = _fusion_rows(model, preds, keep_rates)
    for row in rows:
        pk = t2.get(row["keep_rate"], {})
        row["paper_diff_pp"] = round(pk["top1"] - pk["top1_no_fusion"], 2) if pk else None
    return Sweep(table, preds, configs, pd.DataFrame(rows))


def _interval(c: audit_model.Comparison) -> list[float]:
    return [round(c.low, 3), round(c.high, 3)]


def _equivalent(c: audit_model.Comparison, margin_pp: float) -> verdicts.Decision:
    return verdicts.Equivalence(margin_pp).decide(c.diff, c.low, c.high, c.low90, c.high90)


def top5_claim(rep: Any, model: EvaluatedModel, preds: dict, keep: float = 0.7) -> None:
    """File "EViT at ``keep`` keeps top-5 accuracy" off the shelf: fused minus unpruned top-5, equivalent within the
    margin (TOST), on the premise that the unpruned top-5 is below :data:`TOP5_CEILING` (with 10 classes top-5 is
    nearly always right, whatever the pruning)."""
    decl, keys = CLAIMS["evit.t2.top5_kept.keep{keep:g}.off_the_shelf"], {"keep": keep}
    if f"fuse@{keep:g}" not in preds:
        unmeasured = verdicts.Premise(TOP5_NOT_AT_CEILING, True, "not measured: the claim is not decided here")
        file(rep, decl, verdicts.not_testable(f"profile {rep.profile!r} does not sweep keep {keep:g}"), keys=keys,
             premises={TOP5_NOT_AT_CEILING: unmeasured})
        return
    margin = model.margin_pp  # the effect in dispute: the paper prints no top-5 here; the equivalence margin
    a5, b5 = top5_view(preds[f"fuse@{keep:g}"]), top5_view(model.full)
    c = model.compare(a5, b5)
    base5, n_cls = 100 * float(top5_correct(model.full).mean()), model.full.logits.shape[-1]
    ceiling = verdicts.Premise(TOP5_NOT_AT_CEILING, base5 < TOP5_CEILING,
                               f"unpruned top-5 {base5:.2f} % with {n_cls} classes")
    g = gated(decl.rule(margin).decide(c.diff, c.low, c.high, c.low90, c.high90), margin, model.design(a5, b5))
    fused5 = 100 * float(top5_correct(preds[f"fuse@{keep:g}"]).mean())
    file(rep, decl, g.decision, keys=keys, our_value=round(c.diff, 3), ci=_interval(c), design=g.design,
         premises={TOP5_NOT_AT_CEILING: ceiling},
         why=f"off the shelf, {len(model.y)} images; unpruned top-5 {base5:.2f} %, fused {fused5:.2f} %",
         details={"effect in dispute": f"the equivalence margin {margin:g} points (no top-5 number in our "
                                       "sources)"})


def removal_claim(rep: Any, model: EvaluatedModel, preds: dict, keep: float = 0.7) -> None:
    """Table 1: removing the inattentive tokens of a trained model without training with pruning deteriorates
    top-1: unpruned minus dropped at ``keep`` off the shelf, a direction claim (paired interval and McNemar)."""
    decl, keys = CLAIMS["evit.t1.removal_without_training_hurts.keep{keep:g}"], {"keep": keep}
    if f"drop@{keep:g}" not in preds:
        file(rep, decl, verdicts.not_testable(f"profile {rep.profile!r} does not sweep keep {keep:g}"), keys=keys)
        return
    effect = model.margin_pp  # no number in our sources: the smallest cost the statement would care about
    c = model.compare(model.full, preds[f"drop@{keep:g}"])
    g = gated(decl.rule().decide(c.diff, c.low, c.high, p=c.p), effect,
              model.design(model.full, preds[f"drop@{keep:g}"]))
    file(rep, decl, g.decision, keys=keys, our_value=round(c.diff, 3), ci=_interval(c), design=g.design,
         why=f"off the shelf, {len(model.y)} images, McNemar p={c.p:.3g}",
         details={"effect in dispute": f"the equivalence margin {effect:g} points (Table 1's numbers are not in "
                                       "our sources)"})


def paper_fusion_side(keep: float) -> tuple[float, str]:
    """DeiT-S's fused minus dropped top-1 at ``keep`` in Table 2 / the README and the side it favours (``">"``:
    fusion; ``"<"``: dropping, as at 0.9 and 0.6)."""
    pk = _DEIT_S["keep"][keep]
    d = round(pk["top1"] - pk["top1_no_fusion"], 2)
    if d == 0:
        raise ValueError(f"keep {keep:g}: the paper prints no difference, which is not a direction claim")
    return d, ">" if d > 0 else "<"


def _fusion_keys(keep: float) -> dict:
    pk = _DEIT_S["keep"][keep]
    d, _ = paper_fusion_side(keep)
    return {"keep": keep, "fused": pk["top1"], "dropped": pk["top1_no_fusion"], "paper_diff": abs(d)}


def _fusion_template(keep: float, suffix: str = "") -> str:
    name = "fusion_beats_drop" if paper_fusion_side(keep)[1] == ">" else "drop_beats_fusion"
    return f"evit.t2.{name}.keep{{keep:g}}.off_the_shelf{suffix}"


def fusion_claims(rep: Any, model: EvaluatedModel, preds: dict) -> pd.DataFrame:
    """Fused against dropped off the shelf at every keep rate of EViT's Table 2 (0.9 ... 0.5), each in the
    direction the paper's own DeiT-S numbers show it, the paper's difference the effect in dispute; a keep rate the
    profile does not sweep is not testable. Returns the comparisons."""
    rows = []
    for k in sorted(_DEIT_S["keep"], reverse=True):
        d, side = paper_fusion_side(k)
        decl, keys = CLAIMS[_fusion_template(k)], _fusion_keys(k)
        if f"fuse@{k:g}" not in preds or f"drop@{k:g}" not in preds:
            file(rep, decl, verdicts.not_testable(f"profile {rep.profile!r} does not sweep keep {k:g}"),
                 keys=keys, paper_value=d)
            continue
        c = model.compare(preds[f"fuse@{k:g}"], preds[f"drop@{k:g}"])
        g = gated(decl.rule().decide(c.diff, c.low, c.high, p=c.p), d,
                  model.design(preds[f"fuse@{k:g}"], preds[f"drop@{k:g}"]))
        file(rep, decl, g.decision, keys=keys, paper_value=d, our_value=round(c.diff, 3), ci=_interval(c),
             design=g.design,
             why=f"{model.name} pruned off the shelf, {len(model.y)} images, McNemar p={c.p:.3g}",
             details={"effect in dispute": f"DeiT-S's {abs(d):g} points (Table 2)",
                      "interval width (points)": round(c.high - c.low, 2)})
        rows.append({"keep_rate": k, "paper_diff_pp": d, "paper_side": side, "diff_pp": c.diff, "low_pp": c.low,
                     "high_pp": c.high, "mcnemar_p": c.p})
    return pd.DataFrame(rows)


def cached_finetunes(model: EvaluatedModel, cfg: Any, preds: dict) -> Finetunes:
    """The cached fine-tunes of the proxy (``base_models.load_finetuned``: every condition of
    :data:`~tokenprune.training.model_recipes.FINETUNE_CONDITIONS` for every seed of ``cfg.finetune_seeds``), each
    patched with its condition's configuration and evaluated as trained on ``model``'s images (at ``default`` the
    outputs ``make models`` cached on its test split, each rechecked against its checkpoint:
    :func:`tokenprune.training.finetune_outputs.cached_logits`), with the per-run log (recipe hash, weights'
    SHA-256, checkpoint accuracy) and the table (with the off-the-shelf rows for reference; ``model.base`` is left
    unpruned). A proxy with no cached fine-tunes has none to evaluate: no predictions, an empty log, the table's
    off-the-shelf rows alone (:func:`finetune_claims` files its claims as not testable here)."""
    prof = "smoke" if cfg.profile == "smoke" else "default"
    cached_here = model_recipes.has_cached_finetunes(cfg.proxy_model)
    prefix = model_recipes.finetune_prefix(cfg.proxy_model) if cached_here else ""
    finetuned: dict = {name: [] for name in model_recipes.FINETUNE_CONDITIONS} if cached_here else {}
    log = []
    for name, (k, red, warm) in model_recipes.FINETUNE_CONDITIONS.items() if cached_here else ():
        for s in cfg.finetune_seeds:
            m, info = tp_models.load_finetuned(name, s, prof, prefix=prefix)
            recipe = TrainRecipe.from_dict(info["recipe"])
            finetune_outputs.eval_config(recipe).apply(m)
            cached = finetune_outputs.cached_logits(recipe, m, model.X, model.y) if cfg.profile == "default" else None
            finetuned[name].append(model.predict(m) if cached is None else Predictions(cached, model.y))
            log.append({"condition": name, "seed": s, "keep_rate": k, "reducer": red, "keep_warmup_epochs": warm,
                        "model": info.get("name"), "recipe_hash": info.get("recipe_hash"),
                        "sha256": info.get("sha256"), "checkpoint_test_accuracy": info["test"]["accuracy"],
                        "train_s": info.get("train_time_s"), "top1": 100 * float(finetuned[name][-1].correct.mean())})
            del m
    rows = [{"condition": n, "keep_rate": k, "reducer": red, "keep_warmup_epochs": warm,
             "gmacs": model.gmacs_of(k, red), **model.ci_row(finetuned[n])}
            for n, (k, red, warm) in model_recipes.FINETUNE_CONDITIONS.items() if n in finetuned]
    k0 = cfg.ft_keep
    rows += [{"condition": f"off the shelf: {lab}", "keep_rate": k, "reducer": red, "keep_warmup_epochs": None,
              "gmacs": model.gmacs_of(k, red), **model.ci_row(preds[lab])}
             for lab, k, red in (("unpruned", 1.0, "fuse_attention"), (f"fuse@{k0:g}", k0, "fuse_attention"),
                                 (f"drop@{k0:g}", k0, "drop"))]
    patch(model.base, keep_rate=1.0)
    return Finetunes(finetuned, pd.DataFrame(log, columns=_LOG_COLUMNS), pd.DataFrame(rows))


#: the columns of :class:`Finetunes`' log, one row per cached fine-tune evaluated
_LOG_COLUMNS = ["condition", "seed", "keep_rate", "reducer", "keep_warmup_epochs", "model", "recipe_hash", "sha256",
                "checkpoint_test_accuracy", "train_s", "top1"]


def missing_finetunes(cfg: Any) -> needed.NeededFinetunes:
    """The fine-tunes that would decide §6b's claims on ``cfg.proxy_model`` when it has none cached: the cached
    design (every condition of :data:`~tokenprune.training.model_recipes.FINETUNE_CONDITIONS`, each seed of
    ``cfg.finetune_seeds``, the training images of the stand-in's cached fine-tunes) on it
    (:func:`tokenprune.study.proxy.needed_finetunes.needed`)."""
    images = model_recipes.finetuned_base(chosen.STAND_IN)[2]
    conditions = [(n, k < 1.0) for n, (k, _, _) in model_recipes.FINETUNE_CONDITIONS.items()]
    return needed.needed(cfg.proxy_model, conditions, cfg.finetune_seeds, images,
                         f"<prefix>_ft_<condition>_s<seed> of a FINETUNED_BASES entry for {cfg.proxy_model}")


def comparisons_table(cmp: dict) -> pd.DataFrame:
    """The fine-tuned comparisons of :func:`finetune_claims`, one row each (its name, then
    :meth:`~tokenprune.study.proxy.audit_model.Comparison.row`); with none, an empty table with the columns every
    comparison has."""
    if not cmp:
        return pd.DataFrame(columns=["comparison", "diff", "low", "high", "low90", "high90", "p", "seeds"])
    return pd.DataFrame([{"comparison": k, **v.row()} for k, v in cmp.items()])


def variance_ratio_detectable(n_a: int, n_b: int, alpha: float = 0.05, power: float = 0.8) -> float:
    """The smallest true variance ratio that the one-sided F-test (``n_a`` seeds over ``n_b``) detects with ``power``:
    ``F_{1-alpha}(n_a-1, n_b-1) / F_{1-power}(n_a-1, n_b-1)``."""
    d1, d2 = n_a - 1, n_b - 1
    return float(stats.f.ppf(1 - alpha, d1, d2) / stats.f.ppf(1 - power, d1, d2))


def _seed_spread(finetuned: dict) -> dict:
    sd_f = 100 * correct_matrix(finetuned["fuse70"]).mean(1)
    sd_d = 100 * correct_matrix(finetuned["drop70"]).mean(1)
    var_f, var_d = sd_f.var(ddof=1), sd_d.var(ddof=1)
    if var_f > 0 and var_d > 0:
        ratio = float(var_d / var_f)
        p_f = float(stats.f.sf(ratio, len(sd_d) - 1, len(sd_f) - 1))
        p_rev = float(stats.f.sf(1 / ratio, len(sd_f) - 1, len(sd_d) - 1))
    else:  # a zero variance (identical seeds): no F-test
        ratio = p_f = p_rev = float("nan")
    return {"sd_fused": float(sd_f.std(ddof=1)), "sd_dropped": float(sd_d.std(ddof=1)), "ratio": ratio,
            "p_dropped_over_fused": p_f, "p_fused_over_dropped": p_rev, "seeds": len(sd_f),
            "detectable_ratio": variance_ratio_detectable(len(sd_d), len(sd_f))}


def finetune_claims(rep: Any, model: EvaluatedModel, cfg: Any, finetuned: dict, preds: dict) -> dict:
    """The fine-tuned comparisons on the cached fine-tunes (:func:`cached_finetunes`) and their claims: fused beats
    dropped (``fuse70`` vs ``drop70``: EViT's fine-tuning protocol, both pruned from the first step), fusion's
    smaller seed spread, the warm-up's negligible effect (``fuse70_warm`` vs ``fuse70``) and the cost of keep
    ``cfg.ft_keep`` (``unpruned`` fine-tune vs ``fuse70``). Registers
    :func:`~tokenprune.study.proxy.audit_model.moved_premise`, which each declares; the comparisons of means are
    gated by their design. Returns the comparisons by name. With no fine-tunes (``finetuned`` empty: the proxy has
    none cached), each claim is not testable here on that premise, which names the fine-tunes that would decide
    (:func:`missing_finetunes`); no comparison is returned."""
    k0, keys = cfg.ft_keep, {"keep": cfg.ft_keep}
    pk = _DEIT_S["keep"].get(k0, _DEIT_S["keep"][0.7])
    paper_d = round(pk["top1"] - pk["top1_no_fusion"], 2)   # the effect in dispute, from Table 2
    cost = round(_DEIT_S["baseline"]["top1"] - _DEIT_S["keep"][0.7]["top1"], 2)
    if not finetuned:
        missing = missing_finetunes(cfg)
        rep.add_premise(missing.premise())
        none = verdicts.not_testable(f"no cached fine-tunes of {cfg.proxy_model}")
        for cid, paper_value in (("evit.t2.fusion_beats_drop.keep{keep:g}.finetuned", paper_d),
                                 ("evit.t2.fusion_smaller_seed_spread.keep{keep:g}", None),
                                 ("evit.warmup.negligible", None), ("evit.t2.cost.keep{keep:g}.finetuned", cost)):
            file(rep, CLAIMS[cid], none, keys=keys, paper_value=paper_value, details=missing.record())
        return {}
    pairs = {"fuse - drop (fine-tuned)": ("fuse70", "drop70"), "warm-up - no warm-up": ("fuse70_warm", "fuse70"),
             "unpruned - fuse (fine-tuned; the cost)": ("unpruned", "fuse70")}
    cmp = {name: model.compare(finetuned[a], finetuned[b]) for name, (a, b) in pairs.items()}
    designs = {name: model.design(finetuned[a], finetuned[b]) for name, (a, b) in pairs.items()}
    cmp["fine-tuned - off-the-shelf fuse"] = moved = model.compare(finetuned["fuse70"], preds[f"fuse@{k0:g}"])
    rep.add_premise(moved_premise({f"fuse70 fine-tuned minus fused off the shelf at keep {k0:g}": moved}))
    prof = "smoke" if cfg.profile == "smoke" else "default"
    rec = model_recipes.recipes_for(prof)[model_recipes.finetuned_name("fuse70", cfg.finetune_seeds[0], prof,
                                                                       model_recipes.finetune_prefix(cfg.proxy_model))]
    about = {"seeds": len(finetuned["fuse70"]), "fine-tunes": f"the cached fine-tunes of {model.name}",
             "training images each": rec.train_subset, "trained": rec.trainable or "everything",
             "test images": len(model.y)}
    n = f"{len(finetuned['fuse70'])} seeds, {len(model.y)} images"

    c = cmp["fuse - drop (fine-tuned)"]
    decl = CLAIMS["evit.t2.fusion_beats_drop.keep{keep:g}.finetuned"]
    g = gated(decl.rule().decide(c.diff, c.low, c.high, p=c.p), paper_d, designs["fuse - drop (fine-tuned)"])
    file(rep, decl, g.decision, keys=keys, paper_value=paper_d, our_value=round(c.diff, 3), ci=_interval(c),
         design=g.design, why=f"{n}, both pruned at keep {k0:g} from the first step",
         details={**about, "per-seed differences": c.per_seed_diff})

    spread = _seed_spread(finetuned)
    decl = CLAIMS["evit.t2.fusion_smaller_seed_spread.keep{keep:g}"]
    decision = decl.rule().decide({"dropped > fused": spread["p_dropped_over_fused"] < 0.05,
                                 "fused > dropped": spread["p_fused_over_dropped"] < 0.05})
    file(rep, decl, decision, keys=keys,
         our_value=f"sd fused {spread['sd_fused']:.3f} / dropped {spread['sd_dropped']:.3f}",
         why=f"variance ratio dropped/fused {spread['ratio']:.2f} with {spread['seeds']} seeds each; detectable "
             f"(80 % power) from a ratio of {spread['detectable_ratio']:.1f}", details={**about, **spread})

    c = cmp["warm-up - no warm-up"]
    margin = cfg.margin_pp  # the effect in dispute: "negligible" has no number; the equivalence margin
    decl = CLAIMS["evit.warmup.negligible"]
    g = gated(decl.rule(margin).decide(c.diff, c.low, c.high, c.low90, c.high90), margin,
              designs["warm-up - no warm-up"])
    file(rep, decl, g.decision, our_value=round(c.diff, 3), ci=_interval(c), design=g.design,
         why=f"{n}: fuse70_warm (keep-rate warm-up over 0.5 epoch) vs fuse70",
         details={**about, "per-seed differences": c.per_seed_diff,
                  "effect in dispute": f"the equivalence margin {margin:g} points"})

    c = cmp["unpruned - fuse (fine-tuned; the cost)"]
    decl = CLAIMS["evit.t2.cost.keep{keep:g}.finetuned"]
    # non-inferiority: the effect in dispute is the margin (the distance from the paper's cost the claim allows)
    g = gated(decl.rule(cost, margin).decide(c.diff, c.low, c.high), margin,
              designs["unpruned - fuse (fine-tuned; the cost)"])
    file(rep, decl, g.decision, keys=keys, paper_value=cost, our_value=round(c.diff, 3), ci=_interval(c),
         design=g.design, why=f"non-inferiority within the paper's {cost:g} + {margin:g} points; {n}",
         details={**about, "control": "the unpruned fine-tune (the same extra training without pruning)"})
    return cmp


def own_test_premise(full: Predictions, info: dict, seed: int) -> verdicts.Premise:
    """:data:`~tokenprune.study.evit.claims.OWN_TEST`: the unpruned model's 95 % interval of top-1 on the evaluation
    images meets the 95 % interval of its checkpoint's test accuracy (``info["test"]``)."""
    ci = intervals.bootstrap_ci(full.correct.astype(float), seed=seed)
    lo, hi = (100 * v for v in info["test"]["ci95"])
    ours = verdicts.fmt_interval(100 * ci.estimate, 100 * ci.low, 100 * ci.high, signed=False)
    return verdicts.Premise(OWN_TEST, bool(100 * ci.high >= lo and 100 * ci.low <= hi),
                            f"unpruned top-1 {ours} % here, checkpoint [{lo:.2f}, {hi:.2f}] on n={info['test']['n']}")


def keep_configs(keep_rates: Sequence[float]) -> list[PruneConfig]:
    """EViT fused (``fuse@<k>``) and dropped (``drop@<k>``) at each keep rate: the configurations of the sweeps."""
    return [PruneConfig(keep_rate=k, reducer=red, name=f"{'fuse' if red == 'fuse_attention' else 'drop'}@{k:g}")
            for red in ("fuse_attention", "drop") for k in keep_rates]


def synthbirds_inputs(cfg: Any = None) -> "cached_sweeps.SweepInputs":
    """The SynthBirds sweep's model, images and configurations (``cfg``: the notebook's settings; None: the
    ``default`` profile's, as ``make models`` caches it): ``cfg.parts_model`` on its first ``cfg.parts_eval_images``
    test images (every generator setting of its recipe, one library function), fused and dropped at
    ``cfg.parts_keep_rates``."""
    from tokenprune.study import params

    cfg = params.setup("01_evit", "default") if cfg is None else cfg
    parts_model, parts_info = tp_models.load_base_model(cfg.parts_model, train_if_missing=cfg.profile == "smoke",
                                                        progress=False)
    parts_recipe = TrainRecipe.from_dict(parts_info["recipe"])
    xb, yb = sources.as_tensors(recipe_data.eval_data(parts_recipe, cfg.parts_eval_images))
    patch(parts_model, keep_rate=1.0)
    return cached_sweeps.SweepInputs(parts_model, parts_info, parts_model.tp_preprocess(xb), yb,
                                     keep_configs(cfg.parts_keep_rates), cfg.eval_batch, "fp32", cfg.seed, raw=xb)


def synthbirds_sweep(rep: Any, cfg: Any) -> SynthBirds:
    """``cfg.parts_model`` on its first ``cfg.parts_eval_images`` SynthBirds test images, fused vs dropped at
    ``cfg.parts_keep_rates`` (at ``default``: the cached sweep, :mod:`tokenprune.study.cached_sweeps`), with the
    fusion claim at ``cfg.ft_keep``."""
    inp = synthbirds_inputs(cfg)
    parts_model, parts_info, images, yb = inp.model, inp.info, inp.images, inp.labels
    parts_recipe = TrainRecipe.from_dict(parts_info["recipe"])
    preds = cached_sweeps.cached_sweep("evit_synthbirds", inp, cfg.profile)
    table = _percent(evaluation.sweep_table(parts_model, preds, inp.configs, seed=cfg.seed))
    add_top5(table, preds, cfg.seed)
    # the comparisons of the SynthBirds model: an EvaluatedModel view of its images (only compare/design are used)
    n_test = int(parts_recipe.dataset_kwargs.get("n_test", len(yb)))
    xb = inp.raw
    birds = EvaluatedModel(base=parts_model, info=parts_info, recipe=parts_recipe, data=None, x_raw=xb, y=yb, X=images,
                           device="cpu", eval_batch=cfg.eval_batch, seed=cfg.seed, margin_pp=cfg.margin_pp,
                           name=cfg.parts_model, n_max=n_test, max_scale=f"the full test split of {cfg.parts_model}")
    fusion = pd.DataFrame(_fusion_rows(birds, preds, cfg.parts_keep_rates))
    k = cfg.ft_keep
    d, _ = paper_fusion_side(k)
    decl = CLAIMS[_fusion_template(k, ".synthbirds")]
    c = birds.compare(preds[f"fuse@{k:g}"], preds[f"drop@{k:g}"])
    # DeiT-S's difference is in ImageNet points: the effect in dispute is scaled by the proxy's sensitivity factor for
    # EViT-type claims; without one the claim, a direction, is decided as such on DeiT-S's difference unscaled
    sens = chosen.sensitivity_of(cfg.parts_model, "evit")
    effect = abs(d) * sens if sens else abs(d)
    g = gated(decl.rule().decide(c.diff, c.low, c.high, p=c.p), effect, birds.design(preds[f"fuse@{k:g}"],
                                                                                   preds[f"drop@{k:g}"]))
    file(rep, decl, g.decision, keys=_fusion_keys(k), paper_value=d, our_value=round(c.diff, 3),
         ci=_interval(c), design=g.design, premises={OWN_TEST: own_test_premise(preds["unpruned"], parts_info,
                                                                                cfg.seed)},
         why=f"{cfg.parts_model} on its own test images, off the shelf, {len(yb)} images, McNemar p={c.p:.3g}",
         details={"effect in dispute": f"DeiT-S's {abs(d):g} points (Table 2)" + (
             f" x the proxy's sensitivity {sens:.2f} (notebook 00) = {effect:.2f} points" if sens else
             f", not scaled ({chosen.why_no_factor(cfg.parts_model, 'evit')}): decided as a direction")})
    return SynthBirds(parts_model, xb, yb, table, fusion)
