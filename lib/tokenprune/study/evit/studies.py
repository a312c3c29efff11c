"""§7-11 of notebook 01, the appendix studies: mask quality (Table 15), reorganisation locations at matched MACs
(Table 13), tokens-to-tokens attention (Table 10), an oracle's attention from block 1 (Table 14) and higher
resolution at equal MACs (Table 5)."""
from __future__ import annotations

import contextlib
import copy
import time
from dataclasses import dataclass
from typing import Any, Optional, Sequence

import pandas as pd
import timm
import torch

from tokenprune.core.config import PruneConfig
from tokenprune.core.patch import patch
from tokenprune.data import pretrained
from tokenprune.measure import evaluation
from tokenprune.measure import macs as flops
from tokenprune.measure import throughput as bench
from tokenprune.measure.power import Design
from tokenprune.methods import oracle  # registers the oracle_attention scorer
from tokenprune.study import cached_sweeps, verdicts
from tokenprune.study.proxy import chosen
from tokenprune.study.proxy.chosen import PROXY_CHOSEN
from tokenprune.study.claims import paper_number
from tokenprune.study.evit.filing import file
from tokenprune.study.evit.claims import CLAIMS, HIRES_USABLE, ORACLE_GUIDES, TIMING_ROUNDS
from tokenprune.study.evit.efficiency import rounds_premise
from tokenprune.study.proxy.audit_model import Comparison, EvaluatedModel, Gated, gated, worst_design
from tokenprune.training import sources

__all__ = ["MaskQuality", "TokensToTokens", "all_parts", "mask_quality", "location_configs", "locations_inputs",
           "locations_at_matched_macs", "tokens_to_tokens", "oracle_premise", "oracle_at_block1", "higher_resolution"]


@dataclass
class MaskQuality:
    """The keep rates compared and the table of top-k, random and min-k selection."""

    keeps: list
    table: pd.DataFrame


@dataclass
class TokensToTokens:
    """Tokens-to-tokens against [CLS] attention: the accuracy table and the throughput table."""

    accuracy: pd.DataFrame
    speed: pd.DataFrame


def _better(c: Comparison) -> verdicts.Decision:
    return verdicts.Direction(">", test=True).decide(c.diff, c.low, c.high, p=c.p)


def _equivalent(c: Comparison, margin_pp: float) -> verdicts.Decision:
    return verdicts.Equivalence(margin_pp).decide(c.diff, c.low, c.high, c.low90, c.high90)


def all_parts(rule: Any, parts: Sequence[tuple[str, verdicts.Decision]], effect: Optional[float] = None,
              designs: Sequence[Design] = ()) -> tuple[Gated, dict]:
    """A claim made of parts, each decided by its own rule, combined by ``rule`` (the declaration's
    :func:`~tokenprune.study.evit.claims.parts_rule`): it holds when every part holds, fails when any part fails,
    else it is inconclusive. Given ``effect`` and the parts' ``designs``, gated by detectability on the part whose
    design binds (the largest MDE at full scale). Returns the gated decision and each part's verdict and reason."""
    names = [n for n, _ in parts]
    values = {f"{n} reproduced": d.verdict == "reproduced" for n, d in parts}
    values.update({f"{n} not reproduced": d.verdict == "not reproduced" for n, d in parts})
    d = rule(names).decide(values)
    part_rules = " / ".join(dict.fromkeys(p.rule for _, p in parts))
    decision = verdicts.Decision(d.verdict, d.why, f"{d.rule}; each part: {part_rules}")
    g = gated(decision, effect, worst_design(designs)) if effect is not None and designs else Gated(decision, None)
    return g, {n: {"verdict": p.verdict, "why": p.why} for n, p in parts}


