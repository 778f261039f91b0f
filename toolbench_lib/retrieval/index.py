"""Exact cosine search: FAISS flat inner product over L2-normalised vectors."""

from __future__ import annotations

import hashlib
from pathlib import Path

import faiss
import numpy as np

from ..data.dataset import Dataset
from ..data.machine import available_cpus, env_threads
from .embedding import Embedder, embed_cached

SEARCH_DEPTH = 100  # every search goes this deep (a hybrid family's pool): one search serves each family
KEPT_SEARCHES = 4  # the last searched batches kept, so a family searching the same texts reads them


def search_threads() -> int:
    """OpenMP threads of a FAISS search: ``TOOLBENCH_FAISS_THREADS``, else one fewer than the CPUs."""
    threads = env_threads("TOOLBENCH_FAISS_THREADS", "one fewer than the CPUs")
    return threads if threads is not None else max(available_cpus() - 1, 1)


class VectorIndex:
    """A FAISS ``IndexFlatIP`` whose i-th vector is registry row ``rows[i]``."""

    def __init__(self, vectors: np.ndarray, rows: np.ndarray | None = None) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.rows = np.arange(len(vectors)) if rows is None else np.asarray(rows, dtype=np.int64)
        self.index = faiss.IndexFlatIP(vectors.shape[1])
        self.index.add(vectors)
        self._vectors = vectors
        self._kept: dict[tuple, tuple[np.ndarray, np.ndarray]] = {}

    def __len__(self) -> int:
        return self.index.ntotal

    @property
    def dim(self) -> int:
        return self.index.d

    @property
    def vectors(self) -> np.ndarray:
        """The indexed vectors (row i is ``rows[i]``), read-only: a change would not reach the index."""
        view = self._vectors.view()
        view.flags.writeable = False
        return view

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Top-``k`` (scores, registry rows) for each query vector; ``k`` is capped at the index size. Each
        batch is searched :data:`SEARCH_DEPTH` deep once: the same batch again (another family's search of
        the same texts) reads the kept result."""
        k, queries = min(k, len(self)), np.ascontiguousarray(queries, dtype=np.float32)
        key = (hashlib.sha256(queries.tobytes()).hexdigest(), queries.shape)
        if key not in self._kept or self._kept[key][0].shape[1] < k:
            faiss.omp_set_num_threads(search_threads())
            self._kept[key] = self.index.search(queries, min(max(k, SEARCH_DEPTH), len(self)))
            while len(self._kept) > KEPT_SEARCHES:
                self._kept.pop(next(iter(self._kept)))
        scores, pos = self._kept[key]
        return scores[:, :k].copy(), self.rows[pos[:, :k]]


def registry_vectors(ds: Dataset, embedder: Embedder, rows: np.ndarray | None = None,
                     cache_dir: Path | None = None, progress: bool = True) -> np.ndarray:
    """Embeddings of the registry (or of ``rows`` of it) from the cache (embedding only texts it lacks)."""
    texts = ds.texts if rows is None else [ds.texts[int(r)] for r in rows]
    return embed_cached(embedder, texts, "registry", cache_dir, progress=progress)


def build_index(ds: Dataset, embedder: Embedder, rows: np.ndarray | None = None,
                cache_dir: Path | None = None, progress: bool = True) -> VectorIndex:
    """A flat index over the registry or over a sub-registry of it."""
    return VectorIndex(registry_vectors(ds, embedder, rows, cache_dir, progress), rows)
