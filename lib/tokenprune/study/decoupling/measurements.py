"""Coverage and faithfulness of every scorer of notebook 04 per (setting, block, keep rate, scorer, seed)
(:func:`evaluate_configs`, held by :class:`Measurements`), the tables built on them, and the statistics its claims
read: the centre-prior family, the coverage-faithfulness rank correlations, class-defining-part coverage."""
from __future__ import annotations

import math
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Optional

import numpy as np
import pandas as pd
import torch

from tokenprune.core import split_forward as split
from tokenprune.data import synthetic
from tokenprune.measure import coverage, intervals, metrics, significance
from tokenprune.measure.intervals import bootstrap_ci_or_nan
from tokenprune.study.decoupling.data import Setting
from tokenprune.study.decoupling.settings import SCORER_ORDER, TRAINED, Layout, mid_block
from tokenprune.study.notebook import ci_columns

__all__ = ["coverage_of", "Measurements", "evaluate_configs", "summary_table", "GAP_COMPARISONS", "gaps_table",
           "faithfulness_table", "config_matrix", "spearman_boot", "stratified_spearman_boot", "rank_correlation_table",
           "CENTRE_FAMILY_ALPHA", "centre_family", "centre_values", "DecouplingStats", "in_cost_band",
           "decoupling_stats", "class_part_coverage", "HumanFeatures", "human_features_values", "seeds_agree"]

#: family-wise error rate of the centre-prior objection over all scored (block, keep rate) configurations
#: (Bonferroni: each configuration's interval at 1 - alpha / K)
CENTRE_FAMILY_ALPHA = 0.05


def coverage_of(S: Setting, keep_idx: torch.Tensor, coverage_variant: str) -> dict:
    """Per-image object coverage, part coverage (NaN without parts) and ``cov`` (part coverage where there are
    parts, else object coverage) of the kept tokens."""
    src = split.kept_source(keep_idx, S.patch_tokens)
    out = {"object_cov": coverage.object_coverage(S.obj, src).numpy()}
    out["part_cov"] = (coverage.part_coverage(S.parts, src, variant=coverage_variant).numpy()
                       if S.parts is not None else np.full(len(keep_idx), np.nan))
    out["cov"] = out["part_cov"] if S.parts is not None else out["object_cov"]
    return out


