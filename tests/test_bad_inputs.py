"""Bad inputs and damaged caches, each tried as a user would: ``python -m toolbench_lib ...`` in a subprocess.

Every case either fails with a non-zero exit and exactly one line on stderr that names the problem
(log lines aside, never a traceback), or is repaired by the toolkit and gives the numbers of a clean
run. The data cases work on a small copy of the real data (two toolenv categories linked, the first
queries of three sets), built once for the module.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest

from toolbench_lib.data.dataset import CHECKSUMS, sources_fingerprint
from toolbench_lib.data.paths import PROCESSED_DIR, find_data_dir

from .forkcli import run_cli

CATEGORIES = ("Reward", "Storage")  # two small categories of toolenv, linked, not copied
QUERY_FILES = (("test_instruction", "G1_instruction"), ("test_instruction_original", "G2_category"),
               ("test_instruction_original", "G3_instruction"))
N_QUERIES = 4
MAX_APIS = "60"
LOG_LINE = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL) [\w.]+: ")
OUTCOMES: dict[str, str] = {}


def cli(*args: str, timeout: int = 600, env: dict | None = None) -> subprocess.CompletedProcess:
    base = {**os.environ, "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    return run_cli(list(map(str, args)), timeout=timeout, env={**base, **(env or {})})


def problem_lines(stderr: str) -> list[str]:
    """stderr without log lines."""
    return [line for line in stderr.splitlines() if line.strip() and not LOG_LINE.match(line)]


# --------------------------------------------------------------------------- data


def _write_small_folder(root: Path) -> Path:
    real = find_data_dir()
    tools = root / "toolenv" / "tools"
    tools.mkdir(parents=True)
    for cat in CATEGORIES:
        (tools / cat).symlink_to(real / "toolenv" / "tools" / cat, target_is_directory=True)
    for folder, stem in QUERY_FILES:
        queries = json.loads((real / folder / f"{stem}.json").read_text(encoding="utf-8"))[:N_QUERIES]
        (root / folder).mkdir(exist_ok=True)
        (root / folder / f"{stem}.json").write_text(json.dumps(queries), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def made_folders():
    """Data folders made by this module; their processed caches are removed afterwards."""
    folders: list[Path] = []
    yield folders
    for folder in folders:
        if folder.exists():
            shutil.rmtree(PROCESSED_DIR / sources_fingerprint(folder), ignore_errors=True)


@pytest.fixture(scope="module")
def small_data(tmp_path_factory, made_folders) -> Path:
    root = _write_small_folder(tmp_path_factory.mktemp("bad_inputs") / "toolbench")
    made_folders.append(root)
    return root


def evaluate_args(data: Path, *extra: str) -> list[str]:
    return ["evaluate", "--method", "rtp", "--data-dir", str(data), "--model", "all-MiniLM-L6-v2",
            "--subset", "G1", "--subset", "G3", "--limit", "3", "--max-apis", MAX_APIS, "--json", *extra]


def numbers(result: dict) -> dict:
    return {"registry_size": result["registry_size"], "model": result["model"],
            **{name: (r["n_queries"], round(r["recall"], 12), round(r["precision"], 12))
               for name, r in result["subsets"].items()}}


@pytest.fixture(scope="module")
def clean(small_data) -> dict:
    """The clean run's numbers on the small data folder."""
    out = cli(*evaluate_args(small_data))
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["subsets"]["G1"]["n_queries"] == 3 and res["registry_size"] == int(MAX_APIS)
    return numbers(res)


@dataclass
class Ctx:
    data: Path  # the module's small data folder (do not damage it)
    tmp: Path  # this case's own folder
    made: list[Path]

    def variant(self, mutate: Callable[[Path], None]) -> Path:
        """A copy of the small data folder (toolenv linked) with ``mutate`` applied."""
        root = self.tmp / "toolbench"
        (root / "toolenv").mkdir(parents=True)
        (root / "toolenv" / "tools").symlink_to(self.data / "toolenv" / "tools", target_is_directory=True)
        for folder, _ in QUERY_FILES:
            if not (root / folder).exists():
                shutil.copytree(self.data / folder, root / folder)
        mutate(root)
        self.made.append(root)
        return root

    def query_file(self, content: str | bytes, folder: str = "test_instruction",
                   stem: str = "G1_instruction") -> Path:
        def write(root: Path) -> None:
            path = root / folder / f"{stem}.json"
            path.write_bytes(content if isinstance(content, bytes) else content.encode())

        return self.variant(write)

    def queries(self, edit: Callable[[list], object]) -> Path:
        """A variant whose G1 query list is replaced by ``edit(list)``."""
        first = json.loads((self.data / "test_instruction" / "G1_instruction.json").read_text())
        return self.query_file(json.dumps(edit(first)))


# --------------------------------------------------------------------------- cassettes and call stores


def _records(n: int = 3) -> list[dict]:
    from toolbench_lib.llm.factory import DEFAULT_CASSETTE

    with gzip.open(DEFAULT_CASSETTE, "rt", encoding="utf-8") as fh:
        return [json.loads(next(fh)) for _ in range(n)]


def _cassette(tmp: Path, lines: list[str] | bytes, name: str = "c.jsonl.gz", raw: bool = False) -> Path:
    path = tmp / name
    data = lines if isinstance(lines, bytes) else "".join(line + "\n" for line in lines).encode()
    path.write_bytes(data if raw else gzip.compress(data))
    return path


def good_cassette(tmp: Path) -> Path:
    return _cassette(tmp, [json.dumps(r) for r in _records()])


def changed_record(tmp: Path, **changes) -> Path:
    """A cassette of one record with ``changes`` in fields that are not part of its key."""
    return _cassette(tmp, [json.dumps({**_records(1)[0], **changes})])


def tampered_cassette(tmp: Path) -> Path:
    records = _records()
    records[1]["prompt"] += " changed"
    return _cassette(tmp, [json.dumps(r) for r in records])


def truncated_cassette(tmp: Path) -> Path:
    data = good_cassette(tmp).read_bytes()
    return _cassette(tmp, data[: len(data) // 2], "t.jsonl.gz", raw=True)


def call_store(tmp: Path) -> Path:
    """A real call store holding the cassette's first records."""
    from toolbench_lib.llm.cassettes import import_cassette
    from toolbench_lib.llm.store import CallStore

    path = tmp / "calls.sqlite"
    with CallStore(path) as store:
        import_cassette(good_cassette(tmp), store)
    return path


def damaged_row_store(tmp: Path) -> Path:
    path = call_store(tmp)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE calls SET json_schema = '{not json' WHERE rowid = 1")
    return path


def foreign_store(tmp: Path) -> Path:
    path = tmp / "foreign.sqlite"
    with sqlite3.connect(path) as conn:
        conn.execute("CREATE TABLE calls (key TEXT PRIMARY KEY, answer TEXT)")
    return path


def truncated_store(tmp: Path) -> Path:
    from toolbench_lib.llm.store import CallStore, call_key

    path = tmp / "big.sqlite"
    records = _records(1)
    with CallStore(path) as store:
        for i in range(200):
            record = {**records[0], "prompt": f"{records[0]['prompt']} {i}" * 3}
            record["key"] = call_key(record["backend"], record["model"], record["prompt_version"],
                                     record["system"], record["prompt"], record["json_schema"],
                                     record["temperature"], record["run"])
            store.put_record(record)
        store._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 3])
    return path


