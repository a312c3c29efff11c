"""§4: BAT against EViT and ToMe at matched MACs on the calibrated proxy of notebook 00 (or DeiT-S at ``paper``).

Every method gets the uniform keep rate whose total MACs come closest to EViT-with-fusion's at each budget
(:func:`matched_set`); every configuration runs on the same images (:func:`proxy_sweep`); BAT minus EViT is paired
per image and its slope over keep rates fitted (:func:`bat_minus_evit`). The claims: the gap grows at low keep rates,
BAT beats EViT at 0.7 and 0.5, and the summary's 'static importance' flaw (:func:`kept_set_overlap`). Whether BAT's
kept set is more diverse needs no accuracy model: it is decided on the photo model, the pretrained ViT-S/14 on real
photos, at equal token counts (:func:`file_photo_diversity_claims`); the proxy's diversity is shown, not decided.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import pandas as pd
import torch

from tokenprune.core.config import PruneConfig
from tokenprune.core.patch import prune_state
from tokenprune.measure import evaluation, intervals, kept_tokens
from tokenprune.measure import mac_matching as matching
from tokenprune.measure import macs as flops
from tokenprune.measure.intervals import bootstrap_ci_or_nan
from tokenprune.measure.power import Design
from tokenprune.measure.trend import Trend, trend_contrast
from tokenprune.study.proxy import chosen
from tokenprune.study.bat.claims import CLAIMS, TWO_IMAGES
from tokenprune.study.bat.comparisons import brief, paired_decision, pick
from tokenprune.study.bat.effects import effect_vs_evit, paper_gap, paper_gap_slope
from tokenprune.study.bat.settings import DEIT_S
from tokenprune.study.claims import file_claim
from tokenprune.study.notebook import ci_columns
from tokenprune.study.paper_numbers import BAT
from tokenprune.study.proxy.audit_model import gated
from tokenprune.study.verdicts import Premise

__all__ = ["VARIANT", "DIVERSITY_PAIR", "DIVERSITY_VARIANT", "PHOTO_VARIANTS", "PHOTO_MODELS", "proxy_premises",
           "ProxyImages", "load_images", "Sweep", "Gaps", "proxy_methods", "matched_set", "check_token_counts",
           "proxy_sweep", "bat_minus_evit", "vs_evit_pairs", "trend_design", "file_proxy_claims", "diversity_rates",
           "photo_diversity", "file_diversity_claims", "file_photo_diversity_claims", "kept_set_overlap",
           "file_static_scores_claim"]

#: the BAT variant that the accuracy claims decide (sections 4-6)
VARIANT = ("merge_dpcknn (n_keep attentive tokens + the clusters, added) at the uniform keep rate whose total MACs "
           "match EViT's at the budget (table matched_configs)")
#: the pair of ``bat.proxy.diversity.*`` (BAT, EViT) and BAT's variant there: as many tokens as EViT
DIVERSITY_PAIR = ("BAT in EViT's budget", "EViT (fusion)")
DIVERSITY_VARIANT = "merge_dpcknn_budget (EViT's token counts: n_keep + 1 - clusters attentive tokens + the clusters)"
#: crops per photo of the diversity claims (notebook 03's variants: centre, zoomed centre, left/top square, flip)
PHOTO_VARIANTS = 4
#: the photo models (setting figure_model) in words
PHOTO_MODELS = {"vit_s14": "the pretrained ViT-S/14", "random_tiny": "a random ViT-Ti/16"}


def proxy_premises(cfg: Any) -> list[Premise]:
    """The premises of the claims measured on the accuracy model, to register on the report: notebook 00's choice
    and its bar (:func:`tokenprune.study.proxy.chosen.proxy_premises`); at the ``paper`` profile the model is the
    paper's own DeiT-S on ImageNet, where no proxy stands in and both hold."""
    if cfg.profile == "paper":
        detail = f"the paper's own model ({cfg.proxy_model} on ImageNet): no proxy stands in for it"
        return [Premise(name, True, detail) for name in (chosen.PROXY_CHOSEN, chosen.PROXY_BAR)]
    return chosen.proxy_premises(cfg.proxy_model)


