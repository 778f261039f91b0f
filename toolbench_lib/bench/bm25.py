"""BM25 (bm25s) beside dense retrieval: index build, cache load and the search of the study's queries."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from ..config import DEPTH
from ..retrieval.bm25 import BM25Index
from .core import BenchLine


def bench_bm25(texts: Sequence[str], queries: Sequence[str], dense_search: Callable[[list[str]], object],
               k: int = DEPTH, source: str = "") -> BenchLine:
    """Seconds to search ``queries`` with BM25 against the dense search (encode + FAISS) of the same queries;
    the details hold BM25's build and cache-load seconds over ``texts``."""
    with tempfile.TemporaryDirectory(prefix="bench-bm25-") as tmp:
        t0 = time.perf_counter()
        index = BM25Index(texts, cache_dir=Path(tmp))
        build = time.perf_counter() - t0
        t0 = time.perf_counter()
        BM25Index(texts, cache_dir=Path(tmp))
        load = time.perf_counter() - t0
    queries = list(queries)
    index.search_texts(queries[:2], k)
    t0 = time.perf_counter()
    hits = index.search_texts(queries, k)
    t_bm25 = time.perf_counter() - t0
    dense_search(queries[:2])
    t0 = time.perf_counter()
    dense_search(queries)
    t_dense = time.perf_counter() - t0
    details = {"registry": source or f"{len(texts)} texts", "apis": len(texts), "queries": len(queries),
               "k": k,
               "bm25_build_s": round(build, 2), "bm25_cache_load_s": round(load, 2),
               "bm25_mean_hits": round(float(np.mean([len(h.rows) for h in hits])), 1)}
    return BenchLine("BM25 vs dense search of the queries", "s", "dense (encode + FAISS)", "BM25 (bm25s)",
                     t_dense, t_bm25, better="lower", details=details)
