"""Notebook 03's claims as data: the rules that decide them (:mod:`tokenprune.study.verdicts`, tolerances fixed
here) and one :class:`~tokenprune.study.claims.Declaration` per claim (:data:`CLAIMS`). A claim measured on a model
trained here at paper scale has a declaration of its own (:func:`paper_scale`: its id under ``paper_scale``, the
premise that every run trained the recipe's whole schedule in place of the proxy's calibration)."""
from __future__ import annotations

import dataclasses
import math
from typing import Sequence

from tokenprune.study import verdicts
from tokenprune.study.proxy.chosen import FINE_GRAINED_BAR, PROXY_BAR, PROXY_CHOSEN
from tokenprune.study.claims import Declaration, DeclarationTable, paper_number
from tokenprune.study.paper_numbers import VARMEDAD as VM
from tokenprune.study.paper_numbers import VARMEDAD_SOURCE as SRC
from tokenprune.study.paper_runs import FULL_SCHEDULE, paper_scale_id
from tokenprune.study.proxy.audit_model import MOVED
from tokenprune.study.varmedad.settings import (EFFECTS, EQUIV_MARGIN, FLAT_SHARE, JAC_DIFFER, JAC_SAME, LOCS,
                                                MIN_SEEDS, OVERLAP_TOKENS, R_MAIN, SCALE_DIFFER, SCALE_SAME,
                                                T_FLAT_FROM, UNEVEN_SHARE)

__all__ = ["CLAIMS", "PROXY", "SEEDS", "TEMPERATURE_MOVES", "TRAINS_OVERLAP", "TIMING_ROUNDS", "beats_rule",
           "photo_rule", "top1_rule", "medad_similar_rule", "robust_rule", "ExactBars", "paper_scale", "SPEARMAN",
           "JACCARD", "MEDAD_JAC", "MEDAD_ACC", "FLAT_T", "EQ8_SCALE", "ScaleBars"]

# ---------------------------------------------------------------------------------------------- premises
PROXY = (PROXY_BAR, PROXY_CHOSEN)
SEEDS = f"at least {MIN_SEEDS} seeds"
TEMPERATURE_MOVES = (f"T -> 0 (1e-9) changes the Eq. 8 weights against the main T (mean total-variation distance "
                     f">= the bar at block {LOCS[0]})")
TRAINS_OVERLAP = "the fine-tuning trains what the overlapping embedding changes (patch and position embeddings)"
TIMING_ROUNDS = "at least 3 timing rounds"

# ---------------------------------------------------------------------------------------------- rules
TABLE1_RULE = verdicts.Condition("consistent when printed drop = printed accuracy - baseline within 0.01")
EQ6_RULE = verdicts.Condition(
    "reproduced when sympy simplifies Eq. 6 to 0 for H = 1..16, the exact scorer is 0 on every row, the float "
    "residue is <= 1e-6 x the largest attention weight and traced pruning of every test image keeps patches "
    "0..ceil(rN)-1 at every location; else not reproduced")
SPEARMAN, JACCARD = "Spearman rho (variance vs mean), block 4", "Jaccard of the kept sets at r = 0.6, block 4"
RERANK_RULE = verdicts.Criteria(
    reproduced=(verdicts.Below(SPEARMAN, 0.7),),
    not_reproduced=(verdicts.AllOf((verdicts.Above(SPEARMAN, 0.9), verdicts.Above(JACCARD, 0.75))),))
SPEED_RULE = verdicts.Criteria(reproduced=(verdicts.Above("speedup vs unpruned", 0.9),),
                               not_reproduced=(verdicts.Below("speedup vs unpruned", 0.9),))
TOKENS_RULE = verdicts.Condition(f"reproduced when the forward pass, num_patches and the conv grid formula all give "
                                 f"{OVERLAP_TOKENS} patch tokens")
MACS_RULE = verdicts.Rounded(VM["matched"]["gflops"], digits=2)
SAVING_RULE = verdicts.Condition(f"analytic MACs, DeiT-S 224 px: reproduced when 1 - MACs(overlap, r=0.6) / "
                                 f"MACs(unpruned) is within 0.5 points of the paper's "
                                 f"{VM['overlap']['flops_reduction']:.0%}")
