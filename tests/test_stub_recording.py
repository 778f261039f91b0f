"""Stub recording: rounds of N queries per set (sets interleaved, every run within a round), cassette merge
that loses nothing, resume without new calls."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from toolbench_lib.llm.base import LLMResponse
from toolbench_lib.llm.cached import CachedLLM
from toolbench_lib.llm.cassettes import export_cassette, read_cassette
from toolbench_lib.llm.factory import DEFAULT_CASSETTE, make_backend
from toolbench_lib.llm.prompts import extract_section
from toolbench_lib.llm.store import CallStore
from toolbench_lib.retrieval.retrievers import ptr_texts
from toolbench_lib.study.result import generate_stubs
from toolbench_lib.study.stub_recording import (
    merge_export,
    record_stubs,
    recorded_limit,
    recorded_search_texts,
    recorded_stub_queries,
    recorded_stub_runs,
    recording_order,
)


class StubBackend:
    """Answers every stub prompt with one fixed stub and counts its calls."""

    name, model, is_llm = "fake", "fake-1", True

    def __init__(self) -> None:
        self.calls = 0
        self.log: list[tuple[str, int, float]] = []

    def generate(self, prompt: str, system: str = "", json_schema: dict | None = None,
                 temperature: float = 0.0, run: int = 0) -> LLMResponse:
        self.calls += 1
        self.log.append((extract_section(prompt, "query"), run, temperature))
        return LLMResponse(text='[{"name": "get_thing", "reasoning": "because"}]', tokens_in=50, tokens_out=9,
                           latency_s=0.01, model=self.model, backend=self.name)


def _queries(n: int, subset: str) -> pd.DataFrame:
    return pd.DataFrame({"qkey": [f"{subset}:{i}" for i in range(n)], "subset": subset,
                         "query": [f"{subset} question {i}" for i in range(n)]})


def _sets(*sizes: tuple[str, int]) -> pd.DataFrame:
    return pd.concat([_queries(n, s) for s, n in sizes], ignore_index=True)


def test_rounds_interleave_sets_in_query_order():
    q = _sets(("A", 5), ("B", 3))
    rounds = recording_order(q, chunk=2)
    assert [r["qkey"].tolist() for r in rounds] == [["A:0", "A:1", "B:0", "B:1"], ["A:2", "A:3", "B:2"],
                                                    ["A:4"]]
    with pytest.raises(ValueError, match="chunk"):
        recording_order(q, chunk=0)


def test_rounds_of_one_are_position_major() -> None:
    rounds = recording_order(_sets(("A", 3), ("B", 1), ("C", 2)), chunk=1)
    assert [k for r in rounds for k in r["qkey"]] == ["A:0", "B:0", "C:0", "A:1", "C:1", "A:2"]


def test_every_run_of_a_round_before_the_next_round(tmp_path: Path) -> None:
    """Runs 1 and 2 at the run temperature (0.3); chunk 1: the first query of each set in both runs first."""
    with CallStore(tmp_path / "calls.sqlite") as store:
        backend = StubBackend()
        out = record_stubs(CachedLLM(backend, store), _sets(("A", 2), ("B", 1)), runs=(1, 2), chunk=1)
    assert backend.log == [("A question 0", 1, 0.3), ("B question 0", 1, 0.3), ("A question 0", 2, 0.3),
                           ("B question 0", 2, 0.3), ("A question 1", 1, 0.3), ("A question 1", 2, 0.3)]
    assert out == {"calls": 6, "queries": 3, "new_calls": 6, "cassette_records": None}
    with pytest.raises(ValueError, match="call store"):
        record_stubs(CachedLLM(backend, store), _sets(("A", 1)), cassette=tmp_path / "c.jsonl.gz")


def test_record_merge_and_resume(tmp_path: Path) -> None:
    cassette = tmp_path / "c.jsonl.gz"
    # A cassette holding a record of another recording (made through its own store).
    with CallStore(tmp_path / "other.sqlite") as other:
        CachedLLM(StubBackend(), other).generate("older prompt", run=0)
        export_cassette(other, cassette)
    old_keys = {r["key"] for r in read_cassette(cassette)}
    queries = _sets(("A", 4), ("B", 2))
    first = queries.iloc[[0, 1, 4]]  # A0, A1, B0: rounds of one per set are (A0, B0), (A1)
    with CallStore(tmp_path / "calls.sqlite") as store:
        backend = StubBackend()
        llm = CachedLLM(backend, store)
        messages: list[str] = []
        out = record_stubs(llm, first, chunk=1, store=store, cassette=cassette, export_every=1,
                           echo=messages.append)
        assert out["new_calls"] == 3 and backend.calls == 3 and out["cassette_records"] == 4
        assert messages[0].startswith("2/3 queries, 2 new calls, cassette 1 -> 3 records")
        assert messages[1].startswith("3/3 queries, 3 new calls, cassette 3 -> 4 records")
        assert messages[2] == "done: 3 queries, 3 new calls, cassette 4 -> 4 records"
        keys = {r["key"] for r in read_cassette(cassette)}
        assert old_keys <= keys and len(keys) == 4
        assert recorded_stub_queries(cassette) == set(first["query"])
        # A rerun over all queries only calls the backend for the three it lacks.
        llm2 = CachedLLM(backend, store)
        record_stubs(llm2, queries, store=store, cassette=cassette, export_every=100, echo=messages.append)
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
    from toolbench_lib.study.result import call

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


def test_both_entry_points_record_through_one_function(mini_toolbench, tmp_path, monkeypatch, capsys) -> None:
    """``record stubs`` (runs 0 and 1, no cassette) and ``python -m ...stub_recording`` (run 0, merged into a
    cassette) on a tiny ToolBench folder of two G1 queries."""
    import json

    from toolbench_lib import cli
    from toolbench_lib.data import dataset
    from toolbench_lib.llm import factory
    from toolbench_lib.study import stub_recording

    monkeypatch.setattr(dataset, "PROCESSED_DIR", tmp_path / "processed")
    backend = StubBackend()
    stores: list[CallStore] = []

    def make_backend(name, model=None, store=None):
        stores.append(CallStore(store or tmp_path / "calls.sqlite"))
        return CachedLLM(backend, stores[-1])

    monkeypatch.setattr(factory, "make_backend", make_backend)
    assert cli.main(["record", "stubs", "--data-dir", str(mini_toolbench), "--subset", "G1",
                     "--runs", "0,1"]) == 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1]) == {"calls": 4, "new": 4, "cached": 0}
    assert [(r, t) for _, r, t in backend.log] == [(0, 0.0), (0, 0.0), (1, 0.3), (1, 0.3)]  # one round of 25
    cassette = tmp_path / "c.jsonl.gz"
    assert stub_recording.main(["--subset", "G1", "--data-dir", str(mini_toolbench), "--cassette",
                                str(cassette), "--store", str(tmp_path / "calls.sqlite")]) == 0
    assert backend.calls == 4  # run 0 of both queries came from the cache
    assert recorded_stub_queries(cassette) == {"What is the weather in Paris and the forecast?",
                                               "Quote for AAPL"}
    for s in stores:
        s.close()


@pytest.mark.parametrize("args, said", [
    (["--subset", "NOPE"], "unknown query set 'NOPE'"),
    (["--data-dir", "{tmp}"], "not a ToolBench data folder"),
    (["--backend", "rules"], "invalid choice"), (["--limit", "0"], "--limit: 0"),
    (["--export-every", "-1"], "--export-every: -1"), (["--store", "{tmp}"], "a folder, not a file")])
def test_bad_input_to_the_recording_entry_point_is_one_line(args, said, mini_toolbench, tmp_path, capsys):
    """``python -m ...stub_recording``: every bad option, set or data folder is one line (exit 2), nothing
    recorded."""
    from toolbench_lib.study import stub_recording

    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    data = [] if "--data-dir" in args else ["--data-dir", str(mini_toolbench)]
    try:
        code = stub_recording.main([*args, *data, "--cassette", str(tmp_path / "c.jsonl.gz")])
    except SystemExit as exc:  # argparse's own line
        code = exc.code
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and said in err[0] and "Traceback" not in err[0], err
    assert not (tmp_path / "c.jsonl.gz").exists()


def test_recorded_search_texts_hold_every_text_a_replayed_ptr_searches() -> None:
    """The stubs the replay backend gives for the cassette's first queries, in runs 0 and 1, as PtR searches
    them: every such text (and every query) is among the texts `index build --with-recorded` embeds."""
    recorded = recorded_stub_runs(DEFAULT_CASSETTE)
    first = sorted(recorded[(0, 0.0)] & recorded[(1, 0.3)])[:6]
    queries = pd.DataFrame({"qkey": [f"q{i}" for i in range(len(first))], "query": first})
    texts = set(recorded_search_texts(DEFAULT_CASSETTE, ["an unrecorded query", *first]))
    llm = make_backend("replay")
    searched = set()
    for run, temperature in ((0, 0.0), (1, 0.3)):
        stubs, _ = generate_stubs(llm, queries, run, temperature, progress=False)
        searched |= {t for per_query in ptr_texts(queries, stubs, run) for t in per_query}
    assert len(first) == 6 and len(searched) > len(first)
    assert searched <= texts and "an unrecorded query" in texts
