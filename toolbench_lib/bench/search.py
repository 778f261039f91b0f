"""Search benches: exact search (FAISS IndexFlatIP, top-k) against its matmul bound (the query x registry
product), and BM25 beside dense retrieval (index build and the search of the study's queries)."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence

import faiss
import numpy as np

from ..config import DEPTH
from ..retrieval.bm25 import TermCounts
from ..retrieval.index import VectorIndex, search_threads
from .core import BenchLine, best_of, timed


def bench_search(vectors: np.ndarray, queries: np.ndarray, k: int = DEPTH, repeats: int = 3,
                 source: str = "") -> BenchLine:
    """Seconds of FAISS top-``k`` search against seconds of the plain ``queries @ vectors.T`` product."""
    index = VectorIndex(vectors)
    t_search = best_of(lambda: index.search(queries, k), repeats)  # with search_threads()
    all_threads = os.cpu_count() or 1
    faiss.omp_set_num_threads(all_threads)
    t_all = best_of(lambda: index.index.search(queries, k), repeats)
    t_matmul = best_of(lambda: queries @ vectors.T, repeats)
    t_topk = best_of(lambda: np.argpartition(-(queries @ vectors.T), k, axis=1)[:, :k], repeats)
    flops = 2.0 * len(queries) * len(vectors) * vectors.shape[1]
    details = {"vectors": source, "registry": len(vectors), "queries": len(queries), "dim": vectors.shape[1],
               "k": k, "matmul_gflops": round(flops / t_matmul / 1e9, 1),
               "faiss_threads": search_threads(), f"faiss_{all_threads}_threads_s": round(t_all, 3),
               "numpy_matmul_plus_argpartition_s": round(t_topk, 3)}
    return BenchLine("exact search vs matmul bound", "s", "matmul bound", "faiss IndexFlatIP top-k",
                     t_matmul, t_search, better="lower", details=details)


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
