"""Notebook 00: the pre-registered calibration that chooses the accuracy proxy, its outcome, and the premises of the
claims measured on the proxies.

The papers' accuracy claims are about DeiT-S on ImageNet (196 patch tokens), where pruning off the shelf costs about
0.3-2 points at about 3 GMACs. The plan (:mod:`tokenprune.study.proxy.plan`: criteria K1-K6 with their anchors, the
candidates in the order tried, the fallback) was committed before any candidate was measured;
:mod:`tokenprune.study.proxy.calibration` measures each candidate from the outputs ``make models`` cached, and this
module drives notebook 00 (its settings, the cache recheck, the pre-registration's commit) and holds the outcome the
audits read (:data:`CHOSEN`).

The outcome, from the committed caches: no classification candidate of the three rounds meets every criterion (round
1's, at 64 tokens, cost far more than DeiT-S to prune, ToMe at DeiT-S's MAC ratio over 4 points on each; round 2's,
trained from block 4, cost it too little or miss K6; round 3's near-miss on its whole split misses only K5, its
pre-registered fine-tune with pruning not winning back its off-the-shelf cost, and its second candidate is built only
where a GPU is lent), so there is **no classification proxy**: the accuracy claims of 01-03 are ``not testable here``
(:func:`proxy_premise`), their numbers shown as what was measured on :data:`AUDIT_MODEL`.
The fine-grained role has the **fallback** ``s14d_birds196`` (round 2's SynthBirds twin at 196 px, trained from block
4): no fine-grained candidate of any round meets every criterion, and of those meeting every other criterion it lies
nearest the cost bands (EViT's keep-0.7 cost inside K2's band, its keep-0.5 cost above K3's). How far outside the bands
it lies, and the sensitivity factor the claim's family uses on it (:func:`sensitivity_of`), :func:`fallback_limitation`
states on every claim decided on it.
"""
from __future__ import annotations

import functools
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping, Optional

import numpy as np
import torch

from tokenprune.study.proxy import plan
from tokenprune.training import base_models as tp_models, checkpoints, model_recipes
from tokenprune.training.proxy import round2, round3

if TYPE_CHECKING:
    from tokenprune.study import verdicts

__all__ = ["PARAMETERS", "PROFILES", "CHOSEN", "HOW", "PROXY", "FINE_GRAINED", "STAND_IN", "AUDIT_MODEL", "start",
           "recheck_caches", "PLAN_FILES", "ROUND_FILES",
           "preregistration", "PROXY_CHOSEN", "PROXY_BAR", "FINE_GRAINED_BAR",
           "proxy_premise", "bar_premise", "k6_measurement", "proxy_premises",
           "fallback_limitation", "band_sides",
           "against_deit", "distance_factor", "is_proxy", "sensitivity_of", "why_no_factor",
           "sensitivity_text"]

PARAMETERS = {
    "seed": "seed of every bootstrap",
    "recheck_images": "test images of every candidate's cache recomputed and compared with it (0: no recheck; else a "
                      "multiple of the batch of 64 the caches were measured in)",
}

PROFILES: dict[str, dict[str, Any]] = {
    "smoke": {"seed": 0, "recheck_images": 0},   # the recheck costs about 90 s; make reproduce runs it
    "default": {"seed": 0, "recheck_images": 64},
    "paper": {"seed": 0, "recheck_images": 64},
    "ranges": {"seed": (0, None), "recheck_images": (0, None)},
    "choices": {},
}

#: the proxy of each role as notebook 00 chose it by the plan, the one home of the audits' defaults: the committed
#: reports/00_proxy_calibration/results.json must record the same choice (a test checks it), so a rerun of 00 that
#: chooses otherwise fails the tests until this line and the audits' reports follow it
CHOSEN: dict[str, Optional[str]] = {"classification": None, "fine-grained": "s14d_birds196"}
#: how each role's proxy was chosen (:func:`tokenprune.study.proxy.plan.choose`)
HOW: dict[str, str] = {"classification": "none", "fine-grained": "fallback"}
#: the classification proxy of notebooks 01-03 (None: no candidate qualified)
PROXY = CHOSEN["classification"]
#: the fine-grained proxy (SynthBirds with exact part masks) of notebooks 01, 03 and 04
FINE_GRAINED = CHOSEN["fine-grained"]
#: the 16-token ViT-S/14 of the study's earlier calibration (56 px on Fashion-MNIST): the model measured instead of a
#: classification proxy while none is chosen (its numbers shown beside claims that are not testable here)
STAND_IN = "vit_s14_fmnist_ft"
#: the model the accuracy measurements of 01-03 run on: the proxy, or, with none, :data:`STAND_IN`
AUDIT_MODEL = PROXY or STAND_IN

