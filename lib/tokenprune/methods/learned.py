"""A small learned token scorer: a predictor head on block-l tokens, its training, and the ``learned`` scorer.

The decoupling study (title "Part-Coverage and Faithfulness Decouple in ViT Token Pruning for Fine-Grained
Visual Categorization"; only a press summary was found) prunes with a small scorer *trained with a sensitivity
signal* and rules out extra capacity with a *capacity-matched control*. Our operationalisation:

* :class:`PredictorHead` -- DynamicViT's predictor (Rao et al., NeurIPS 2021, ``PredictorLG``) sized for a
  ``C``-dim ViT: ``LayerNorm -> Linear(C, C) -> GELU`` per token, the second half of the channels replaced by
  their mean over the image's tokens (global context), then ``Linear(C, C/2) -> GELU -> Linear(C/2, C/4) -> GELU
  -> Linear(C/4, 1)``: one score per prunable token (DynamicViT outputs keep/drop log-probabilities instead).
  Its cost is ``N (C^2 + C^2/2 + C^2/8 + C/4)`` multiply-accumulates for ``N`` tokens (:func:`head_macs`), which
  a model's MAC count (:func:`tokenprune.measure.macs.analytic_macs`) does not include.
* :func:`train_ranker` -- trains a head to rank tokens like a target signal (the sensitivity of
  :mod:`tokenprune.methods.sensitivity`, or, for the capacity-matched control that mimics EViT, the [CLS] attention),
  from cached block-l tokens only (:mod:`tokenprune.core.split_forward`).
  Targets are ``z = zscore(log(signal))`` per image;
  losses: ``listnet`` (default; cross-entropy between ``softmax(z / T)`` and ``softmax(score)`` over an image's
  tokens, Cao et al., ICML 2007), ``pairwise`` (RankNet logistic loss on sampled token pairs) or ``mse``
  (on per-image standardised scores).
* :func:`train_task` -- the capacity-matched control trained *end to end with the task loss only*: the head's
  scores prune the frozen model at block l through a top-k gate applied as an attention bias ``log(gate)`` in
  every later block (:func:`tokenprune.core.split_forward.forward_from`), and the head minimises
  the cross-entropy of the
  pruned model's prediction; the keep rate of each step is drawn from ``keep_rates``. The gate is
  straight-through by default: the forward pass keeps exactly the top-k tokens (as at test time), the gradient
  is that of the soft gate ``sigmoid((z_i - t_k) / tau)`` (``z``: standardised scores, ``t_k`` midway between
  the k-th and (k+1)-th).
* The three share everything but the objective: :func:`make_head` builds the same initial weights for the
  same seed, and :func:`_fit` runs the same AdamW, learning-rate schedule, number of steps and sequence of
  image batches for the same seed. :func:`train_rankers` trains several ranking heads at once (stacked
  parameters under ``torch.vmap``), with the same result as one by one.
* The scorer ``learned`` (registered here) runs the head that :func:`attach` put into the patched model's
  shared ``PruneState.extras[PREDICTORS_KEY]`` for that block; no gradient at test time. ``patch`` builds a
  fresh state, so attach after ``patch`` / ``PruneConfig.apply``.
"""
from __future__ import annotations

import copy
import math
from typing import Callable, Mapping, Optional, Sequence

import torch
import torch.nn as nn
import torch.nn.functional as F

from tokenprune.core import split_forward as split
from tokenprune.core.patch import prune_state
from tokenprune.core.schedule import num_keep
from tokenprune.core.scorers import TokenContext, register_scorer
from tokenprune.core.precision import autocast

__all__ = ["PREDICTORS_KEY", "LOSSES", "PredictorHead", "make_head", "head_macs", "rank_target", "ranking_loss",
           "soft_topk_gate", "ste_topk_gate", "train_ranker", "train_rankers", "train_task", "attach",
           "predictor_extras", "learned"]

#: key of the ``{0-based block index: head}`` dict in ``PruneState.extras`` / ``TokenContext.extras``
PREDICTORS_KEY = "predictors"
#: ranking losses accepted by :func:`train_ranker`
LOSSES: tuple[str, ...] = ("listnet", "pairwise", "mse")


