"""EViT's LV-ViT rows and the claims of its Figures 4, 6 and 7, as declared before any data (they join
:data:`tokenprune.study.evit.claims.CLAIMS`): LV-ViT-S with EViT (its reorganisation layers, the main results, Table
5's rows and the 84.7 % of EViT/0.7-LV-ViT-S@448), Figure 4's accuracy-throughput front, Figure 6's inattentive tokens
across depth and Figure 7's across training. timm has no LV-ViT and the study does not build one, so LV-ViT's costs
are not counted here; the LV-ViT tables' numbers are not in our sources. The quotes are the text's words with its
superscripts printed as the paper prints them (4th for ``$4^{th}$``, 224² for ``$224^{2}$``): braces in a declaration's
texts are fields filled at filing."""
from __future__ import annotations

from tokenprune.study import verdicts
from tokenprune.study.claims import Declaration, paper_number

__all__ = ["REORGANISATION_LAYERS", "LOCATIONS_BY_MODEL", "reorganisation_layers", "declarations"]

#: the reorganisation layers (1-based) the paper states per model, with the model's depth: ``{model: (depth,
#: layers)}``
REORGANISATION_LAYERS: dict[str, tuple[int, tuple[int, ...]]] = {
    "DeiT": (paper_number(("EVIT_TEXT", "locations", "deit", "depth")),
             tuple(paper_number(("EVIT_TEXT", "locations", "deit", "layers")))),
    "LV-ViT-S": (paper_number(("EVIT_TEXT", "locations", "lv_vit_s", "depth")),
                 tuple(paper_number(("EVIT_TEXT", "locations", "lv_vit_s", "layers"))))}
#: what the location check expects: each model's stated layers, and the official code's DeiT layers
#: (``schedule.EVIT_LOCATIONS``) equal to the text's
LOCATIONS_BY_MODEL: dict[str, tuple[int, ...]] = {
    **{m: layers for m, (_, layers) in REORGANISATION_LAYERS.items()},
    "DeiT (official code)": REORGANISATION_LAYERS["DeiT"][1]}

_LOCATIONS_TEXT = ("\"By default, the token identification module is incorporated into the 4th, 7th and "
                   "10th layer of DeiT-S and DeiT-B (with 12 layers in total) and incorporated into the 5th, "
                   "9th and 13th layer of LV-ViT-S (with 16 layers in total).\" and \"Specifically, for a "
                   "ViT with $L$ layers and $t$ token reorganization layers in total, we first obtain the separating "
                   "length $s=L/(t+1)$. Then, the layer indices of the reorganization layers are "
                   "$[s+1,2s+1,\\dots,ts+1]$, which cuts the ViT evenly.\"")
_LVVIT_448_TEXT = ("\"Notably, training EViT-LV-ViT-S on images of resolution 224² and further finetuning it on a "
                   "higher resolution of 448² for another 100 epochs gives a very competitive Vision Transformer "
                   "model, achieving an ImageNet top-1 accuracy of 84.7%, which is 0.3% higher than LV-ViT-S@384 with "
                   "basically the same throughput and number of parameters.\"")
_LVVIT_TRAIN = ("LV-ViT-S (the official LV-ViT code and training recipe; timm has no LV-ViT) trained from scratch with "
                "EViT at layers 5/9/13 for 300 epochs on ImageNet-1k")


def reorganisation_layers(depth: int, locations: int = 3) -> tuple[int, ...]:
    """EViT's rule (Appendix, token reorganization locations): ``s = depth / (locations + 1)``, layers ``s + 1, 2s + 1,
    ..., locations * s + 1`` (1-based), which cut the ViT evenly; a depth the rule does not divide is refused."""
    if depth <= 0 or locations <= 0 or depth % (locations + 1):
        raise ValueError(f"depth {depth} is not cut evenly by {locations} reorganisation layers")
    s = depth // (locations + 1)
    return tuple(i * s + 1 for i in range(1, locations + 1))


