"""Overlapping patch embedding (arXiv 2507.19175, stride 3/4 of the patch): token counts, MACs, identities."""
import pytest
import timm
import torch

from tokenprune.measure.macs import analytic_macs, measured_macs
from tokenprune.methods.overlap import conv_grid, overlap_info, overlap_patch_embed, overlap_stride
from tokenprune.core.patch import patch, prune_state


def _vit(**kw):
    """A small 12-block ViT at 224 px, patch 16 (fast to build; MACs and token counts follow the same rules)."""
    from timm.models.vision_transformer import VisionTransformer
    return VisionTransformer(**{"img_size": 224, "patch_size": 16, "embed_dim": 48, "depth": 12, "num_heads": 3,
                                "num_classes": 10, **kw}).eval()


def test_stride_convention():
    assert overlap_stride(16) == 12          # the paper: 3/4 of 16
    assert overlap_stride(14) == 10          # 10.5 rounded down: overlap at least a quarter
    assert overlap_stride(4) == 3
    assert overlap_stride(1) == 1
    with pytest.raises(ValueError, match="patch_size"):
        overlap_stride(0)


def test_grid_formula():
    assert conv_grid(224, 16, 12) == (18, 18)
    assert conv_grid(224, 16, 16) == (14, 14)
    assert conv_grid((224, 112), 16, 12) == (18, 9)


def test_deit_s_has_324_tokens_at_224():
    m = overlap_patch_embed(timm.create_model("deit_small_patch16_224").eval())
    assert overlap_info(m)["stride"] == (12, 12)
    assert m.patch_embed.num_patches == 324 and tuple(m.patch_embed.grid_size) == (18, 18)
    assert m.pos_embed.shape == (1, 325, 384)
    c = analytic_macs(m)
    assert c.patch_embed == 324 * 384 * 3 * 16 * 16
    assert c.tokens_in[0] == 325
    with torch.inference_mode():
        tokens = m.patch_embed(torch.randn(1, 3, 224, 224))
    assert tokens.shape == (1, 324, 384)


def test_forward_token_count():
    m = overlap_patch_embed(_vit())
    with torch.inference_mode():
        assert m.forward_features(torch.randn(1, 3, 224, 224)).shape == (1, 325, 48)


@pytest.mark.parametrize("keep", [1.0, 0.6])
def test_analytic_equals_measured_with_overlap(keep):
    m = overlap_patch_embed(_vit())
    patch(m, keep_rate=keep, scorer="attention_variance", reducer="fuse_softmax")
    a, b = analytic_macs(m).total, measured_macs(m)
    assert abs(a - b) / b < 0.01


def test_pruning_stages_after_overlap():
    m = patch(overlap_patch_embed(_vit()), keep_rate=0.6,
              scorer="attention_variance", reducer="fuse_softmax")
    with torch.inference_mode():
        m(torch.randn(1, 3, 224, 224))
    counts = prune_state(m).token_counts
    # 324 -> ceil(0.6 * 324) + 1 = 196 -> ceil(0.6 * 196) + 1 = 119 -> ceil(0.6 * 119) + 1 = 73
    assert [counts[i] - 1 for i in (3, 6, 9)] == [196, 119, 73]


def test_stride_equal_to_patch_is_identity():
    torch.manual_seed(0)
    a, b = _vit(), _vit()
    b.load_state_dict(a.state_dict())
    overlap_patch_embed(b, stride=16)
    x = torch.randn(2, 3, 224, 224)
    with torch.inference_mode():
        assert torch.equal(a(x), b(x))


def test_weights_kept_and_pos_embed_resampled():
    a = _vit()
    w, pos = a.patch_embed.proj.weight.clone(), a.pos_embed.detach().clone()
    overlap_patch_embed(a)
    assert torch.equal(a.patch_embed.proj.weight, w)
    assert torch.equal(a.pos_embed[:, :1], pos[:, :1])      # [CLS] entry untouched
    assert a.pos_embed.requires_grad
    # a constant position embedding stays constant under resampling
    b = _vit()
    with torch.no_grad():
        b.pos_embed[:, 1:] = 0.5
    overlap_patch_embed(b)
    assert torch.allclose(b.pos_embed[:, 1:], torch.full_like(b.pos_embed[:, 1:], 0.5), atol=1e-5)


def test_dynamic_img_size_model():
    from timm.models.vision_transformer import VisionTransformer
    m = VisionTransformer(img_size=224, patch_size=14, embed_dim=48, depth=2, num_heads=3, dynamic_img_size=True).eval()
    overlap_patch_embed(m)
    assert overlap_info(m)["grid"] == (22, 22)  # stride 10: (224 - 14) // 10 + 1
    with torch.inference_mode():
        assert m.forward_features(torch.randn(1, 3, 224, 224)).shape[1] == 1 + 22 * 22


def test_bad_stride():
    m = _vit()
    with pytest.raises(ValueError, match="stride"):
        overlap_patch_embed(m, stride=17)
    with pytest.raises(TypeError, match="VisionTransformer"):
        overlap_patch_embed(torch.nn.Linear(2, 2))
