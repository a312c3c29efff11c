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
    },
}