MARGIN_RULE = verdicts.Direction(">", unit="top-1 points")
MEDAD_R03_RULE = verdicts.Direction(">", threshold=-VM["medad_r03"]["max_drop"], test=False, unit="top-1 points")
BACKGROUND_RULE = verdicts.Direction("<", unit="points of background share")
R07_MACS_RULE = verdicts.AtLeast(VM["r07"]["speedup"], 1.0, "MAC ratio unpruned / variance r=0.7")
R07_SPEED = "speedup vs unpruned, variance r=0.7"
R07_SPEED_RULE = verdicts.Criteria(reproduced=(verdicts.Above(R07_SPEED, 0.9 * VM["r07"]["speedup"]),),
                                   not_reproduced=(verdicts.Below(R07_SPEED, 0.9 * VM["r07"]["speedup"]),))
MEDAD_JAC = f"Jaccard of the kept sets (per-patch vs per-head median), block {LOCS[0]}, r = {R_MAIN}"
MEDAD_ACC = "top-1 points, per-head - per-patch reading"
# Eq. 7's axis is a question of which patches MedAD keeps, decided on the kept sets themselves (no accuracy proxy):
# the readings differ materially below JAC_DIFFER, make the same selection above JAC_SAME (settings gives the reasons)
MEDAD_AXIS_RULE = verdicts.Criteria(reproduced=(verdicts.Below(MEDAD_JAC, JAC_DIFFER),),
                                    not_reproduced=(verdicts.Above(MEDAD_JAC, JAC_SAME),))
FLAT_T = (f"smallest effective share of the pruned tokens in the Eq. 8 fused token over T >= {T_FLAT_FROM:g} (every "
          f"image, blocks {'/'.join(map(str, LOCS))}, variance and MedAD, r = {R_MAIN})")


def _scaled_margin(factor: float) -> float:
    """:data:`EQUIV_MARGIN` in top-1 points times ``factor``, the sensitivity factor of the proxy a claim is measured
    on (1 on DeiT-S itself; :func:`tokenprune.study.varmedad.designs.margin_factor`)."""
    if not (math.isfinite(factor) and factor > 0):
        raise ValueError(f"factor: a sensitivity factor must be finite and > 0, got {factor!r}")
    return EQUIV_MARGIN * 100 * factor


def medad_similar_rule(factor: float = 1.0) -> verdicts.Equivalence:
    """'MedAD can similarly lead to strong performance': MedAD's top-1 equals variance's within the equivalence
    margin (:data:`EQUIV_MARGIN`, ImageNet top-1 points) times ``factor``, the proxy's sensitivity factor."""
    return verdicts.Equivalence(_scaled_margin(factor), unit="top-1 points")


def robust_rule(factor: float = 1.0) -> verdicts.Robustness:
    """Objection 4's robustness claims (T -> 0, blocks, fusion): every judged alternative equals the main
    configuration within the equivalence margin (:data:`EQUIV_MARGIN`, ImageNet top-1 points) times ``factor``, the
    proxy's sensitivity factor."""
    return verdicts.Robustness(_scaled_margin(factor), unit="top-1 points")


@dataclasses.dataclass(frozen=True)
class ExactBars:
    """A quantity computed exactly on the data at hand (no sampling interval) against two bars declared before it:
    reproduced when it is at least ``holds_from``, not reproduced when it is below ``fails_below``, else
    inconclusive."""

    what: str
    holds_from: float
    fails_below: float

    def __post_init__(self) -> None:
        if not self.fails_below <= self.holds_from:
            raise ValueError(f"fails_below {self.fails_below!r} must not exceed holds_from {self.holds_from!r}")

    @property
    def text(self) -> str:
        return (f"reproduced when the {self.what} is at least {self.holds_from:g}; not reproduced when it is below "
                f"{self.fails_below:g}; else inconclusive")

    def decide(self, value: float) -> verdicts.Decision:
        if not math.isfinite(value):
            return verdicts.Decision(verdicts.INCONCLUSIVE, "no finite value", self.text)
        if value >= self.holds_from:
            return verdicts.Decision(verdicts.REPRODUCED, "", self.text)
        if value < self.fails_below:
            return verdicts.Decision(verdicts.NOT_REPRODUCED, f"{value:.4g} is below {self.fails_below:g}", self.text)
        return verdicts.Decision(verdicts.INCONCLUSIVE, f"{value:.4g} lies between {self.fails_below:g} and "
                                                        f"{self.holds_from:g}", self.text)


TEMPERATURE_FLAT_RULE = ExactBars(FLAT_T, FLAT_SHARE, UNEVEN_SHARE)
EQ8_SCALE = (f"scale of the fused token normalised over all the patch tokens at the location against normalised over "
             f"the pruned set P (sum over P of softmax(s / T) over all of them), DeiT-S at 224 px, blocks "
             f"{'/'.join(map(str, LOCS))}, r = {R_MAIN}")


