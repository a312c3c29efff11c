"""EViT's claims as declared before any data (:data:`CLAIMS`): the source's words, where they are printed, the kind
of claim, the rule that decides it and the premises it rests on. The experiments decide and file them
(:func:`tokenprune.study.claims.file_claim`); the rules that need measured inputs are the small functions here."""
from __future__ import annotations

from typing import Sequence

from tokenprune.study import verdicts
from tokenprune.study.proxy.chosen import FINE_GRAINED_BAR, PROXY_BAR, PROXY_CHOSEN
from tokenprune.study.claims import Declaration, DeclarationTable
from tokenprune.study.paper_runs import FULL_SCHEDULE
from tokenprune.study.proxy.audit_model import MOVED

__all__ = ["CLAIMS", "OWN_TEST", "TOP5_NOT_AT_CEILING", "TOP5_CEILING", "ORACLE_GUIDES", "HIRES_USABLE",
           "FUSION_MAC_PRECISION", "ORACLE_MAC_TOLERANCE_PP", "SPEEDUP_TOLERANCE", "token_counts_rule",
           "printed_gmacs_rule", "unchanged_counts_rule", "speedup_rule", "equivalence_rule", "cost_rule",
           "parts_rule", "FUSION_BEATS_DROP", "DROP_BEATS_FUSION", "SEED_SPREAD_RULE", "FASTER", "SLOWER"]

#: fusion "adds no computational overhead": the paper's print precision (0.1 GMACs: EViT's tables give one MAC
#: figure for fused and dropped), not a tolerance chosen from our count
FUSION_MAC_PRECISION = 0.1
#: Table 6's "-36 %": a keep rate of Table 2 within this many points of it (the text rounds to whole percent;
#: torchprofile and our count differ by up to ~1 % of the MACs)
ORACLE_MAC_TOLERANCE_PP = 1.0
#: the speedups' tolerance as a share of the paper's ratio: 0.10 separates the claimed +50 % (DeiT-S) from +35 % and
#: the +26 % of DeiT-B from +13 %
SPEEDUP_TOLERANCE = 0.10
#: top-5 "at its ceiling": above this share (%) of images the unpruned model's top-5 cannot show a pruning cost
TOP5_CEILING = 99.0

OWN_TEST = "the evaluation images are the model's own test distribution"
TOP5_NOT_AT_CEILING = f"top-5 is not at its ceiling (unpruned top-5 below {TOP5_CEILING:g} %)"
ORACLE_GUIDES = "the oracle guides better than the model's own attention at 4/7/10, keep 0.7"
HIRES_USABLE = "the unpruned higher-resolution model is not significantly worse than the unpruned 28-px one"

FUSION_BEATS_DROP = verdicts.Direction(">", test=True)
DROP_BEATS_FUSION = verdicts.Direction("<", test=True)
FASTER = verdicts.Direction(">", threshold=1.0, unit="x")
SLOWER = verdicts.Direction("<", threshold=1.0, unit="x")
#: fusion's smaller seed spread: one-sided F-tests of the seed variances, either way
SEED_SPREAD_RULE = verdicts.Criteria(
    reproduced=(verdicts.Flag("dropped > fused", "the one-sided F-test of the seed variances (dropped > fused) has "
                                                 "p < 0.05"),),
    not_reproduced=(verdicts.Flag("fused > dropped", "the opposite one-sided F-test (fused > dropped) has p < 0.05"),))


def token_counts_rule(want: Sequence[int]) -> verdicts.Exact:
    """The official code's token counts, exactly."""
    return verdicts.Exact(list(want), what="token counts")


def printed_gmacs_rule(paper_gmacs: float) -> verdicts.Rounded:
    """Our count rounded as the paper prints it (0.1 GMACs) equals the printed figure."""
    return verdicts.Rounded(paper_gmacs, 1)


def unchanged_counts_rule(before: dict) -> verdicts.Exact:
    """The patched model's parameter and buffer counts equal the unpatched ones, and no name is new."""
    return verdicts.Exact(before, what="parameter and buffer counts of the patched model")


def speedup_rule(paper_speedup: float, tolerance: float = SPEEDUP_TOLERANCE) -> verdicts.Magnitude:
    """Our 95 % interval meets the paper's ratio +- ``tolerance`` x that ratio."""
    tol = round(tolerance * paper_speedup, 4)
    return verdicts.Magnitude(paper_speedup, tol, unit=f"x (+-{tolerance:.0%} of the paper's ratio)")


def equivalence_rule(margin_pp: float) -> verdicts.Equivalence:
    """TOST within the equivalence margin (the profile's ``margin_pp``)."""
    return verdicts.Equivalence(margin_pp)


