import numpy as np
import pytest

from toolbench_lib.eval.metrics import mean_metrics, per_query_metrics, precision_at_k, recall_at_k, wins


def test_recall_precision_by_hand():
    ranked = ["a", "x", "b", "y", "z", "c"]
    assert recall_at_k(ranked, {"a", "b", "c"}, 5) == pytest.approx(2 / 3)
    assert precision_at_k(ranked, {"a", "b", "c"}, 5) == pytest.approx(2 / 5)
    assert recall_at_k(ranked, {"a", "b", "c"}, 1) == pytest.approx(1 / 3)
    assert precision_at_k(["a"], {"a"}, 5) == pytest.approx(1 / 5)  # short list: k slots
    assert recall_at_k(ranked, set(), 5) == 0.0
    with pytest.raises(ValueError):
        precision_at_k(ranked, {"a"}, 0)


def test_missing_query_counts_as_empty():
    pq = per_query_metrics({"q1": ["a"]}, {"q1": {"a"}, "q2": {"b"}}, 5)
    assert pq.set_index("qkey").loc["q2", "recall"] == 0.0
    assert mean_metrics(pq)["recall"] == pytest.approx(0.5)


def test_wins():
    import pandas as pd

    a = pd.DataFrame({"qkey": ["1", "2", "3"], "recall": [0.5, 0.2, 0.1]})
    b = pd.DataFrame({"qkey": ["1", "2", "3"], "recall": [0.4, 0.3, 0.1]})
    assert wins(a, b, names=("rtp", "ptr")) == {"rtp": 1, "ptr": 1, "tie": 1}


@pytest.mark.parametrize("k", [1, 5, 10])
def test_matches_ranx(k):
    """Cross-check against ranx on random runs with ties-free scores."""
    from ranx import Qrels, Run, evaluate

    rng = np.random.default_rng(k)
    docs = [f"d{i}" for i in range(40)]
    qrels, run = {}, {}
    for q in range(30):
        rel = set(rng.choice(docs, size=rng.integers(1, 8), replace=False).tolist())
        ranked = rng.permutation(docs)[: rng.integers(1, 25)].tolist()
        qrels[f"q{q}"] = rel
        run[f"q{q}"] = ranked
    ours = mean_metrics(per_query_metrics(run, qrels, k))
    rq = Qrels({q: {d: 1 for d in rel} for q, rel in qrels.items()})
    rr = Run({q: {d: float(len(r) - i) for i, d in enumerate(r)} for q, r in run.items()})
    theirs = evaluate(rq, rr, [f"recall@{k}", f"precision@{k}"])
    assert ours["recall"] == pytest.approx(theirs[f"recall@{k}"])
    assert ours["precision"] == pytest.approx(theirs[f"precision@{k}"])
