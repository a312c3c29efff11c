"""Oracle-guided selection (EViT Table 14): the oracle map, its resampling, the scorer and how maps reach it."""
import re
import pytest
import torch
from timm.models.vision_transformer import VisionTransformer

from tokenprune.methods import oracle
from tokenprune.measure.evaluation import KEPT, patch_status, predict
from tokenprune.core.config import PruneConfig
from tokenprune.core.patch import patch, prune_state
from tokenprune.core.scorers import TokenContext, get_scorer


def _vit(img=32, patch_size=8, depth=3, dim=32, heads=2, classes=4, seed=0):
    torch.manual_seed(seed)
    return VisionTransformer(img_size=img, patch_size=patch_size, in_chans=3, num_classes=classes, embed_dim=dim,
                             depth=depth, num_heads=heads).eval()


def _manual_last_cls_attention(m, x):
    """Independent computation: run the blocks before the last, then softmax(q_cls K^T * scale), head mean."""
    with torch.no_grad():
        t = m.norm_pre(m._pos_embed(m.patch_embed(x)))
        for blk in m.blocks[:-1]:
            t = blk(t)
        blk = m.blocks[-1]
        h = blk.norm1(t)
        B, N, C = h.shape
        a = blk.attn
        qkv = a.qkv(h).reshape(B, N, 3, a.num_heads, a.head_dim).permute(2, 0, 3, 1, 4)
        q, k = a.q_norm(qkv[0]), a.k_norm(qkv[1])
        att = ((q * a.scale) @ k.transpose(-2, -1)).softmax(-1)
        return att[:, :, 0, m.num_prefix_tokens:].mean(1)


def test_oracle_cls_attention_matches_manual_and_batches():
    m = _vit()
    x = torch.randn(5, 3, 32, 32)
    maps = oracle.oracle_cls_attention(m, x, batch=2)
    assert maps.shape == (5, 4, 4)
    want = _manual_last_cls_attention(m, x).reshape(5, 4, 4)
    assert torch.allclose(maps, want, atol=1e-5)
    assert (maps.sum((1, 2)) <= 1 + 1e-5).all()
    with pytest.raises(ValueError, match="block"):
        oracle.oracle_cls_attention(m, x, block=7)


def test_resample_map_area_identity_and_upsampling():
    maps = torch.arange(16.0).reshape(1, 4, 4)
    down = oracle.resample_map(maps, (2, 2))
    assert down.shape == (1, 4)
    assert torch.allclose(down, torch.tensor([[2.5, 4.5, 10.5, 12.5]]))  # means of the 2x2 quadrants
    assert torch.equal(oracle.resample_map(maps, (4, 4)), maps.reshape(1, 16))
    up = oracle.resample_map(maps, (8, 8))
    assert up.shape == (1, 64) and up.min() >= 0 and up.max() <= 15
    odd = oracle.resample_map(torch.ones(2, 16, 16), (7, 7))  # 16x16 ViT-S/14 grid -> 7x7 small-ViT grid
    assert torch.allclose(odd, torch.ones(2, 49))
    with pytest.raises(ValueError, match="maps"):
        oracle.resample_map(torch.ones(4, 4), (2, 2))


def test_scorer_needs_maps_and_checks_batch():
    spec = get_scorer("oracle_attention")
    assert spec.needs == frozenset()
    ctx = TokenContext(x=torch.zeros(2, 5, 8), num_prefix_tokens=1, block_index=0)
    with pytest.raises(RuntimeError, match="oracle_feed"):
        spec(ctx)
    ctx.extras[oracle.ORACLE_KEY] = torch.rand(3, 4)
    with pytest.raises(RuntimeError, match="oracle_attention") as err:
        spec(ctx)
    assert {"3", "2"} <= set(re.findall(r"\d+", str(err.value)))  # the maps given, the batch
    ctx.extras[oracle.ORACLE_KEY] = torch.tensor([[0.1, 0.4, 0.2, 0.3], [0.5, 0.0, 0.3, 0.2]])
    assert torch.equal(spec(ctx), ctx.extras[oracle.ORACLE_KEY])


