"""Per-token sensitivity at a block: how much the model's final state moves when one token's hidden state moves.

The decoupling study ("Part-Coverage and Faithfulness Decouple in ViT Token Pruning for Fine-Grained Visual
Categorization"; no text of it could be found, only a press summary) trains its token scorer with "a
sensitivity signal: how the model's internal state changes when the input is slightly perturbed". The
definitions here are ours and explicit.

Let ``h_i`` be the hidden state of prunable token ``i`` at the reduction point of block ``l`` (after the
attention residual, before the MLP; :mod:`tokenprune.core.split_forward`) and ``T(h)`` a target computed by
the rest of the
(unpruned) model from those tokens:

* ``target="pred_logit"``: the logit of the class the unpruned model predicts (label-free);
* ``target="true_logit"``: the logit of the true class (needs labels);
* ``target="cls_state"``: the final [CLS] state ``z`` (pooled, after the final norm; a vector).

The sensitivity of token ``i`` is the norm of the Jacobian of ``T`` with respect to ``h_i``:
``s_i = ||dT/dh_i||_F`` (Eq. S1). Two estimators:

* :func:`gradient_sensitivity` -- by backpropagation. For a scalar target it is exact (one backward pass).
  For ``cls_state`` it uses Hutchinson's identity ``||J||_F^2 = E_v ||v^T J||^2`` with ``v ~ N(0, I)``,
  averaged over ``probes`` random ``v`` (one batched backward pass; unbiased for ``s_i^2``).
* :func:`finite_difference_sensitivity` -- by perturbation, the literal reading of "perturb slightly, measure
  the change of the internal state": ``h_i`` is moved by ``delta = eps * ||h_i|| * u`` with ``u`` a random unit
  vector, everything else fixed, and ``||T(h + delta e_i) - T(h)|| / ||delta||`` is measured. For a uniform unit
  ``u`` in ``C`` dimensions ``E ||J u||^2 = ||J||_F^2 / C``, so ``s_i = sqrt(C * mean_probes (dT / delta)^2)``
  estimates the same ``s_i`` as the gradient (up to curvature over ``eps`` and probe noise). It costs one
  forward pass of the rest of the model per token and probe.
"""
from __future__ import annotations

from typing import Optional, Sequence

import torch

from tokenprune.core import split_forward as split
from tokenprune.core.precision import autocast

__all__ = ["TARGETS", "gradient_sensitivity", "finite_difference_sensitivity"]

#: accepted ``target`` values
TARGETS: tuple[str, ...] = ("pred_logit", "true_logit", "cls_state")


def _check(target: str, labels: Optional[torch.Tensor], n: int) -> None:
    if target not in TARGETS:
        raise ValueError(f"target: unknown {target!r}; accepted: {list(TARGETS)}")
    if target == "true_logit":
        if labels is None:
            raise ValueError("labels: target 'true_logit' needs the true labels")
        if len(labels) != n:
            raise ValueError(f"labels: {len(labels)} labels for {n} images")


def _scalar_target(logits: torch.Tensor, target: str, cls: torch.Tensor) -> torch.Tensor:
    return logits.float().gather(1, cls[:, None]).squeeze(1)


def gradient_sensitivity(model: torch.nn.Module, tokens: torch.Tensor, block: int, target: str = "pred_logit",
                         labels: Optional[torch.Tensor] = None, probes: int = 4, seed: int = 0, batch: int = 64,
                         dtype: str = "bf16", device: Optional[str] = None) -> torch.Tensor:
    """``s_i = ||dT / dh_i||`` (Eq. S1) by backpropagation, for every prunable token; float32 ``[B, N - p]``.

    Args:
        model: the timm ViT whose block ``block`` produced ``tokens`` (``[B, N, C]``; e.g. a
            :class:`tokenprune.core.split_forward.SplitCache` entry). Its parameters get no gradient.
        target: ``pred_logit``, ``true_logit`` (with ``labels``) or ``cls_state`` (Hutchinson, ``probes``).
        seed: seeds the Hutchinson probes (drawn per batch from ``seed`` and the batch's first index).
        dtype: ``bf16`` (autocast) or ``fp32``.
    """
    _check(target, labels, len(tokens))
    if not isinstance(probes, int) or probes < 1:
        raise ValueError(f"probes: expected an int >= 1, got {probes!r}")
    dev = torch.device(device or next(model.parameters()).device)
    p = model.num_prefix_tokens
    flags = [q.requires_grad for q in model.parameters()]
    for q in model.parameters():
        q.requires_grad_(False)
    was_training = model.training
    model.eval()
    out = []
    try:
        for i in range(0, len(tokens), batch):
            x = tokens[i:i + batch].to(dev).float()
            b = x.shape[0]
            reps = probes if target == "cls_state" else 1
            xr = x.repeat(reps, 1, 1).requires_grad_(True)  # probe-major: rows j*b .. (j+1)*b - 1
            with torch.enable_grad(), autocast(dtype, dev):
                logits, feats = split.forward_from(model, block, xr, features=True)
                if target == "cls_state":
                    g = torch.Generator().manual_seed(int(seed) * 1_000_003 + i)
                    v = torch.randn(feats.shape, generator=g).to(dev)
                    t = (feats.float() * v).sum()
                else:
                    cls = logits.argmax(1) if target == "pred_logit" else labels[i:i + batch].to(dev).long()
                    t = _scalar_target(logits, target, cls).sum()
            (grad,) = torch.autograd.grad(t, xr)
            sq = grad[:, p:].float().pow(2).sum(-1).reshape(reps, b, -1).mean(0)
            out.append(sq.sqrt().detach().cpu())
    finally:
        for q, f in zip(model.parameters(), flags):
            q.requires_grad_(f)
        model.train(was_training)
    return torch.cat(out)


