"""§1-3 of notebook 01: EViT's efficiency at the paper's scale (DeiT-S and DeiT-B at 224 px): token counts read off
the patched model, analytic MACs against the printed figures, parameter counts, Table 6's and Table 7's analytic
halves, and the throughput on this machine."""
from __future__ import annotations

import time
from typing import Any, Optional, Sequence

import pandas as pd
import timm
import torch

from tokenprune.core.patch import patch, prune_state
from tokenprune.core.schedule import EVIT_LOCATIONS
from tokenprune.measure import macs as flops
from tokenprune.measure import throughput as bench
from tokenprune.study import verdicts
from tokenprune.study.claims import gate_by_premises, paper_number, unmeasured
from tokenprune.study.evit.filing import file
from tokenprune.study.evit.claims import (CLAIMS, ORACLE_MAC_TOLERANCE_PP, TABLE6_CONFIG, TABLE6_KEEP_RATE,
                                          TABLE6_LOCATIONS, TIMING_RESOLVES, TIMING_ROUNDS, speedup_rule)
from tokenprune.study.paper_numbers import EVIT
from tokenprune.study.tolerances import SAME_COST_GMACS
from tokenprune.utils.environment import hardware

__all__ = ["SHORT", "observed_stages", "token_claims", "deit_gmacs_table", "printed_macs_claims", "parameter_counts",
           "no_parameters_claim", "fusion_overhead_claim", "table6_premise", "oracle_init_macs_claim",
           "dynamicvit_claims", "analytic_claims", "throughput_table", "rounds_premise", "speedup_premises",
           "speedup_decision", "speed_claim"]

SHORT = {"deit_small_patch16_224": "deit_s", "deit_base_patch16_224": "deit_b"}
_DEIT_S = EVIT["deit_small_patch16_224"]


def observed_stages(reducer: str, keep_rate: float = 0.7) -> list[int]:
    """Patch tokens entering block 1 and leaving blocks 4/7/10 of a patched timm DeiT-S, read off one forward pass
    of a random image (``prune_state(model).token_counts``)."""
    m = patch(timm.create_model("deit_small_patch16_224").eval(), keep_rate=keep_rate, reducer=reducer)
    with torch.inference_mode():
        m(torch.randn(1, 3, 224, 224))
    counts = prune_state(m).token_counts          # tokens leaving each block, [CLS] included
    return [196] + [counts[loc - 1] - 1 for loc in prune_state(m).schedule.locations]


def token_claims(rep: Any) -> pd.DataFrame:
    """File the token counts of DeiT-S at keep 0.7, fused and dropped, against the official code's; returns them."""
    decl = CLAIMS["evit.tokens.deit_s.keep0.7.{reducer}"]
    stages = {}
    for red in ("fuse_attention", "drop"):
        stages[red] = observed_stages(red)
        want = _DEIT_S["token_counts_keep0.7"][red]
        file(rep, decl, decl.rule(want).decide(stages[red]),
             keys={"reducer": red, "with_": "with" if red == "fuse_attention" else "without",
                   "counts": " -> ".join(map(str, want))},
             paper_value=" -> ".join(map(str, want)), our_value=" -> ".join(map(str, stages[red])),
             why="counted on a patched timm DeiT-S forward pass")
    return pd.DataFrame(stages, index=["input", "after block 4", "after block 7", "after block 10"])


def _paper_gmacs(row: Any) -> Optional[float]:
    p = EVIT[row.model]
    if row.keep_rate == 1.0:
        return p["baseline"].get("gmacs")
    return p.get("keep", {}).get(row.keep_rate, {}).get("gmacs") if row.reducer == "fuse_attention" else None


def deit_gmacs_table(keep_rates: Sequence[float], measure: bool) -> pd.DataFrame:
    """DeiT-S and DeiT-B at 224 px, fused and dropped: token counts, analytic GMACs (and, with ``measure``, the
    FlopCounterMode count, which must agree within 1 %) and the paper's GMACs where it prints them."""
    rows = []
    for model_name in ("deit_small_patch16_224", "deit_base_patch16_224"):
        for red in ("fuse_attention", "drop"):
            rows += flops.mac_table(model_name, keep_rates, reducer=red, measure=measure)
    macs = pd.DataFrame(rows)
    macs["paper_gmacs"] = macs.apply(_paper_gmacs, axis=1)
    if measure:
        assert (macs.rel_diff.abs() < 0.01).all(), "analytic and measured MACs disagree by more than 1%"
    return macs


