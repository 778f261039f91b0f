"""Per-text rankings and their merge by each API's best score over a query's texts (:class:`Retrieved`)."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
import pandas as pd

from .index import VectorIndex


@dataclass
class TextHits:
    """One text's ranked hits: registry rows and cosine scores, best first."""

    rows: np.ndarray
    scores: np.ndarray


def merge_max(hits: Sequence[TextHits], k: int) -> TextHits:
    """The texts' hits by each API's best score, top ``k``; ties in order of first appearance."""
    best: dict[int, float] = {}
    for h in hits:
        for r, s in zip(h.rows.tolist(), h.scores.tolist(), strict=True):
            if r not in best or s > best[r]:
                best[r] = s
    order = sorted(best, key=lambda r: -best[r])[:k]
    return TextHits(np.array(order, dtype=np.int64), np.array([best[r] for r in order], dtype=np.float32))


RANKING_COLUMNS = ["qkey", "method", "rank", "row", "api_id", "score"]  # a query's final ranking
TEXT_RANKING_COLUMNS = ["qkey", "method", "text_idx", "rank", "row", "api_id", "score"]  # one text's own


@dataclass
class Retrieved:
    """One method's rankings of a run's queries: ``final`` and each searched text's own (``texts``)."""

    final: pd.DataFrame
    texts: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=TEXT_RANKING_COLUMNS))


def ranked_frame(keys: Sequence[str], method: str, ranked: Mapping[str, Mapping[str, float]],
                 api_ids: Sequence[str]) -> pd.DataFrame:
    """The final rankings ``{qkey: {api_id: score}}`` of ``keys`` as a :data:`RANKING_COLUMNS` table."""
    row_of = {a: i for i, a in enumerate(api_ids)}
    recs = [(key, method, rank, row_of[a], a, float(s))
            for key in keys for rank, (a, s) in enumerate(ranked.get(key, {}).items(), 1)]
    return pd.DataFrame(recs, columns=RANKING_COLUMNS)


def retrieved_frames(keys: Sequence[str], method: str, per_query: Sequence[Sequence[TextHits]],
                     merged: Sequence[TextHits], api_ids: Sequence[str]) -> Retrieved:
    """Every query's merged ranking and every text's own hits as tables (:class:`Retrieved`)."""
    def ranked(h: TextHits) -> list[tuple]:
        return [(rank, r, api_ids[r], s)
                for rank, (r, s) in enumerate(zip(h.rows.tolist(), h.scores.tolist(), strict=True), 1)]

    finals, texts = [], []
    for key, own, final in zip(keys, per_query, merged, strict=True):
        texts += [(key, method, t, *x) for t, h in enumerate(own) for x in ranked(h)]
        finals += [(key, method, *x) for x in ranked(final)]
    return Retrieved(pd.DataFrame(finals, columns=RANKING_COLUMNS),
                     pd.DataFrame(texts, columns=TEXT_RANKING_COLUMNS))


class Searcher(Protocol):
    """A retriever family: searches texts over the registry (dense, BM25, hybrid)."""

    def search_texts(self, texts: Sequence[str], k: int) -> list[TextHits]: ...


class DenseSearcher:
    """Cosine over the FAISS index: ``encode`` maps texts to L2-normalised vectors (one batch)."""

    def __init__(self, index: VectorIndex, encode: Callable[[list[str]], np.ndarray]) -> None:
        self.index, self.encode = index, encode

    def search_texts(self, texts: Sequence[str], k: int) -> list[TextHits]:
        if not texts:
            return []
        scores, rows = self.index.search(self.encode(list(texts)), k)
        return [TextHits(r, s) for r, s in zip(rows, scores, strict=True)]


def search_and_merge(searcher: Searcher, texts_per_query: Sequence[Sequence[str]], k: int,
                     depth: int | None = None) -> tuple[list[list[TextHits]], list[TextHits]]:
    """Search every text of every query in one batch and merge each query's texts by best score."""
    flat = [t for texts in texts_per_query for t in texts]
    all_hits = searcher.search_texts(flat, depth or k) if flat else []
    norm = min_max_hits if getattr(searcher, "merge_norm", None) == "min-max" else (lambda h: h)
    ends = itertools.accumulate(len(texts) for texts in texts_per_query)
    per_query = [all_hits[end - len(texts):end] for texts, end in zip(texts_per_query, ends, strict=True)]
    return per_query, [merge_max([norm(h) for h in hits], k) for hits in per_query]


def min_max_hits(hits: TextHits) -> TextHits:
    """One text's hits min-max normalised; hits that all score alike score 1 (ranx: 0, silencing a stub)."""
    if len(hits.scores) == 0:
        return hits
    lo, hi = float(hits.scores.min()), float(hits.scores.max())
    if hi - lo <= 1e-9:
        return TextHits(hits.rows, np.ones_like(hits.scores, dtype=np.float32))
    return TextHits(hits.rows, ((hits.scores - lo) / (hi - lo)).astype(np.float32))
