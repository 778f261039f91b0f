"""docs/architecture.md against the code: every module has a layer, and imports point one way."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "toolbench_lib"
DOC = ROOT / "docs" / "architecture.md"
# The only modules at the top of the package; everything else lives in a layer's sub-package.
TOP_LEVEL = {"__init__", "__main__", "cli", "config"}


def _section(text: str, title: str) -> str:
    return text.split(title, 1)[1].split("\n#", 1)[0]


def layers() -> dict[str, int]:
    """``{sub-package or top-level module: layer index}`` from the doc's layer table (index 0 = top row)."""
    rows = [line for line in _section(DOC.read_text(), "## Layers").splitlines()
            if line.startswith("| ") and not line.startswith(("| layer", "|---"))]
    return {m: i for i, row in enumerate(rows) for m in re.findall(r"`([\w.]+)`", row.split("|")[2])}


def _listed_edges(title: str) -> set[tuple[str, str]]:
    """``{(importer, imported)}`` of the ``- `a` → `b`: why`` lines of one section of the doc."""
    out = set()
    for line in _section(DOC.read_text(), title).splitlines():
        m = re.match(r"- `([\w.]+)` → (.+?):", line)
        if m:
            out.update((m[1], target) for target in re.findall(r"`([\w.]+)`", m[2]))
    return out


def exceptions() -> set[tuple[str, str]]:
    """``{(importer, imported)}`` listed under the doc's exceptions (imports of a lower layer)."""
    return _listed_edges("### Exceptions")


def circle_exceptions() -> set[tuple[str, str]]:
    """``{(importer, imported)}`` listed under the doc's circles (imports that close an import circle)."""
    return _listed_edges("### Circles")


def _module(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports() -> set[tuple[str, str]]:
    """``{(importer, imported)}`` of every import between the package's modules, at any depth in a file."""
    edges = set()
    for path in PACKAGE.rglob("*.py"):
        mod = _module(path)
        base = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        base = [p for p in base if p]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.level:
                stem = base[: len(base) - (node.level - 1)] + ([node.module] if node.module else [])
                names = [".".join(stem)] if node.module else [".".join([*stem, a.name]) for a in node.names]
                edges.update((mod, n) for n in names if n)
            elif isinstance(node, ast.ImportFrom | ast.Import):
                names = [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
                edges.update((mod, n.removeprefix("toolbench_lib.")) for n in names
                             if n and n.startswith("toolbench_lib."))
    return edges


def module_graph(edges: set[tuple[str, str]] | None = None) -> dict[str, set[str]]:
    """``{module: modules it imports}``: every imported name resolved to the package module that holds
    it (``eval.runs.score_rankings`` -> ``eval.runs``, a sub-package -> its ``__init__``); no self-imports."""
    modules = {_module(p) for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for src, dst in imports() if edges is None else edges:
        while dst not in modules and "." in dst:
            dst = dst.rsplit(".", 1)[0]
        if dst in modules and dst != src:
            graph.setdefault(src, set()).add(dst)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative), each
    sorted; an import circle exists exactly when this is not empty."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
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
                    out.append(sorted(component))
    return sorted(out)


def _layer(mod: str, table: dict[str, int]) -> int | None:
    return table.get(mod.split(".")[0])


def upward(edges: set[tuple[str, str]], table: dict[str, int]) -> set[tuple[str, str]]:
    """The imports of ``edges`` that reach a layer below the importer's."""
    out = set()
    for src, dst in edges:
        ls, ld = _layer(src, table), _layer(dst, table)
        if ls is not None and ld is not None and ld > ls:
            out.add((src, dst))
    return out


def _subpackages() -> set[str]:
    return {p.name for p in PACKAGE.iterdir() if p.is_dir() and any(p.rglob("*.py"))}


def test_every_module_has_a_layer():
    table = layers()
    assert len(set(table.values())) >= 7
    modules = {_module(p) for p in PACKAGE.rglob("*.py")} - {""}
    unplaced = sorted(m for m in modules if _layer(m, table) is None)
    assert not unplaced, f"modules without a layer in docs/architecture.md: {unplaced}"
    named = set(table) - _subpackages() - {p.stem for p in PACKAGE.glob("*.py")}
    assert not named, f"docs/architecture.md names layers' packages that do not exist: {sorted(named)}"


def test_only_the_entry_points_sit_at_the_top_of_the_package():
    stray = sorted(p.name for p in PACKAGE.glob("*.py") if p.stem not in TOP_LEVEL)
    assert not stray, f"modules at the top of toolbench_lib, outside any layer's sub-package: {stray}"
    # setuptools' find_packages ships only folders with an __init__.py (a non-editable install too).
    bare = sorted(str(d.relative_to(PACKAGE)) for d in PACKAGE.rglob("*")
                  if d.is_dir() and d.name != "__pycache__" and any(d.glob("*.py"))
                  and not (d / "__init__.py").exists())
    assert not bare, f"sub-packages without an __init__.py: {bare}"


def test_imports_point_one_way():
    table, allowed = layers(), exceptions()
    found = upward(imports(), table)
    listed = {(s, d) for s, d in found if (s, d) in allowed or (s, d.rsplit(".", 1)[0]) in allowed}
    assert found - listed == set(), "imports of a lower layer's module, not listed in docs/architecture.md"
    stale = {(src, dst) for src, dst in allowed
             if not any(s == src and (d == dst or d.startswith(dst + ".")) for s, d in found)}
    assert not stale, f"exceptions listed in docs/architecture.md that no longer exist: {stale}"


def test_the_check_sees_a_violation():
    table = layers()
    order = ["data.paths", "eval.evaluation", "llm.parsing", "retrieval.setup", "study.result",
             "analysis.judge", "explorer.widget", "report.write", "cli"]
    assert [_layer(m, table) for m in order] == sorted({_layer(m, table) for m in order})
    assert upward({("data.dataset", "study.result"), ("study.result", "data.dataset")}, table) == {
        ("data.dataset", "study.result")}
    assert upward({("explorer.views", "report.write")}, table) == {("explorer.views", "report.write")}


def test_no_import_circles():
    """No module reaches itself through imports (at any depth in a file, inside functions included), apart
    from the edges the doc lists under its circles, each of which must still close one."""
    graph = module_graph()
    listed = circle_exceptions()
    cut = {src: {d for d in dsts if (src, d) not in listed} for src, dsts in graph.items()}
    left = circles(cut)
    assert not left, f"import circles, not listed in docs/architecture.md: {left}"
    in_circle = {m for c in circles(graph) for m in c}
    stale = {(s, d) for s, d in listed if d not in graph.get(s, set()) or s not in in_circle}
    assert not stale, f"circles listed in docs/architecture.md that no longer exist: {stale}"


def test_the_circle_check_sees_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}, "f": {"g"}, "g": {"f"}}
    assert circles(graph) == [["a", "b", "c"], ["f", "g"]]  # a self-import is no circle
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []
    # names resolve to the module that holds them; a function-level import counts like any other
    edges = {("eval.compare", "analysis.judge.pass_rate_table"), ("analysis.judge", "study.result"),
             ("study.result", "eval.compare")}
    assert circles(module_graph(edges)) == [["analysis.judge", "eval.compare", "study.result"]]
    # a long chain (deeper than the recursion limit would allow a recursive search) closing on itself
    chain = {f"m{i}": {f"m{i + 1}"} for i in range(5000)} | {"m5000": {"m0"}}
    assert [len(c) for c in circles(chain)] == [5001]