@dataclasses.dataclass(frozen=True)
class ScaleBars:
    """Two readings of a formula that build the same thing up to a scale ``c`` (in [0, 1]), judged over every input
    from the range of ``c`` (its smallest and largest value, exact): reproduced (the readings agree) when even the
    smallest is at least ``same_from``; not reproduced (they differ) when even the largest is below ``differ_below``;
    else inconclusive; not testable when there is no ``c`` (nothing is built: no token is pruned)."""

    what: str
    same_from: float
    differ_below: float

    def __post_init__(self) -> None:
        if not 0 < self.differ_below <= self.same_from <= 1:
            raise ValueError(f"bars: need 0 < differ_below <= same_from <= 1, got {self.differ_below!r}, "
                             f"{self.same_from!r}")

    @property
    def text(self) -> str:
        return (f"reproduced (the readings agree) when the {self.what} is at least {self.same_from:g} for every input "
                f"and T; not reproduced (they differ) when it is below {self.differ_below:g} for every input and T; "
                f"else inconclusive")

    def decide(self, smallest: float, largest: float) -> verdicts.Decision:
        if not (math.isfinite(smallest) and math.isfinite(largest)) or largest <= 0:
            return verdicts.not_testable("no token is pruned at any location: Eq. 8 fuses nothing", self.text)
        if not 0 <= smallest <= largest <= 1 + 1e-12:
            raise ValueError(f"range: need 0 <= smallest <= largest <= 1, got [{smallest!r}, {largest!r}]")
        if smallest >= self.same_from:
            return verdicts.Decision(verdicts.REPRODUCED, "", self.text)
        if largest < self.differ_below:
            return verdicts.Decision(verdicts.NOT_REPRODUCED, f"the scale is at most {largest:.4g}, below "
                                                              f"{self.differ_below:g} for every input and T", self.text)
        return verdicts.Decision(verdicts.INCONCLUSIVE, f"the scale ranges over [{smallest:.4g}, {largest:.4g}], "
                                                        f"across the bars {self.differ_below:g} and {self.same_from:g}",
                                 self.text)


EQ8_NORM_RULE = ScaleBars(EQ8_SCALE, SCALE_SAME, SCALE_DIFFER)
PHOTO_LOW, PHOTO_RANDOM = "cosine, variance - low variance", "cosine, variance - random"


def beats_rule(labels: Sequence[str]) -> verdicts.Criteria:
    """'A beats B' on every part (paired on the same test images): a part is won when the paired-bootstrap 95 %
    interval of the top-1 difference lies above 0 and McNemar p < 0.05, lost when below 0 with p < 0.05.
    Reproduced when every part is won; else not reproduced when any is lost; else inconclusive."""
    def part(label: str, side) -> verdicts.AllOf:
        return verdicts.AllOf((side(f"{label} (top-1 points)", 0.0),
                               verdicts.Flag(f"McNemar p < 0.05, {label}", f"McNemar p < 0.05 for {label}")))
    return verdicts.Criteria(reproduced=tuple(part(lb, verdicts.Above) for lb in labels),
                             not_reproduced=tuple(part(lb, verdicts.Below) for lb in labels))


def photo_rule() -> verdicts.Criteria:
    """Variance keeps the final [CLS] feature closer than low variance and random: both cosine intervals above 0."""
    return verdicts.Criteria(reproduced=(verdicts.Above(PHOTO_LOW), verdicts.Above(PHOTO_RANDOM)),
                             not_reproduced=(verdicts.Below(PHOTO_LOW), verdicts.Below(PHOTO_RANDOM)))


def top1_rule(paper_top1: float) -> verdicts.Magnitude:
    """The seed t-interval of our top-1 must contain the printed value."""
    return verdicts.Magnitude(paper_top1, 0.0, "% top-1")


# ---------------------------------------------------------------------------------------------- declarations
_REVIEW = "varmedad-review.txt"
_T1, _OV, _R07, _M03 = VM["matched"]["top1"], VM["overlap"], VM["r07"], VM["medad_r03"]
_Q_TABLE2 = ('"At matched compute (2.64 GFLOPs) the method reports 85.90% top-1 accuracy with the variance indicator '
             'and 85.82% with median absolute deviation, versus 85.68% for EViT and 85.36% for ToMe."')
_Q_SINGLE_RUN = ('"All experimental claims rest on a single run on ImageNet-100 with no error bars or multiple seeds. '
                 '[...] Without repeated runs, these differences may lie within random variation"')
