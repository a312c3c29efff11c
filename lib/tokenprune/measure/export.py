"""ONNX export of a patched model, checked against the eager model on ONNX Runtime before it is written.

torch's dynamo exporter (``torch.onnx.export(..., dynamo=True)``, which needs ``onnxscript``) traces the pruning
forward pass whole: the ranking (:func:`tokenprune.core.scorers.descending_order`, ties to the lower index as in the
eager model), the reducers' gathers and fusions, ToMe's bipartite matching and BAT's clustering become ONNX ops, so
the exported graph chooses its tokens per image as the eager model does, at any batch size. What cannot be exported
faithfully is refused before anything is traced (:data:`NOT_EXPORTABLE`).

Example::

    model = tokenprune.patch(timm.create_model("deit_small_patch16_224"), keep_rate=0.7)
    tokenprune.export_onnx(model, "evit.onnx").max_abs_diff    # ONNX Runtime against eager, seeded images
"""
from __future__ import annotations

import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import torch

from tokenprune.core.patch import prune_state
from tokenprune.core.reducers import REDUCERS
from tokenprune.core.scorers import SCORERS
from tokenprune.utils.io import InputError

__all__ = ["NOT_EXPORTABLE", "OnnxExport", "export_onnx"]

#: scorers and reducers whose exported graph cannot compute what the eager model computes, by name, and why
NOT_EXPORTABLE: dict[str, str] = {
    "random": "it draws its scores from torch's random generator, which ONNX Runtime does not reproduce",
    "attention_variance_eq6_float": "its scores are the rounding residue of Eq. 6 as printed, which ONNX Runtime "
                                    "rounds otherwise (other tokens kept)",
    "attention_medad": "torch.median (the lower median over heads) has no ONNX translation",
    "attention_medad_global": "torch.median (the lower median over heads) has no ONNX translation",
    "attention_medad_pooled": "torch.median (the lower median over heads) has no ONNX translation",
    "oracle_attention": "it reads per-image oracle maps fed beside the images (oracle_feed), not the images alone",
}


@dataclass(frozen=True)
class OnnxExport:
    """A written ONNX model: its path, the batch sizes it was checked at and the largest absolute difference of
    ONNX Runtime's logits from the eager model's on seeded images at those batches."""

    path: Path
    batches: tuple[int, ...]
    max_abs_diff: float


def _refusal(model: torch.nn.Module) -> str:
    """Why ``model`` cannot be exported (the scorer it runs or its reducer is in :data:`NOT_EXPORTABLE`), or ``""``;
    a ValueError for a model that is not patched."""
    st = prune_state(model)
    used = ([("scorer", st.scorer.name, SCORERS)] if st.reducer.uses_scores else []) + \
        [("reducer", st.reducer.name, REDUCERS)]
    for kind, name, registry in used:
        key = name.removeprefix("inverse:")
        if key in NOT_EXPORTABLE:
            accepted = sorted(registry.keys() - NOT_EXPORTABLE.keys())
            return (f"model: its {kind} {name!r} cannot export to ONNX: {NOT_EXPORTABLE[key]}; accepted: "
                    f"{', '.join(accepted)}")
    return ""


def _input_shape(model: torch.nn.Module) -> tuple[int, int, int]:
    """``(channels, height, width)`` of the model's input: its patch embedding's first convolution and image size."""
    conv = next(m for m in model.patch_embed.modules() if isinstance(m, torch.nn.Conv2d))
    h, w = model.patch_embed.img_size
    return conv.in_channels, h, w


def export_onnx(model: torch.nn.Module,
                path: str | os.PathLike,
                batch: int = 2,
                dynamic_batch: bool = True,
                atol: float = 1e-4,
                seed: int = 0) -> OnnxExport:
    """Export a patched model (:func:`tokenprune.patch`) to ONNX at ``path``, in eval mode, and check it first.

    Args:
        model: a patched timm ViT; its scorer and reducer must not be in :data:`NOT_EXPORTABLE`.
        path: the ``.onnx`` file (weights over 2 GB go beside it as external data, ONNX's limit).
        batch: the batch of the example input that is traced: the graph's batch, or with ``dynamic_batch`` at least
            2 (torch.export fixes a dimension of size 1).
        dynamic_batch: export the batch dimension as dynamic (the token counts are fixed by the input size).
        atol: the largest absolute difference of ONNX Runtime's logits from eager that is accepted.
        seed: seed of the images that are traced and checked.

    The graph is traced with torch's dynamo exporter and run on ONNX Runtime (CPU) on seeded images at ``batch``
    (and at ``batch + 1`` when the batch is dynamic); nothing is written unless every logit lies within ``atol``
    of the eager model's. A refused model raises :class:`~tokenprune.utils.io.InputError` on one line naming its
    scorer or reducer; an export that runs but differs raises RuntimeError with the difference.
    """
    import onnxruntime as ort

    least = 2 if dynamic_batch else 1
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < least:
        raise InputError(f"batch: expected an int >= {least} (the traced batch"
                         f"{'; torch.export fixes a dimension of size 1' if dynamic_batch else ''}), got {batch!r}")
    if not isinstance(atol, (int, float)) or not atol > 0:
        raise InputError(f"atol: expected a positive number, got {atol!r}")
    try:
        why = _refusal(model)
    except ValueError as err:  # not patched
        raise InputError(str(err)) from err
    if why:
        raise InputError(why)
    target = Path(path)
    g = torch.Generator().manual_seed(seed)
    batches = (batch, batch + 1) if dynamic_batch else (batch,)
    device = next(model.parameters()).device
    images = [torch.randn(b, *_input_shape(model), generator=g).to(device) for b in batches]
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            program = torch.onnx.export(model, (images[0],), dynamo=True, verbose=False,
                                        dynamic_shapes=({0: torch.export.Dim("batch")},) if dynamic_batch else None)
            eager = [model(x).cpu().numpy() for x in images]
    finally:
        model.train(was_training)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}."))
    try:
        program.save(staging / target.name)
        session = ort.InferenceSession(str(staging / target.name), providers=["CPUExecutionProvider"])
        name = session.get_inputs()[0].name
        diff = max(float(abs(session.run(None, {name: x.cpu().numpy()})[0] - want).max())
                   for x, want in zip(images, eager))
        if not diff <= atol:
            raise RuntimeError(f"ONNX Runtime's logits differ from the eager model's by {diff:.3g} (atol {atol:g}) on "
                               f"seeded images at batch {', '.join(map(str, batches))}: not written to {target}")
        for f in staging.iterdir():  # the model, and its external data when it has any
            os.replace(f, target.parent / f.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return OnnxExport(target, batches, diff)