def test_scorer_sums_over_sources_after_a_fusion():
    # 2 prunable tokens left: token 0 stands for patch 2, token 1 (fused) for patches 0, 1 and 3
    source = torch.zeros(1, 3, 5)
    source[0, 0, 0] = 1                       # [CLS]
    source[0, 1, 3] = 1                       # original patch index 2 (+1 for [CLS])
    source[0, 2, [1, 2, 4]] = 1
    maps = torch.tensor([[0.1, 0.2, 0.3, 0.25]])
    ctx = TokenContext(x=torch.zeros(1, 3, 8), num_prefix_tokens=1, block_index=4, source=source,
                       extras={oracle.ORACLE_KEY: maps})
    assert torch.allclose(get_scorer("oracle_attention")(ctx), torch.tensor([[0.3, 0.55]]))


def test_feed_keeps_each_images_top_oracle_patches():
    m = _vit()
    x = torch.randn(7, 3, 32, 32)
    g = torch.Generator().manual_seed(1)
    maps = torch.rand(7, 16, generator=g)
    cfg = PruneConfig(scorer="oracle_attention", reducer="drop", keep_rate=0.25, locations=(1,))
    cfg.apply(m, trace=True)
    with oracle.oracle_feed(m, maps):
        status = patch_status(m, x)[0].reshape(7, 16)
    top = maps.topk(4, dim=1).indices
    for i in range(7):
        assert set(torch.nonzero(status[i] == KEPT).flatten().tolist()) == set(top[i].tolist())


def test_feed_in_batches_equals_one_batch_and_restores_state():
    m = _vit()
    x = torch.randn(7, 3, 32, 32)
    y = torch.zeros(7, dtype=torch.long)
    maps = torch.rand(7, 16, generator=torch.Generator().manual_seed(2))
    PruneConfig(scorer="oracle_attention", reducer="fuse_attention", keep_rate=0.5, locations=(1, 2)).apply(m)
    with oracle.oracle_feed(m, maps):
        a = predict(m, x, y, batch=3, device="cpu")
    with oracle.oracle_feed(m, maps):
        b = predict(m, x, y, batch=7, device="cpu")
    assert torch.allclose(a.logits, b.logits, atol=1e-5)
    st = prune_state(m)
    assert st.trace is False and oracle.ORACLE_KEY not in st.extras
    # different maps give different predictions (the scorer is really used)
    with oracle.oracle_feed(m, 1 - maps):
        c = predict(m, x, y, batch=7, device="cpu")
    assert not torch.allclose(a.logits, c.logits)


def test_feed_detects_misalignment():
    m = _vit()
    patch(m, keep_rate=0.5, locations=(1,), scorer="oracle_attention")
    x = torch.randn(4, 3, 32, 32)
    with pytest.raises(RuntimeError, match="oracle_feed") as err:
        with oracle.oracle_feed(m, torch.rand(3, 16)), torch.no_grad():
            m(x)
    assert {"4", "3"} <= set(re.findall(r"\d+", str(err.value)))  # the images of the batch, the maps given
    with pytest.raises(RuntimeError, match="oracle_feed") as err:
        with oracle.oracle_feed(m, torch.rand(6, 16)), torch.no_grad():
            m(x)
    assert {"4", "6"} <= set(re.findall(r"\d+", str(err.value)))  # the maps used, the maps given


def test_oracle_guided_equals_feed_and_uses_real_oracle_maps():
    small = _vit(img=32, patch_size=8)          # 4x4 grid
    big = _vit(img=64, patch_size=8, seed=1)    # 8x8 grid: the oracle
    x = torch.randn(3, 3, 32, 32)
    patch(small, keep_rate=0.5, locations=(1,), scorer="oracle_attention")

    def fn(batch):
        up = torch.nn.functional.interpolate(batch, size=64, mode="bilinear", align_corners=False)
        return oracle.resample_map(oracle.oracle_cls_attention(big, up), small.patch_embed.grid_size)

    guided = oracle.OracleGuided(small, fn)
    with torch.no_grad():
        out = guided(x)
    with oracle.oracle_feed(small, fn(x)), torch.no_grad():
        ref = small(x)
    assert torch.allclose(out, ref, atol=1e-5)
    with pytest.raises(ValueError, match="not patched"):
        oracle.OracleGuided(_vit(), fn)


def test_combined_macs():
    assert oracle.combined_macs(2e9, 1e9) == 3e9
    with pytest.raises(ValueError):
        oracle.combined_macs(-1, 1)
