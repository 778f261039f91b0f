import numpy as np
import pandas as pd
import pytest

from toolbench_lib.retrieval.subregistry import proportional_quota, sample_subregistry


def _registry(sizes: dict[str, int]) -> pd.DataFrame:
    rows = [(f"{c}/{i}", c) for c, n in sizes.items() for i in range(n)]
    return pd.DataFrame(rows, columns=["api_id", "category"])


def test_quota_sums_and_proportions():
    sizes = pd.Series({"a": 600, "b": 300, "c": 100})
    q = proportional_quota(sizes, 101)
    assert q.sum() == 101
    assert q.to_dict() == {"a": 61, "b": 30, "c": 10}


def test_sample_keeps_ground_truth_and_size():
    reg = _registry({"Sports": 5000, "Data": 3000, "Food": 2000})
    keep = {"Food/1", "Food/2", "Data/7"}
    rows = sample_subregistry(reg, 1000, seed=3, keep_ids=keep)
    sub = reg.iloc[rows]
    assert len(rows) == 1000 and len(set(rows)) == 1000
    assert keep <= set(sub["api_id"])
    shares = sub["category"].value_counts(normalize=True)
    assert shares["Sports"] == pytest.approx(0.5, abs=0.01)
    assert shares["Food"] == pytest.approx(0.2, abs=0.01)


def test_seeds():
    reg = _registry({"a": 500, "b": 500})
    r1 = sample_subregistry(reg, 100, seed=1)
    assert np.array_equal(r1, sample_subregistry(reg, 100, seed=1))
    assert not np.array_equal(r1, sample_subregistry(reg, 100, seed=2))
    assert len(sample_subregistry(reg, 5000, seed=1)) == 1000


def test_kept_overflowing_a_category_is_rebalanced():
    reg = _registry({"a": 100, "b": 900})
    keep = {f"a/{i}" for i in range(50)}
    rows = sample_subregistry(reg, 100, seed=0, keep_ids=keep)
    assert len(rows) == 100 and keep <= set(reg.iloc[rows]["api_id"])


def test_ground_truth_too_large():
    reg = _registry({"a": 100})
    with pytest.raises(ValueError, match="do not fit"):
        sample_subregistry(reg, 5, seed=0, keep_ids={f"a/{i}" for i in range(10)})
