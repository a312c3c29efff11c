"""One training step as a module, so that the bench times training passes as it times forward passes.

A fine-tune that trains a ViT's blocks from ``from_block`` on (EViT's fine-tuning of DeiT-S trains every block; a
proxy that trains blocks 4-12 leaves blocks 1-3 frozen) costs, per image, the frozen blocks' forward pass plus the
trained blocks' forward and backward passes and the optimiser's step. :class:`TrainingStep` performs exactly that on
each call, on labels fixed at construction, so that :func:`tokenprune.measure.throughput.benchmark` with
``train=True`` reports training images per second, configurations side by side.
"""
from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F

__all__ = ["TrainingStep", "trained_modules"]


def trained_modules(model: torch.nn.Module, from_block: int) -> list[torch.nn.Module]:
    """The modules a fine-tune from block ``from_block`` (1-based) trains: those blocks to the last, the final norm
    (and ``fc_norm``) and the head of a timm ``VisionTransformer``."""
    depth = len(model.blocks)
    if not 1 <= from_block <= depth:
        raise ValueError(f"from_block: {from_block} not accepted; accepted: 1 to {depth} (the model's blocks)")
    return [*model.blocks[from_block - 1:], *(m for m in (model.norm, getattr(model, "fc_norm", None), model.head)
                                              if isinstance(m, torch.nn.Module))]


class TrainingStep(torch.nn.Module):
    """Each call is one training step of ``model`` on its input: forward in train mode, cross-entropy against labels
    drawn once with ``seed``, backward, AdamW (``lr``) on :func:`trained_modules`; the other parameters are frozen
    (no gradient flows into the blocks before ``from_block``). Returns the loss, detached."""

    def __init__(self, model: torch.nn.Module, from_block: int, *, batch: int, lr: float = 1e-4, seed: int = 0,
                 num_classes: Optional[int] = None) -> None:
        super().__init__()
        classes = num_classes or getattr(model, "num_classes", 0)
        if classes < 1:
            raise ValueError("model: a training step needs a classification head (num_classes > 0)")
        self.model = model
        for p in model.parameters():
            p.requires_grad_(False)
        params = [p for m in trained_modules(model, from_block) for p in m.parameters()]
        for p in params:
            p.requires_grad_(True)
        self.optimizer = torch.optim.AdamW(params, lr=lr)
        gen = torch.Generator().manual_seed(seed)
        self.register_buffer("labels", torch.randint(classes, (batch,), generator=gen), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.model.train()
        with torch.enable_grad():
            loss = F.cross_entropy(self.model(x).float(), self.labels[: len(x)])
            loss.backward()
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()
