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


@pytest.mark.parametrize("notebook", sorted(params.AUDITS))
@pytest.mark.parametrize("profile", ["smoke", "default"])
def test_smoke_and_default_profiles_compute_in_fp32(notebook, profile):
    cfg = params.setup(notebook, profile)
    dtypes = {k: v for k, v in vars(cfg).items() if k == "dtype" or k.endswith("_dtype")}
    assert dtypes and set(dtypes.values()) == {"fp32"}, dtypes


@pytest.mark.parametrize("notebook", sorted(params.AUDITS))
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