#: every pre-registered candidate, in the order the rounds declared them
_CANDIDATES: tuple[plan.Candidate, ...] = (*plan.CANDIDATES, *round2.CANDIDATES, *round3.CANDIDATES)


def start(cfg: Any) -> None:
    """Seed torch and numpy."""
    torch.manual_seed(cfg.seed)
    np.random.seed(cfg.seed)


def recheck_caches(n: int) -> dict[str, dict[str, Any]]:
    """Recompute the first ``n`` test images of every candidate's cached off-the-shelf outputs (those of rounds 2 and 3
    as they are built) and compare (:func:`tokenprune.training.proxy.outputs.recheck`, by the rule of
    :mod:`tokenprune.training.recheck`: ``CacheStale`` when one no longer matches). Per candidate: the largest logit
    difference of the images that took the same discrete decisions (``max_logit_diff``) and, per configuration with a
    discrete step, the images that moved beyond the tight tolerance at a near tie (``moved``, only those with any);
    nothing when ``n`` is 0. ``n`` is a multiple of the batch the caches were measured in (random selection draws per
    batch, so a partial batch draws other tokens)."""
    from tokenprune.training.proxy import outputs as proxy_outputs

    if n % proxy_outputs.MEASURE_BATCH:
        raise ValueError(f"recheck_images: must be 0 or a multiple of {proxy_outputs.MEASURE_BATCH} (the batch the "
                         f"caches were measured in), got {n}")
    from tokenprune.training.checkpoints import CheckpointMissingError

    out: dict[str, dict[str, Any]] = {}
    if n == 0:
        return out
    for c in _CANDIDATES:
        try:
            arrays, _ = proxy_outputs.load(c)
        except CheckpointMissingError:
            if c.round == 1:
                raise
            continue   # a candidate of a later round not built yet (notebook 00's round status says so)
        checks = proxy_outputs.recheck(c, arrays, n=n)
        out[c.name] = {"max_logit_diff": max(r.agreeing_max for r in checks),
                       "moved": {r.label: r.moved for r in checks if r.moved}}
    return out


#: the plan's files (criteria, candidates, measurement), the plan first, each with every path it has had in the
#: repository's history (its path now first): :func:`preregistration` reads the history of all of them, so a file that
#: moves keeps its commits, and the pre-registration stays the commit that first added the plan
PLAN_FILES: tuple[tuple[str, ...], ...] = (
    ("lib/tokenprune/study/proxy/plan.py", "lib/tokenprune/study/proxy_plan.py"),
    ("lib/tokenprune/training/proxy/candidates.py", "lib/tokenprune/training/proxy_candidates.py"),
    ("lib/tokenprune/training/proxy/outputs.py", "lib/tokenprune/training/proxy_outputs.py"),
    ("lib/tokenprune/training/proxy/finetunes.py", "lib/tokenprune/training/proxy_finetunes.py"),
)


#: each round's plan files, the file that first declared the round first: a round's pre-registration is the commit
#: that added that file, and every later commit to any file of the round (its own and the criteria, candidates and
#: measurement it shares with round 1) is listed after it
ROUND_FILES: dict[int, tuple[tuple[str, ...], ...]] = {
    1: PLAN_FILES,
    2: (("lib/tokenprune/training/proxy/round2.py",), *PLAN_FILES),
    3: (("lib/tokenprune/training/proxy/round3.py",), *PLAN_FILES),
}


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True,
                          timeout=30).stdout.strip()


def preregistration(root: Optional[Path] = None, round: int = 1) -> dict[str, Any]:
    """The commit that first added round ``round``'s plan (round 1: :mod:`tokenprune.study.proxy.plan`; round 2:
    :mod:`tokenprune.training.proxy.round2`; at any path of :data:`ROUND_FILES`), its date and subject, and every later
    commit that touched the round's files (criteria, candidates, measurement) at any of their paths, so that a reader
    can see every change after it; ``{"commit": None, ...}`` where there is no git history (an unpacked archive) or
    the round's file is not committed yet. ``root``: the repository (default: this one)."""
    from tokenprune.utils.environment import REPO_ROOT

    if round not in ROUND_FILES:
        raise ValueError(f"round: {round!r} not accepted; accepted: {sorted(ROUND_FILES)}")
    files = ROUND_FILES[round]
    root = REPO_ROOT if root is None else root
    paths = [path for file in files for path in file]
    try:
        first = _git(root, "log", "--diff-filter=A", "--format=%H%x09%cI%x09%s", "--",
                     *files[0]).splitlines()[-1]
        commit, date, subject = first.split("\t", 2)
        later = _git(root, "log", "--format=%H%x09%cI%x09%s", f"{commit}..HEAD", "--", *paths).splitlines()
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        return {"commit": None, "date": None, "subject": "no git history here", "changed_since": []}
    return {"commit": commit, "date": date, "subject": subject,
            "changed_since": [dict(zip(("commit", "date", "subject"), line.split("\t", 2))) for line in later]}


