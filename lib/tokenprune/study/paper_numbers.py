"""The papers' published numbers, each with where it was printed.

One place for every number that a notebook sets beside ours, so a reader can audit them. Sources are
the texts under ``shared/papers`` and the official repositories' READMEs (see its README.md).
"""
from __future__ import annotations

__all__ = ["EVIT", "EVIT_SOURCE"]

EVIT_SOURCE = "EViT (Liang et al., ICLR 2022), youweiliang/evit README table and Table 2; Sec. 4 text"

#: EViT on DeiT: keep rate -> (top-1 with fusion, GMACs, img/s on one A100, top-1 without fusion)
EVIT = {
    "deit_small_patch16_224": {
        "baseline": {"top1": 79.8, "gmacs": 4.6},
        "keep": {
            0.9: {"top1": 79.8, "gmacs": 4.0, "img_per_s": 3197, "top1_no_fusion": 79.9},
            0.8: {"top1": 79.8, "gmacs": 3.5, "img_per_s": 3619, "top1_no_fusion": 79.7},
            0.7: {"top1": 79.5, "gmacs": 3.0, "img_per_s": 4385, "top1_no_fusion": 79.4},
            0.6: {"top1": 78.9, "gmacs": 2.6, "img_per_s": 4722, "top1_no_fusion": 79.1},
            0.5: {"top1": 78.5, "gmacs": 2.3, "img_per_s": 5408, "top1_no_fusion": 78.4},
        },
        # "with a keep rate of 0.7 increase the inference throughput by 50%" (Sec. 4.1)
        "speedup_keep0.7": 1.5,
        "token_counts_keep0.7": {"fuse_attention": [196, 139, 99, 71], "drop": [196, 138, 97, 68]},
    },
    "deit_base_patch16_224": {
        "baseline": {"gmacs": 17.6},
        # "EViT-DeiT-B with a keep rate of 0.8 increases inference throughput by 26%" (Appendix, Table 8)
        "speedup_keep0.8": 1.26,
        # "... while maintaining the Top-1 accuracy reduction within 0.1% on ImageNet" (same sentence, Table 8)
        "top1_drop_keep0.8_within": 0.1,
    },
}

# ----------------------------------------------------------------------------------------------
# Igaue & Aizawa, arXiv 2507.19175 (varmedad): numbers as the machine review (shared/papers/varmedad-review.txt)
# reports them; no code or second source exists (shared/papers/README.md). DeiT-S fine-tuned on ImageNet-100,
# pruning at blocks 4/7/10, one run each. "GFLOPs" as printed; 2.64 is EViT-style DeiT-S keep 0.6, i.e. MACs.
# ----------------------------------------------------------------------------------------------

__all__ += ["VARMEDAD", "VARMEDAD_SOURCE"]

VARMEDAD_SOURCE = ("Igaue & Aizawa, arXiv 2507.19175 v1, as reported by the Pith machine review "
                   "(shared/papers/varmedad-review.txt) and shared/papers/README.md")

VARMEDAD = {
    "model": "deit_small_patch16_224",
    "dataset": "ImageNet-100 (fine-tuning)",
    "locations": (4, 7, 10),
    "num_heads": 6,
    "seeds": 1,
    # Table 2: methods compared at about 2.64 GFLOPs ("At matched compute (2.64 GFLOPs) the method reports 85.90%
    # top-1 accuracy with the variance indicator and 85.82% with median absolute deviation, versus 85.68% for EViT
    # and 85.36% for ToMe")
    "matched": {
        "gflops": 2.64,
        "keep_rate": 0.6,  # shared/papers/README.md: 2.64 = EViT-style keep 0.6 on DeiT-S
        "top1": {"attention_variance": 85.90, "attention_medad": 85.82, "evit": 85.68, "tome": 85.36},
        "source": "Table 2 (review: 'At matched compute (2.64 GFLOPs)')",
    },
    # Table 3: overlapping patch embedding, stride 12 = 3/4 of 16 ("with overlapping patch embeddings, keeping 60%
    # of patches yields 87.16% accuracy, 0.42 points above the no-pruning baseline while using slightly fewer FLOPs";
    # "at r=0.6 the model beats the all-patch baseline while using 2% fewer FLOPs")
    "overlap": {
        "stride": 12,
        "keep_rate": 0.6,
        "top1": 87.16,
        "baseline_top1": 86.74,
        "margin": 0.42,
        "flops_reduction": 0.02,
        "source": "Table 3 (review: reading notes and 'If this is right')",
    },
    # Table 1 typo (review, minor comment 1): "The reported accuracy drop of (-3.45) for attention MedAD without
    # patch fusion at r=0.8 is inconsistent with the adjacent values and with the accuracy of 85.98"
    "table1_typo": {
        "scorer": "attention_medad",
        "fusion": False,
        "keep_rate": 0.8,
        "top1": 85.98,
        "printed_drop": -3.45,
        "baseline_top1": 86.74,  # assumption: the unpruned DeiT-S of Table 3 (87.16 - 0.42); Table 1's own
                                  # baseline is not quoted by the review
        "source": "Table 1 (review, minor comment 1)",
    },
    # Eq. 6 as printed: a_var = (1/H) sum_h (a_h - mean_h a): identically zero (review, major comment 1)
    "eq6_printed": "a_var = 1/H sum_h (a_class^(h) - a_bar)",
    # review, 'If this is right' (editorial extensions; the review quotes no table for them): "at r=0.7 throughput
    # rises about 50% with accuracy loss near 0.3 points" (the same figures as EViT's abstract for keep 0.7 on
    # ImageNet-1k; which model, fusion and hardware the paper used for them is not in our sources)
    "r07": {"keep_rate": 0.7, "speedup": 1.5, "top1_drop": -0.3,
            "source": "review, 'If this is right' (editorial extension; no table quoted)"},
    # same list: "MedAD provides a more stable alternative at aggressive keep rates, staying within 3% accuracy at
    # r=0.3" ("3%" read as 3 top-1 points below the unpruned model; the baseline is not quoted)
    "medad_r03": {"keep_rate": 0.3, "max_drop": 3.0,
                  "source": "review, 'If this is right' (editorial extension; Table 1 values not quoted)"},
}