@dataclass
class Measurements:
    """Per-image values of every evaluated configuration, and the paired comparisons the tables and claims use.

    ``per``: ``{(setting, block, keep, scorer, seed): {metric: [B] array}}`` (metrics ``cov``, ``part_cov``,
    ``object_cov``; with a forward pass also ``agree``, ``kl``, ``dprob``, ``correct``); ``keep_idx``:
    ``{(setting, scorer, seed): kept indices}`` at the intermediate block and the low keep rate.
    """

    per: dict
    keep_idx: dict
    seeds: list
    n_boot: int
    seed: int

    def per_image(self, name, block, keep, scorer, metric, seed_=None):
        """Per-image values; trained heads: averaged over the seeds that have the metric (or one seed). Coverage
        exists for every seed; the forward pass (agreement, KL) for every seed at the intermediate block and for
        the first seed elsewhere."""
        if scorer in TRAINED:
            vals = self._seed_values(name, block, keep, scorer, metric, self.seeds if seed_ is None else [seed_])
            return np.mean(vals, axis=0) if vals else None
        d = self.per.get((name, block, keep, scorer, -1))
        return None if d is None else d.get(metric)

    def _seed_values(self, name, block, keep, scorer, metric, seeds) -> list:
        """The per-image values of a trained head, one array per seed of ``seeds`` that has the metric."""
        return [self.per[(name, block, keep, scorer, s)][metric] for s in seeds
                if metric in self.per.get((name, block, keep, scorer, s), {})]

    def per_seed(self, name, block, keep, scorer, metric) -> Optional[np.ndarray]:
        """``[S, B]`` per-image values, one row per seed of a trained head that has the metric (``[1, B]`` for an
        untrained scorer), or None where it was not measured."""
        if scorer in TRAINED:
            vals = self._seed_values(name, block, keep, scorer, metric, self.seeds)
            return np.stack([np.asarray(v, dtype=np.float64) for v in vals]) if vals else None
        v = self.per_image(name, block, keep, scorer, metric)
        return None if v is None else np.asarray(v, dtype=np.float64)[None]

    def paired(self, name, block, keep, a, b, metric="cov", scale=100.0, seed_a=None):
        """``scale x (a - b)`` on the same images, or None where either was not measured: where a trained head has
        several seeds (and ``seed_a`` is None), the two-stage bootstrap over seeds, then images
        (:func:`tokenprune.measure.intervals.seed_image_bootstrap_diff`; images undefined for either are left out), so
        the interval covers the heads' training noise and the sampling of images; else the paired bootstrap over
        images. The estimate is the same mean either way."""
        x, y = self.per_image(name, block, keep, a, metric, seed_a), self.per_image(name, block, keep, b, metric)
        if x is None or y is None:
            return None
        if seed_a is None:
            xs, ys = self.per_seed(name, block, keep, a, metric), self.per_seed(name, block, keep, b, metric)
            if max(len(xs), len(ys)) > 1:
                ok = ~(np.isnan(xs).any(0) | np.isnan(ys).any(0))
                if ok.any():
                    return intervals.seed_image_bootstrap_diff(xs[:, ok] * scale, ys[:, ok] * scale,
                                                               n_boot=self.n_boot, seed=self.seed)
        return intervals.paired_bootstrap_diff(np.asarray(x) * scale, np.asarray(y) * scale, n_boot=self.n_boot,
                                               seed=self.seed)

    def gap(self, name, block, keep, a="sensitivity", b="cls_attention"):
        """The coverage gap ``a - b`` in points (paired bootstrap)."""
        return self.paired(name, block, keep, a, b)

    def gap_values(self, name, block, keep, a="sensitivity", b="cls_attention", metric="cov"):
        """Per-image ``a - b`` (unscaled; NaN where either is undefined), or None where either was not measured."""
        x, y = self.per_image(name, block, keep, a, metric), self.per_image(name, block, keep, b, metric)
        return None if x is None or y is None else np.asarray(x, dtype=np.float64) - np.asarray(y, dtype=np.float64)

    def diff_of_gaps(self, name, block1, keep1, block2, keep2):
        """Paired per-image (gap at config 1) - (gap at config 2), in points."""
        pi = self.per_image
        g1 = pi(name, block1, keep1, "sensitivity", "cov") - pi(name, block1, keep1, "cls_attention", "cov")
        g2 = pi(name, block2, keep2, "sensitivity", "cov") - pi(name, block2, keep2, "cls_attention", "cov")
        return intervals.paired_bootstrap_diff(100 * g1, 100 * g2, n_boot=self.n_boot, seed=self.seed)

    def mean_pct(self, name, block, keep, scorer, metric="cov") -> float:
        """100 x the mean (NaN-aware) of a per-image metric."""
        return 100 * np.nanmean(self.per_image(name, block, keep, scorer, metric))


def evaluate_configs(settings: dict[str, Setting], cache_ev: dict, scores: dict, d: Layout,
                     cfg: SimpleNamespace) -> Measurements:
    """For every scored (setting, block, scorer, seed) and keep rate: the kept tokens, coverage, and, where the
    forward pass is run, agreement, KL(full || pruned), true-class probability change and correctness. The
    forward pass runs for cls_attention / sensitivity / mimic (first seed) everywhere and for every scorer and
    seed at the intermediate block and the low keep rate."""
    per: dict = {}
    keep_out: dict = {}
    for (name, block, scorer, s), sc in scores.items():
        S = settings[name]
        mid = mid_block(S.blocks)
        full = cache_ev[name].logits
        for keep in cfg.keep_rates:
            run = (block == mid and keep == d.low_keep) or \
                (scorer in ("cls_attention", "sensitivity", "mimic") and s in (-1, cfg.seeds[0]))
            logits, keep_idx = split.prune_cached(S.model, cache_ev[name], block, sc, keep, dtype=cfg.dtype,
                                                  run_model=run)
            v = coverage_of(S, keep_idx, cfg.coverage_variant)
            if run:
                v["agree"] = (logits.argmax(1) == full.argmax(1)).numpy().astype(float)
                v["kl"] = metrics.kl_divergence(full, logits, per_image=True)
                v["dprob"] = metrics.true_class_prob_change(full, logits, S.y_eval, per_image=True)
                v["correct"] = metrics.correct(logits, S.y_eval).astype(float)
            per[(name, block, keep, scorer, s)] = v
            if block == mid and keep == d.low_keep:
                keep_out[(name, scorer, s)] = keep_idx
    print(f"{len(per)} configurations evaluated")
    return Measurements(per, keep_out, list(cfg.seeds), cfg.n_boot, cfg.seed)


