"""The shape of the project, read from its files (no models, no imports of the library):

* no import cycle among the ``tokenprune`` modules, imports inside functions included;
* every module of the library stays short (at most 500 lines, no line over 120 characters), tested per role
  package;
* only the study itself and the command line (``tokenprune/__main__.py``) import ``tokenprune.study``;
* the product speaks of the study alone: no project history in the library, notebooks, reports, tests, CI script
  or README files;
* notebook prose never states a verdict or a tolerance by hand (verdicts and rule texts come from the report).
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path
from typing import Iterator, Optional

import pytest

ROOT = Path(__file__).resolve().parents[2]
LIB = ROOT / "lib"
PACKAGE = LIB / "tokenprune"

MAX_MODULE_LINES = 500
MAX_LINE_CHARS = 120
#: at most this many offenders are listed in a failure message (the count says how many there are)
MAX_LISTED = 300


def _listing(offenders: list[str]) -> str:
    shown = offenders[:MAX_LISTED]
    more = len(offenders) - len(shown)
    return "\n".join(shown + ([f"... and {more} more"] if more else []))


# ----------------------------------------------------------------------------------------------
# imports
# ----------------------------------------------------------------------------------------------


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(LIB).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    """Every module of the package: dotted name -> file."""
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> Optional[str]:
    """The module ``name`` refers to: itself if it is one, else the longest prefix that is (``from pkg import x``
    where ``x`` is not a module imports ``pkg``); None outside the package."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in modules:
            return candidate
        parts.pop()
    return None


def _imports(module: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """``(imported module, line)`` for every import of a ``tokenprune`` module anywhere in the file (module level,
    functions, classes, ``if`` blocks alike). Importing a submodule counts as importing it, not its parents."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[:len(base) - node.level + (1 if is_package else 0)]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            names = [f"{origin}.{alias.name}" for alias in node.names]
        for name in names:
            target = _resolve(name, modules)
            if target is not None and target != module:
                yield target, node.lineno


def _import_graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], int]]:
    modules = _modules()
    graph: dict[str, set[str]] = {m: set() for m in modules}
    lines: dict[tuple[str, str], int] = {}
    for module, path in modules.items():
        for target, line in _imports(module, path, modules):
            graph[module].add(target)
            lines.setdefault((module, target), line)
    return graph, lines


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's strongly connected components (iterative), those of more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    components.append(sorted(component))
    return components


def _cycle_in(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One shortest cycle through the first module of a strongly connected component (breadth first)."""
    members = set(component)
    start = component[0]
    previous: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for child in sorted(graph[node] & members):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(previous[path[-1]])
                    return [start] + path[::-1][1:] + [start]
                if child not in previous:
                    previous[child] = node
                    following.append(child)
        frontier = following
    raise AssertionError(f"no cycle through {start} in its component {component}")


def test_cycle_finder_reports_a_cycle():
    """The cycle finder itself: a cycle of three modules and a tail is found as the cycle alone."""
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"a"}}
    assert _strongly_connected(graph) == [["a", "b", "c"]]
    assert _cycle_in(["a", "b", "c"], graph) == ["a", "b", "c", "a"]
    assert _strongly_connected({"a": {"b"}, "b": set()}) == []


def test_imports_inside_functions_count(tmp_path):
    """Imports inside functions and classes are edges, as module-level ones are; ``from pkg import x`` is an edge
    to the module ``pkg.x`` when it is one, else to ``pkg``; relative imports resolve; other packages are no edge."""
    source = tmp_path / "m.py"
    source.write_text("import os\n"
                      "def f():\n    from tokenprune.training import base_models\n"
                      "class C:\n    def g(self):\n        from tokenprune.core.config import PruneConfig\n"
                      "def h():\n    from .loop import train\n    from tokenprune.core import PruneState\n")
    found = dict(_imports("tokenprune.training.m", source, _modules()))
    assert found == {"tokenprune.training.base_models": 3, "tokenprune.core.config": 6,
                     "tokenprune.training.loop": 8, "tokenprune.core": 9}
    graph, _ = _import_graph()
    assert "tokenprune.training.loop" in graph["tokenprune.training.base_models"]


