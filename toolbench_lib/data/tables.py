"""Named tables cached beside their inputs, checksummed and keyed by the code computing them."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import re
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from .atomic import atomic_path, compute_once, read_verified, save_text, write_checksum

TABLES_VERSION = "1"  # bump when a table's content changes for the same study (stored copies are then unused)
PACKAGE = Path(__file__).resolve().parents[1]


@functools.cache
def code_hash(*parts: str) -> str:
    """sha256 (16 hex digits) of the package's code, of ``parts`` (e.g. ``"retrieval"``, ``"config.py"``)
    or of every module; what caches are keyed by so a code change is never served stale."""
    h = hashlib.sha256()
    roots = [PACKAGE / p for p in parts] if parts else [PACKAGE]
    files = sorted({f for r in roots for f in ([r] if r.is_file() else r.rglob("*.py"))
                    if "__pycache__" not in f.parts})
    for f in files:
        h.update(str(f.relative_to(PACKAGE)).encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


RELATIVE_IMPORT = re.compile(r"^\s*from (\.+)([\w.]*) import (\([^)]*\)|[^\n]*)", re.MULTILINE)


@functools.cache
def code_closure(*modules: str) -> tuple[str, ...]:
    """``modules`` (package paths) and every package module they import, transitively."""
    todo, seen = [PACKAGE / m for m in modules], set()
    while todo:
        path = todo.pop()
        if path in seen:
            continue
        seen.add(path)
        for dots, module, names in RELATIVE_IMPORT.findall(path.read_text()):
            stem = path.parents[len(dots) - 1].joinpath(*module.split("."))
            named = [stem / f"{n.split()[0]}.py" for n in names.strip("()").split(",") if n.strip()]
            todo += [f for f in (stem.with_suffix(".py"), stem / "__init__.py", *named) if f.is_file()]
    return tuple(sorted(str(f.relative_to(PACKAGE)) for f in seen))


def _read_tables(where: Path) -> dict[str, pd.DataFrame] | None:
    with contextlib.suppress(OSError, ValueError):
        names = json.loads((where / "index.json").read_text())
        blobs = {n: read_verified(where / f"{n}.parquet") for n in names}
        if all(b is not None for b in blobs.values()):  # parsed from the very bytes that were checked
            return {n: pd.read_parquet(io.BytesIO(b)) for n, b in blobs.items()}
    return None


def cached_tables(folder: Path, key: str, make: Callable[[], dict[str, pd.DataFrame]] | None,
                  code: str | None = None) -> dict[str, pd.DataFrame] | None:
    """Named tables kept as checksummed parquet in ``folder/tables-<key>-<code>/`` (keyed by the code of
    module ``code`` and its imports, else the package): read when they verify, else made by ``make()``."""
    where = folder / f"tables-{key}-v{TABLES_VERSION}-{code_hash(*code_closure(code) if code else ())}"
    if make is None:
        return _read_tables(where)

    def made() -> dict[str, pd.DataFrame]:
        tables = make()
        for name, table in tables.items():
            with atomic_path(where / f"{name}.parquet") as tmp:
                table.to_parquet(tmp, index=False)
            write_checksum(where / f"{name}.parquet")
        save_text(where / "index.json", json.dumps(list(tables)))
        return tables

    return compute_once(where, lambda: _read_tables(where), made)