def mask_quality(rep: Any, model: EvaluatedModel, cfg: Any, preds: dict, sweep: pd.DataFrame) -> MaskQuality:
    """Top-k ([CLS] attention), random and min-k selection, all fused, off the shelf at ``cfg.side_keep_rates``
    (those in the sweep); adds their predictions to ``preds`` and files the claim top-k > random > min-k."""
    keeps = [k for k in cfg.side_keep_rates if k in cfg.sweep_keep_rates]
    configs = [PruneConfig(keep_rate=k, scorer=s, name=f"{n}@{k:g}") for k in keeps
               for s, n in (("random", "random"), ("inverse:cls_attention", "mink"))]
    _, mq_preds = evaluation.prune_sweep(model.base, model.X, model.y, configs, seed=model.seed, **model.sweep_kw)
    preds.update({k: v for k, v in mq_preds.items() if k != "unpruned"})
    gm = sweep.set_index("config")
    rows = [{"keep_rate": k, "mask": n, **model.ci_row(preds[lab]), "gmacs": gm.loc[f"fuse@{k:g}", "gmacs"]}
            for k in keeps for n, lab in (("topk", f"fuse@{k:g}"), ("random", f"random@{k:g}"),
                                          ("mink", f"mink@{k:g}"))]
    margin = model.margin_pp  # the effect in dispute: Table 15's numbers are not in our sources; the margin
    decl = CLAIMS["evit.t15.topk_random_mink.keep{keep:g}"]
    for k in keeps:
        top, rnd, mink = preds[f"fuse@{k:g}"], preds[f"random@{k:g}"], preds[f"mink@{k:g}"]
        a, b = model.compare(top, rnd), model.compare(rnd, mink)
        g, parts = all_parts(decl.rule, [("topk - random", _better(a)), ("random - mink", _better(b))], margin,
                             [model.design(top, rnd), model.design(rnd, mink)])
        file(rep, decl, g.decision, keys={"keep": k}, our_value=f"{a.diff:+.2f} / {b.diff:+.2f}",
             design=g.design, why=f"off the shelf, {model.name}, {len(model.y)} images",
             details={"parts": parts, "effect in dispute": f"the margin {margin:g} points"})
    return MaskQuality(keeps, pd.DataFrame(rows))


def location_configs(base: torch.nn.Module) -> list[PruneConfig]:
    """Locations (s, s+3, s+6), s = 1..5, each at the keep rate whose MACs match (4, 7, 10) at keep 0.7 (EViT
    Table 13's protocol); ``base`` is left patched unpruned."""
    PruneConfig(keep_rate=0.7).apply(base)
    target_macs = flops.analytic_macs(base).total
    out = []
    for locs in [tuple(s + 3 * i for i in range(3)) for s in range(1, 6)]:
        PruneConfig(locations=locs).apply(base)
        k = round(flops.keep_rate_for_macs(base, target_macs), 4) if locs != (4, 7, 10) else 0.7
        out.append(PruneConfig(keep_rate=k, locations=locs, name=f"loc{'-'.join(map(str, locs))}@{k:g}"))
    evaluation.UNPRUNED.apply(base)
    return out


def locations_inputs(cfg: Any = None, model: Optional[EvaluatedModel] = None) -> cached_sweeps.SweepInputs:
    """The locations sweep's model, images and configurations (``cfg``: the notebook's settings, None: the
    ``default`` profile's, as ``make models`` caches it; ``model``: the audit model on its evaluation images, None:
    loaded on the CPU): :func:`location_configs`."""
    from tokenprune.study import params
    from tokenprune.study.evit.experiments import load_audit_model

    cfg = params.setup("01_evit", "default") if cfg is None else cfg
    model = load_audit_model(cfg, "cpu") if model is None else model
    return cached_sweeps.SweepInputs(model.base, model.info, model.X, model.y, location_configs(model.base),
                                     model.sweep_kw["batch"], model.sweep_kw["dtype"], model.seed, raw=model.x_raw)


