"""The split forward pass equals the patched model's: same tokens, same selection, same logits."""
import pytest
import torch
from timm.models.vision_transformer import VisionTransformer

from tokenprune.core import split_forward as split
from tokenprune.core.patch import patch, prune_state
from tokenprune.core.schedule import num_keep
from tokenprune.core.scorers import select_topk


def _vit(**kw):
    args = dict(img_size=32, patch_size=8, embed_dim=32, depth=4, num_heads=2, num_classes=5)
    args.update(kw)
    return VisionTransformer(**args).eval()


@pytest.fixture(params=["plain", "layerscale_qknorm"])
def model(request):
    torch.manual_seed(0)
    if request.param == "plain":
        return _vit()
    return _vit(init_values=0.1, qk_norm=True)


def test_unpruned_split_equals_model(model):
    x = torch.randn(3, 3, 32, 32)
    cache = split.cache_tokens(model, x, blocks=[1, 3], dtype="fp32")
    with torch.no_grad():
        want = model(x)
        for b in (1, 3):
            got = split.forward_from(model, b, cache.tokens[b])
            assert torch.allclose(got, want, atol=1e-5)
    assert torch.allclose(cache.logits, want, atol=1e-5)
    assert cache.tokens[1].shape == (3, 17, 32) and cache.cls_attn[3].shape == (3, 2, 17)
    assert torch.allclose(cache.cls_attn[1].sum(-1), torch.ones(3, 2), atol=1e-5)


@pytest.mark.parametrize("block,keep", [(1, 0.25), (2, 0.5), (4, 0.7)])
def test_cls_attention_drop_equals_patched_model(model, block, keep):
    x = torch.randn(4, 3, 32, 32)
    cache = split.cache_tokens(model, x, blocks=[block], dtype="fp32")
    scores = split.score_cached(cache, block, "cls_attention")
    logits, keep_idx = split.prune_cached(model, cache, block, scores, keep, dtype="fp32")
    patch(model, keep_rate=keep, locations=(block,), reducer="drop", trace=True)
    with torch.no_grad():
        want = model(x)
    st = prune_state(model)
    assert torch.equal(st.history[0]["keep_idx"], keep_idx)
    assert torch.allclose(logits, want, atol=1e-5)
    # the traced source of the kept tokens is the one-hot map of keep_idx
    p = st.num_prefix_tokens
    assert torch.equal(st.source[:, p:, p:].bool(), split.kept_source(keep_idx, 16))
    assert keep_idx.shape == (4, num_keep(16, keep))


def test_gate_of_ones_is_no_pruning_and_zero_gate_is_dropping(model):
    x = torch.randn(2, 3, 32, 32)
    cache = split.cache_tokens(model, x, blocks=[2], dtype="fp32")
    t = cache.tokens[2]
    with torch.no_grad():
        full = split.forward_from(model, 2, t)
        ones = split.forward_from(model, 2, t, gate=torch.ones(2, 16))
        assert torch.allclose(full, ones, atol=1e-5)
        keep_idx, _ = select_topk(torch.randn(2, 16), 6)
        gate = torch.zeros(2, 16).scatter(1, keep_idx, 1.0)
        assert torch.allclose(split.forward_from(model, 2, t, gate=gate),
                              split.forward_from(model, 2, t, keep_idx=keep_idx), atol=1e-5)


def test_gate_is_differentiable(model):
    x = torch.randn(2, 3, 32, 32)
    cache = split.cache_tokens(model, x, blocks=[2], dtype="fp32")
    gate = torch.full((2, 16), 0.5, requires_grad=True)
    split.forward_from(model, 2, cache.tokens[2], gate=gate).sum().backward()
    assert gate.grad is not None and gate.grad.abs().sum() > 0


def test_bad_block_and_both_selections_are_refused(model):
    t = torch.randn(1, 17, 32)
    with pytest.raises(ValueError, match="block"):
        split.forward_from(model, 0, t)
    with pytest.raises(ValueError, match="keep_idx, gate"):
        split.forward_from(model, 1, t, keep_idx=torch.zeros(1, 2, dtype=torch.long), gate=torch.ones(1, 16))
    cache = split.cache_tokens(model, torch.randn(1, 3, 32, 32), blocks=[1], dtype="fp32")
    with pytest.raises(ValueError, match="tokens_to_tokens"):
        split.score_cached(cache, 1, "tokens_to_tokens")
