"""The one cached-table helper: named tables kept beside what they were computed from, checksummed."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from .atomic import atomic_path, read_verified, write_checksum

TABLES_VERSION = "1"  # bump when a table's content changes for the same study (stored copies are then unused)


def cached_tables(folder: Path, key: str,
                  make: Callable[[], dict[str, pd.DataFrame]] | None) -> dict[str, pd.DataFrame] | None:
    """Named tables kept as parquet files (each with its sha256) in ``folder/tables-<key>-v<version>/``: read
    when every file holds its checksum, else made by ``make()`` and written, ``index.json`` last (with
    ``make`` None: None, nothing made)."""
    where = folder / f"tables-{key}-v{TABLES_VERSION}"
    try:
        names = json.loads((where / "index.json").read_text())
        blobs = {n: read_verified(where / f"{n}.parquet") for n in names}
        if all(b is not None for b in blobs.values()):  # parsed from the very bytes that were checked
            return {n: pd.read_parquet(io.BytesIO(b)) for n, b in blobs.items()}
    except (OSError, ValueError):
        pass
    if make is None:
        return None
    tables = make()
    where.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        with atomic_path(where / f"{name}.parquet") as tmp:
            table.to_parquet(tmp, index=False)
        write_checksum(where / f"{name}.parquet")
    with atomic_path(where / "index.json") as tmp:
        tmp.write_text(json.dumps(list(tables)))
    return tables
