"""The decoupling study's claims, declared before any data: the press summary's words, the kind, the rule and where
each is decided.

No text of the paper was found: every claim quotes the popular-press summary
(shared/papers/decoupling-press-summary.txt, its paragraphs numbered from the title, 0) and every number in it is
unverified. Each claim is decided per dataset: on the proxies below the paper profile (SynthBirds, ``parts``;
cluttered Fashion-MNIST, ``fmnist``) and, at the paper profile, on CUB, Stanford Cars and FGVC-Aircraft with ids of
their own
(:func:`tokenprune.study.paper_runs.paper_scale_id`): :func:`declaration` finds the declaration of a claim on a
dataset. The two reviewer objections (the centre prior) are ours: their rule checks the paper's side, so a rule that
holds rejects them. Where the summary gives no number, the effect in dispute is the ``margin`` parameter (``effect``
None: :func:`effect_in_dispute`).

Two rules of the study are declared here. A tolerance given in ImageNet points that meets a proxy is scaled by the
proxy's sensitivity factor for the claim's family (:data:`SENSITIVITY_FAMILY`,
:func:`tokenprune.study.proxy.chosen.sensitivity_of`), or the claim is not testable (premise
:data:`SENSITIVITY_KNOWN`): the equivalence margins of 'almost identical' faithfulness and of 'just as accurate'
top-1, and the band of DeiT-S's pruning cost that says which configurations the title claim counts
(:func:`regime_band`). A figure the summary gives for one dataset is not transferred to another (premise
:data:`FIGURE_FOR_DATASET`): the "more than six percentage points" are FGVC-Aircraft's.
"""
from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Optional

from tokenprune.study import verdicts
from tokenprune.study.proxy import plan
from tokenprune.study.proxy.chosen import FINE_GRAINED_BAR, PROXY_CHOSEN
from tokenprune.study.claims import Declaration, DeclarationTable
from tokenprune.study.decoupling.data import PAPER_DIRS
from tokenprune.study.decoupling.measurements import CENTRE_FAMILY_ALPHA
from tokenprune.study.paper_numbers import DECOUPLE
from tokenprune.study.paper_runs import FULL_SCHEDULE, paper_scale_id
from tokenprune.study.verdicts import AllOf, Above, Below, Beyond, Criteria, Flag, Inside

__all__ = ["CLAIMS", "KEYS", "GAIN_THRESHOLD_PP", "GAIN_DATASET", "DECOUPLED_MARGIN", "FAST_TOLERANCE_PCT",
           "REGIME_CRITERION", "REGIME_BAND", "regime_band", "SCALED_MARGIN_KEYS", "SENSITIVITY_FAMILY",
           "scaled_margin",
           "HEAD_PARAMS_FROM_SOURCES", "CEILING", "STAND_IN", "ENOUGH_CONFIGS", "ENOUGH_CONFIGS_PER_KEEP",
           "SENSITIVITY_KNOWN", "FIGURE_FOR_DATASET", "EARLY_PARTS_HIDDEN", "HEAD_SIZE_GIVEN", "ACCURACY_CEILING",
           "PAPER_VALUE", "declaration", "effect_in_dispute",
           "rule_texts", "coverage_gain_rule", "coverage_better_rule", "centre_prior_everywhere_rule",
           "early_late_null_rule", "human_features_rule", "equal_faithfulness_rule", "just_as_accurate_rule",
           "intermediate_layer_rule", "low_keep_rate_rule", "larger_model_null_rule", "capacity_control_rule",
           "BEATS_CENTRE_RULE", "DECOUPLED_RULE", "DECOUPLED_EQUAL_KEEP_RULE", "JUST_AS_FAST_RULE"]

QUOTE = DECOUPLE["quotes"]

