"""The processed dataset: merged registry plus query sets, cached as parquet by the sources' content."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from .atomic import atomic_path, clean_stale_temps, file_sha256, save_text
from .paths import PROCESSED_DIR, find_data_dir
from .queries import (
    available_sets,
    external_sets,
    load_queries,
    query_set_path,
    resolve_subset,
    user_set_files,
)
from .registry import api_text, merge_registry

log = logging.getLogger(__name__)

# Bump when the merge, the resolution or the document text changes.
PROCESSING_VERSION = "1"
CACHED_FILES = ("registry.parquet", "queries.parquet", "stats.json")
CHECKSUMS = "checksums.json"  # sha256 of each cached file, written last: a complete, verifiable cache
SOURCE_GLOBS = ("toolenv/tools/*/*.json", "toolenv_2023/tools/*/*.json", "test_instruction/*.json",
                "test_instruction_original/*.json", "retrieval_corpus/*.jsonl")  # what the data is built from


def sources_fingerprint(data_dir: Path, external: Mapping[str, Path] | None = None,
                        processed_dir: Path | None = None) -> str:
    """sha256 over the path and content of every source file and of the query files given apart."""
    data_dir = Path(data_dir)
    cache = _HashCache(processed_dir or PROCESSED_DIR, data_dir)
    h = hashlib.sha256(PROCESSING_VERSION.encode())
    for p in sorted(f for pattern in SOURCE_GLOBS for f in data_dir.glob(pattern)):
        rel = str(p.relative_to(data_dir))
        h.update(f"{rel}|{cache.digest(p, rel)}\n".encode())
    for name, p in sorted((external or {}).items()):
        h.update(f"queries:{name}={p}|{cache.digest(p, f'external:{p}')}\n".encode())
    cache.save()
    return h.hexdigest()[:16]


class _HashCache:
    """Content hashes of a data folder's files keyed by ``(inode, size, mtime, ctime)``: a speed-up only
    (a file modified within a second of its hashing is hashed again)."""

    def __init__(self, processed_dir: Path, data_dir: Path) -> None:
        key = hashlib.sha256(str(data_dir.resolve()).encode()).hexdigest()[:12]
        self.path = Path(processed_dir) / f"source-hashes-{key}.json"
        try:
            saved = json.loads(self.path.read_text())
            self.files, self.hashed_at = dict(saved["files"]), int(saved["hashed_at_ns"])
        except (OSError, ValueError, KeyError, TypeError):  # none yet, or damaged: hash everything
            self.files, self.hashed_at = {}, 0
        self.now = time.time_ns()
        self.fresh: dict[str, list] = {}

    def digest(self, path: Path, rel: str) -> str:
        st = path.stat()
        key = [st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns]
        old = self.files.get(rel)
        racy = max(st.st_mtime_ns, st.st_ctime_ns) >= self.hashed_at - 1_000_000_000
        if isinstance(old, list) and len(old) == 5 and old[:4] == key and not racy:
            digest = str(old[4])
        else:
            digest = file_sha256(path)
        self.fresh[rel] = [*key, digest]
        return digest

    def save(self) -> None:
        if self.fresh == self.files:
            return
        with contextlib.suppress(OSError):  # a read-only processed folder: hash again next time
            save_text(self.path, json.dumps({"hashed_at_ns": self.now, "files": self.fresh}))


@dataclass
class Dataset:
    """Registry, queries and the provenance of both."""

    data_dir: Path
    fingerprint: str
    registry: pd.DataFrame
    queries: pd.DataFrame
    stats: dict = field(default_factory=dict)

    @functools.cached_property
    def texts(self) -> list[str]:
        """Embedding text of every registry API, in registry order."""
        return self.registry["doc_text"].tolist()

    def subset_queries(self, subset: str, limit: int | None = None) -> pd.DataFrame:
        users = [*user_set_files(self.data_dir), *self.stats.get("query_files", {})]
        name = resolve_subset(subset, users)  # an unknown name: one line listing the known sets
        q = self.queries[self.queries["subset"] == name]
        if q.empty:
            where = self.stats.get("query_files", {}).get(name) or query_set_path(self.data_dir, name)
            raise ValueError(f"query set {name} has no queries in this data folder ({where} is missing or "
                             "empty)")
        return q.head(limit) if limit else q


def _read_cache(root: Path, fp: str, out: Path) -> Dataset | None:
    """The cached dataset of ``out`` when every file matches its checksum and loads (the bytes checked are the
    bytes parsed), else None (the reason is logged)."""
    try:
        expected = dict(json.loads((out / CHECKSUMS).read_text()))  # not a mapping: a TypeError or ValueError
        data = {name: (out / name).read_bytes() for name in CACHED_FILES}
        if bad := [n for n, b in data.items() if hashlib.sha256(b).hexdigest() != expected.get(n)]:
            problem = f"{bad[0]} does not match its checksum"
        else:
            return Dataset(root, fp, pd.read_parquet(io.BytesIO(data["registry.parquet"])),
                           pd.read_parquet(io.BytesIO(data["queries.parquet"])), json.loads(data["stats.json"]))
    except (OSError, ValueError, TypeError) as exc:  # missing or unreadable (pyarrow's errors are ValueErrors)
        problem = f"missing or unreadable ({type(exc).__name__}: {exc})"
    if (out / CHECKSUMS).exists() or any((out / n).exists() for n in CACHED_FILES):
        log.warning("processed dataset cache %s: %s; rebuilding it", out, problem)
    return None


def load_dataset(data_dir: str | os.PathLike | None = None, processed_dir: Path | None = None,
                 rebuild: bool = False, query_files: Sequence[str | os.PathLike] = ()) -> Dataset:
    """The processed dataset, built and cached when the sources changed; ``query_files`` (``--queries``)
    are query sets named after their stems whose ``api_list`` docs join the registry."""
    root = find_data_dir(data_dir)
    external = external_sets(root, query_files)
    fp = sources_fingerprint(root, external, processed_dir)
    out = (processed_dir or PROCESSED_DIR) / fp
    clean_stale_temps(out)
    cached = None if rebuild else _read_cache(root, fp, out)
    if cached is not None:
        log.info("processed dataset %s from %s", fp, out)
        for rel in cached.stats.get("malformed_file_paths", []):  # keyed by content: named under this folder
            log.warning("skipping malformed source file %s (as when the processed data was built)",
                        root / rel)
        return cached
    log.info("building processed dataset %s from %s", fp, root)
    registry, merge_stats = merge_registry(root, external.values())
    registry["doc_text"] = [api_text(r) for r in registry.to_dict("records")]
    queries = load_queries(root, available_sets(root) + list(external), registry, external)
    stats = {"data_dir": str(root), "fingerprint": fp,
             "query_files": {name: str(p) for name, p in external.items()},
             "tool_files_read": merge_stats.files_read, "malformed_files": len(merge_stats.malformed_files),
             "malformed_file_paths": [os.path.relpath(p, root) for p in merge_stats.malformed_files[:50]],
             "duplicate_api_names_skipped": merge_stats.duplicate_api_names,
             "added_by_source": merge_stats.added, "skipped_existing_by_source": merge_stats.skipped_existing}
    for df, name in ((registry, "registry.parquet"), (queries, "queries.parquet")):
        with atomic_path(out / name) as tmp:
            df.to_parquet(tmp, index=False)
    save_text(out / "stats.json", json.dumps(stats, indent=2))
    save_text(out / CHECKSUMS, json.dumps({name: file_sha256(out / name) for name in CACHED_FILES}, indent=2))
    return Dataset(root, fp, registry, queries, stats)


def summary(ds: Dataset) -> dict:
    """Counts of the registry, the query sets and the ground truth (``data summary --json``)."""
    reg, q = ds.registry, ds.queries
    unres_c, unres_r = int(q["unresolved_candidates"].sum()), int(q["unresolved_relevant"].sum())
    by_subset = q.groupby("subset")
    mean_sizes = q[["candidates", "relevant"]].map(len).groupby(q["subset"]).mean()
    return {
        "data_dir": str(ds.data_dir), "fingerprint": ds.fingerprint, "apis": int(len(reg)),
        "tools": int(reg.groupby(["category", "tool_key"]).ngroups),
        "categories": int(reg["category"].nunique()),
        "apis_by_source": reg["source"].value_counts().to_dict(),
        "malformed_files": ds.stats.get("malformed_files", 0),
        "subsets": {k: int(v) for k, v in by_subset.size().items()},
        "gt_pairs": int(q["n_candidate_pairs"].sum()), "gt_pairs_relevant": int(q["n_relevant_pairs"].sum()),
        "unresolved_gt_pairs": unres_c + unres_r,
        "unresolved_gt_pairs_by_definition": {"candidates": unres_c, "relevant": unres_r},
        "unresolved_gt_pairs_by_subset": {s: int(v) for s, v in by_subset[
            ["unresolved_candidates", "unresolved_relevant"]].sum().sum(axis=1).items()},
        "query_files": ds.stats.get("query_files", {}),
        "mean_gt_size": {gt: {s: round(float(v), 3) for s, v in mean_sizes[gt].items()} for gt in mean_sizes},
    }
