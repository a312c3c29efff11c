"""A patched model outside eager PyTorch: its ONNX export (tokenprune.export_onnx) computes what the eager model
computes on ONNX Runtime, at another batch and on other images than it was traced on, and what cannot export is
refused before anything is written; torch.compile sees the whole pruning forward pass as one graph (no graph break,
so ``fullgraph=True`` compiles it) and gives the eager logits."""
import numpy as np
import onnxruntime as ort
import pytest
import timm
import torch

import tokenprune
from tokenprune.measure.export import NOT_EXPORTABLE, export_onnx
from tokenprune.utils.io import InputError

IMG = 64  # a 3-block ViT-Ti at 64 px: 16 patch tokens, reduced after blocks 2 and 3

#: EViT with fusion, ToMe (proportional attention), BAT, the variance scorer with its fusion, and a scorer that ties
#: every token (Eq. 6 as printed is 0), whose tie-break an exported graph must reproduce
METHODS = {
    "evit": dict(keep_rate=0.7),
    "tome": dict(keep_rate=0.7, reducer="bipartite", prop_attn=True),
    "bat": dict(keep_rate=0.5, reducer="merge_dpcknn"),  # 8 inattentive tokens into 4 clusters
    "variance": dict(keep_rate=0.7, scorer="attention_variance", reducer="fuse_softmax"),
    "ties": dict(keep_rate=0.7, scorer="attention_variance_eq6", reducer="drop"),
}


def _patched(method: str = "evit", **kwargs) -> torch.nn.Module:
    """A seeded 3-block ViT-Ti patched with ``METHODS[method]`` (``kwargs`` replace its entries)."""
    torch.manual_seed(0)
    model = timm.create_model("vit_tiny_patch16_224", pretrained=False, depth=3, img_size=IMG, num_classes=10)
    return tokenprune.patch(model.eval(), locations=(2, 3), **{**METHODS[method], **kwargs})


def _images(batch: int, seed: int) -> torch.Tensor:
    return torch.randn(batch, 3, IMG, IMG, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("method", ["evit", "tome", "bat", "ties"])
def test_exported_model_computes_the_eager_logits(method, tmp_path):
    model = _patched(method)
    result = export_onnx(model, tmp_path / "m.onnx")
    assert result.max_abs_diff <= 1e-4 and result.path.is_file()
    session = ort.InferenceSession(str(result.path), providers=["CPUExecutionProvider"])
    x = _images(5, seed=5)  # other images, another batch
    got = session.run(None, {session.get_inputs()[0].name: x.numpy()})[0]
    with torch.no_grad():
        want = model(x).numpy()
        model.keep_rate = 1.0
        unpruned = model(x).numpy()
    assert np.abs(got - want).max() <= 1e-4
    assert np.abs(got - unpruned).max() > 1e-3  # the graph reduces tokens: it is not the unpruned model


@pytest.mark.parametrize("scorer", ["random", "attention_medad", "inverse:attention_medad"])
def test_what_cannot_export_is_refused_in_one_line_before_anything_is_written(scorer, tmp_path):
    model = _patched(scorer=scorer, reducer="drop", seed=0)
    with pytest.raises(InputError) as err:
        export_onnx(model, tmp_path / "m.onnx")
    message = str(err.value)
    assert "\n" not in message and repr(scorer) in message and "cls_attention" in message  # names it and the rest
    assert list(tmp_path.iterdir()) == []
    assert set(NOT_EXPORTABLE) <= set(tokenprune.SCORERS) | set(tokenprune.REDUCERS)  # every entry names a method


def test_a_scorer_the_reducer_does_not_read_is_not_refused(monkeypatch, tmp_path):
    """ToMe's matching ranks tokens itself: a scorer that cannot export is never run beside it, so the model is
    traced."""
    class Traced(Exception):
        pass

    def trace(*args, **kwargs):
        raise Traced

    monkeypatch.setattr(torch.onnx, "export", trace)
    with pytest.raises(Traced):
        export_onnx(_patched("tome", scorer="random"), tmp_path / "m.onnx")


@pytest.mark.parametrize("kwargs, name", [({"batch": 1}, "batch"), ({"batch": 0, "dynamic_batch": False}, "batch"),
                                          ({"atol": -1.0}, "atol")])
def test_bad_arguments_and_unpatched_models_are_refused(kwargs, name, tmp_path):
    with pytest.raises(InputError, match=name):
        export_onnx(_patched(), tmp_path / "m.onnx", **kwargs)
    unpatched = timm.create_model("vit_tiny_patch16_224", pretrained=False, depth=1, img_size=IMG)
    with pytest.raises(InputError, match="model"):
        export_onnx(unpatched, tmp_path / "m.onnx")
    assert list(tmp_path.iterdir()) == []


def test_an_export_that_differs_from_eager_is_not_written(monkeypatch, tmp_path):
    run = ort.InferenceSession.run
    monkeypatch.setattr(ort.InferenceSession, "run", lambda self, *a, **kw: [y + 1e-3 for y in run(self, *a, **kw)])
    with pytest.raises(RuntimeError):
        export_onnx(_patched(), tmp_path / "m.onnx")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
@pytest.mark.parametrize("method", ["evit", "tome", "variance"])
def test_patched_model_compiles_as_one_graph_and_gives_the_eager_logits(method):
    model, x = _patched(method), _images(2, seed=1)
    torch._dynamo.reset()
    with torch.no_grad():
        explained = torch._dynamo.explain(model)(x)
        assert explained.graph_break_count == 0 and explained.graph_count == 1, explained.break_reasons
        eager = model(x)
        with torch._inductor.config.patch(compile_threads=1):  # inductor's C++ compiled in this process alone
            compiled = torch.compile(model, fullgraph=True, dynamic=False)(x)
    assert (compiled - eager).abs().max() <= 1e-5 * eager.abs().max()
