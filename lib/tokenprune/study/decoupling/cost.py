"""The sensitivity head's own cost (notebook 04, section 9): its MACs beside the model's and the [CLS]-row cost of
EViT's scorer, per setting and at the paper's scale (DeiT-S / DeiT-B at 224 px, shapes only)."""
from __future__ import annotations

from types import SimpleNamespace

import pandas as pd
import timm
import torch

from tokenprune.core.config import PruneConfig
from tokenprune.core.patch import patch
from tokenprune.measure import macs
from tokenprune.methods import learned
from tokenprune.study.decoupling.data import Setting
from tokenprune.study.decoupling.settings import mid_block

__all__ = ["macs_row", "scorer_macs_table", "fast_values"]


def macs_row(label, model, block, keep, n_tokens, dim) -> dict:
    """MACs of ``model`` pruned once at ``block`` by the learned head (its own MACs added) and by [CLS] attention."""
    head = learned.make_head(dim, 0)
    patch(model, keep_rate=keep, locations=(block,), scorer="learned", reducer="drop")
    pruned = macs.analytic_macs(model)
    patch(model, keep_rate=keep, locations=(block,), scorer="cls_attention", reducer="drop")
    evit = macs.analytic_macs(model)
    PruneConfig(keep_rate=1.0).apply(model)
    full = macs.analytic_macs(model).total
    hm = learned.head_macs(head, n_tokens)
    return {"model": label, "block": block, "keep_rate": keep, "prunable_tokens": n_tokens, "width": dim,
            "head_params": sum(q.numel() for q in head.parameters()), "head_macs": hm,
            "cls_row_macs": evit.reduction, "model_gmacs_unpruned": full / 1e9,
            "model_gmacs_pruned_learned": (pruned.total + hm) / 1e9,
            "model_gmacs_pruned_cls_attention": evit.total / 1e9,
            "head_share_of_pruned_pct": 100 * hm / (pruned.total + hm)}


def scorer_macs_table(settings: dict[str, Setting], cache_ev: dict, cfg: SimpleNamespace) -> pd.DataFrame:
    """:func:`macs_row` per setting (intermediate block) and keep rate, and for DeiT-S / DeiT-B at 224 px (block 6,
    shapes only)."""
    rows = []
    for name, S in settings.items():
        mid = mid_block(S.blocks)
        dim = cache_ev[name].tokens[mid].shape[-1]
        for keep in cfg.keep_rates:
            rows.append({"setting": name, **macs_row(S.model_label, S.model, mid, keep, S.patch_tokens, dim)})
    for arch in ("deit_small_patch16_224", "deit_base_patch16_224"):
        with torch.device("meta"):  # shapes only: MACs need no weights
            model = timm.create_model(arch, pretrained=False).eval()
        for keep in cfg.keep_rates:
            rows.append({"setting": "paper scale (224 px)", **macs_row(arch, model, 6, keep, 196, model.embed_dim)})
    return pd.DataFrame(rows)


def fast_values(scorer_macs: pd.DataFrame, arch: str = "deit_small_patch16_224") -> pd.DataFrame:
    """Per keep rate of ``arch`` at 224 px: the head's extra MACs over EViT's scorer, as % of the unpruned
    model's MACs and of the [CLS]-attention-pruned model's."""
    r = scorer_macs[(scorer_macs.setting == "paper scale (224 px)") & (scorer_macs.model == arch)]
    extra = r.model_gmacs_pruned_learned - r.model_gmacs_pruned_cls_attention
    return pd.DataFrame({"keep_rate": r.keep_rate.values,
                         "extra_pct_of_unpruned": (100 * extra / r.model_gmacs_unpruned).values,
                         "extra_pct_of_pruned_cls": (100 * extra / r.model_gmacs_pruned_cls_attention).values})