@dataclass
class ProxyImages:
    """The accuracy model and its test images (preprocessed once by the model's own preprocessing): ``base``,
    ``info``, ``recipe``, ``train_split`` (None at the paper profile), ``full_images`` / ``full_labels`` (the images of
    the claim-deciding comparisons), ``images`` / ``labels`` (the sweep's), ``n_test`` (the test split's size: the
    largest scale here) and ``max_scale`` (what that is)."""

    base: torch.nn.Module
    info: dict
    recipe: Any
    train_split: Any
    full_images: torch.Tensor
    full_labels: torch.Tensor
    images: torch.Tensor
    labels: torch.Tensor
    n_test: int
    max_scale: str


@dataclass
class _Loaded:
    """A model with the data its images come from, before they are preprocessed."""

    base: torch.nn.Module
    info: dict
    recipe: Any
    train_split: Any
    full_data: Any
    n_split: Optional[int]
    max_scale: str


def _paper_images(cfg: Any) -> _Loaded:
    from tokenprune.data.datasets import class_balanced_indices
    from tokenprune.training import base_models as models, model_recipes, recipe_data
    from tokenprune.training.sources import Preprocess

    recipe = next(iter(model_recipes.paper_recipes(init=cfg.deit_weights).values()))
    base = models.build_model(recipe, init=cfg.deit_weights)
    base.tp_preprocess = Preprocess.from_recipe(recipe)
    info = {"name": DEIT_S, "weights": str(cfg.deit_weights)}
    test_split = recipe_data.load_recipe_data(recipe, data_root=cfg.imagenet_root)["test"]
    # class-balanced: every class as equally represented as the size allows
    idx = class_balanced_indices(test_split["label"], min(cfg.n_eval, len(test_split)), cfg.seed)
    return _Loaded(base, info, recipe, train_split=None, full_data=test_split.select(idx.tolist()), n_split=None,
                   max_scale=f"the {len(idx)} ImageNet validation images this notebook uses")


def _proxy_images(cfg: Any) -> _Loaded:
    from tokenprune.training import base_models as models, model_recipes, recipe_data
    from tokenprune.training.recipe import TrainRecipe
    from tokenprune.training.sources import as_tensors

    base, info = models.load_base_model(cfg.proxy_model, train_if_missing=cfg.profile == "smoke", progress=False)
    recipe = TrainRecipe.from_dict(info["recipe"])
    # one generation of the recipe's data: its test split is what eval_data(recipe) returns, and the fine-tuning
    # (section 6) draws from its training split
    ds = recipe_data.load_recipe_data(recipe)
    n_full = len(ds["test"]) if cfg.n_full == 0 else min(cfg.n_full, len(ds["test"]))
    return _Loaded(base, info, recipe, train_split=ds["train"],
                   full_data=as_tensors(ds["test"], subset=n_full, seed=cfg.seed), n_split=len(ds["test"]),
                   max_scale=f"the full test split of {cfg.proxy_model}")


