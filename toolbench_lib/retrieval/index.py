"""Exact cosine search: FAISS flat inner product over L2-normalised vectors."""

from __future__ import annotations

from pathlib import Path

import faiss
import numpy as np

from ..data.dataset import Dataset
from ..data.machine import available_cpus, env_threads
from .embedding import Embedder, embed_cached


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
        """Top-``k`` (scores, registry rows) for each query vector; ``k`` is capped at the index size."""
        k = min(k, len(self))
        faiss.omp_set_num_threads(search_threads())
        scores, pos = self.index.search(np.ascontiguousarray(queries, dtype=np.float32), k)
        return scores, self.rows[pos]


def registry_vectors(ds: Dataset, embedder: Embedder, rows: np.ndarray | None = None,
                     cache_dir: Path | None = None, progress: bool = True) -> np.ndarray:
    """Embeddings of the registry (or of ``rows`` of it) from the cache (embedding only texts it lacks)."""
    texts = ds.texts if rows is None else [ds.texts[int(r)] for r in rows]
    return embed_cached(embedder, texts, "registry", cache_dir, progress=progress)


def build_index(ds: Dataset, embedder: Embedder, rows: np.ndarray | None = None,
                cache_dir: Path | None = None, progress: bool = True) -> VectorIndex:
    """A flat index over the registry or over a sub-registry of it."""
    return VectorIndex(registry_vectors(ds, embedder, rows, cache_dir, progress), rows)
