"""Benchmark: embedding throughput, and search cost on the full registry and on sub-registries.

    python benchmarks/bench_retrieval.py [--model all-MiniLM-L6-v2] [--docs 1000]

Embeds ``--docs`` registry documents without the cache (docs/s), then times exact FAISS search of the
default subsets' queries on the cached full-registry vectors, if present, and on sub-registries built
from those vectors (no re-embedding). Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from toolbench_lib.data.dataset import load_dataset
from toolbench_lib.retrieval.embedding import cached_complete, embed_cached, load_embedder
from toolbench_lib.retrieval.index import VectorIndex
from toolbench_lib.retrieval.subregistry import sample_subregistry


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--docs", type=int, default=1000)
    args = ap.parse_args()
    ds = load_dataset()
    emb = load_embedder(args.model)
    texts = ds.texts[: args.docs]
    t0 = time.perf_counter()
    emb.encode(texts)
    dt = time.perf_counter() - t0
    out = {"model": emb.name, "device": str(emb.model.device), "docs": len(texts),
           "embed_seconds": round(dt, 2), "docs_per_s": round(len(texts) / dt, 1),
           "full_registry_estimate_min": round(len(ds.texts) / (len(texts) / dt) / 60, 1)}
    if cached_complete(emb, ds.texts, "registry"):
        vecs = embed_cached(emb, ds.texts, "registry", progress=False)
        queries = ds.queries[ds.queries["subset"].isin(
            ["G1_instruction", "G2_category_original", "G3_instruction_original"])]
        qv = embed_cached(emb, queries["query"].tolist(), "queries", progress=False)
        t0 = time.perf_counter()
        index = VectorIndex(vecs)
        out["index_build_s"] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()
        index.search(qv, 20)
        out["search_full_s"] = round(time.perf_counter() - t0, 3)
        keep = {a for ids in queries["candidates"] for a in ids}
        for size in (2000, 10000):
            rows = sample_subregistry(ds.registry, size, 0, keep)
            t0 = time.perf_counter()
            VectorIndex(vecs[rows], rows).search(qv, 20)
            out[f"subregistry_{size}_build_and_search_s"] = round(time.perf_counter() - t0, 3)
        t0 = time.perf_counter()
        sims = qv @ vecs.T
        out["similarity_matrix_s"] = round(time.perf_counter() - t0, 3)
        out["similarity_matrix_mb"] = round(sims.nbytes / 2**20, 1)
        t0 = time.perf_counter()
        for size in (1000, 2000, 5000, 10000, 20000):
            cols = np.sort(np.random.default_rng(0).choice(len(ds.texts), size, replace=False))
            np.argpartition(-sims[:, cols], 5, axis=1)[:, :5]
        out["topk_over_5_subregistries_from_matrix_s"] = round(time.perf_counter() - t0, 3)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