def load_images(cfg: Any) -> ProxyImages:
    """The accuracy model and its test images. Paper profile: DeiT-S from ``cfg.deit_weights`` on ``cfg.n_eval``
    class-balanced ImageNet validation images (all the images the notebook uses); otherwise ``cfg.proxy_model`` (the
    calibrated proxy of notebook 00) on the test split of its own recipe: ``cfg.n_full`` images (0: all) for the
    claim-deciding comparisons, ``cfg.n_eval`` of them drawn with ``cfg.seed`` for the sweeps."""
    from tokenprune.training.loop import evaluate

    loaded = _paper_images(cfg) if cfg.profile == "paper" else _proxy_images(cfg)
    base = loaded.base
    full_images, full_labels = evaluate(base, loaded.full_data, batch=cfg.sweep_batch, dtype="fp32",
                                        forward=lambda x: x)
    n_test = len(full_labels) if loaded.n_split is None else loaded.n_split
    if cfg.n_eval >= len(full_labels):  # the sweep runs on every image (the paper profile): no copy
        images, labels = full_images, full_labels
    else:
        sub = torch.from_numpy(np.sort(np.random.default_rng(cfg.seed).choice(len(full_labels), size=cfg.n_eval,
                                                                              replace=False)))
        images, labels = full_images[sub], full_labels[sub]
    base.eval()
    return ProxyImages(base=base, info=loaded.info, recipe=loaded.recipe, train_split=loaded.train_split,
                       full_images=full_images, full_labels=full_labels, images=images, labels=labels, n_test=n_test,
                       max_scale=loaded.max_scale)


@dataclass
class Sweep:
    """Every configuration on the same images: the table (top-1, agreement, diversity with intervals), the
    predictions and the per-image diversity of the kept set, by configuration label."""

    table: pd.DataFrame
    preds: dict
    diversity: dict


@dataclass
class Gaps:
    """BAT minus EViT (fusion) per MAC budget (top-1 and cosine distance, paired per image) and the slope of the
    top-1 gap over keep rates."""

    table: pd.DataFrame
    trend: Trend


def proxy_methods(bat_opts: dict) -> dict[str, PruneConfig]:
    """The methods compared at proxy scale: EViT (fusion, drop), BAT (clusters added) and ToMe."""
    return {
        "EViT (fusion)": PruneConfig(reducer="fuse_attention"),
        "EViT (drop)": PruneConfig(reducer="drop"),
        "BAT": PruneConfig(reducer="merge_dpcknn", reducer_options=tuple(sorted(bat_opts.items()))),
        "ToMe (bipartite)": PruneConfig(reducer="bipartite", prop_attn=True),
    }


def matched_set(probe: torch.nn.Module, methods: Mapping[str, PruneConfig],
                keep_rates: Sequence[float]) -> tuple[list, pd.DataFrame]:
    """Configs of every method at each EViT keep rate's MAC budget (EViT-with-fusion's total MACs on
    ``probe``; every other method gets the uniform keep rate closest to it, merging at every block where
    locations 4/7/10 cannot reach it), and a table of what each costs."""
    every_block = tuple(range(1, len(probe.blocks) + 1))
    configs, rows = [], []
    for r in keep_rates:
        target = flops.analytic_macs(PruneConfig(reducer="fuse_attention", keep_rate=r).apply(probe)).total
        for name, c in methods.items():
            if c.reducer == "fuse_attention" and tuple(c.locations) == (4, 7, 10):  # the budget's own method
                mt = matching.as_matched(probe, c.with_(keep_rate=r), target)
            else:
                mt = matching.config_at_macs(probe, c, target, fallback_locations=[every_block])
            conf = mt.config.with_(name=f"{name} @ {r:g}")
            configs.append(conf)
            rows.append({"config": conf.label, "method": name, "budget_keep_rate": r, "keep_rate": mt.config.keep_rate,
                         "locations": ",".join(map(str, mt.config.locations)), "target_mmacs": target / 1e6,
                         "mmacs": mt.macs / 1e6, "mmacs_model": mt.model_macs / 1e6,
                         "mmacs_reduction": mt.reduction_macs / 1e6, "rel_error": mt.rel_error,
                         "reachable": mt.reachable})
    return configs, pd.DataFrame(rows)


