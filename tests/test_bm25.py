"""BM25 against scores worked out by hand, its content-addressed cache, and the hybrid against ranx.fuse."""

import math

import bm25s
import numpy as np
import pytest

from toolbench_lib.retrieval.bm25 import BM25Params, TermCounts, term_counts, tokens, top_rows
from toolbench_lib.retrieval.families import HybridSearcher, HybridSpec, check_family
from toolbench_lib.retrieval.rankings import TextHits, search_and_merge

CORPUS = [
    "weather forecast for cities",  # weather, forecast, citi
    "currency exchange rates and currency conversion",  # currenc(y) x2, exchang, rate, convers
    "city weather alerts",  # citi, weather, alert
]


def test_analyzer_lowercases_drops_stopwords_and_stems():
    assert tokens(["The Cities and the Weather"]) == [["citi", "weather"]]


def test_scores_equal_lucene_bm25_by_hand():
    """Lucene BM25: idf = ln(1 + (N - df + .5) / (df + .5)); tf part tf / (tf + k1 (1 - b + b dl / avgdl))."""
    idx = TermCounts(CORPUS).index()
    k1, b, n = 1.5, 0.75, 3
    lengths = [3, 5, 3]  # terms per document after stopwords: "and" and "for" are stopwords
    avgdl = sum(lengths) / n

    def term(tf, df, dl):
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        return idf * tf / (tf + k1 * (1 - b + b * dl / avgdl))

    # "weather in a city": weather (df 2) in docs 0 and 2, citi (df 2) in docs 0 and 2
    hits = idx.search_texts(["weather in a city"], 3)[0]
    expected = {0: term(1, 2, 3) + term(1, 2, 3), 2: term(1, 2, 3) + term(1, 2, 3)}
    assert hits.rows.tolist() == [0, 2]  # a tie keeps the lower row first; doc 1 shares no term
    assert hits.scores.tolist() == pytest.approx([expected[0], expected[2]], rel=1e-5)
    # "currency rates": doc 1 only; currenc tf 2 (df 1), rate tf 1 (df 1), dl 5
    hits = idx.search_texts(["currency rates"], 3)[0]
    assert hits.rows.tolist() == [1]
    assert hits.scores[0] == pytest.approx(term(2, 1, 5) + term(1, 1, 5), rel=1e-5)


def bm25s_hits(texts: list[str], rows: np.ndarray, queries: list[str], k: int) -> list[TextHits]:
    """The oracle: a bm25s index of ``texts`` (Lucene, the same analyzer), its ``get_scores_from_ids``."""
    model = bm25s.BM25(k1=1.5, b=0.75, method="lucene")
    model.index(tokens(texts), show_progress=False)
    out = []
    for terms in tokens(queries):
        ids = [model.vocab_dict[t] for t in terms if t and t in model.vocab_dict]
        scores = (np.asarray(model.get_scores_from_ids(ids), dtype=np.float32) if ids
                  else np.zeros(len(texts), np.float32))
        top = top_rows(scores, k)
        out.append(TextHits(rows[top], scores[top]))
    return out


def test_subsets_of_term_counts_score_as_bm25s_indexes_of_the_subsets(ds):
    """The scale study indexes sub-registries by slicing one count matrix: on real registry texts, every
    subset's hits (rows and float32 scores, ties included) equal those of a bm25s index of the subset,
    repeated query terms and texts with no indexed term included."""
    texts = ds.texts[:3000]
    counts = TermCounts(texts)
    queries = [*ds.queries["query"].head(60), "weather weather city", "the of and", "", "🙂"]
    rng = np.random.default_rng(0)
    for size in (1, 300, 3000):
        rows = np.sort(rng.choice(len(texts), size, replace=False))
        ours = counts.index(rows).search_texts(queries, 20)
        ref = bm25s_hits([texts[r] for r in rows], rows, queries, 20)
        for x, y in zip(ours, ref, strict=True):
            assert x.rows.tolist() == y.rows.tolist() and x.scores.tolist() == y.scores.tolist()
    assert sum(len(h.rows) for h in ours) > 1000
    with pytest.raises(ValueError, match="at least one text"):
        counts.index(np.zeros(0, dtype=np.int64))


def test_setups_over_the_same_texts_share_one_term_count():
    """Counted once for the same texts and analyzer (a second setup over the registry reuses them, with the
    same hits as its own count would give); other texts or another analyzer are counted anew."""
    first = term_counts(list(CORPUS))
    assert term_counts(list(CORPUS)) is first
    own = TermCounts(CORPUS).index().search_texts(["weather alerts", "city"], 3)
    shared = first.index().search_texts(["weather alerts", "city"], 3)
    assert [(h.rows.tolist(), h.scores.tolist()) for h in own] == [(h.rows.tolist(), h.scores.tolist())
                                                                   for h in shared]
    assert term_counts(list(CORPUS[:2])) is not first
    assert term_counts(list(CORPUS), BM25Params(k1=1.2)).params.k1 == 1.2
    assert term_counts(list(CORPUS)) is not first  # only the last collection is kept