#: the summary's magnitude: "more than six percentage points" is a threshold
GAIN_THRESHOLD_PP = DECOUPLE["coverage_gain_aircraft_pp"]
#: the one dataset the summary gives that figure for (FGVC-Aircraft): it is not transferred to another
GAIN_DATASET = "aircraft"
#: "decoupled": the rank correlation of coverage and faithfulness across configurations lies inside +-0.2 (a weak
#: correlation at most: |rho| < 0.2 explains under 4 % of the rank variance); "coupled": above +0.2
DECOUPLED_MARGIN = 0.2
#: "just as fast": the scorer's extra MACs over EViT's [CLS]-attention scorer, at most this share (%) of the
#: unpruned model's MACs (analytic, at every keep rate)
FAST_TOLERANCE_PCT = 1.0
#: the predictor head's parameter count as the sources give it; None: no source gives it (the press summary names no
#: size, the paper was not found), so the head judged by "just as fast" is ours (:data:`HEAD_SIZE_GIVEN`)
HEAD_PARAMS_FROM_SOURCES: Optional[int] = None

#: the pre-registered band of DeiT-S's off-the-shelf pruning cost, points of top-1 (notebook 00's K2: EViT at keep 0.7,
#: anchored on DeiT-class models at about 3 GMACs; K3 is not used: "ours, deliberately wide", with no source): the
#: regime in which the papers' pruning costs what it costs DeiT-S
REGIME_CRITERION = next(c for c in plan.CRITERIA if c.id == "K2")
REGIME_BAND = (REGIME_CRITERION.low, REGIME_CRITERION.high)


def regime_band(sensitivity: Optional[float]) -> Optional[tuple[float, float]]:
    """The band of agreement cost (100 - agreement %, points) in which a configuration counts for the title claim:
    :data:`REGIME_BAND` x the proxy's ``sensitivity`` factor; None (every configuration counts) at paper scale,
    ``sensitivity`` None."""
    return None if sensitivity is None else (REGIME_BAND[0] * sensitivity, REGIME_BAND[1] * sensitivity)


#: the claims whose ``margin`` is a tolerance in ImageNet points (top-1 agreement, top-1), scaled on a proxy
SCALED_MARGIN_KEYS = ("equal_faithfulness", "just_as_accurate")
#: the claim family (:data:`tokenprune.study.proxy.plan.FAMILIES`) of each claim that reads a sensitivity factor: the
#: scaled margins compare a model pruned by the sensitivity head's top-k with one pruned by [CLS] attention's top-k,
#: and the title claim's band is K2's, EViT's cost at keep 0.7: all EViT-type (no claim here is about merging)
SENSITIVITY_FAMILY = {key: "evit" for key in (*SCALED_MARGIN_KEYS, "decoupled", "decoupled_equal_keep")}


def scaled_margin(margin: float, sensitivity: Optional[float]) -> float:
    """``margin`` (ImageNet points) x the proxy's ``sensitivity`` factor (1 at paper scale; unscaled with none, for the
    rule alone of a claim whose :data:`SENSITIVITY_KNOWN` fails)."""
    return float(margin) * (1.0 if sensitivity is None else float(sensitivity))


#: premises built from this run's measurements, given per filing
CEILING = "at least one agreement below the ceiling (at the ceiling, 'equal faithfulness' is uninformative)"
#: where pruning hardly changes a decision, both pruned models keep the unpruned model's accuracy
ACCURACY_CEILING = ("at least one pruned model's agreement with the unpruned model below the ceiling (at the ceiling, "
                    "'just as accurate' is uninformative)")
STAND_IN = ("SynthBirds' class-defining parts stand in for 'the features humans would use', and at least 2 "
            "evaluation images show one")