def printed_macs_claims(rep: Any, macs: pd.DataFrame) -> None:
    """File every printed GMACs figure (fused rows of :func:`deit_gmacs_table`) against our analytic count."""
    for row in macs.itertuples():
        if pd.isna(row.paper_gmacs) or row.reducer != "fuse_attention":
            continue
        decl = CLAIMS[f"evit.macs.{SHORT[row.model]}.keep{{keep:g}}"]
        file(rep, decl, decl.rule(row.paper_gmacs).decide(row.gmacs),
             keys={"keep": row.keep_rate, "gmacs": row.paper_gmacs}, paper_value=row.paper_gmacs,
             our_value=round(row.gmacs, 3), why="analytic MACs at 224 px, batch 1, equal to FlopCounterMode's")


def parameter_counts(model: torch.nn.Module) -> dict:
    """Parameters (elements and tensors) and buffers (elements and tensors) of ``model``, and their names."""
    params, buffers = dict(model.named_parameters()), dict(model.named_buffers())
    return {"parameters": sum(p.numel() for p in params.values()), "parameter_tensors": len(params),
            "buffer_elements": sum(b.numel() for b in buffers.values()), "buffers": len(buffers),
            "names": sorted(params) + sorted(buffers)}


def no_parameters_claim(rep: Any, model: Optional[torch.nn.Module] = None) -> dict:
    """File "EViT brings no additional parameters": the parameter and buffer counts of ``model`` (default: timm's
    DeiT-S) before and after :func:`tokenprune.patch` at keep 0.7, and whether ``patch`` registered any new
    parameter or buffer name (a deterministic check)."""
    m = model if model is not None else timm.create_model("deit_small_patch16_224")
    arch = getattr(m, "default_cfg", {}).get("architecture") or type(m).__name__
    before = parameter_counts(m)
    patch(m, keep_rate=0.7)
    after = parameter_counts(m)
    new = sorted(set(after["names"]) - set(before["names"]))
    want = {k: v for k, v in before.items() if k != "names"} | {"new_names": []}
    got = {k: v for k, v in after.items() if k != "names"} | {"new_names": new}
    decl = CLAIMS["evit.params.no_additional"]
    file(rep, decl, decl.rule(want).decide(got), paper_value=0,
         our_value=int(after["parameters"] - before["parameters"]),
         why=f"deterministic count on {arch}", details={"before": want, "after": got})
    return {"before": want, "after": got}


def fusion_overhead_claim(rep: Any, macs: pd.DataFrame, model_name: str = "deit_small_patch16_224") -> pd.DataFrame:
    """File "inattentive-token fusion adds no computational overhead": fused and dropped analytic GMACs at every keep
    rate of Table 2 (``macs``: :func:`deit_gmacs_table`) differ by at most
    :data:`~tokenprune.study.tolerances.SAME_COST_GMACS` (the study's "same computational cost") at every rate; the
    largest difference is the claim's value, the relative excess per rate is reported beside it."""
    t = macs[(macs.model == model_name) & (macs.keep_rate < 1.0)]
    t = t[t.keep_rate.isin(list(_DEIT_S["keep"]))]
    piv = t.pivot_table(index="keep_rate", columns="reducer", values="gmacs").sort_index(ascending=False)
    diff = piv["fuse_attention"] - piv["drop"]
    excess = piv["fuse_attention"] / piv["drop"] - 1
    same = diff.abs() <= SAME_COST_GMACS
    worst_k = float(diff.abs().idxmax())
    differ = [f"{k:g} ({diff[k]:+.3f})" for k in piv.index[~same.to_numpy()]]
    decl = CLAIMS[f"evit.t2.fusion_no_overhead.{SHORT.get(model_name, model_name)}"]
    decision = decl.rule().decide(bool(same.all()),
                                  f"at keep {', '.join(differ)} fused and dropped GMACs differ by more than "
                                  f"{SAME_COST_GMACS:g}; the fused token is one more token in every later block"
                                  if differ else "")
    file(rep, decl, decision, paper_value=0.0, our_value=round(float(diff.abs().max()), 4),
         why=f"at keep {worst_k:g} fusion costs {diff[worst_k]:+.3f} GMACs ({excess[worst_k]:+.2%})",
         details={"gmacs fused vs dropped": {f"{k:g}": [round(float(piv.loc[k, "fuse_attention"]), 3),
                                                       round(float(piv.loc[k, "drop"]), 3)] for k in piv.index},
                  "fused / dropped - 1": {f"{k:g}": round(float(v), 5) for k, v in excess.items()},
                  "same cost": f"within {SAME_COST_GMACS:g} GMACs (tokenprune.study.tolerances.SAME_COST_GMACS)"})
    out = excess.rename("fused_over_dropped_minus_1").reset_index()
    out["gmacs_difference"] = diff.to_numpy()
    out["same_cost"] = same.to_numpy()
    return out


