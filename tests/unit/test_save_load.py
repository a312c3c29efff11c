"""A patched model survives torch.save / torch.load (also in a fresh process, before any patch() call) and
deepcopy, for every reducer; its state_dict stays timm's."""
import copy
import io
import subprocess
import sys

import pytest
import timm
import torch

import tokenprune

CASES = [("cls_attention", "fuse_attention", {}), ("cls_attention", "drop", {}),
         ("attention_variance", "fuse_softmax", {"temperature": 0.5}), ("cls_attention", "merge_dpcknn", {"num_clusters": 2}),
         ("cls_attention", "merge_dpcknn_budget", {}), ("cls_attention", "cluster_all", {}), ("cls_attention", "bipartite", {}),
         ("inverse:cls_attention", "fuse_attention", {}), ("random", "drop", {})]


def _model(scorer, reducer, options):
    torch.manual_seed(0)
    m = timm.create_model("deit_tiny_patch16_224", img_size=64, depth=4, num_classes=3).eval()
    return tokenprune.patch(m, keep_rate=0.6, locations=(2, 3), scorer=scorer, reducer=reducer,
                            reducer_options=options, seed=0 if scorer == "random" else None)


@pytest.mark.parametrize("scorer,reducer,options", CASES, ids=[f"{s}+{r}" for s, r, _ in CASES])
def test_save_load_and_deepcopy_keep_the_model(scorer, reducer, options):
    x = torch.randn(2, 3, 64, 64)
    m = _model(scorer, reducer, options)
    buf = io.BytesIO()
    torch.save(m, buf)
    buf.seek(0)
    loaded = torch.load(buf, weights_only=False)
    twin = copy.deepcopy(m)
    ref = _model(scorer, reducer, options)  # a fresh generator for the random scorer
    with torch.inference_mode():
        want = ref(x)
        assert torch.equal(loaded(x), want) and torch.equal(twin(x), want)
    assert tokenprune.prune_state(loaded).token_counts == tokenprune.prune_state(ref).token_counts
    loaded.keep_rate = 0.9  # the one knob still reaches every block of the loaded model
    with torch.inference_mode():
        loaded(x)
    assert tokenprune.prune_state(loaded).token_counts[-1] > tokenprune.prune_state(ref).token_counts[-1]
    assert set(m.state_dict()) == set(timm.create_model("deit_tiny_patch16_224", img_size=64, depth=4,
                                                        num_classes=3).state_dict())


#: a fresh process may run other GEMM kernels or another thread count than pytest's (a CPU with two threads per core
#: gives it half as many threads by default), so its sums are split differently and differ in the last bits of fp32.
#: Loading must restore the same model: anything beyond fp32 rounding (a weight, a kept token or the fused token's
#: weights lost) moves the logits by far more than this share of their scale.
FRESH_PROCESS_RTOL = 1e-5


@pytest.mark.parametrize("threads", ["same", 1])
def test_load_in_a_fresh_process(tmp_path, threads):
    """The fresh process runs with pytest's thread count (``same``) and with one thread, which changes how GEMM
    reductions are split: both give the saved logits within fp32 rounding, and the same tokens."""
    m = _model("cls_attention", "fuse_attention", {})
    x = torch.randn(1, 3, 64, 64)
    with torch.inference_mode():
        y = m(x)
    counts = list(tokenprune.prune_state(m).token_counts)
    torch.save({"model": m, "x": x, "y": y}, tmp_path / "m.pt")
    n = torch.get_num_threads() if threads == "same" else threads
    code = ("import torch, tokenprune; torch.set_num_threads(%d)\n"
            "d = torch.load(r'%s', weights_only=False); m = d['model']\n"
            "with torch.inference_mode(): z = m(d['x'])\n"
            "scale = d['y'].abs().max().item()\n"
            "print(type(m).__name__, (z - d['y']).abs().max().item() / scale, list(tokenprune.prune_state(m).token_counts))"
            ) % (n, tmp_path / "m.pt")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stderr
    name, rel_diff, fresh_counts = out.stdout.strip().split(" ", 2)
    assert name == "PruningVisionTransformer"
    assert float(rel_diff) <= FRESH_PROCESS_RTOL
    assert fresh_counts == str(counts)
