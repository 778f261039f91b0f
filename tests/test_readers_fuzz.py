"""Fuzzing of the cassette reader and the query-file reader: a damaged file is one clear error, never
another exception, a record that passes is whole, and a query doc that joins the registry has a whole key.

Hypothesis drives three kinds of input for each reader: arbitrary bytes, arbitrary JSON, and a valid file
with one field changed to an arbitrary JSON value (the mutations that reach deepest).
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolbench_lib.data.queries import DOC_KEY_FIELDS, QueryFileError, read_query_file
from toolbench_lib.data.registry import MergeStats, iter_query_docs
from toolbench_lib.llm.cassettes import cassette_info, read_cassette, unique_records
from toolbench_lib.llm.store import RECORD_FIELDS, CacheFileError, call_key

FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**20, 10**20) | st.floats(allow_nan=False)
    | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


def _record(prompt: str = "p", text: str = "reply") -> dict:
    record = {"backend": "local", "model": "m", "is_llm": True, "prompt_version": "v1", "system": "s",
              "prompt": prompt, "json_schema": None, "temperature": 0.0, "run": 0, "text": text,
              "tokens_in": 3, "tokens_out": 2, "latency_s": 0.5, "created_at": "2026-01-01T00:00:00+00:00"}
    record["key"] = call_key(record["backend"], record["model"], record["prompt_version"], record["system"],
                             record["prompt"], record["json_schema"], record["temperature"], record["run"])
    return record


def _read_all(path: Path) -> list[dict] | None:
    """The cassette's records through every reader, or None when it is refused with a CacheFileError."""
    try:
        records = list(read_cassette(path))
        unique = unique_records(path)
        info = cassette_info(path)
    except CacheFileError as exc:
        message = str(exc)
        assert "\n" not in message and str(path) in message
        return None
    for record in records:
        assert set(record) == set(RECORD_FIELDS)
        assert record["key"] == call_key(record["backend"], record["model"], record["prompt_version"],
                                         record["system"], record["prompt"], record["json_schema"],
                                         record["temperature"], record["run"])
    assert info["records"] == len(unique) == len({r["key"] for r in records})
    assert info["repeated_keys"] == len(records) - len(unique)
    return records


@FUZZ
@given(data=st.binary(max_size=400), compress=st.booleans())
def test_cassette_reader_on_arbitrary_bytes(tmp_path_factory, data: bytes, compress: bool) -> None:
    path = tmp_path_factory.mktemp("c") / "c.jsonl.gz"
    path.write_bytes(gzip.compress(data) if compress else data)
    _read_all(path)


@FUZZ
@given(lines=st.lists(json_values, max_size=5))
def test_cassette_reader_on_arbitrary_json_lines(tmp_path_factory, lines: list) -> None:
    path = tmp_path_factory.mktemp("c") / "c.jsonl.gz"
    path.write_bytes(gzip.compress("".join(json.dumps(v) + "\n" for v in lines).encode()))
    records = _read_all(path)
    assert records is None or records == []  # no arbitrary value is a whole record with a matching key


@FUZZ
@given(field=st.sampled_from([*RECORD_FIELDS, "extra"]), value=json_values, position=st.integers(0, 2),
       repeat=st.sampled_from([None, "same", "other"]))
def test_cassette_reader_on_a_mutated_record(tmp_path_factory, field: str, value, position: int,
                                             repeat: str | None) -> None:
    records = [_record(f"prompt {i}", f"reply {i}") for i in range(3)]
    records[position] = {**records[position], field: value}
    if repeat == "same":
        records.append(dict(records[0]))
    elif repeat == "other":
        records.append({**records[0], "text": f"{records[0]['text']!r} changed"})
    path = tmp_path_factory.mktemp("c") / "c.jsonl.gz"
    path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in records).encode()))
    got = _read_all(path)
    if got is not None:
        keys = [r["key"] for r in got]
        if repeat == "other" and keys.count(records[0]["key"]) == 2:
            pytest.fail("two different replies for one key were accepted")


# ---------------------------------------------------------------------------------------------- query files

_DOC = {"category_name": "Data", "tool_name": "Tool", "api_name": "Get thing", "api_description": "d",
        "required_parameters": [], "optional_parameters": []}


def _check_query_file(path: Path) -> None:
    """A query file is read whole or refused with one line naming it; the docs that join the registry all
    have a whole key, and every left-out doc is counted."""
    try:
        queries = read_query_file(path)
    except QueryFileError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
        return
    stats = MergeStats()
    rows = list(iter_query_docs([path], stats))
    docs = [doc for q in queries for doc in q.get("api_list", [])]
    assert len(rows) + stats.incomplete_query_docs == len(docs)
    for row in rows:
        assert row["category"].strip() and row["tool_name"].strip() and row["api_name"].strip()
        assert row["norm_tool"] and row["norm_api"]
        assert row["tool_key"] != "unnamed" or row["norm_tool"] == "unnamed"  # never an invented tool


@FUZZ
@given(data=st.binary(max_size=300))
def test_query_reader_on_arbitrary_bytes(tmp_path_factory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("q") / "G1_instruction.json"
    path.write_bytes(data)
    _check_query_file(path)


@FUZZ
@given(value=json_values)
def test_query_reader_on_arbitrary_json(tmp_path_factory, value) -> None:
    path = tmp_path_factory.mktemp("q") / "G1_instruction.json"
    path.write_text(json.dumps(value))
    _check_query_file(path)


@FUZZ
@given(field=st.sampled_from([*DOC_KEY_FIELDS, "api_description", "required_parameters"]),
       value=json_values | st.sampled_from(["", "  ", "!!!", "é", "unnamed"]), drop=st.booleans(),
       query_field=st.sampled_from(["query", "query_id", "api_list", "relevant APIs", None]),
       query_value=json_values)
def test_query_reader_on_a_mutated_doc(tmp_path_factory, field: str, value, drop: bool,
                                       query_field: str | None, query_value) -> None:
    doc = dict(_DOC)
    if drop:
        doc.pop(field)
    else:
        doc[field] = value
    query = {"query": "find a thing", "query_id": 1, "api_list": [dict(_DOC), doc],
             "relevant APIs": [["Tool", "Get thing"]]}
    if query_field is not None:
        query[query_field] = query_value
    path = tmp_path_factory.mktemp("q") / "G1_instruction.json"
    path.write_text(json.dumps([query]))
    _check_query_file(path)
