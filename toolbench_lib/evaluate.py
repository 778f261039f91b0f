"""Evaluation of retrieval methods on query sets: the ``evaluate`` command's engine."""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .dataset import Dataset
from .embedding import Embedder, embed_cached
from .index import VectorIndex, build_index
from .metrics import mean_metrics, per_query_metrics
from .queries import DEFAULT_GT, check_gt, query_keys, resolve_subset
from .retrieval import hits_frame, retrieve_multi
from .subregistry import sample_subregistry

log = logging.getLogger(__name__)


@dataclass
class RetrievalSetup:
    """Everything a retrieval run depends on: data, embedder, (sub-)registry index and queries."""

    ds: Dataset
    embedder: Embedder
    index: VectorIndex
    queries: pd.DataFrame
    max_apis: int | None = None
    seed: int = 0
    provenance: dict = field(default_factory=dict)

    @property
    def api_ids(self) -> list[str]:
        return self.ds.registry["api_id"].tolist()

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embeddings of query-side texts, cached on disk by model and text fingerprint."""
        return embed_cached(self.embedder, texts, "queries", progress=len(texts) > 256)


def select_queries(ds: Dataset, subsets: list[str], limit: int | None = None) -> pd.DataFrame:
    """The chosen sets' queries, ``limit`` per set, with a ``qkey`` column."""
    frames = [ds.subset_queries(s, limit) for s in subsets]
    q = pd.concat(frames, ignore_index=True)
    q.insert(0, "qkey", query_keys(q))
    return q


def prepare(ds: Dataset, embedder: Embedder, subsets: list[str], max_apis: int | None = None,
            limit: int | None = None, seed: int = 0, progress: bool = True) -> RetrievalSetup:
    """Choose queries, sample the sub-registry (keeping every candidate ground-truth API) and index it."""
    queries = select_queries(ds, subsets, limit)
    rows = None
    if max_apis:
        keep = {a for ids in queries["candidates"] for a in ids}
        rows = sample_subregistry(ds.registry, max_apis, seed, keep)
    index = build_index(ds, embedder, rows, progress=progress)
    prov = {
        "model": embedder.name,
        "model_requested": embedder.fallback_from or embedder.name,
        "embedder_fallback": embedder.fallback_from is not None,
        "registry_size": len(index),
        "registry_full_size": len(ds.registry),
        "data_dir": str(ds.data_dir),
        "data_fingerprint": ds.fingerprint,
        "sub_registry_seed": seed if max_apis else None,
        "index": "faiss.IndexFlatIP (cosine over L2-normalised vectors)",
    }
    return RetrievalSetup(ds, embedder, index, queries, max_apis, seed, prov)


def run_rtp(setup: RetrievalSetup, k: int) -> pd.DataFrame:
    """Retrieve-then-Plan retrieval: the raw query is the one text searched."""
    texts = [[q] for q in setup.queries["query"]]
    per_query, merged = retrieve_multi(setup.index, texts, setup.encode, k)
    return hits_frame(setup.queries["qkey"].tolist(), "rtp", per_query, merged, setup.api_ids)


def ranked_lists(hits: pd.DataFrame) -> dict[str, list[str]]:
    """``{qkey: [api_id, ...]}`` of the merged rankings in a hits table."""
    final = hits[hits["text_idx"] == -1].sort_values(["qkey", "rank"])
    return final.groupby("qkey", sort=False)["api_id"].apply(list).to_dict()


def score_hits(setup: RetrievalSetup, hits: pd.DataFrame, k: int, gt: str = DEFAULT_GT) -> pd.DataFrame:
    """Per-query recall and precision at ``k`` with the subset of each query."""
    check_gt(gt)
    q = setup.queries
    qrels = {key: set(ids) for key, ids in zip(q["qkey"], q[gt], strict=True)}
    pq = per_query_metrics(ranked_lists(hits), qrels, k)
    return pq.merge(q[["qkey", "subset"]], on="qkey")


def summarise(setup: RetrievalSetup, per_query: pd.DataFrame, subsets: list[str], k: int, gt: str,
              method: str) -> dict:
    """The ``evaluate --json`` object for one method."""
    out = {"method": method, **setup.provenance, "k": k, "gt": gt, "subsets": {}}
    for name in subsets:
        part = per_query[per_query["subset"] == resolve_subset(name)]
        out["subsets"][name] = {"subset": resolve_subset(name), "n_queries": int(len(part)),
                                **mean_metrics(part)}
    return out


def evaluate_rtp(ds: Dataset, embedder: Embedder, subsets: list[str], k: int = 5, gt: str = DEFAULT_GT,
                 max_apis: int | None = None, limit: int | None = None, seed: int = 0) -> dict:
    """Evaluate RtP on the chosen sets and return the result object."""
    setup = prepare(ds, embedder, subsets, max_apis, limit, seed)
    hits = run_rtp(setup, k)
    return summarise(setup, score_hits(setup, hits, k, gt), subsets, k, gt, "rtp")
