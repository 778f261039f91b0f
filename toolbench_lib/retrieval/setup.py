"""What every retrieval run depends on: the data, the embedder, the (sub-)registry index and the queries."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..config import DEFAULT_FAMILY, SEED
from ..data.dataset import Dataset
from ..data.queries import query_keys
from .bm25 import BM25Index, term_counts
from .embedding import Embedder, embed_cached
from .families import FAMILIES, check_family
from .index import VectorIndex, build_index
from .rankings import Searcher
from .subregistry import sample_subregistry


@dataclass
class RetrievalSetup:
    """Everything a retrieval run depends on: data, embedder, (sub-)registry index and queries."""

    ds: Dataset
    embedder: Embedder
    index: VectorIndex
    queries: pd.DataFrame
    max_apis: int | None = None
    seed: int = SEED
    provenance: dict = field(default_factory=dict)

    @property
    def api_ids(self) -> list[str]:
        return self.ds.registry["api_id"].tolist()

    @functools.cached_property
    def bm25(self) -> BM25Index:
        """BM25 over the API texts of this setup's (sub-)registry, built once (:func:`~.bm25.term_counts`)."""
        return term_counts([self.ds.texts[int(r)] for r in self.index.rows]).index(ids=self.index.rows)

    def searcher(self, family: str = DEFAULT_FAMILY) -> Searcher:
        """The searcher of a retriever family (a name of :data:`~.families.FAMILIES`)."""
        return FAMILIES[check_family(family)].searcher(self)

    def retriever_provenance(self, families) -> dict:
        """What each family of ``families`` is, for a result's provenance."""
        return {f: FAMILIES[check_family(f)].describe(self) for f in families}

    def encode(self, texts: list[str]) -> np.ndarray:
        """Embeddings of query-side texts, cached on disk by model and text fingerprint."""
        return embed_cached(self.embedder, texts, "queries", progress=len(texts) > 256)


def select_queries(ds: Dataset, subsets: list[str], limit: int | None = None) -> pd.DataFrame:
    """The chosen sets' queries, ``limit`` per set, with a ``qkey`` column."""
    q = pd.concat([ds.subset_queries(s, limit) for s in subsets], ignore_index=True)
    q.insert(0, "qkey", query_keys(q))
    return q


def prepare(ds: Dataset, embedder: Embedder, subsets: list[str], max_apis: int | None = None,
            limit: int | None = None, seed: int = SEED, progress: bool = True) -> RetrievalSetup:
    """Choose queries, sample the sub-registry (keeping every candidate ground-truth API) and index it."""
    queries = select_queries(ds, subsets, limit)
    keep = {a for ids in queries["candidates"] for a in ids}  # every candidate ground-truth API
    rows = sample_subregistry(ds.registry, max_apis, seed, keep) if max_apis else None
    index = build_index(ds, embedder, rows, progress=progress)
    prov = {"model": embedder.name, "model_requested": embedder.fallback_from or embedder.name,
            "embedder_fallback": embedder.fallback_from is not None,
            "embedder_backend": getattr(embedder, "backend", "fp32"), "registry_size": len(index),
            "registry_full_size": len(ds.registry), "data_dir": str(ds.data_dir),
            "data_fingerprint": ds.fingerprint, "sub_registry_seed": seed if max_apis else None,
            "index": "faiss.IndexFlatIP (cosine over L2-normalised vectors)"}
    return RetrievalSetup(ds, embedder, index, queries, max_apis, seed, prov)