def table6_premise(keep_rate: Optional[float] = TABLE6_KEEP_RATE,
                   locations: Optional[Sequence[int]] = TABLE6_LOCATIONS) -> verdicts.Premise:
    """The declared premise :data:`~tokenprune.study.evit.claims.TABLE6_CONFIG` of Table 6's MAC claim: it holds when
    Table 6's keep rate and locations are both given (by default the study's record of them, None where our sources
    lack them)."""
    missing = [name for name, v in (("keep rate", keep_rate), ("locations", locations)) if v is None]
    if missing:
        return verdicts.Premise(TABLE6_CONFIG, False, f"not in our sources: {', '.join(missing)}")
    return verdicts.Premise(TABLE6_CONFIG, True, f"keep {keep_rate:g} at blocks {'/'.join(map(str, locations))}")


def oracle_init_macs_claim(rep: Any, macs: pd.DataFrame, tolerance_pp: float = ORACLE_MAC_TOLERANCE_PP,
                           keep_rate: Optional[float] = TABLE6_KEEP_RATE,
                           locations: Optional[Sequence[int]] = TABLE6_LOCATIONS) -> dict:
    """Table 6's MAC half ("reducing its computation cost by 36 %"): DeiT-S's analytic MAC reduction at Table 6's
    ``keep_rate`` and ``locations`` (fused, 224 px; read off ``macs`` at blocks 4/7/10, counted otherwise) within
    ``tolerance_pp`` points of it. Where our sources do not give them (:func:`table6_premise`), the keep rate of
    Table 2 (blocks 4/7/10) nearest -36 % stands in and the premise makes the claim inconclusive, the rule's own
    outcome kept in the details."""
    decl = CLAIMS["evit.t6.oracle_init_mac_reduction"]
    want = 100 * paper_number(decl.paper_number)
    premise = table6_premise(keep_rate, locations)
    t = macs[(macs.model == "deit_small_patch16_224") & (macs.reducer == "fuse_attention")].set_index("keep_rate")
    base = float(t.loc[1.0, "gmacs"])
    red = {float(k): 100 * (1 - float(t.loc[k, "gmacs"]) / base) for k in sorted(_DEIT_S["keep"], reverse=True)}
    k_best = min(red, key=lambda k: abs(red[k] - want))
    m = patch(timm.create_model("deit_small_patch16_224"), keep_rate=0.7)
    k_need = flops.keep_rate_for_macs(m, (1 - want / 100) * base * 1e9)
    printed = 100 * (1 - _DEIT_S["keep"][0.7]["gmacs"] / _DEIT_S["baseline"]["gmacs"])
    if premise.holds:
        locs = tuple(int(b) for b in locations)
        if locs == tuple(EVIT_LOCATIONS) and float(keep_rate) in t.index:
            g = float(t.loc[float(keep_rate), "gmacs"])
        else:
            g = flops.mac_table("deit_small_patch16_224", [float(keep_rate)], locations=locs, measure=False)[0]["gmacs"]
        value, where = 100 * (1 - g / base), f"Table 6's keep {keep_rate:g} at blocks {'/'.join(map(str, locs))}"
        why_not = f"{where} gives -{value:.1f} %"
    else:
        value, where = red[k_best], f"keep {k_best:g} of Table 2"
        why_not = (f"no keep rate of Table 2 gives -{want:.0f} %: the nearest, keep {k_best:g}, gives "
                   f"-{red[k_best]:.1f} % (the printed 4.6 -> 3.0 GMACs of keep 0.7: -{printed:.1f} %)")
    decision = decl.rule().decide(abs(value - want) <= tolerance_pp, why_not)
    file(rep, decl, decision, paper_value=want, our_value=round(value, 2), premises={TABLE6_CONFIG: premise},
         why=f"{where}: -{value:.1f} %; -{want:.0f} % needs keep {k_need:.3f} at 4/7/10",
         details={"reduction per keep rate of Table 2 (%)": {f"{k:g}": round(v, 2) for k, v in red.items()},
                  "Table 6's keep rate and locations": premise.detail})
    return {"reductions": red, "nearest": k_best, "keep_needed": k_need, "reduction": value, "premise": premise}