def cost_rule(paper_cost: float, margin_pp: float) -> verdicts.Direction:
    """Non-inferiority: the cost's 95 % interval below the paper's cost plus the margin."""
    return verdicts.Direction("<", threshold=paper_cost + margin_pp)


def parts_rule(names: Sequence[str]) -> verdicts.Criteria:
    """A claim made of parts, each decided by its own rule: it holds when every part holds, fails when any fails."""
    return verdicts.Criteria(
        reproduced=tuple(verdicts.Flag(f"{n} reproduced", f"{n} is reproduced") for n in names),
        not_reproduced=tuple(verdicts.Flag(f"{n} not reproduced", f"{n} is not reproduced") for n in names))


def _fusion_condition() -> verdicts.Condition:
    return verdicts.Condition(
        f"reproduced when the fused and the dropped model's analytic GMACs round to the same figure at the paper's "
        f"precision ({FUSION_MAC_PRECISION:g} GMACs) at every keep rate of Table 2 (deit_small_patch16_224, 224 px)")


_README = ("README, DeiT-S (top-1 / GMACs / img/s on A100), fused vs not fused: 0.9: 79.8 / 4.0 / 3197 vs 79.9; "
           "0.8: 79.8 / 3.5 / 3619 vs 79.7; 0.7: 79.5 / 3.0 / 4385 vs 79.4; 0.6: 78.9 / 2.6 / 4722 vs 79.1; "
           "0.5: 78.5 / 2.3 / 5408 vs 78.4. Unpruned DeiT-S: 79.8 / 4.6.")
_FUSION_TEXT = ("\"As shown in Table 2, token reorganization with inattentive token fusion typically outperforms the "
                "one without inattentive token fusion.\" and the README row: " + _README)
_HEADLINE = ("\"with the same amount of input image tokens, our method speeds up the DeiT-S model by 50%, while only "
             "sacrificing 0.3% recognition accuracy on ImageNet classification\"")
_ORACLE_TEXT = ("\"by using an oracle ViT to guide the token reorganization process, our method can increase the "
                "accuracy of the original DeiT-S from 79.8% to 80.7% while reducing its computation cost by 36% under "
                "the multiply-accumulate computation (MAC) metric\"")
_TRAIN = ("EViT's fine-tuning of DeiT-S on ImageNet-1k (recipe evit_deit_s_finetune: 30 epochs, 8 GPUs, torchrun -m "
          "tokenprune paper-train) or its 300-epoch training from scratch (evit_deit_s_scratch; 16 A100s in the paper)")
_PROXY = (PROXY_BAR, PROXY_CHOSEN)
_FT = (MOVED, PROXY_BAR, PROXY_CHOSEN)


def _paper_scale(keep: float, fused: bool) -> Declaration:
    """Table 2's top-1 of EViT-DeiT-S trained at ``keep`` with or without fusion, decided on the paper profile's run."""
    column = "top1" if fused else "top1_no_fusion"
    from tokenprune.study.paper_numbers import EVIT

    top1 = EVIT["deit_small_patch16_224"]["keep"][keep][column]
    return Declaration(
        id=f"evit.paper_scale.top1.deit_s.keep{keep:g}" + ("" if fused else ".dropped"), paper="evit",
        statement=f"DeiT-S trained with EViT at keep {keep:g} {'with' if fused else 'without'} fusion reaches {top1} % "
                  "ImageNet top-1",
        quote=_README, where="EViT README / Table 2", kind="paper claim", on_rule_holds="reproduced",
        paper_number=("EVIT", "deit_small_patch16_224", "keep", keep, column),
        rule=verdicts.Magnitude(top1, 0.0, unit="% top-1"), unit="% top-1", effect=None, premises=(FULL_SCHEDULE,),
        setting="paper-scale run", section="§4", family=None, would_decide=None, headline=fused and keep == 0.7)


def _training(id: str, statement: str, quote: str, where: str, paper_number, unit: str, would_decide: str,
              headline: bool = False) -> Declaration:
    """A claim about a model trained with EViT at the paper's scale, which this machine cannot train."""
    return Declaration(
        id=id, paper="evit", statement=statement, quote=quote, where=where, kind="paper claim",
        on_rule_holds="reproduced", paper_number=paper_number, rule=None, unit=unit, effect=None, premises=(),
        setting="paper-scale run", section="§4", family=None, would_decide=would_decide, headline=headline)


