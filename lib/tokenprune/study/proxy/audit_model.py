"""The audit model, and how two configurations are compared on a model's evaluation images.

The accuracy claims of notebooks 01-03 are measured on the audit model (:data:`tokenprune.study.proxy.chosen.
AUDIT_MODEL`: notebook 00's classification proxy, or, with none chosen, the model measured instead), on the first
images of its recipe's test split (:func:`load_audit_model`). :class:`EvaluatedModel` holds a model with its
evaluation images and compares two configurations on them (paired: the same images; seeds: the two-stage bootstrap
of :func:`tokenprune.measure.intervals.seed_image_bootstrap_diff`), each comparison with its
:class:`~tokenprune.measure.power.Design`; :class:`AuditModel` is the audit model. :func:`gated` gates a decision on
its design (:class:`~tokenprune.study.verdicts.Detectable`), and :func:`moved_premise` is the premise of every claim
decided on fine-tuned models: the fine-tuning moved the model.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

import numpy as np
import torch

from tokenprune.core.patch import patch
from tokenprune.measure import evaluation, intervals, significance
from tokenprune.measure import macs as flops
from tokenprune.measure.evaluation import Predictions
from tokenprune.measure.power import Design
from tokenprune.study import verdicts
from tokenprune.study.notebook import ci_columns

__all__ = ["MOVED", "Comparison", "Gated", "EvaluatedModel", "AuditModel", "correct_matrix", "two_stage_diff",
           "load_audit_model", "predict_unpruned", "gated", "worst_design", "moved_premise"]

MOVED = "the fine-tuning moved the model: fine-tuned minus untrained pruning excludes 0"
"""The premise of every claim decided on fine-tuned models (:func:`moved_premise`)."""


@dataclass(frozen=True)
class Comparison:
    """Top-1 of A minus B on the same images: the estimate ``diff`` with its 95 % (``low``, ``high``) and 90 %
    (``low90``, ``high90``) intervals, McNemar's ``p`` (one model each; None for seeds), the number of ``seeds``;
    one model each: the discordant counts ``n01``, ``n10``; seeds: the bootstrap p-value and the per-seed
    differences. :meth:`EvaluatedModel.compare` gives points, :func:`two_stage_diff` fractions."""

    diff: float
    low: float
    high: float
    low90: float
    high90: float
    p: Optional[float]
    seeds: int
    n01: Optional[int] = None
    n10: Optional[int] = None
    bootstrap_p: Optional[float] = None
    per_seed_diff: Optional[list] = None

    def row(self) -> dict:
        """The comparison as a table row (the fields that apply to it)."""
        optional = ("n01", "n10", "bootstrap_p", "per_seed_diff")
        return {k: v for k, v in dataclasses.asdict(self).items() if k not in optional or v is not None}

    def scaled(self, factor: float) -> "Comparison":
        """The estimate and its intervals times ``factor`` (fractions to points: 100)."""
        return dataclasses.replace(self, **{k: float(getattr(self, k)) * factor
                                            for k in ("diff", "low", "high", "low90", "high90")})


@dataclass(frozen=True)
class Gated:
    """A decision gated on its design, and the design's record (what the claim stores; None without a design)."""

    decision: verdicts.Decision
    design: Optional[dict]


def correct_matrix(preds: Any) -> np.ndarray:
    """Per-image correctness, one row per seed: ``[S, N]`` (``preds``: Predictions or a list of them, one per seed)."""
    ps = preds if isinstance(preds, (list, tuple)) else [preds]
    return np.stack([q.correct.astype(float) for q in ps])


def two_stage_diff(a: np.ndarray, b: np.ndarray, seed: int) -> Comparison:
    """mean(a) - mean(b) for ``[S, N]`` correctness of S paired seeds on the same N images (fractions), with 95 % and
    90 % intervals from the two-stage bootstrap (seeds, then images) of ``intervals.seed_image_bootstrap_diff``."""
    r95 = intervals.seed_image_bootstrap_diff(a, b, seed=seed)
    r90 = intervals.seed_image_bootstrap_diff(a, b, alpha=0.10, seed=seed)
    return Comparison(diff=r95.estimate, low=r95.low, high=r95.high, low90=r90.low, high90=r90.high, p=None,
                      seeds=max(len(a), len(b)), bootstrap_p=r95.p_value,
                      per_seed_diff=np.round(np.asarray(a).mean(1) - np.asarray(b).mean(1), 5).tolist())