def finite_difference_sensitivity(model: torch.nn.Module, tokens: torch.Tensor, block: int,
                                  target: str = "pred_logit", labels: Optional[torch.Tensor] = None,
                                  eps: float = 1e-2, probes: int = 2, seed: int = 0, max_rows: int = 512,
                                  dtype: str = "fp32", device: Optional[str] = None,
                                  token_idx: Optional[Sequence[int]] = None) -> torch.Tensor:
    """``s_i`` by perturbation (see the module docstring); float32 ``[B, N - p]``, or ``[B, len(token_idx)]`` for
    the prunable tokens ``token_idx`` only (each costs ``probes`` forward passes per image; None: every token).

    Token ``i`` of each image is moved by ``eps * ||h_i||`` along ``probes`` random unit directions (one
    forward pass of the rest of the model each, ``max_rows`` perturbed sequences per pass); the class of the
    logit targets is fixed at the unperturbed prediction (or label). Use ``fp32``: a relative perturbation
    of ``1e-2`` is close to bf16's resolution.
    """
    _check(target, labels, len(tokens))
    if not eps > 0:
        raise ValueError(f"eps: expected a number > 0, got {eps!r}")
    if not isinstance(probes, int) or probes < 1:
        raise ValueError(f"probes: expected an int >= 1, got {probes!r}")
    dev = torch.device(device or next(model.parameters()).device)
    p = model.num_prefix_tokens
    bsz, n_tok, c = tokens.shape
    sel = torch.arange(n_tok - p) if token_idx is None else torch.as_tensor(list(token_idx), dtype=torch.long)
    if len(sel) == 0 or int(sel.min()) < 0 or int(sel.max()) >= n_tok - p:
        raise ValueError(f"token_idx: expected indices of the {n_tok - p} prunable tokens, got {token_idx!r}")
    n = len(sel)
    g = torch.Generator().manual_seed(int(seed))
    was_training = model.training
    model.eval()
    out = torch.empty(bsz, n)
    try:
        with torch.inference_mode(), autocast(dtype, dev):
            per_image = n * probes
            imgs = max(1, max_rows // per_image)
            for i in range(0, bsz, imgs):
                x = tokens[i:i + imgs].to(dev).float()
                b = x.shape[0]
                logits0, feats0 = split.forward_from(model, block, x, features=True)
                if target == "pred_logit":
                    cls = logits0.argmax(1)
                elif target == "true_logit":
                    cls = labels[i:i + imgs].to(dev).long()
                u = torch.randn(b, n, probes, c, generator=g).to(dev)
                u = u / u.norm(dim=-1, keepdim=True)
                h = x[:, p + sel.to(dev)]  # [b, n, C]: the perturbed tokens
                step = eps * h.norm(dim=-1)  # [b, n]
                onehot = torch.zeros(n, n_tok, device=dev)
                onehot[torch.arange(n), p + sel] = 1.0  # perturbed token t sits at position p + t
                delta = onehot[None, :, None, :, None] * (step[:, :, None, None, None] * u[:, :, :, None, :])
                xs = (x[:, None, None] + delta).reshape(b * n * probes, n_tok, c)
                lg, ft = [], []
                for j in range(0, len(xs), max_rows):
                    a, f = split.forward_from(model, block, xs[j:j + max_rows], features=True)
                    lg.append(a.float())
                    ft.append(f.float())
                lg, ft = torch.cat(lg).reshape(b, n, probes, -1), torch.cat(ft).reshape(b, n, probes, -1)
                if target == "cls_state":
                    d = (ft - feats0.float()[:, None, None]).norm(dim=-1)
                else:
                    idx = cls[:, None, None, None].expand(b, n, probes, 1)
                    t = lg.gather(3, idx).squeeze(3)
                    t0 = logits0.float().gather(1, cls[:, None]).squeeze(1)
                    d = (t - t0[:, None, None]).abs()
                rate = d / step[:, :, None].clamp_min(1e-12)
                out[i:i + b] = (c * rate.pow(2).mean(-1)).sqrt().cpu()
    finally:
        model.train(was_training)
    return out