def locations_at_matched_macs(rep: Any, model: EvaluatedModel, cfg: Any) -> pd.DataFrame:
    """Locations (s, s+3, s+6), s = 1..5, each at the keep rate whose MACs match (4, 7, 10) at keep 0.7; files the
    claims that shallow sets hurt and deeper ones are equivalent."""
    inp = locations_inputs(cfg, model)
    loc_cfgs = inp.configs
    loc_preds = cached_sweeps.cached_sweep("evit_locations", inp, cfg.profile)
    loc_table = evaluation.sweep_table(model.base, loc_preds, loc_cfgs, seed=model.seed)
    ref = loc_preds[loc_cfgs[3].label]
    rows = []
    for c_, row in zip([None] + loc_cfgs, loc_table.itertuples()):
        d = model.compare(loc_preds[c_.label], ref) if c_ is not None else None
        rows.append({"config": row.config, "locations": row.locations, "keep_rate": row.keep_rate, "gmacs": row.gmacs,
                     **model.ci_row(loc_preds[row.config] if c_ is not None else model.full),
                     "minus_4_7_10_pp": None if d is None else d.diff, "low_pp": None if d is None else d.low,
                     "high_pp": None if d is None else d.high, "mcnemar_p": None if d is None else d.p})

    margin = cfg.margin_pp  # the effect in dispute of both claims: Table 13's numbers are not in our sources
    about = f"off the shelf, {model.name}, {len(model.y)} images"
    shallow = [model.compare(ref, loc_preds[c_.label]) for c_ in loc_cfgs[:2]]   # (4,7,10) minus (1,4,7), (2,5,8)
    decl = CLAIMS["evit.t13.shallow_locations_hurt"]
    g, parts = all_parts(decl.rule, [(c_.label, _better(d)) for c_, d in zip(loc_cfgs[:2], shallow)], margin,
                         [model.design(ref, loc_preds[c_.label]) for c_ in loc_cfgs[:2]])
    file(rep, decl, g.decision, our_value=" / ".join(f"{c_.diff:+.2f}" for c_ in shallow), design=g.design,
         why=about, details={"parts": parts, "effect in dispute": f"the margin {margin:g} points"})
    deep_cfgs = (loc_cfgs[2], loc_cfgs[4])
    deep = [model.compare(loc_preds[c_.label], ref) for c_ in deep_cfgs]
    decl = CLAIMS["evit.t13.deeper_locations_similar"]
    g, parts = all_parts(decl.rule, [(c_.label, _equivalent(d, margin)) for c_, d in zip(deep_cfgs, deep)], margin,
                         [model.design(loc_preds[c_.label], ref) for c_ in deep_cfgs])
    file(rep, decl, g.decision, our_value=" / ".join(f"{c_.diff:+.2f}" for c_ in deep), design=g.design,
         why=about, details={"parts": parts, "effect in dispute": f"the equivalence margin {margin:g} points"})
    return pd.DataFrame(rows)


def _t2t_speed(model: EvaluatedModel, cfg: Any) -> pd.DataFrame:
    smoke = cfg.profile == "smoke"
    speed_rows = []
    for label, make, size, bsz in (
            (cfg.t2t_bench_model, lambda: timm.create_model(cfg.t2t_bench_model), 224, cfg.t2t_bench_batch),
            (model.name, lambda: copy.deepcopy(model.base), model.img_size, cfg.small_bench_batch)):
        ms, macs_ = {}, {}
        for sc in ("cls_attention", "tokens_to_tokens"):
            m = make()
            patch(m, keep_rate=0.7, scorer=sc)
            for blk in m.blocks:
                blk.attn.fused_attn = True  # timm's default kernel; train() may have switched it off
            ms[sc], macs_[sc] = m, flops.analytic_macs(m).total
        in_ch = ms["cls_attention"].patch_embed.proj.in_channels
        res = bench.benchmark(ms, batch=bsz, img_size=size, in_chans=in_ch, dtype="fp32", device="cpu",
                              warmup=1 if not smoke else 0, rounds=cfg.t2t_bench_rounds if label == cfg.t2t_bench_model
                              else cfg.small_bench_rounds, iters_per_round=1, seed=cfg.seed)
        for row in bench.speedup_table(res, macs_, seed=cfg.seed):
            speed_rows.append({"model": label, **row, "gmacs": macs_[row["config"]] / 1e9})
    return pd.DataFrame(speed_rows)


