"""BM25 over the registry's API texts (``bm25s``), cached on disk by content.

The index covers exactly the texts the dense index embeds (``Dataset.texts``, or the rows of a
sub-registry: BM25's statistics depend on the collection, so a sub-registry is an index of its own). The
analyzer is bm25s's: lower-cased ``\\w\\w+`` tokens, bm25s's English stopword list, PyStemmer's Snowball
English stemmer; scoring is Lucene's BM25 (``k1 = 1.5``, ``b = 0.75``). :meth:`BM25Params.describe` is what
provenance records.

A cached index lives under ``data/cache/bm25/<key>/``, ``key`` a sha256 of the texts and the parameters;
its files carry sha256 checksums, and a folder whose files fail them is rebuilt, never used. ``bm25s`` is
imported on first use (:func:`_bm25s`): importing it takes about half a second, which the command line's
start-up does not pay.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import math
import os
import shutil
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import numpy as np
import Stemmer
from scipy import sparse

from ..data.atomic import clean_stale_temps, file_sha256
from ..data.paths import CACHE_DIR
from .rankings import TextHits

if TYPE_CHECKING:
    import bm25s

log = logging.getLogger(__name__)
logging.getLogger("bm25s").setLevel(logging.WARNING)  # its index build logs at DEBUG

CHECKSUMS = "checksums.json"


def _bm25s() -> ModuleType:
    """The ``bm25s`` module, imported on first use."""
    import bm25s

    return bm25s


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
        return {"library": f"bm25s {_bm25s().__version__}", "tokenizer": f"regex {self.splitter!r}, "
                f"lower-cased={self.lower}", "stopwords": f"bm25s {self.stopwords!r} list",
                "stemmer": f"PyStemmer Snowball {self.stemmer!r}", "scoring": f"BM25 {self.method}",
                "k1": self.k1, "b": self.b}


def _tokenizer(params: BM25Params) -> bm25s.tokenization.Tokenizer:
    stemmer = Stemmer.Stemmer(params.stemmer) if params.stemmer else None
    return _bm25s().tokenization.Tokenizer(lower=params.lower, splitter=params.splitter,
                                           stopwords=params.stopwords, stemmer=stemmer)


def tokens(texts: Sequence[str], params: BM25Params = BM25Params()) -> list[list[str]]:
    """Each text as the analyzer's terms (what the index counts)."""
    return _tokenizer(params).tokenize(list(texts), update_vocab=True, return_as="string",
                                       show_progress=False)


def content_key(texts: Sequence[str], params: BM25Params) -> str:
    """sha256 of the parameters and of every text in order (the cache folder's name)."""
    h = hashlib.sha256(json.dumps(asdict(params), sort_keys=True).encode())
    h.update(_bm25s().__version__.encode())
    for t in texts:
        h.update(hashlib.sha256(t.encode("utf-8", "surrogatepass")).digest())
    return h.hexdigest()[:32]


def _write_checksums(folder: Path) -> None:
    sums = {p.name: file_sha256(p) for p in sorted(folder.iterdir()) if p.name != CHECKSUMS}
    (folder / CHECKSUMS).write_text(json.dumps(sums, indent=1))


def checksum_problem(folder: Path) -> str | None:
    """Why a cached index folder may not be used (``None`` when every file matches its checksum)."""
    try:
        sums = json.loads((folder / CHECKSUMS).read_text())
    except (OSError, ValueError) as exc:
        return f"no readable {CHECKSUMS} ({type(exc).__name__})"
    if not isinstance(sums, dict) or not sums:
        return "an empty checksum list"
    present = {p.name for p in folder.iterdir() if p.name != CHECKSUMS}
    unlisted = sorted(present - set(sums))
    if unlisted:  # every file the cache reads must be covered: an unlisted one is a damaged cache
        return f"{unlisted[0]} is not in {CHECKSUMS}"
    for name, digest in sums.items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if file_sha256(path) != digest:
            return f"{name} does not match its checksum"
    return None