#: the configurations the title claim counts: with a forward pass and, on a proxy, in DeiT-S's cost regime (agreement
#: cost within :data:`REGIME_BAND` x the proxy's sensitivity factor, :func:`regime_band`); every one at paper scale
ENOUGH_CONFIGS = "at least 5 configurations in DeiT-S's cost regime"
ENOUGH_CONFIGS_PER_KEEP = "at least 5 configurations in DeiT-S's cost regime in some keep rate"
#: fails as not testable: a tolerance in ImageNet points meets a model with no sensitivity factor for the claim's family
#: (not a proxy notebook 00 chose, or a proxy on which the family has none)
SENSITIVITY_KNOWN = "the proxy's sensitivity factor is known"
#: fails as not testable: "more than six percentage points" is FGVC-Aircraft's figure, not transferred to another
FIGURE_FOR_DATASET = "the summary gives its figure for this dataset"
#: a premise about the dataset, decided by its construction: where an early block's local features already locate
#: the parts, 'the gap disappears early' and 'largest at an intermediate block' say nothing about depth
EARLY_PARTS_HIDDEN = "the dataset's parts are not located by an early block's local features (by construction)"
#: "just as fast" judges the head's extra cost: the head must be the paper's
HEAD_SIZE_GIVEN = "the head's size is given by the sources"

#: the claims decided once per dataset (the rest: ``decouple.just_as_fast.deit_s_224``)
KEYS = ("coverage_gain", "coverage_better", "beats_centre_prior", "centre_prior_everywhere", "decoupled",
        "decoupled_equal_keep", "equal_faithfulness", "just_as_accurate", "intermediate_layer", "early_late_null",
        "low_keep_rate", "capacity_control", "human_features", "larger_model_null")

#: the paper's side as results.json records it, where the summary gives words and no number
PAPER_VALUE = {
    "coverage_gain": f"> {GAIN_THRESHOLD_PP:g} (\"{QUOTE['coverage_gain_aircraft_value']}\")",
    "coverage_better": "significantly better",
    "beats_centre_prior": None,
    "centre_prior_everywhere": None,
    "decoupled": "decoupled",
    "decoupled_equal_keep": "decoupled",
    "equal_faithfulness": DECOUPLE["faithfulness"],
    "intermediate_layer": "largest at intermediate blocks",
    "early_late_null": "the difference disappears",
    "low_keep_rate": "largest at low keep rates",
    "capacity_control": "gain not from capacity",
    "human_features": "consistently",
    "larger_model_null": QUOTE["larger_model_value"],
    "just_as_fast": "just as fast",
    "just_as_accurate": "just as accurate",
}

_SUMMARY = "press summary (decoupling-press-summary.txt), paragraph {n}; the paper's text was not found"
_CAPACITY = ("By comparing their new method against a version that had the same extra capacity but was not trained "
             "with the specific new signal, they confirmed that the improvement came from the specific way the model "
             "was taught to look at the image, not just from having more tools")
_NO_HUMANS = ("an annotation of which patches humans use to identify the object (no dataset here has one; SynthBirds' "
              "class-defining parts stand in for it)")
_ALL_POS = "every one of the {seeds} seeds' gaps is > 0"


# ---------------------------------------------------------------------------------------------- rules
def coverage_gain_rule(seeds: int) -> Criteria:
    """"more than six percentage points": a threshold claim, not a sign claim."""
    return Criteria(reproduced=(Above("gap", GAIN_THRESHOLD_PP), Flag("seeds_positive", _ALL_POS.format(seeds=seeds))),
                    not_reproduced=(Below("gap", GAIN_THRESHOLD_PP),))


def coverage_better_rule(seeds: int, margin: float) -> Criteria:
    """"significantly better at keeping the patches ...": a direction claim (a gain of at least ``margin``)."""
    return Criteria(reproduced=(Above("gap", 0), Flag("seeds_positive", _ALL_POS.format(seeds=seeds))),
                    not_reproduced=(Below("gap", margin),))


#: the sensitivity head against a content-free centre prior (the paper's side of the objection)
BEATS_CENTRE_RULE = verdicts.Direction(">", unit="pp")


