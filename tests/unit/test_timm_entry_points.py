"""Every timm entry point the patch touches is right or refused."""
import pytest
import timm
import torch

import tokenprune


def _pair():
    torch.manual_seed(0)
    ref = timm.create_model("deit_tiny_patch16_224", img_size=64, patch_size=16, depth=4, num_classes=5).eval()
    pat = timm.create_model("deit_tiny_patch16_224", img_size=64, patch_size=16, depth=4, num_classes=5).eval()
    pat.load_state_dict(ref.state_dict())
    return ref, tokenprune.patch(pat, keep_rate=1.0, locations=(2, 3))


def test_unpruned_entry_points_equal_timm():
    ref, pat = _pair()
    x = torch.randn(2, 3, 64, 64)
    with torch.inference_mode():
        assert torch.equal(ref.forward_features(x), pat.forward_features(x))
        f = ref.forward_features(x)
        assert torch.equal(ref.forward_head(f), pat.forward_head(f))
        a = ref.forward_intermediates(x, intermediates_only=True)
        b = pat.forward_intermediates(x, intermediates_only=True)
        assert len(a) == len(b) and all(torch.equal(u, v) for u, v in zip(a, b))
        assert a[0].shape == (2, 192, 4, 4)


def test_intermediates_are_refused_while_pruning():
    _, pat = _pair()
    pat.keep_rate = 0.5
    x = torch.randn(2, 3, 64, 64)
    with pytest.raises(NotImplementedError, match=r"forward_intermediates(.|\n)*\[2, 3\]"):
        pat.forward_intermediates(x)
    with pytest.raises(NotImplementedError, match="forward_intermediates"):
        pat.get_intermediate_layers(x, n=2, reshape=True)
    with torch.inference_mode():  # the pruned forward pass itself still runs
        assert pat.forward_features(x).shape[1] < 17


def test_pooling_head_warns_what_it_pools():
    m = timm.create_model("deit_tiny_patch16_224", img_size=64, depth=4, global_pool="avg")
    with pytest.warns(UserWarning, match="global_pool='avg'"):
        tokenprune.patch(m, keep_rate=0.5, locations=(2,))
