"""Analytic MACs equal FlopCounterMode's for every timm ViT family (VisionTransformer with or without a class
token, registers, pooling heads and hybrid embeddings; VisionTransformerDistilled; Eva; VisionTransformerRelPos),
unpruned and pruned, read off the model's structure; what the count cannot place is refused."""
import copy

import pytest
import timm
import torch
from torch.utils.flop_counter import FlopCounterMode

from tokenprune.core.patch import patch, prune_state
from tokenprune.measure.macs import SDPA_CPU_FORMULA, analytic_macs, check_countable, measured_macs

FAMILIES = [
    pytest.param("deit_tiny_distilled_patch16_224", dict(img_size=64, num_classes=10), id="distilled"),
    pytest.param("vit_tiny_r_s16_p8_224", dict(img_size=96), id="hybrid-resnet"),
    pytest.param("vit_base_mci_224", dict(img_size=64), id="hybrid-convstem-no-proj"),
    pytest.param("vit_small_patch16_224", dict(img_size=64, class_token=False, global_pool="avg"), id="no-class-token"),
    pytest.param("vit_small_patch16_224", dict(img_size=64, global_pool="map"), id="map"),
    pytest.param("vit_small_patch16_224", dict(img_size=64, class_token=False, reg_tokens=4, global_pool="map"),
                 id="map-registers"),
    pytest.param("vit_small_patch16_224", dict(img_size=64, global_pool="prr"), id="prr"),
    pytest.param("vit_small_patch16_224", dict(img_size=64, global_pool=""), id="no-pooling"),
    pytest.param("vit_small_patch14_reg4_dinov2", dict(img_size=56), id="registers"),
    pytest.param("eva02_tiny_patch14_224", dict(img_size=56), id="eva02-rope-swiglu"),
    pytest.param("eva02_tiny_patch14_224", dict(img_size=56, qkv_fused=False), id="eva-separate-qkv"),
    pytest.param("eva02_tiny_patch14_224", dict(img_size=56, attn_type="rope", qkv_fused=False, num_kv_heads=1),
                 id="eva-grouped-query"),
    pytest.param("eva02_tiny_patch14_224", dict(img_size=56, global_pool="map"), id="eva-map"),
    pytest.param("vit_medium_patch16_rope_reg1_gap_256", dict(img_size=64), id="eva-rope-register-gap"),
    pytest.param("vit_small_patch16_rope_mixed_224", dict(img_size=64), id="eva-rope-mixed"),
    pytest.param("vit_relpos_small_patch16_224", dict(img_size=64), id="relpos-mlp"),
    pytest.param("vit_srelpos_small_patch16_224", dict(img_size=64), id="relpos-shared-mlp"),
    pytest.param("vit_relpos_medium_patch16_cls_224", dict(img_size=64), id="relpos-class-token"),
    pytest.param("vit_relpos_small_patch16_224", dict(img_size=64, rel_pos_type="bias"), id="relpos-bias-table"),
]


def _model(name: str, **kwargs) -> torch.nn.Module:
    return timm.create_model(name, pretrained=False, **{"depth": 2, **kwargs}).eval()


def _unfused(model: torch.nn.Module) -> torch.nn.Module:
    """Every attention (blocks and pool) computed as ``q @ k^T``, softmax, ``@ v`` instead of the fused kernel."""
    for m in model.modules():
        if hasattr(m, "fused_attn"):
            m.fused_attn = False
    return model


def _counted(module: torch.nn.Module, x: torch.Tensor) -> int:
    with torch.inference_mode(), FlopCounterMode(display=False, custom_mapping=SDPA_CPU_FORMULA) as counter:
        module(x)
    return counter.get_total_flops() // 2