def centre_prior_everywhere_rule(configurations: int, margin: float, alpha: float = CENTRE_FAMILY_ALPHA) -> Criteria:
    """Worst case over the ``configurations`` (blocks x keep rates) of the small model, Bonferroni intervals."""
    level = round(100 * (1 - alpha / configurations), 2)
    return Criteria(
        reproduced=(Above("sensitivity - centre, configuration of lowest lower bound", -margin, level=level),),
        not_reproduced=(Below("sensitivity - centre, configuration of lowest upper bound", -margin, level=level),))


#: the title claim, pooled over every configuration with a forward pass
DECOUPLED_RULE = Criteria(reproduced=(Inside("rank correlation", DECOUPLED_MARGIN),),
                          not_reproduced=(Above("rank correlation", DECOUPLED_MARGIN),))
#: the title claim within keep rates
DECOUPLED_EQUAL_KEEP_RULE = Criteria(
    reproduced=(Inside("mean within-keep-rate rank correlation", DECOUPLED_MARGIN),),
    not_reproduced=(Above("mean within-keep-rate rank correlation", DECOUPLED_MARGIN),))


def _tost(name: str, what: str, margin: float) -> Flag:
    return Flag(name, f"{what} is equivalent to 0 (paired TOST, alpha 0.05, +-{margin / 100:g})")


def early_late_null_rule(margin: float) -> Criteria:
    """"the difference ... disappears" early and late: an equivalence claim (the TOST on fractions)."""
    return Criteria(
        reproduced=(_tost("early_equivalent", "the early block's per-image coverage gap", margin),
                    _tost("late_equivalent", "the late block's per-image coverage gap", margin)),
        not_reproduced=(Beyond("gap(early)", margin), Beyond("gap(late)", margin)))


def human_features_rule(seeds: int, margin: float) -> Criteria:
    """The class-defining parts' coverage gap, in the direction of the summary's "consistently"."""
    return Criteria(reproduced=(Above("gap (class-defining parts)", 0),
                                Flag("seeds_positive", _ALL_POS.format(seeds=seeds))),
                    not_reproduced=(Below("gap (class-defining parts)", margin),))


#: "just as fast", on analytic MACs
JUST_AS_FAST_RULE = verdicts.Condition(
    f"reproduced when the sensitivity head's extra MACs over EViT's [CLS]-attention scorer (head MACs minus the "
    f"[CLS]-row MACs, analytic) are at most {FAST_TOLERANCE_PCT:g} % of the unpruned model's MACs at every keep "
    "rate; else not reproduced")


def equal_faithfulness_rule(margin: float, sensitivity: Optional[float] = None) -> Criteria:
    """"almost identical": TOST of per-image agreement within +-``margin`` ImageNet points x the proxy's
    ``sensitivity`` factor (None: unscaled, at paper scale), as fractions (/ 100)."""
    frac = round(scaled_margin(margin, sensitivity) / 100, 6)
    how = "" if sensitivity is None else f" ({margin:g} point x the proxy's sensitivity factor {sensitivity:.2f})"
    return Criteria(
        reproduced=(Flag("equivalent", f"the paired TOST (Schuirmann, alpha 0.05) of per-image agreement declares "
                                       f"equivalence within +-{frac:g}{how}"),),
        not_reproduced=(Beyond("agreement difference (fraction)", frac, level=90),))


def just_as_accurate_rule(margin: float, sensitivity: Optional[float] = None) -> Criteria:
    """"just as accurate": TOST of per-image top-1 correctness, sensitivity head - [CLS] attention, within
    +-``margin`` ImageNet points x the proxy's ``sensitivity`` factor (None: unscaled, at paper scale), as fractions."""
    frac = round(scaled_margin(margin, sensitivity) / 100, 6)
    how = "" if sensitivity is None else f" ({margin:g} point x the proxy's sensitivity factor {sensitivity:.2f})"
    return Criteria(
        reproduced=(Flag("equivalent", f"the paired TOST (Schuirmann, alpha 0.05) of per-image top-1 correctness "
                                       f"declares equivalence within +-{frac:g}{how}"),),
        not_reproduced=(Beyond("top-1 difference (fraction)", frac, level=90),))


