"""The pre-registered calibration, measured: each candidate's criteria from its cached outputs, and the choice.

:mod:`tokenprune.study.proxy.plan` fixes the criteria, the order and the fallback; this module reads what ``make
models`` measured (:mod:`tokenprune.training.proxy.outputs`, :mod:`tokenprune.training.proxy.finetunes`), turns it
into each criterion's measurement with its 95 % interval (paired bootstrap over the test images; for K5 a
two-stage bootstrap over seeds and images), and applies the plan. Top-1 and costs are in points.
"""
from __future__ import annotations

import copy
import functools
from typing import Any, Optional

import numpy as np
import pandas as pd

from tokenprune.measure import intervals
from tokenprune.measure.macs import analytic_macs
from tokenprune.study.proxy import plan
from tokenprune.training.proxy import finetunes as proxy_finetunes, outputs as proxy_outputs
from tokenprune.training.proxy.candidates import FINETUNE, Candidate

__all__ = ["measurements", "k5", "check_k5", "nearest_tome_r", "calibrate", "table", "criteria_table",
           "candidates_table", "cost_figure",
           "round_status", "rounds_summary", "round_complete", "calibrate_round", "round2_status",
           "round2_complete", "calibrate_round2", "NOT_A_CRITERION", "ROUND_TABLES"]

#: the table of notebook 00's report that holds each pre-registered round's measured candidates (:func:`table`)
ROUND_TABLES = {1: "calibration", 2: "calibration_round2", 3: "calibration_round3"}
#: a criterion that does not apply to a candidate's role, in :func:`table`
NOT_A_CRITERION = "not a criterion of its role"


def _correct(arrays: dict[str, np.ndarray], label: str) -> np.ndarray:
    return (arrays[f"logits/{label}"].argmax(-1) == arrays["labels"]).astype(float)


def _diff(a: np.ndarray, b: np.ndarray, seed: int) -> tuple[float, float, float]:
    d = intervals.paired_bootstrap_diff(a, b, seed=seed)
    return 100 * d.estimate, 100 * d.low, 100 * d.high


