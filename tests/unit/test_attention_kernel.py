"""core.precision: the fixed attention-kernel rule, the native-bf16 detection, and that the rule's kernel computes
what timm computes (an unpruned patched model equals timm within the dtype's rounding)."""
import copy

import pytest
import timm
import torch

from tokenprune import patch
from tokenprune.core import precision as P

#: fp32: the two kernels sum in another order; measured 7e-7-2e-6 on logits of order 1 (tiny ViT, DeiT-S)
FP32_ATOL = 1e-5
#: bf16, relative to the largest fp32 logit: the logits come out of the head in bf16 (8 significant bits, a spacing
#: of 2^-8 to 2^-7 of a value), so the two kernels' rounding shows as whole bf16 steps. Measured: 1 step
#: (0.0063-0.0081 of the largest logit, tiny ViT over 3 seeds and DeiT-S), as large as timm's own bf16 logits'
#: distance from its fp32 ones (0.0063-0.0093). Tolerance: 4 steps at the coarse end, 2^-5; a wrong kernel (a
#: missing scale, a wrong mask) moves the logits by a sizeable fraction of their scale.
BF16_RTOL = 2 ** -5


def test_rule_explicit_for_reduced_precision_on_a_cpu_without_amx_fused_elsewhere():
    for dtype in ("bf16", "fp16"):
        assert P.attention_kernel("cpu", dtype, amx=False) == "explicit"
        assert P.attention_kernel("cpu", dtype, amx=True) == "fused"
    for amx in (False, True):
        assert P.attention_kernel("cpu", "fp32", amx=amx) == "fused"
    for dtype in ("fp32", "bf16", "fp16"):
        assert P.attention_kernel("cuda", dtype) == "fused"


@pytest.mark.parametrize("flags, expected", [({"avx512_bf16", "amx_tile", "amx_bf16"}, "fused"),
                                             ({"avx512_bf16"}, "explicit"), (set(), "explicit")])
def test_rule_reads_amx_from_the_cpu_flags(monkeypatch, flags, expected):
    monkeypatch.setattr(P, "cpu_flags", lambda: frozenset(flags))
    assert P.attention_kernel("cpu", "bf16") == expected


def test_rule_refuses_an_unknown_dtype():
    with pytest.raises(ValueError, match="dtype"):
        P.attention_kernel("cpu", "float32")


def _tiny(seed: int = 0):
    torch.manual_seed(seed)
    return timm.create_model("vit_tiny_patch16_224", img_size=32, patch_size=4, depth=2).eval()


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("dtype, amx", [("fp32", None), ("bf16", False), ("bf16", True)])
def test_unpruned_patched_model_with_the_rules_kernel_equals_timm(dtype, amx, seed):
    """Against timm as it is (its fused kernel), for each kernel the rule can pick (a CPU with or without AMX)."""
    timm_model = _tiny(seed)
    ours = patch(copy.deepcopy(timm_model), keep_rate=1.0, locations=(1,))
    kernel = P.attention_kernel("cpu", dtype, amx=amx)
    assert P.set_eager_attention(ours, kernel == "explicit") == 2
    assert all(blk.attn.fused_attn == (kernel == "fused") for blk in ours.blocks)
    x = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(seed))
    with torch.inference_mode():
        ref32 = timm_model(x)
        with P.autocast(dtype):
            ref, got = timm_model(x).float(), ours(x).float()
    diff = (got - ref).abs().max().item()
    if dtype == "fp32":
        assert diff <= FP32_ATOL, diff
    else:
        assert diff <= BF16_RTOL * ref32.abs().max().item(), (diff, ref32.abs().max().item())


def test_bf16_tolerance_is_tight_enough_to_see_a_wrong_attention():
    """The bf16 tolerance does not pass a model whose attention is off: dropping the 1/sqrt(d) scale (every head
    computes softmax(q k^T) v unscaled) moves the logits far beyond it."""
    timm_model = _tiny(0)
    wrong = copy.deepcopy(timm_model)
    P.set_eager_attention(wrong)
    for blk in wrong.blocks:
        blk.attn.scale = 1.0
    x = torch.randn(4, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    with torch.inference_mode():
        scale = timm_model(x).abs().max().item()
        with P.autocast("bf16"):
            diff = (wrong(x).float() - timm_model(x).float()).abs().max().item()
    assert diff > 2 * BF16_RTOL * scale, (diff, scale)


@pytest.mark.parametrize("flags, expected", [
    ({"avx512f", "avx512_bf16", "amx_tile", "amx_bf16"}, "AMX-BF16"),
    ({"avx512f", "avx512_bf16"}, "AVX512-BF16"),
    ({"fp", "asimd", "bf16"}, "Arm BF16"),
    ({"avx2", "avx512f"}, None),
])
def test_native_bf16_from_cpu_flags(monkeypatch, flags, expected):
    monkeypatch.setattr(P, "cpu_flags", lambda: frozenset(flags))
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: True, raising=False)  # flags take precedence
    assert P.native_bf16("cpu") == expected


@pytest.mark.parametrize("probe, expected", [(True, "AVX512-BF16"), (False, None)])
def test_native_bf16_falls_back_to_torchs_probe_without_proc_cpuinfo(monkeypatch, probe, expected):
    monkeypatch.setattr(P, "cpu_flags", lambda: frozenset())
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: probe, raising=False)
    assert P.native_bf16("cpu") == expected


def test_native_bf16_on_devices_without_it(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert P.native_bf16("cuda") is None
    assert P.native_bf16("mps") is None


def test_cpu_flags_reads_this_machines_cpuinfo():
    flags = P.cpu_flags()
    assert isinstance(flags, frozenset)
    try:
        text = open("/proc/cpuinfo").read()
    except OSError:
        pytest.skip("no /proc/cpuinfo")
    if "flags" in text:
        assert "fpu" in flags  # every x86 CPU lists it