_Q_FREE = ('"it is unclear whether the reported accuracy is robust to the choice of T or to the selection of pruning '
           'stages."')
_Q_SETTLE = ('"compare keeping the highest-variance patches against keeping the lowest-variance patches at the same '
             'keep rate; if the lowest-variance set matches or beats the highest-variance set in accuracy, the '
             'diversity criterion is not carrying the gain."')
_Q_RERANK = ('"a natural test is whether keeping the highest-variance patches is optimal compared with, say, '
             'lowest-variance or random retention [...] which would isolate whether diversity or something '
             'correlated with it drives the gain."')
_Q_OVERLAP = ('"with overlapping patch embeddings, keeping 60% of patches yields 87.16% accuracy, 0.42 points above '
              'the no-pruning baseline while using slightly fewer FLOPs."')
_Q_R07 = '"at r=0.7 throughput rises about 50% with accuracy loss near 0.3 points."'
_Q_M03 = '"MedAD provides a more stable alternative at aggressive keep rates, staying within 3% accuracy at r=0.3."'
_WD_TOP1 = ("profile paper: DeiT-S fine-tuned on ImageNet-100 by recipe varmedad_deit_s_imagenet100, >= 3 seeds "
            "(data_root and deit_weights, a GPU)")
_OBJ2 = ("Objection 2 ({label}): cross-head variance of [CLS] attention is a different criterion from the head-mean "
         "attention (EViT), not a re-ranking of it")