def intermediate_layer_rule(margin: float) -> Criteria:
    """The gap at the intermediate block above 0 and above the early and the late block's."""
    mid_e, mid_l = "gap(intermediate) - gap(early)", "gap(intermediate) - gap(late)"
    return Criteria(reproduced=(Above("gap(intermediate)", 0), Above(mid_e, 0), Above(mid_l, 0)),
                    not_reproduced=(Below(mid_e, 0), Below(mid_l, 0),
                                    AllOf((Inside(mid_e, margin), Inside(mid_l, margin)))))


def low_keep_rate_rule(margin: float) -> Criteria:
    """The gap at the low keep rate above 0 and above the high keep rate's."""
    low_high = "gap(low keep) - gap(high keep)"
    return Criteria(reproduced=(Above("gap(low keep)", 0), Above(low_high, 0)),
                    not_reproduced=(Below(low_high, 0), Inside(low_high, margin)))


def larger_model_null_rule(margin: float) -> Criteria:
    """The larger model's gap equivalent to 0 while the small model's is positive."""
    return Criteria(reproduced=(_tost("tost_equivalent", "the larger model's per-image coverage gap", margin),
                                Above("small-model gap", 0)),
                    not_reproduced=(Above("larger-model gap", margin),))


def capacity_control_rule(controls: list[str], margin: float) -> Criteria:
    """The capacity-control rule for the controls trained (mimic; task where it was trained)."""
    diffs = [f"sensitivity - {c}" for c in controls]
    return Criteria(
        reproduced=tuple(Above(x, 0) for x in diffs) + (Above("sensitivity - cls_attention", 0),),
        not_reproduced=tuple(Below(x, 0) for x in diffs) + tuple(Inside(x, margin) for x in diffs))


# ---------------------------------------------------------------------------------------------- declarations
def _per_dataset(key: str, *, statement: str, quote: str, paragraph: int, kind: str, on_rule_holds: str,
                 paper_number: Optional[tuple], rule: Any, unit: str, effect: Optional[float], inner: tuple,
                 section: str, headline: bool, measured_everywhere: bool = True,
                 parts_inner: tuple = ()) -> list[Declaration]:
    """The declarations of claim ``key`` on SynthBirds (notebook 00's fine-grained proxy: its bar as premise, which
    carries the fallback's distance from the cost bands), on cluttered Fashion-MNIST (a classification model: the
    premise that notebook 00 chose a classification proxy, which fails as not testable when none qualified) and at
    paper scale (the training runs' whole schedule as premise); the statement names where it is decided.
    ``measured_everywhere`` False: only SynthBirds has what the claim needs (no unit, premise or rule elsewhere;
    ``would_decide`` says what would). ``parts_inner``: premises of SynthBirds' declaration only (about its
    construction). A declared ``effect`` is the summary's figure for :data:`GAIN_DATASET`: the proxies' declarations
    carry none (:func:`effect_in_dispute`)."""
    where = _SUMMARY.format(n=paragraph)
    out = []
    for cid, setting, outer, on in (
            (f"decouple.{key}.parts", "proxy", (FINE_GRAINED_BAR,), "on SynthBirds, the fine-grained proxy"),
            (f"decouple.{key}.fmnist", "proxy", (PROXY_CHOSEN,), "on cluttered Fashion-MNIST"),
            (paper_scale_id(f"decouple.{key}.{{dataset}}"), "paper-scale run", (FULL_SCHEDULE,), "")):
        measured = measured_everywhere or cid.endswith(".parts")
        own = parts_inner if cid.endswith(".parts") else ()
        out.append(Declaration(
            id=cid, kind=kind, on_rule_holds=on_rule_holds, statement=f"{statement} ({on})" if on else statement,
            quote=quote, where=where, paper_number=paper_number, rule=rule if measured else None,
            unit=unit if measured else "", effect=effect if measured and setting != "proxy" else None,
            premises=(*inner, *own, *outer) if measured else (), setting=setting, section=section,
            would_decide=None if measured else _NO_HUMANS, headline=headline))
    return out


