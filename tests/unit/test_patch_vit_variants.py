"""The ViT family's variants: distillation token, hybrid embedding, no class token (GAP), MAP pooling, registers;
refusal of hierarchical and class-attention models."""
import copy
import io
import warnings

import pytest
import timm
import torch

from tokenprune.core.patch import class_token_of, patch, prune_state
from tokenprune.core.schedule import Schedule, token_counts

VARIANTS = [
    ("deit_tiny_distilled_patch16_224", dict(img_size=64, depth=4), 64),
    ("vit_tiny_r_s16_p8_224", dict(img_size=128, depth=4), 128),
    ("vit_small_patch16_224", dict(img_size=64, depth=4, class_token=False, global_pool="avg"), 64),
    ("vit_small_patch16_224", dict(img_size=64, depth=4, global_pool="map"), 64),
    ("vit_small_patch14_reg4_dinov2", dict(img_size=56, depth=4), 56),
    ("vit_base_patch16_siglip_224", dict(img_size=64, depth=4), 64),
]
IDS = ["distilled", "hybrid", "gap_no_cls", "map", "registers", "siglip_no_cls"]


def _pair(name, kw):
    torch.manual_seed(0)
    ref = timm.create_model(name, **kw).eval()
    new = timm.create_model(name, **kw).eval()
    new.load_state_dict(ref.state_dict())
    return ref, new


def _method(model):
    """EViT where the model has a class token, ToMe where it has none."""
    if class_token_of(model):
        return dict(scorer="cls_attention", reducer="fuse_attention")
    return dict(reducer="bipartite", prop_attn=True)


@pytest.mark.parametrize("name,kw,size", VARIANTS, ids=IDS)
def test_variant_unpruned_equals_timm_and_prunes_by_the_schedule(name, kw, size):
    ref, new = _pair(name, kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # pooling heads warn that they pool what remains
        patch(new, keep_rate=1.0, locations=(2, 3), **_method(ref))
    x = torch.randn(2, 3, size, size)
    with torch.inference_mode():
        assert torch.allclose(ref(x), new(x), atol=1e-5, rtol=0)
        new.keep_rate = 0.5
        out = new(x)
    assert out.shape == ref(x).shape
    p = new.num_prefix_tokens
    n = new.patch_embed.num_patches
    adds = 1 if class_token_of(ref) else 0  # EViT's fused token; ToMe merges
    want = token_counts(n, 4, Schedule.build(4, 0.5, (2, 3)), num_prefix_tokens=p, adds_tokens=adds)
    assert prune_state(new).token_counts == want


@pytest.mark.parametrize("name,kw,size", VARIANTS[:3], ids=IDS[:3])
def test_variant_save_load_and_deepcopy(name, kw, size):
    _, m = _pair(name, kw)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        patch(m, keep_rate=0.6, locations=(2,), **_method(m))
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    x = torch.randn(1, 3, size, size)
    with torch.inference_mode():
        want = m(x)
        assert torch.equal(loaded(x), want) and torch.equal(copy.deepcopy(m)(x), want)


def test_cls_attention_methods_are_refused_without_a_class_token():
    m = timm.create_model("vit_small_patch16_224", img_size=64, depth=2, class_token=False, global_pool="avg")
    with pytest.raises(ValueError, match="scorer"):
        patch(m, keep_rate=0.5, locations=(1,))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        patch(m, keep_rate=0.5, locations=(1,), scorer="random", reducer="drop", seed=0)  # needs no [CLS]


@pytest.mark.parametrize("name", ["swin_tiny_patch4_window7_224", "cait_xxs24_224", "mvitv2_tiny"])
def test_hierarchical_and_class_attention_models_are_refused_in_one_line(name):
    m = timm.create_model(name)
    with pytest.raises(TypeError) as e:
        patch(m, keep_rate=0.7)
    assert "\n" not in str(e.value) and type(m).__name__ in str(e.value)
