"""The one scorer: ranx per-query scores, checked against a direct count of recall@k."""

from __future__ import annotations

import pandas as pd
import pytest

from toolbench_lib.eval.runs import ScoreMismatchError, check_recall, direct_recall, score_rankings


def _queries() -> pd.DataFrame:
    return pd.DataFrame({"qkey": ["S:1", "S:2", "S:3"], "subset": "S",
                         "candidates": [["a", "b"], ["c"], []], "relevant": [["a"], ["c"], []]})


def test_direct_recall_counts_distinct_ids_of_the_first_k() -> None:
    assert direct_recall(["a", "a", "x", "b"], {"a", "b"}, 2) == 0.5  # the repeated a counts once
    assert direct_recall(["a", "a", "x", "b"], {"a", "b"}, 3) == 1.0
    assert direct_recall(["x"], set(), 5) == 0.0


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