_DECLARATIONS = [
    Declaration(
        id="varmedad.obj8.table1_drop", kind="transcription",
        statement="Objection 8: Table 1 prints MedAD without fusion at r = 0.8 as 85.98 top-1 with a drop of -3.45",
        quote='"The reported accuracy drop of (-3.45) for attention MedAD without patch fusion at r=0.8 is '
              'inconsistent with the adjacent values and with the accuracy of 85.98"',
        where=f"Table 1 ({_REVIEW}, minor comment 1)", paper_number=("VARMEDAD", "table1_typo", "printed_drop"),
        rule=TABLE1_RULE, unit="points", setting="from the sources", section="§1"),
    Declaration(
        id="varmedad.obj1.eq6_zero", kind="transcription", on_rule_holds="inconsistent",
        statement="Objection 1: Eq. 6 as printed, (1/H) sum_h (a_h - mean_h a), is identically zero, so it is not the "
                  "variance the text names and ranks no patch; pruning by it keeps the first ceil(r N) patches in "
                  "raster order (stable tie-break)", quote='"avar = 1/H HX h=1 (a(h) class - \u00afa). (6)"',
        where=f"Sec. 3.2 Eq. 5-6 ({_REVIEW}, major comment 1)", rule=EQ6_RULE,
        unit="max |Eq. 6| in float (exact form: 0)", setting="analytic at paper scale", section="§3"),
    Declaration(
        id="varmedad.obj2.{source}", kind="reviewer objection", on_rule_holds="rejected", statement=_OBJ2,
        quote=_Q_RERANK, where=f"Sec. 3.2 hypothesis ({_REVIEW}, reading between the lines)", rule=RERANK_RULE,
        unit=SPEARMAN, setting="proxy", section="§5", family="varmedad.rerank"),
    Declaration(
        id="varmedad.eq7.median_axis", kind="reviewer objection",
        statement="Review major comment 2: the axis of Eq. 7's inner median (over heads per patch, or over patches "
                  "per head) changes which patches MedAD keeps: the two readings' kept sets differ materially (block "
                  "4, r = 0.6; real photos through the pretrained ViT-S/14, {patches} patches, 6 heads as DeiT-S)",
        quote='"This ambiguity affects the interpretation of every result using the MedAD indicator"',
        where=f"Sec. 3.2 Eq. 7 ({_REVIEW}, major comment 2)", rule=MEDAD_AXIS_RULE, unit=MEDAD_JAC,
        setting="proxy", section="§6"),
    Declaration(
        id="varmedad.variance_vs_medad",
        statement="MedAD in place of variance leads to similarly strong performance: at the same keep rate MedAD's "
                  "top-1 equals variance's within the equivalence margin (Table 2: 85.82 vs 85.90); here on the "
                  "trained base model, r = 0.6, no fine-tuning, paired",
        quote='"we also found that using robust statistical measures, such as the median absolute deviation in place '
              'of variance, to assess patch importance can similarly lead to strong performance."',
        where=f"abstract ({_REVIEW}); Table 2", rule=medad_similar_rule, unit="top-1 points, variance - MedAD",
        effect=EFFECTS["medad_similar"], premises=PROXY, setting="proxy", section="§6"),
    Declaration(
        id="varmedad.medad_r03.offtheshelf",
        statement="MedAD is stable at aggressive keep rates: within 3 % top-1 of the unpruned model at r = 0.3, on the "
                  "trained base model without fine-tuning (paired on the same images)", quote=_Q_M03,
        where=f"{_REVIEW}, 'If this is right'", rule=MEDAD_R03_RULE, unit="top-1 points, MedAD r=0.3 - unpruned",
        effect=EFFECTS["medad_r03"], premises=PROXY, setting="proxy", section="§6"),
    Declaration(
        id="varmedad.obj3.high_vs_low_variance", kind="reviewer objection", on_rule_holds="rejected",
        statement="Objection 3: keeping the highest-variance patches beats keeping the lowest-variance and random "
                  "patches at equal keep rate ({keep_rates}; trained {base_model}, no fine-tuning)", quote=_Q_SETTLE,
        where=f"{_REVIEW}, 'What would settle it'", rule=beats_rule, unit="top-1 points, high - low variance, r=0.6",
        effect=EFFECTS["no_number"], premises=PROXY, setting="proxy", section="§7"),
    Declaration(
        id="varmedad.obj3.diversity_beyond_mean", kind="our hypothesis",
        statement="The paper's premise, tested without the mean: patches with a large scale-free spread across heads "
                  "(variance / mean^2) are more important than random ones", quote="none: our hypothesis",
        where="Sec. 3.2 hypothesis; objections 2-3", rule=beats_rule, unit="top-1 points, cv2 - random, r=0.6",
        effect=EFFECTS["no_number"], premises=PROXY, setting="proxy", section="§7"),
    Declaration(
        id="varmedad.obj7.offtheshelf_matched", kind="reviewer objection", on_rule_holds="rejected",
        statement="Objection 7 without fine-tuning: at matched MACs (ToMe {tome_error}), variance pruning beats EViT "
                  "and ToMe (trained {base_model}, r = 0.6)", quote=_Q_TABLE2, where="Table 2", rule=beats_rule,
        unit="top-1 points, variance - ToMe", effect=EFFECTS["variance_vs_tome"], premises=PROXY, setting="proxy",
        section="§7"),
    Declaration(
        id="varmedad.obj3.photos_vit_s14", kind="reviewer objection", on_rule_holds="rejected",
        statement="Objection 3 on real photos: with the real pretrained ViT-S/14 (r = 0.6), high-variance pruning "
                  "keeps the final [CLS] feature closer to the unpruned model's than low-variance or random pruning",
        quote=_Q_SETTLE, where=f"{_REVIEW}, 'What would settle it'", rule=photo_rule,
        unit="cosine, high - low variance", effect=EFFECTS["photo_cosine"], setting="proxy", section="§7"),
    Declaration(
        id="varmedad.settle.background_share", kind="reviewer objection", on_rule_holds="rejected",
        statement="Review 'What would settle it' (b): the high-variance patches the method keeps are object rather "
                  "than background (background share of the kept patches below that of all patches){on}",
        quote='"if a large fraction of high-variance patches are also background on a task where background is '
              'uninformative, the assumption fails."', where=f"{_REVIEW}, 'What would settle it'", rule=BACKGROUND_RULE,
        unit="points, background share of kept high-variance patches - of all patches (block 4, r = 0.6)",
        effect=EFFECTS["background_share"], premises=(FINE_GRAINED_BAR,), setting="proxy", section="§7"),
    Declaration(
        id="varmedad.obj4.temperature_at_least_1e-2", kind="reviewer objection", on_rule_holds="rejected",
        statement="Objection 4 for T >= 0.01: the unreported Eq. 8 temperature cannot change the fused token there, "
                  "since for every T >= 0.01 its weights are those of a plain mean of the pruned tokens (variance and "
                  "MedAD scores at blocks 4/7/10, r = 0.6; real photos through the pretrained ViT-S/14, {patches} "
                  "patches)", quote=_Q_FREE, where=f"Sec. 3.1, 4.1 ({_REVIEW}, major comment 4)",
        rule=TEMPERATURE_FLAT_RULE, unit=FLAT_T, setting="proxy", section="§8"),
    Declaration(
        id="varmedad.obj4.temperature_to_zero", kind="reviewer objection", on_rule_holds="rejected",
        statement="Objection 4 as T -> 0: accuracy does not depend on the unreported Eq. 8 temperature when T falls to "
                  "the scale of the scores (T = 1e-9, the fused token becomes the best pruned token, against T = "
                  "{temperature:g}; r = 0.6; trained {base_model}, no fine-tuning)", quote=_Q_FREE,
        where=f"Sec. 3.1, 4.1 ({_REVIEW}, major comment 4)", rule=robust_rule,
        unit="top-1 points, largest difference vs main ({worst})", effect=EFFECTS["no_number"],
        premises=(TEMPERATURE_MOVES,) + PROXY, setting="proxy", section="§8", family="varmedad.robustness"),
    Declaration(
        id="varmedad.eq8.normalisation_set", kind="reviewer objection", on_rule_holds="rejected",
        statement="Review minor comment 2, the part that can be checked here: the normalisation that Eq. 8 leaves "
                  "unstated changes the fused token. Normalised over all the patch tokens at the location rather than "
                  "over the pruned set P, it keeps the same direction at a smaller scale, for every input and T "
                  "(DeiT-S at 224 px, blocks 4/7/10, r = 0.6). The missing parenthesis cannot be checked (the review "
                  "does not quote Eq. 8); the unreported T is judged under objection 4",
        quote='"Equation (8) is missing a closing parenthesis in the displayed denominator and should include a '
              'definition of the temperature parameter T and the normalization over the pruned set P; as written, '
              'the expression is hard to parse."',
        where=f"Sec. 3.2 Eq. 8 ({_REVIEW}, minor comment 2)", rule=EQ8_NORM_RULE,
        unit="scale, over all tokens / over P (largest over inputs and T)", setting="analytic at paper scale",
        section="§8"),
    Declaration(
        id="varmedad.obj4.blocks", kind="reviewer objection", on_rule_holds="rejected",
        statement="Objection 4: accuracy does not depend on the (unablated) pruning blocks 4/7/10 at matched MACs "
                  "(3/6/9, 5/8/11, 2/6/10, keep rate set by config_at_macs as in EViT's Table 13)", quote=_Q_FREE,
        where=f"Sec. 3.1, 4.1 ({_REVIEW}, major comment 4)", rule=robust_rule,
        unit="top-1 points, largest difference vs main ({worst}); at matched MACs", effect=EFFECTS["no_number"],
        premises=PROXY, setting="proxy", section="§8", family="varmedad.robustness"),
    Declaration(
        id="varmedad.obj4.fusion", kind="reviewer objection", on_rule_holds="rejected",
        statement="Objection 4: switching the fusion token off (drop) does not change accuracy at equal keep rate",
        quote='"a direct comparison at identical FLOPs with and without the fusion token would separate the '
              'contribution of each."', where=f"{_REVIEW}, reading between the lines", rule=robust_rule,
        unit="top-1 points, largest difference vs main ({worst})", effect=EFFECTS["no_number"], premises=PROXY,
        setting="proxy", section="§8", family="varmedad.robustness"),
    Declaration(
        id="varmedad.obj6.overlap_tokens", kind="consistency check",
        statement="Objection 6: the overlapping embedding (224 px, patch 16, stride 12, no padding) starts from "
                  "18 x 18 = 324 tokens instead of 196",
        quote='"the increase in the initial number of patches due to overlapping is not quantified"',
        where=f"Sec. 4 (stride 3/4 of the patch; count not printed; {_REVIEW}, minor comment 4)", rule=TOKENS_RULE,
        unit="patch tokens", setting="analytic at paper scale", section="§9"),
    Declaration(
        id="varmedad.macs.matched_point",
        statement="Variance pruning of DeiT-S at r = 0.6 (blocks 4/7/10, one fused token) costs about 2.64 GFLOPs, the "
                  "compute at which Table 2 compares the methods", quote=_Q_TABLE2, where="Table 2",
        paper_number=("VARMEDAD", "matched", "gflops"), rule=MACS_RULE,
        unit="GMACs (the paper's 'GFLOPs' count MACs, as EViT's)", setting="analytic at paper scale", section="§9"),
    Declaration(
        id="varmedad.obj6.overlap_flops",
        statement="With the overlapping embedding, variance pruning at r = 0.6 costs about 2% fewer FLOPs than the "
                  "unpruned 196-token DeiT-S",
        quote='"at r=0.6 the model beats the all-patch baseline while using 2% fewer FLOPs"', where="Table 3",
        paper_number=("VARMEDAD", "overlap", "flops_reduction"), rule=SAVING_RULE,
        unit="fraction of the unpruned MACs saved", setting="analytic at paper scale", section="§9"),
    Declaration(
        id="varmedad.r07.mac_ratio",
        statement="At r = 0.7 throughput rises about 50% (the compute half: DeiT-S's MACs fall by at least that "
                  "factor)",
        quote=_Q_R07, where=f"{_REVIEW}, 'If this is right'", paper_number=("VARMEDAD", "r07", "speedup"),
        rule=R07_MACS_RULE, unit="x, unpruned / variance r=0.7 analytic MACs (DeiT-S, 224 px)",
        setting="analytic at paper scale", section="§9"),
    Declaration(
        id="varmedad.r07.top1_drop", statement="At r = 0.7 the accuracy loss is near 0.3 points", quote=_Q_R07,
        where=f"{_REVIEW}, 'If this is right'", paper_number=("VARMEDAD", "r07", "top1_drop"),
        unit="top-1 points vs unpruned", setting="paper-scale run", section="§9",
        would_decide="fine-tune DeiT-S on ImageNet-100 with variance pruning at r = 0.7 and without "
                     "pruning (>= 3 seeds) and compare top-1 (Magnitude: -0.3 +- 0.2 points)"),
    Declaration(
        id="varmedad.obj4.overlap_stride", kind="reviewer objection", on_rule_holds="rejected",
        statement="Objection 4: the gain of the overlapping embedding does not hinge on the unablated stride 12 "
                  "(3/4 of the patch) among strides 8, 10, 12, 14",
        quote='"The method depends on several free choices that are not reported or ablated: the pruning block '
              'indices (4, 7, 10), the fusion temperature T in Eq. (8), and the overlapping-patch stride."',
        where=f"Sec. 3.1, 4.1 ({_REVIEW}, major comment 4)", unit="top-1 points vs stride 12",
        setting="paper-scale run", section="§9",
        would_decide="fine-tune DeiT-S on ImageNet-100 with overlapping embeddings at strides 8, 10, 12, "
                     "14 and variance pruning at r = 0.6 (>= 3 seeds each) and compare top-1 with stride "
                     "12 (Robustness within +-0.2 points)"),
    Declaration(
        id="varmedad.obj6.overlap_throughput",
        statement="With the overlapping embedding and r = 0.6, throughput is comparable to the unpruned 196-token "
                  "DeiT-S", quote='"yields an accuracy improvement while maintaining comparable throughput"',
        where=f"abstract ({_REVIEW}, minor comment 4)", rule=SPEED_RULE, unit="x speedup vs unpruned",
        premises=(TIMING_ROUNDS,), setting="timed on this machine", section="§9"),
    Declaration(
        id="varmedad.r07.throughput",
        statement="At r = 0.7 throughput rises about 50% (DeiT-S, variance, Eq. 8 fusion; measured on this machine)",
        quote=_Q_R07, where=f"{_REVIEW}, 'If this is right'", paper_number=("VARMEDAD", "r07", "speedup"),
        rule=R07_SPEED_RULE, unit="x speedup vs unpruned", premises=(TIMING_ROUNDS,), setting="timed on this machine",
        section="§9"),
    Declaration(
        id="varmedad.obj5.variance_vs_evit", kind="reviewer objection", on_rule_holds="rejected",
        statement="Objection 5: variance pruning beats EViT at the same compute (85.90 vs 85.68, one run); with 3 "
                  "seeds and a paired test the margin is positive", quote=_Q_SINGLE_RUN,
        where=f"Table 2 ({_REVIEW}, major comment 3)", rule=MARGIN_RULE, unit="top-1 points, mean over seeds",
        effect=EFFECTS["variance_vs_evit"], premises=(MOVED, SEEDS) + PROXY, setting="proxy", section="§10",
        family="varmedad.finetuned", headline=True),
    Declaration(
        id="varmedad.obj5.overlap_vs_unpruned", kind="reviewer objection", on_rule_holds="rejected",
        statement="Objection 5: the overlapping embedding with variance pruning at r = 0.6 beats the unpruned model "
                  "(87.16 vs 86.74, one run); with 3 seeds and a paired test the margin is positive",
        quote=_Q_SINGLE_RUN, where=f"Table 3 ({_REVIEW}, major comment 3)",
        paper_number=("VARMEDAD", "overlap", "margin"), rule=MARGIN_RULE, unit="top-1 points, mean over seeds",
        effect=EFFECTS["overlap_vs_unpruned"], premises=(TRAINS_OVERLAP, MOVED, SEEDS) + PROXY, setting="proxy",
        section="§10", family="varmedad.finetuned", headline=True),
    Declaration(
        id="varmedad.obj7.variance_vs_tome_matched", kind="reviewer objection", on_rule_holds="rejected",
        statement="Objection 7: at matched MACs and with the same fine-tuning recipe, variance pruning beats ToMe "
                  "(85.90 vs 85.36)", quote=_Q_TABLE2, where="Table 2", rule=MARGIN_RULE,
        unit="top-1 points, mean over seeds", effect=EFFECTS["variance_vs_tome"], premises=(MOVED, SEEDS) + PROXY,
        setting="proxy", section="§10", family="varmedad.finetuned", headline=True),
    Declaration(
        id="varmedad.medad_r03.finetuned",
        statement="MedAD is stable at aggressive keep rates: within 3 % top-1 of the unpruned model at r = 0.3 (DeiT-S "
                  "fine-tuned on ImageNet-100)", quote=_Q_M03, where=f"{_REVIEW}, 'If this is right'",
        rule=MEDAD_R03_RULE, unit="top-1 points, mean over seeds", effect=EFFECTS["medad_r03"],
        premises=(MOVED, SEEDS) + PROXY, setting="proxy", section="§10", family="varmedad.finetuned"),
]

