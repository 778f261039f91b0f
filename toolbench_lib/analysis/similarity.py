"""Query-to-API cosines computed once per study and reused across k, seeds and sub-registries: RtP's
(``rtp``) and, per run, PtR's best cosine over the query's stubs (``ptr[run]``), so top-k over any
sub-registry is a partial sort, never a new search (the texts are those the study encoded, cached)."""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..data.atomic import checksum_problem, save_npy, write_checksum
from ..retrieval.retrievers import ptr_texts

log = logging.getLogger(__name__)

BLOCK_ROWS = 512


@dataclass
class SimilarityCache:
    """Cosine matrices of a study's queries against its index (columns = ``rows``)."""

    qkeys: list[str]
    rows: np.ndarray
    api_ids: np.ndarray
    rtp: np.ndarray
    ptr: dict[int, np.ndarray] = field(default_factory=dict)

    @property
    def n_columns(self) -> int:
        return len(self.rows)

    @property
    def runs(self) -> list[int]:
        return sorted(self.ptr)

    def query_positions(self, qkeys: Sequence[str]) -> np.ndarray:
        """Matrix row of each query key."""
        lookup = {k: i for i, k in enumerate(self.qkeys)}
        return np.array([lookup[k] for k in qkeys], dtype=np.int64)

    def columns_of(self, api_ids: Sequence[str]) -> np.ndarray:
        """Column positions of the given registry ids that are in the index (others are skipped)."""
        wanted = set(api_ids)
        return np.flatnonzero(np.isin(self.api_ids, list(wanted))) if wanted else np.zeros(0, np.int64)


def topk_columns(matrix: np.ndarray, cols: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` (column positions, scores) of each row of ``matrix`` restricted to ``cols``, best first;
    ``k`` is capped at ``len(cols)``; ties are broken by the lower column position."""
    cols = np.asarray(cols, dtype=np.int64)
    n = matrix.shape[0]
    k = min(k, len(cols))
    if k <= 0 or n == 0:
        return np.zeros((n, 0), np.int64), np.zeros((n, 0), np.float32)
    sub = matrix[:, cols]
    part = np.argpartition(-sub, k - 1, axis=1)[:, :k] if k < len(cols) else np.tile(np.arange(k), (n, 1))
    scores = np.take_along_axis(sub, part, axis=1)
    order = np.lexsort((part, -scores), axis=1)
    part = np.take_along_axis(part, order, axis=1)
    return cols[part], np.take_along_axis(scores, order, axis=1)


def max_over_groups(texts_vecs: np.ndarray, group_sizes: Sequence[int], api_vecs: np.ndarray,
                    block_rows: int = BLOCK_ROWS) -> np.ndarray:
    """Per group of consecutive text vectors, the max cosine to every API (groups x APIs, float32), in
    blocks of about ``block_rows`` texts (whole groups) to bound memory."""
    sizes = np.asarray(group_sizes, dtype=np.int64)
    if (sizes <= 0).any():
        raise ValueError("every group needs at least one text")
    out = np.empty((len(sizes), api_vecs.shape[0]), dtype=np.float32)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    g = 0
    while g < len(sizes):
        g_end = g + 1
        while g_end < len(sizes) and starts[g_end + 1] - starts[g] <= block_rows:
            g_end += 1
        block = texts_vecs[starts[g]:starts[g_end]] @ api_vecs.T
        out[g:g_end] = np.maximum.reduceat(block, starts[g:g_end] - starts[g], axis=0)
        g = g_end
    return out


def _fingerprint(*parts: object) -> str:
    blob = b"".join(json.dumps(p, default=str).encode() + b"\x00" for p in parts)
    return hashlib.sha256(blob).hexdigest()[:16]


def _load_or_compute(path: Path | None, compute) -> np.ndarray:
    """The matrix cached at ``path`` when it matches its checksum, else computed (and cached with one)."""
    if path is not None and path.exists():
        problem = checksum_problem(path)
        if problem is None:
            try:
                return np.load(path, allow_pickle=False)
            except (OSError, ValueError, EOFError) as exc:
                problem = f"unreadable ({exc})"
        log.warning("similarity cache %s: %s; computing it again", path, problem)
    m = compute()
    if path is not None:
        save_npy(path, m)
        write_checksum(path)
    return m


def query_similarities(setup, result, cache_dir: Path | None = None, runs: Sequence[int] | None = None,
                       block_rows: int = BLOCK_ROWS) -> SimilarityCache:
    """RtP and per-run PtR cosine matrices of a study's queries against the setup's index; with
    ``cache_dir`` each is stored as ``.npy`` keyed by method, run, embedder, index rows and texts."""
    queries = result.queries
    api_vecs = setup.index.vectors
    rows = np.asarray(setup.index.rows, dtype=np.int64)
    api_ids = setup.ds.registry["api_id"].to_numpy()[rows]
    base = [setup.embedder.name, int(len(rows)), hashlib.sha256(rows.tobytes()).hexdigest()[:16]]

    def path(name: str, texts: list) -> Path | None:
        return cache_dir / f"{name}-{_fingerprint(*base, texts)}.npy" if cache_dir is not None else None

    q_texts = queries["query"].tolist()
    rtp = _load_or_compute(path("rtp", q_texts),
                           lambda: max_over_groups(setup.encode(q_texts), [1] * len(q_texts), api_vecs,
                                                   block_rows))
    all_runs = sorted(int(r) for r in result.stubs["run"].unique()) if len(result.stubs) else []
    ptr: dict[int, np.ndarray] = {}
    for run in all_runs if runs is None else runs:
        texts = ptr_texts(queries, result.stubs, run)
        flat = [t for ts in texts for t in ts]
        ptr[run] = _load_or_compute(
            path(f"ptr-run{run}", texts),
            lambda flat=flat, texts=texts: max_over_groups(setup.encode(flat), [len(t) for t in texts],
                                                           api_vecs, block_rows))
    return SimilarityCache(queries["qkey"].tolist(), rows, api_ids, rtp, ptr)


def similarity_dir(cfg) -> Path:
    """Where a configuration's similarity matrices are stored: next to its study tables."""
    return cfg.out_dir / "runs" / cfg.study_key() / "similarity"