def declarations(timing_rounds: str, train: str) -> list[Declaration]:
    """The declarations, §4 of notebook 01. ``timing_rounds``: the timed claims' premise of at least 3 rounds;
    ``train``: what trains EViT-DeiT-S at the paper's scale (both named once in :mod:`tokenprune.study.evit.claims`)."""
    return [
        Declaration(
            id="evit.lvvit_s.locations_cut_evenly", kind="consistency check",
            statement="EViT's rule for the reorganisation layers (s = L/(t+1), layers s+1, 2s+1, ..., ts+1; t = 3) "
                      "gives the layers the paper uses: 5, 9 and 13 of the 16-layer LV-ViT-S, 4, 7 and 10 of the "
                      "12-layer DeiT (also the official code's)",
            quote=_LOCATIONS_TEXT,
            where="EViT Sec. 4 (implementation details) and Appendix (token reorganization locations)",
            rule=verdicts.Exact(LOCATIONS_BY_MODEL, what="reorganisation layers (1-based) per model"),
            unit="1-based layers", setting="from the sources", section="§4"),
        Declaration(
            id="evit.lvvit_s.speedup_small_drop",
            statement="LV-ViT-S trained with EViT gains significant speed at a relatively small loss of top-1 (the "
                      "paper's LV-ViT rows are not in our sources)",
            quote="\"On both DeiT and LV-ViT, the proposed EViT achieves significant speedup while restricting the "
                  "accuracy drop in a relatively small range.\"",
            where="EViT Sec. 4.1 (main results) and Conclusion",
            unit="top-1 points lost and x speedup (EViT-LV-ViT-S against LV-ViT-S)", setting="paper-scale run",
            section="§4",
            would_decide=f"{_LVVIT_TRAIN} at the keep rates of the paper's LV-ViT rows, and LV-ViT-S itself: top-1 "
                         "on ImageNet val and throughput on one GPU"),
        Declaration(
            id="evit.t5.lvvit_s.favourable_higher_res",
            statement="LV-ViT-S with EViT on higher-resolution images performs favourably against the vanilla "
                      "LV-ViT-S at comparable or higher throughput (Table 5's LV-ViT rows are not in our sources)",
            quote="\"We can see that EViT in most tested cases performs favourably against a vanilla DeiT/LV-ViT, "
                  "while having comparable or higher inference throughput than the baselines.\"",
            where="EViT Sec. 4.2 (Table 5)", unit="top-1 points and throughput ratio (EViT-LV-ViT-S vs LV-ViT-S)",
            setting="paper-scale run", section="§4",
            would_decide=f"{_LVVIT_TRAIN} at each of Table 5's resolutions and keep rates, against LV-ViT-S at 224 "
                         "px: top-1 on ImageNet val and throughput on one GPU"),
        Declaration(
            id="evit.t5.lvvit_s_448.top1",
            statement="EViT/0.7-LV-ViT-S trained at 224 px and fine-tuned at 448 px for another 100 epochs reaches "
                      "84.7 % ImageNet top-1", quote=_LVVIT_448_TEXT, where="EViT Sec. 4.2 (Table 5; Figure 4)",
            paper_number=("EVIT_TEXT", "lv_vit_s_448", "top1"), unit="% top-1", setting="paper-scale run",
            section="§4",
            would_decide=f"{_LVVIT_TRAIN} at keep 0.7 and 224 px, then fine-tuned at 448 px for 100 epochs: top-1 "
                         "on ImageNet val"),
        Declaration(
            id="evit.t5.lvvit_s_448.beats_lvvit_s_384",
            statement="EViT/0.7-LV-ViT-S@448 is 0.3 points of ImageNet top-1 above LV-ViT-S@384",
            quote=_LVVIT_448_TEXT, where="EViT Sec. 4.2 (Table 5)",
            paper_number=("EVIT_TEXT", "lv_vit_s_448", "gain_over_lv_vit_s_384_pp"),
            unit="top-1 points (EViT/0.7-LV-ViT-S@448 - LV-ViT-S@384)", setting="paper-scale run", section="§4",
            would_decide="the model of evit.t5.lvvit_s_448.top1 and LV-ViT-S at 384 px (the LV-ViT authors' "
                         "weights), both on ImageNet val: the difference of their top-1"),
        Declaration(
            id="evit.t5.lvvit_s_448.params_as_lvvit_s_384",
            statement="EViT/0.7-LV-ViT-S@448 has basically the same number of parameters as LV-ViT-S@384",
            quote=_LVVIT_448_TEXT, where="EViT Sec. 4.2 (Table 5)",
            unit="parameters (EViT/0.7-LV-ViT-S@448 - LV-ViT-S@384)", setting="analytic at paper scale",
            section="§4",
            would_decide="LV-ViT-S built from the official LV-ViT code (timm has none) at 448 px, patched with EViT "
                         "at layers 5/9/13, and at 384 px unpruned: their parameter counts, no training needed"),
        Declaration(
            id="evit.t5.lvvit_s_448.throughput_as_lvvit_s_384",
            statement="EViT/0.7-LV-ViT-S@448 has basically the same throughput as LV-ViT-S@384",
            quote=_LVVIT_448_TEXT, where="EViT Sec. 4.2 (Table 5; one A100)",
            unit="throughput ratio (EViT/0.7-LV-ViT-S@448 / LV-ViT-S@384)", premises=(timing_rounds,),
            setting="timed on this machine", section="§4",
            would_decide="LV-ViT-S built from the official LV-ViT code (timm has none) at 448 px with EViT keep 0.7 "
                         "at layers 5/9/13 and at 384 px unpruned, timed side by side in interleaved rounds (random "
                         "weights suffice)"),
        Declaration(
            id="evit.fig4.competitive_tradeoff",
            statement="EViT models trained from scratch (and EViT/0.7-LV-ViT-S@448) lie on the accuracy-throughput "
                      "front of the ViTs of Figure 4 (DeiT, CaiT, LV-ViT, CoaT, Swin, Twins, Visformer, ConViT, "
                      "TNT, EfficientNet, PVT)",
            quote="\"We plot the accuracy and throughput of various ViTs in Figure 4, which shows EViT is very "
                  "competitive among the vision models in terms of computation-accuracy trade-off.\" and \"the "
                  "proposed EViT reaches a better trade-off between accuracy and efficiency than various Vision "
                  "Transformer models\"",
            where="EViT Sec. 4.2 (Figure 4) and Conclusion", unit="top-1 against images/s on one GPU",
            setting="paper-scale run", section="§4",
            would_decide=f"EViT-DeiT-S ({train}) and EViT-LV-ViT-S trained from scratch on ImageNet-1k and "
                         "EViT/0.7-LV-ViT-S@448, with every compared model timed on the same GPU beside its "
                         "published top-1: reproduced when no compared model has both higher top-1 and higher "
                         "throughput than an EViT model"),
        Declaration(
            id="evit.fig6.inattentive_stay_inattentive",
            statement="The 25 tokens of smallest [CLS] attention at layer 4 of a pre-trained DeiT-S stay less "
                      "attended than the other tokens in the deeper layers",
            quote="\"The results suggest that the tokens that are identified as inattentive tokens in the shallow "
                  "layer tend to be less preferred in deeper layers.\"", where="EViT Appendix (Fig. 6)",
            unit="[CLS] attention (head mean) of the tracked tokens against the other patch tokens, layers 5-12",
            setting="paper-scale run", section="§4",
            would_decide="no training: a pre-trained DeiT-S (the paper profile's deit_s_weights) on ImageNet val "
                         "images, the 25 patch tokens of smallest head-mean [CLS] attention at layer 4 tracked "
                         "through layers 5-12 of the unpruned model; reproduced when their mean [CLS] attention lies "
                         "below that of the other 171 patch tokens at every deeper layer (95 % bootstrap interval "
                         "over images)"),
        Declaration(
            id="evit.fig7.inattentive_converge_to_background",
            statement="While EViT-DeiT-S trains at keep 0.7, its inattentive tokens move from object parts early in "
                      "training to the less informative regions (the background)",
            quote="\"It can be observed that at the initial training stage, the EViT model tends to misidentify the "
                  "inattentive tokens (e.g., the bulk of the car in the second column of the first three rows). "
                  "However, the inattentive tokens gradually converge to the less informative regions of images "
                  "during the training process.\"", where="EViT Appendix (Figure 7)",
            unit="share of the fused (inattentive) patches inside the object's box, per training checkpoint",
            setting="paper-scale run", section="§4",
            would_decide="EViT-DeiT-S trained from scratch at keep 0.7 (evit_deit_s_scratch) on ImageNet-1k with "
                         "checkpoints kept through training, and ImageNet val images with object boxes: reproduced "
                         "when the share of fused patches inside the box falls from the first checkpoints to the "
                         "last"),
    ]
