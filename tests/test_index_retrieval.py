import numpy as np
import pytest

from toolbench_lib.retrieval.index import VectorIndex
from toolbench_lib.retrieval.rankings import DenseSearcher, merge_max, search_and_merge


def _unit(rng, n, d=16):
    v = rng.normal(size=(n, d)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_flat_index_is_exact_cosine():
    rng = np.random.default_rng(0)
    docs, qs = _unit(rng, 300), _unit(rng, 7)
    scores, rows = VectorIndex(docs).search(qs, 10)
    sims = qs @ docs.T
    for i in range(len(qs)):
        expected = np.argsort(-sims[i])[:10]
        assert rows[i].tolist() == expected.tolist()
        assert scores[i] == pytest.approx(sims[i, expected], abs=1e-5)


def test_subset_index_reports_registry_rows():
    rng = np.random.default_rng(1)
    docs, qs = _unit(rng, 200), _unit(rng, 3)
    rows = np.array([5, 17, 42, 99, 150, 199])
    sub = VectorIndex(docs[rows], rows)
    _, hit_rows = sub.search(qs, 3)
    sims = qs @ docs[rows].T
    for i in range(len(qs)):
        assert hit_rows[i].tolist() == rows[np.argsort(-sims[i])[:3]].tolist()
    _, all_rows = sub.search(qs, 50)  # k capped at the sub-registry size
    assert all_rows.shape == (3, 6)
    np.testing.assert_array_equal(sub.vectors, docs[rows])  # row i of the vectors is registry row rows[i]
    with pytest.raises(ValueError):
        sub.vectors[0, 0] = 1.0  # read-only


def test_max_merge_equals_brute_force():
    rng = np.random.default_rng(2)
    docs, stubs = _unit(rng, 500), _unit(rng, 4)
    index = VectorIndex(docs)
    merged = merge_max(DenseSearcher(index, lambda _: stubs).search_texts(list("abcd"), 5), 5)
    best = (stubs @ docs.T).max(axis=0)
    assert merged.rows.tolist() == np.argsort(-best)[:5].tolist()
    assert merged.scores == pytest.approx(np.sort(best)[::-1][:5], abs=1e-5)


def test_search_and_merge_keeps_per_text_hits():
    rng = np.random.default_rng(3)
    docs = _unit(rng, 100)
    vecs = {t: _unit(rng, 1)[0] for t in ["a", "b", "c"]}
    searcher = DenseSearcher(VectorIndex(docs), lambda ts: np.stack([vecs[t] for t in ts]))
    per_query, merged = search_and_merge(searcher, [["a", "b"], ["c"], []], k=4)
    assert [len(p) for p in per_query] == [2, 1, 0]
    assert len(merged[2].rows) == 0
    assert set(merged[0].rows) <= set(per_query[0][0].rows) | set(per_query[0][1].rows)