def tokens_to_tokens(rep: Any, model: EvaluatedModel, cfg: Any, preds: dict, keeps: Sequence[float]) -> TokensToTokens:
    """Tokens-to-tokens against [CLS] attention: accuracy off the shelf at ``keeps`` (equivalence claims; adds the
    predictions to ``preds``) and throughput side by side on ``cfg.t2t_bench_model`` and ``model`` (the timed claim
    that t2t is slower)."""
    configs = [PruneConfig(keep_rate=k, scorer="tokens_to_tokens", name=f"t2t@{k:g}") for k in keeps]
    _, t2t_preds = evaluation.prune_sweep(model.base, model.X, model.y, configs, seed=model.seed, **model.sweep_kw)
    preds.update({k: v for k, v in t2t_preds.items() if k != "unpruned"})
    acc_rows = []
    decl = CLAIMS["evit.t10.t2t_comparable.keep{keep:g}"]
    for k in keeps:
        t2t, cls_ = preds[f"t2t@{k:g}"], preds[f"fuse@{k:g}"]
        c = model.compare(t2t, cls_)
        acc_rows.append({"keep_rate": k, "cls_top1": 100 * cls_.correct.mean(), "t2t_top1": 100 * t2t.correct.mean(),
                         **{f"{n}_pp": getattr(c, n) for n in ("diff", "low", "high", "low90", "high90")},
                         "mcnemar_p": c.p})
        g = gated(decl.rule(cfg.margin_pp).decide(c.diff, c.low, c.high, c.low90, c.high90), cfg.margin_pp,
                  model.design(t2t, cls_))
        file(rep, decl, g.decision, keys={"keep": k}, our_value=round(c.diff, 3),
             ci=[round(c.low, 3), round(c.high, 3)], design=g.design,
             why=f"off the shelf, {model.name}, {len(model.y)} images",
             details={"effect in dispute": f"the equivalence margin {cfg.margin_pp:g} points (Table 10's numbers "
                                           "are not in our sources)"})
    speed = _t2t_speed(model, cfg)
    sel = speed[(speed.model == cfg.t2t_bench_model) & (speed.config == "tokens_to_tokens")].iloc[0]
    decl = CLAIMS["evit.t10.t2t_slower"]
    file(rep, decl, decl.rule().decide(sel.speedup, sel.speedup_low, sel.speedup_high),
         premises={TIMING_ROUNDS: rounds_premise(int(sel["rounds"]))}, keys={"model": cfg.t2t_bench_model},
         timed=True, load=bench.load_from_row(sel),
         our_value=round(sel.speedup, 3), ci=[round(sel.speedup_low, 3), round(sel.speedup_high, 3)],
         why=f"side-by-side interleaved timing ({sel['device']}, batch {sel['batch']}, {sel['dtype']}, "
             f"{sel['rounds']} rounds)", details={"interval": "bootstrap over per-round ratios"})
    return TokensToTokens(pd.DataFrame(acc_rows), speed)