# -- imports inside functions -------------------------------------------------------------------------------

# The libraries a function may import for itself: each takes a third of a second or more to import (measured
# with `python -X importtime`) or is optional, and `python -m toolbench_lib --help` loads none of them.
HEAVY = ("torch", "sentence_transformers", "transformers", "onnxruntime", "optimum", "llama_cpp", "lightgbm",
         "google.genai", "playwright", "voila", "sklearn", "scipy", "statsmodels", "ranx", "bm25s",
         "nbformat", "nbconvert", "papermill", "matplotlib", "seaborn", "IPython")
MAX_FUNCTION_IMPORTS = 40
# Project modules imported inside a function besides the doc's exceptions, each because importing it loads a
# heavy library (eval imports SciPy, statsmodels and scikit-learn at its top): it moves to the top once that
# module imports its heavy libraries where it uses them.
LAZY_PROJECT = {("cli", "analysis.summary")}


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imported_names(node: ast.Import | ast.ImportFrom, base: list[str]) -> list[str]:
    """Every dotted name an import reaches (``from google import genai``: ``google``, ``google.genai``);
    a project module's name without the ``toolbench_lib.`` prefix."""
    if isinstance(node, ast.Import):
        return [a.name.removeprefix("toolbench_lib.") for a in node.names]
    if node.level:
        stem = ".".join(base[: len(base) - (node.level - 1)] + ([node.module] if node.module else []))
    else:
        stem = (node.module or "").removeprefix("toolbench_lib.")
    return [n for n in [stem, *(f"{stem}.{a.name}" if stem else a.name for a in node.names)] if n]