def _ci(values, prefix: str, scale: float, cfg: SimpleNamespace) -> dict:
    """Interval columns of the mean of ``scale x values`` (NaN columns where not measured)."""
    iv = None if values is None else bootstrap_ci_or_nan(np.asarray(values) * scale, n_boot=cfg.n_boot, seed=cfg.seed)
    return ci_columns(iv, prefix)


def summary_table(m: Measurements, settings: dict[str, Setting], cfg: SimpleNamespace) -> pd.DataFrame:
    """Per (setting, block, keep rate, scorer): coverage and agreement with intervals, object coverage, the
    per-seed spread of coverage (trained heads), KL and true-class probability change."""
    rows = []
    for name, S in settings.items():
        for block in S.blocks:
            for keep in cfg.keep_rates:
                for scorer in SCORER_ORDER:
                    cov = m.per_image(name, block, keep, scorer, "cov")
                    if cov is None:
                        continue
                    row = {"setting": name, "block": block, "keep_rate": keep, "scorer": scorer,
                           "seeds": len(cfg.seeds) if scorer in TRAINED else 1, **_ci(cov, "coverage_pct", 100, cfg),
                           "object_coverage_pct": m.mean_pct(name, block, keep, scorer, "object_cov")}
                    if scorer in TRAINED:
                        per_seed = [100 * np.nanmean(m.per[(name, block, keep, scorer, s)]["cov"]) for s in cfg.seeds]
                        row["coverage_seed_std"] = intervals.seed_summary(per_seed).std
                    row.update(_ci(m.per_image(name, block, keep, scorer, "agree"), "agreement_pct", 100, cfg))
                    kl = m.per_image(name, block, keep, scorer, "kl")
                    row["kl"] = np.nan if kl is None else float(np.mean(kl))
                    dp = m.per_image(name, block, keep, scorer, "dprob")
                    row["true_prob_change_pct"] = np.nan if dp is None else 100 * float(np.mean(dp))
                    rows.append(row)
    return pd.DataFrame(rows)


GAP_COMPARISONS = (("sensitivity", "cls_attention"), ("mimic", "cls_attention"), ("sensitivity", "mimic"),
                   ("sensitivity", "task"), ("oracle", "cls_attention"), ("cls_attention", "random"),
                   ("cls_attention", "centre"), ("sensitivity", "centre"))


def gaps_table(m: Measurements, settings: dict[str, Setting], cfg: SimpleNamespace) -> pd.DataFrame:
    """Coverage gaps (points) of :data:`GAP_COMPARISONS` per (setting, block, keep rate), paired bootstrap; for
    trained heads also the per-seed gaps' summary and how many seeds show a positive gap."""
    rows = []
    for name, S in settings.items():
        for block in S.blocks:
            for keep in cfg.keep_rates:
                for a, b in GAP_COMPARISONS:
                    dd = m.paired(name, block, keep, a, b)
                    if dd is None:
                        continue
                    row = {"setting": name, "block": block, "keep_rate": keep, "comparison": f"{a} - {b}",
                           "gap_pp": dd.estimate, "low": dd.low, "high": dd.high, "p": dd.p_value}
                    if a in TRAINED:
                        per_seed = [100 * (np.nanmean(m.per[(name, block, keep, a, s)]["cov"]) -
                                           np.nanmean(m.per_image(name, block, keep, b, "cov"))) for s in cfg.seeds]
                        ss = intervals.seed_summary(per_seed)
                        row.update({"seed_mean": ss.mean, "seed_std": ss.std, "seed_low": ss.low,
                                    "seed_high": ss.high, "seeds_positive": int(sum(v > 0 for v in per_seed))})
                    rows.append(row)
    return pd.DataFrame(rows)


