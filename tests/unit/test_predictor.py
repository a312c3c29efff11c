"""The predictor head: size and MACs, ranking and task training, capacity matching, the ``learned`` scorer."""
import pytest
import torch
from scipy.stats import spearmanr
from timm.models.vision_transformer import VisionTransformer
from torch.utils.flop_counter import FlopCounterMode

from tokenprune.methods import learned as predictor
from tokenprune.core import split_forward as split
from tokenprune.core.config import PruneConfig
from tokenprune.core.patch import prune_state


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=4, num_heads=2, num_classes=5).eval()


def test_head_shapes_params_and_macs():
    head = predictor.make_head(32, seed=0)
    assert head(torch.randn(2, 16, 32)).shape == (2, 16)
    c = 32
    linear = c * c + c * c // 2 + (c // 2) * (c // 4) + c // 4
    assert predictor.head_macs(head, 16) == 16 * linear
    n_params = sum(p.numel() for p in head.parameters())
    assert n_params == linear + (c + c // 2 + c // 4 + 1) + 2 * c  # weights + biases + LayerNorm
    with FlopCounterMode(display=False) as counter:
        head(torch.randn(1, 16, 32))
    assert counter.get_total_flops() // 2 == predictor.head_macs(head, 16)


def test_same_seed_same_init_and_different_seed_differs():
    a, b, c = predictor.make_head(32, 1), predictor.make_head(32, 1), predictor.make_head(32, 2)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert not torch.equal(a.in_conv[1].weight, c.in_conv[1].weight)


def test_make_head_leaves_global_rng_alone():
    torch.manual_seed(5)
    want = torch.rand(1)
    torch.manual_seed(5)
    predictor.make_head(32, 0)
    assert torch.equal(torch.rand(1), want)


@pytest.mark.parametrize("loss", ["listnet", "pairwise", "mse"])
def test_ranker_learns_a_learnable_signal(loss):
    g = torch.Generator().manual_seed(0)
    tokens = torch.randn(128, 17, 32, generator=g)
    signal = tokens[:, 1:, 0].exp()  # rank by the first channel
    head = predictor.make_head(32, 0)
    losses = predictor.train_ranker(head, tokens, signal, steps=80, batch=16, lr=3e-3, loss=loss, dtype="fp32")
    assert losses[-1] < losses[0]
    with torch.no_grad():
        s = head(tokens[:32, 1:])
    rho = sum(spearmanr(s[i], signal[i]).statistic for i in range(32)) / 32
    assert rho > 0.8, rho


def test_soft_topk_gate_is_above_half_exactly_on_the_top_k():
    s = torch.randn(4, 20)
    gate = predictor.soft_topk_gate(s, 7)
    top = torch.topk(s, 7).indices
    want = torch.zeros_like(s, dtype=torch.bool).scatter(1, top, True)
    assert torch.equal(gate > 0.5, want)
    assert torch.equal(predictor.soft_topk_gate(s, 20), torch.ones_like(s))


def test_task_control_trains_the_head_only(model):
    x = torch.randn(16, 3, 32, 32)
    cache = split.cache_tokens(model, x, blocks=[2], dtype="fp32")
    labels = cache.logits.argmax(1)
    before = [p.detach().clone() for p in model.parameters()]
    head = predictor.make_head(32, 0)
    h0 = head.in_conv[1].weight.detach().clone()
    losses = predictor.train_task(head, model, 2, cache.tokens[2], labels, [0.25, 0.5], steps=5, batch=8, dtype="fp32")
    assert len(losses) == 5 and all(torch.isfinite(torch.tensor(losses)))
    assert not torch.equal(head.in_conv[1].weight, h0)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert all(p.grad is None for p in model.parameters())


def test_learned_scorer_in_patched_model_equals_split_path(model):
    x = torch.randn(5, 3, 32, 32)
    head = predictor.make_head(32, 3)
    cache = split.cache_tokens(model, x, blocks=[2], dtype="fp32")
    scores = split.score_cached(cache, 2, "learned", extras=predictor.predictor_extras({2: head}))
    with torch.no_grad():
        assert torch.allclose(scores, head(cache.tokens[2][:, 1:]), atol=1e-6)
    logits, keep_idx = split.prune_cached(model, cache, 2, scores, 0.5, dtype="fp32")
    PruneConfig(scorer="learned", reducer="drop", keep_rate=0.5, locations=(2,)).apply(model, trace=True)
    predictor.attach(model, {2: head})
    with torch.no_grad():
        want = model(x)
    assert torch.equal(prune_state(model).history[0]["keep_idx"], keep_idx)
    assert torch.allclose(logits, want, atol=1e-5)


def test_learned_without_head_says_how_to_attach(model):
    PruneConfig(scorer="learned", reducer="drop", keep_rate=0.5, locations=(3,)).apply(model)
    predictor.attach(model, {2: predictor.make_head(32, 0)})
    with pytest.raises(RuntimeError, match="attach"):
        with torch.no_grad():
            model(torch.randn(1, 3, 32, 32))
    with pytest.raises(ValueError, match="heads"):
        predictor.predictor_extras({0: predictor.make_head(32, 0)})


@pytest.mark.parametrize("loss", ["listnet", "pairwise"])
def test_stacked_training_equals_one_by_one(loss):
    g = torch.Generator().manual_seed(1)
    tokens = torch.randn(40, 9, 32, generator=g)
    signals = [torch.rand(40, 8, generator=g) + 0.1, tokens[:, 1:, 3].exp()]
    alone = [predictor.make_head(32, 0), predictor.make_head(32, 1)]
    for h, sig, s in zip(alone, signals, (0, 1)):
        predictor.train_ranker(h, tokens, sig, steps=12, batch=8, seed=s, loss=loss, dtype="fp32")
    together = [predictor.make_head(32, 0), predictor.make_head(32, 1)]
    hist = predictor.train_rankers(together, tokens, signals, [0, 1], steps=12, batch=8, loss=loss, dtype="fp32")
    assert len(hist) == 2 and len(hist[0]) == 12
    for a, b in zip(alone, together):
        for (na, pa), (nb, pb) in zip(a.named_parameters(), b.named_parameters()):
            # the last bias shifts every score of an image alike, so a ranking loss gives it a zero gradient: Adam
            # then amplifies rounding noise (different summation order under vmap) into steps of up to lr
            tol = 12 * 1e-3 if na == "out_conv.4.bias" else 1e-5
            assert na == nb and torch.allclose(pa, pb, atol=tol), na


def test_ste_gate_is_hard_forward_with_soft_gradient(model):
    x = torch.randn(3, 3, 32, 32)
    cache = split.cache_tokens(model, x, blocks=[2], dtype="fp32")
    scores = torch.randn(3, 16, requires_grad=True)
    gate = predictor.ste_topk_gate(scores, 5)
    keep_idx, _ = torch.topk(scores.detach(), 5)[1], None
    assert torch.equal(gate.detach() > 0.5, torch.zeros(3, 16, dtype=torch.bool).scatter(1, keep_idx, True))
    out = split.forward_from(model, 2, cache.tokens[2], gate=gate)
    with torch.no_grad():
        want = split.forward_from(model, 2, cache.tokens[2], keep_idx=keep_idx)
    assert torch.allclose(out, want, atol=1e-4)
    out.sum().backward()
    assert scores.grad is not None and torch.isfinite(scores.grad).all() and scores.grad.abs().sum() > 0
