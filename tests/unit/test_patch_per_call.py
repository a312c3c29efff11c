"""Per-call pruning state: gradient checkpointing, concurrent calls, the keep-rate knob and scorer output checks."""
import threading

import numpy as np
import pytest
import timm
import torch

from tokenprune import register_scorer
from tokenprune.core.patch import patch, prune_state
from tokenprune.methods.tome import tome_schedule

TINY = dict(img_size=64, depth=6)  # 16 patches, 6 blocks; random weights


def _model(**kw):
    torch.manual_seed(0)
    return timm.create_model("deit_tiny_patch16_224", **{**TINY, **kw})


CONFIGS = {
    "evit": dict(keep_rate=0.7, locations=(2, 4, 5)),
    "tome": dict(keep_rate=tome_schedule(3, 16, 6)[0], locations=tome_schedule(3, 16, 6)[1], reducer="bipartite",
                 prop_attn=True),
    "bat": dict(keep_rate=0.5, locations=(2, 4), reducer="merge_dpcknn", reducer_options={"num_clusters": 2}),
    "random": dict(keep_rate=0.6, locations=(2, 4), scorer="random", reducer="drop", seed=3),
}


def _grads(model, x, y):
    model.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(model(x), y)
    loss.backward()
    return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_gradient_checkpointing_gives_the_gradients_of_a_plain_run(name):
    plain = patch(_model().train(), **CONFIGS[name])
    ckpt = patch(_model().train(), **CONFIGS[name])
    ckpt.load_state_dict(plain.state_dict())
    ckpt.set_grad_checkpointing(True)
    for m in (plain, ckpt):  # no dropout or drop-path here, so the two runs compute the same function
        assert not any(isinstance(mod, torch.nn.Dropout) and mod.p > 0 for mod in m.modules())
    x, y = torch.randn(3, 3, 64, 64), torch.tensor([1, 2, 3])
    loss_a, ga = _grads(plain, x, y)
    loss_b, gb = _grads(ckpt, x, y)
    assert torch.allclose(loss_a, loss_b, atol=1e-6)
    assert ga.keys() == gb.keys() and len(ga) > 10
    for n in ga:
        assert torch.allclose(ga[n], gb[n], atol=1e-5, rtol=1e-4), n
    assert prune_state(ckpt).token_counts == prune_state(plain).token_counts


def test_seeded_random_scorer_draws_the_same_under_checkpointing():
    """The recomputed block must draw the random scores of its first pass, and the next call continues the stream."""
    a = patch(_model().train(), **CONFIGS["random"], trace=True)
    b = patch(_model().train(), **CONFIGS["random"], trace=True)
    b.load_state_dict(a.state_dict())
    b.set_grad_checkpointing(True)
    x = torch.randn(2, 3, 64, 64)
    for _ in range(2):
        for m in (a, b):
            m(x).sum().backward()
        ka = [h["keep_idx"] for h in prune_state(a).history]
        kb = [h["keep_idx"] for h in prune_state(b).history]
        assert all(torch.equal(p, q) for p, q in zip(ka, kb))


@pytest.mark.parametrize("name", ["evit", "tome"])
def test_two_threads_get_the_outputs_of_plain_calls(name):
    model = patch(_model().eval(), **CONFIGS[name])
    inputs = {1: torch.randn(1, 3, 64, 64), 3: torch.randn(3, 3, 64, 64)}
    with torch.inference_mode():
        want = {b: model(x) for b, x in inputs.items()}
    want_counts = prune_state(model).token_counts
    errors, wrong = [], []

    def worker(b):
        for _ in range(15):
            try:
                with torch.inference_mode():
                    out = model(inputs[b])
                if out.shape != want[b].shape or not torch.allclose(out, want[b], atol=1e-5):
                    wrong.append(b)
            except Exception as e:  # noqa: BLE001 -- counted, not hidden
                errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(b,)) for b in inputs]
    [t.start() for t in threads]
    [t.join() for t in threads]
    assert not errors and not wrong, (errors[:3], wrong[:3])
    assert prune_state(model).token_counts == want_counts and want_counts[-1] < 17  # the last call's, pruned


@pytest.mark.parametrize("value", [0.7, np.float32(0.7), np.float64(0.7), torch.tensor(0.7), 1, np.array(0.5)])
def test_keep_rate_takes_any_real_scalar_and_reads_back_a_number(value):
    m = patch(_model().eval(), keep_rate=value, locations=(2, 4, 5))
    assert isinstance(m.keep_rate, float) and m.keep_rate == pytest.approx(float(value))
    m.keep_rate = value
    assert isinstance(m.keep_rate, float) and m.keep_rate == pytest.approx(float(value))
    m.keep_rate = m.keep_rate  # reads back what the setter takes
    assert prune_state(m).schedule.at(1) == pytest.approx(float(value))


def test_per_location_keep_rate_reads_back_as_set():
    m = patch(_model().eval(), keep_rate=[0.9, 0.8, 0.7], locations=(2, 4, 5))
    assert m.keep_rate == [0.9, 0.8, 0.7]
    m.keep_rate = (0.6, np.float32(0.5), torch.tensor(0.4))
    assert m.keep_rate == pytest.approx([0.6, 0.5, 0.4]) and isinstance(m.keep_rate, tuple)
    m.keep_rate = m.keep_rate
    assert [prune_state(m).schedule.at(i) for i in (1, 3, 4)] == pytest.approx([0.6, 0.5, 0.4])


@pytest.mark.parametrize("bad", ["0.7", torch.tensor([0.7, 0.5]), np.array([0.7]), True, 1.5, float("nan")])
def test_keep_rate_refuses_what_is_not_a_real_scalar_in_range(bad):
    m = _model().eval()
    with pytest.raises((TypeError, ValueError), match="keep_rate"):
        patch(m, keep_rate=bad, locations=(2, 4, 5))


def test_scorer_with_the_wrong_output_shape_is_named():
    name = "_test_scores_with_cls"
    from tokenprune.core.scorers import SCORERS
    if name not in SCORERS:
        @register_scorer(name, needs=("cls_attn",))
        def _with_cls(ctx):  # one score per token, [CLS] included: one too many
            return ctx.cls_attn.mean(1)
    m = patch(_model().eval(), keep_rate=0.5, scorer=name, locations=(2, 4, 5))
    with pytest.raises(ValueError) as e:
        with torch.inference_mode():
            m(torch.randn(2, 3, 64, 64))
    assert name in str(e.value) and "16" in str(e.value)  # the scorer and the expected [B, N - p] = [2, 16]