class PredictorHead(nn.Module):
    """DynamicViT-sized token scorer: ``[B, N, C]`` prunable tokens -> ``[B, N]`` scores (higher = keep)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        if not isinstance(dim, int) or dim < 4 or dim % 4:
            raise ValueError(f"dim: expected a multiple of 4, got {dim!r}")
        self.dim = dim
        self.in_conv = nn.Sequential(nn.LayerNorm(dim), nn.Linear(dim, dim), nn.GELU())
        self.out_conv = nn.Sequential(nn.Linear(dim, dim // 2), nn.GELU(), nn.Linear(dim // 2, dim // 4), nn.GELU(),
                                      nn.Linear(dim // 4, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.in_conv(x)
        half = self.dim // 2
        local, glob = h[..., :half], h[..., half:].mean(dim=-2, keepdim=True)
        return self.out_conv(torch.cat([local, glob.expand_as(local)], dim=-1)).squeeze(-1)


def make_head(dim: int, seed: int) -> PredictorHead:
    """A :class:`PredictorHead` whose initial weights depend only on ``(dim, seed)`` (the capacity-matched
    heads of one seed start identical)."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(int(seed))
        return PredictorHead(dim)


def head_macs(head: nn.Module, num_tokens: int) -> int:
    """Multiply-accumulates of the head's linear layers for ``num_tokens`` tokens (norms, activations and the
    token mean are not counted, as in :mod:`tokenprune.measure.macs`)."""
    per_token = sum(m.in_features * m.out_features for m in head.modules() if isinstance(m, nn.Linear))
    return int(num_tokens) * per_token


