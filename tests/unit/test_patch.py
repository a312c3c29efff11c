"""patch.py: equality with timm when nothing is pruned, the official EViT token counts, bad input."""
import math

import pytest
import timm
import torch

from tokenprune.core import patch as tp
from tokenprune.core.block_forward import attention_with_stats
from tokenprune.core.patch import check_img_size, check_timm_version, patch, prune_state

SMALL = dict(img_size=64)  # random weights; the architecture (depth, heads, LayerScale, q/k norm) is what matters


def _pair(name, **kw):
    ref = timm.create_model(name, **kw).eval()
    new = timm.create_model(name, **kw).eval()
    new.load_state_dict(ref.state_dict())
    return ref, new


@pytest.mark.parametrize("name,kw", [
    ("deit_tiny_patch16_224", {}),
    ("deit_small_patch16_224", {}),
    ("deit_base_patch16_224", SMALL),
    ("vit_small_patch16_224", {}),
    ("vit_small_patch14_dinov2", {"img_size": 70}),  # LayerScale
])
def test_unpruned_equals_timm(name, kw):
    ref, new = _pair(name, **kw)
    patch(new, keep_rate=1.0)
    x = torch.randn(2, 3, *ref.patch_embed.img_size)
    with torch.inference_mode():
        assert torch.allclose(ref(x), new(x), atol=1e-5, rtol=0)
    assert isinstance(new, timm.models.vision_transformer.VisionTransformer)


def test_layerscale_is_applied():
    """A patched block must use ls1/ls2 (ToMe's timm patch skips them): scale them and compare with timm."""
    ref, new = _pair("vit_small_patch14_dinov2", img_size=42)
    for m in (ref, new):
        for blk in m.blocks:
            blk.ls1.gamma.data.uniform_(0.1, 2.0)
    new.load_state_dict(ref.state_dict())
    patch(new, keep_rate=1.0)
    x = torch.randn(1, 3, 42, 42)
    with torch.inference_mode():
        assert torch.allclose(ref(x), new(x), atol=1e-5, rtol=0)


def test_qk_norm_and_stats_path_match_timm_attention():
    """attention_with_stats reproduces timm Attention (with q/k norm) on both its fused and explicit paths."""
    attn = timm.layers.Attention(64, num_heads=4, qkv_bias=True, qk_norm=True, norm_layer=torch.nn.LayerNorm).eval()
    x = torch.randn(2, 10, 64)
    with torch.inference_mode():
        ref = attn(x)
        for needs in (frozenset(), frozenset({"cls_attn"}), frozenset({"attn"})):
            out, stats = attention_with_stats(attn, x, needs)
            assert torch.allclose(out, ref, atol=1e-5)
        # the [CLS] row computed next to the fused kernel equals the full map's first row
        _, a = attention_with_stats(attn, x, frozenset({"cls_attn"}))
        _, b = attention_with_stats(attn, x, frozenset({"attn"}))
        assert torch.allclose(a["cls_attn"], b["attn"][:, :, 0], atol=1e-6)
        assert torch.allclose(a["cls_attn"].sum(-1), torch.ones(2, 4))


def test_cls_row_scorer_does_not_build_full_map(monkeypatch):
    """A [CLS]-row scorer must not materialise the N x N map: no [B, H, N, N] tensor may be softmaxed."""
    m = patch(timm.create_model("deit_tiny_patch16_224").eval(), keep_rate=0.7)
    shapes = []
    real = torch.Tensor.softmax

    def spy(self, *a, **k):
        shapes.append(tuple(self.shape))
        return real(self, *a, **k)

    monkeypatch.setattr(torch.Tensor, "softmax", spy)
    with torch.inference_mode():
        m(torch.randn(1, 3, 224, 224))
    assert shapes and all(s[-2] == 1 for s in shapes), shapes  # only [B, H, 1, N] rows


@pytest.mark.parametrize("reducer,want", [("fuse_attention", [196, 139, 99, 71]), ("drop", [196, 138, 97, 68])])
def test_evit_token_counts_deit_s(reducer, want):
    m = patch(timm.create_model("deit_small_patch16_224").eval(), keep_rate=0.7, reducer=reducer)
    with torch.inference_mode():
        m(torch.randn(1, 3, 224, 224))
    counts = prune_state(m).token_counts
    assert [196] + [counts[i] - 1 for i in (3, 6, 9)] == want
    assert len(counts) == 12 and counts[:3] == [197] * 3