# ----------------------------------------------------------------------------------------------
# BAT: Long et al., "Beyond Attentive Tokens: Incorporating Token Importance and Diversity for Efficient Vision
# Transformers", CVPR 2023, arXiv 2211.11315. Printed numbers as shared/papers/README.md verified them; the
# official repository BWLONG/BeyondAttentiveTokens holds training logs (log/Ours-<rho>.log), no code. The first
# line of each log is the authors' own MAC counter ("GMACs: ..."), the second the parameter count.
# ----------------------------------------------------------------------------------------------

__all__ += ["BAT", "BAT_SOURCE"]

BAT_SOURCE = ("BAT (Long et al., CVPR 2023, arXiv 2211.11315) Table 1 as verified in shared/papers/README.md; "
              "GMACs and parameter counts printed in the first lines of "
              "BWLONG/BeyondAttentiveTokens log/Ours-<rho>.log")

BAT = {
    "deit_small_patch16_224": {
        "baseline": {"top1": 79.8, "gmacs": 4.6},
        # keep rate rho -> top-1 (%, ImageNet-1k val, max over epochs per the logs) and GMACs as printed
        "keep": {
            0.7: {"top1": 79.6, "gmacs": 3.0},
            0.6: {"top1": 79.3, "gmacs": 2.6},
            0.5: {"top1": 79.0, "gmacs": 2.3},
            0.4: {"top1": 78.6, "gmacs": 2.0},
            0.3: {"top1": 77.8, "gmacs": 1.8},
            0.2: {"top1": 76.4, "gmacs": 1.6},
        },
        # "GMACs: ..." on the first line of log/Ours-<rho>.log (commit 888ea858), verbatim
        "log_gmacs": {0.7: 3.0047916370000003, 0.6: 2.583245078, 0.5: 2.344407958, 0.4: 2.0830414740000003,
                      0.3: 1.8232578940000002, 0.2: 1.6450529900000002},
        # "number of params: 22050664" in every log: DeiT-S's own count, i.e. no extra parameters
        "log_params": 22050664,
        # logs: rho 0.7 trained from scratch for 300 epochs, the others fine-tuned for 30 epochs
        "log_epochs": {0.7: 300, 0.6: 30, 0.5: 30, 0.4: 30, 0.3: 30, 0.2: 30},
        # the same logs: how each row started (shared/papers/README.md: "keep 0.7 trained from scratch 300 epochs,
        # the others fine-tuned 30 epochs"; "reported accuracy is the max over epochs")
        "log_start": {0.7: "from scratch", 0.6: "fine-tuned", 0.5: "fine-tuned", 0.4: "fine-tuned",
                      0.3: "fine-tuned", 0.2: "fine-tuned"},
        "reported_top1": "max over epochs",
        "locations": (4, 7, 10),
    },
    "deit_tiny_patch16_224": {
        # shared/papers/README.md: "DeiT-T: 72.3 / 0.8 (baseline 72.2 / 1.3)"; the study's issue text says 1.2
        "baseline": {"top1": 72.2, "gmacs": 1.3, "gmacs_issue_text": 1.2},
        "bat": {"top1": 72.3, "gmacs": 0.8},  # the keep rate is not stated with it
    },
    "lv_vit_s": {"top1": 83.1, "gmacs": 4.7},
    # EViT's comparison row as BAT's Table 1 prints it at rho = 0.7 (= paper_numbers.EVIT): 79.5 / 3.0
    "evit_deit_s_keep0.7": {"top1": 79.5, "gmacs": 3.0},
    # not in the paper: a third-party summary (shared/papers/bat-secondary-summary.txt, Sec. 2.3) claims the
    # objective "L = alpha L_imp + beta L_div"; BAT has no extra loss and no extra parameter
    "secondary_summary_loss": "L = alpha L_imp + beta L_div",
    # what the paper trains with (shared/papers/README.md, verified: "no extra loss exists"; "parameter-free operator")
    "training_loss": "the classification loss only (no extra loss term)",
    # EViT's protocol for the rows BAT's Table 1 sets beside it: "We train the models with EViT from scratch for 300
    # epochs" (EViT Sec. 4, implementation details; shared/papers/evit-paper-text.txt)
    "evit_protocol": {"start": "from scratch", "epochs": 300},
    # the comparison with DynamicViT is named by the third-party summary (Sec. 3.1: "Comparison methods include DyViT
    # and EViT"); no DynamicViT number is in shared/papers
    "secondary_summary_flaws": ("the method assumes static importance scores",
                                "potential latency trade-offs compared to dynamic token selection (DynamicViT)"),
    # the third-party summary's headline (Sec. 3.2), verbatim; it names no keep rate. Its "0.2%" is a drop in top-1
    # points (Table 1: unpruned 79.8, keep 0.7 79.6); its "FLOPs" fall by the share the MACs do
    "secondary_summary_headline": {"quote": "On DeiT-S, we reduce FLOPs by 35% with only 0.2% accuracy drop",
                                   "flop_reduction": 0.35, "top1_drop": 0.2},
}

