"""The pre-registered plan of notebook 00: how the accuracy proxy of notebooks 01-04 is chosen.

Everything that decides which candidate becomes the proxy is fixed here, before any candidate is measured: the
criteria with their anchors (:data:`CRITERIA`), the candidates with every knob and the order they are tried in
(:data:`tokenprune.training.proxy.candidates.CANDIDATES`, with the recipes of their base models), how each is
measured (:data:`MEASUREMENT`, :data:`FINETUNE`), the fallback when none meets every criterion (:func:`choose`), and
the factor that scales a tolerance given in ImageNet points to the proxy, per claim family (:data:`FAMILIES`,
:func:`family_factor`, as round 3 declared them). No candidate is
added after the measurements; a change to this module or to the candidates after them is a new pre-registration,
which notebook 00 reports with the commit that made it.

What was known when it was written (and is why the candidates look as they do): a pilot of the pretrained
ViT-S/14 at 112 px (64 tokens) on Fashion-MNIST items among 6 clutter pieces on a black 64-px canvas, with a linear
head on frozen [CLS] features, reached 73.5 % top-1, and EViT with fusion off the shelf cost it 1.7 / 6.6 / 18.3
points at keep 0.9 / 0.7 / 0.5; with a 48-px canvas (a larger object share) 79.1 % and 2.3 / 7.3 / 23.0. None of
the candidates below was measured.

The bands are two-sided, so that the proxy is neither one where pruning barely matters nor one where it costs far
more than on DeiT-S (the 16-token proxy this replaces lost 10.6 / 35.1 points at keep 0.7 / 0.5). Their anchors
are DeiT-class models off the shelf (:data:`tokenprune.study.paper_numbers.DEIT_CLASS_OFF_THE_SHELF`: 0.26-2.1
points at about 3 GMACs); the keep-0.5 band is ours and deliberately wide, as no source gives DeiT-S's figure.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from tokenprune.study import paper_numbers as pn
from tokenprune.training.proxy.candidates import CANDIDATES, FINETUNE, Candidate
from tokenprune.training.proxy.outputs import KEEP_RATES, TOME_R
from tokenprune.training.proxy.round3 import SENSITIVITY

__all__ = ["Criterion", "Candidate", "CRITERIA", "BARS", "CANDIDATES", "MEASUREMENT", "FINETUNE", "PREMISES",
           "criteria_of", "judge", "k5_undefined", "k5_asked", "K5Missing", "band_text", "band_distance", "choose",
           "Family", "FAMILIES", "family_factor", "missing_factor", "DEIT_S_MAC_RATIO"]

_DEIT = pn.EVIT["deit_small_patch16_224"]
#: DeiT-S's MAC ratio at ToMe r = 13 (2.7 / 4.6 GMACs): ToMe runs at the r of the proxy whose ratio is closest
DEIT_S_MAC_RATIO = pn.TOME["deit_small_patch16_224"]["r"][13]["gflops"] / _DEIT["baseline"]["gmacs"]


@dataclass(frozen=True, kw_only=True)
class Criterion:
    """One criterion: what is measured (``measure``, a key of a candidate's measurements, in points of top-1 or as
    stated), the band its point estimate must lie in (``low`` / ``high``, None: open), the measurement whose 95 %
    interval must lie above 0 (``interval_of``: its key ``<interval_of>_low`` is read; None: no such condition), the
    roles it applies to, and its anchor (where the band comes from)."""

    id: str
    statement: str
    measure: str
    low: Optional[float]
    high: Optional[float]
    interval_of: Optional[str]
    roles: tuple[str, ...]
    anchor: str

    def met(self, m: Mapping[str, float]) -> Optional[bool]:
        """True or False on the measurements ``m``; None when ``measure`` was not measured."""
        if self.measure not in m or m[self.measure] is None or math.isnan(m[self.measure]):
            return None
        v = float(m[self.measure])
        ok = (self.low is None or v >= self.low) and (self.high is None or v <= self.high)
        if self.interval_of is not None:
            lo = m.get(f"{self.interval_of}_low")
            ok = ok and lo is not None and float(lo) > 0
        return bool(ok)


_BOTH = ("classification", "fine-grained")
CRITERIA: tuple[Criterion, ...] = (
    Criterion(id="K1", statement="at least 64 patch tokens, the object on a minority of them",
              measure="object_token_share", low=None, high=0.5, interval_of=None, roles=_BOTH,
              anchor="DeiT-S has 196 patch tokens; an ImageNet object rarely covers them all (share: mean over test "
                     "images of the patches the object mask touches; the 64 tokens are a property of the candidate)"),
    Criterion(id="K2", statement="off the shelf, EViT with fusion at keep 0.7 costs 0.3-4 points, interval above 0",
              measure="cost@0.7", low=0.3, high=4.0, interval_of="cost@0.7", roles=_BOTH,
              anchor="DeiT-class models off the shelf at about 3 GMACs lose 0.26-2.1 points (ToMe's README, its "
                     "maintainer on DeiT-S, DiffRate's README); the band widens that range by about 2x each way"),
    Criterion(id="K3", statement="off the shelf, EViT with fusion at keep 0.5 costs 1.5-12 points, interval above 0",
              measure="cost@0.5", low=1.5, high=12.0, interval_of="cost@0.5", roles=_BOTH,
              anchor="ours, deliberately wide: no source gives DeiT-S's off-the-shelf cost at keep 0.5"),
    Criterion(id="K4", statement="ToMe at the r whose MAC ratio is closest to DeiT-S's 2.7 / 4.6 costs at most 4 "
                                 "points", measure="tome_cost", low=None, high=4.0, interval_of=None,
              roles=("classification",),
              anchor="DeiT-S at r = 13 without training loses about 1.0 point (ToMe's maintainer), ViT-S/16 2.1"),
    Criterion(id="K5", statement="fine-tuning with pruning at keep 0.7 wins back at least 30 % of its off-the-shelf "
                                 "cost, the gain's interval above 0", measure="ft_share_of_cost", low=30.0,
              high=None, interval_of="ft_gain@0.7", roles=("classification",),
              anchor="EViT fine-tuned at keep 0.7 loses 0.3 points on DeiT-S, far less than off the shelf: the "
                     "proxy must be one where training with pruning matters"),
    Criterion(id="K6", statement="base top-1 at least 85 % (classification) or 80 % (fine-grained, exact part masks)",
              measure="top1_over_bar", low=0.0, high=None, interval_of=None, roles=_BOTH,
              anchor="DeiT-S reaches 79.8 % on 1,000 classes; a 10- or 12-class proxy must be clearly trained for "
                     "its attention to mean something (measured as top-1 minus the role's bar)"),
)
#: the bar of K6 per role (top-1 %)
BARS = {"classification": 85.0, "fine-grained": 80.0}
#: the criteria whose bands the fallback measures the distance to (:func:`band_distance`)
_COST_BANDS = ("K2", "K3")

#: premises of the proxy, measured and reported by notebook 00 but not criteria and not claims: a proxy chosen for
#: them would make the claims that restate them consistency checks
PREMISES = {
    "pruning costs accuracy": "off the shelf, EViT at keep 0.5 is below the unpruned model (interval above 0)",
    "top-k > random > min-k": "at keep 0.5, top-k beats random selection and random beats min-k (intervals)",
}


#: how every candidate is measured (the configurations and their cache: :mod:`tokenprune.training.proxy.outputs`):
#: the same test images (the first ``test_images`` of the candidate's test split, each from its own source item) for
#: every configuration, paired, in fp32; 95 % intervals by a paired bootstrap over images with ``seed``; EViT at
#: blocks 4/7/10 with the fused inattentive token at ``keep_rates``; ToMe merging ``tome_r`` tokens in every block
MEASUREMENT = {"keep_rates": KEEP_RATES, "premise_configs": ("random@0.5", "mink@0.5"), "tome_r": TOME_R,
               "tome_mac_ratio": DEIT_S_MAC_RATIO, "seed": 0, "dtype": "fp32"}

def criteria_of(role: str) -> tuple[Criterion, ...]:
    """The criteria that apply to a candidate of ``role``."""
    if role not in BARS:
        raise ValueError(f"role: {role!r} not accepted; accepted: {sorted(BARS)}")
    return tuple(c for c in CRITERIA if role in c.roles)


class K5Missing(RuntimeError):
    """A K5 that the pre-registered rule asks for (:func:`k5_asked`) is not measured: the choice is not decided."""


def k5_undefined(m: Mapping[str, float]) -> bool:
    """Round 3's first clarification of K5, fixed before any K5 was measured: K5 is not met when the 95 % interval of
    the off-the-shelf cost at keep 0.7 (``cost@0.7_low``) includes 0, since a share of a cost that may be zero is
    undefined (:data:`tokenprune.training.proxy.round3.K5_CLARIFICATIONS`)."""
    lo = m.get("cost@0.7_low")
    return lo is not None and not float(lo) > 0


def judge(candidate: Candidate, m: Mapping[str, float]) -> dict[str, Optional[bool]]:
    """Each criterion of the candidate's role on its measurements ``m`` (top-1 and costs in points): True, False,
    or None when not measured. K1 also needs the 64 tokens; K6 reads ``top1`` against the role's bar; K5 is False
    where :func:`k5_undefined`, whatever a fine-tune gained."""
    m = dict(m)
    if "top1" in m:
        m["top1_over_bar"] = float(m["top1"]) - BARS[candidate.role]
    out = {c.id: c.met(m) for c in criteria_of(candidate.role)}
    if out.get("K1") is not None:
        out["K1"] = bool(out["K1"] and candidate.tokens >= 64)
    if "K5" in out and k5_undefined(m):
        out["K5"] = False
    return out


def k5_asked(measured: Mapping[str, Mapping[str, float]], role: str,
             candidates: Sequence[Candidate] = CANDIDATES) -> list[str]:
    """The candidates of ``role`` whose K5 the pre-registered rule asks for, in candidate order: each that meets every
    other criterion of its role, and the fallback's next in line (of those meeting every criterion but the cost bands
    and K5, with K5 not already missed, the nearest the bands by :func:`band_distance`). Empty for a role without K5."""
    if not any(c.id == "K5" for c in criteria_of(role)):
        return []
    cands = [c for c in candidates if c.role == role and c.name in measured]
    judged = {c.name: judge(c, measured[c.name]) for c in cands}
    asked = [c.name for c in cands if all(v is True for k, v in judged[c.name].items() if k != "K5")]
    near = [(band_distance(measured[c.name]), i, c.name) for i, c in enumerate(cands)
            if judged[c.name]["K5"] is not False
            and all(v is True for k, v in judged[c.name].items() if k not in _COST_BANDS + ("K5",))]
    near = [t for t in near if math.isfinite(t[0])]
    if near and min(near)[2] not in asked:
        asked.append(min(near)[2])
    return [c.name for c in cands if c.name in asked]


def band_text(criterion_id: str) -> str:
    """The band of criterion ``criterion_id`` as ``low-high`` (``0.3-4``), for the text a reader sees."""
    c = next(c for c in CRITERIA if c.id == criterion_id)
    return f"{c.low:g}-{c.high:g}"


def band_distance(m: Mapping[str, float]) -> float:
    """The fallback's distance of a candidate from the cost bands K2 and K3: for each, how many times its point
    estimate lies outside the band, as ``|log(cost / nearest edge)|`` (0 inside it), summed; infinite when a cost is
    not above 0 (a factor of a cost that is not a cost is undefined)."""
    d = 0.0
    for c in CRITERIA:
        if c.id not in _COST_BANDS:
            continue
        v = float(m[c.measure])
        if not v > 0:
            return math.inf
        if c.low is not None and v < c.low:
            d += math.log(c.low / v)
        elif c.high is not None and v > c.high:
            d += math.log(v / c.high)
    return d


def choose(measured: Mapping[str, Mapping[str, float]], role: str,
           candidates: Sequence[Candidate] = CANDIDATES) -> tuple[Optional[str], str]:
    """The proxy of ``role`` from the measurements of its candidates (name -> measurements): ``(name, how)``.

    The first candidate in ``candidates`` order (round 1's :data:`CANDIDATES`; both rounds':
    :func:`tokenprune.study.proxy.calibration.calibrate_round2`) that meets every criterion (``how`` = ``"meets every
    criterion"``); else the fallback: of the candidates that meet every criterion but the cost bands K2-K3, the one
    nearest them by :func:`band_distance` (ties: the earlier), ``how`` = ``"fallback"``; else ``(None, "none")``
    and the role's accuracy claims are not testable here. A candidate with a criterion not measured (None) meets
    nothing it is chosen for."""
    cands = [c for c in candidates if c.role == role and c.name in measured]
    for c in cands:
        if all(v is True for v in judge(c, measured[c.name]).values()):
            return c.name, "meets every criterion"
    near = [(band_distance(measured[c.name]), i, c.name) for i, c in enumerate(cands)
            if all(v is True for k, v in judge(c, measured[c.name]).items() if k not in _COST_BANDS)]
    near = [t for t in near if math.isfinite(t[0])]
    if near:
        return min(near)[2], "fallback"
    return None, "none"


@dataclass(frozen=True, kw_only=True)
class Family:
    """A claim family's sensitivity factor as round 3 declared it (:data:`tokenprune.training.proxy.round3.SENSITIVITY`,
    its one home): the proxy's measurement (``measure``, a key of its measurements, points) over DeiT-S's reference
    (``reference`` points, named by ``source``, a key of :mod:`tokenprune.study.paper_numbers`; both None where no
    verified source gives it). ``label`` names the family's claims, ``members`` the methods they are about and
    ``measure_text`` its measurement, for the text a reader sees."""

    name: str
    label: str
    members: str
    measure: str
    measure_text: str
    reference: Optional[float]
    source: Optional[str]


#: the words of each family of :data:`tokenprune.training.proxy.round3.SENSITIVITY`: its claims, the methods they are
#: about, its measurement
_FAMILY_WORDS = {
    "tome": ("ToMe-type claims", "token merging", "off-the-shelf ToMe cost at DeiT-S's MAC ratio"),
    "evit": ("EViT-type claims", "top-k [CLS]-attention pruning, with or without fusion",
             "off-the-shelf EViT cost at keep 0.7"),
}


def _reference(source: Optional[str]) -> Optional[float]:
    """The number in points that round 3's ``reference`` names (``NAME['key']`` of
    :mod:`tokenprune.study.paper_numbers`); None for None."""
    if source is None:
        return None
    m = re.fullmatch(r"(\w+)\['(\w+)'\]", source)
    if m is None:
        raise ValueError(f"reference: expected NAME['key'] of paper_numbers, got {source!r}")
    return float(getattr(pn, m.group(1))[m.group(2)])


if set(SENSITIVITY) != set(_FAMILY_WORDS):
    raise ValueError(f"families: round 3 declares {sorted(SENSITIVITY)}, the words name {sorted(_FAMILY_WORDS)}")
#: the claim families and their factors, read from round 3's pre-registration: a family whose reference is None (no
#: verified source gives DeiT-S's figure) has no factor (:func:`missing_factor`)
FAMILIES: dict[str, Family] = {
    name: Family(name=name, label=_FAMILY_WORDS[name][0], members=_FAMILY_WORDS[name][1], measure=s["measure"],
                 measure_text=_FAMILY_WORDS[name][2], reference=_reference(s["reference"]), source=s["reference"])
    for name, s in SENSITIVITY.items()}


def _family(family: str) -> Family:
    if family not in FAMILIES:
        raise ValueError(f"family: {family!r} not accepted; accepted: {sorted(FAMILIES)}")
    return FAMILIES[family]


def _cost(m: Mapping[str, Optional[float]], f: Family) -> Optional[float]:
    v = m.get(f.measure)
    return None if v is None or not math.isfinite(float(v)) else float(v)


def family_factor(m: Mapping[str, Optional[float]], family: str) -> Optional[float]:
    """The sensitivity factor of ``family``'s claims on a proxy with measurements ``m`` (notebook 00's, measured once
    before any claim): the family's measurement over DeiT-S's reference (:data:`FAMILIES`). A tolerance given in
    ImageNet points is multiplied by it. None where the family has no reference, or the proxy's cost is not measured
    or not above 0 (:func:`missing_factor` says which); such claims are decided as directions where they are
    directional, else not decided."""
    f = _family(family)
    cost = _cost(m, f)
    if f.reference is None or cost is None or not cost > 0:
        return None
    return cost / f.reference


def missing_factor(family: str, m: Optional[Mapping[str, Optional[float]]] = None) -> str:
    """Why ``family``'s claims have no :func:`family_factor` on the measurements ``m``: no verified reference, the
    cost not measured, or not above 0; empty where the factor exists. Without ``m``, the reason the family's reference
    gives, else that the proxy's cost was not measured or not above 0."""
    f = _family(family)
    if f.reference is None:
        return f"{f.label} have no sensitivity factor: no verified source gives DeiT-S's {f.measure_text}"
    if m is None:
        return f"{f.label} have no sensitivity factor: the proxy's {f.measure_text} is not measured or not above 0"
    cost = _cost(m, f)
    if cost is None:
        return f"{f.label} have no sensitivity factor: the proxy's {f.measure_text} is not measured"
    if not cost > 0:
        return (f"{f.label} have no sensitivity factor: the proxy's {f.measure_text} is {cost:.2f} points, not above "
                "0")
    return ""
