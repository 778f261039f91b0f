"""BM25 beside dense retrieval: index build and the search of the study's queries."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

import numpy as np

from ..config import DEPTH
from ..retrieval.bm25 import TermCounts
from .core import BenchLine


def bench_bm25(texts: Sequence[str], queries: Sequence[str], dense_search: Callable[[list[str]], object],
               k: int = DEPTH, source: str = "") -> BenchLine:
    """Seconds to search ``queries`` with BM25 against the dense search (encode + FAISS) of the same queries;
    the details hold BM25's build seconds over ``texts`` (analysing and counting them)."""
    t0 = time.perf_counter()
    index = TermCounts(texts).index()
    build = time.perf_counter() - t0
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
               "bm25_build_s": round(build, 2),
               "bm25_mean_hits": round(float(np.mean([len(h.rows) for h in hits])), 1)}
    return BenchLine("BM25 vs dense search of the queries", "s", "dense (encode + FAISS)", "BM25",
                     t_dense, t_bm25, better="lower", details=details)