def empty_registry(tmp: Path) -> Path:
    """A data folder in ToolBench's layout without a single API."""
    root = tmp / "toolbench"
    (root / "toolenv" / "tools" / "Empty").mkdir(parents=True)
    (root / "test_instruction").mkdir()
    (root / "test_instruction" / "G1_instruction.json").write_text("[]")
    return root


def duplicate_key_cassette(tmp: Path) -> Path:
    """The first records with the second one again at the end, with another reply (line 2 and line 4)."""
    records = _records()
    return _cassette(tmp, [json.dumps(r) for r in [*records, {**records[1], "text": "[\"other\"]"}]])


def tokens_text_store(tmp: Path) -> Path:
    """A call store whose second row holds tokens_in='abc' (SQLite keeps text in an INTEGER column)."""
    path = call_store(tmp)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE calls SET tokens_in = 'abc' WHERE rowid = 2")
    return path


def other_reply_cassette(tmp: Path) -> Path:
    """The first record with another reply than the one :func:`call_store` holds."""
    return _cassette(tmp, [json.dumps({**_records(1)[0], "text": "[\"changed\"]"})], "other.jsonl.gz")


LONG_NAME = "n" * 300  # errno 36 on ext4, xfs, tmpfs (255 bytes at most)
NOT_UTF8 = "caf\udce9"  # the byte 0xe9 of a Latin-1 name, as Python receives it in argv
READ_ONLY = "/proc/sys/toolbench-probe"  # not writable even by root


def garbage_file(tmp: Path, name: str, content: bytes = b"this is not what it should be\n" * 50) -> Path:
    path = tmp / name
    path.write_bytes(content)
    return path


# --------------------------------------------------------------------------- the table

def ev(c: Ctx, *extra: str) -> list[str]:
    return evaluate_args(c.data, *extra)


def export(c: Ctx, store: Path) -> list[str]:
    return ["cassette", "export", "--store", str(store), "--out", str(c.tmp / "o.jsonl.gz")]


