"""The committed numbers do not depend on a CPU's bf16 path: every notebook's ``smoke`` and ``default`` profile
computes in fp32 (bf16 stays a choice a user passes, ``-p dtype bf16``), the study's code passes no hard-coded
bf16 to an evaluation, and the split forward pass defaults to fp32."""
import ast
import inspect
from pathlib import Path

import pytest

import tokenprune.study
from tokenprune.core import split_forward
from tokenprune.measure import evaluation
from tokenprune.study import params

#: notebook 00 computes nothing at a chosen precision: it reads fp32 caches and rechecks them in fp32
FIXED_FP32 = {"00_proxy_calibration"}
COMPUTING = sorted(set(params.AUDITS) - FIXED_FP32)


def test_only_the_calibration_has_no_dtype_setting():
    assert {n for n in params.AUDITS if "dtype" not in params.profile_table(n)["default"]} == FIXED_FP32


@pytest.mark.parametrize("notebook", COMPUTING)
@pytest.mark.parametrize("profile", ["smoke", "default"])
def test_smoke_and_default_profiles_compute_in_fp32(notebook, profile):
    cfg = params.setup(notebook, profile)
    dtypes = {k: v for k, v in vars(cfg).items() if k == "dtype" or k.endswith("_dtype")}
    assert dtypes and set(dtypes.values()) == {"fp32"}, dtypes


@pytest.mark.parametrize("notebook", COMPUTING)
def test_bf16_stays_a_choice(notebook):
    assert params.setup(notebook, "default", {"dtype": "bf16"}).dtype == "bf16"


def _is_bf16(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value == "bf16"


def _hard_coded_bf16(path: Path) -> list[int]:
    """Lines of ``path`` where code inside a function sets ``dtype`` to the literal ``"bf16"``: a keyword argument
    (``f(dtype="bf16")``, ``dict(dtype="bf16")``) or a dict entry (``{"dtype": "bf16"}``). The module-level profile
    tables are left out: the profile tests check them."""
    lines = set()
    for fn in ast.walk(ast.parse(path.read_text())):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.keyword) and node.arg == "dtype" and _is_bf16(node.value):
                lines.add(node.value.lineno)
            if isinstance(node, ast.Dict):
                lines.update(v.lineno for k, v in zip(node.keys, node.values)
                             if isinstance(k, ast.Constant) and k.value == "dtype" and _is_bf16(v))
    return sorted(lines)


def test_the_study_passes_no_hard_coded_bf16():
    root = Path(tokenprune.study.__file__).parent
    found = {str(p.relative_to(root)): lines for p in sorted(root.rglob("*.py")) if (lines := _hard_coded_bf16(p))}
    assert found == {}


@pytest.mark.parametrize("fn", [split_forward.cache_tokens, split_forward.prune_cached, evaluation.predict,
                                evaluation.prune_sweep])
def test_evaluation_defaults_are_fp32(fn):
    assert inspect.signature(fn).parameters["dtype"].default == "fp32"


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_bat_in_notebook_finetunes_train_at_the_profile_dtype(monkeypatch, dtype):
    """02's fine-tunes (not cached) train at ``cfg.dtype``, not at the dtype of the proxy's own (bf16) recipe."""
    from types import SimpleNamespace

    import timm
    import torch

    from tokenprune.core.patch import patch
    from tokenprune.study.bat import finetunes, proxy_scale, settings
    from tokenprune.training import finetune as ft_module
    from tokenprune.training.recipe import TrainRecipe

    trained = []
    monkeypatch.setattr(ft_module, "finetune",
                        lambda m, rec, data, conf, **kw: trained.append(rec.dtype) or SimpleNamespace(steps=1, train_time_s=0.0))
    cfg = params.setup("02_diversity_merging", "default", {"finetune_seeds": [0, 1], "ft_batch": 4, "finetune_steps": 1,
                                                           "sweep_batch": 8, "dtype": dtype})
    torch.manual_seed(0)
    base = patch(timm.create_model("vit_tiny_patch16_224", img_size=32, patch_size=8, embed_dim=32, num_heads=2,
                                   num_classes=3).eval(), keep_rate=1.0)
    recipe = TrainRecipe(name="proxy", img_size=32, dtype="bf16")
    train = (torch.randint(0, 255, (8, 3, 32, 32), dtype=torch.uint8), torch.randint(0, 3, (8,)))
    images, labels = torch.randn(8, 3, 32, 32), torch.randint(0, 3, (8,))
    finetunes.run_finetune(base, base, proxy_scale.proxy_methods(settings.bat_options(cfg))["BAT"], recipe, train,
                           images, labels, cfg)
    assert trained and set(trained) == {dtype}


@pytest.mark.parametrize("native", [None, "AMX-BF16"])
def test_auto_is_bf16_only_where_the_cpu_computes_it(monkeypatch, native):
    """``auto`` (the paper profiles' precision) resolves to bf16 on a CPU with bf16 units and to fp32 where autocast
    would emulate it; an explicit dtype is kept, an unknown one refused."""
    from tokenprune.core import precision

    monkeypatch.setattr(precision, "native_bf16", lambda device_type="cpu": native)
    expected = "bf16" if native else "fp32"
    assert precision.resolve_dtype("auto") == expected
    assert precision.resolve_dtype("bf16") == "bf16" and precision.resolve_dtype("fp32") == "fp32"
    with pytest.raises(ValueError, match="dtype"):
        precision.resolve_dtype("int8")
    for notebook in ("02_diversity_merging", "03_variance_medad", "04_decoupling"):
        assert params.profile_table(notebook)["paper"]["dtype"] == "auto"
        assert params.setup(notebook, "paper").dtype == expected
        assert params.setup(notebook, "paper", {"dtype": "bf16"}).dtype == "bf16"