class BM25Index:
    """A BM25 index over ``texts``; hits report registry ``rows`` (default ``0..n-1``).

    BM25 scores grow with the searched text's length, so PtR's merge over stubs compares each stub's
    min-max normalised scores (``merge_norm``), not the raw ones.
    """

    merge_norm = "min-max"

    def __init__(self, texts: Sequence[str], rows: np.ndarray | None = None,
                 params: BM25Params = BM25Params(), cache_dir: Path | None = None,
                 use_cache: bool = True) -> None:
        self.params = params
        self.rows = np.arange(len(texts)) if rows is None else np.asarray(rows, dtype=np.int64)
        if len(self.rows) != len(texts):
            raise ValueError("rows and texts differ in length")
        if not len(texts):
            raise ValueError("a BM25 index needs at least one text")
        self.key = content_key(texts, params)
        self.tokenizer = _tokenizer(params)
        self.from_cache = False
        folder = (cache_dir or CACHE_DIR / "bm25") / self.key
        self.model = self._load(folder) if use_cache else None
        if self.model is None:
            self.model = self._build(texts)
            if use_cache:
                self._save(folder)
        else:
            self.from_cache = True

    def __len__(self) -> int:
        return len(self.rows)

    def _build(self, texts: Sequence[str]) -> bm25s.BM25:
        model = _bm25s().BM25(k1=self.params.k1, b=self.params.b, method=self.params.method)
        model.index(tokens(texts, self.params), show_progress=False)
        return model

    def _load(self, folder: Path) -> bm25s.BM25 | None:
        if not folder.exists():
            return None
        problem = checksum_problem(folder)
        if problem:
            log.warning("BM25 cache %s: %s; rebuilding it", folder, problem)
            return None
        return _bm25s().BM25.load(str(folder), show_progress=False, verbosity=0)

    def _save(self, folder: Path) -> None:
        """Write to a temporary folder beside ``folder``, checksum it, then rename it into place."""
        # ``.<key>.<pid>.tmp.d``: the name the stale-temporary cleaner knows, so a save killed midway
        # leaves nothing that outlives its process.
        tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp.d")
        try:
            folder.parent.mkdir(parents=True, exist_ok=True)
            clean_stale_temps(folder.parent)
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir()
            self.model.save(str(tmp), show_progress=False)
            _write_checksums(tmp)
            if folder.exists():
                shutil.rmtree(folder)
            tmp.rename(folder)
        except OSError as exc:  # a cache that cannot be written costs a rebuild next time, nothing else
            log.warning("BM25 cache %s not written: %s", folder, exc)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def query_tokens(self, texts: Sequence[str]) -> list[list[str]]:
        """Each query text's analysed terms (the index's analyzer)."""
        return tokens(texts, self.params)

    def search_texts(self, texts: Sequence[str], k: int) -> list[TextHits]:
        """Top-``k`` hits of each text: registry rows and BM25 scores, best first.

        Only documents sharing at least one term with the text are returned (a score of 0 ranks nothing),
        so a text with no indexed term (stopwords, emoji or punctuation only: the analyzer's ``['']``) has
        no hits and never an error. Ties keep the lower registry row first.
        """
        out = []
        k = min(k, len(self))
        qtok = self.query_tokens(texts)
        vocab = self.model.vocab_dict
        for terms in qtok:
            ids = [vocab[t] for t in terms if t and t in vocab]  # '' is bm25s's empty-text token
            if not ids or k == 0:
                out.append(TextHits(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)))
                continue
            scores = np.asarray(self.model.get_scores_from_ids(ids), dtype=np.float32)
            top = top_rows(scores, k)
            out.append(TextHits(self.rows[top], scores[top]))
        return out


class TermCounts:
    """A collection's term counts, analysed once; :meth:`index` is the BM25 index of any subset of its rows
    with the subset's own statistics (N, df, average length), scored as bm25s scores it (the same float32
    values, ``tests/test_bm25.py``) without analysing or counting the texts again. The scale study indexes
    75 sub-registries this way."""

    def __init__(self, texts: Sequence[str], params: BM25Params = BM25Params()) -> None:
        if params.method != "lucene":
            raise ValueError(f"TermCounts scores Lucene's BM25 only, not {params.method!r}")
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

    def index(self, rows: np.ndarray) -> SubsetBM25:
        """The BM25 index of the collection's ``rows`` (hits report these rows)."""
        return SubsetBM25(self, np.asarray(rows, dtype=np.int64))


class SubsetBM25:
    """:meth:`TermCounts.index`: a term-by-document matrix of BM25 weights over some rows of a collection."""

    merge_norm = "min-max"

    def __init__(self, counts: TermCounts, rows: np.ndarray) -> None:
        if not len(rows):
            raise ValueError("a BM25 index needs at least one text")
        self.rows, self.counts = rows, counts
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
        """As :meth:`BM25Index.search_texts`, all texts in one sparse product whose float32 sums add each
        text's terms in the text's order (its row's entries are left in that order, repeats kept), as bm25s
        does."""
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
    """Indices of the ``k`` best positive scores, best first; ties by position (deterministic). ``positions``
    (one per score, default the indices) are what ties are broken by."""
    at = np.arange(len(scores)) if positions is None else positions
    pos = np.flatnonzero(scores > 0) if k > 0 else np.zeros(0, dtype=np.int64)
    if len(pos) > k:
        kth = np.partition(scores[pos], len(pos) - k)[len(pos) - k]  # the k-th largest positive score
        above, tied = pos[scores[pos] > kth], pos[scores[pos] == kth]
        tied = tied if positions is None else tied[np.argsort(at[tied], kind="stable")]
        pos = np.concatenate([above, tied[:k - len(above)]])
    return pos[np.lexsort((at[pos], -scores[pos]))]