def faithfulness_table(m: Measurements, settings: dict[str, Setting], d: Layout, cfg: SimpleNamespace) -> pd.DataFrame:
    """Agreement of each head (and the oracle) minus [CLS] attention's, where both were run: paired bootstrap,
    TOST within +-margin, McNemar (first seed), KL and true-class probability differences, ceiling flag."""
    rows = []
    for name, S in settings.items():
        for block in S.blocks:
            for keep in cfg.keep_rates:
                for a, b in (("sensitivity", "cls_attention"), ("mimic", "cls_attention"), ("task", "cls_attention"),
                             ("oracle", "cls_attention")):
                    x, y = m.per_image(name, block, keep, a, "agree"), m.per_image(name, block, keep, b, "agree")
                    if x is None or y is None:
                        continue
                    dd = intervals.paired_bootstrap_diff(100 * x, 100 * y, n_boot=cfg.n_boot, seed=cfg.seed)
                    tost = significance.tost_paired(x, y, margin=d.margin_frac)
                    first = m.per_image(name, block, keep, a, "agree", cfg.seeds[0]) if a in TRAINED else x
                    mc = significance.mcnemar(first.astype(bool), y.astype(bool))
                    kl = m.paired(name, block, keep, a, b, "kl", 1.0)
                    dp = m.paired(name, block, keep, a, b, "dprob", 100.0)
                    rows.append({
                        "setting": name, "block": block, "keep_rate": keep, "comparison": f"{a} - {b}",
                        "agreement_a_pct": 100 * x.mean(), "agreement_b_pct": 100 * y.mean(),
                        "agreement_diff_pp": dd.estimate, "low": dd.low, "high": dd.high,
                        "tost_p": tost.p_value, "equivalent": tost.equivalent, "tost_ci90_low_pp": 100 * tost.ci_low,
                        "tost_ci90_high_pp": 100 * tost.ci_high, "mcnemar_p_first_seed": mc.p_value,
                        "kl_diff": kl.estimate, "kl_diff_low": kl.low, "kl_diff_high": kl.high,
                        "true_prob_change_diff_pp": dp.estimate, "true_prob_change_diff_low": dp.low,
                        "true_prob_change_diff_high": dp.high,
                        "at_ceiling": bool(min(x.mean(), y.mean()) >= cfg.ceiling)})
    return pd.DataFrame(rows)


def config_matrix(m: Measurements, name: str):
    """Configurations of ``name`` with a forward pass (trained heads: first seed): keys ``(block, keep, scorer)``
    and per-image coverage and agreement, ``[configs, images]`` each."""
    keys, cov, agr = [], [], []
    for (n_, block, keep, scorer, s), v in m.per.items():
        if n_ != name or "agree" not in v or (scorer in TRAINED and s != m.seeds[0]):
            continue
        keys.append((block, keep, scorer))
        cov.append(v["cov"])
        agr.append(v["agree"])
    return keys, np.array(cov), np.array(agr)


def _spearman_cols(c, a):
    """Column-wise Spearman correlation of two ``[configs, resamples]`` arrays (Pearson of ranks; NaN where a
    column is constant)."""
    from scipy.stats import rankdata

    rc, ra = rankdata(c, axis=0), rankdata(a, axis=0)
    rc, ra = rc - rc.mean(0), ra - ra.mean(0)
    den = np.sqrt((rc ** 2).sum(0) * (ra ** 2).sum(0))
    return np.where(den > 0, (rc * ra).sum(0) / np.where(den > 0, den, 1), np.nan)


def _resampled_means(cov, agr, idx):
    """Per-configuration mean coverage (NaN-aware) and agreement of every image resample (rows of ``idx``):
    two ``[configs, resamples]`` arrays."""
    cov0 = np.nan_to_num(cov, nan=0.0)
    valid = (~np.isnan(cov)).astype(float)
    cb = np.stack([(cov0[:, i].sum(1) / np.maximum(valid[:, i].sum(1), 1)) for i in idx], axis=1)
    ab = np.stack([agr[:, i].mean(1) for i in idx], axis=1)
    return cb, ab


def spearman_boot(cov, agr, n_boot, rng):
    """Spearman correlation of per-configuration means (rows), with a bootstrap over images (columns)."""
    est = float(_spearman_cols(np.nanmean(cov, 1)[:, None], agr.mean(1)[:, None])[0])
    n = cov.shape[1]
    idx = rng.integers(0, n, (n_boot, n))
    boots = _spearman_cols(*_resampled_means(cov, agr, idx))
    if np.isnan(boots).all():
        return est, np.nan, np.nan
    lo, hi = np.nanquantile(boots, [0.025, 0.975])
    return est, float(lo), float(hi)


def stratified_spearman_boot(cov, agr, strata: list, n_boot: int, rng):
    """Mean over ``strata`` (index arrays of configurations, one per keep rate) of the within-stratum Spearman
    correlation of mean coverage and mean agreement, with a bootstrap over images: every resample draws the
    images once and recomputes every stratum's correlation on them (the image is the independent unit; the
    configurations are fixed)."""
    if not strata:
        return math.nan, math.nan, math.nan
    est = float(np.mean([_spearman_cols(np.nanmean(cov[s], 1)[:, None], agr[s].mean(1)[:, None])[0] for s in strata]))
    n = cov.shape[1]
    idx = rng.integers(0, n, (n_boot, n))
    cb, ab = _resampled_means(cov, agr, idx)
    boots = np.stack([_spearman_cols(cb[s], ab[s]) for s in strata]).mean(0)  # NaN where a stratum is constant
    if np.isnan(boots).all():
        return est, np.nan, np.nan
    lo, hi = np.nanquantile(boots, [0.025, 0.975])
    return est, float(lo), float(hi)