def _to_oracle(x_uint8: torch.Tensor, img_size: int) -> torch.Tensor:
    x = x_uint8.float().div(255.0)
    if x.shape[1] == 1:
        x = x.expand(-1, 3, -1, -1)
    x = torch.nn.functional.interpolate(x, size=img_size, mode="bilinear", align_corners=False)
    mean = torch.tensor(pretrained.VIT_S14_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(pretrained.VIT_S14_STD).view(1, 3, 1, 1)
    return (x - mean) / std


def oracle_premise(ref: Comparison) -> verdicts.Premise:
    """:data:`~tokenprune.study.evit.claims.ORACLE_GUIDES`: at EViT's default (4/7/10, keep 0.7) the oracle's
    selection beats the model's own attention (``ref``: oracle minus own; 95 % interval above 0)."""
    return verdicts.Premise(ORACLE_GUIDES, bool(ref.low > 0),
                            f"oracle - own: {verdicts.fmt_interval(ref.diff, ref.low, ref.high)} points")


def oracle_at_block1(rep: Any, model: EvaluatedModel, cfg: Any) -> pd.DataFrame:
    """The pretrained ViT-S/14's last-block [CLS] attention as ``model``'s token selection at block 1 (and at
    4/7/10), against the model's own attention, on the first ``cfg.oracle_images`` images, with the share of kept
    patches that are blank and the combined MACs; registers :func:`oracle_premise` and files the Table 14 claims."""
    base = model.base
    vit_oracle = pretrained.load_vit_s14(img_size=cfg.oracle_img_size)
    n_or = min(cfg.oracle_images, len(model.y))
    t0 = time.perf_counter()
    oracle_maps = oracle.resample_map(oracle.oracle_cls_attention(
        vit_oracle, _to_oracle(model.x_raw[:n_or], cfg.oracle_img_size), batch=128, dtype="fp32"), model.grid)
    oracle_s = time.perf_counter() - t0
    x_or, y_or = model.X[:n_or], model.y[:n_or]
    full_or = evaluation.Predictions(model.full.logits[:n_or], model.full.labels[:n_or])
    k_or = cfg.oracle_keep
    or_cfgs = {"own attention @1": PruneConfig(keep_rate=k_or, locations=(1,)),
               "oracle @1": PruneConfig(keep_rate=k_or, locations=(1,), scorer="oracle_attention"),
               "EViT 4/7/10 @0.7": PruneConfig(keep_rate=0.7),
               "oracle 4/7/10 @0.7": PruneConfig(keep_rate=0.7, scorer="oracle_attention")}

    def feed(c_):
        return oracle.oracle_feed(base, oracle_maps) if c_.scorer == "oracle_attention" else contextlib.nullcontext()

    or_preds = {"unpruned": full_or}
    oracle_gmacs = flops.analytic_macs(vit_oracle).total / 1e9
    rows = [{"config": "unpruned", "gmacs": model.gmacs, "oracle_gmacs": 0.0, "combined_gmacs": model.gmacs,
             **model.ci_row(full_or, ref=full_or)}]
    for name, c_ in or_cfgs.items():
        c_.apply(base)
        with feed(c_):
            or_preds[name] = model.predict(base, x_or, y_or)
        g = flops.analytic_macs(base).total / 1e9
        og = oracle_gmacs if c_.scorer == "oracle_attention" else 0.0
        rows.append({"config": name, "gmacs": g, "oracle_gmacs": og, "combined_gmacs": oracle.combined_macs(og, g),
                     **model.ci_row(or_preds[name], ref=full_or)})
    # where the selections look: the share of the patches kept after block 1 that are blank background (no pixel
    # above 20/255 in the patch), for the model's own attention and for the oracle's
    ps_ = base.patch_embed.patch_size[0]
    blank = (torch.nn.functional.max_pool2d(model.x_raw[:n_or].float(), ps_) < 20).reshape(n_or, -1)
    for name in ("own attention @1", "oracle @1"):
        with feed(or_cfgs[name]):
            kept = evaluation.patch_status(base, x_or, or_cfgs[name])[0].reshape(n_or, -1) == evaluation.KEPT
        next(r for r in rows if r["config"] == name)["kept_blank_share"] = float((kept & blank).sum() / kept.sum())
    rows[0]["kept_blank_share"] = float(blank.float().mean())
    patch(base, keep_rate=1.0)

    # the premise of both claims: the oracle guides better than the model's own attention where the latter is usable
    # (EViT's default, 4/7/10 at keep 0.7); an oracle that selects worse there is no oracle
    rep.add_premise(oracle_premise(model.compare(or_preds["oracle 4/7/10 @0.7"], or_preds["EViT 4/7/10 @0.7"])))
    about = f"off the shelf (the paper trained with the oracle), {n_or} images of {model.name}"
    effect = {"effect in dispute": f"the margin {cfg.margin_pp:g} points (no number in our sources)",
              "oracle": f"pretrained ViT-S/14 at {cfg.oracle_img_size} px"}
    c = model.compare(or_preds["oracle @1"], or_preds["own attention @1"])
    decl = CLAIMS["evit.t14.oracle_beats_own_attention_at_block1"]
    g = gated(decl.rule().decide(c.diff, c.low, c.high, p=c.p), cfg.margin_pp,
              model.design(or_preds["oracle @1"], or_preds["own attention @1"]))
    on_model = {PROXY_CHOSEN: chosen.proxy_premise(model.name)}   # a classification model: 00's choice?
    file(rep, decl, g.decision, keys={"keep": k_or}, our_value=round(c.diff, 3),
         ci=[round(c.low, 3), round(c.high, 3)], design=g.design, why=about, details=effect, premises=on_model)
    c = model.compare(or_preds["oracle @1"], full_or)
    decl = CLAIMS["evit.t14.oracle_block1_keeps_accuracy"]
    g = gated(decl.rule(cfg.margin_pp).decide(c.diff, c.low, c.high, c.low90, c.high90), cfg.margin_pp,
              model.design(or_preds["oracle @1"], full_or))
    file(rep, decl, g.decision, keys={"removed": f"{1 - k_or:.0%}"}, our_value=round(c.diff, 3),
         ci=[round(c.low, 3), round(c.high, 3)], design=g.design, why=about, details=effect, premises=on_model)
    # Table 14's "Combined MACs" are in the table, not filed as a claim: with an oracle at least as large as the
    # model (DINO's DeiT in the paper, a ViT-S/14 nine times the small ViT here) they exceed the unpruned model's
    # MACs by construction
    rep.add_value("oracle", {"img_size": cfg.oracle_img_size, "images": n_or, "seconds": round(oracle_s, 1),
                             "gmacs": oracle_gmacs, "block": "last (12), head mean", "grid": list(model.grid)})
    return pd.DataFrame(rows)


def higher_resolution(rep: Any, model: EvaluatedModel, cfg: Any) -> pd.DataFrame:
    """``model`` at ``cfg.hires_img_size`` px (position embedding resampled, images resized bicubically) with EViT at
    the keep rate that matches the 28-px model's MACs, off the shelf; files the Table 5 claims: off the shelf, on the
    premise that the unpruned higher-resolution model is not significantly worse than the 28-px one and gated by its
    design (the effect in dispute: DeiT-S's gain); fine-tuned, ``not testable here`` with what would decide it."""
    size, full = cfg.hires_img_size, model.full
    decl = CLAIMS["evit.t5.higher_res_equal_macs.off_the_shelf"]
    effect = paper_number(decl.paper_number)
    pre28 = model.base.tp_preprocess
    hr = copy.deepcopy(model.base)
    hr.set_input_size(img_size=(size, size))
    pre_hr = sources.Preprocess(size, channels=pre28.channels, mean=pre28.mean.flatten().tolist(),
                                 std=pre28.std.flatten().tolist(), resize="bicubic")
    x_hr = pre_hr(model.x_raw)
    PruneConfig(keep_rate=1.0).apply(hr)
    hr_full_gmacs = flops.analytic_macs(hr).total / 1e9
    k_hr = round(flops.keep_rate_for_macs(hr, model.gmacs * 1e9), 4)
    hr_preds = {"28 px unpruned": full, f"{size} px unpruned": model.predict(hr, x_hr)}
    PruneConfig(keep_rate=k_hr).apply(hr)
    hr_gmacs = flops.analytic_macs(hr).total / 1e9
    hr_preds[f"{size} px EViT@{k_hr:g}"] = model.predict(hr, x_hr)
    table = pd.DataFrame([{"config": n, "gmacs": g, **model.ci_row(p)} for n, g, p in (
        ("28 px unpruned", model.gmacs, full),
        (f"{size} px unpruned (off the shelf)", hr_full_gmacs, hr_preds[f"{size} px unpruned"]),
        (f"{size} px EViT@{k_hr:g} (off the shelf)", hr_gmacs, hr_preds[f"{size} px EViT@{k_hr:g}"]))])

    a, a_full = hr_preds[f"{size} px EViT@{k_hr:g}"], hr_preds[f"{size} px unpruned"]
    c, control = model.compare(a, full), model.compare(a_full, full)
    decision = decl.rule().decide(c.diff, c.low, c.high, p=c.p)
    # the premise is checked only where the comparison is not reproduced (the rule as first written)
    usable = verdicts.Premise(
        HIRES_USABLE, not (control.high < 0 and decision.verdict != "reproduced"),
        f"unpruned {size} px minus 28 px: {verdicts.fmt_interval(control.diff, control.low, control.high)} points")
    g = gated(decision, effect, model.design(a, full))
    file(rep, decl, g.decision, keys={"size": size}, paper_value=effect, our_value=round(c.diff, 3),
         ci=[round(c.low, 3), round(c.high, 3)], design=g.design,
         premises={HIRES_USABLE: usable, PROXY_CHOSEN: chosen.proxy_premise(model.name)},
         why=f"off the shelf, {len(model.y)} images of {model.name}; {hr_gmacs:.4f} vs {model.gmacs:.4f} GMACs "
             f"(keep {k_hr:g} at 4/7/10)", details={"effect in dispute": f"DeiT-S's {effect:g} point"})
    file(rep, CLAIMS["evit.t5.higher_res_equal_macs.finetuned"], verdicts.not_testable(
        f"needs models fine-tuned at {size} px, which are not cached"), keys={"size": size})
    return table
