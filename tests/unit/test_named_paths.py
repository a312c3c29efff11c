"""Every dotted ``tokenprune.…`` path that the README files, the library's docstrings and comments, and the notebooks
name exists: a module, or a name defined in one (a path that a move left behind fails here)."""
from __future__ import annotations

import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: where a reader meets module paths in text
TEXT_FILES = sorted([ROOT / "README.md", ROOT / "data" / "README.md", ROOT / ".ci" / "README.md",
                     *(ROOT / "lib").rglob("*.py"), *(ROOT / "lib").rglob("README.md"),
                     *(ROOT / "notebooks").glob("*.ipynb")])
DOTTED = re.compile(r"\btokenprune(?:\.[A-Za-z_][A-Za-z0-9_]*)+")


def resolves(path: str) -> bool:
    """Whether ``path`` names a module of the library or a name defined in one (attributes followed from the
    longest importable module prefix)."""
    parts = path.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for name in parts[i:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


def test_resolves_tells_a_moved_path_from_a_present_one():
    assert resolves("tokenprune.training.base_models.load_base_model") and resolves("tokenprune.core.patch")
    assert not resolves("tokenprune.models.load_base_model") and not resolves("tokenprune.study.audits")


def test_every_named_module_path_exists():
    missing = sorted({f"{m.group(0)} ({f.relative_to(ROOT)})" for f in TEXT_FILES
                      for m in DOTTED.finditer(f.read_text(encoding="utf-8")) if not resolves(m.group(0))})
    assert not missing, f"{len(missing)} module path(s) named in text do not exist:\n" + "\n".join(missing)