PROXY_CHOSEN = "proxy: notebook 00's choice"
"""The premise that a claim was measured on the classification proxy notebook 00 chose (:func:`proxy_premise`)."""
PROXY_BAR = "proxy: K6"
"""The premise that the classification model meets the classification bar (:func:`bar_premise`)."""
FINE_GRAINED_BAR = "fine-grained model: K6"
"""The premise that the fine-grained (SynthBirds) model meets the fine-grained bar (:func:`bar_premise`), with the
fallback's limitation when the model is the fallback proxy."""


def _candidate(name: str) -> Optional[plan.Candidate]:
    """The pre-registered candidate of any round that ``name`` stands for (a smoke model for its default one), or
    None."""
    key = name.removesuffix("_smoke")
    return next((c for c in _CANDIDATES if c.name == key), None)


def band_sides(costs: dict[str, Optional[float]]) -> dict[str, str]:
    """Where each off-the-shelf EViT cost of ``costs`` (``cost@0.7``, ``cost@0.5``) lies against its band (K2, K3;
    an edge is inside), by keep rate: ``{"0.7": "inside", "0.5": "above"}``; empty when a cost is missing."""
    out: dict[str, str] = {}
    for c in plan.CRITERIA:
        if c.id not in plan._COST_BANDS:
            continue
        v = costs.get(c.measure)
        if v is None or not np.isfinite(v):
            return {}
        out[c.measure.split("@")[1]] = ("above" if c.high is not None and v > c.high else
                                        "below" if c.low is not None and v < c.low else "inside")
    return out


def against_deit(costs: dict[str, Optional[float]]) -> str:
    """Where a model whose off-the-shelf EViT costs are ``costs`` lies against the pre-registered cost bands (K2, K3,
    anchored on DeiT-class models), from :func:`band_sides`: ``a model whose off-the-shelf EViT cost lies above its
    pre-registered band at keep 0.5 and inside it at keep 0.7``; empty when a cost is missing. A band is wider than
    DeiT-S's cost, so this says nothing of how sensitive the model is against DeiT-S: the factor a claim uses says
    that (:func:`sensitivity_text`)."""
    keeps: dict[str, list[str]] = {}
    for keep, side in band_sides(costs).items():
        keeps.setdefault(side, []).append(keep)
    if not keeps:
        return ""
    order = sorted(keeps, key=lambda side: side == "inside")
    return "a model whose off-the-shelf EViT cost lies " + " and ".join(
        f"{side} {'its pre-registered band' if i == 0 else 'it'} at keep {' and '.join(keeps[side])}"
        for i, side in enumerate(order))


def _role(name: str) -> str:
    c = _candidate(name)
    return c.role if c is not None else "classification"


def is_proxy(name: str) -> bool:
    """Whether ``name`` is a role's proxy as notebook 00 chose it (:data:`CHOSEN`; a smoke model stands for its default
    one): a model that is not one has no sensitivity factor at all, while a proxy may lack one for a claim family
    (:func:`sensitivity_of`)."""
    c = _candidate(name)
    return c is not None and CHOSEN.get(c.role) == c.name


@functools.lru_cache(maxsize=None)
def _proxy_measurements(name: str) -> Optional[dict[str, Any]]:
    """Notebook 00's measurements of ``name`` from its cached outputs when it is a role's proxy (:func:`is_proxy`),
    else None, and None while those outputs are not built (its K6 premise then says so: :func:`bar_premise`): the one
    place :func:`fallback_limitation` and :func:`sensitivity_of` read them from."""
    from tokenprune.study.proxy import calibration as proxy_calibration
    from tokenprune.training.proxy import outputs as proxy_outputs

    if not is_proxy(name):
        return None
    c = _candidate(name)
    try:
        arrays, _ = proxy_outputs.load(c)
    except checkpoints.CheckpointMissingError:
        return None
    return proxy_calibration.measurements(c, arrays)