@dataclass
class EvaluatedModel:
    """A model (``base``, patched, unpruned between experiments), its recipe and data, its evaluation images
    (``x_raw`` uint8, ``X`` preprocessed, labels ``y``), the unpruned predictions ``full``, and how configurations
    are evaluated (``eval_kw``, ``sweep_kw``) and compared (:meth:`compare`, :meth:`design`, :meth:`ci_row`)."""

    base: torch.nn.Module
    info: dict
    recipe: Any
    data: Any
    x_raw: torch.Tensor
    y: torch.Tensor
    X: torch.Tensor
    device: str
    eval_batch: int
    seed: int
    margin_pp: float
    full: Optional[Predictions] = None
    base_ci: Any = None
    grid: tuple = ()
    gmacs: float = float("nan")
    name: str = ""
    n_max: int = 0          # the most evaluation images this data allows (its full test split); 0: the images here
    max_scale: str = ""     # what n_max is ("the full test split")

    def design(self, a: Any, b: Any) -> Design:
        """The design of comparing ``a`` with ``b`` (as :meth:`compare`): one model each, the per-image differences of
        correctness (points), up to :attr:`n_max` images; seeds, the per-seed differences of top-1, up to 5 seeds."""
        ca, cb = correct_matrix(a), correct_matrix(b)
        n_img = ca.shape[1]
        if ca.shape[0] == 1 and cb.shape[0] == 1:
            n_max = max(self.n_max or n_img, n_img)
            return Design.paired(ca[0], cb[0], unit="images", n_max=n_max,
                                 max_scale=self.max_scale or f"these {n_img} images",
                                 sd_source=f"sd of the {n_img} paired per-image differences of this run (independent "
                                           "of their mean)")
        d = 100 * (ca.mean(1) - cb.mean(1))          # a one-row B (off the shelf) is compared with every seed
        n_seeds = len(d)
        return Design(unit="seeds", n=n_seeds, sd=float(np.std(d, ddof=1)),
                      sd_source=f"sd of the {n_seeds} per-seed differences of top-1 (points, each on the same {n_img} "
                                "images) of this run (independent of their mean)",
                      n_max=max(5, n_seeds), max_scale=f"{max(5, n_seeds)} seeds")

    @property
    def eval_kw(self) -> dict:
        return dict(batch=self.eval_batch, dtype="fp32", device=self.device)

    @property
    def sweep_kw(self) -> dict:
        """``prune_sweep``'s options (it runs on the GPU when there is one)."""
        return dict(batch=self.eval_batch, dtype="fp32")

    @property
    def img_size(self) -> int:
        return self.grid[0] * self.base.patch_embed.patch_size[0]

    def predict(self, model: torch.nn.Module, X: Optional[torch.Tensor] = None, y: Optional[torch.Tensor] = None):
        return evaluation.predict(model, self.X if X is None else X, self.y if y is None else y, **self.eval_kw)

    def compare(self, a: Any, b: Any) -> Comparison:
        """Top-1 of ``a`` minus ``b`` (Predictions, or a list of them, one per seed) on the same images, in points:
        one model each: paired bootstrap, McNemar and the TOST 90 % interval; seeds: the two-stage bootstrap."""
        ca, cb = correct_matrix(a), correct_matrix(b)
        if ca.shape[0] == 1 and cb.shape[0] == 1:
            pa = a[0] if isinstance(a, (list, tuple)) else a
            pb = b[0] if isinstance(b, (list, tuple)) else b
            pc = evaluation.paired_comparison(pa, pb, seed=self.seed)
            t = significance.tost_paired(ca[0], cb[0], margin=self.margin_pp / 100)
            r = Comparison(diff=pc["top1_diff"], low=pc["top1_diff_low"], high=pc["top1_diff_high"], low90=t.ci_low,
                           high90=t.ci_high, p=pc["mcnemar_p"], seeds=1, n01=pc["n01"], n10=pc["n10"])
        else:
            r = two_stage_diff(ca, cb, self.seed)
        return r.scaled(100)

    def ci_row(self, p: Any, ref: Optional[Predictions] = None) -> dict:
        """top-1 and agreement with ``ref`` (default: the unpruned model) in %, with 95 % bootstrap intervals; for a
        list of seeds: the mean over seeds, its interval from the two-stage bootstrap, and the seed spread."""
        ref = ref or self.full
        correct = correct_matrix(p)
        ps = p if isinstance(p, (list, tuple)) else [p]
        agree = np.stack([(q.preds == ref.preds).numpy().astype(float) for q in ps])
        out = {}
        for name, mat in (("top1", correct), ("agreement", agree)):
            if mat.shape[0] == 1:
                out.update(ci_columns(intervals.bootstrap_ci(mat[0], seed=self.seed), name, 100))
            else:
                c = two_stage_diff(mat, np.zeros_like(mat), self.seed)
                s = intervals.seed_summary(mat.mean(1))
                out.update({name: 100 * c.diff, f"{name}_low": 100 * c.low, f"{name}_high": 100 * c.high,
                            f"{name}_seed_sd": 100 * s.std})
        out["seeds"] = correct.shape[0]
        return out

    def gmacs_of(self, k: float, reducer: str = "fuse_attention") -> float:
        """GMACs of ``base`` at keep ``k`` with ``reducer`` (leaves ``base`` patched so)."""
        from tokenprune.core.config import PruneConfig

        PruneConfig(keep_rate=k, reducer=reducer).apply(self.base)
        return flops.analytic_macs(self.base).total / 1e9


