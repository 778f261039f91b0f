"""Resumable stub recording: query order, cassette merge that loses nothing, resume without new calls."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from toolbench_lib.llm.base import LLMResponse
from toolbench_lib.llm.cached import CachedLLM
from toolbench_lib.llm.cassettes import export_cassette, read_cassette
from toolbench_lib.llm.store import CallStore
from toolbench_lib.pipeline.stub_recording import (
    interleave,
    merge_export,
    record_stubs,
    recorded_limit,
    recorded_stub_queries,
)


class StubBackend:
    """Answers every stub prompt with one fixed stub and counts its calls."""

    name, model, is_llm = "fake", "fake-1", True

    def __init__(self) -> None:
        self.calls = 0

    def generate(self, prompt: str, system: str = "", json_schema: dict | None = None,
                 temperature: float = 0.0, run: int = 0) -> LLMResponse:
        self.calls += 1
        return LLMResponse(text='[{"name": "get_thing", "reasoning": "because"}]', tokens_in=50, tokens_out=9,
                           latency_s=0.01, model=self.model, backend=self.name)


def _queries(n: int, subset: str) -> pd.DataFrame:
    return pd.DataFrame({"qkey": [f"{subset}:{i}" for i in range(n)], "subset": subset,
                         "query": [f"{subset} question {i}" for i in range(n)]})


def test_interleave_is_position_major() -> None:
    out = interleave([_queries(3, "A"), _queries(1, "B"), _queries(2, "C")])
    assert out["qkey"].tolist() == ["A:0", "B:0", "C:0", "A:1", "C:1", "A:2"]


def test_record_merge_and_resume(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl.gz"
    # A cassette holding a record of another recording (made through its own store).
    with CallStore(tmp_path / "other.sqlite") as other:
        CachedLLM(StubBackend(), other).generate("older prompt", run=0)
        export_cassette(other, cassette)
    old_keys = {r["key"] for r in read_cassette(cassette)}
    queries = interleave([_queries(4, "A"), _queries(2, "B")])
    with CallStore(tmp_path / "calls.sqlite") as store:
        backend = StubBackend()
        llm = CachedLLM(backend, store)
        messages: list[str] = []
        out = record_stubs(llm, queries.head(3), store, cassette, export_every=1, chunk=1,
                           echo=messages.append)
        assert out["new_calls"] == 3 and backend.calls == 3
        assert len(messages) == 4  # three periodic merges and the final one
        keys = {r["key"] for r in read_cassette(cassette)}
        assert old_keys <= keys and len(keys) == 4
        assert recorded_stub_queries(cassette) == set(queries["query"].head(3))
        # A rerun over all queries only calls the backend for the three it lacks.
        llm2 = CachedLLM(backend, store)
        record_stubs(llm2, queries, store, cassette, export_every=100, echo=messages.append)
        assert backend.calls == 6 and llm2.misses == 3 and llm2.hits == 3
        assert recorded_stub_queries(cassette, model="fake-1") == set(queries["query"])
        assert recorded_stub_queries(cassette, model="other") == set()


def test_merge_export_refuses_to_lose_records(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl.gz"
    with CallStore(tmp_path / "a.sqlite") as a:
        CachedLLM(StubBackend(), a).generate("kept", run=0)
        export_cassette(a, cassette)
    with CallStore(tmp_path / "b.sqlite") as b:
        # A model filter that excludes the cassette's own records would drop them: refused.
        with pytest.raises(RuntimeError, match="would lose 1 of its 1 records"):
            merge_export(b, cassette, model="another-model")
        assert merge_export(b, cassette, model="fake-1") == (1, 1)


def test_recorded_limit_counts_the_first_queries_of_every_set_in_every_run(tmp_path: Path) -> None:
    from toolbench_lib.llm.prompts import STUB_PROMPT
    from toolbench_lib.pipeline.study import call

    queries = pd.DataFrame({"subset": ["A"] * 4 + ["B"] * 2,
                            "query": ["a0", "a1", "a2", "a3", "b0", "b1"]})
    cassette = tmp_path / "c.jsonl.gz"
    with CallStore(tmp_path / "s.sqlite") as store:
        llm = CachedLLM(StubBackend(), store)
        for q in ["a0", "a1", "b0", "b1", "a3"]:  # a2 missing: A's first 2 only
            call(llm, STUB_PROMPT, 0, 0.0, query=q)
        for q in ["a0", "b0", "b1"]:  # run 1 (temperature 0.3): the first query of each set
            call(llm, STUB_PROMPT, 1, 0.3, query=q)
        call(llm, STUB_PROMPT, 2, 0.0, query="a0")  # run 2 at another temperature counts for nothing
        export_cassette(store, cassette)
    assert recorded_limit(cassette, queries, ["A", "B"]) == 2
    assert recorded_limit(cassette, queries, ["B"]) == 2
    assert recorded_limit(cassette, queries, ["A", "B"], [(0, 0.0), (1, 0.3)]) == 1
    assert recorded_limit(cassette, queries, ["A", "B"], [(0, 0.0), (1, 0.3), (2, 0.3)]) == 0
    assert recorded_limit(cassette, queries, ["A"], [(2, 0.0)]) == 1
    assert recorded_limit(tmp_path / "missing.jsonl.gz", queries, ["A"]) == 0
