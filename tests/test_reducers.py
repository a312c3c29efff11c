"""Reducer invariants: counts, what the appended token is, bookkeeping of size and source."""
import pytest
import torch

from tokenprune.reducers import get_reducer
from tokenprune.scorers import TokenContext


def _ctx(B=2, N=11, C=4, p=1, trace=True):
    g = torch.Generator().manual_seed(0)
    cls = torch.rand(B, 3, N, generator=g).softmax(-1)
    src = torch.eye(N).expand(B, N, N) if trace else None
    return TokenContext(x=torch.randn(B, N, C, generator=g), num_prefix_tokens=p, block_index=0, cls_attn=cls,
                        source=src)


def test_drop_keeps_prefix_and_topk():
    ctx = _ctx()
    scores = torch.arange(10.0).repeat(2, 1)  # token i+1 has score i
    out = get_reducer("drop")(ctx, scores, 3)
    assert out.x.shape == (2, 4, 4)
    assert torch.equal(out.x[:, 0], ctx.x[:, 0])
    assert torch.equal(out.x[:, 1:], ctx.x[:, [10, 9, 8]])
    assert torch.equal(out.size, torch.ones(2, 4))
    assert out.source.sum().item() == 2 * 4


def test_fuse_attention_raw_weights_not_renormalised():
    ctx = _ctx()
    scores = torch.arange(10.0).repeat(2, 1)
    out = get_reducer("fuse_attention")(ctx, scores, 3)
    w = ctx.cls_attn[:, :, 1:].mean(1)[:, :7]  # tokens 1..7 were pruned
    want = (ctx.x[:, 1:8] * w[..., None]).sum(1)
    assert torch.allclose(out.x[:, -1], want, atol=1e-6)
    assert w.sum(1).lt(1).all()  # raw weights do not sum to 1
    assert out.size[:, -1].tolist() == [7.0, 7.0]
    assert torch.equal(out.source.sum(1), torch.ones(2, 11))


def test_fuse_softmax_temperature_limits():
    ctx = _ctx()
    scores = torch.randn(2, 10, generator=torch.Generator().manual_seed(3))
    cold = get_reducer("fuse_softmax", temperature=1e-4)(ctx, scores, 3)
    keep_then_rest = torch.sort(scores, 1, descending=True).indices
    best_pruned = keep_then_rest[:, 3]
    assert torch.allclose(cold.x[:, -1], ctx.x[:, 1:][torch.arange(2), best_pruned], atol=1e-5)
    hot = get_reducer("fuse_softmax", temperature=1e6)(ctx, scores, 3)
    rest = keep_then_rest[:, 3:]
    mean = torch.stack([ctx.x[b, 1:][rest[b]].mean(0) for b in range(2)])
    assert torch.allclose(hot.x[:, -1], mean, atol=1e-5)
    with pytest.raises(ValueError, match="temperature"):
        get_reducer("fuse_softmax", temperature=0)(ctx, scores, 3)


def test_unknown_reducer_and_option():
    with pytest.raises(ValueError, match="reducer: unknown name"):
        get_reducer("x")
    with pytest.raises(ValueError, match="reducer_options"):
        get_reducer("drop", temperature=1.0)