def test_no_import_cycle():
    graph, lines = _import_graph()
    cycles = []
    for component in _strongly_connected(graph):
        cycle = _cycle_in(component, graph)
        steps = ", ".join(f"{a} -> {b} (line {lines[(a, b)]})" for a, b in zip(cycle, cycle[1:]))
        cycles.append(f"{len(component)} modules {component}; e.g. {steps}")
    assert not cycles, f"{len(cycles)} import cycle(s) among tokenprune modules:\n" + _listing(cycles)


def test_only_the_study_and_the_command_line_import_the_study():
    modules = _modules()
    offenders = []
    for module, path in modules.items():
        if module == "tokenprune.study" or module.startswith("tokenprune.study.") or module == "tokenprune.__main__":
            continue
        for target, line in _imports(module, path, modules):
            if target == "tokenprune.study" or target.startswith("tokenprune.study."):
                offenders.append(f"{path.relative_to(ROOT)}:{line}: imports {target}")
    assert not offenders, f"{len(offenders)} import(s) of tokenprune.study from outside it:\n" + _listing(offenders)


# ----------------------------------------------------------------------------------------------
# size of every module of the library
# ----------------------------------------------------------------------------------------------

#: the library's packages by role (core, methods, measure, data, training, study, utils), each tested on its own
ROLE_PACKAGES = sorted(p for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())


def _files_of(group: Path) -> list[Path]:
    """The modules of a role package (its subpackages included), or for the package itself its top-level files."""
    return sorted(group.rglob("*.py")) if group != PACKAGE else sorted(PACKAGE.glob("*.py"))


def test_every_module_belongs_to_a_tested_group():
    tested = {f for g in [PACKAGE, *ROLE_PACKAGES] for f in _files_of(g)}
    assert len(ROLE_PACKAGES) >= 7 and set(PACKAGE.rglob("*.py")) == tested


@pytest.mark.parametrize("package", [PACKAGE, *ROLE_PACKAGES], ids=lambda p: p.name)
def test_modules_are_short(package: Path):
    offenders = []
    for path in _files_of(package):
        lines = path.read_text(encoding="utf-8").splitlines()
        where = path.relative_to(ROOT)
        if len(lines) > MAX_MODULE_LINES:
            offenders.append(f"{where}: {len(lines)} lines (at most {MAX_MODULE_LINES})")
        long = [i for i, line in enumerate(lines, 1) if len(line) > MAX_LINE_CHARS]
        if long:
            offenders.append(f"{where}: {len(long)} line(s) over {MAX_LINE_CHARS} characters, e.g. line "
                             f"{long[0]} ({len(lines[long[0] - 1])}); lines {long[:20]}")
    assert not offenders, f"{len(offenders)} module(s) of tokenprune.{package.name} too long:\n" + _listing(offenders)


# ----------------------------------------------------------------------------------------------
# text of the product
# ----------------------------------------------------------------------------------------------

#: the project's history, which the product does not narrate
HISTORY = re.compile(r"\b(?:issue [0-9]|issue #|pending issue|what changed|round two\b|used to\b)", re.IGNORECASE)
#: where the product's text lies: folders (every text file in them) and single files
PRODUCT_FOLDERS = ("lib", "notebooks", "reports", "tests")
PRODUCT_FILES = (".ci/run", ".ci/README.md", "README.md", "data/README.md", "reports/README.md")
TEXT_SUFFIXES = {".py", ".ipynb", ".md", ".txt", ".yaml", ".yml", ".json", ".csv", ".toml", ".cfg", ".html", ""}
SKIPPED_FOLDERS = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache"}