CLAIMS = DeclarationTable("evit", [
    # §1 token counts
    Declaration(
        id="evit.tokens.deit_s.keep0.7.{reducer}", paper="evit",
        statement="DeiT-S at keep 0.7 {with_} fusion keeps {counts} patch tokens at blocks 4/7/10",
        quote="\"DeiT-S keep 0.7 token counts: 196 -> 139 -> 99 -> 71 (fused), 196 -> 138 -> 97 -> 68 (no fusion)\"",
        where="evit.py (official code)", kind="consistency check", on_rule_holds="consistent",
        paper_number=("EVIT", "deit_small_patch16_224", "token_counts_keep0.7", "{reducer}"), rule=token_counts_rule,
        unit="tokens", effect=None, premises=(), setting="analytic at paper scale", section="§1", family=None,
        would_decide=None, headline=False),
    # §2 MACs and parameters
    Declaration(
        id="evit.macs.deit_s.keep{keep:g}", paper="evit", statement="deit_small_patch16_224 at keep {keep:g} costs "
        "{gmacs} GMACs", quote=_README, where="EViT README / Table 2", kind="paper claim", on_rule_holds="reproduced",
        paper_number=None, rule=printed_gmacs_rule, unit="GMACs", effect=None, premises=(),
        setting="analytic at paper scale", section="§2", family=None, would_decide=None, headline=False),
    Declaration(
        id="evit.macs.deit_b.keep{keep:g}", paper="evit", statement="deit_base_patch16_224 at keep {keep:g} costs "
        "{gmacs} GMACs", quote="DeiT-B: 17.6 GMACs (Table 8's baseline row)", where="EViT Table 8 (DeiT-B baseline)",
        kind="paper claim", on_rule_holds="reproduced", paper_number=("EVIT", "deit_base_patch16_224", "baseline",
                                                                      "gmacs"),
        rule=printed_gmacs_rule, unit="GMACs", effect=None, premises=(), setting="analytic at paper scale",
        section="§2", family=None, would_decide=None, headline=False),
    Declaration(
        id="evit.params.no_additional", paper="evit", statement="EViT brings no additional parameters into the ViT",
        quote="\"Unlike DynamicViT, our method does not need a fully trained ViT to help the training and brings no "
              "additional parameters into ViT.\"", where="EViT Sec. 1, Sec. 2 and Conclusion", kind="paper claim",
        on_rule_holds="reproduced", paper_number=None, rule=unchanged_counts_rule,
        unit="parameters added by tokenprune.patch (patched - unpatched)", effect=None, premises=(),
        setting="analytic at paper scale", section="§2", family=None, would_decide=None, headline=False),
    Declaration(
        id="evit.t2.fusion_no_overhead.deit_s", paper="evit",
        statement="Inattentive-token fusion introduces no additional computational overhead compared with dropping "
                  "the inattentive tokens",
        quote="\"Although the improvement is small, there is no additional computational overhead introduced.\"",
        where="EViT Sec. 4.2 (inattentive token fusion) and Appendix (Table 9)", kind="paper claim",
        on_rule_holds="reproduced", paper_number=None, rule=_fusion_condition(),
        unit="fused / dropped analytic MACs - 1 (largest over keep 0.9-0.5)", effect=None, premises=(),
        setting="analytic at paper scale", section="§2", family=None, would_decide=None, headline=False),
    Declaration(
        id="evit.t6.oracle_init_mac_reduction", paper="evit",
        statement="EViT-DeiT-S guided by an oracle reduces DeiT-S's computation cost by 36 % (MACs)",
        quote=_ORACLE_TEXT, where="EViT Sec. 1 and Sec. 4.2 (Table 6)", kind="paper claim",
        on_rule_holds="reproduced", paper_number=("EVIT_TEXT", "oracle_init_deit_s", "mac_reduction"),
        rule=verdicts.Condition(f"reproduced when a keep rate of Table 2 (0.9-0.5, blocks 4/7/10, fused, 224 px) "
                                f"reduces DeiT-S's analytic MACs by 36 +- {ORACLE_MAC_TOLERANCE_PP:g} points"),
        unit="% fewer analytic MACs than DeiT-S (nearest keep rate of Table 2)", effect=None, premises=(),
        setting="analytic at paper scale", section="§2", family=None, would_decide=None, headline=True),
    Declaration(
        id="evit.t7.fewer_params_than_dynamicvit", paper="evit", statement="EViT uses fewer parameters than DynamicViT",
        quote="\"The results in Table 7 show that EViT outperforms DynamicViT in recognition accuracy under the same "
              "computational cost while EViT uses fewer parameters.\"", where="EViT Sec. 4.2 (Table 7)",
        kind="consistency check", on_rule_holds="consistent", paper_number=None,
        rule=verdicts.Condition("reproduced when the patched EViT DeiT-S has fewer parameters than the "
                                "DynamicViT-shaped DeiT-S"),
        unit="parameters (DynamicViT-shaped - EViT, DeiT-S)", effect=None, premises=(),
        setting="analytic at paper scale", section="§2", family=None, would_decide=None, headline=False),
    Declaration(
        id="evit.t7.same_macs_as_dynamicvit.keep{keep:g}", paper="evit",
        statement="EViT and DynamicViT are compared at the same computational cost (keep {keep:g})",
        quote="\"EViT outperforms DynamicViT in recognition accuracy under the same computational cost\"",
        where="EViT Sec. 4.2 (Table 7)", kind="paper claim", on_rule_holds="reproduced", paper_number=None,
        rule=verdicts.Condition("reproduced when the two analytic MAC counts differ by at most 0.1 GMACs (the paper's "
                                "printed precision)"),
        unit="GMACs (EViT - DynamicViT-shaped, DeiT-S, 224 px)", effect=None, premises=(),
        setting="analytic at paper scale", section="§2", family=None, would_decide=None, headline=False),
    # §3 throughput
    Declaration(
        id="evit.speedup.deit_s.keep{keep:g}", paper="evit",
        statement="EViT-deit_s at keep {keep:g} is 50% faster than the unpruned model",
        quote="\"DeiT-S trained with EViT with a keep rate of 0.7 increase the inference throughput by 50% while "
              "maintaining the Top-1 accuracy reduction within 0.3% on ImageNet.\"",
        where="EViT Sec. 4.1 (A100, batch 128)", kind="paper claim", on_rule_holds="reproduced",
        paper_number=("EVIT", "deit_small_patch16_224", "speedup_keep0.7"), rule=speedup_rule, unit="x speedup",
        effect=None, premises=(), setting="timed on this machine", section="§3", family=None, would_decide=None,
        headline=True),
    Declaration(
        id="evit.speedup.deit_b.keep{keep:g}", paper="evit",
        statement="EViT-deit_b at keep {keep:g} is 26% faster than the unpruned model",
        quote="\"EViT-DeiT-B with a keep rate of 0.8 increases inference throughput by 26% while maintaining the "
              "Top-1 accuracy reduction within 0.1% on ImageNet.\"", where="EViT Appendix, Table 8 (A100)",
        kind="paper claim", on_rule_holds="reproduced", paper_number=("EVIT", "deit_base_patch16_224",
                                                                      "speedup_keep0.8"),
        rule=speedup_rule, unit="x speedup", effect=None, premises=(), setting="timed on this machine", section="§3",
        family=None, would_decide=None, headline=False),
    # §4 accuracy at the paper's scale
    Declaration(
        id="evit.top1.deit_s.keep0.7", paper="evit",
        statement="DeiT-S with EViT at keep 0.7 loses 0.3 points of ImageNet top-1 (79.8 -> 79.5)", quote=_HEADLINE,
        where="EViT README / Table 2", kind="paper claim", on_rule_holds="reproduced",
        paper_number=("EVIT", "deit_small_patch16_224", "keep", 0.7, "top1"), rule=None, unit="% top-1", effect=None,
        premises=(), setting="paper-scale run", section="§4", family=None,
        would_decide="the paper profile: ImageNet-1k validation images and DeiT-S / EViT weights from local paths "
                     "(-p imagenet_root PATH -p deit_s_weights FILE [-p evit_weights FILE]); it decides "
                     "evit.paper_scale.top1.deit_s.keep0.7", headline=True),
    _training("evit.top1.deit_s.keep{keep:g}", "DeiT-S trained with EViT at keep {keep:g} with fusion reaches {top1} % "
              "ImageNet top-1", _README, "EViT README / Table 2", ("EVIT", "deit_small_patch16_224", "keep", "{keep}",
                                                                   "top1"), "% top-1",
              f"{_TRAIN} at keep {{keep:g}} with fusion, then ImageNet val: the paper profile trains it and decides "
              "evit.paper_scale.top1.deit_s.keep{keep:g} (-p paper_train_keep_rates [{keep:g}])"),
    _training("evit.top1.deit_s.keep{keep:g}.dropped", "DeiT-S trained with EViT at keep {keep:g} without fusion "
              "reaches {top1} % ImageNet top-1", _README, "EViT README / Table 2",
              ("EVIT", "deit_small_patch16_224", "keep", "{keep}", "top1_no_fusion"), "% top-1",
              f"{_TRAIN} at keep {{keep:g}} without fusion, then ImageNet val: the paper profile trains it and decides "
              "evit.paper_scale.top1.deit_s.keep{keep:g}.dropped (-p paper_train_keep_rates [{keep:g}] "
              "-p paper_train_dropped true)"),
    _training("evit.t4.longer_training_improves", "EViT-DeiT-S at keep 0.7 improves steadily when trained for 450 and "
              "600 epochs instead of 300 (Table 4's numbers are not in our sources)",
              "\"As shown in Table 4, their performance steadily improves with training epochs.\"",
              "EViT Sec. 4.2 (Table 4)", None, "% top-1",
              "three trainings from scratch of EViT-DeiT-S at keep 0.7 on ImageNet-1k (300, 450, 600 epochs, 16 A100s "
              "in the paper), a seed each at least"),
    _training("evit.t6.oracle_init_accuracy", "EViT-DeiT-S initialised from a trained DeiT-S (the oracle) raises top-1 "
              "from 79.8 to 80.7 % (its MAC half: evit.t6.oracle_init_mac_reduction)", _ORACLE_TEXT,
              "EViT Sec. 1 and Sec. 4.2 (Table 6)", ("EVIT_TEXT", "oracle_init_deit_s", "top1_after"), "% top-1",
              f"{_TRAIN}, initialised from the trained DeiT-S, with the vanilla EViT setup", headline=True),
    _training("evit.t7.beats_dynamicvit_accuracy", "EViT outperforms DynamicViT in top-1 at the same computational "
              "cost, fine-tuned and trained from scratch (Table 7's numbers are not in our sources; its analytic "
              "half: evit.t7.*)", "\"The results in Table 7 show that EViT outperforms DynamicViT in recognition "
              "accuracy under the same computational cost while EViT uses fewer parameters.\"",
              "EViT Sec. 4.2 (Table 7)", None, "top-1 points (EViT - DynamicViT)",
              "DynamicViT (predictors, distillation and KL losses from a teacher) and EViT each fine-tuned from DeiT-S "
              "and trained from scratch for 300 epochs on ImageNet-1k"),
    _training("evit.t8.deit_b_cost_keep0.8", "EViT-DeiT-B at keep 0.8 loses at most 0.1 point of ImageNet top-1",
              "\"EViT-DeiT-B with a keep rate of 0.8 increases inference throughput by 26% while maintaining the "
              "Top-1 accuracy reduction within 0.1% on ImageNet.\"", "EViT Appendix (Table 8)",
              ("EVIT", "deit_base_patch16_224", "top1_drop_keep0.8_within"), "top-1 points lost",
              "EViT-DeiT-B trained at keep 0.8 (and DeiT-B) on ImageNet-1k, evaluated on ImageNet val"),
    _training("evit.t9.fusion_beats_drop_high_res", "Trained on higher-resolution images, EViT with inattentive-token "
              "fusion outperforms plain removal, especially in top-5 (Table 9's numbers are not in our sources)",
              "\"In this scenario, EViT with inattentive token fusion also outperforms the EViT with vanilla "
              "inattentive token removal, especially in the Top-5 accuracy, as shown in Table 9.\"",
              "EViT Appendix (Table 9)", None, "top-1 / top-5 points (fused - dropped)",
              "EViT-DeiT-S trained at a higher resolution (e.g. 256 px) with and without fusion on ImageNet-1k, "
              "several seeds each (the differences are small)"),
    _training("evit.t12.finetune_high_res", "EViT-DeiT-S fine-tuned from low- to high-resolution images (position "
              "embedding interpolated) works well, but training directly at the high resolution is better (Table 12's "
              "numbers are not in our sources)", "\"However, directly training on higher resolution images seems a "
              "better way to train EViT, as it requires less training time (because no finetuning is performed) and "
              "typically obtains higher accuracy than finetuning.\"", "EViT Appendix (Table 12)", None, "% top-1",
              "EViT-DeiT-S trained at 224 px, then fine-tuned at a higher resolution, against one trained at that "
              "resolution from scratch, on ImageNet-1k (§11 fine-tunes the small ViT only briefly)"),
    Declaration(
        id="evit.paper_scale.top1.deit_s.baseline", paper="evit", statement="DeiT-S reaches 79.8 % ImageNet top-1",
        quote=_README, where="EViT README / Table 2", kind="consistency check", on_rule_holds="consistent",
        paper_number=("EVIT", "deit_small_patch16_224", "baseline", "top1"),
        rule=verdicts.Magnitude(79.8, 0.0, unit="% top-1"), unit="% top-1", effect=None, premises=(FULL_SCHEDULE,),
        setting="paper-scale run", section="§4", family=None, would_decide=None, headline=False),
    *[_paper_scale(k, fused) for k in (0.9, 0.8, 0.7, 0.6, 0.5) for fused in (True, False)],
    # §6a off the shelf on the proxy
    Declaration(
        id="evit.t2.fusion_beats_drop.keep{keep:g}.off_the_shelf", paper="evit",
        statement="At keep {keep:g}, fusing the inattentive tokens gives higher top-1 than dropping them (DeiT-S "
                  "{fused} fused vs {dropped} dropped: a direction claim about a {paper_diff:g}-point difference)",
        quote=_FUSION_TEXT, where="EViT Table 2 / README", kind="paper claim", on_rule_holds="reproduced",
        paper_number=None, rule=FUSION_BEATS_DROP, unit="top-1 points (fused - dropped)", effect=None,
        premises=_PROXY, setting="proxy", section="§6a", family="evit.t2.fusion_vs_drop.off_the_shelf",
        would_decide=None, headline=False),
    Declaration(
        id="evit.t2.drop_beats_fusion.keep{keep:g}.off_the_shelf", paper="evit",
        statement="At keep {keep:g}, dropping the inattentive tokens gives higher top-1 than fusing them (DeiT-S "
                  "{fused} fused vs {dropped} dropped: a direction claim about a {paper_diff:g}-point difference)",
        quote=_FUSION_TEXT, where="EViT Table 2 / README", kind="paper claim", on_rule_holds="reproduced",
        paper_number=None, rule=DROP_BEATS_FUSION, unit="top-1 points (fused - dropped)", effect=None,
        premises=_PROXY, setting="proxy", section="§6a", family="evit.t2.fusion_vs_drop.off_the_shelf",
        would_decide=None, headline=False),
    Declaration(
        id="evit.t1.removal_without_training_hurts.keep{keep:g}", paper="evit",
        statement="Directly removing the tokens with the smallest [CLS] attention, without training with pruning, "
                  "deteriorates top-1 (Table 1's numbers are not in our sources; effect in dispute: the margin)",
        quote="\"However, we find that directly removing those tokens severely deteriorates the classification "
              "accuracy, as shown in Table 1.\"", where="EViT Sec. 3 (Table 1)", kind="paper claim",
        on_rule_holds="reproduced", paper_number=None, rule=verdicts.Direction(">", test=True),
        unit="top-1 points (unpruned - dropped)", effect=None, premises=_PROXY, setting="proxy", section="§6a",
        family=None, would_decide=None, headline=False),
    Declaration(
        id="evit.t2.top5_kept.keep{keep:g}.off_the_shelf", paper="evit",
        statement="EViT at keep {keep:g} keeps top-5 accuracy close to the unpruned model's (effect in dispute: the "
                  "margin)", quote=_FUSION_TEXT, where="EViT Table 2 (top-5 column; its values are not in our sources)",
        kind="paper claim", on_rule_holds="reproduced", paper_number=None, rule=equivalence_rule,
        unit="top-5 points (EViT - unpruned)", effect=None, premises=(TOP5_NOT_AT_CEILING,) + _PROXY,
        setting="proxy", section="§6a", family=None, would_decide=None, headline=False),
    # §6b the proxy's cached fine-tunes
    Declaration(
        id="evit.t2.fusion_beats_drop.keep{keep:g}.finetuned", paper="evit",
        statement="Trained with pruning at keep {keep:g}, EViT with inattentive-token fusion reaches higher top-1 than "
                  "without (DeiT-S 79.5 vs 79.4: a direction claim about a 0.1-point difference)",
        quote=_FUSION_TEXT, where="EViT Table 2 / README", kind="paper claim", on_rule_holds="reproduced",
        paper_number=None, rule=FUSION_BEATS_DROP, unit="top-1 points (fused - dropped)", effect=0.1, premises=_FT,
        setting="proxy", section="§6b", family=None, would_decide=None, headline=False),
    Declaration(
        id="evit.t2.fusion_smaller_seed_spread.keep{keep:g}", paper="evit",
        statement="Accuracy fluctuates less across training runs with inattentive-token fusion than with plain "
                  "removal (standard deviations in Table 2)",
        quote="\"Moreover, the accuracy fluctuation in EViT with inattentive token fusion is smaller than the vanilla "
              "inattentive token removal, as shown by the standard deviation in Table 2.\"",
        where="EViT Sec. 5 (ablation text) and Table 2", kind="paper claim", on_rule_holds="reproduced",
        paper_number=None, rule=SEED_SPREAD_RULE, unit="top-1 points, sd over seeds", effect=None, premises=_FT,
        setting="proxy", section="§6b", family=None, would_decide=None, headline=False),
    Declaration(
        id="evit.warmup.negligible", paper="evit",
        statement="The cosine keep-rate warm-up has a negligible effect on accuracy (effect in dispute: the margin)",
        quote="none: our hypothesis", where="EViT Sec. 4 (implementation details) only says the warm-up is used",
        kind="our hypothesis", on_rule_holds="supported", paper_number=None, rule=equivalence_rule,
        unit="top-1 points (warm-up - none)", effect=None, premises=_FT, setting="proxy", section="§6b", family=None,
        would_decide=None, headline=False),
    Declaration(
        id="evit.t2.cost.keep{keep:g}.finetuned", paper="evit",
        statement="Trained with pruning at keep 0.7, EViT costs 0.3 points of top-1 (DeiT-S 79.8 -> 79.5)",
        quote=_HEADLINE, where="EViT README / Table 2", kind="paper claim", on_rule_holds="reproduced",
        paper_number=None, rule=cost_rule, unit="top-1 points (unpruned - EViT, both fine-tuned)", effect=None,
        premises=_FT, setting="proxy", section="§6b", family=None, would_decide=None, headline=False),
    # §6c SynthBirds
    Declaration(
        id="evit.t2.fusion_beats_drop.keep{keep:g}.off_the_shelf.synthbirds", paper="evit",
        statement="At keep {keep:g}, fusing the inattentive tokens gives higher top-1 than dropping them on SynthBirds "
                  "(DeiT-S {fused} fused vs {dropped} dropped: a direction claim about a {paper_diff:g}-point "
                  "difference; effect in dispute: that difference x the proxy's sensitivity, notebook 00)",
        quote=_FUSION_TEXT, where="EViT Table 2 / README", kind="paper claim",
        on_rule_holds="reproduced", paper_number=None, rule=FUSION_BEATS_DROP, unit="top-1 points (fused - dropped)",
        effect=None, premises=(OWN_TEST, FINE_GRAINED_BAR), setting="proxy", section="§6c", family=None,
        would_decide=None, headline=False),
    # §7-9 on the proxy
    Declaration(
        id="evit.t15.topk_random_mink.keep{keep:g}", paper="evit",
        statement="Accuracy follows mask quality: top-k > random > min-k [CLS]-attention selection",
        quote="\"As shown in Table 15, the classification accuracy of these three methods clearly correlates with the "
              "quality of the masks.\"", where="EViT Appendix, Table 15", kind="paper claim",
        on_rule_holds="reproduced", paper_number=None, rule=parts_rule,
        unit="top-1 points (topk - random / random - mink)", effect=None, premises=_PROXY, setting="proxy",
        section="§7", family=None, would_decide=None, headline=False),
    Declaration(
        id="evit.t13.shallow_locations_hurt", paper="evit",
        statement="At matched MACs, reorganising in the first or second block lowers accuracy considerably",
        quote="\"when the token reorganization module is placed before the third layer (i.e., at the first or second "
              "layer), the recognition accuracy drops considerably even though the computational cost is the same\"",
        where="EViT Appendix, Table 13", kind="paper claim", on_rule_holds="reproduced", paper_number=None,
        rule=parts_rule, unit="top-1 points ((4,7,10) minus (1,4,7) / (2,5,8))", effect=None, premises=_PROXY,
        setting="proxy", section="§8", family=None, would_decide=None, headline=False),
    Declaration(
        id="evit.t13.deeper_locations_similar", paper="evit",
        statement="At matched MACs, reorganisation locations from the third block on give basically the same accuracy",
        quote="\"when the token reorganization modules are placed behind the third layer, the resulting models have "
              "basically the same accuracy\"", where="EViT Appendix, Table 13", kind="paper claim",
        on_rule_holds="reproduced", paper_number=None, rule=parts_rule,
        unit="top-1 points ((3,6,9) / (5,8,11) minus (4,7,10))", effect=None, premises=_PROXY, setting="proxy",
        section="§8", family=None, would_decide=None, headline=False),
    Declaration(
        id="evit.t10.t2t_comparable.keep{keep:g}", paper="evit",
        statement="Tokens-to-tokens attention selects tokens about as well as [CLS]-to-tokens attention",
        quote="\"As shown in Table 10, EViT with the tokens-to-tokens attention strategy performs comparably with the "
              "[CLS]-to-tokens attention strategy but is less efficient.\"", where="EViT Appendix, Table 10",
        kind="paper claim", on_rule_holds="reproduced", paper_number=None, rule=equivalence_rule,
        unit="top-1 points (t2t - cls)", effect=None, premises=_PROXY, setting="proxy", section="§9", family=None,
        would_decide=None, headline=False),
    Declaration(
        id="evit.t10.t2t_slower", paper="evit",
        statement="Tokens-to-tokens attention is less efficient than [CLS]-to-tokens attention",
        quote="\"As shown in Table 10, EViT with the tokens-to-tokens attention strategy performs comparably with the "
              "[CLS]-to-tokens attention strategy but is less efficient.\"", where="EViT Appendix, Table 10",
        kind="paper claim", on_rule_holds="reproduced", paper_number=None, rule=SLOWER,
        unit="throughput ratio t2t / cls ({model}, keep 0.7)", effect=None, premises=(),
        setting="timed on this machine", section="§9", family=None, would_decide=None, headline=False),
    # §10-11 on the small ViT
    Declaration(
        id="evit.t14.oracle_beats_own_attention_at_block1", paper="evit",
        statement="Pruning from block 1 at keep {keep:g}, an oracle's [CLS] attention selects far better tokens than "
                  "the model's own attention at that block (effect in dispute: the margin)",
        quote="\"when the reorganization layer is placed in the first layer in a vanilla EViT, as shown in Table 13, a "
              "significant accuracy reduction is observed, while EViT equipped with DINO can maintain its recognition "
              "ability even if 50% of tokens are removed as early as the first layer\"",
        where="EViT Appendix, Table 14 (with Table 13)", kind="paper claim", on_rule_holds="reproduced",
        paper_number=None, rule=verdicts.Direction(">", test=True), unit="top-1 points (oracle - own)", effect=None,
        premises=(ORACLE_GUIDES, PROXY_CHOSEN), setting="proxy", section="§10", family=None, would_decide=None,
        headline=False),
    Declaration(
        id="evit.t14.oracle_block1_keeps_accuracy", paper="evit",
        statement="With an oracle's attention, removing {removed} of the tokens at the first block keeps the model's "
                  "recognition ability",
        quote="\"EViT equipped with DINO can maintain its recognition ability even if 50% of tokens are removed as "
              "early as the first layer\"", where="EViT Appendix, Table 14", kind="paper claim",
        on_rule_holds="reproduced", paper_number=None, rule=equivalence_rule,
        unit="top-1 points (oracle @1 - unpruned)",
        effect=None, premises=(ORACLE_GUIDES, PROXY_CHOSEN), setting="proxy", section="§10", family=None,
        would_decide=None,
        headline=False),
    Declaration(
        id="evit.t5.higher_res_equal_macs.off_the_shelf", paper="evit",
        statement="Feeding more tokens (higher resolution) with EViT pruning beats the unpruned model at the same "
                  "MACs (DeiT-S: +1 point of ImageNet top-1 at equal cost)",
        quote="\"Numerically, we improve the ImageNet classification accuracy of the DeiT-S model by 1% under the same "
              "computational cost.\"", where="EViT Sec. 1 and Table 5", kind="paper claim",
        on_rule_holds="reproduced", paper_number=("EVIT_TEXT", "higher_res_gain_deit_s_pp"),
        rule=verdicts.Direction(">", test=True), unit="top-1 points ({size} px EViT - 28 px unpruned)", effect=1.0,
        premises=(HIRES_USABLE, PROXY_CHOSEN), setting="proxy", section="§11", family=None, would_decide=None,
        headline=True),
    Declaration(
        id="evit.t5.higher_res_equal_macs.finetuned", paper="evit",
        statement="Feeding more tokens (higher resolution) with EViT pruning beats the unpruned model at the same "
                  "MACs (DeiT-S: +1 point of ImageNet top-1 at equal cost)",
        quote="\"Numerically, we improve the ImageNet classification accuracy of the DeiT-S model by 1% under the same "
              "computational cost.\"", where="EViT Sec. 1 and Table 5", kind="paper claim",
        on_rule_holds="reproduced", paper_number=("EVIT_TEXT", "higher_res_gain_deit_s_pp"), rule=None,
        unit="top-1 points ({size} px EViT - 28 px unpruned)", effect=1.0, premises=(), setting="proxy",
        section="§11", family=None,
        would_decide="the small ViT fine-tuned at {size} px with EViT at the MAC-matched keep rate and unpruned at 28 "
                     "px alike, 5 seeds each, long enough that fine-tuned minus off-the-shelf pruning excludes 0",
        headline=False),
    # §13 training throughput
    Declaration(
        id="evit.t11.trains_faster.keep{keep:g}", paper="evit",
        statement="EViT needs considerably less training time than the unpruned ViT for the same number of epochs "
                  "(Table 11: GPU hours of DeiT-S vs EViT-DeiT-S; its numbers are not in our sources)",
        quote="\"The results show that EViT requires considerably smaller GPU$\\times$hours to train when compared to "
              "a vanilla DeiT under the same number of epochs.\"", where="EViT Appendix (Table 11)",
        kind="paper claim", on_rule_holds="reproduced", paper_number=None, rule=FASTER,
        unit="training images/s, EViT keep {keep:g} / unpruned (small ViT)", effect=None, premises=(),
        setting="timed on this machine", section="§13", family=None, would_decide=None, headline=False),
])
