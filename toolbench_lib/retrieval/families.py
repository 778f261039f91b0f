"""The retriever families (:data:`FAMILIES`): ``dense``, ``bm25``, ``hybrid`` and ``hybrid-rrf``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .bm25 import BM25Params
from .fuse import combine, top
from .rankings import DenseSearcher, Searcher, TextHits

HYBRID_POOL = 100  # hits of each family a hybrid fuses per text


@dataclass(frozen=True)
class HybridSpec:
    """How a hybrid family fuses dense and BM25 rankings (as ``ranx.fuse(method=..., norm=...)``)."""

    method: str = "wsum"
    norm: str | None = "min-max"
    weights: tuple[float, float] = (0.5, 0.5)  # dense, BM25
    pool: int = HYBRID_POOL

    def describe(self) -> str:
        if self.method == "rrf":
            return f"RRF (k = 60) of the dense and BM25 top {self.pool}"
        return (f"{self.method} of {self.norm or 'raw'} scores, dense {self.weights[0]:g} + "
                f"BM25 {self.weights[1]:g}, over each family's top {self.pool}")


HYBRIDS = {"hybrid": HybridSpec(), "hybrid-rrf": HybridSpec(method="rrf", norm=None)}


@dataclass(frozen=True)
class Family:
    """A retriever family: the searcher it gives a :class:`~.setup.RetrievalSetup`, and its provenance."""

    name: str
    searcher: Callable[[Any], Searcher]
    describe: Callable[[Any], str | dict]


def _hybrid(name: str) -> Family:
    spec = HYBRIDS[name]
    return Family(name, lambda s: HybridSearcher(s.searcher("dense"), s.bm25, spec),
                  lambda s: {"fusion": spec.describe(), "bm25": BM25Params().describe()})


FAMILIES: dict[str, Family] = {
    "dense": Family("dense", lambda s: DenseSearcher(s.index, s.encode),
                    lambda s: f"cosine, {s.provenance.get('index', 'FAISS flat index')}"),
    "bm25": Family("bm25", lambda s: s.bm25, lambda s: BM25Params().describe()),
    **{name: _hybrid(name) for name in HYBRIDS},
}


def check_family(name: str) -> str:
    """A retriever family's name, checked (``ValueError`` naming the known ones otherwise)."""
    if name not in FAMILIES:
        raise ValueError(f"unknown retriever {name!r}; choose from {', '.join(FAMILIES)}")
    return name


class HybridSearcher:
    """Each text searched by both families, their rankings fused per text."""

    def __init__(self, dense: Searcher, bm25: Searcher, spec: HybridSpec = HybridSpec()) -> None:
        self.dense, self.bm25, self.spec = dense, bm25, spec

    def search_texts(self, texts: Sequence[str], k: int) -> list[TextHits]:
        pool = max(self.spec.pool, k)
        dense, sparse = self.dense.search_texts(texts, pool), self.bm25.search_texts(texts, pool)
        weights = None if self.spec.method == "rrf" else list(self.spec.weights)
        out = []
        for d, b in zip(dense, sparse, strict=True):
            runs = [list(zip(h.rows.tolist(), h.scores.tolist(), strict=True)) for h in (d, b)]
            fused = combine(runs, self.spec.method, self.spec.norm, weights)
            best = top(fused, k)
            out.append(TextHits(np.array(best, dtype=np.int64),
                                np.array([fused[r] for r in best], dtype=np.float32)))
        return out