def dynamicvit_claims(rep: Any, macs: pd.DataFrame, keep: float = 0.7) -> pd.DataFrame:
    """Table 7's analytic half on DeiT-S at 224 px: EViT (fused, nothing added) against a DynamicViT-shaped model
    (dropped tokens plus a DynamicViT-sized predictor, :class:`tokenprune.methods.learned.PredictorHead`, at each
    of the locations 4/7/10): parameters (EViT fewer) and MACs at ``keep`` ("the same computational cost": within
    :data:`~tokenprune.study.tolerances.SAME_COST_GMACS`). Its accuracy needs training (§4)."""
    from tokenprune.methods import learned

    t = macs[(macs.model == "deit_small_patch16_224") & (macs.keep_rate == keep)].set_index("reducer")
    entering = [int(n) for n in t.loc["drop", "tokens"].split(" -> ")[:3]]   # patch tokens entering 4, 7, 10
    m = timm.create_model("deit_small_patch16_224")
    heads = [learned.PredictorHead(m.embed_dim) for _ in entering]
    # DynamicViT: the unpatched DeiT-S plus its predictors; EViT: DeiT-S as tokenprune.patch leaves it
    dyn_params = parameter_counts(m)["parameters"] + sum(parameter_counts(h)["parameters"] for h in heads)
    evit_params = parameter_counts(patch(m, keep_rate=keep))["parameters"]
    head_g = sum(learned.head_macs(h, n) for h, n in zip(heads, entering)) / 1e9
    evit_g, dyn_g = float(t.loc["fuse_attention", "gmacs"]), float(t.loc["drop", "gmacs"]) + head_g
    shape = {"DynamicViT-shaped": "tokenprune.methods.learned.PredictorHead (DynamicViT's PredictorLG, one score per "
                                  "token instead of two log-probabilities) at blocks 4/7/10 of DeiT-S, tokens dropped"}
    decl = CLAIMS["evit.t7.fewer_params_than_dynamicvit"]
    file(rep, decl, decl.rule().decide(evit_params < dyn_params,
                                     f"EViT {evit_params} >= DynamicViT-shaped {dyn_params}"),
         our_value=int(dyn_params - evit_params),
         why=f"counted: EViT {evit_params}, DynamicViT-shaped {dyn_params}; Table 7's counts are not in our "
             "sources",
         details=shape)
    decl = CLAIMS["evit.t7.same_macs_as_dynamicvit.keep{keep:g}"]
    file(rep, decl, decl.rule().decide(abs(evit_g - dyn_g) <= SAME_COST_GMACS,
                                     f"EViT {evit_g:.3f} vs DynamicViT-shaped {dyn_g:.3f} GMACs"),
         keys={"keep": keep}, our_value=round(evit_g - dyn_g, 4),
         why=f"EViT {evit_g:.3f} GMACs (fused token included), DynamicViT-shaped {dyn_g:.3f} (predictors "
             f"{head_g:.3f})", details={**shape, "tokens entering 4/7/10": entering})
    return pd.DataFrame([{"model": "EViT", "keep_rate": keep, "parameters": evit_params, "gmacs": evit_g},
                         {"model": "DynamicViT-shaped", "keep_rate": keep, "parameters": dyn_params, "gmacs": dyn_g}])


def analytic_claims(rep: Any, macs: pd.DataFrame) -> pd.DataFrame:
    """The claims decided by counting at the paper's scale: the printed GMACs, no additional parameters, fusion's
    MAC overhead, Table 6's MAC reduction and Table 7's parameters and MACs. Returns Table 7's analytic comparison."""
    printed_macs_claims(rep, macs)
    no_parameters_claim(rep)
    fusion_overhead_claim(rep, macs)
    oracle_init_macs_claim(rep, macs)
    return dynamicvit_claims(rep, macs)