#: the paper's absolute top-1 numbers: key -> (configuration fine-tuned, path in paper_numbers, quote, where)
TOP1 = {
    "attention_variance": ("variance", ("VARMEDAD", "matched", "top1", "attention_variance"), _Q_TABLE2, "Table 2"),
    "attention_medad": ("medad", ("VARMEDAD", "matched", "top1", "attention_medad"), _Q_TABLE2, "Table 2"),
    "evit": ("evit", ("VARMEDAD", "matched", "top1", "evit"), _Q_TABLE2, "Table 2"),
    "tome": ("tome", ("VARMEDAD", "matched", "top1", "tome"), _Q_TABLE2, "Table 2"),
    "overlap": ("overlap_variance", ("VARMEDAD", "overlap", "top1"), _Q_OVERLAP, "Table 3"),
    "unpruned": ("unpruned", ("VARMEDAD", "overlap", "baseline_top1"), _Q_OVERLAP, "Table 3"),
}


def _top1(key: str, scale: bool) -> Declaration:
    name, path, quote, where = TOP1[key]
    value = paper_number(path)
    how = "without pruning" if name == "unpruned" else f"with {name} at r = {R_MAIN}"
    return Declaration(
        id=f"varmedad.{'paper_scale.' if scale else ''}top1.{key}",
        statement=f"DeiT-S fine-tuned on ImageNet-100 {how} reaches {value} top-1", quote=quote,
        where=f"{where} ({SRC})", paper_number=path, rule=top1_rule(value),
        unit="% top-1, mean over seeds" if scale else "% top-1", premises=(SEEDS, FULL_SCHEDULE) if scale else (),
        setting="paper-scale run", section="§11", family="varmedad.top1", would_decide=None if scale else _WD_TOP1)