def test_text_without_indexed_terms_has_no_hits_and_rows_map_to_the_registry():
    idx = TermCounts(CORPUS).index(ids=np.array([10, 20, 30]))
    hits = idx.search_texts(["zzz qqq", "alerts"], 5)
    assert len(hits[0].rows) == 0
    assert hits[1].rows.tolist() == [30]


def test_top_rows_breaks_ties_by_position():
    s = np.array([0, 2, 1, 2, 0, 3], dtype=np.float32)
    assert top_rows(s, 2).tolist() == [5, 1]
    assert top_rows(s, 3).tolist() == [5, 1, 3]
    assert top_rows(s, 10).tolist() == [5, 1, 3, 2]  # zero scores are never hits


def test_provenance_names_tokenizer_stopwords_and_stemmer():
    d = BM25Params().describe()
    assert "bm25s" in d["library"] and "Snowball" in d["stemmer"] and "en" in d["stopwords"]
    assert d["k1"] == 1.5 and d["b"] == 0.75


class _Fixed:
    """A searcher returning fixed hits per text (to compare the hybrid with ranx.fuse)."""

    def __init__(self, table):
        self.table = table

    def search_texts(self, texts, k):
        return [TextHits(np.array(self.table[t][0][:k]), np.array(self.table[t][1][:k], dtype=np.float32))
                for t in texts]


@pytest.mark.parametrize("spec", [HybridSpec(), HybridSpec(weights=(0.3, 0.7)),
                                  HybridSpec(method="rrf", norm=None)])
def test_hybrid_equals_ranx_fuse(spec):
    from ranx import Run, fuse

    rng = np.random.default_rng(7)
    dense_t, bm25_t = {}, {}
    for t in ["a", "b"]:
        d_rows, b_rows = rng.choice(40, 12, replace=False), rng.choice(40, 9, replace=False)
        dense_t[t] = (d_rows.tolist(), np.sort(rng.random(12))[::-1].tolist())
        bm25_t[t] = (b_rows.tolist(), np.sort(rng.random(9) * 20)[::-1].tolist())
    hybrid = HybridSearcher(_Fixed(dense_t), _Fixed(bm25_t), spec)
    got = hybrid.search_texts(["a", "b"], 8)
    runs = [Run({t: {str(r): float(s) for r, s in zip(*tab[t], strict=True)} for t in tab})
            for tab in (dense_t, bm25_t)]
    kwargs = {"method": spec.method, "norm": spec.norm or None}
    if spec.method == "wsum":
        kwargs["params"] = {"weights": list(spec.weights)}
    expected = fuse(runs, **kwargs).to_dict()
    for t, hits in zip(["a", "b"], got, strict=True):
        want = sorted(expected[t].items(), key=lambda x: (-x[1], int(x[0])))[:8]
        assert [str(r) for r in hits.rows.tolist()] == [a for a, _ in want]
        assert hits.scores.tolist() == pytest.approx([s for _, s in want], rel=1e-5)


def test_ptr_with_bm25_merges_each_api_by_its_best_min_max_normalised_stub_score():
    idx = TermCounts(CORPUS).index()
    per_query, merged = search_and_merge(idx, [["weather city", "currency alerts"], ["zzz"]], 3)
    raw = idx.search_texts(["weather city", "currency alerts"], 3)
    # text 0 hits docs 0 and 2 with equal scores (each is its best: 1); text 1 hits doc 1 (1) and doc 2 (0)
    assert raw[0].rows.tolist() == [0, 2] and raw[0].scores[0] == raw[0].scores[1]
    assert raw[1].rows.tolist() == [1, 2] and raw[1].scores[0] > raw[1].scores[1]
    assert merged[0].rows.tolist() == [0, 2, 1]  # all at 1: ties keep the order of first appearance
    assert merged[0].scores.tolist() == pytest.approx([1.0, 1.0, 1.0])
    assert per_query[0][1].scores.tolist() == raw[1].scores.tolist()  # per-text hits keep raw BM25 scores
    assert len(merged[1].rows) == 0 and len(per_query[1]) == 1


def test_unknown_family_is_one_clear_line():
    with pytest.raises(ValueError, match="unknown retriever 'sparse'; choose from dense, bm25, hybrid"):
        check_family("sparse")