# (id, command builder, words the one line must hold)
ERROR_CASES: list[tuple[str, Callable[[Ctx], list], tuple[str, ...]]] = [
    # options
    ("k-zero", lambda c: ev(c, "--k", "0"), ("--k", "0", "1 to 1000")),
    ("k-negative", lambda c: ev(c, "--k", "-1"), ("--k", "-1", "1 to 1000")),
    ("k-text", lambda c: ev(c, "--k", "five"), ("--k", "five")),
    ("k-float", lambda c: ev(c, "--k", "2.5"), ("--k", "2.5")),
    ("runs-zero", lambda c: ev(c, "--method", "ptr", "--runs", "0"), ("--runs", "0", ">= 1")),
    ("runs-negative", lambda c: ev(c, "--runs", "-3"), ("--runs", "-3")),
    ("limit-zero", lambda c: ev(c, "--limit", "0"), ("--limit", "0", ">= 1")),
    ("limit-negative", lambda c: ev(c, "--limit", "-1"), ("--limit", "-1")),
    ("plan-limit-negative", lambda c: ev(c, "--plan-limit", "-1"), ("--plan-limit", "-1", ">= 0")),
    ("max-apis-zero", lambda c: ev(c, "--max-apis", "0"), ("--max-apis", "0", ">= 1")),
    ("max-apis-negative", lambda c: ev(c, "--max-apis", "-5"), ("--max-apis", "-5")),
    ("max-apis-above-registry", lambda c: ev(c, "--max-apis", "1000000"),
     ("--max-apis", "1000000", "registry has")),
    ("subset-unknown", lambda c: ev(c, "--subset", "G9"), ("query set", "G9")),
    ("subset-empty", lambda c: ev(c, "--subset", ""), ("--subset", "''")),
    ("gt-unknown", lambda c: ev(c, "--gt", "all"), ("--gt", "all")),
    ("backend-unknown", lambda c: ev(c, "--backend", "gpt"), ("--backend", "gpt")),
    ("method-unknown", lambda c: ev(c, "--method", "rag"), ("method", "rag")),
    ("method-empty", lambda c: ev(c, "--method", ","), ("method",)),
    ("temperature-nan", lambda c: ev(c, "--temperature", "nan"), ("--temperature", "nan")),
    ("temperature-negative", lambda c: ev(c, "--temperature", "-1"), ("--temperature", "-1")),
    ("temperature-too-high", lambda c: ev(c, "--temperature", "7"), ("--temperature", "7")),
    ("run-temperature-inf", lambda c: ev(c, "--run-temperature", "inf"),
     ("--run-temperature", "inf")),
    ("depth-zero", lambda c: ev(c, "--depth", "0"), ("--depth", "0")),
    ("workers-zero", lambda c: ev(c, "--workers", "0"), ("--workers", "0")),
    ("seed-negative", lambda c: ev(c, "--seed", "-1"), ("--seed", "-1")),
    ("data-dir-missing", lambda c: evaluate_args(c.tmp / "nowhere"), ("--data-dir", "nowhere")),
    ("data-dir-is-a-file", lambda c: evaluate_args(garbage_file(c.tmp, "f.txt")), ("--data-dir", "f.txt")),
    ("data-dir-wrong-layout", lambda c: ["data", "summary", "--data-dir", str(c.tmp)],
     ("not a ToolBench data folder", "Expected layout")),
    ("save-empty-path", lambda c: ev(c, "--save", ""), ("--save", "empty path")),
    ("data-dir-empty-path", lambda c: ev(c, "--data-dir", ""), ("--data-dir", "''")),
    ("env-data-folder-missing",
     lambda c: {"args": ["data", "summary"], "env": {"TOOLBENCH_DATA": str(c.tmp / "x")}},
     ("TOOLBENCH_DATA", "not a ToolBench data folder")),
    ("save-is-a-file", lambda c: ev(c, "--save", str(garbage_file(c.tmp, "out"))),
     ("--save", "not a folder")),
    ("cassette-missing", lambda c: ev(c, "--method", "ptr", "--cassette", str(c.tmp / "no.gz")),
     ("--cassette", "no.gz")),
    ("cassette-is-a-folder", lambda c: ev(c, "--method", "ptr", "--cassette", str(c.tmp)),
     ("--cassette", "not a file")),
    ("index-max-apis-zero", lambda c: ["index", "build", "--max-apis", "0"], ("--max-apis", "0")),
    ("index-seed-text", lambda c: ["index", "build", "--seed", "x"], ("--seed", "'x'")),
    ("reproduce-runs-zero", lambda c: ["reproduce", "--runs", "0"], ("--runs", "0")),
    ("reproduce-plan-limit-negative", lambda c: ["reproduce", "--plan-limit", "-2"], ("--plan-limit", "-2")),
    ("record-chunk-zero", lambda c: ["record", "stubs", "--chunk", "0"], ("--chunk", "0", ">= 1")),
    ("record-limit-zero", lambda c: ["record", "stubs", "--limit", "0"], ("--limit", "0")),
    ("record-runs-text", lambda c: ["record", "stubs", "--runs", "one,two"], ("--runs", "one,two")),
    ("record-runs-negative", lambda c: ["record", "stubs", "--runs", "0,-1"], ("--runs", "0,-1")),
    ("bench-docs-zero", lambda c: ["bench", "--docs", "0"], ("--docs", "0")),
    ("reproduce-run-name-escapes", lambda c: ["reproduce", "--run-name", "../x"], ("--run-name", "../x")),
    ("reproduce-notebooks-dir-missing", lambda c: ["reproduce", "--notebooks-dir", str(c.tmp / "nb")],
     ("--notebooks-dir", "no such folder")),
    ("export-run-name-escapes", lambda c: ["export", "trec", "--run-name", "a/b", "--out", str(c.tmp / "t")],
     ("--run-name", "a/b")),
    # cassettes
    ("cassette-info-missing", lambda c: ["cassette", "info", str(c.tmp / "none.jsonl.gz")],
     ("none.jsonl.gz",)),
    ("cassette-not-gzip", lambda c: ["cassette", "info", str(garbage_file(c.tmp, "plain.jsonl.gz"))],
     ("plain.jsonl.gz", "not a readable gzip")),
    ("cassette-truncated", lambda c: ["cassette", "info", str(truncated_cassette(c.tmp))],
     ("t.jsonl.gz", "truncated")),
    ("cassette-bad-json-line", lambda c: ["cassette", "info", str(_cassette(c.tmp, ["{not json"]))],
     ("c.jsonl.gz", "line 1")),
    ("cassette-list-line", lambda c: ["cassette", "info", str(_cassette(c.tmp, ["[1, 2, 3]"]))],
     ("c.jsonl.gz", "line 1", "JSON object")),
    ("cassette-missing-fields", lambda c: ["cassette", "info", str(_cassette(c.tmp, ['{"key": "x"}']))],
     ("c.jsonl.gz", "line 1", "lacks fields")),
    ("cassette-not-utf8", lambda c: ["cassette", "info", str(_cassette(c.tmp, b"\xff\xfe\xfa\n"))],
     ("c.jsonl.gz", "UTF-8")),
    ("cassette-tampered-record", lambda c: ["cassette", "info", str(tampered_cassette(c.tmp))],
     ("c.jsonl.gz", "line 2", "does not match")),
    ("cassette-field-wrong-type",
     lambda c: ["cassette", "info", str(changed_record(c.tmp, tokens_in="many"))],
     ("c.jsonl.gz", "line 1", "wrong type", "tokens_in")),
    ("cassette-reply-not-text",
     lambda c: ["cassette", "info", str(changed_record(c.tmp, text=5))],
     ("c.jsonl.gz", "line 1", "wrong type", "text")),
    ("cassette-import-truncated", lambda c: ["cassette", "import", str(truncated_cassette(c.tmp)),
                                             "--store", str(c.tmp / "s.sqlite")],
     ("t.jsonl.gz", "truncated")),
    ("replay-truncated-cassette", lambda c: ev(c, "--method", "ptr", "--backend", "replay",
                                                          "--cassette", str(truncated_cassette(c.tmp))),
     ("t.jsonl.gz", "truncated")),
    ("replay-not-gzip-cassette", lambda c: ev(c, "--method", "ptr", "--cassette",
                                                         str(garbage_file(c.tmp, "x.gz"))),
     ("x.gz", "gzip")),
    # the call store
    ("store-garbage", lambda c: export(c, garbage_file(c.tmp, "calls.sqlite")),
     ("calls.sqlite", "not a usable SQLite")),
    ("store-garbage-import", lambda c: ["cassette", "import", str(good_cassette(c.tmp)), "--store",
                                        str(garbage_file(c.tmp, "calls.sqlite"))],
     ("calls.sqlite", "SQLite")),
    ("store-missing-on-export", lambda c: export(c, c.tmp / "typo.sqlite"), ("typo.sqlite", "no such file")),
    ("store-without-the-model",
     lambda c: [*export(c, call_store(c.tmp)), "--llm-model", "nope"], ("calls.sqlite", "no call", "'nope'")),
    ("store-foreign-table", lambda c: export(c, foreign_store(c.tmp)), ("foreign.sqlite", "lacks columns")),
    ("store-damaged-row", lambda c: export(c, damaged_row_store(c.tmp)), ("calls.sqlite", "damaged")),
    ("store-truncated", lambda c: export(c, truncated_store(c.tmp)), ("big.sqlite",)),
    # query files
    ("queries-json-object", lambda c: evaluate_args(c.query_file('{"queries": []}')),
     ("G1_instruction.json", "JSON object")),
    ("queries-list-of-numbers", lambda c: evaluate_args(c.query_file("[1, 2, 3]")),
     ("G1_instruction.json", "item 0", "number")),
    ("queries-not-json", lambda c: evaluate_args(c.query_file('[{"query": "cut off')),
     ("G1_instruction.json", "not valid JSON")),
    ("queries-not-utf8", lambda c: evaluate_args(c.query_file(b"[\xff\xfe]")),
     ("G1_instruction.json", "UTF-8")),
    ("queries-empty-list", lambda c: evaluate_args(c.query_file("[]")), ("G1_instruction", "no queries")),
    ("queries-no-text", lambda c: evaluate_args(c.queries(lambda q: [{**q[0], "query": ""}, *q[1:]])),
     ("G1_instruction.json", "item 0", "no query text")),
    ("queries-duplicate-id", lambda c: evaluate_args(c.queries(lambda q: [q[0], q[0], *q[1:]])),
     ("G1_instruction.json", "item 1", "again")),
    ("queries-api-list-not-list", lambda c: evaluate_args(c.queries(lambda q: [{**q[0], "api_list": "x"}])),
     ("G1_instruction.json", "api_list")),
    ("queries-relevant-not-pairs",
     lambda c: evaluate_args(c.queries(lambda q: [{**q[0], "relevant APIs": [1]}])),
     ("G1_instruction.json", "relevant APIs")),
    ("registry-empty", lambda c: ["data", "summary", "--data-dir", str(empty_registry(c.tmp))],
     ("no API found", "toolbench")),
    ("query-set-absent",
     lambda c: evaluate_args(c.variant(lambda r: shutil.rmtree(r / "test_instruction_original"))),
     ("G3_instruction_original", "no queries")),
    # round three: k and depth bounded (a k of 100,000 took 547 s on one query)
    ("k-above-the-cap", lambda c: ev(c, "--k", "100000"), ("--k", "100000", "1 to 1000")),
    ("k-huge-integer", lambda c: ev(c, "--k", "9" * 30), ("--k", "9" * 30)),
    ("k-above-the-registry", lambda c: ev(c, "--k", "500"), ("--k", "500", f"1 to {MAX_APIS}")),
    ("depth-above-the-cap", lambda c: ev(c, "--depth", "100000"), ("--depth", "100000", "1 to 1000")),
    ("depth-above-the-registry", lambda c: ev(c, "--depth", "200"), ("--depth", "200", f"1 to {MAX_APIS}")),
    ("depth-text", lambda c: ev(c, "--depth", "deep"), ("--depth", "'deep'")),
    ("limit-float-text", lambda c: ev(c, "--limit", "1e3"), ("--limit", "1e3")),
    ("runs-text", lambda c: ev(c, "--runs", "two"), ("--runs", "two")),
    ("temperature-text", lambda c: ev(c, "--temperature", "warm"), ("--temperature", "warm")),
    ("workers-negative", lambda c: ev(c, "--workers", "-4"), ("--workers", "-4")),
    ("max-apis-float", lambda c: ev(c, "--max-apis", "2.5"), ("--max-apis", "2.5")),
    ("subset-path-like", lambda c: ev(c, "--subset", "../G1"), ("query set", "../G1")),
    ("plan-limit-text", lambda c: ev(c, "--plan-limit", "all"), ("--plan-limit", "all")),
    # round three: every path option checked without raising (errno 36, non-UTF-8 bytes, permissions)
    ("save-name-too-long", lambda c: ev(c, "--save", str(c.tmp / LONG_NAME)), ("--save", "300 bytes", "255")),
    ("save-name-with-no-room-for-its-copy", lambda c: ev(c, "--save", str(c.tmp / ("n" * 250))),
     ("--save", "250 bytes", "at most 231")),
    ("save-here", lambda c: ev(c, "--save", "."), ("--save", "name the folder")),
    ("save-parent", lambda c: ev(c, "--save", ".."), ("--save", "name the folder")),
    ("save-path-too-long", lambda c: ev(c, "--save", str(c.tmp / "/".join(["d" * 200] * 25))),
     ("--save", "4095")),
    ("save-not-utf8", lambda c: ev(c, "--save", str(c.tmp / NOT_UTF8)), ("--save", "caf", "UTF-8")),
    ("save-read-only", lambda c: ev(c, "--save", READ_ONLY), ("--save", "/proc/sys", "not writable")),
    ("save-below-a-file", lambda c: ev(c, "--save", str(garbage_file(c.tmp, "f") / "sub")),
     ("--save", "is a file")),
    ("data-dir-name-too-long", lambda c: evaluate_args(c.tmp / LONG_NAME), ("--data-dir", "255")),
    ("data-dir-not-utf8", lambda c: evaluate_args(c.tmp / NOT_UTF8), ("--data-dir", "caf", "UTF-8")),
    ("cassette-name-too-long", lambda c: ev(c, "--method", "ptr", "--cassette", str(c.tmp / LONG_NAME)),
     ("--cassette", "255")),
    ("queries-name-too-long", lambda c: ev(c, "--queries", str(c.tmp / LONG_NAME)), ("--queries", "255")),
    ("queries-path-not-utf8", lambda c: ev(c, "--queries", str(c.tmp / NOT_UTF8)), ("--queries", "UTF-8")),
    ("summary-queries-too-long", lambda c: ["data", "summary", "--queries", str(c.tmp / LONG_NAME)],
     ("--queries", "255")),
    ("index-data-dir-too-long", lambda c: ["index", "build", "--data-dir", str(c.tmp / LONG_NAME)],
     ("--data-dir", "255")),
    ("record-data-dir-not-utf8", lambda c: ["record", "stubs", "--data-dir", str(c.tmp / NOT_UTF8)],
     ("--data-dir", "UTF-8")),
    ("trec-out-name-too-long", lambda c: ["export", "trec", "--out", str(c.tmp / LONG_NAME)],
     ("--out", "255")),
    ("trec-out-not-utf8", lambda c: ["export", "trec", "--out", str(c.tmp / NOT_UTF8)], ("--out", "UTF-8")),
    ("trec-out-read-only", lambda c: ["export", "trec", "--out", READ_ONLY], ("--out", "not writable")),
    ("export-out-name-too-long", lambda c: [*export(c, call_store(c.tmp))[:-1], str(c.tmp / LONG_NAME)],
     ("--out", "255")),
    ("export-out-is-a-folder", lambda c: [*export(c, call_store(c.tmp))[:-1], str(c.tmp)],
     ("--out", "a folder")),
    ("export-out-read-only", lambda c: [*export(c, call_store(c.tmp))[:-1], READ_ONLY + "/c.jsonl.gz"],
     ("--out", "not writable")),
    ("export-out-not-utf8-folder",
     lambda c: [*export(c, call_store(c.tmp))[:-1], str(garbage_file(c.tmp, "f") / NOT_UTF8)],
     ("--out", "UTF-8")),
    ("export-store-name-too-long", lambda c: export(c, c.tmp / LONG_NAME), ("--store", "255")),
    ("import-store-name-too-long",
     lambda c: ["cassette", "import", str(good_cassette(c.tmp)), "--store", str(c.tmp / LONG_NAME)],
     ("--store", "255")),
    ("import-store-not-utf8",
     lambda c: ["cassette", "import", str(good_cassette(c.tmp)), "--store", str(c.tmp / NOT_UTF8)],
     ("--store", "UTF-8")),
    ("import-store-read-only",
     lambda c: ["cassette", "import", str(good_cassette(c.tmp)), "--store", READ_ONLY + "/s.sqlite"],
     ("--store", "not writable")),
    ("info-name-too-long", lambda c: ["cassette", "info", str(c.tmp / LONG_NAME)], ("cassette", "255")),
    ("info-not-utf8", lambda c: ["cassette", "info", str(c.tmp / NOT_UTF8)], ("cassette", "UTF-8")),
    ("reproduce-notebooks-dir-too-long", lambda c: ["reproduce", "--notebooks-dir", str(c.tmp / LONG_NAME)],
     ("--notebooks-dir", "255")),
    ("reproduce-cassette-not-utf8", lambda c: ["reproduce", "--cassette", str(c.tmp / NOT_UTF8)],
     ("--cassette", "UTF-8")),
    # round three: a key recorded twice with two replies, a damaged row exported, a store's other reply
    ("info-duplicate-key", lambda c: ["cassette", "info", str(duplicate_key_cassette(c.tmp))],
     ("c.jsonl.gz", "line 2", "line 4", "different replies")),
    ("import-duplicate-key", lambda c: ["cassette", "import", str(duplicate_key_cassette(c.tmp)),
                                        "--store", str(c.tmp / "s.sqlite")],
     ("c.jsonl.gz", "line 2", "line 4", "different replies")),
    ("replay-duplicate-key",
     lambda c: ev(c, "--method", "ptr", "--cassette", str(duplicate_key_cassette(c.tmp))),
     ("c.jsonl.gz", "line 2", "line 4", "different replies")),
    ("export-row-tokens-text", lambda c: export(c, tokens_text_store(c.tmp)),
     ("calls.sqlite", "row 2", "tokens_in", "not written")),
    # round four: a FAISS thread count that is not a whole number is one line before any work
    ("faiss-threads-text", lambda c: {"args": ["data", "summary"], "env": {"TOOLBENCH_FAISS_THREADS": "two"}},
     ("TOOLBENCH_FAISS_THREADS", "'two'", "whole number")),
    ("faiss-threads-zero", lambda c: {"args": ev(c), "env": {"TOOLBENCH_FAISS_THREADS": "0"}},
     ("TOOLBENCH_FAISS_THREADS", "'0'")),
    ("torch-threads-text", lambda c: {"args": ["data", "summary"], "env": {"TOOLBENCH_TORCH_THREADS": "two"}},
     ("TOOLBENCH_TORCH_THREADS", "'two'", "whole number")),
    ("import-other-reply-than-the-store",
     lambda c: ["cassette", "import", str(other_reply_cassette(c.tmp)), "--store", str(call_store(c.tmp))],
     ("other.jsonl.gz", "another reply", "calls.sqlite")),
]


