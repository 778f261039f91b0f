"""BM25 beside dense retrieval: index build and the search of the study's queries."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..config import DEPTH
from ..retrieval.bm25 import TermCounts
from .core import BenchLine, timed


def bench_bm25(texts: Sequence[str], queries: Sequence[str], dense_search: Callable[[list[str]], object],
               k: int = DEPTH, source: str = "") -> BenchLine:
    """Seconds to search ``queries`` with BM25 against the dense search (encode + FAISS) of the same queries;
    the details hold BM25's build seconds over ``texts`` (analysing and counting them)."""
    index, build = timed(lambda: TermCounts(texts).index())
    queries = list(queries)
    index.search_texts(queries[:2], k)
    hits, t_bm25 = timed(index.search_texts, queries, k)
    dense_search(queries[:2])
    t_dense = timed(dense_search, queries)[1]
    details = {"registry": source or f"{len(texts)} texts", "apis": len(texts), "queries": len(queries),
               "k": k, "bm25_build_s": round(build, 2),
               "bm25_mean_hits": round(float(np.mean([len(h.rows) for h in hits])), 1)}
    return BenchLine("BM25 vs dense search of the queries", "s", "dense (encode + FAISS)", "BM25",
                     t_dense, t_bm25, better="lower", details=details)