def _product_files() -> list[Path]:
    """Every text file of the product, each once."""
    files = [path for folder in PRODUCT_FOLDERS for path in sorted((ROOT / folder).rglob("*"))
             if path.is_file() and path.suffix in TEXT_SUFFIXES and not SKIPPED_FOLDERS & set(path.parts)
             and ".egg-info" not in str(path) and path.resolve() != Path(__file__).resolve()]
    files += [ROOT / name for name in PRODUCT_FILES if (ROOT / name).is_file() and ROOT / name not in files]
    return files


def _history_lines(path: Path) -> Iterator[tuple[int, str]]:
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        return
    for i, line in enumerate(text.splitlines(), 1):
        match = HISTORY.search(line)
        if match:
            start = max(0, match.start() - 40)
            yield i, line[start:match.end() + 40].strip()


def test_history_pattern_finds_history():
    """The pattern itself: each phrase of project history is found, ordinary words around them are not."""
    for text in ("see Issue 14", "issue #3", "pending issue", "What changed with", "round two", "it used to be"):
        assert HISTORY.search(text), text
    for text in ("the issue of fusion", "changed the keep rate", "used for", "focused to", "tissue 3", "round 2"):
        assert not HISTORY.search(text), text


def test_no_project_history_in_the_product():
    files = list(_product_files())
    assert any(p.name == "README.md" for p in files) and any(p.suffix == ".ipynb" for p in files)
    offenders = [f"{path.relative_to(ROOT)}:{i}: ...{excerpt}..." for path in files
                 for i, excerpt in _history_lines(path)]
    assert not offenders, (f"{len(offenders)} line(s) of project history in the product (issue numbers, pending "
                           f"work, what changed, round two, used to):\n" + _listing(offenders))


# ----------------------------------------------------------------------------------------------
# notebook prose
# ----------------------------------------------------------------------------------------------

#: a verdict word as a whole word (the report states verdicts, generated from the rules)
VERDICT_WORDS = re.compile(r"\b(not reproduced|reproduced|upheld|rejected|inconsistent|consistent|not supported|"
                           r"supported|inconclusive|not testable here)\b", re.IGNORECASE)
#: a tolerance stated by hand: "within 0.5", "+- 1", "+/- 1", "± 2"
TOLERANCE = re.compile(r"(?:\bwithin\s*±?\s*|\+-\s*|\+/-\s*|±\s*)[0-9][0-9.]*", re.IGNORECASE)
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _markdown_offenders(notebook: dict) -> list[str]:
    offenders = []
    for number, cell in enumerate(notebook["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        for i, line in enumerate(text.splitlines(), 1):
            for kind, pattern in (("verdict", VERDICT_WORDS), ("tolerance", TOLERANCE)):
                for match in pattern.finditer(line):
                    offenders.append(f"cell {number} line {i}: {kind} {match.group(0)!r} in "
                                     f"...{line[max(0, match.start() - 40):match.end() + 40]}...")
    return offenders


def test_markdown_checks_find_verdicts_and_tolerances():
    """The check itself, on a made-up notebook: verdict words and hand-written tolerances in markdown are found,
    code cells and words that merely contain a verdict word are not."""
    cells = [{"cell_type": "markdown", "source": ["The claim is reproduced within 0.5 points.\n", "x ± 2 and +- 1"]},
             {"cell_type": "markdown", "source": "consistently, unsupported, rejection, within reach"},
             {"cell_type": "code", "source": "verdict = 'reproduced'  # within 1"}]
    found = _markdown_offenders({"cells": cells})
    kinds = sorted(entry.split(": ")[1].split(" ")[0] for entry in found)
    assert kinds == ["tolerance"] * 3 + ["verdict"], found
    assert all(entry.startswith("cell 0") for entry in found)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_prose_states_no_verdict_or_tolerance(path):
    offenders = _markdown_offenders(json.loads(path.read_text(encoding="utf-8")))
    assert not offenders, (f"{path.name}: {len(offenders)} verdict word(s) or tolerance(s) in markdown cells:\n"
                           + _listing(offenders))