@dataclass
class AuditModel(EvaluatedModel):
    """The audit model of the accuracy claims (:data:`tokenprune.study.proxy.chosen.AUDIT_MODEL`: notebook 00's
    proxy or, with none, the model measured instead; or an override) on the first images of its recipe's test split;
    designs scale to the full split."""


def predict_unpruned(model: EvaluatedModel) -> EvaluatedModel:
    """Predict ``model``'s evaluation images once unpruned: its ``full`` predictions, their 95 % interval of top-1,
    the patch grid and the unpruned GMACs."""
    base = model.base
    model.full = model.predict(base)
    model.base_ci = intervals.bootstrap_ci(model.full.correct, seed=model.seed)
    model.grid = tuple(base.patch_embed.grid_size)
    model.gmacs = flops.analytic_macs(base).total / 1e9
    return model


def load_audit_model(name: str, eval_images: int, *, seed: int, eval_batch: int, margin_pp: float, device: str,
                     train_if_missing: bool = False) -> AuditModel:
    """Load the audit model ``name`` (a base model of :mod:`tokenprune.training.base_models`; trained here when
    missing and ``train_if_missing``) on the first ``eval_images`` images of its recipe's test split (0: all;
    ``recipe_data.eval_data``), patch it unpruned and predict them once. Designs scale to the full split."""
    from tokenprune.training import base_models as tp_models, recipe_data
    from tokenprune.training import sources
    from tokenprune.training.recipe import TrainRecipe

    base, info = tp_models.load_base_model(name, train_if_missing=train_if_missing, progress=False)
    recipe = TrainRecipe.from_dict(info["recipe"])
    full = recipe_data.eval_data(recipe)
    test = full.select(range(eval_images)) if 0 < eval_images < len(full) else full
    x_raw, labels = sources.as_tensors(test)
    images = base.tp_preprocess(x_raw)
    patch(base, keep_rate=1.0)
    model = AuditModel(base=base, info=info, recipe=recipe, data=None, x_raw=x_raw, y=labels, X=images,
                       device=device, eval_batch=eval_batch, seed=seed, margin_pp=margin_pp, name=name,
                       n_max=len(full), max_scale=f"the full test split of {name}")
    return predict_unpruned(model)


def gated(decision: verdicts.Decision, effect: float, design: Optional[Design],
          premises: Sequence[verdicts.Premise] = ()) -> Gated:
    """``decision`` gated on detectability (:class:`~tokenprune.study.verdicts.Detectable`: ``effect``, the effect in
    dispute stated before the data in the claim's unit, against the design's MDE), then on each of ``premises`` in
    turn (the last one outermost: its failure is the one named). Premises a claim declares are applied when it is
    filed (:func:`tokenprune.study.claims.file_claim`), not here."""
    record = None
    if design is not None and abs(effect) > 0:
        det = verdicts.Detectable(float(abs(effect)), design)
        decision, record = det.gate(decision), det.record()
    for p in premises:
        if p is not None:
            decision = p.gate(decision)
    return Gated(decision, record)


def worst_design(designs: Sequence[Optional[Design]]) -> Optional[Design]:
    """Of the designs of a claim's parts, the one with the largest MDE at the largest scale (the part that binds)."""
    ds = [d for d in designs if d is not None]
    return max(ds, key=lambda d: (d.mde_at_max, d.mde)) if ds else None


def moved_premise(gains: Mapping[str, Optional[Comparison]]) -> verdicts.Premise:
    """:data:`MOVED`: for every fine-tuned configuration of ``gains`` (its fine-tuned top-1 minus the same
    configuration off the shelf, in points, on the same images), the 95 % interval lies above 0; a configuration
    without an off-the-shelf run (None) fails it."""
    if not gains:
        raise ValueError("gains: at least one fine-tuned configuration is needed")
    parts = [f"{label}: no off-the-shelf run to compare with" if c is None else
             f"{label}: {verdicts.fmt_interval(c.diff, c.low, c.high)} points" for label, c in gains.items()]
    holds = all(c is not None and c.low > 0 for c in gains.values())
    return verdicts.Premise(MOVED, bool(holds), "; ".join(parts))
