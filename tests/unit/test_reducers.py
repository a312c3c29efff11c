"""Reducer invariants: counts, what the appended token is, bookkeeping of size and source."""
import pytest
import torch

from tokenprune.core.reducers import get_reducer
from tokenprune.core.scorers import TokenContext


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


# --- merging reducers: BAT (DPC-KNN) and ToMe (bipartite) -------------------------------------

from tokenprune.methods.bat import dpc_knn  # noqa: E402


def test_dpc_knn_batched_equals_per_image_and_centres_own_clusters():
    x = torch.randn(3, 20, 8, generator=torch.Generator().manual_seed(1))
    assign, centres = dpc_knn(x, 4, k=3)
    for b in range(3):
        a1, c1 = dpc_knn(x[b:b + 1], 4, k=3)
        assert torch.equal(a1[0], assign[b]) and torch.equal(c1[0], centres[b])
        assert assign[b, centres[b]].tolist() == [0, 1, 2, 3]
    assert assign.min() >= 0 and assign.max() <= 3


def test_dpc_knn_finds_separated_blobs():
    g = torch.Generator().manual_seed(0)
    centres = torch.tensor([[0.0, 0], [10, 0], [0, 10]])
    x = torch.cat([c + 0.1 * torch.randn(6, 2, generator=g) for c in centres])[None]
    assign, _ = dpc_knn(x, 3, k=3)
    groups = [set(assign[0, i * 6:(i + 1) * 6].tolist()) for i in range(3)]
    assert all(len(s) == 1 for s in groups) and len(set.union(*groups)) == 3


@pytest.mark.parametrize("opts", [{}, {"num_clusters": 3, "pair_fraction": 0.25}, {"merge_weight": "uniform"}])
def test_merge_dpcknn_counts_and_bookkeeping(opts):
    ctx = _ctx(N=25)
    scores = torch.randn(2, 24, generator=torch.Generator().manual_seed(2))
    spec = get_reducer("merge_dpcknn", **opts)
    out = spec(ctx, scores, 10)
    assert out.x.shape[1] == 1 + 10 + spec.adds_tokens
    assert torch.equal(out.source.sum(1), torch.ones(2, 25))  # every patch represented exactly once
    assert torch.equal(out.source.sum(-1), out.size)


def test_merge_dpcknn_uniform_weights_average_clusters():
    ctx = _ctx(N=13)
    scores = torch.arange(12.0).repeat(2, 1)
    out = get_reducer("merge_dpcknn", num_clusters=2, merge_weight="uniform")(ctx, scores, 4)
    # each cluster token is the plain mean of the source patches it stands for
    src = out.source[:, -2:]  # [B, 2, N0]
    want = (src @ ctx.x) / src.sum(-1, keepdim=True)
    assert torch.allclose(out.x[:, -2:], want, atol=1e-5)


def test_cluster_all_keeps_n_clusters():
    ctx = _ctx(N=21)
    out = get_reducer("cluster_all")(ctx, None, 7)
    assert out.x.shape[1] == 8 and torch.equal(out.source.sum(1), torch.ones(2, 21))


def test_bipartite_merges_the_most_similar_pair_by_size_weighted_mean():
    # tokens after [CLS]: t0 [1,0] (a), t1 [0,1] (b), t2 [0,1] (a, duplicates t1), t3 [-1,0.1] (b).
    x = torch.tensor([[[9.0, 9], [1, 0], [0, 1], [0, 1], [-1, 0.1]]])
    keys = x[:, None]  # one head, keys = features
    ctx = TokenContext(x=x, num_prefix_tokens=1, block_index=0, keys=keys, size=torch.tensor([[1.0, 1, 1, 3, 1]]),
                       source=torch.eye(5)[None])
    out = get_reducer("bipartite")(ctx, None, 3)
    assert out.x.shape == (1, 4, 2)
    # [CLS], the kept a-token t0, then the b-tokens: t1 (absorbed t2, sizes 1 and 3) and t3
    assert torch.allclose(out.x[0], torch.tensor([[9.0, 9], [1, 0], [0, 1], [-1, 0.1]]))
    assert out.size.tolist() == [[1.0, 1.0, 4.0, 1.0]]
    assert out.source[0, 2].tolist() == [0, 0, 1, 1, 0]
