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
    with pytest.raises(ValueError, match="reducer"):
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
    # ToMe's alternation over ALL tokens: a = {[CLS], t2 [0,1], t4 [-1,0.1]}, b = {t1 [1,0], t3 [0,1] (size 3)}.
    # t2 matches t3 (cosine 1), t4 matches t3 (0.0995): r = 1 merges t2 into t3.
    x = torch.tensor([[[9.0, 9], [1, 0], [0, 1], [0, 1], [-1, 0.1]]])
    keys = x[:, None]  # one head, keys = features
    ctx = TokenContext(x=x, num_prefix_tokens=1, block_index=0, keys=keys, size=torch.tensor([[1.0, 1, 1, 3, 1]]),
                       source=torch.eye(5)[None])
    out = get_reducer("bipartite")(ctx, None, 3)
    assert out.x.shape == (1, 4, 2)
    # cat([unm (sorted by index: [CLS], t4), b (t1, t3 + t2: sizes 3 and 1)])
    assert torch.allclose(out.x[0], torch.tensor([[9.0, 9], [-1, 0.1], [1, 0], [0, 1]]))
    assert out.size.tolist() == [[1.0, 1.0, 1.0, 4.0]]
    assert out.source[0, 3].tolist() == [0, 0, 1, 1, 0]


# --- ToMe's bipartite soft matching worked by hand (facebookresearch/ToMe, tome/merge.py) -----------------------
#
# 1 [CLS] + 4 patch tokens, 2-d keys (two heads whose mean is the key below):
#   t0 [CLS] k = [1, 1]   t1 k = [1, 0]   t2 k = [0, 1]   t3 k = [1, 0.1]   t4 k = [0.1, 1]
# a = tokens[0::2] = {t0, t2, t4}, b = tokens[1::2] = {t1, t3}. Cosines (normalised keys):
#   t0 row: -inf (class_token=True; unprotected it would be 0.707 / 0.774, the best match of all)
#   t2: t1 0, t3 0.0995 -> node_max 0.0995 -> t3;   t4: t1 0.0995, t3 0.198 -> node_max 0.198 -> t3
# edge order (descending node_max): t4, t2, t0.
# features x: t0 [10,10], t1 [1,2], t2 [3,4], t3 [5,6] (size 2), t4 [7,8]
# r = 1: t4 -> t3: (2 [5,6] + [7,8]) / 3 = [17/3, 20/3], size 3; out = [t0, t2 | t1, t3'] (unm sorted, then b)
# r = 2: t4, t2 -> t3: (2 [5,6] + [7,8] + [3,4]) / 4 = [5, 6], size 4; out = [t0 | t1, t3'']
# r = 3 is clamped to (t - protected) // 2 = (5 - 1) // 2 = 2.

def _hand_ctx():
    k = torch.tensor([[1.0, 1], [1, 0], [0, 1], [1, 0.1], [0.1, 1]])
    delta = torch.tensor([0.3, -0.2])
    keys = torch.stack([k + delta, k - delta])[None]  # [1, 2 heads, 5, 2]: the head mean is k
    x = torch.tensor([[[10.0, 10], [1, 2], [3, 4], [5, 6], [7, 8]]])
    return TokenContext(x=x, num_prefix_tokens=1, block_index=0, keys=keys, size=torch.tensor([[1.0, 1, 1, 2, 1]]),
                        source=torch.eye(5)[None])


def test_tome_by_hand_r1():
    out = get_reducer("bipartite")(_hand_ctx(), None, 3)  # 4 patch tokens keep 3: r = 1
    assert torch.allclose(out.x[0], torch.tensor([[10.0, 10], [3, 4], [1, 2], [17 / 3, 20 / 3]]))
    assert out.size.tolist() == [[1.0, 1.0, 1.0, 3.0]]
    assert out.source[0].tolist() == [[1, 0, 0, 0, 0], [0, 0, 1, 0, 0], [0, 1, 0, 0, 0], [0, 0, 0, 1, 1]]
    assert out.keep_idx.shape == (1, 0)


def test_tome_by_hand_r2_and_clamp():
    out = get_reducer("bipartite")(_hand_ctx(), None, 2)  # r = 2
    assert torch.allclose(out.x[0], torch.tensor([[10.0, 10], [1, 2], [5, 6]]))
    assert out.size.tolist() == [[1.0, 1.0, 4.0]]
    assert out.source[0, 2].tolist() == [0, 0, 1, 1, 1]
    from tokenprune.methods.tome import pair_merge

    c = _hand_ctx()
    clamped = pair_merge(c.x, c.size, None, c.keys.mean(1), 3, protected=1)  # r = 3 -> (5 - 1) // 2 = 2
    assert torch.allclose(clamped[0], out.x)


def test_tome_cls_would_merge_unprotected():
    """Without protection (ToMe's class_token=False, BAT's pairing) the [CLS] row has the best match and merges."""
    from tokenprune.methods.tome import pair_merge

    c = _hand_ctx()
    x, size, _ = pair_merge(c.x, c.size, None, c.keys.mean(1), 1, protected=0)
    # t0 -> t3 (cosine 0.774): out = unm in score order (t4, t2), then b (t1, t3 + t0)
    assert torch.allclose(x[0], torch.tensor([[7.0, 8], [3, 4], [1, 2], [20 / 3, 22 / 3]]))
    assert size.tolist() == [[1.0, 1.0, 1.0, 3.0]]


def test_tome_two_protected_tokens_stay_in_front():
    """ToMe with a distillation token: [CLS] (a) and dist (b) never merge and come out first, in their order."""
    from tokenprune.methods.tome import pair_merge

    g = torch.Generator().manual_seed(0)
    x, k = torch.randn(1, 12, 4, generator=g), torch.randn(1, 12, 3, generator=g)
    k[0, 1] = k[0, 2] * 5  # the dist token is every a-token's ideal match: protected anyway
    out, size, src = pair_merge(x, torch.ones(1, 12), torch.eye(12)[None], k, 5, protected=2)
    assert out.shape == (1, 7, 4) and torch.equal(out[0, :2], x[0, :2])
    assert size[0, :2].tolist() == [1.0, 1.0] and torch.equal(src.sum(1), torch.ones(1, 12))


def test_tome_schedule_merges_r_per_block():
    from tokenprune.core.schedule import num_keep
    from tokenprune.methods.tome import tome_schedule

    rates, locs = tome_schedule(13)
    assert locs == tuple(range(1, 13)) and len(rates) == 12
    n, counts = 196, []
    for r in rates:
        n = num_keep(n, r) if r < 1 else n
        counts.append(n)
    assert counts == [196 - 13 * (i + 1) for i in range(12)]  # 183, 170, ..., 40
    rates, _ = tome_schedule(30, num_patches=16, depth=3)  # the clamp: 16 -> 8 -> 4 -> 2
    n, counts = 16, []
    for r in rates:
        n = num_keep(n, r)
        counts.append(n)
    assert counts == [8, 4, 2]
    assert tome_schedule(0, 10, 2)[0] == (1.0, 1.0)
    with pytest.raises(ValueError, match=r"^r\b"):
        tome_schedule(-1)