def rank_correlation_table(m: Measurements, settings: dict[str, Setting], cfg: SimpleNamespace) -> pd.DataFrame:
    """Per setting: the Spearman correlation of mean coverage and mean agreement across configurations (all, and
    within each keep rate; at least 5 configurations), with a bootstrap over images."""
    rows = []
    for name in settings:
        keys, cov, agr = config_matrix(m, name)
        rng = np.random.default_rng(cfg.seed)
        groups = [("all configurations", np.arange(len(keys)))] + \
                 [(f"keep {k:g}", np.array([i for i, key in enumerate(keys) if key[1] == k])) for k in cfg.keep_rates]
        for label, idx in groups:
            if len(idx) < 5:  # a rank correlation of fewer configurations says little
                continue
            est, lo, hi = spearman_boot(cov[idx], agr[idx], cfg.n_boot, rng)
            rows.append({"setting": name, "configurations": label, "n_configs": len(idx),
                         "spearman_coverage_agreement": est, "low": lo, "high": hi})
    return pd.DataFrame(rows)


def centre_family(m: Measurements, name: str, blocks: list, keep_rates: list, alpha: float = CENTRE_FAMILY_ALPHA,
                  a: str = "sensitivity", b: str = "centre") -> list:
    """``[(block, keep, PairedDiff)]``: ``100 x (a - b)`` coverage per configuration (block x keep rate), paired
    bootstrap over images at the Bonferroni level ``1 - alpha / K`` (K: the configurations measured)."""
    pairs = [(bl, kp, m.per_image(name, bl, kp, a, "cov"), m.per_image(name, bl, kp, b, "cov"))
             for bl in blocks for kp in keep_rates]
    pairs = [p for p in pairs if p[2] is not None and p[3] is not None]
    k = max(len(pairs), 1)
    return [(bl, kp, intervals.paired_bootstrap_diff(100 * np.asarray(x), 100 * np.asarray(y), n_boot=m.n_boot,
                                                     alpha=alpha / k, seed=m.seed)) for bl, kp, x, y in pairs]


def centre_values(family: list) -> dict:
    """The two configurations the centre-prior rule reads: lowest lower bound (reproduced only if even it lies
    above -margin) and lowest upper bound (not reproduced when it lies below -margin)."""
    lo = min(family, key=lambda t: t[2].low)[2]
    hi = min(family, key=lambda t: t[2].high)[2]
    return {"sensitivity - centre, configuration of lowest lower bound": lo,
            "sensitivity - centre, configuration of lowest upper bound": hi}


@dataclass(frozen=True)
class DecouplingStats:
    """The rank correlation of mean coverage and mean agreement across configurations: ``pooled`` and
    ``stratified`` (mean of the within-keep-rate correlations), each ``(estimate, low, high)``; ``strata``: the
    configurations per keep rate; ``n_strata``: the keep rates with at least 5; ``n_configs`` the configurations
    counted (those in ``cost_band``, every one without), of ``n_measured`` with a forward pass."""

    n_configs: int
    pooled: tuple
    stratified: tuple
    strata: dict
    n_strata: int
    n_measured: int = 0
    cost_band: Optional[tuple] = None


def in_cost_band(agr: np.ndarray, cost_band: Optional[tuple]) -> np.ndarray:
    """Which configurations (rows of per-image agreement ``agr``) have an agreement cost, ``100 x (1 - mean
    agreement)`` points over all images, within ``cost_band`` (inclusive); all of them with None."""
    agr = np.asarray(agr, dtype=np.float64)
    if cost_band is None or not len(agr):
        return np.ones(len(agr), dtype=bool)
    cost = 100 * (1 - agr.mean(1))
    return (cost >= cost_band[0]) & (cost <= cost_band[1])