@pytest.mark.parametrize("fused", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("name,kwargs", FAMILIES)
def test_unpruned_analytic_equals_measured(name, kwargs, fused):
    m = _model(name, **kwargs)
    if not fused:
        _unfused(m)
    count = analytic_macs(m)
    assert count.total == measured_macs(m)
    assert analytic_macs(m, keep_rate=1.0).total == count.total
    n = count.tokens_in[0]
    assert count.tokens_out == [n, n] and n == m.patch_embed.num_patches + m.num_prefix_tokens


def test_distillation_head_is_counted():
    """DeiT's distillation head reads the distillation token: 192 x 10 MACs beside the class head's."""
    m = _model("deit_tiny_distilled_patch16_224", img_size=64, num_classes=10)
    count = analytic_macs(m)
    assert count.head == 2 * 192 * 10
    assert count.total == measured_macs(m)


def test_hybrid_counts_its_cnn_and_the_grid_it_outputs():
    """R-Ti/16 at 96 px: the ResNet stem reduces 96 px to 24, the 8 px projection makes a 3 x 3 grid (9 patches,
    not 144 from an 8 px convolution on the image), and the stem's convolutions are counted."""
    m = _model("vit_tiny_r_s16_p8_224", img_size=96)
    count = analytic_macs(m)
    assert count.tokens_in[0] == 9 + 1
    assert count.patch_embed == _counted(m.patch_embed, torch.zeros(1, 3, 96, 96))
    assert count.total == measured_macs(m)


@pytest.mark.parametrize("name,kwargs,size,grid", [
    ("vit_tiny_r_s16_p8_224", dict(dynamic_img_size=True), (96, 128), (3, 4)),
    ("eva02_tiny_patch14_224", dict(dynamic_img_size=True), (56, 84), (4, 6)),
])
def test_dynamic_img_size(name, kwargs, size, grid):
    """At another input size the grid is the one the model makes of it (a hybrid's: its CNN's output)."""
    m = _model(name, **kwargs)
    count = analytic_macs(m, img_size=size)
    assert count.tokens_in[0] == grid[0] * grid[1] + m.num_prefix_tokens
    assert count.total == measured_macs(m, img_size=size)


def test_relative_position_mlp_is_counted():
    """The relative-position MLP (2 -> hidden -> 6 heads over the (2h-1)(2w-1) = 7 x 7 offsets of a 4 x 4 grid) is
    counted in every block (hidden 128), and once in all for the shared variant (hidden 384)."""
    per_block = analytic_macs(_model("vit_relpos_small_patch16_224", img_size=64))
    shared = analytic_macs(_model("vit_srelpos_small_patch16_224", img_size=64))
    table = analytic_macs(_model("vit_relpos_small_patch16_224", img_size=64, rel_pos_type="bias"))
    assert per_block.blocks[0] - table.blocks[0] == 7 * 7 * (2 * 128 + 128 * 6)
    assert shared.position == 7 * 7 * (2 * 384 + 384 * 6) and shared.blocks == table.blocks


def test_unpatched_shallow_model_at_keep_rate_one():
    """keep_rate=1.0 on an unpatched model shallower than EViT's locations counts it unpruned."""
    m = _model("vit_small_patch16_224", img_size=64, class_token=False, global_pool="avg")
    assert analytic_macs(m, keep_rate=1.0).total == measured_macs(m)


def test_refusals():
    with pytest.raises(TypeError, match="model"):
        analytic_macs(timm.create_model("resnet10t"))
    with pytest.raises(TypeError, match=r"model\.blocks\[0\]"):  # differential attention's products differ
        analytic_macs(_model("vit_small_patch16_224", img_size=64, attn_layer="diff"))
    with pytest.raises(TypeError, match=r"model\.blocks\[0\]"):  # parallel blocks have no .attn / .mlp
        analytic_macs(_model("vit_base_patch16_xp_224", img_size=32))
    m = _model("vit_small_patch16_224", img_size=64)
    m.extra = torch.nn.Linear(4, 4)
    with pytest.raises(TypeError, match=r"model\.extra"):
        check_countable(m)
    for no_cls in (_model("vit_small_patch16_224", img_size=64, class_token=False, global_pool="avg", depth=12),
                   _model("vit_medium_patch16_rope_reg1_gap_256", img_size=64, depth=12)):  # a register, no [CLS]
        with pytest.raises(ValueError, match="keep_rate"):
            analytic_macs(no_cls, keep_rate=0.7)


PRUNABLE = [
    pytest.param("deit_tiny_distilled_patch16_224", dict(img_size=64), id="distilled"),
    pytest.param("vit_small_patch14_reg4_dinov2", dict(img_size=56), id="registers"),
    pytest.param("vit_tiny_r_s16_p8_224", dict(), id="hybrid-resnet"),
    pytest.param("vit_small_patch16_224", dict(img_size=64, global_pool="map"), id="map"),
    pytest.param("vit_small_patch16_224", dict(img_size=64, global_pool="avg"), id="gap-with-class-token"),
    pytest.param("vit_small_patch16_224", dict(img_size=64, global_pool=""), id="no-pooling"),
]


@pytest.mark.filterwarnings("ignore:model.global_pool")
@pytest.mark.parametrize("scorer,reducer", [("cls_attention", "drop"), ("cls_attention", "fuse_attention"),
                                            ("tokens_to_tokens", "fuse_attention")])
@pytest.mark.parametrize("name,kwargs", PRUNABLE)
def test_pruned_analytic_equals_measured(name, kwargs, scorer, reducer):
    """Token counts follow the schedule past every prefix token (class, distillation, registers) and the head
    (attention pool on what remains); MACs equal the counted ones exactly."""
    m = patch(_model(name, **kwargs, depth=4), keep_rate=0.5, locations=(2, 3), scorer=scorer, reducer=reducer)
    size = m.patch_embed.img_size
    with torch.inference_mode():
        m(torch.randn(2, 3, *size))
    count = analytic_macs(m)
    assert count.tokens_out == prune_state(m).token_counts
    assert count.tokens_out[-1] < count.tokens_in[0]
    assert count.total == measured_macs(m)


NO_CLASS_TOKEN = [
    pytest.param("vit_small_patch16_224", dict(img_size=64, class_token=False, global_pool="avg"), id="gap"),
    pytest.param("vit_base_patch16_siglip_224", dict(img_size=64), id="siglip-map"),
    pytest.param("vit_small_patch16_224", dict(img_size=64, class_token=False, reg_tokens=2, global_pool="map"),
                 id="map-registers"),
]


@pytest.mark.filterwarnings("ignore:model.global_pool")
@pytest.mark.parametrize("name,kwargs", NO_CLASS_TOKEN)
def test_pruned_without_class_token(name, kwargs):
    """Without a class token every patch token is prunable (the prefix is the registers, or nothing): random
    scores dropping half the tokens at blocks 2 and 3 leave 16 -> 8 -> 4 patch tokens, counted exactly."""
    m = patch(_model(name, **kwargs, depth=4), keep_rate=0.5, locations=(2, 3), scorer="random", reducer="drop",
              seed=0)
    with torch.inference_mode():
        m(torch.randn(2, 3, 64, 64))
    count = analytic_macs(m)
    p = m.num_prefix_tokens
    assert count.tokens_out == prune_state(m).token_counts == [16 + p, 8 + p, 4 + p, 4 + p]
    assert count.total == measured_macs(m)


def test_unpatched_keep_rate_counts_evit_past_all_prefix_tokens():
    """An unpatched distilled model at keep 0.5 is counted as EViT with both prefix tokens kept."""
    plain = _model("deit_tiny_distilled_patch16_224", img_size=64, depth=12)
    evit = patch(copy.deepcopy(plain), keep_rate=0.5)
    count = analytic_macs(plain, keep_rate=0.5)
    assert count.tokens_out == analytic_macs(evit).tokens_out
    assert count.tokens_out[3::3] == [9 + 2, 6 + 2, 4 + 2]  # 16 patches -> 8 + 1 fused -> 5 + 1 -> 3 + 1
    assert count.total == measured_macs(evit)


POSITIONAL = [  # (model, kwargs, scorer, reducer): a class token allows EViT, otherwise random scores
    pytest.param("eva02_tiny_patch14_224", dict(img_size=56), "cls_attention", "fuse_attention", id="eva02"),
    pytest.param("eva02_tiny_patch14_224", dict(img_size=56), "tokens_to_tokens", "fuse_attention", id="eva02-full-map"),
    pytest.param("eva02_tiny_patch14_224", dict(img_size=56, attn_type="rope", qkv_fused=False, num_kv_heads=1),
                 "cls_attention", "drop", id="eva-grouped-query"),
    pytest.param("vit_small_patch16_rope_mixed_224", dict(img_size=64), "cls_attention", "fuse_attention",
                 id="eva-rope-mixed"),
    pytest.param("vit_medium_patch16_rope_reg1_gap_256", dict(img_size=64), "random", "drop", id="eva-register-gap"),
    pytest.param("vit_relpos_medium_patch16_cls_224", dict(img_size=64), "cls_attention", "fuse_attention",
                 id="relpos-class-token"),
    pytest.param("vit_relpos_small_patch16_224", dict(img_size=64), "random", "drop", id="relpos-mlp"),
    pytest.param("vit_srelpos_small_patch16_224", dict(img_size=64), "random", "drop", id="relpos-shared-mlp"),
    pytest.param("vit_relpos_small_patch16_rpn_224", dict(img_size=64), "random", "drop", id="relpos-res-post"),
]


@pytest.mark.filterwarnings("ignore:model.global_pool")
@pytest.mark.parametrize("name,kwargs,scorer,reducer", POSITIONAL)
def test_pruned_positional_families(name, kwargs, scorer, reducer):
    """Eva (rope) and the relative-position ViT pruned at blocks 2 and 3: token counts follow the schedule and
    the MACs equal the counted ones exactly (rope is elementwise, the relative-position MLP runs over its whole
    table once per block, or once for the shared one, whatever the tokens held)."""
    m = patch(_model(name, **kwargs, depth=4), keep_rate=0.5, locations=(2, 3), scorer=scorer, reducer=reducer,
              seed=0)
    with torch.inference_mode():
        m(torch.randn(2, 3, *m.patch_embed.img_size))
    count = analytic_macs(m)
    assert count.tokens_out == prune_state(m).token_counts
    assert count.tokens_out[-1] < count.tokens_in[0]
    assert count.total == measured_macs(m)