@pytest.mark.slow
@pytest.mark.parametrize("case", ERROR_CASES, ids=[c[0] for c in ERROR_CASES])
def test_bad_input_is_one_clear_line(case, small_data, made_folders, tmp_path):
    name, build, words = case
    built = build(Ctx(small_data, tmp_path, made_folders))
    args, env = (built["args"], built["env"]) if isinstance(built, dict) else (built, None)
    start = time.perf_counter()
    out = cli(*args, env=env, timeout=60)
    assert time.perf_counter() - start < 30, f"{name} took {time.perf_counter() - start:.1f} s"
    assert "Traceback" not in out.stderr, out.stderr
    assert out.returncode in (1, 2), (out.returncode, out.stderr)
    lines = problem_lines(out.stderr)
    assert len(lines) == 1, out.stderr
    for word in words:
        assert word in lines[0], (word, lines[0])
    assert out.stdout.strip() == ""  # no partial result
    OUTCOMES[name] = "clear error"



def test_a_cassette_command_changes_no_file_it_refuses(tmp_path):
    """``cassette export`` only reads its store: a SQLite file of other tables is refused in one line and
    left byte for byte; ``cassette import`` of a truncated cassette refuses before it makes a store."""
    other = tmp_path / "other.sqlite"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE foo (y TEXT)")
    before = other.read_bytes()
    out = cli("cassette", "export", "--store", other, "--out", tmp_path / "o.jsonl.gz")
    lines = problem_lines(out.stderr)
    assert out.returncode == 2 and len(lines) == 1 and "no calls table" in lines[0], out.stderr
    assert other.read_bytes() == before and not (tmp_path / "o.jsonl.gz").exists()
    whole = gzip.compress(b'{"key": "k"}\n' * 200)
    (cut := tmp_path / "cut.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    out = cli("cassette", "import", cut, "--store", tmp_path / "new.sqlite")
    assert out.returncode == 2 and len(problem_lines(out.stderr)) == 1, out.stderr
    assert not (tmp_path / "new.sqlite").exists()

# --------------------------------------------------------------------------- repaired damage


def _processed(data: Path) -> Path:
    folder = PROCESSED_DIR / sources_fingerprint(data)
    assert (folder / CHECKSUMS).exists()
    return folder


def _overwrite_same_size(path: Path) -> None:
    size = path.stat().st_size
    path.write_bytes((b"\x00garbage" * (size // 8 + 1))[:size])


def _dead_pid() -> int:
    for pid in range(4_000_000, 3_000_000, -7919):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:
            continue
    raise RuntimeError("no free pid found")


REPAIRED_CASES: list[tuple[str, Callable[[Path], None]]] = [
    ("processed-registry-overwritten", lambda f: _overwrite_same_size(f / "registry.parquet")),
    ("processed-queries-truncated",
     lambda f: (f / "queries.parquet").write_bytes((f / "queries.parquet").read_bytes()[:100])),
    ("processed-queries-empty", lambda f: (f / "queries.parquet").write_bytes(b"")),
    ("processed-checksums-missing", lambda f: (f / CHECKSUMS).unlink()),
    ("processed-checksums-garbage", lambda f: (f / CHECKSUMS).write_text("[1,")),
    ("processed-stats-garbage", lambda f: (f / "stats.json").write_text("{")),
    ("processed-registry-missing", lambda f: (f / "registry.parquet").unlink()),
]


@pytest.fixture(scope="module")
def clean_summary(small_data) -> dict:
    """``data summary --json`` of the small data folder (building its processed cache)."""
    out = cli("data", "summary", "--json", "--data-dir", small_data)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.parametrize("case", REPAIRED_CASES, ids=[c[0] for c in REPAIRED_CASES])
def test_damaged_processed_cache_is_rebuilt(case, small_data, clean_summary):
    name, damage = case
    damage(_processed(small_data))
    out = cli("data", "summary", "--json", "--data-dir", small_data)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert json.loads(out.stdout) == clean_summary
    assert "rebuilding" in out.stderr
    assert _processed(small_data)  # written again, with its checksums
    OUTCOMES[name] = "repaired"


@pytest.mark.slow
def test_overwritten_registry_gives_the_clean_numbers(small_data, clean):
    """The issue's case: a cache file overwritten in place (same size) was used as is; now it is rebuilt."""
    _overwrite_same_size(_processed(small_data) / "registry.parquet")
    out = cli(*evaluate_args(small_data))
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    assert numbers(json.loads(out.stdout)) == clean and "rebuilding" in out.stderr
    OUTCOMES["processed-registry-overwritten-evaluate"] = "repaired"


@pytest.mark.slow
def test_subset_named_twice_counts_once(small_data, clean):
    """G1 given three times (also as G1_instruction): evaluated once, as in the clean run."""
    out = cli(*evaluate_args(small_data, "--subset", "G1", "--subset", "G1_instruction"))
    assert out.returncode == 0, out.stderr
    assert numbers(json.loads(out.stdout)) == clean
    OUTCOMES["subset-named-twice"] = "repaired"


def test_stale_temporary_files_are_removed(small_data, clean_summary):
    folder = _processed(small_data)
    dead = folder / f".registry.parquet.{_dead_pid()}.tmp.parquet"
    old_live = folder / f".queries.parquet.{os.getpid()}.tmp.parquet"
    fresh_live = folder / f".stats.json.{os.getpid()}.tmp.json"
    for path in (dead, old_live, fresh_live):
        path.write_bytes(b"half-written")
    two_hours_ago = time.time() - 7200
    os.utime(old_live, (two_hours_ago, two_hours_ago))
    out = cli("data", "summary", "--json", "--data-dir", small_data)
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == clean_summary
    assert not dead.exists() and not old_live.exists()
    assert fresh_live.exists()  # a live process may still be writing it
    fresh_live.unlink()
    OUTCOMES["stale-temporary-files"] = "repaired"


# --------------------------------------------------------------------------- an adversarial recorded reply


@pytest.mark.slow
def test_adversarial_reply_in_a_cassette_falls_back(small_data, tmp_path):
    """One recorded stub reply is a 4,300-digit integer: the run completes and only that stub falls back."""
    from toolbench_lib.llm.cached import CachedLLM
    from toolbench_lib.llm.cassettes import export_cassette
    from toolbench_lib.llm.parsing import parse_stubs
    from toolbench_lib.llm.prompts import STUB_PROMPT
    from toolbench_lib.llm.rules import RulesBackend
    from toolbench_lib.llm.store import CallStore
    from toolbench_lib.study.result import call

    queries = json.loads((small_data / "test_instruction" / "G1_instruction.json").read_text())[:3]
    with CallStore(tmp_path / "calls.sqlite") as store:
        llm = CachedLLM(RulesBackend(), store)
        for q in queries:
            call(llm, STUB_PROMPT, 0, 0.0, query=str(q["query"]).strip())
        clean_cassette = tmp_path / "clean.jsonl.gz"
        assert export_cassette(store, clean_cassette) == 3
    with gzip.open(clean_cassette, "rt") as fh:
        records = [json.loads(line) for line in fh]
    target = next(r for r in records if str(queries[1]["query"]).strip() in r["prompt"])
    target["text"] = "[0x" + "f" * 4000 + "]"
    assert sum(parse_stubs(r["text"], "q")[1] for r in records) == 1  # the other recorded replies parse
    bad_cassette = _cassette(tmp_path, [json.dumps(r) for r in records], "adversarial.jsonl.gz")

    out = cli("evaluate", "--method", "ptr", "--backend", "replay", "--cassette", bad_cassette, "--runs", "1",
              "--plan-limit", "0", "--data-dir", small_data, "--model", "all-MiniLM-L6-v2",
              "--subset", "G1", "--limit", "3", "--max-apis", MAX_APIS, "--save", tmp_path / "run", "--json")
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    import pandas as pd

    stubs = pd.read_parquet(tmp_path / "run" / "stubs.parquet")
    got = {k: ([(n, r) for n, r in zip(g["name"], g["reasoning"], strict=True)], bool(g["fell_back"].iloc[0]))
           for k, g in stubs.groupby("qkey")}
    expected = {}
    for q in queries:
        text = str(q["query"]).strip()
        parsed, fell_back = parse_stubs(next(r for r in records if text in r["prompt"])["text"], text)
        expected[f"G1_instruction:{q['query_id']}"] = ([(s.name, s.reasoning) for s in parsed], fell_back)
    assert got == expected
    assert [k for k, (_, fb) in got.items() if fb] == [f"G1_instruction:{queries[1]['query_id']}"]
    assert got[f"G1_instruction:{queries[1]['query_id']}"][0] == [(str(queries[1]["query"]).strip(),
                                                                  "fallback: raw query")]
    assert json.dumps(json.loads(out.stdout)).count('"fallback_stubs": 1') == 1
    OUTCOMES["adversarial-reply-in-cassette"] = "fell back"


# Probes checked by single tests below (each records its outcome in OUTCOMES): the earlier rounds' and round
# three's (query docs without a key field, a failed save, stale temporary files of a save, papermill x2).
SINGLE_PROBES = ("processed-registry-overwritten-evaluate", "subset-named-twice", "stale-temporary-files",
                 "adversarial-reply-in-cassette", "query-docs-without-key-fields", "save-disk-full",
                 "save-stale-temporary-files", "papermill-unknown-set-y", "papermill-unknown-set-p")


def test_table_size():
    """At least 120 bad inputs, damaged caches and parameters are tried (the table, the configuration's
    table and the single probes), each with its own name."""
    assert len(ERROR_CASES) + len(REPAIRED_CASES) + len(CONFIG_CASES) + len(SINGLE_PROBES) >= 120
    assert len({name for name, *_ in ERROR_CASES}) == len(ERROR_CASES)


# --------------------------------------------------------------------------- the notebooks' configuration

CONFIG_CASES = [
    ({"k": 0}, "k: 0"), ({"k": True}, "k: True"), ({"k": 2.5}, "k: 2.5"), ({"runs": 0}, "runs: 0"),
    ({"depth": -1}, "depth: -1"), ({"limit": 0}, "limit: 0"), ({"plan_limit": -1}, "plan_limit: -1"),
    ({"max_apis": 0}, "max_apis: 0"), ({"seed": -1}, "seed: -1"), ({"scale_seeds": 0}, "scale_seeds: 0"),
    ({"scale_sizes": [1000, 0]}, "scale_sizes: 0"), ({"scale_sizes": []}, "scale_sizes: []"),
    ({"subsets": ["../G1"]}, "subsets: unknown query set '../G1'"), ({"subsets": "G1"}, "subsets: 'G1'"),
    ({"subsets": []}, "subsets: []"), ({"backend": "gpt"}, "backend: 'gpt'"),
    ({"temperature": float("nan")}, "temperature: nan"), ({"run_temperature": 5}, "run_temperature: 5"),
    ({"run_name": "../elsewhere"}, "run_name: '../elsewhere'"), ({"run_name": ""}, "run_name: ''"),
    ({"smoke": "yes"}, "smoke: 'yes'"), ({"data_dir": "/no/such/folder"}, "data_dir: '/no/such/folder'"),
    ({"cassette": "/no/such.jsonl.gz"}, "cassette: '/no/such.jsonl.gz'"),
    # round three: ranges, types of -y/-f values, paths
    ({"k": 100000}, "k: 100000 is not allowed; expected an integer from 1 to 1000"),
    ({"depth": 5000}, "depth: 5000"), ({"plan_k": 1001}, "plan_k: 1001"),
    ({"k": "5"}, "k: '5'"), ({"runs": "2"}, "runs: '2'"), ({"limit": "10"}, "limit: '10'"),
    ({"temperature": "0.3"}, "temperature: '0.3'"), ({"smoke": 1}, "smoke: 1"),
    ({"scale_sizes": "1000"}, "scale_sizes: '1000'"), ({"scale_sizes": "[1000, -1]"}, "scale_sizes: -1"),
    ({"subsets": [5]}, "subsets: unknown query set 5"),
    ({"subsets": [None]}, "subsets: unknown query set None"),
    ({"subsets": '["../G1"]'}, "subsets: unknown query set '../G1'"), ({"subsets": "[G1"}, "subsets: '[G1'"),
    ({"data_dir": "/tmp/" + LONG_NAME}, "data_dir: '/tmp/nnnn"), ({"data_dir": 5}, "data_dir: 5"),
    ({"data_dir": "/tmp/" + NOT_UTF8}, "data_dir: '/tmp/caf\\udce9' is not allowed; the path is not UTF-8"),
    ({"outputs_dir": "/tmp/" + LONG_NAME}, "outputs_dir: '/tmp/nnnn"),
    ({"outputs_dir": READ_ONLY}, f"outputs_dir: '{READ_ONLY}' is not allowed; /proc/sys is not writable"),
    ({"cassette": "/tmp/" + LONG_NAME}, "cassette: '/tmp/nnnn"),
]


@pytest.mark.parametrize("params,message", CONFIG_CASES, ids=[m.split(":")[0] + "-" + str(i)
                                                             for i, (_, m) in enumerate(CONFIG_CASES)])
def test_experiment_config_rejects_bad_fields(params, message):
    from toolbench_lib.study.experiment import ExperimentConfig
    from toolbench_lib.study.validation import UsageError

    with pytest.raises(UsageError) as info:
        ExperimentConfig(**params)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def _tiny_data_folder(root: Path, user_sets: tuple[str, ...] = ()) -> Path:
    """A folder in ToolBench's layout (no API needed: only its set names are read)."""
    (root / "toolenv" / "tools").mkdir(parents=True)
    (root / "test_instruction").mkdir()
    for name in user_sets:
        (root / "test_instruction" / f"{name}.json").write_text("[]")
    return root


@pytest.mark.parametrize("form", ["list", "text"])
def test_an_unknown_set_is_refused_in_every_form(form, tmp_path):
    """``-y 'subsets: ["G9"]'`` (a list) and ``-p subsets '["G9"]'`` (text) meet the same check, against
    the data folder's own sets, before any run folder is read or made."""
    from toolbench_lib.study.experiment import ExperimentConfig
    from toolbench_lib.study.validation import UsageError

    data = _tiny_data_folder(tmp_path / "toolbench", user_sets=("mine",))
    value = ["G9"] if form == "list" else '["G9"]'
    before = sorted(tmp_path.rglob("*"))
    with pytest.raises(UsageError) as info:
        ExperimentConfig.from_params(data_dir=str(data), subsets=value, outputs_dir=str(tmp_path / "out"))
    message = str(info.value)
    assert message.startswith("subsets: unknown query set 'G9'") and "mine" in message and "\n" not in message
    assert sorted(tmp_path.rglob("*")) == before
    mine = '["mine", "G1"]' if form == "text" else ["mine", "G1"]
    cfg = ExperimentConfig.from_params(data_dir=str(data), subsets=mine, outputs_dir=str(tmp_path / "out"))
    assert cfg.subsets == ["mine", "G1"]


def test_experiment_config_keeps_a_set_once():
    from toolbench_lib.study.experiment import ExperimentConfig

    cfg = ExperimentConfig(subsets=["G1", "G1_instruction", "G3", "G1"])
    assert cfg.subsets == ["G1", "G3"]
    assert ExperimentConfig().subsets == ["G1", "G2", "G3"]


# --------------------------------------------------------------------------- caches read in-process


def test_damaged_similarity_cache_is_computed_again(tmp_path):
    """A cached similarity matrix overwritten in place (same size, valid header) is never used."""
    import numpy as np

    from toolbench_lib.analysis.similarity import _load_or_compute
    from toolbench_lib.data.atomic import checksum_path

    calls = []

    def compute():
        calls.append(1)
        return np.arange(12, dtype=np.float32).reshape(3, 4)

    path = tmp_path / "rtp.npy"
    clean = _load_or_compute(path, compute)
    assert np.array_equal(_load_or_compute(path, compute), clean) and len(calls) == 1  # read back
    damages = [
        lambda: np.save(path, np.zeros((3, 4), dtype=np.float32)),  # same size, loads fine, wrong numbers
        lambda: checksum_path(path).unlink(),
        lambda: path.write_bytes(path.read_bytes()[:40]),
        lambda: checksum_path(path).write_text("0" * 64),
    ]
    for i, damage in enumerate(damages, start=2):
        damage()
        assert np.array_equal(_load_or_compute(path, compute), clean)
        assert len(calls) == i  # computed again, not read
        assert np.array_equal(_load_or_compute(path, compute), clean) and len(calls) == i  # and cached again


def test_damaged_stored_study_is_never_read(tmp_path, caplog):
    """A stored study whose table changed after it was written is refused (and run again by get_study)."""
    import pandas as pd

    from toolbench_lib.study.experiment import _stored_study
    from toolbench_lib.study.stored import TABLE_CHECKSUMS, StoredStudyError, StudyResult

    rankings = pd.DataFrame({"qkey": ["G1_instruction:1"] * 3, "method": "rtp", "run": 0, "rank": [1, 2, 3],
                             "row": [0, 1, 2], "api_id": ["a", "b", "c"], "score": [0.9, 0.8, 0.7]})
    prov = {"model": "all-MiniLM-L6-v2", "settings": {"runs": 1, "methods": ["rtp"]}}
    study = StudyResult(pd.DataFrame({"qkey": ["G1_instruction:1"], "candidates": [["a"]]}), pd.DataFrame(),
                        rankings, rankings.assign(text_idx=0), pd.DataFrame(), pd.DataFrame(), prov)
    folder = study.save(tmp_path / "runs" / "abc")
    assert StudyResult.load(folder).ranking("rtp") == {"G1_instruction:1": ["a", "b", "c"]}
    path = folder / "rankings.parquet"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte, same size
    path.write_bytes(bytes(data))
    with pytest.raises(StoredStudyError, match="rankings.parquet does not match its checksum"):
        StudyResult.load(folder)
    assert _stored_study(folder, "all-MiniLM-L6-v2") is None and "running it again" in caplog.text
    study.save(folder)
    (folder / TABLE_CHECKSUMS).unlink()  # stored before checksums existed: not trusted either
    with pytest.raises(StoredStudyError, match="incomplete or damaged"):
        StudyResult.load(folder)


@pytest.mark.parametrize("exc,code,line", [
    (TypeError("bad operand"), 1, "error: TypeError: bad operand (rerun with -v to see where)"),
    (OSError(28, "No space left on device"), 2, "error: [Errno 28] No space left on device"),
    (sqlite3.OperationalError("database is locked"), 2, "error: database is locked"),
    (KeyError("G9"), 2, "error: G9"),
    (KeyboardInterrupt(), 130, "error: interrupted"),
])
def test_any_error_left_is_one_line(exc, code, line, monkeypatch, capsys):
    """Whatever still reaches the top of the command line ends as one line and an exit code."""
    from toolbench_lib import cli

    def fail(args):
        raise exc

    monkeypatch.setattr(cli, "cmd_data_summary", fail)
    assert cli.main(["data", "summary"]) == code
    err = capsys.readouterr().err
    assert problem_lines(err) == [line] and "Traceback" not in err


# --------------------------------------------------------------------------- round three: query-file docs


def _with_incomplete_docs(queries: list) -> list:
    """G1's first query with four more api_list docs, each lacking a field of its registry key, and a
    relevant pair naming one of them."""
    first = dict(queries[0])
    doc = first["api_list"][0]
    no_tool = {k: v for k, v in doc.items() if k != "tool_name"} | {"api_name": "Probe endpoint A"}
    no_category = {k: v for k, v in doc.items() if k != "category_name"} | {"api_name": "Probe endpoint B"}
    no_category_known = {k: v for k, v in doc.items() if k != "category_name"}  # an API the registry has
    blank_name = {**doc, "api_name": "  "}
    first["api_list"] = [*first["api_list"], no_tool, no_category, no_category_known, blank_name]
    first["relevant APIs"] = [*first["relevant APIs"], [doc["tool_name"], "Probe endpoint B"]]
    return [first, *queries[1:]]


def test_incomplete_query_docs_never_join_the_registry(small_data, made_folders, tmp_path, clean_summary):
    """Before: a doc without tool_name became ``Data/unnamed/...``, one without category_name a new API
    ``/tool/api`` (also a duplicate of an existing one), and the ground truth pointed at them."""
    data = Ctx(small_data, tmp_path, made_folders).queries(_with_incomplete_docs)
    out = cli("data", "summary", "--json", "--data-dir", data)
    assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
    s = json.loads(out.stdout)
    assert (s["apis"], s["tools"], s["categories"]) == (clean_summary["apis"], clean_summary["tools"],
                                                        clean_summary["categories"])
    assert s["unresolved_gt_pairs_by_definition"]["candidates"] == (
        clean_summary["unresolved_gt_pairs_by_definition"]["candidates"] + 4)
    assert s["unresolved_gt_pairs_by_definition"]["relevant"] == (
        clean_summary["unresolved_gt_pairs_by_definition"]["relevant"] + 1)
    n = len(json.loads((small_data / "test_instruction" / "G1_instruction.json").read_text())[0]["api_list"])
    warned = [line for line in out.stderr.splitlines() if "left out of the registry" in line]
    for position, field in zip(range(n, n + 4), ("tool_name", "category_name", "category_name", "api_name"),
                               strict=True):
        assert any("G1_instruction.json" in w and "item 0" in w and f"api_list[{position}]" in w
                   and f"no {field}" in w for w in warned), (position, field, warned)
    registry = pd.read_parquet(PROCESSED_DIR / sources_fingerprint(data) / "registry.parquet")
    assert not registry["tool_key"].eq("unnamed").any() and not registry["category"].eq("").any()
    OUTCOMES["query-docs-without-key-fields"] = "clear warning, counted unresolved"


# --------------------------------------------------------------------------- round three: a save folder

FILL_SCRIPT = """
import resource, signal, sys
import numpy as np, pandas as pd
from pathlib import Path
from toolbench_lib.study.result import StudyResult
from toolbench_lib.study.validation import report

rng = np.random.default_rng(0)
n = 200_000
rankings = pd.DataFrame({"qkey": "G1_instruction:1", "method": "rtp", "run": 0, "rank": np.arange(n),
                         "row": 0, "api_id": [f"api-{x:x}" for x in rng.integers(0, 2**60, n)],
                         "score": rng.random(n)})
# the queries table (written first) differs from the stored one: it must not replace it either
study = StudyResult(pd.DataFrame({"qkey": ["G1_instruction:9"], "candidates": [["z"]]}), pd.DataFrame(),
                    rankings, pd.DataFrame(), pd.DataFrame(), pd.DataFrame(),
                    {"model": "m", "settings": {"runs": 1}})
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG, as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (256 * 1024, 256 * 1024))
try:
    study.save(Path(sys.argv[1]))
except Exception as exc:
    sys.exit(report(exc))
"""


def _small_study():
    from toolbench_lib.study.stored import StudyResult

    rankings = pd.DataFrame({"qkey": ["G1_instruction:1"] * 3, "method": "rtp", "run": 0, "rank": [1, 2, 3],
                             "row": [0, 1, 2], "api_id": ["a", "b", "c"], "score": [0.9, 0.8, 0.7]})
    return StudyResult(pd.DataFrame({"qkey": ["G1_instruction:1"], "candidates": [["a"]]}), pd.DataFrame(),
                       rankings, rankings.assign(text_idx=0), pd.DataFrame(), pd.DataFrame(),
                       {"model": "m", "settings": {"runs": 1}})


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder.parent)): p.read_bytes() for p in sorted(folder.parent.rglob("*"))
            if p.is_file()}


def test_a_failed_save_names_the_file_and_leaves_the_folder_as_it_was(tmp_path):
    """A write that fails half-way (a file-size limit: EFBIG, as a full disk gives ENOSPC) leaves the
    study folder byte for byte as it was, no temporary folder beside it, and one line naming the file."""
    from toolbench_lib.study.stored import StudyResult

    folder = _small_study().save(tmp_path / "run")
    (folder / "notes.txt").write_text("the user's own file")
    before = _snapshot(folder)
    out = subprocess.run([sys.executable, "-c", FILL_SCRIPT, str(folder)], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 2 and "Traceback" not in out.stderr, out.stderr
    [line] = problem_lines(out.stderr)
    assert str(folder / "rankings.parquet") in line and "left as it was" in line
    assert _snapshot(folder) == before
    assert StudyResult.load(folder).ranking("rtp") == {"G1_instruction:1": ["a", "b", "c"]}
    OUTCOMES["save-disk-full"] = "clear error"


def test_a_save_removes_stale_temporary_files_of_dead_processes(tmp_path):
    from toolbench_lib.study.stored import StudyResult

    folder = _small_study().save(tmp_path / "run")
    dead = _dead_pid()
    inside = folder / f".queries.parquet.{dead}.tmp.parquet"  # left by a SIGTERM during --save
    inside.write_bytes(b"half")
    beside = tmp_path / f".run.{dead}.tmp.d"
    beside.mkdir()
    (beside / "rankings.parquet").write_bytes(b"half")
    live = folder / f".stats.json.{os.getpid()}.tmp.json"  # a live writer's file stays
    live.write_bytes(b"being written")
    _small_study().save(folder)
    assert not inside.exists() and not beside.exists() and live.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run"]
    assert StudyResult.load(folder).ranking("rtp") == {"G1_instruction:1": ["a", "b", "c"]}
    OUTCOMES["save-stale-temporary-files"] = "repaired"


# --------------------------------------------------------------------------- round three: notebook parameters


@pytest.mark.slow
@pytest.mark.parametrize("form", [["-y", 'subsets: ["G9"]'], ["-p", "subsets", '["G9"]']],
                         ids=["yaml", "text"])
def test_papermill_refuses_an_unknown_set_before_writing(form, tmp_path, real_data_dir):
    """Before: ``-y 'subsets: ["G9"]'`` ran notebook 01 to the end and wrote 10 tables and 2 figures."""
    from toolbench_lib.data.paths import OUTPUTS_DIR, PROJECT_ROOT

    run_name = f"probe-g9-{os.getpid()}-{form[0].strip('-')}"
    notebook = PROJECT_ROOT / "notebooks" / "01_data_prep.ipynb"
    out = subprocess.run([sys.executable, "-m", "papermill", str(notebook), str(tmp_path / "out.ipynb"),
                          "-p", "run_name", run_name, "-p", "data_dir",
                          str(real_data_dir), *form, "--cwd", str(PROJECT_ROOT / "notebooks")],
                         capture_output=True, text=True, timeout=300)
    made = sorted(p.name for p in OUTPUTS_DIR.glob(f"{run_name}*"))
    for name in made:
        shutil.rmtree(OUTPUTS_DIR / name, ignore_errors=True)
    assert out.returncode != 0
    assert "subsets: unknown query set 'G9'" in out.stderr
    assert made == []  # no run folder, no table, no figure
    OUTCOMES[f"papermill-unknown-set-{form[0].strip('-')}"] = "clear error"