_Q = '"{}"'.format

_DECLARATIONS = [
    *_per_dataset(
        "coverage_gain", statement="the sensitivity scorer's coverage exceeds [CLS] attention's by more than "
                                   f"{GAIN_THRESHOLD_PP:g} points (the summary gives the figure for FGVC-Aircraft "
                                   "only: decided there; elsewhere the direction is coverage_better)",
        quote=_Q(QUOTE["coverage_gain_aircraft"]), paragraph=4, kind="paper claim", on_rule_holds="reproduced",
        paper_number=("DECOUPLE", "coverage_gain_aircraft_pp"), rule=coverage_gain_rule, unit="pp {coverage}",
        effect=GAIN_THRESHOLD_PP, inner=(FIGURE_FOR_DATASET,), section="§5", headline=True),
    *_per_dataset(
        "coverage_better", statement="a scorer trained with a sensitivity signal keeps more coverage than [CLS] "
                                     "attention (the direction)",
        quote=_Q(QUOTE["coverage_better"]), paragraph=4, kind="paper claim", on_rule_holds="reproduced",
        paper_number=None, rule=coverage_better_rule, unit="pp {coverage}", effect=GAIN_THRESHOLD_PP, inner=(),
        section="§5", headline=True),
    *_per_dataset(
        "beats_centre_prior", statement="(objection) the coverage gain is no more than a content-free centre prior "
                                        "gives: the sensitivity scorer does not cover more than the centre prior",
        quote=_Q(QUOTE["coverage_better"]), paragraph=4, kind="reviewer objection", on_rule_holds="rejected",
        paper_number=None, rule=BEATS_CENTRE_RULE, unit="pp {coverage}, sensitivity head - centre prior",
        effect=None, inner=(), section="§5", headline=False),
    *_per_dataset(
        "centre_prior_everywhere", statement="(objection) a content-free centre prior covers more than the "
                                             "sensitivity scorer at some scored (block, keep rate)",
        quote=_Q(QUOTE["coverage_better"]), paragraph=4, kind="reviewer objection", on_rule_holds="rejected",
        paper_number=None, rule=centre_prior_everywhere_rule,
        unit="pp {coverage}, sensitivity head - centre prior at block {block}, keep {keep:g} (the lowest estimate; "
             "{level:.2f} % Bonferroni interval over {configurations} configurations)",
        effect=None, inner=(), section="§5", headline=False),
    *_per_dataset(
        "decoupled", statement="coverage and faithfulness are decoupled across configurations (the title)",
        quote=_Q(QUOTE["decouple"]), paragraph=2, kind="paper claim", on_rule_holds="reproduced",
        paper_number=None, rule=DECOUPLED_RULE, unit="Spearman rho (coverage vs agreement across configurations)",
        effect=None, inner=(ENOUGH_CONFIGS, SENSITIVITY_KNOWN), section="§7", headline=True),
    *_per_dataset(
        "decoupled_equal_keep", statement="coverage and faithfulness are decoupled across configurations of equal "
                                          "keep rate",
        quote=_Q(QUOTE["decouple"]), paragraph=2, kind="paper claim", on_rule_holds="reproduced",
        paper_number=None, rule=DECOUPLED_EQUAL_KEEP_RULE,
        unit="Spearman rho (coverage vs agreement across configurations)", effect=None,
        inner=(ENOUGH_CONFIGS_PER_KEEP, SENSITIVITY_KNOWN), section="§7", headline=False),
    *_per_dataset(
        "equal_faithfulness", statement="faithfulness (top-1 agreement of the pruned with the unpruned model) of the "
                                        "sensitivity scorer is almost identical to [CLS] attention's",
        quote='"Yet, when they checked the faithfulness—the ability of the pruned model to make the same correct '
              'decision as the full model—the two methods were almost identical"',
        paragraph=4, kind="paper claim", on_rule_holds="reproduced", paper_number=("DECOUPLE", "faithfulness"),
        rule=equal_faithfulness_rule, unit="pp agreement (90% CI)", effect=None, inner=(CEILING, SENSITIVITY_KNOWN),
        section="§6", headline=True),
    *_per_dataset(
        "just_as_accurate", statement="the model pruned by the sensitivity-trained scorer is just as accurate (top-1) "
                                      "as the one pruned by [CLS] attention, the standard method whose fast system "
                                      "the sentence compares with (its speed: decouple.just_as_fast.deit_s_224)",
        quote=_Q(QUOTE["just_as_fast"]), paragraph=7, kind="paper claim", on_rule_holds="reproduced",
        paper_number=None, rule=just_as_accurate_rule, unit="pp top-1, sensitivity head - [CLS] attention (90% CI)",
        effect=None, inner=(ACCURACY_CEILING, SENSITIVITY_KNOWN), section="§6", headline=False),
    *_per_dataset(
        "intermediate_layer", statement="the coverage gap is largest when scoring at an intermediate block (its "
                                        "disappearance early and late is early_late_null)",
        quote=_Q(QUOTE["intermediate"]), paragraph=5, kind="paper claim", on_rule_holds="reproduced",
        paper_number=None, rule=intermediate_layer_rule,
        unit="pp: gap(block {mid}) - gap(block {other}), the smaller of the two differences", effect=None,
        inner=(), parts_inner=(EARLY_PARTS_HIDDEN,), section="§5", headline=False),
    *_per_dataset(
        "early_late_null", statement="the coverage gap disappears when scoring at the early and at the late block",
        quote=_Q(QUOTE["early_late"]), paragraph=5, kind="paper claim", on_rule_holds="reproduced",
        paper_number=None, rule=early_late_null_rule,
        unit="pp {coverage}: gap at block {block}, the larger of early/late in absolute value", effect=None,
        inner=(), parts_inner=(EARLY_PARTS_HIDDEN,), section="§5", headline=False),
    *_per_dataset(
        "low_keep_rate", statement="the coverage gap is largest at low keep rates",
        quote=_Q(QUOTE["low_keep"]), paragraph=5, kind="paper claim", on_rule_holds="reproduced",
        paper_number=None, rule=low_keep_rate_rule, unit="pp: gap(keep {low:g}) - gap(keep {high:g})", effect=None,
        inner=(), section="§5", headline=False),
    *_per_dataset(
        "capacity_control", statement="a capacity-matched head not trained with the sensitivity signal does not "
                                      "show the coverage gain",
        quote=_Q(_CAPACITY), paragraph=6, kind="paper claim", on_rule_holds="reproduced", paper_number=None,
        rule=capacity_control_rule, unit="pp {coverage}: sensitivity head minus the closest control", effect=None,
        inner=(), section="§5", headline=False),
    *_per_dataset(
        "human_features", statement="the sensitivity scorer selects the patches of the features humans would use "
                                    "(stand-in: coverage of SynthBirds' class-defining parts, sensitivity head - "
                                    "[CLS] attention)",
        quote=_Q(QUOTE["human_features"]), paragraph=6, kind="paper claim", on_rule_holds="reproduced",
        paper_number=None, rule=human_features_rule, unit="pp class-defining-part coverage", effect=None,
        inner=(STAND_IN,), section="§5", headline=False, measured_everywhere=False),
    *_per_dataset(
        "larger_model_null", statement="the coverage gap vanishes for a much larger model (the summary names none; "
                                       "our stand-in: DeiT-B at the paper profile, ViT-S/14 below it)",
        quote=_Q(QUOTE["larger_model"]), paragraph=8, kind="paper claim", on_rule_holds="reproduced",
        paper_number=("DECOUPLE", "quotes", "larger_model_value"), rule=larger_model_null_rule,
        unit="pp {coverage} gap of the larger model", effect=None, inner=(), section="§5", headline=False),
    Declaration(
        id="decouple.just_as_fast.deit_s_224",
        statement="the sensitivity-trained scorer costs no more than EViT's [CLS] attention (extra MACs of the head, "
                  "DeiT-S at 224 px, pruned once at block 6)", quote=_Q(QUOTE["just_as_fast"]),
        where=_SUMMARY.format(n=7), rule=JUST_AS_FAST_RULE,
        unit="% of the unpruned DeiT-S MACs (largest over keep rates)", setting="analytic at paper scale",
        premises=(HEAD_SIZE_GIVEN,), section="§9"),
]