def rank_target(signal: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    """``zscore(log(signal + eps))`` over each image's tokens (``[B, N]`` -> ``[B, N]``): the target a head ranks by."""
    z = (signal.float() + eps).log()
    return (z - z.mean(-1, keepdim=True)) / z.std(-1, keepdim=True).clamp_min(1e-6)


def _zscore(s: torch.Tensor) -> torch.Tensor:
    return (s - s.mean(-1, keepdim=True)) / s.std(-1, keepdim=True).clamp_min(1e-6)


def ranking_loss(scores: torch.Tensor, target: torch.Tensor, loss: str = "listnet", temperature: float = 1.0,
                 pairs: int = 256, generator: Optional[torch.Generator] = None) -> torch.Tensor:
    """Loss of scores ``[B, N]`` against a rank target ``[B, N]`` (see the module docstring)."""
    scores = scores.float()
    if loss == "listnet":
        return -(F.softmax(target / temperature, -1) * F.log_softmax(scores, -1)).sum(-1).mean()
    if loss == "pairwise":
        b, n = scores.shape
        i = torch.randint(0, n, (b, pairs), generator=generator).to(scores.device)
        j = torch.randint(0, n, (b, pairs), generator=generator).to(scores.device)
        sign = torch.sign(target.gather(1, i) - target.gather(1, j))
        diff = scores.gather(1, i) - scores.gather(1, j)
        return (F.softplus(-sign * diff) * (sign != 0)).sum() / (sign != 0).sum().clamp_min(1)
    if loss == "mse":
        return F.mse_loss(_zscore(scores), target)
    raise ValueError(f"loss: unknown {loss!r}; accepted: {list(LOSSES)}")


def soft_topk_gate(scores: torch.Tensor, k: int, tau: float = 0.5) -> torch.Tensor:
    """Soft keep weights ``[B, N]``: ``sigmoid((z_i - t_k) / tau)`` with ``z`` the per-image standardised scores
    and ``t_k`` midway between the k-th and (k+1)-th largest ``z`` (not differentiated), so the hard top-k
    tokens are exactly those with a gate above 1/2."""
    z = _zscore(scores.float())
    n = z.shape[-1]
    if not 1 <= k <= n:
        raise ValueError(f"k: expected 1..{n}, got {k}")
    if k == n:
        return torch.ones_like(z)
    top = torch.topk(z.detach(), k + 1, dim=-1).values
    thr = (top[:, k - 1] + top[:, k]) / 2
    return torch.sigmoid((z - thr[:, None]) / tau)


def ste_topk_gate(scores: torch.Tensor, k: int, tau: float = 0.5, eps: float = 1e-6) -> torch.Tensor:
    """Straight-through top-k gate: its value is the hard top-k mask (kept tokens 1, the others ``eps``, i.e.
    an attention bias of ``log(eps)``: dropped up to a weight of ``eps``), its gradient that of ``log`` of
    :func:`soft_topk_gate` (through the ``log(gate)`` attention bias of
    :func:`tokenprune.core.split_forward.forward_from`).
    The forward pass of training is then the pruning of test time."""
    soft = soft_topk_gate(scores, k, tau)
    hard = (soft > 0.5).to(soft.dtype)
    log_soft = soft.clamp_min(1e-30).log()
    return (hard.clamp_min(eps).log() + log_soft - log_soft.detach()).exp()


def _fit(parameters: Sequence[torch.Tensor], loss_fn: Callable[[list, list], list], num_images: int, steps: int,
         batch: int, lr: float, seeds: Sequence[int], weight_decay: float = 0.0) -> list[list[float]]:
    """The one training loop of every head: AdamW, cosine decay from ``lr`` to 0 over ``steps``; head ``g``
    draws its image batches (without replacement per pass) and any other random choice from its own generator
    seeded with ``seeds[g]``. ``loss_fn(idxs, generators)`` returns one loss per head; their sum is minimised,
    so heads whose parameters are stacked (:func:`train_rankers`) train exactly as they would alone (AdamW acts
    element-wise). Returns the loss per step of each head."""
    if steps < 1 or batch < 1:
        raise ValueError(f"steps, batch: expected >= 1, got {steps}, {batch}")
    if batch > num_images:
        raise ValueError(f"batch: {batch} images per step but only {num_images} images")
    gens = [torch.Generator().manual_seed(int(s) + 7919) for s in seeds]
    opt = torch.optim.AdamW(list(parameters), lr=lr, weight_decay=weight_decay)
    perms, pos = [torch.randperm(num_images, generator=g) for g in gens], 0
    history: list[list[float]] = [[] for _ in gens]
    for step in range(steps):
        if pos + batch > num_images:
            perms, pos = [torch.randperm(num_images, generator=g) for g in gens], 0
        idxs = [perm[pos:pos + batch] for perm in perms]
        pos += batch
        for group in opt.param_groups:
            group["lr"] = lr * 0.5 * (1 + math.cos(math.pi * step / steps))
        losses = loss_fn(idxs, gens)
        opt.zero_grad(set_to_none=True)
        torch.stack([l_.float() for l_ in losses]).sum().backward()
        opt.step()
        for h, l_ in zip(history, losses):
            h.append(float(l_.detach()))
    return history


def _prunable(tokens: torch.Tensor, num_prefix_tokens: int) -> torch.Tensor:
    return tokens[:, num_prefix_tokens:]


def train_rankers(heads: Sequence[nn.Module], tokens: torch.Tensor, signals: Sequence[torch.Tensor],
                  seeds: Sequence[int], num_prefix_tokens: int = 1, steps: int = 200, batch: int = 32,
                  lr: float = 1e-3, loss: str = "listnet", temperature: float = 1.0,
                  dtype: str = "bf16") -> list[list[float]]:
    """Train several heads of one architecture at once (in place): head ``g`` learns to rank the prunable
    tokens of ``tokens`` (``[M, N, C]``, cached at block l) like ``signals[g]`` (``[M, N - p]``; e.g. the
    sensitivity signal, or [CLS] attention for the mimic control; ranked via :func:`rank_target`) with its
    own batches and random draws from ``seeds[g]``. The heads' parameters are stacked and run with
    ``torch.vmap``, which gives the same result as training each head alone (:func:`train_ranker`), in a
    fraction of the Python overhead. Returns the loss per step of each head."""
    from torch.func import functional_call, stack_module_state

    if loss not in LOSSES:
        raise ValueError(f"loss: unknown {loss!r}; accepted: {list(LOSSES)}")
    heads = list(heads)
    if not heads or len(signals) != len(heads) or len(seeds) != len(heads):
        raise ValueError(f"heads, signals, seeds: expected equal non-zero lengths, got {len(heads)}, {len(signals)}, "
                         f"{len(seeds)}")
    x = _prunable(tokens, num_prefix_tokens)
    for sig in signals:
        if sig.shape != x.shape[:2]:
            raise ValueError(f"signal: expected shape {tuple(x.shape[:2])}, got {tuple(sig.shape)}")
    targets = [rank_target(sig) for sig in signals]
    dev = next(heads[0].parameters()).device
    params, buffers = stack_module_state(heads)
    base = copy.deepcopy(heads[0]).to("meta")
    run = torch.vmap(lambda p_, b_, xx: functional_call(base, (p_, b_), (xx,)))

    def loss_fn(idxs, gens):
        xb = torch.stack([x[i] for i in idxs]).to(dev)
        with autocast(dtype, dev):
            s = run(params, buffers, xb)
        return [ranking_loss(s[g], targets[g][i].to(dev), loss, temperature, generator=gen)
                for g, (i, gen) in enumerate(zip(idxs, gens))]

    history = _fit(list(params.values()), loss_fn, len(x), steps, batch, lr, seeds)
    with torch.no_grad():
        for g, head in enumerate(heads):
            for name, q in head.named_parameters():
                q.copy_(params[name][g])
            head.eval()
    return history


def train_ranker(head: nn.Module, tokens: torch.Tensor, signal: torch.Tensor, num_prefix_tokens: int = 1,
                 steps: int = 200, batch: int = 32, lr: float = 1e-3, seed: int = 0, loss: str = "listnet",
                 temperature: float = 1.0, dtype: str = "bf16") -> list[float]:
    """Train ``head`` (in place) to rank the prunable tokens of ``tokens`` (``[M, N, C]``, cached at block l)
    like ``signal`` (``[M, N - p]``, e.g. sensitivity or [CLS] attention; ranked via :func:`rank_target`).
    Returns the loss per step. (:func:`train_rankers` with one head.)"""
    return train_rankers([head], tokens, [signal], [seed], num_prefix_tokens, steps, batch, lr, loss, temperature,
                         dtype)[0]


def train_task(head: nn.Module, model: nn.Module, block: int, tokens: torch.Tensor, labels: torch.Tensor,
               keep_rates: Sequence[float], steps: int = 200, batch: int = 32, lr: float = 1e-3, seed: int = 0,
               tau: float = 0.5, gate: str = "ste", dtype: str = "bf16") -> list[float]:
    """Train ``head`` (in place) end to end with the task loss only: cross-entropy of the frozen ``model``
    pruned at ``block`` by the head's top-k gate, keep rate drawn per step from ``keep_rates``. ``gate``:
    ``"ste"`` (default; :func:`ste_topk_gate`: hard top-k forward, soft gradient) or ``"soft"``
    (:func:`soft_topk_gate` forward and backward). ``tokens`` ``[M, N, C]`` are cached at that block
    (:func:`tokenprune.core.split_forward.cache_tokens`). Returns the loss per step."""
    gates = {"ste": ste_topk_gate, "soft": soft_topk_gate}
    if gate not in gates:
        raise ValueError(f"gate: unknown {gate!r}; accepted: {sorted(gates)}")
    gate_fn = gates[gate]
    p = model.num_prefix_tokens
    n = tokens.shape[1] - p
    rates = [float(r) for r in keep_rates]
    dev = next(head.parameters()).device
    flags = [q.requires_grad for q in model.parameters()]
    for q in model.parameters():
        q.requires_grad_(False)
    was_training = model.training
    model.eval()
    head.train()

    def loss_fn(idxs, gens):
        (idx,), (g,) = idxs, gens
        r = rates[int(torch.randint(0, len(rates), (1,), generator=g))]
        x = tokens[idx].to(dev)
        with autocast(dtype, dev):
            g_ = gate_fn(head(x[:, p:]), num_keep(n, r), tau)
            logits = split.forward_from(model, block, x, gate=g_)
        return [F.cross_entropy(logits.float(), labels[idx].to(dev).long())]

    try:
        return _fit(list(head.parameters()), loss_fn, len(tokens), steps, batch, lr, [seed])[0]
    finally:
        head.eval()
        for q, f in zip(model.parameters(), flags):
            q.requires_grad_(f)
        model.train(was_training)


def predictor_extras(heads: Mapping[int, nn.Module]) -> dict:
    """``{PREDICTORS_KEY: {block_index: head}}`` from heads keyed by 1-based location: what ``learned`` reads
    (pass to :func:`tokenprune.core.split_forward.score_cached` as ``extras``)."""
    for loc in heads:
        if isinstance(loc, bool) or not isinstance(loc, int) or loc < 1:
            raise ValueError(f"heads: keys are 1-based block numbers, got {loc!r}")
    return {PREDICTORS_KEY: {loc - 1: h for loc, h in heads.items()}}


def attach(model: nn.Module, heads: Mapping[int, nn.Module]) -> nn.Module:
    """Put predictor heads (keyed by 1-based location) into a patched model's shared state, for ``learned``.

    Call after :func:`tokenprune.core.patch.patch` (or ``PruneConfig.apply``), which builds a fresh state; the heads
    are not registered as submodules (the model's ``state_dict`` is unchanged; move them with the model).
    """
    st = prune_state(model)
    st.extras.setdefault(PREDICTORS_KEY, {}).update(predictor_extras(heads)[PREDICTORS_KEY])
    return model


@register_scorer("learned", reference="decoupling study (press summary only): a small predictor head on block-l "
                                      "tokens, DynamicViT-sized (Rao et al. 2021), trained to rank tokens")
def learned(ctx: TokenContext) -> torch.Tensor:
    """Scores of the predictor head attached for this block (:func:`attach`), from the prunable tokens."""
    heads = ctx.extras.get(PREDICTORS_KEY) or {}
    head = heads.get(ctx.block_index)
    if head is None:
        raise RuntimeError(f"scorer 'learned': no predictor head for block {ctx.block_index + 1}; attach one with "
                           f"tokenprune.methods.learned.attach(model, {{{ctx.block_index + 1}: head}}) after patching "
                           f"(heads for blocks {sorted(b + 1 for b in heads)})")
    return head(ctx.x[:, ctx.num_prefix_tokens:]).float()
