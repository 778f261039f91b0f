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
    order = ["data.paths", "eval.evaluation", "llm.parsing", "retrieval.setup", "pipeline.study",
             "analysis.judge", "cli"]
    assert [_layer(m, table) for m in order] == sorted({_layer(m, table) for m in order})
    known = ("pipeline.reproduce", "analysis.report")
    assert known in imports() and known in upward(imports(), table) and known in exceptions()
    assert upward({("data.dataset", "pipeline.study"), ("pipeline.study", "data.dataset")}, table) == {
        ("data.dataset", "pipeline.study")}


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
    edges = {("eval.compare", "analysis.judge.pass_rate_table"), ("analysis.judge", "pipeline.study"),
             ("pipeline.study", "eval.compare")}
    assert circles(module_graph(edges)) == [["analysis.judge", "eval.compare", "pipeline.study"]]
    # a long chain (deeper than the recursion limit would allow a recursive search) closing on itself
    chain = {f"m{i}": {f"m{i + 1}"} for i in range(5000)} | {"m5000": {"m0"}}
    assert [len(c) for c in circles(chain)] == [5001]
