"""Imports point one way: utils < core < methods < measure, data < training < study (:data:`ALLOWED`; the README's
table of the library lists what each package imports)."""
import ast
from pathlib import Path

import tokenprune

PKG = Path(tokenprune.__file__).parent
#: what each package may import of tokenprune (besides itself)
ALLOWED = {
    "utils": set(),
    "core": {"utils"},
    "methods": {"utils", "core"},
    "data": {"utils", "core"},
    "measure": {"utils", "core", "methods"},
    "training": {"utils", "core", "methods", "measure", "data"},
    "study": {"utils", "core", "methods", "measure", "data", "training"},
}


def _imports(path: Path) -> set[str]:
    """tokenprune subpackages that a module imports, at the top or inside functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        for n in names:
            parts = n.split(".")
            if parts[0] == "tokenprune" and len(parts) > 1:
                found.add(parts[1])
    return found


def test_imports_point_down_only():
    bad = []
    for layer, allowed in ALLOWED.items():
        for f in sorted((PKG / layer).rglob("*.py")):
            for used in _imports(f) - {layer}:
                if used in ALLOWED and used not in allowed:
                    bad.append(f"{f.relative_to(PKG)} imports tokenprune.{used}")
    assert not bad, "\n".join(bad)


def test_no_relative_imports_and_public_api():
    for f in PKG.rglob("*.py"):
        tree = ast.parse(f.read_text())
        assert not any(isinstance(n, ast.ImportFrom) and n.level for n in ast.walk(tree)), f
    assert callable(tokenprune.patch) and callable(tokenprune.prune_state) and callable(tokenprune.analytic_macs)
    assert "fuse_attention" in tokenprune.REDUCERS and "cls_attention" in tokenprune.SCORERS
    assert (PKG / "py.typed").exists()