def throughput_table(cfg: Any, device: str) -> pd.DataFrame:
    """Images/s of each of ``cfg.bench_models`` at its keep rates (interleaved rounds), the speedup over keep 1.0
    with a bootstrap interval over the per-round ratios, next to the MAC ratio and the paper's A100 images/s."""
    speed_rows = []
    for model_name in cfg.bench_models:
        models, model_macs = {}, {}
        deit_b = model_name == "deit_base_patch16_224"
        keep_rates_m = cfg.bench_keep_rates_deit_b if deit_b else cfg.bench_keep_rates
        for r in keep_rates_m:
            m = timm.create_model(model_name)
            if r < 1.0:
                patch(m, keep_rate=r)
            models[f"keep={r:g}"] = m
            model_macs[f"keep={r:g}"] = flops.analytic_macs(m).total
        t0 = time.perf_counter()
        res = bench.benchmark(models, batch=cfg.batch_deit_b if deit_b else cfg.batch, img_size=224, dtype=cfg.dtype,
                              device=device, warmup=cfg.warmup, rounds=cfg.bench_rounds, iters_per_round=1,
                              seed=cfg.seed)
        for row, r in zip(bench.speedup_table(res, model_macs, seed=cfg.seed), keep_rates_m):
            paper_speed = EVIT[model_name].get("keep", {}).get(r, {}).get("img_per_s")
            speed_rows.append({"model": model_name, "keep_rate": r, "gmacs": model_macs[row["config"]] / 1e9,
                               "paper_img_per_s_A100": paper_speed, **row})
        print(f"{model_name}: {time.perf_counter() - t0:.0f} s")
    return pd.DataFrame(speed_rows)


def rounds_premise(rounds: int) -> verdicts.Premise:
    """The declared premise :data:`~tokenprune.study.evit.claims.TIMING_ROUNDS` of a timed claim: at least 3
    interleaved rounds (fewer give no interval)."""
    return verdicts.Premise(TIMING_ROUNDS, bool(rounds >= 3), f"{rounds} round(s)")


def speedup_premises(paper_speedup: float, estimate: float, low: float, high: float, rounds: int,
                     rule: Optional[verdicts.Magnitude] = None) -> dict[str, verdicts.Premise]:
    """The declared premises of a speedup claim, by name: at least 3 interleaved rounds, and an interval no wider than
    the rule's tolerance band (a noisier timing cannot tell the paper's ratio from one a tolerance away, so it is
    inconclusive)."""
    rule = rule or speedup_rule(paper_speedup)
    width = high - low
    resolves = verdicts.Premise(TIMING_RESOLVES, bool(width <= 2 * rule.tolerance),
                                f"interval {verdicts.fmt_interval(estimate, low, high, nd=3, signed=False)} is "
                                f"{width:.3f} wide, the band {2 * rule.tolerance:.3f}")
    return {TIMING_RESOLVES: resolves, TIMING_ROUNDS: rounds_premise(rounds)}


def speedup_decision(paper_speedup: float, estimate: float, low: float, high: float, rounds: int,
                     rule: Optional[verdicts.Magnitude] = None) -> verdicts.Decision:
    """A speedup claim's verdict: ``rule`` (default :func:`~tokenprune.study.evit.claims.speedup_rule` of the paper's
    ratio) gated by :func:`speedup_premises`, in the order a filed claim's declaration gives them."""
    rule = rule or speedup_rule(paper_speedup)
    premises = speedup_premises(paper_speedup, estimate, low, high, rounds, rule)
    declared = CLAIMS["evit.speedup.deit_s.keep{keep:g}"].premises
    return gate_by_premises(rule.decide(estimate, low, high), [premises[name] for name in declared])


def speed_claim(rep: Any, speed: pd.DataFrame, model_name: str, keep: float) -> None:
    """File the claim "EViT at ``keep`` is the paper's ratio as fast as the unpruned ``model_name``" (timed, decided
    by its rule, gated by :func:`speedup_premises`; not testable where the profile does not time that keep rate)."""
    decl = CLAIMS[f"evit.speedup.{SHORT[model_name]}.keep{{keep:g}}"]
    keys = {"keep": keep}
    sel = speed[(speed.model == model_name) & (speed.keep_rate == keep)]
    if sel.empty:
        untimed = f"profile {rep.profile!r} does not time {model_name} at keep {keep:g}"
        file(rep, decl, verdicts.not_testable(untimed), keys=keys, premises=unmeasured(decl, untimed))
        return
    row = sel.iloc[0]
    paper = paper_number(decl.paper_number, keys)
    rule = decl.rule(paper)
    premises = speedup_premises(paper, row.speedup, row.speedup_low, row.speedup_high, int(row["rounds"]), rule)
    file(rep, decl, rule.decide(row.speedup, row.speedup_low, row.speedup_high), premises=premises, keys=keys,
         paper_value=paper, timed=True, load=bench.load_from_row(row),
         our_value=round(row.speedup, 3), ci=[round(row.speedup_low, 3), round(row.speedup_high, 3)],
         why=f"median images/s over interleaved rounds on {row['device']}, batch {row['batch']}, {row['dtype']}; "
             "the paper used an A100",
         details={"cpu": hardware()["cpu_model"], "interval": "bootstrap over per-round ratios"})