__all__ += ["TOME", "TOME_SOURCE"]

TOME_SOURCE = ("ToMe (Bolya et al., ICLR 2023, facebookresearch/ToMe) as verified in shared/papers/README.md; its "
               "'GFLOPs' are fvcore counts, which count a matrix product's multiply-accumulates (the study checks "
               "them against its MAC count)")

#: ToMe on DeiT-S: r tokens merged in every block
TOME = {
    "deit_small_patch16_224": {
        "baseline": {"top1": 79.8},
        "r": {8: {"gflops": 3.4}, 13: {"gflops": 2.7, "top1": 79.36}, 16: {"gflops": 2.3}},
    },
}

__all__ += ["DECOUPLE", "DECOUPLE_SOURCE"]

DECOUPLE_SOURCE = ("'Part-Coverage and Faithfulness Decouple in ViT Token Pruning for Fine-Grained Visual "
                   "Categorization': "
                   "no text of the paper was found; numbers from a popular-press summary "
                   "(shared/papers/decoupling-press-summary.txt), all unverified")

#: The decoupling study, as the press summary reports it (every value unverified; definitions unknown)
DECOUPLE = {
    # "On the aircraft dataset ... improved the coverage of the actual plane parts by more than six percentage points"
    "coverage_gain_aircraft_pp": 6.0,
    # "the two methods were almost identical" (faithfulness)
    "faithfulness": "almost identical",
    # "most visible when the model is looking at the image at a specific, intermediate stage of its processing"
    "largest_at": "intermediate block, low keep rate",
    "datasets": ("CUB-200-2011", "Stanford Cars", "FGVC-Aircraft"),
    # the summary's own words, quoted verbatim (the summary never names a model)
    "quotes": {
        "title": "Part-Coverage and Faithfulness Decouple in ViT Token Pruning for Fine-Grained Visual Categorization",
        "decouple": "the two goals—keeping the right physical parts and keeping the right logic for the final "
                    "answer—can pull in different directions",
        "coverage_better": "was significantly better at keeping the patches that covered the actual parts of the "
                           "objects",
        "coverage_gain_aircraft": "On the aircraft dataset, for instance, this new method improved the coverage of "
                                  "the actual plane parts by more than six percentage points compared to the "
                                  "standard method",
        "coverage_gain_aircraft_value": "more than six percentage points",
        "intermediate": "this gap is most visible when the model is looking at the image at a specific, "
                        "intermediate stage of its processing",
        "early_late": "If the model looks too early or too late in its processing chain, the difference between the "
                      "two methods disappears",
        "low_keep": "this effect is strongest when the model is forced to be very efficient, keeping only a small "
                    "fraction of the original image patches",
        "larger_model": "When they tested a much larger, more powerful version of the model, the difference between "
                        "the two methods vanished",
        "larger_model_value": "the difference vanished (\"a much larger, more powerful version of the model\")",
        "human_features": "the new method consistently selected the patches that corresponded to the physical "
                          "features that humans would use to identify the object",
        "just_as_fast": "they can get a system that is just as fast and just as accurate",
    },
}

