"""Stub recording order: rounds of N queries per set, sets interleaved, so an interrupted recording covers
the first queries of every set in every run."""

import pandas as pd
import pytest

from toolbench_lib.pipeline.recording import recording_order


def test_rounds_interleave_sets_in_query_order():
    q = pd.DataFrame({"qkey": [f"A:{i}" for i in range(5)] + [f"B:{i}" for i in range(3)],
                      "subset": ["A"] * 5 + ["B"] * 3})
    rounds = recording_order(q, chunk=2)
    assert [r["qkey"].tolist() for r in rounds] == [["A:0", "A:1", "B:0", "B:1"], ["A:2", "A:3", "B:2"],
                                                    ["A:4"]]
    assert sum(len(r) for r in rounds) == len(q)
    with pytest.raises(ValueError, match="chunk"):
        recording_order(q, chunk=0)
