"""What notebook 04's claims on one dataset read and how each is filed: the dataset's :class:`Evidence` (its small
model's setting, the measurements, the layout and, on a proxy, the sensitivity factor of each claim family,
:func:`proxy_sensitivity`),
the paired per-image design of a comparison (:func:`paired_design`), the training runs' premise
(:func:`training_premise`), and :func:`tokenprune.study.claims.file_claim` with a summary after the reason
(:func:`file_summarised`) or with nothing measured (:func:`file_unmeasured`)."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, Mapping, Optional

import numpy as np
import pandas as pd

from tokenprune.measure import power
from tokenprune.study import paper_runs, verdicts
from tokenprune.study.claims import Declaration, declared_premises, file_claim, gate_by_premises
from tokenprune.study.why import too_long
from tokenprune.study.decoupling import claims as decl
from tokenprune.study.decoupling.data import PAPER_DATASET, PAPER_DIRS, Setting, fmnist_model_name, part_model_name
from tokenprune.study.decoupling.measurements import Measurements
from tokenprune.study.decoupling.settings import TRAINED, Layout
from tokenprune.study.proxy import chosen, plan
from tokenprune.study.proxy.audit_model import gated
from tokenprune.study.verdicts import Decision, Premise

__all__ = ["Evidence", "proxy_sensitivity", "is_proxy", "paired_design", "training_premise", "file_summarised",
           "file_unmeasured"]


def paired_design(a, b, n_split: int, what: str = "", scale: float = 100.0,
                  alpha: float = power.ALPHA) -> Optional[power.Design]:
    """The paired design of per-image values ``a`` and ``b`` (``scale`` x: points), over the images where both are
    defined; its largest scale is the full test split ``n_split``, times the share of images where both are
    defined (part coverage is undefined on an image without parts). None with fewer than 2 such images."""
    x, y = np.asarray(a, dtype=np.float64).ravel(), np.asarray(b, dtype=np.float64).ravel()
    ok = np.isfinite(x) & np.isfinite(y)
    n, n_all = int(ok.sum()), len(x)
    if n < 2:
        return None
    n_max = max(n, int(round(n_split * n / max(n_all, 1))))
    scale_txt = (f"the full test split ({n_split} images)" if n == n_all else
                 f"the full test split ({n_split} images, of which about {n_max} have it defined)")
    src = (f"sd of the {n} paired per-image differences of this run{f' ({what})' if what else ''} (independent of "
           "their mean)")
    d = power.Design.paired(x[ok], y[ok], unit="images", n_max=n_max, max_scale=scale_txt, scale=scale, sd_source=src)
    return d if alpha == d.alpha else dataclasses.replace(d, alpha=alpha)


def training_premise(*settings: Setting) -> Optional[Premise]:
    """:data:`tokenprune.study.paper_runs.FULL_SCHEDULE` of the models of ``settings`` a claim reads (a given
    checkpoint counts as whole); None when none of them comes from a training run (the proxies' base models)."""
    runs = [S.run for S in settings if getattr(S, "run", None) is not None]
    return paper_runs.full_schedule_premise(runs) if runs else None


def _gated_why(rep: Any, d: Declaration, decision: Decision, premises: Mapping[str, Premise]) -> str:
    return gate_by_premises(decision, declared_premises(rep, d, premises)).why


def file_summarised(rep: Any, d: Declaration, decision: Decision, *, keys: Mapping[str, Any], summary: str,
                    premises: Mapping[str, Premise] = {}, details: Optional[dict] = None, **values: Any) -> Any:
    """:func:`file_claim` with ``summary`` (one sentence with the deciding numbers) after the reason, where it fits in
    one why; an engine reason too long for a why is kept in ``details`` and the summary stands for it."""
    details = dict(details or {})
    premises = {k: v for k, v in premises.items() if k in d.premises}
    if too_long(_gated_why(rep, d, decision, premises)):
        details["rule's reason"] = decision.why
        decision, summary = Decision(decision.verdict, summary, decision.rule), ""
    if summary and too_long(_gated_why(rep, d, decision, premises), summary):
        details["summary"], summary = summary, ""
    return file_claim(rep, d, decision, keys=keys, why=summary, details=details or None, premises=premises,
                      **values)


def file_unmeasured(rep: Any, d: Declaration, decision: Decision, *, keys: Mapping[str, Any] = {},
                    read: Mapping[str, Premise] = {}, paper_value: Any = None) -> Any:
    """File ``d`` with nothing measured (no value, no unit): ``decision`` (not testable here) is gated on the
    premises of ``read`` only; the declared premises that cannot matter before anything is measured (the part
    model's bar when the larger model does not classify, or a dataset that was not run) are named in details."""
    unread = [p for p in d.premises if p not in read]
    bare = dataclasses.replace(d, unit="", premises=tuple(p for p in d.premises if p in read))
    return file_claim(rep, bare, decision, keys=keys, paper_value=paper_value, premises=read,
                      details={"premises not read": unread} if unread else None)


def _small_model(dataset: str, cfg: SimpleNamespace) -> Optional[str]:
    """The small model of a proxy dataset (None at paper scale)."""
    if dataset in PAPER_DIRS:
        return None
    name = {"parts": part_model_name, "fmnist": fmnist_model_name}.get(dataset)
    return None if name is None else name(cfg)


def proxy_sensitivity(dataset: str, cfg: SimpleNamespace, family: str) -> Optional[float]:
    """The sensitivity factor of ``family``'s claims on the small model of ``dataset`` when it is a proxy notebook 00
    chose (:func:`tokenprune.study.proxy.chosen.sensitivity_of`), else None (at paper scale no factor is needed; a
    proxy may have none for a family: :func:`is_proxy` tells the two apart)."""
    name = _small_model(dataset, cfg)
    return None if name is None else chosen.sensitivity_of(name, family)


def is_proxy(dataset: str, cfg: SimpleNamespace) -> bool:
    """Whether the small model of ``dataset`` is a proxy notebook 00 chose
    (:func:`tokenprune.study.proxy.chosen.is_proxy`)."""
    name = _small_model(dataset, cfg)
    return name is not None and chosen.is_proxy(name)


@dataclass
class Evidence:
    """What the claims on one dataset read: its small model's setting ``S`` (and every setting), the measurements,
    the gaps and settings tables, the layout, the settings ``cfg``, whether the small model is a ``proxy`` notebook 00
    chose (:func:`is_proxy`) and its ``sensitivity`` factor by claim family (a key of
    :data:`tokenprune.study.proxy.plan.FAMILIES`; None or absent: none; :func:`proxy_sensitivity`)."""

    dataset: str
    S: Setting
    settings: dict
    m: Measurements
    gaps: pd.DataFrame
    models_table: pd.DataFrame
    d: Layout
    cfg: SimpleNamespace
    sensitivity: Mapping[str, Optional[float]] = field(default_factory=dict)
    proxy: bool = False

    @property
    def on_proxy(self) -> bool:
        """Below the paper profile (SynthBirds, Fashion-MNIST): a tolerance in ImageNet points needs the factor."""
        return self.dataset not in PAPER_DIRS

    def scale(self, key: str) -> Optional[float]:
        """The factor an ImageNet-point tolerance of claim ``key`` is multiplied by: the proxy's sensitivity factor
        for the claim's family (:data:`~tokenprune.study.decoupling.claims.SENSITIVITY_FAMILY`); None at paper scale,
        for a claim without a family, or on a model without a factor for it (whose claims
        :meth:`sensitivity_premise` makes not testable)."""
        family = decl.SENSITIVITY_FAMILY.get(key)
        return self.sensitivity.get(family) if self.on_proxy and family is not None else None

    @property
    def band(self) -> Optional[tuple]:
        """The agreement-cost band (points) of the configurations the title claim counts; None: every one."""
        return decl.regime_band(self.scale("decoupled"))

    def sensitivity_premise(self, key: str) -> Premise:
        """:data:`~tokenprune.study.decoupling.claims.SENSITIVITY_KNOWN` for claim ``key``: it fails as not testable on
        a model that is not a proxy, and as inconclusive on a proxy whose claim family has no factor (a premise the
        sources do not give, named: :func:`tokenprune.study.proxy.plan.missing_factor`)."""
        if not self.on_proxy:
            return Premise(decl.SENSITIVITY_KNOWN, True, "paper scale: DeiT-S itself, no proxy; the tolerance applies "
                                                         "as given")
        family = decl.SENSITIVITY_FAMILY[key]
        factor = self.scale(key)
        if factor is None and not self.proxy:
            return Premise(decl.SENSITIVITY_KNOWN, False, f"{self.S.model_label} is not a proxy notebook 00 chose: no "
                                                          "sensitivity factor scales a tolerance in ImageNet points",
                           fails_as=verdicts.NOT_TESTABLE)
        if factor is None:   # a premise the sources do not give (DeiT-S's reference): inconclusive, named
            return Premise(decl.SENSITIVITY_KNOWN, False, f"{self.S.model_label} is a proxy notebook 00 chose, but "
                                                          f"{plan.missing_factor(family)}",
                           fails_as=verdicts.INCONCLUSIVE)
        f = plan.FAMILIES[family]
        return Premise(decl.SENSITIVITY_KNOWN, True, f"factor {factor:.2f} for {f.label} (notebook 00: the proxy's "
                                                     f"{f.measure_text} over DeiT-S's)")

    @property
    def small(self) -> str:
        return f"{self.dataset}/small"

    @property
    def coverage(self) -> str:
        return "part coverage" if self.S.parts is not None else "object coverage"

    @property
    def n_split(self) -> int:
        return self.S.n_test_split or len(self.S.x_eval)

    @property
    def where(self) -> str:
        S, d = self.S, self.d
        return (f"{PAPER_DATASET.get(self.dataset, self.dataset)}, {S.model_label}, block {d.mid}, keep "
                f"{d.low_keep:g}, {len(S.x_eval)} images")

    def declaration(self, key: str) -> tuple[Declaration, dict]:
        d, keys = decl.declaration(key, self.dataset)
        return d, {**keys, "coverage": self.coverage}

    def premises(self, *extra: Setting) -> dict:
        """The training premise of the paper's datasets (the small model's run, and those of ``extra``)."""
        p = training_premise(self.S, *extra)
        return {} if p is None else {p.name: p}

    def gap_design(self, block, keep, a="sensitivity", b="cls_attention", what=""):
        x, y = self.m.per_image(self.small, block, keep, a, "cov"), self.m.per_image(self.small, block, keep, b, "cov")
        if x is None or y is None:
            return None
        return paired_design(x, y, self.n_split, what or f"{a} - {b}, block {block}, keep {keep:g}" +
                             ("; trained heads: mean of the seeds per image" if a in TRAINED else ""))

    def diff_design(self, block1, keep1, block2, keep2):
        g1, g2 = self.m.gap_values(self.small, block1, keep1), self.m.gap_values(self.small, block2, keep2)
        return paired_design(g1, g2, self.n_split, f"gap at block {block1}, keep {keep1:g} minus gap at block "
                                                   f"{block2}, keep {keep2:g}")

    def file(self, rep: Any, key: str, decision: Decision, *, design=None, keys: Mapping[str, Any] = {},
             premises: Mapping[str, Premise] = {}, summary: str = "", details: Optional[dict] = None,
             extra: tuple = (), **values: Any) -> Any:
        """File claim ``key`` on this dataset: ``decision`` gated on detecting the effect in dispute with
        ``design`` (when given), then on the declared premises (``premises``: those measured here; the training
        runs' of the small model and of ``extra``)."""
        d, k = self.declaration(key)
        record = None
        if design is not None:
            g = gated(decision, decl.effect_in_dispute(d, self.cfg, self.dataset, self.scale(key)), design)
            decision, record = g.decision, g.design
        return file_summarised(rep, d, decision, keys={**k, **keys}, summary=summary, details=details,
                               premises={**self.premises(*extra), **premises}, design=record,
                               paper_value=decl.PAPER_VALUE[key], **values)