def fallback_limitation(name: str, family: Optional[str] = None) -> str:
    """What every claim decided on ``name`` says when ``name`` is a role's fallback proxy: how far its off-the-shelf
    costs lie outside the bands K2-K3 (:func:`tokenprune.study.proxy.plan.band_distance`, computed from its cached
    outputs) and the sensitivity factor the claims of ``family`` use on it (None: each family's;
    :func:`sensitivity_text`); empty for any other model."""
    m = _proxy_measurements(name)
    if m is None or HOW[m["role"]] != "fallback":
        return ""
    key, role, d = m["candidate"], m["role"], plan.band_distance(m)
    return (f"{key} is the {role} fallback of the pre-registered calibration (notebook 00), outside its cost bands: "
            f"EViT off the shelf costs {m['cost@0.7']:.1f} points at keep 0.7 (band {plan.band_text('K2')}) and "
            f"{m['cost@0.5']:.1f} at keep 0.5 (band {plan.band_text('K3')}), a distance of {d:.2f} (sum of "
            f"|log(cost / edge)|, a factor of {distance_factor(d)}); a verdict on it describes "
            f"{against_deit(m)}; {sensitivity_text(m, family)}")


def distance_factor(d: float) -> str:
    """The band distance ``d`` (:func:`tokenprune.study.proxy.plan.band_distance`) as the factor it stands for,
    ``exp(d)``, for the text a reader sees: one decimal below 10 (``1.2``), none above (``18``)."""
    x = float(np.exp(d))
    return f"{x:.1f}" if x < 10 else f"{x:.0f}"


def sensitivity_of(name: str, family: str) -> Optional[float]:
    """The sensitivity factor of the claims of ``family`` (a key of :data:`tokenprune.study.proxy.plan.FAMILIES`:
    ``tome`` or ``evit``) on ``name`` when it is a role's proxy (:func:`tokenprune.study.proxy.plan.family_factor`
    on its measurements from its cached outputs, as notebook 00 reports them): a tolerance or effect given in ImageNet
    points is multiplied by it. None for any other model (:func:`is_proxy` tells it apart) and for a family without
    a factor on the proxy (:func:`tokenprune.study.proxy.plan.missing_factor` says why)."""
    if family not in plan.FAMILIES:
        raise ValueError(f"family: {family!r} not accepted; accepted: {sorted(plan.FAMILIES)}")
    m = _proxy_measurements(name)
    return None if m is None else plan.family_factor(m, family)


def why_no_factor(name: str, family: str) -> str:
    """Why the claims of ``family`` have no :func:`sensitivity_of` on ``name``: it is not a proxy notebook 00 chose, or
    the family has none on it (:func:`tokenprune.study.proxy.plan.missing_factor`); empty where there is one."""
    if not is_proxy(name):
        return f"{name} has no sensitivity factor (not a proxy notebook 00 chose)"
    return plan.missing_factor(family, _proxy_measurements(name))


def sensitivity_text(m: Mapping[str, Any], family: Optional[str] = None) -> str:
    """The sensitivity factor the claims of ``family`` (None: each family in turn) use on a proxy with notebook 00's
    measurements ``m``, in words, from :func:`tokenprune.study.proxy.plan.family_factor`: ``ToMe-type claims scale a
    tolerance in ImageNet points by 0.53 (...)``, or, without one,
    :func:`tokenprune.study.proxy.plan.missing_factor`."""
    out = []
    for name in [family] if family is not None else list(plan.FAMILIES):
        x = plan.family_factor(m, name)
        f = plan.FAMILIES[name]
        out.append(plan.missing_factor(name, m) if x is None else
                   f"{f.label} scale a tolerance in ImageNet points by {x:.2f} (its {f.measure_text}, "
                   f"{float(m[f.measure]):.2f} points, over DeiT-S's {f.reference:g} point"
                   f"{'' if f.reference == 1 else 's'})")
    return "; ".join(out)


@functools.lru_cache(maxsize=None)
def k6_measurement(name: str) -> Optional[dict[str, Any]]:
    """K6's one measurement of the pre-registered candidate ``name``: its top-1 (%) with its 95 % interval on the
    candidate's test images, as notebook 00 measures it from the cached off-the-shelf outputs
    (:func:`tokenprune.study.proxy.calibration.measurements`); None for a model that is not a candidate, a smoke model,
    or a candidate whose outputs are not built."""
    from tokenprune.study.proxy import calibration as proxy_calibration
    from tokenprune.training.proxy import outputs as proxy_outputs

    c = _candidate(name)
    if c is None or name != c.name:
        return None
    try:
        arrays, _ = proxy_outputs.load(c)
    except checkpoints.CheckpointMissingError:
        return None
    m = proxy_calibration.measurements(c, arrays)
    return {"top1": m["top1"], "low": m["top1_low"], "high": m["top1_high"], "n": m["test_images"]}