#: claims measured on the base model or its fine-tunes, which the paper profile decides on its own trained DeiT-S
PAPER_SCALE_TWINS = ("varmedad.variance_vs_medad", "varmedad.medad_r03.offtheshelf",
                     "varmedad.obj3.high_vs_low_variance", "varmedad.obj3.diversity_beyond_mean",
                     "varmedad.obj7.offtheshelf_matched", "varmedad.obj4.temperature_to_zero", "varmedad.obj4.blocks",
                     "varmedad.obj4.fusion", "varmedad.obj5.variance_vs_evit", "varmedad.obj5.overlap_vs_unpruned",
                     "varmedad.obj7.variance_vs_tome_matched", "varmedad.medad_r03.finetuned")


def paper_scale(decl: Declaration) -> Declaration:
    """``decl`` decided on models trained here at paper scale: its id under ``paper_scale``
    (:func:`tokenprune.study.paper_runs.paper_scale_id`), the setting ``paper-scale run``, and the premise that every
    run trained the recipe's whole schedule in place of the proxy's calibration premises."""
    premises = tuple(p for p in decl.premises if p not in PROXY) + (FULL_SCHEDULE,)
    return dataclasses.replace(decl, id=paper_scale_id(decl.id), setting="paper-scale run", premises=premises)


_BY_ID = {d.id: d for d in _DECLARATIONS}
CLAIMS = DeclarationTable("varmedad", _DECLARATIONS + [paper_scale(_BY_ID[i]) for i in PAPER_SCALE_TWINS]
                          + [_top1(k, scale) for scale in (False, True) for k in TOP1])
"""Every claim notebook 03 files, by id (templates: ``varmedad.obj2.{source}``)."""
