"""The one scorer: ranx per-query scores, checked against a direct count of recall@k."""

from __future__ import annotations

import pandas as pd
import pytest

from toolbench_lib.eval.runs import (
    ScoreMismatchError,
    check_recall,
    direct_hits,
    direct_recall,
    score_rankings,
)


def _queries() -> pd.DataFrame:
    return pd.DataFrame({"qkey": ["S:1", "S:2", "S:3"], "subset": "S",
                         "candidates": [["a", "b"], ["c"], []], "relevant": [["a"], ["c"], []]})


def test_direct_recall_counts_distinct_ids_of_the_first_k() -> None:
    assert direct_recall(["a", "a", "x", "b"], {"a", "b"}, 2) == 0.5  # the repeated a counts once
    assert direct_recall(["a", "a", "x", "b"], {"a", "b"}, 3) == 1.0
    assert direct_recall(["x"], set(), 5) == 0.0
    assert direct_hits(["a", "a", "x", "b"], {"a", "b", "c"}, 3) == 2
    assert direct_hits([3, 7, 3, 9], {9, -1}, 3) == 1  # column positions work the same


def test_score_rankings_agrees_with_the_direct_count_and_keeps_first_ranks() -> None:
    rankings = {"S:1": ["x", "a", "a", "b"], "S:2": ["c"], "S:3": ["z"]}
    out = score_rankings(rankings, _queries(), "candidates", 2, ("recall", "precision", "comp"))
    r = out.set_index("qkey")
    # S:1's top 2 distinct ids are x, a (the second a is not a new rank): recall 1/2, precision 1/2.
    assert (r.loc["S:1", "recall"], r.loc["S:1", "precision"], r.loc["S:1", "comp"]) == (0.5, 0.5, 0.0)
    assert (r.loc["S:2", "recall"], r.loc["S:2", "comp"]) == (1.0, 1.0)
    assert r.loc["S:3", "recall"] == 0.0 and r.loc["S:3", "n_gt"] == 0


def test_check_recall_refuses_scores_that_are_not_the_direct_count() -> None:
    rankings, qrels = {"q1": ["a", "x"], "q2": ["y"]}, {"q1": {"a"}, "q2": {"b"}}
    check_recall({"q1": 1.0, "q2": 0.0}, rankings, qrels, 2)
    with pytest.raises(ScoreMismatchError, match="1 of 2 queries"):
        check_recall({"q1": 0.0, "q2": 0.0}, rankings, qrels, 2)  # e.g. scores of shuffled queries


def test_recall_and_precision_by_hand() -> None:
    """recall@k: share of the ground truth in the top k; precision@k: share of the k slots (a short list
    is padded); a query the ranking misses retrieved nothing; no ground truth scores 0."""
    q = pd.DataFrame({"qkey": ["q1", "q2", "q3", "q4"], "subset": "S",
                      "candidates": [["a", "b", "c"], ["a"], ["b"], []]})
    rankings = {"q1": ["a", "x", "b", "y", "z", "c"], "q2": ["a"], "q4": ["a"]}
    at5 = score_rankings(rankings, q, "candidates", 5).set_index("qkey")
    assert at5["recall"].tolist() == pytest.approx([2 / 3, 1.0, 0.0, 0.0])
    assert at5["precision"].tolist() == pytest.approx([2 / 5, 1 / 5, 0.0, 0.0])
    assert at5["n_gt"].tolist() == [3, 1, 1, 0]
    at1 = score_rankings(rankings, q, "candidates", 1).set_index("qkey")
    assert at1["recall"].tolist() == pytest.approx([1 / 3, 1.0, 0.0, 0.0])
    assert at1["precision"].tolist() == pytest.approx([1.0, 1.0, 0.0, 0.0])


@pytest.mark.parametrize("k", [1, 5, 10])
def test_score_rankings_equals_plain_set_counts_on_random_runs(k: int) -> None:
    import numpy as np

    rng = np.random.default_rng(k)
    docs = [f"d{i}" for i in range(40)]
    rel = [rng.choice(docs, size=rng.integers(1, 8), replace=False).tolist() for _ in range(30)]
    runs = {f"q{i}": rng.permutation(docs)[: rng.integers(1, 25)].tolist() for i in range(30)}
    q = pd.DataFrame({"qkey": list(runs), "subset": "S", "candidates": rel})
    out = score_rankings(runs, q, "candidates", k)
    hits = [len(set(runs[f"q{i}"][:k]) & set(rel[i])) for i in range(30)]
    assert out["recall"].tolist() == pytest.approx([h / len(r) for h, r in zip(hits, rel, strict=True)])
    assert out["precision"].tolist() == pytest.approx([h / k for h in hits])