CLAIMS = DeclarationTable("decouple", _DECLARATIONS)


def declaration(key: str, dataset: str) -> tuple[Declaration, dict]:
    """The declaration of claim ``key`` on ``dataset`` and the keys its id needs (the paper-scale id on the paper's
    datasets, :data:`tokenprune.study.decoupling.data.PAPER_DIRS`)."""
    if dataset in PAPER_DIRS:
        return CLAIMS[paper_scale_id(f"decouple.{key}.{{dataset}}")], {"dataset": dataset}
    return CLAIMS[f"decouple.{key}.{dataset}"], {}


def effect_in_dispute(decl: Declaration, cfg: SimpleNamespace, dataset: Optional[str] = None,
                      sensitivity: Optional[float] = None) -> float:
    """The effect in dispute of a comparison claim, in points: its declared effect (the summary's six points for the
    coverage gain and its sign, on :data:`GAIN_DATASET` only: on another ``dataset`` the figure is not transferred),
    else the smallest difference its rule counts, the ``margin`` parameter (also the equivalence margin of the
    'almost identical' and 'disappears' claims), x the proxy's ``sensitivity`` factor where the claim's margin is in
    ImageNet points (:data:`SCALED_MARGIN_KEYS`)."""
    if decl.effect is not None and dataset in (None, GAIN_DATASET):
        return float(decl.effect)
    key = decl.id.split(".")[-2]
    return scaled_margin(cfg.margin, sensitivity) if key in SCALED_MARGIN_KEYS else float(cfg.margin)


def rule_texts(cfg: SimpleNamespace) -> dict[str, str]:
    """Each claim's rule at ``cfg`` (every control trained), by claim key, as the notebook shows them."""
    m, seeds = cfg.margin, len(cfg.seeds)
    made = {
        "coverage_gain": coverage_gain_rule(seeds), "coverage_better": coverage_better_rule(seeds, m),
        "beats_centre_prior": BEATS_CENTRE_RULE,
        "centre_prior_everywhere": centre_prior_everywhere_rule(len(cfg.blocks) * len(cfg.keep_rates), m),
        "decoupled": DECOUPLED_RULE, "decoupled_equal_keep": DECOUPLED_EQUAL_KEEP_RULE,
        "equal_faithfulness": equal_faithfulness_rule(m), "just_as_accurate": just_as_accurate_rule(m),
        "intermediate_layer": intermediate_layer_rule(m),
        "early_late_null": early_late_null_rule(m), "low_keep_rate": low_keep_rate_rule(m),
        "capacity_control": capacity_control_rule(["mimic", "task"], m),
        "human_features": human_features_rule(seeds, m),
        "larger_model_null": larger_model_null_rule(m), "just_as_fast": JUST_AS_FAST_RULE,
    }
    return {k: r.text for k, r in made.items()}