__all__ += ["EVIT_TEXT", "EVIT_TEXT_SOURCE"]

EVIT_TEXT_SOURCE = ("EViT (Liang et al., ICLR 2022), Sec. 1 (shared/papers/evit-paper-text.txt; its tables are not in "
                    "the text)")

#: EViT numbers stated in the running text (the tables behind them, Tables 5, 6, 10, 13, 14, 15, are not in our copy)
EVIT_TEXT = {
    # "we improve the ImageNet classification accuracy of the DeiT-S model by 1% under the same computational cost"
    # (higher-resolution input with EViT, Table 5)
    "higher_res_gain_deit_s_pp": 1.0,
    # "by using an oracle ViT to guide the token reorganization process, our method can increase the accuracy of the
    # original DeiT-S from 79.8% to 80.7% while reducing its computation cost by 36%" (Table 6: EViT initialised from a
    # trained DeiT-S; not the DINO-attention experiment of Table 14, whose numbers the text does not give)
    "oracle_init_deit_s": {"top1_before": 79.8, "top1_after": 80.7, "mac_reduction": 0.36},
    # Table 2 text: "the accuracy fluctuation in EViT with inattentive token fusion is smaller ... as shown by the
    # standard deviation in Table 2" (the values are not in the text)
    "fusion_smaller_std": True,
    # "We train the DeiT-S model with 0.7 keep rate for longer epochs of 450 and 600 ... As shown in Table 4, their
    # performance steadily improves with training epochs" (Sec. 4.2; Table 4's accuracies are not in the text)
    "longer_training_epochs": (450, 600),
    # Sec. 4 (implementation details): "the token identification module is incorporated into the $4^{th}$, $7^{th}$
    # and $10^{th}$ layer of DeiT-S and DeiT-B (with 12 layers in total) and incorporated into the $5^{th}$, $9^{th}$
    # and $13^{th}$ layer of LV-ViT-S (with 16 layers in total)"
    "locations": {"deit": {"depth": 12, "layers": (4, 7, 10)}, "lv_vit_s": {"depth": 16, "layers": (5, 9, 13)}},
    # Sec. 4.2: "training EViT-LV-ViT-S on images of resolution $224^{2}$ and further finetuning it on a higher
    # resolution of $448^{2}$ for another 100 epochs gives a very competitive Vision Transformer model, achieving an
    # ImageNet top-1 accuracy of 84.7%, which is 0.3% higher than LV-ViT-S@384 with basically the same throughput and
    # number of parameters"; its keep rate from Figure 4's label "EViT/0.7-LV-ViT-S@448" (Sec. 4.2). The LV-ViT rows
    # of the tables (main results, Table 5) are not in our copy
    "lv_vit_s_448": {"keep_rate": 0.7, "train_px": 224, "finetune_px": 448, "finetune_epochs": 100, "top1": 84.7,
                     "gain_over_lv_vit_s_384_pp": 0.3},
    # Appendix, Fig. 6: "the [CLS]-to-tokens attention values of $n$ inattentive tokens ($n=25$)", the "$n$ tokens
    # with the smallest [CLS]-to-tokens attention in the 4th layer" of "a pre-trained DeiT-S"
    "fig6": {"tracked_tokens": 25, "layer": 4},
    # Appendix, Figure 7: "the training of EViT-DeiT-S with a keep rate of 0.7"
    "fig7_keep_rate": 0.7,
}

# ----------------------------------------------------------------------------------------------
# What pruning costs DeiT-class models off the shelf (no training) at about 3 GMACs: the anchors a proxy's regime is
# read against (notebook 00 and each notebook's limitations)
# ----------------------------------------------------------------------------------------------

__all__ += ["DEIT_CLASS_OFF_THE_SHELF"]

DEIT_CLASS_OFF_THE_SHELF = {
    # ToMe README: ViT-S/16 (AugReg) at r = 13 without training, 81.41 -> 79.30 (2.1 points)
    "tome_vit_s16_r13_pp": 2.1,
    # facebookresearch/ToMe issue thread, the maintainer's answer: DeiT-S at r = 13 without training about 78.8
    # against 79.8 (1.0 point)
    "tome_deit_s_r13_pp": 1.0,
    # DiffRate README: DeiT-S at 2.9 GFLOPs without fine-tuning 79.54 against 79.8 (0.26 point)
    "diffrate_deit_s_2_9_gflops_pp": 0.26,
    # the range the three give
    "low": 0.26,
    "high": 2.1,
    "source": "ToMe's README and its maintainer's answer on DeiT-S, DiffRate's README",
}
