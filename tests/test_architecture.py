"""docs/architecture.md against the code: every module has a layer, and imports point one way."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "toolbench_lib"
DOC = ROOT / "docs" / "architecture.md"
# The only modules at the top of the package; everything else lives in a layer's sub-package.
TOP_LEVEL = {"__init__", "__main__", "cli"}


def _section(text: str, title: str) -> str:
    return text.split(title, 1)[1].split("\n#", 1)[0]


def layers() -> dict[str, int]:
    """``{sub-package or top-level module: layer index}`` from the doc's layer table (index 0 = top row)."""
    rows = [line for line in _section(DOC.read_text(), "## Layers").splitlines()
            if line.startswith("| ") and not line.startswith(("| layer", "|---"))]
    return {m: i for i, row in enumerate(rows) for m in re.findall(r"`([\w.]+)`", row.split("|")[2])}


def exceptions() -> set[tuple[str, str]]:
    """``{(importer, imported)}`` listed under the doc's exceptions."""
    out = set()
    for line in _section(DOC.read_text(), "### Exceptions").splitlines():
        m = re.match(r"- `([\w.]+)` → (.+?):", line)
        if m:
            out.update((m[1], target) for target in re.findall(r"`([\w.]+)`", m[2]))
    return out


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
    order = ["data.paths", "llm.parsing", "retrieval.setup", "eval.runs", "pipeline.study", "analysis.judge",
             "cli"]
    assert [_layer(m, table) for m in order] == sorted({_layer(m, table) for m in order})
    known = ("eval.summary", "analysis.judge")
    assert known in imports() and known in upward(imports(), table) and known in exceptions()
    assert upward({("data.dataset", "pipeline.study"), ("pipeline.study", "data.dataset")}, table) == {
        ("data.dataset", "pipeline.study")}