def nearest_tome_r(c: Candidate) -> int:
    """The r whose MAC ratio on the candidate's backbone is nearest DeiT-S's at r = 13 (the plan's rule), among
    r = 1 to 8 or, with more tokens, to a twelfth of them."""
    return _nearest_tome_r(c.img_size, c.tokens, range(1, max(9, c.tokens // 12 + 1)))


@functools.lru_cache(maxsize=None)
def _nearest_tome_r(img_size: int, tokens: int, rs: range = range(1, 9)) -> int:
    import timm

    from tokenprune.methods.tome import tome_schedule

    model = timm.create_model("vit_small_patch14_dinov2", pretrained=False, img_size=img_size, num_classes=0)
    base = analytic_macs(model).total
    tome = proxy_outputs.ots_configs(tokens, len(model.blocks))[-1]
    ratio = {}
    for r in rs:
        rates, locs = tome_schedule(r, tokens, len(model.blocks))
        ratio[r] = analytic_macs(tome.with_(keep_rate=rates, locations=locs).apply(copy.deepcopy(model))).total / base
    return min(ratio, key=lambda r: abs(ratio[r] - plan.DEIT_S_MAC_RATIO))


def measurements(c: Candidate, arrays: dict[str, np.ndarray], seed: int = 0) -> dict[str, Any]:
    """K1-K4 and K6's measurements of candidate ``c`` from its off-the-shelf outputs, and the premises'."""
    r, cached_r = nearest_tome_r(c), proxy_outputs.tome_r_of(c)
    if r != cached_r:
        raise ValueError(f"{c.name}: ToMe's r nearest DeiT-S's MAC ratio is {r}, the cache holds r = "
                         f"{cached_r}; rebuild the outputs with `make models`")
    full = _correct(arrays, "unpruned")
    top1 = intervals.bootstrap_ci(full, seed=seed)
    m: dict[str, Any] = {"candidate": c.name, "role": c.role, "tokens": c.tokens, "test_images": int(len(full)),
                         "object_token_share": float(arrays["object_token_share"].mean()),
                         "top1": 100 * top1.estimate, "top1_low": 100 * top1.low, "top1_high": 100 * top1.high}
    for k in proxy_outputs.KEEP_RATES:
        m[f"cost@{k:g}"], m[f"cost@{k:g}_low"], m[f"cost@{k:g}_high"] = _diff(full, _correct(arrays, f"fuse@{k:g}"),
                                                                              seed)
    tome = f"tome@r{cached_r}"
    m["tome_cost"], m["tome_cost_low"], m["tome_cost_high"] = _diff(full, _correct(arrays, tome), seed)
    fuse5, rnd, mink = (_correct(arrays, k) for k in ("fuse@0.5", "random@0.5", "mink@0.5"))
    m["topk-random@0.5"], m["topk-random@0.5_low"], _ = _diff(fuse5, rnd, seed)
    m["random-mink@0.5"], m["random-mink@0.5_low"], _ = _diff(rnd, mink, seed)
    return m


def k5(c: Candidate, arrays: dict[str, np.ndarray], cost: float, seed: int = 0) -> Optional[dict[str, float]]:
    """K5's measurements (the fine-tunes' gain over the same base pruned off the shelf at keep 0.7, paired over
    images, two-stage over seeds and images, and its share of the off-the-shelf cost); from round 3 on, beside it,
    the gain over the control (the same fine-tune unpruned, evaluated at keep 0.7, seed by seed) and the control's
    own top-1 unpruned and at keep 0.7. None without fine-tunes."""
    if c.name not in proxy_finetunes.FINETUNED:
        return None
    runs = [proxy_finetunes.load(c, s)[0] for s in FINETUNE["seeds"]]
    controls = ([proxy_finetunes.load_control(c, s)[0] for s in FINETUNE["seeds"]] if proxy_finetunes.has_control(c)
                else [])
    for run in runs + controls:
        if not np.array_equal(run["labels"], arrays["labels"]):
            raise ValueError(f"{c.name}: a fine-tune was measured on other test images than the off-the-shelf cache")
    a = np.stack([(run["logits"].argmax(-1) == run["labels"]).astype(float) for run in runs])
    b = _correct(arrays, "fuse@0.7")[None]
    d = intervals.seed_image_bootstrap_diff(a, b, seed=seed)
    gain = 100 * d.estimate
    out = {"ft_gain@0.7": gain, "ft_gain@0.7_low": 100 * d.low, "ft_gain@0.7_high": 100 * d.high,
           "ft_share_of_cost": 100 * gain / cost if cost > 0 else float("nan"), "ft_seeds": len(runs)}
    if controls:
        at = {label: np.stack([_correct(run, label) for run in controls]) for label in ("unpruned", "fuse@0.7")}
        over = intervals.seed_image_bootstrap_diff(a, at["fuse@0.7"], seed=seed)
        out.update({"ft_gain_over_control@0.7": 100 * over.estimate,
                    "ft_gain_over_control@0.7_low": 100 * over.low, "ft_gain_over_control@0.7_high": 100 * over.high,
                    "control_top1": 100 * float(at["unpruned"].mean()),
                    "control_top1@0.7": 100 * float(at["fuse@0.7"].mean())})
    return out


def check_k5(rows: list[dict[str, Any]], candidates: tuple[Candidate, ...]) -> None:
    """Refuse to decide (:class:`~tokenprune.study.proxy.plan.K5Missing`) while a K5 that the pre-registered rule
    asks for (:func:`~tokenprune.study.proxy.plan.k5_asked`, over ``rows`` measured in ``candidates`` order) is not
    measured, naming the command that builds its fine-tunes."""
    for role in plan.BARS:
        measured = {r["candidate"]: r for r in rows if r["role"] == role and r.get("built", True)}
        for name in plan.k5_asked(measured, role, candidates):
            if measured[name].get("K5") is None:
                c = next(c for c in candidates if c.name == name)
                raise plan.K5Missing(
                    f"{name}: the pre-registered rule asks for its K5 (it meets every other criterion of its role, or "
                    f"is the fallback's next in line), which is not measured; build its fine-tunes with `python -m "
                    f"tokenprune models --round {c.round} --only {name}` after adding it to finetunes.FINETUNED")


def calibrate(profile: str = "default", seed: int = 0) -> tuple[list[dict[str, Any]], dict[str, tuple]]:
    """Every candidate measured (its caches loaded; a missing one is an error naming ``make models``), judged by the
    plan, and the choice per role: ``(rows, {role: (name, how)})``."""
    rows = []
    for c in plan.CANDIDATES:
        arrays, _ = proxy_outputs.load(c, profile)
        m = measurements(c, arrays, seed)
        m.update(k5(c, arrays, m["cost@0.7"], seed) or {})
        m.update(plan.judge(c, m))
        rows.append(m)
    chosen = {role: plan.choose({r["candidate"]: r for r in rows if r["role"] == role}, role) for role in plan.BARS}
    return rows, chosen


def _measured(c: Candidate, profile: str, seed: int) -> Optional[dict[str, Any]]:
    """Candidate ``c`` measured and judged from its cached outputs, or None when they are not built."""
    from tokenprune.training.checkpoints import CheckpointMissingError

    try:
        arrays, _ = proxy_outputs.load(c, profile)
    except CheckpointMissingError:
        return None
    m = measurements(c, arrays, seed)
    m.update(k5(c, arrays, m["cost@0.7"], seed) or {})
    m.update(plan.judge(c, m))
    return m


def _round(round: int) -> Any:
    """The training layer's module of pre-registered round ``round`` (2 or 3)."""
    import importlib

    if round not in (2, 3):
        raise ValueError(f"round: {round!r} not accepted; accepted: [2, 3]")
    return importlib.import_module(f".round{round}", "tokenprune.training.proxy")


def round_complete(rows: list[dict[str, Any]], role: str, round: int = 2) -> bool:
    """Whether round ``round`` is complete for ``role`` (its ``STOP_AT_FIRST``): its candidates measured in order up
    to the first that meets every criterion, or all of them. A candidate its pre-registration builds only on a GPU
    (``BUILT_ON``) and that is not built ends the round where it stands."""
    mod = _round(round)
    by_name = {r["candidate"]: r for r in rows}
    for c in (c for c in mod.CANDIDATES if c.role == role):
        row = by_name.get(c.name)
        if row is None or not row.get("built"):
            return getattr(mod, "BUILT_ON", {}).get(c.name) == "gpu" and _earlier_built(rows, mod, c)
        if all(row.get(k) is True for k in (cr.id for cr in plan.criteria_of(role))):
            return True
    return True


def _earlier_built(rows: list[dict[str, Any]], mod: Any, c: Candidate) -> bool:
    """Whether every candidate of ``c``'s role before ``c`` in round ``mod`` is built."""
    built = {r["candidate"] for r in rows if r.get("built")}
    earlier = [k for k in mod.CANDIDATES[:mod.CANDIDATES.index(c)] if k.role == c.role]
    return all(k.name in built for k in earlier)


def round2_complete(rows: list[dict[str, Any]], role: str) -> bool:
    """:func:`round_complete` for round 2."""
    return round_complete(rows, role, 2)


def calibrate_round(round: int, prior_rows: list[dict[str, Any]], prior_choice: dict[str, tuple],
                    prior_candidates: tuple[Candidate, ...], profile: str = "default",
                    seed: int = 0) -> tuple[list[dict[str, Any]], dict[str, tuple], dict[str, bool]]:
    """Round ``round``'s candidates measured as round 1's (a candidate not built yet: a row with ``built`` False and
    nothing measured), and the choice over the rounds so far per role (the round's ``CHOICE``):
    :func:`~tokenprune.study.proxy.plan.choose` over ``prior_rows`` (of ``prior_candidates``, in order) then this
    round's once it is complete for the role (:func:`round_complete`), else ``prior_choice``. Refuses
    (:func:`check_k5`) while a K5 the rule asks for is missing. Returns ``(rows, {role: (name, how)},
    {role: complete})``."""
    mod = _round(round)
    rows = []
    for c in mod.CANDIDATES:
        m = _measured(c, profile, seed)
        rows.append({"candidate": c.name, "role": c.role, "tokens": c.tokens, "built": False} if m is None
                    else {**m, "built": True})
    order = tuple(prior_candidates) + tuple(mod.CANDIDATES)
    check_k5(prior_rows + rows, order)
    complete = {role: round_complete(rows, role, round) for role in plan.BARS}
    chosen = {}
    for role in plan.BARS:
        measured = {r["candidate"]: r for r in prior_rows + [r for r in rows if r["built"]] if r["role"] == role}
        chosen[role] = plan.choose(measured, role, order) if complete[role] else prior_choice[role]
    return rows, chosen, complete


def calibrate_round2(rounds1: list[dict[str, Any]], chosen1: dict[str, tuple], profile: str = "default",
                     seed: int = 0) -> tuple[list[dict[str, Any]], dict[str, tuple], dict[str, bool]]:
    """:func:`calibrate_round` for round 2, after round 1's rows ``rounds1`` and choice ``chosen1``."""
    return calibrate_round(2, rounds1, chosen1, plan.CANDIDATES, profile, seed)


def table(rows: list[dict[str, Any]], chosen: Optional[dict[str, tuple]] = None) -> pd.DataFrame:
    """One row per candidate: what was measured, each criterion's outcome (met / missed / not measured /
    :data:`NOT_A_CRITERION`), the fallback's distance from the cost bands (:func:`~tokenprune.study.proxy.plan.
    band_distance`) and, given ``chosen`` (:func:`calibrate`'s), whether the plan chose it and how."""
    df = pd.DataFrame(rows)
    ids = [c.id for c in plan.CRITERIA]
    roles = {c.id: c.roles for c in plan.CRITERIA}
    for k in ids:
        if k not in df:
            df[k] = None
        df[k] = [NOT_A_CRITERION if role not in roles[k] else
                 "not measured" if v is None or v != v else ("met" if v else "missed")
                 for v, role in zip(df[k], df["role"])]
    df["band_distance"] = [plan.band_distance(r) for r in rows]
    if chosen is not None:
        df["chosen"] = [chosen[r["role"]][1] if chosen[r["role"]][0] == r["candidate"] else "" for r in rows]
    head = [c for c in df.columns if c not in ids and c not in ("band_distance", "chosen")]
    return df[head + ids + [c for c in ("band_distance", "chosen") if c in df]]


def _band(low: Optional[float], high: Optional[float]) -> str:
    return f"{'(-inf' if low is None else f'[{low:g}'}, {'inf)' if high is None else f'{high:g}]'}"


def criteria_table() -> pd.DataFrame:
    """The pre-registered criteria as written in the plan: id, statement, what is measured, the band, the interval
    condition, the roles and the anchor."""
    return pd.DataFrame([{"id": c.id, "statement": c.statement, "measure": c.measure,
                          "band": _band(c.low, c.high),
                          "interval_above_0": c.interval_of or "", "roles": ", ".join(c.roles), "anchor": c.anchor}
                         for c in plan.CRITERIA])


def candidates_table(candidates: Optional[tuple[Candidate, ...]] = None) -> pd.DataFrame:
    """The pre-registered candidates in the order tried, every knob of each (default: round 1's, ``plan.CANDIDATES``;
    round 2's: :data:`tokenprune.training.proxy.round2.CANDIDATES`)."""
    import dataclasses

    rows = []
    for i, c in enumerate(plan.CANDIDATES if candidates is None else candidates, 1):
        row = {"order": i, **{k: v for k, v in dataclasses.asdict(c).items() if k != "birds"}, "tokens": c.tokens}
        row["birds"] = ", ".join(f"{k}={v}" for k, v in c.birds)
        rows.append(row)
    return pd.DataFrame(rows)


def round_status(round: int = 2, profile: str = "default") -> pd.DataFrame:
    """Round ``round``'s candidates in build order, each with its planned budget (the round's ``budget()``) and what
    exists of it: its base model (a checkpoint whose SHA-256 its sidecar records) and its off-the-shelf outputs. A
    candidate not built has no measurement and meets no criterion; the round chooses nothing until its candidates are
    built in order."""
    from tokenprune.training import checkpoints

    mod = _round(round)
    rows = []
    for c, planned in zip(mod.CANDIDATES, mod.budget()):
        recipe = mod.candidate_recipe(c)
        pt, meta = checkpoints.checkpoint_paths(recipe, checkpoints.checkpoint_dir(profile))
        try:
            checkpoints.verify_checkpoint(pt, meta)
            built = "built"
        except checkpoints.CheckpointMissingError:
            built = "not built"
        rows.append({**planned, "base_model": built, "recipe_hash": recipe.recipe_hash()})
    return pd.DataFrame(rows)


def rounds_summary(rounds: dict[int, list[dict[str, Any]]],
                   commits: dict[int, Optional[str]]) -> pd.DataFrame:
    """One row per pre-registered round (``rounds``: its rows as :func:`calibrate` and :func:`calibrate_round` give
    them, in candidate order; ``commits``: its pre-registration's commit): the candidates it declared and built, those
    that met every criterion of their role, each other built candidate with the criteria it missed (and those it did not
    measure, in brackets), and those not built."""
    out = []
    for n in sorted(rounds):
        rows = rounds[n]
        built = [r for r in rows if r.get("built", True)]
        ids = {r["candidate"]: [c.id for c in plan.criteria_of(r["role"])] for r in built}
        missed = {r["candidate"]: [k for k in ids[r["candidate"]] if r.get(k) is False] for r in built}
        unmeasured = {r["candidate"]: [k for k in ids[r["candidate"]] if r.get(k) is None] for r in built}
        out.append({"round": n, "preregistration": (commits.get(n) or "")[:12], "declared": len(rows),
                    "built": len(built),
                    "met_every_criterion": ", ".join(k for k in missed if not missed[k] and not unmeasured[k])
                    or "none",
                    "missed": "; ".join(f"{k}: {', '.join(missed[k]) or 'none'}" + (
                        f" (not measured: {', '.join(unmeasured[k])})" if unmeasured[k] else "")
                        for k in missed if missed[k] or unmeasured[k]),
                    "not_built": ", ".join(r["candidate"] for r in rows if not r.get("built", True))})
    return pd.DataFrame(out)


def round2_status(profile: str = "default") -> pd.DataFrame:
    """:func:`round_status` for round 2."""
    return round_status(2, profile)


def cost_figure(rows: list[dict[str, Any]]) -> Any:
    """Each candidate's off-the-shelf cost of EViT with fusion (points of top-1, 95 % paired interval) against the
    keep rate, with the bands K2 (keep 0.7) and K3 (keep 0.5) drawn."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.8, 4.2))
    ks = sorted(proxy_outputs.KEEP_RATES)
    for row in rows:
        c = np.array([row[f"cost@{k:g}"] for k in ks])
        lo = c - np.array([row[f"cost@{k:g}_low"] for k in ks])
        hi = np.array([row[f"cost@{k:g}_high"] for k in ks]) - c
        ax.errorbar(ks, c, yerr=[lo, hi], marker="o", capsize=3, linestyle="--" if row["role"] != "classification"
                    else "-", label=f"{row['candidate']} ({row['role']}, top-1 {row['top1']:.1f} %)")
    bands = {c.id: c for c in plan.CRITERIA}
    for cid, k in (("K2", 0.7), ("K3", 0.5)):
        ax.fill_between([k - 0.03, k + 0.03], bands[cid].low, bands[cid].high, color="green", alpha=0.25,
                        label="bands K2 / K3" if cid == "K2" else None)
    ax.set_xlabel("keep rate (blocks 4/7/10, fused inattentive token)")
    ax.set_ylabel("top-1 cost of pruning off the shelf (points)")
    ax.set_yscale("log")
    ax.invert_xaxis()
    ax.legend(fontsize=7)
    ax.set_title("off-the-shelf cost of EViT per candidate, against the pre-registered bands")
    fig.tight_layout()
    return fig