def function_imports(source: str, module: str = "", is_package: bool = False) -> list[tuple[int, list[str]]]:
    """``(line, names)`` of every import nested in a function (at any depth, methods and nested functions
    included), leaving out those under ``if TYPE_CHECKING:``; a ``try``/``except ImportError`` counts."""
    base = [p for p in (module.split(".") if is_package else module.split(".")[:-1]) if p]
    out: list[tuple[int, list[str]]] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child.test):
                walk(ast.Module(body=child.orelse, type_ignores=[]), in_function)
                continue
            if in_function and isinstance(child, ast.Import | ast.ImportFrom):
                out.append((child.lineno, _imported_names(child, base)))
            walk(child, in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef))

    walk(ast.parse(source), False)
    return out


def _is_heavy(names: list[str]) -> bool:
    return any(n == h or n.startswith(h + ".") for n in names for h in HEAVY)


def _group(path: Path) -> str:
    """The sub-package of a file, or the module's own name at the top of the package (``cli``)."""
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else path.stem


def package_function_imports() -> list[tuple[Path, str, int, list[str]]]:
    """``(file, module, line, names)`` of every import inside a function in the package."""
    out = []
    for path in sorted(PACKAGE.rglob("*.py")):
        mod = _module(path)
        found = function_imports(path.read_text(encoding="utf-8"), mod, path.name == "__init__.py")
        out += [(path, mod, line, names) for line, names in found]
    return out


def _allowed(mod: str, names: list[str], project: set[tuple[str, str]]) -> bool:
    return _is_heavy(names) or any((mod, n) in project or (mod, n.rsplit(".", 1)[0]) in project
                                   for n in names)


def _counts(found) -> dict[str, int]:
    counts: dict[str, int] = {}
    for path, *_ in found:
        counts[_group(path)] = counts.get(_group(path), 0) + 1
    return dict(sorted(counts.items()))


def test_at_most_40_function_imports_in_the_package_each_of_a_heavy_library():
    """A function imports only a heavy library (HEAVY), a lower layer's module the doc lists as an exception,
    or a module of LAZY_PROJECT; everything else is imported at the top of its module, and the whole package
    holds at most MAX_FUNCTION_IMPORTS imports inside functions."""
    found = package_function_imports()
    heavy = [f for f in found if _is_heavy(f[3])]
    print(f"imports inside functions: {len(found)} ({len(heavy)} of heavy libraries) {_counts(found)}")
    allowed = exceptions() | LAZY_PROJECT
    wrong = [f"{path.relative_to(ROOT)}:{line}: {names[0]}" for path, mod, line, names in found
             if not _allowed(mod, names, allowed)]
    assert not wrong, f"imports inside functions that belong at the top of their module: {wrong}"
    assert len(found) <= MAX_FUNCTION_IMPORTS, f"{len(found)} imports inside functions"
    stale = {(m, d) for m, d in LAZY_PROJECT
             if not any(mod == m and any(n == d or n.startswith(d + ".") for n in names)
                        for _, mod, _, names in found)}
    assert not stale, f"LAZY_PROJECT lists imports that are no longer inside a function: {stale}"


def test_the_function_import_check_sees_them():
    source = (
        "import json\n"
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    import torch\n"
        "def f():\n"
        "    import os\n"
        "    from ..data import paths\n"
        "    from google import genai\n"
        "    if TYPE_CHECKING:\n        import lightgbm\n"
        "    try:\n        import llama_cpp\n    except ImportError:\n        pass\n"
        "class C:\n"
        "    def m(self):\n"
        "        def inner():\n            from .ltr import fit\n"
    )
    found = function_imports(source, "retrieval.embedding")
    assert [(line, names[0]) for line, names in found] == [
        (6, "os"), (7, "data"), (8, "google"), (12, "llama_cpp"), (18, "retrieval.ltr")]
    assert [_is_heavy(names) for _, names in found] == [False, False, True, True, False]
    assert found[1][1] == ["data", "data.paths"]


def test_no_sub_package_circles():
    """Imports between sub-packages (and the top-level modules) close no circle."""
    graph: dict[str, set[str]] = {}
    for src, dst in imports():
        a, b = src.split(".")[0], dst.split(".")[0]
        graph.setdefault(a, set())
        if a != b:
            graph[a].add(b)
    found = circles(graph)
    print(f"sub-package circles: {found}")
    assert found == []


MAX_MODULE_LINES = 500


def test_no_module_over_500_lines():
    """Every module of the package holds at most MAX_MODULE_LINES lines; the package's total is printed."""
    sizes = {p.relative_to(ROOT): len(p.read_text(encoding="utf-8").splitlines())
             for p in PACKAGE.rglob("*.py")}
    print(f"toolbench_lib: {sum(sizes.values())} lines in {len(sizes)} modules")
    over = {str(p): n for p, n in sizes.items() if n > MAX_MODULE_LINES}
    assert not over, f"modules over {MAX_MODULE_LINES} lines: {over}"
