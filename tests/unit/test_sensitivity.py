"""Sensitivity signals: the gradient estimator is the Jacobian norm, and the perturbation estimator agrees."""
import numpy as np
import pytest
import torch
from scipy.stats import spearmanr
from timm.models.vision_transformer import VisionTransformer

from tokenprune.methods import sensitivity
from tokenprune.core import split_forward as split


@pytest.fixture(scope="module")
def setup():
    torch.manual_seed(0)
    model = VisionTransformer(img_size=32, patch_size=8, embed_dim=32, depth=4, num_heads=2, num_classes=5).eval()
    x = torch.randn(3, 3, 32, 32)
    cache = split.cache_tokens(model, x, blocks=[2], dtype="fp32")
    return model, cache


def _jacobian_norms(model, tokens, block, fn):
    out = []
    for b in range(len(tokens)):
        jac = torch.autograd.functional.jacobian(lambda t: fn(split.forward_from(model, block, t[None], features=True)),
                                                 tokens[b])
        out.append(jac.reshape(-1, *tokens.shape[1:]).pow(2).sum(dim=(0, 2)).sqrt()[model.num_prefix_tokens:])
    return torch.stack(out)


def test_pred_logit_gradient_is_exact_jacobian_row(setup):
    model, cache = setup
    t = cache.tokens[2]
    cls = cache.logits.argmax(1)
    got = sensitivity.gradient_sensitivity(model, t, 2, target="pred_logit", dtype="fp32")
    want = torch.stack([_jacobian_norms(model, t[b:b + 1], 2, lambda o, c=cls[b]: o[0][0, c])[0] for b in range(3)])
    assert got.shape == (3, 16)
    assert torch.allclose(got, want, rtol=1e-4, atol=1e-6)


def test_true_logit_needs_labels_and_matches_pred_when_equal(setup):
    model, cache = setup
    t = cache.tokens[2]
    with pytest.raises(ValueError, match="labels"):
        sensitivity.gradient_sensitivity(model, t, 2, target="true_logit")
    a = sensitivity.gradient_sensitivity(model, t, 2, target="true_logit", labels=cache.logits.argmax(1), dtype="fp32")
    b = sensitivity.gradient_sensitivity(model, t, 2, target="pred_logit", dtype="fp32")
    assert torch.allclose(a, b)
    with pytest.raises(ValueError, match="target"):
        sensitivity.gradient_sensitivity(model, t, 2, target="loss")


def test_cls_state_hutchinson_estimates_frobenius_norm(setup):
    model, cache = setup
    t = cache.tokens[2][:1]
    want = _jacobian_norms(model, t, 2, lambda o: o[1][0])
    got = sensitivity.gradient_sensitivity(model, t, 2, target="cls_state", probes=400, dtype="fp32")
    rel = ((got - want).abs() / want).max()
    assert rel < 0.15, rel
    assert spearmanr(got[0], want[0]).statistic > 0.9


@pytest.mark.parametrize("target", ["pred_logit", "cls_state"])
def test_finite_difference_agrees_with_gradient(setup, target):
    model, cache = setup
    t = cache.tokens[2][:2]
    grad = sensitivity.gradient_sensitivity(model, t, 2, target=target, probes=200, dtype="fp32")
    fd = sensitivity.finite_difference_sensitivity(model, t, 2, target=target, eps=1e-3, probes=256, dtype="fp32",
                                                   max_rows=2048)
    assert fd.shape == grad.shape
    ratio = fd / grad  # each an estimate of the same Jacobian norm; probe noise ~ sqrt(2 / 256) / 2 per token
    assert 0.93 < ratio.median() < 1.07, ratio.median()
    assert (ratio - 1).abs().max() < 0.3, ratio


def test_no_parameter_gradients_left_behind(setup):
    model, cache = setup
    sensitivity.gradient_sensitivity(model, cache.tokens[2], 2, dtype="fp32")
    assert all(p.grad is None for p in model.parameters())
    assert all(p.requires_grad for p in model.parameters())
    assert np.isfinite(sensitivity.gradient_sensitivity(model, cache.tokens[2], 2, dtype="bf16").numpy()).all()