def test_evit_fused_token_is_raw_attention_weighted_sum():
    """Recompute EViT by hand at block 4 (evit.py): top-k by head-mean [CLS] attention, fused = sum a_i x_i."""
    m = timm.create_model("deit_tiny_patch16_224").eval()
    x = torch.randn(1, 3, 224, 224)
    with torch.inference_mode():
        h = m._pos_embed(m.patch_embed(x))
        for blk in m.blocks[:3]:
            h = blk(h)
        blk = m.blocks[3]
        y = blk.norm1(h)
        B, N, C = y.shape
        qkv = blk.attn.qkv(y).reshape(B, N, 3, 3, C // 3).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = ((q * blk.attn.scale) @ k.transpose(-2, -1)).softmax(-1)
        h = h + blk.attn.proj((attn @ v).transpose(1, 2).reshape(B, N, C))
        cls_attn = attn[:, :, 0, 1:].mean(1)
        left = math.ceil(0.7 * (N - 1))
        _, idx = torch.topk(cls_attn, left, dim=1, largest=True, sorted=True)
        rest = torch.ones(N - 1, dtype=torch.bool)
        rest[idx[0]] = False
        fused = (h[0, 1:][rest] * cls_attn[0][rest, None]).sum(0)
        want = torch.cat([h[:, :1], h[:, 1:][:, idx[0]], fused[None, None]], 1)
        want = want + blk.mlp(blk.norm2(want))

    patch(m, keep_rate=0.7, locations=[4])
    st = prune_state(m)
    got = {}
    m.blocks[3].register_forward_hook(lambda mod, inp, out: got.setdefault("x", out))
    with torch.inference_mode():
        m(x)
    assert got["x"].shape == want.shape == (1, 1 + left + 1, C)
    assert torch.allclose(got["x"], want, atol=1e-4)
    assert st.size[0, -1].item() == N - 1 - left  # the fused token stands for every pruned patch


def test_keep_rate_knob_and_repatch():
    m = patch(timm.create_model("deit_tiny_patch16_224").eval(), keep_rate=0.7)
    m.keep_rate = 0.5
    assert m.keep_rate == 0.5 and prune_state(m).schedule.keep_rates == {3: 0.5, 6: 0.5, 9: 0.5}
    m.keep_rate = [0.9, 0.8, 0.7]
    assert m.keep_rate == [0.9, 0.8, 0.7] and prune_state(m).schedule.keep_rates == {3: 0.9, 6: 0.8, 9: 0.7}
    patch(m, keep_rate=0.6, locations=[2])
    assert m.keep_rate == 0.6 and prune_state(m).schedule.locations == (2,)
    with torch.inference_mode():
        m(torch.randn(1, 3, 224, 224))
    assert prune_state(m).token_counts[1] == 1 + math.ceil(0.6 * 196) + 1


def test_trace_source_partitions_patches():
    m = patch(timm.create_model("deit_tiny_patch16_224").eval(), keep_rate=0.5, trace=True)
    with torch.inference_mode():
        m(torch.randn(2, 3, 224, 224))
    st = prune_state(m)
    assert len(st.history) == 3
    src = st.source  # [B, N_out, 197]
    # with fusion every original token is represented exactly once
    assert torch.equal(src.sum(1), torch.ones(2, 197))
    assert torch.equal(src.sum(-1), st.size)


def test_training_backward_works():
    m = patch(timm.create_model("deit_tiny_patch16_224", num_classes=3, drop_path_rate=0.1), keep_rate=0.7)
    m.train()
    out = m(torch.randn(2, 3, 224, 224))
    out.sum().backward()
    assert m.patch_embed.proj.weight.grad is not None


@pytest.mark.parametrize("kwargs,match", [
    ({"keep_rate": 0.0}, "keep_rate"),
    ({"keep_rate": 1.5}, "keep_rate"),
    ({"keep_rate": "0.7"}, "keep_rate"),
    ({"locations": [0]}, "locations"),
    ({"locations": [13]}, "locations"),
    ({"scorer": "nope"}, "scorer.*accepted.*cls_attention"),
    ({"reducer": "nope"}, "reducer.*accepted.*drop"),
    ({"reducer": "fuse_softmax", "reducer_options": {"temp": 1}}, "reducer_options.*temperature"),
])
def test_bad_input_names_the_parameter(kwargs, match):
    m = timm.create_model("deit_tiny_patch16_224")
    with pytest.raises((ValueError, TypeError), match=match):
        patch(m, **kwargs)


def test_refuses_unknown_timm_version():
    with pytest.raises(RuntimeError, match="timm 1.0.x"):
        check_timm_version("2.1.0")
    check_timm_version("1.0.31")


def test_refuses_other_block_types():
    m = timm.create_model("vit_small_patch16_224", img_size=32, class_token=True)
    m.blocks[0] = torch.nn.Identity()
    with pytest.raises(TypeError, match=r"model.blocks\[0\]"):
        patch(m)


def test_img_size_check():
    m = timm.create_model("deit_tiny_patch16_224")
    assert check_img_size(m, 224) == (224, 224)
    with pytest.raises(ValueError, match="img_size"):
        check_img_size(m, 96)
