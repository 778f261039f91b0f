"""Exact cosine search: FAISS flat inner product over L2-normalised vectors."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import faiss
import numpy as np

from ..data.dataset import Dataset
from ..data.machine import available_cpus
from .embedding import Embedder, embed_cached

log = logging.getLogger(__name__)


def search_threads() -> int:
    """OpenMP threads of a FAISS search: ``TOOLBENCH_FAISS_THREADS``, else one fewer than the CPUs (>= 1).

    FAISS's OpenMP threads spin at every barrier: with another busy process on a 2-core machine, a search
    of 462 queries over 47,651 vectors took 6.4 s with 2 threads and 1.1 s with 1 (the bare matrix
    product: 1.0 s); see ``python -m toolbench_lib bench``.
    """
    env = os.environ.get("TOOLBENCH_FAISS_THREADS", "").strip()
    if env:
        if not (env.isascii() and env.isdigit()) or not 1 <= int(env) <= 1024:
            raise ValueError(f"TOOLBENCH_FAISS_THREADS={env!r}: a whole number of threads from 1 to 1024, "
                             "or unset for one fewer than the CPUs")
        return int(env)
    cpus = available_cpus()
    return max(cpus - 1, 1)


class VectorIndex:
    """A FAISS ``IndexFlatIP`` whose result positions map back to registry rows.

    ``rows[i]`` is the registry row of the index's i-th vector, so a sub-registry index built from
    rows of the full embedding matrix reports registry rows and never re-embeds anything.
    """

    def __init__(self, vectors: np.ndarray, rows: np.ndarray | None = None) -> None:
        vectors = np.ascontiguousarray(vectors, dtype=np.float32)
        self.rows = np.arange(len(vectors)) if rows is None else np.asarray(rows, dtype=np.int64)
        if len(self.rows) != len(vectors):
            raise ValueError("rows and vectors differ in length")
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

    def subset(self, rows: np.ndarray) -> VectorIndex:
        """An index over the given registry rows (positions in this index's own row space)."""
        lookup = {r: i for i, r in enumerate(self.rows)}
        local = np.array([lookup[int(r)] for r in rows], dtype=np.int64)
        return VectorIndex(self._vectors[local], self.rows[local])


def registry_vectors(ds: Dataset, embedder: Embedder, rows: np.ndarray | None = None,
                     cache_dir: Path | None = None, progress: bool = True) -> np.ndarray:
    """Embeddings of the registry (or of ``rows`` of it) from the content-addressed cache.

    Only texts never embedded with this model and backend are embedded; a sub-registry of an
    embedded registry embeds nothing.
    """
    texts = ds.texts
    if rows is None:
        return embed_cached(embedder, texts, "registry", cache_dir, progress=progress)
    return embed_cached(embedder, [texts[int(r)] for r in rows], "registry", cache_dir, progress=progress)


def build_index(ds: Dataset, embedder: Embedder, rows: np.ndarray | None = None,
                cache_dir: Path | None = None, progress: bool = True) -> VectorIndex:
    """A flat index over the registry or over a sub-registry of it."""
    vecs = registry_vectors(ds, embedder, rows, cache_dir, progress)
    return VectorIndex(vecs, rows)