def bar_premise(name: str, role: Optional[str] = None, label: Optional[str] = None,
                family: Optional[str] = None) -> "verdicts.Premise":
    """K6 as a premise of the claims measured on the base model ``name``: its test top-1 reaches the bar of its
    ``role`` (default: the candidate's own role; :data:`tokenprune.study.proxy.plan.BARS`). For a pre-registered
    candidate the top-1 is notebook 00's K6 measurement (:func:`k6_measurement`), so that notebook 00 and the audits
    read one number; for any other model, its checkpoint's sidecar (the recipe's test split). A smoke model is judged
    as such and says so (its bar cannot be met in a few steps). ``label`` is the premise's name (default
    :data:`PROXY_BAR` for a classification model, :data:`FINE_GRAINED_BAR` else). On a role's fallback proxy the
    premise carries :func:`fallback_limitation`, with the sensitivity factor of ``family``, the claim family of the
    claims that read the premise (None: each family's). A candidate whose cached outputs are not built has no K6
    measurement yet: the premise fails as ``not testable here``, naming the command that builds them."""
    from tokenprune.study import verdicts

    role = role or _role(name)
    label = label or (PROXY_BAR if role == "classification" else FINE_GRAINED_BAR)
    k6 = k6_measurement(name)
    c = _candidate(name)
    if k6 is None and c is not None and name == c.name:
        build = "python -m tokenprune models" + (f" --round {c.round}" if c.round > 1 else "")
        return verdicts.Premise(label, False, f"{name}: no K6 measurement of notebook 00 yet, its cached outputs are "
                                              f"not built (`{build}`)", fails_as=verdicts.NOT_TESTABLE)
    if k6 is not None:
        top1, lo, hi, where = k6["top1"], k6["low"], k6["high"], f"notebook 00's K6, {k6['n']} test images"
    else:
        prof, recipe = model_recipes.find_recipe(name)
        if prof == "smoke":  # smoke models are trained where missing (seconds), as the notebooks that use them do
            tp_models.load_base_model(name, train_if_missing=True, progress=False)
        info = checkpoints.verify_checkpoint(*checkpoints.checkpoint_paths(recipe, checkpoints.checkpoint_dir(prof)))
        t = info["test"]
        top1, lo, hi = 100 * t["accuracy"], 100 * t["ci95"][0], 100 * t["ci95"][1]
        where = f"{t['n']} test images"
    bar = plan.BARS[role]
    return verdicts.Premise(label, bool(top1 >= bar),
                            f"{name}: {top1:.2f} % [{lo:.2f}, {hi:.2f}] top-1 ({where}), bar {bar:g} %",
                            limitation=fallback_limitation(name, family))


def proxy_premise(name: str) -> "verdicts.Premise":
    """The model ``name`` is the classification proxy notebook 00 chose by the plan (:data:`PROXY`; a smoke model
    stands for its default model). With no proxy chosen, the premise fails as ``not testable here``: no candidate of
    the pre-registered rounds (:data:`ROUND_FILES`) put pruning in the papers' regime, and what would decide is named
    (notebook 00's rounds table names the candidates not built). On another model than
    the chosen one (an override) it fails as ``inconclusive``: a proxy not shown to be one where pruning matters."""
    from tokenprune.study import verdicts

    key = name.removesuffix("_smoke")
    if PROXY is None:
        return verdicts.Premise(
            PROXY_CHOSEN, False,
            f"measured on {name}: no candidate of {len(ROUND_FILES)} pre-registered rounds met K1-K6; one that does, "
            "or DeiT-S on ImageNet, would decide", fails_as=verdicts.NOT_TESTABLE)
    return verdicts.Premise(PROXY_CHOSEN, key == PROXY, f"measured on {name}, chosen {PROXY}")


def proxy_premises(name: str) -> list["verdicts.Premise"]:
    """The premises of a claim measured on the classification model ``name``: :data:`PROXY_CHOSEN` and
    :data:`PROXY_BAR`, to register on a report (``rep.add_premise``)."""
    return [proxy_premise(name), bar_premise(name, "classification")]
