"""BM25 over the API texts: bm25s's analyzer and Lucene scores from one term-count matrix."""

from __future__ import annotations

import hashlib
import itertools
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import Stemmer
from scipy import sparse

from .rankings import TextHits

logging.getLogger("bm25s").setLevel(logging.WARNING)


@dataclass(frozen=True)
class BM25Params:
    """The analyzer and the scoring function of a BM25 index."""

    k1: float = 1.5
    b: float = 0.75
    method: str = "lucene"
    stopwords: str = "en"
    stemmer: str = "english"
    splitter: str = r"(?u)\b\w\w+\b"
    lower: bool = True

    def describe(self) -> dict:
        """Provenance: library, analyzer and scoring parameters."""
        import bm25s
        return {"library": f"bm25s {bm25s.__version__} (analyzer; scores equal to its)",
                "tokenizer": f"regex {self.splitter!r}, lower-cased={self.lower}",
                "stopwords": f"bm25s {self.stopwords!r} list",
                "stemmer": f"PyStemmer Snowball {self.stemmer!r}", "scoring": f"BM25 {self.method}",
                "k1": self.k1, "b": self.b}


def tokens(texts: Sequence[str], params: BM25Params = BM25Params()) -> list[list[str]]:
    """Each text as the analyzer's terms (what the index counts)."""
    import bm25s
    stemmer = Stemmer.Stemmer(params.stemmer) if params.stemmer else None
    tokenizer = bm25s.tokenization.Tokenizer(lower=params.lower, splitter=params.splitter,
                                                stopwords=params.stopwords, stemmer=stemmer)
    return tokenizer.tokenize(list(texts), update_vocab=True, return_as="string", show_progress=False)


class TermCounts:
    """A collection's term counts; :meth:`index`: the BM25 index of any rows, with their own statistics."""

    def __init__(self, texts: Sequence[str], params: BM25Params = BM25Params()) -> None:
        self.params = params
        self.vocab: dict[str, int] = {}
        ids = [[self.vocab.setdefault(t, len(self.vocab)) for t in doc] for doc in tokens(texts, params)]
        self.lengths = np.fromiter(map(len, ids), np.int64, len(ids))
        flat = np.fromiter(itertools.chain.from_iterable(ids), np.int64, int(self.lengths.sum()))
        docs = np.repeat(np.arange(len(ids)), self.lengths)
        self.counts = sparse.csr_matrix((np.ones(len(flat), np.float32), (docs, flat)),
                                        shape=(len(ids), len(self.vocab)))  # duplicates summed: tf
        self._query_ids: dict[str, list[int]] = {}

    def query_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's indexed term ids, repeats kept (bm25s adds a repeated query term twice)."""
        new = [t for t in dict.fromkeys(texts) if t not in self._query_ids]
        for text, terms in zip(new, tokens(new, self.params) if new else [], strict=True):
            self._query_ids[text] = [self.vocab[t] for t in terms if t and t in self.vocab]
        return [self._query_ids[t] for t in texts]

    def index(self, rows: np.ndarray | None = None, ids: np.ndarray | None = None) -> BM25Index:
        """The BM25 index of ``rows`` (default all); hits report ``ids`` (default ``rows``), one per row."""
        rows = np.arange(len(self.lengths)) if rows is None else np.asarray(rows, dtype=np.int64)
        return BM25Index(self, rows, rows if ids is None else np.asarray(ids, dtype=np.int64))


_SHARED: dict[tuple[str, BM25Params], TermCounts] = {}  # the last collection counted, by its texts' digest


def term_counts(texts: Sequence[str], params: BM25Params = BM25Params()) -> TermCounts:
    """The term counts of ``texts``: those of the last call when it counted the very same texts (the setups of
    one process over one registry analyse it once)."""
    key = (hashlib.sha256("\x00".join(texts).encode()).hexdigest(), params)
    if key not in _SHARED:
        _SHARED.clear()
        _SHARED[key] = TermCounts(texts, params)
    return _SHARED[key]


class BM25Index:
    """A term-by-document matrix of BM25 weights over some rows of a collection."""

    merge_norm = "min-max"

    def __init__(self, counts: TermCounts, rows: np.ndarray, ids: np.ndarray) -> None:
        if not len(rows):
            raise ValueError("a BM25 index needs at least one text")
        self.counts, self.rows = counts, ids
        k1, b = counts.params.k1, counts.params.b
        sub = counts.counts[rows]
        n, dl = len(rows), counts.lengths[rows]
        df = np.bincount(sub.indices, minlength=sub.shape[1])
        values, inverse = np.unique(df, return_inverse=True)  # bm25s: math.log in float64, kept as float32
        idf = np.array([math.log(1 + (n - int(d) + 0.5) / (int(d) + 0.5)) for d in values],
                       dtype=np.float32)[inverse]
        norm = k1 * ((1 - b) + b * dl / dl.mean())
        tf = sub.data.astype(np.float64)
        tfc = tf / (np.repeat(norm, np.diff(sub.indptr)) + tf)
        weights = (idf[sub.indices].astype(np.float64) * tfc).astype(np.float32)
        self.matrix = sparse.csr_matrix((weights, sub.indices, sub.indptr), shape=sub.shape).tocsc()

    def __len__(self) -> int:
        return len(self.rows)

    def search_texts(self, texts: Sequence[str], k: int) -> list[TextHits]:
        """Top-``k`` hits of each text (``ids``, scores), best first, ties by position."""
        ids, k = self.counts.query_ids(texts), min(k, len(self))
        lengths = np.fromiter(map(len, ids), np.int64, len(ids))
        n = int(lengths.sum())
        terms = sparse.csr_matrix((np.ones(n, np.float32), np.fromiter(itertools.chain.from_iterable(ids),
                                   np.int64, n), np.concatenate([[0], np.cumsum(lengths)])),
                                  shape=(len(ids), self.matrix.shape[1]))
        scores = terms @ self.matrix.T
        out = []
        for i in range(len(ids)):
            span = slice(scores.indptr[i], scores.indptr[i + 1])
            docs, values = scores.indices[span], scores.data[span]
            top = top_rows(values, k, docs)
            out.append(TextHits(self.rows[docs[top]], values[top]))
        return out


def top_rows(scores: np.ndarray, k: int, positions: np.ndarray | None = None) -> np.ndarray:
    """Indices of the ``k`` best positive scores, best first; ties by ``positions`` (default the indices)."""
    at = np.arange(len(scores)) if positions is None else positions
    pos = np.flatnonzero(scores > 0) if k > 0 else np.zeros(0, dtype=np.int64)
    if len(pos) > k:
        kth = np.partition(scores[pos], len(pos) - k)[len(pos) - k]  # the k-th largest positive score
        above, tied = pos[scores[pos] > kth], pos[scores[pos] == kth]
        tied = tied if positions is None else tied[np.argsort(at[tied], kind="stable")]
        pos = np.concatenate([above, tied[:k - len(above)]])
    return pos[np.lexsort((at[pos], -scores[pos]))]