def check_token_counts(probe: torch.nn.Module, configs: Sequence[PruneConfig], images: torch.Tensor) -> None:
    """The analytic token counts are what the model really does (one traced forward for about six configs)."""
    for conf in configs[:: max(1, len(configs) // 6)]:
        conf.apply(probe)
        with torch.inference_mode():
            probe(images[:2])
        want = flops.analytic_macs(probe).tokens_out
        assert prune_state(probe).token_counts == want, (conf.label, prune_state(probe).token_counts, want)


def proxy_sweep(base: torch.nn.Module, images: torch.Tensor, labels: torch.Tensor, configs: Sequence[PruneConfig],
                matched: pd.DataFrame, n_div: int, div_block: int, batch: int, dtype: str, seed: int) -> Sweep:
    """Every configuration on the same images (top-1, agreement with the unpruned model, bootstrap CIs), and
    the diversity of the tokens leaving ``div_block`` on the first ``n_div`` images (mean pairwise cosine
    distance, effective rank, kept tokens)."""
    sweep, preds = evaluation.prune_sweep(base, images, labels, configs, batch=batch, dtype=dtype, seed=seed)
    sweep = sweep.merge(matched[["config", "method", "budget_keep_rate", "mmacs", "mmacs_model", "mmacs_reduction",
                                 "reachable"]], on="config", how="left")
    sweep.loc[sweep.config == "unpruned", ["method", "budget_keep_rate"]] = ["unpruned", 1.0]
    sweep["mmacs"] = sweep["mmacs"].fillna(sweep.gmacs * 1e3)

    def diversity_of(conf: Optional[PruneConfig]) -> dict:
        m = copy.deepcopy(base)
        (conf or evaluation.UNPRUNED).apply(m)
        return kept_tokens.kept_token_diversity(m, images[:n_div], block=div_block, batch=batch, dtype=dtype)

    div = {"unpruned": diversity_of(None)}
    for conf in configs:
        div[conf.label] = diversity_of(conf)
    for key in ("cosine_distance", "effective_rank"):
        cols = {lab: ci_columns(bootstrap_ci_or_nan(d[key], seed=seed), key) for lab, d in div.items()}
        for col in (key, f"{key}_low", f"{key}_high"):
            sweep[col] = sweep.config.map(lambda c: cols[c][col])
    sweep["kept_tokens"] = sweep.config.map(lambda c: float(np.mean(div[c]["tokens"])))
    return Sweep(table=sweep, preds=preds, diversity=div)


def bat_minus_evit(preds: Mapping[str, Any], div: Mapping[str, dict], keep_rates: Sequence[float], seed: int) -> Gaps:
    """BAT minus EViT (fusion) per MAC budget, paired per image (top-1: bootstrap and McNemar; cosine
    distance of the kept set: bootstrap), and the least-squares slope of the top-1 gap over keep rates."""
    rows, diffs = [], []
    for r in keep_rates:
        a, b = preds[f"BAT @ {r:g}"], preds[f"EViT (fusion) @ {r:g}"]
        pc = evaluation.paired_comparison(a, b, seed=seed)
        a_cd, b_cd = div[f"BAT @ {r:g}"]["cosine_distance"], div[f"EViT (fusion) @ {r:g}"]["cosine_distance"]
        dv = (intervals.paired_bootstrap_diff(a_cd, b_cd, seed=seed) if np.isfinite(a_cd + b_cd).any()
              else intervals.PairedDiff(np.nan, np.nan, np.nan, np.nan, 0))
        rows.append({"keep_rate": r, **pc, "cosdist_diff": dv.estimate, "cosdist_diff_low": dv.low,
                     "cosdist_diff_high": dv.high, "cosdist_p": dv.p_value})
        diffs.append(a.correct.astype(float) - b.correct.astype(float))
    return Gaps(table=pd.DataFrame(rows), trend=trend_contrast(np.stack(diffs), keep_rates, seed=seed))


def vs_evit_pairs(keep_rates: Sequence[float]) -> list[tuple[str, str, float]]:
    """The pairs (sweep labels) and effects in dispute of ``bat.proxy.vs_evit.*``."""
    return [(f"BAT @ {r:g}", f"EViT (fusion) @ {r:g}", effect_vs_evit(r)[0]) for r in (0.7, 0.5) if r in keep_rates]


def trend_design(preds: Mapping[str, Any], keep_rates: Sequence[float], n_max: int, max_scale: str) -> Design:
    """The design of the slope claim: the slope is the mean of per-image contrasts ``s_i = sum_l w_l d_il``
    (:func:`tokenprune.measure.trend.trend_contrast`), so its MDE is that of the ``s_i`` (points per unit keep rate)."""
    x = np.asarray(keep_rates, dtype=float)
    w = (x - x.mean()) / ((x - x.mean()) ** 2).sum()
    d = np.stack([preds[f"BAT @ {r:g}"].correct.astype(float) - preds[f"EViT (fusion) @ {r:g}"].correct.astype(float)
                  for r in keep_rates])
    s = 100 * (w @ d)
    return Design.paired(s, np.zeros_like(s), unit="images", n_max=max(n_max, len(s)), max_scale=max_scale, scale=1.0,
                         sd_source=f"sd of the {len(s)} per-image slope contrasts (sum over keep rates of w_l x the "
                                   "paired BAT - EViT difference) of this run (independent of their mean)")


def _file_trend(rep: Any, trend: Trend, preds: Mapping[str, Any], keep_rates: Sequence[float], base_name: str,
                n_test: int, max_scale: str) -> None:
    decl = CLAIMS["bat.proxy.gap_grows_at_low_keep"]
    assert decl.effect == abs(paper_gap_slope())
    g = gated(decl.rule().decide(trend.slope * 100, trend.low * 100, trend.high * 100, what="slope"), decl.effect,
              trend_design(preds, keep_rates, n_test, max_scale))
    decision, details = brief(g.decision, f"slope {trend.slope * 100:+.2f} [{trend.low * 100:+.2f}, "
                                          f"{trend.high * 100:+.2f}] pp per unit keep rate on {trend.n} images; MDE "
                                          f"{g.design['mde']:.2f} vs effect {decl.effect:.2f}",
                              {"mean_gaps_pp": {f"{lv:g}": g_ * 100 for lv, g_ in zip(trend.levels, trend.means)},
                               "model": base_name, "variant": VARIANT,
                               "protocols": "the paper's gaps mix protocols (bat.protocol.*)"})
    file_claim(rep, decl, decision, paper_value="gap grows as rho falls", our_value=round(trend.slope * 100, 3),
               ci=[round(trend.low * 100, 3), round(trend.high * 100, 3)], design=g.design, details=details)


def diversity_rates(keep_rates: Sequence[float]) -> list[float]:
    """The keep rates of ``bat.proxy.diversity.*``: the lowest of ``keep_rates`` and 0.5 when it is one of them."""
    return sorted({min(keep_rates), 0.5} & set(keep_rates))


def photo_diversity(model: torch.nn.Module, images: torch.Tensor, photos: Sequence[str], bat_opts: dict,
                    keep_rates: Sequence[float], block: int) -> pd.DataFrame:
    """Per image (``photos``: the photo each image was cut from) and keep rate, the mean pairwise cosine distance of
    the tokens leaving ``block`` for EViT (fusion) and for BAT inside EViT's budget (``merge_dpcknn_budget``) at the
    same keep rate: both keep as many tokens (and cost the same model MACs)."""
    rows = []
    for r in keep_rates:
        for method, conf in ((DIVERSITY_PAIR[1], PruneConfig(reducer="fuse_attention", keep_rate=r)),
                             (DIVERSITY_PAIR[0], PruneConfig(reducer="merge_dpcknn_budget", keep_rate=r,
                                                             reducer_options=tuple(sorted(bat_opts.items()))))):
            d = kept_tokens.kept_token_diversity(conf.apply(copy.deepcopy(model)), images, block=block,
                                                 batch=len(images))
            rows += [{"keep_rate": r, "method": method, "image": i, "photo": photo, "cosine_distance": float(c),
                      "tokens": int(n)} for i, (photo, c, n) in enumerate(zip(photos, d["cosine_distance"],
                                                                              d["tokens"]))]
    return pd.DataFrame(rows)


def file_diversity_claims(rep: Any, table: pd.DataFrame, on: str, block: int, seed: int) -> None:
    """``bat.proxy.diversity.*`` from a :func:`photo_diversity` table measured ``on`` (model and image size, in
    words): per keep rate BAT - EViT per image, the photo the unit (two-stage cluster bootstrap, its crops nested);
    a rate where fewer than two tokens are left (no pairwise distance) is not filed."""
    from tokenprune.study.varmedad.designs import cluster_bootstrap_ci, cluster_design

    decl = CLAIMS["bat.proxy.diversity.keep{keep:g}"]
    n_photos = int(table.photo.nunique())
    for r, t in table.groupby("keep_rate"):
        a, b = (t[t.method == m].sort_values("image") for m in DIVERSITY_PAIR)
        diff, photos = a.cosine_distance.to_numpy() - b.cosine_distance.to_numpy(), a.photo.to_numpy()
        if not np.isfinite(diff).any():
            continue
        ci = cluster_bootstrap_ci(diff, photos, seed=seed)
        design = cluster_design(diff, photos, "photos", n_photos, f"the {n_photos} photos here")
        decision, details = brief(decl.rule().decide(ci.estimate, ci.low, ci.high),
                                  f"{ci.estimate:+.4f} [{ci.low:+.4f}, {ci.high:+.4f}] on {len(diff)} crops of "
                                  f"{n_photos} photos ({on}), {int(a.tokens.iloc[0])} tokens each leaving block "
                                  f"{block}", {"effect": "the paper prints no diversity: the design is shown without "
                                                         "a gate", "model": on, "variant": DIVERSITY_VARIANT})
        file_claim(rep, decl, decision, keys={"keep": float(r)}, paper_value="BAT > EViT",
                   our_value=round(ci.estimate, 4), ci=[round(ci.low, 4), round(ci.high, 4)], design=design.record(),
                   details=details)


def file_photo_diversity_claims(rep: Any, cfg: Any, bat_opts: dict) -> pd.DataFrame:
    """``bat.proxy.diversity.*`` on the photo model (``cfg.figure_model`` at ``cfg.figure_img`` px: the pretrained
    ViT-S/14; smoke: a random small ViT), whatever the accuracy model: notebook 03's crops of every real photo
    (:func:`tokenprune.study.varmedad.subjects.photo_batch`), tokens leaving block 10 (the last location), decided by
    :func:`file_diversity_claims`. Returns the per-image table (:func:`photo_diversity`)."""
    from tokenprune.study.bat.figures import figure_model
    from tokenprune.study.varmedad.subjects import photo_batch

    model = figure_model(cfg.figure_model, cfg.figure_img)[0].eval()
    images, _, names = photo_batch(cfg.figure_img, PHOTO_VARIANTS)
    block = min(10, len(model.blocks))
    table = photo_diversity(model, images, [n.split("#")[0] for n in names], bat_opts, diversity_rates(cfg.keep_rates),
                            block)
    on = f"{PHOTO_MODELS.get(cfg.figure_model, cfg.figure_model)}, {cfg.figure_img} px"
    file_diversity_claims(rep, table, on, block, cfg.seed)
    return table


def _file_vs_evit(rep: Any, preds: Mapping[str, Any], full_preds: Mapping[str, Any], keep_rates: Sequence[float],
                  base_name: str, n_test: int, max_scale: str, seed: int) -> None:
    for r in (0.7, 0.5):
        if r not in keep_rates:
            continue
        decl = CLAIMS[f"bat.proxy.vs_evit.keep{r:g}"]
        a, b, where = pick(f"BAT @ {r:g}", f"EViT (fusion) @ {r:g}", full_preds, preds)
        res = paired_decision(a.correct, b.correct, decl.effect, n_test, max_scale, decl.rule(), seed=seed)
        decision, details = brief(res.decision, res.brief(where, decl.effect),
                                  {"mcnemar_p": res.mcnemar_p, "effect_source": effect_vs_evit(r)[1],
                                   "model": base_name, "variant": VARIANT})
        file_claim(rep, decl, decision, paper_value=paper_gap(r), our_value=round(res.diff, 3),
                   ci=[round(res.low, 3), round(res.high, 3)], design=res.design, details=details)


def file_proxy_claims(rep: Any, gaps: Gaps, sweep: Sweep, full_preds: Mapping[str, Any], keep_rates: Sequence[float],
                      base_name: str, n_test: int, max_scale: str, seed: int) -> None:
    """The claims on the accuracy model, each a direction on a paired interval with its design: the gap's slope over
    keep rates is negative (on the sweep's images; effect in dispute: the printed gaps' slope); BAT beats EViT at 0.7
    and 0.5 (on the full test split where :func:`~tokenprune.study.bat.comparisons.decisive_predictions` ran the
    pair, else on the sweep's). The diversity claims: :func:`file_photo_diversity_claims`."""
    _file_trend(rep, gaps.trend, sweep.preds, keep_rates, base_name, n_test, max_scale)
    _file_vs_evit(rep, sweep.preds, full_preds, keep_rates, base_name, n_test, max_scale, seed)


def kept_set_overlap(base: torch.nn.Module, images: torch.Tensor, bat: PruneConfig, keep_rate: float,
                     n: int) -> dict:
    """Does BAT's importance adapt to the input? ``bat`` at ``keep_rate`` on the first ``n`` images (one traced
    forward): the attentive set each image keeps at the first location (indices of patches), and the mean
    pairwise Jaccard overlap of those sets over all image pairs (1: the same tokens for every image)."""
    m = copy.deepcopy(base)
    bat.with_(keep_rate=keep_rate).apply(m, trace=True)
    with torch.inference_mode():
        m(images[:n])
    keep = prune_state(m).history[0]["keep_idx"]
    sets = [set(map(int, row)) for row in keep]
    pairs = [(i, j) for i in range(len(sets)) for j in range(i + 1, len(sets))]
    jac = [len(sets[i] & sets[j]) / len(sets[i] | sets[j]) for i, j in pairs]
    return {"images": len(sets), "kept": int(keep.shape[1]), "mean_jaccard": float(np.mean(jac)) if jac else math.nan,
            "all_identical": all(s == sets[0] for s in sets), "distinct_sets": len({frozenset(s) for s in sets})}


def file_static_scores_claim(rep: Any, overlap: dict, keep_rate: float, base_name: Optional[str]) -> None:
    """The summary's flaw 'BAT assumes static importance scores': upheld when every image keeps the same attentive
    set (the scores would not depend on the input), rejected when they differ; its premise is at least 2 images."""
    decl = CLAIMS["bat.secondary.flaw_static_scores"]
    sentence = (f"{overlap['distinct_sets']} different attentive sets over {overlap['images']} images (mean pairwise "
                f"Jaccard {overlap['mean_jaccard']:.3f}) at keep {keep_rate:g}")
    decision = decl.rule().decide(overlap["all_identical"], sentence)
    file_claim(rep, decl, decision, our_value=round(overlap["mean_jaccard"], 4),
               paper_value=BAT["secondary_summary_flaws"][0],
               premises={TWO_IMAGES: Premise(TWO_IMAGES, overlap["images"] >= 2, f"{overlap['images']}")},
               details={"model": base_name, "attentive_tokens": overlap["kept"],
                        "reading": "'static' read as input-independent: the importance is each image's [CLS] "
                                   "attention, recomputed at every location"})