def decoupling_stats(m: Measurements, name: str, keep_rates: list, n_boot: int, seed: int,
                     cost_band: Optional[tuple] = None) -> DecouplingStats:
    """Rank correlation of mean coverage and mean agreement across the configurations of ``name`` with a forward
    pass (trained heads: first seed), pooled (without ``cost_band``, the ``all configurations`` row of
    :func:`rank_correlation_table`, same resamples) and as the mean of the within-keep-rate correlations (keep
    rates with at least 5 configurations); bootstrap over images. ``cost_band``: only the configurations whose
    agreement cost lies in it count (:func:`in_cost_band`, chosen once on every image; each resample recomputes the
    means of those)."""
    keys, cov, agr = config_matrix(m, name)
    n_measured = len(keys)
    ok = in_cost_band(agr, cost_band)
    keys = [k for k, o in zip(keys, ok) if o]
    cov, agr = (cov[ok], agr[ok]) if n_measured else (cov, agr)
    nan3 = (math.nan, math.nan, math.nan)
    pooled = spearman_boot(cov, agr, n_boot, np.random.default_rng(seed)) if len(keys) >= 5 else nan3
    strata = [np.array([i for i, key in enumerate(keys) if key[1] == kr]) for kr in keep_rates]
    sizes = {kr: len(s) for kr, s in zip(keep_rates, strata)}
    strata = [s for s in strata if len(s) >= 5]
    strat = stratified_spearman_boot(cov, agr, strata, n_boot, np.random.default_rng(seed)) if strata else nan3
    return DecouplingStats(n_configs=len(keys), pooled=pooled, stratified=strat, strata=sizes, n_strata=len(strata),
                           n_measured=n_measured, cost_band=None if cost_band is None else tuple(cost_band))


def class_part_coverage(S: Setting, keep_idx: torch.Tensor, coverage_variant: str) -> np.ndarray:
    """Per-image coverage of SynthBirds' class-defining parts (:data:`synthetic.DISCRIMINATIVE_PARTS`: the only
    parts whose appearance depends on the class) by the kept tokens; NaN where none is annotated."""
    sel = [synthetic.PART_NAMES.index(p) - 1 for p in synthetic.DISCRIMINATIVE_PARTS]
    parts = S.parts[:, sel]
    return coverage.part_coverage(parts, split.kept_source(keep_idx, S.patch_tokens), variant=coverage_variant).numpy()


@dataclass(frozen=True)
class HumanFeatures:
    """Class-defining-part coverage at the intermediate block and the low keep rate: the paired ``gap``
    (sensitivity head, per image mean over seeds, minus [CLS] attention, points; None with fewer than 2 images with
    such a part), the seeds with a positive gap of ``seeds``, the images with a class-defining part ``n_valid``, the
    mean coverages in % and the per-image coverages ``x`` (head) and ``y`` ([CLS] attention), fractions, NaN without
    such a part: the claim's design follows from them."""

    gap: Optional[intervals.PairedDiff]
    positive: int
    seeds: int
    n_valid: int
    coverage_head: float
    coverage_cls: float
    x: np.ndarray
    y: np.ndarray


def human_features_values(S: Setting, m: Measurements, cfg: SimpleNamespace) -> HumanFeatures:
    """:class:`HumanFeatures` of ``S`` (SynthBirds: the parts of :data:`synthetic.DISCRIMINATIVE_PARTS`)."""
    seeds = [s for s in cfg.seeds if (S.name, "sensitivity", s) in m.keep_idx]
    y = class_part_coverage(S, m.keep_idx[(S.name, "cls_attention", -1)], cfg.coverage_variant)
    per_seed = [class_part_coverage(S, m.keep_idx[(S.name, "sensitivity", s)], cfg.coverage_variant) for s in seeds]
    x = np.mean(per_seed, axis=0)
    n_valid = int(np.sum(~np.isnan(y)))
    g = (intervals.paired_bootstrap_diff(100 * x, 100 * y, n_boot=m.n_boot, seed=m.seed) if n_valid >= 2 else None)
    pos = sum(np.nanmean(v) > np.nanmean(y) for v in per_seed)
    return HumanFeatures(g, int(pos), len(seeds), n_valid, 100 * np.nanmean(x), 100 * np.nanmean(y), x, y)


def seeds_agree(gaps: pd.DataFrame, name, block, keep, a="sensitivity", b="cls_attention") -> int:
    """How many seeds show a positive gap ``a - b`` (the gaps table's ``seeds_positive``; 0 where absent)."""
    r = gaps[(gaps.setting == name) & (gaps.block == block) & (gaps.keep_rate == keep) &
             (gaps.comparison == f"{a} - {b}")]
    return int(r.seeds_positive.iloc[0]) if len(r) and "seeds_positive" in r else 0
