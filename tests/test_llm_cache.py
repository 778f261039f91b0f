"""Call store, CachedLLM, cassettes and ReplayBackend, with a small counting backend."""

from __future__ import annotations

import gzip
import json
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbench_lib.llm.base import LLMBackend, LLMError, LLMResponse
from toolbench_lib.llm.cached import CachedLLM
from toolbench_lib.llm.cassettes import export_cassette, import_cassette, read_cassette
from toolbench_lib.llm.replay import ReplayBackend
from toolbench_lib.llm.store import CallRequest, CallStore, call_key

SCHEMA = {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}


class CountingBackend:
    """A deterministic backend that counts its calls (per prompt/run too)."""

    def __init__(
        self, name: str = "counting", model: str = "count-1", is_llm: bool = True, delay_s: float = 0.0
    ):
        self.name = name
        self.model = model
        self.is_llm = is_llm
        self.delay_s = delay_s
        self.calls = 0
        self.per_call: Counter[tuple] = Counter()
        self._lock = threading.Lock()

    def generate(
        self,
        prompt: str,
        system: str = "",
        json_schema: dict | None = None,
        temperature: float = 0.0,
        run: int = 0,
    ) -> LLMResponse:
        with self._lock:
            self.calls += 1
            self.per_call[(prompt, run, temperature)] += 1
        if self.delay_s:
            time.sleep(self.delay_s)
        return LLMResponse(
            text=f"{self.model}|{system}|{prompt}|t={temperature}|r={run}",
            tokens_in=len(prompt),
            tokens_out=5,
            latency_s=0.01,
            model=self.model,
            backend=self.name,
        )


@pytest.fixture
def store(tmp_path: Path) -> CallStore:
    with CallStore(tmp_path / "calls.sqlite") as opened:
        yield opened


def fill(store: CallStore, backend: CountingBackend | None = None, prompt_version: str = "p1") -> CachedLLM:
    llm = CachedLLM(backend or CountingBackend(), store, prompt_version=prompt_version)
    llm.generate("alpha", system="s", run=0)
    llm.generate("alpha", system="s", run=1)
    llm.generate("beta", json_schema=SCHEMA, temperature=0.7, run=0)
    return llm


# ---------------------------------------------------------------- call_key


def test_call_key_is_canonical() -> None:
    base = call_key("gemini", "m", "p1", "sys", "hello", SCHEMA, 0.0, 0)
    reordered = {"properties": {"b": {"type": "integer"}, "a": {"type": "string"}}, "type": "object"}
    assert call_key("gemini", "m", "p1", "sys", "hello", reordered, 0, 0) == base
    assert len(base) == 64 and int(base, 16) >= 0
    variants = [
        ("other", "m", "p1", "sys", "hello", SCHEMA, 0.0, 0),
        ("gemini", "m2", "p1", "sys", "hello", SCHEMA, 0.0, 0),
        ("gemini", "m", "p2", "sys", "hello", SCHEMA, 0.0, 0),
        ("gemini", "m", "p1", "sys2", "hello", SCHEMA, 0.0, 0),
        ("gemini", "m", "p1", "sys", "hello!", SCHEMA, 0.0, 0),
        ("gemini", "m", "p1", "sys", "hello", None, 0.0, 0),
        ("gemini", "m", "p1", "sys", "hello", SCHEMA, 0.5, 0),
        ("gemini", "m", "p1", "sys", "hello", SCHEMA, 0.0, 1),
    ]
    assert len({call_key(*v) for v in variants} | {base}) == len(variants) + 1


@settings(max_examples=40, deadline=None)
@given(st.dictionaries(st.text(max_size=5), st.integers(), max_size=6))
def test_call_key_ignores_schema_key_order(schema: dict) -> None:
    reversed_schema = dict(reversed(list(schema.items())))
    assert call_key("b", "m", "p", "", "x", schema, 0.0, 0) == call_key(
        "b", "m", "p", "", "x", reversed_schema, 0.0, 0
    )


# ---------------------------------------------------------------- CachedLLM


def test_identical_call_is_a_hit(store: CallStore) -> None:
    backend = CountingBackend()
    llm = CachedLLM(backend, store, prompt_version="p1")
    first = llm.generate("q", system="s", json_schema=SCHEMA, temperature=0.2, run=0)
    second = llm.generate(
        "q", system="s", json_schema=dict(reversed(list(SCHEMA.items()))), temperature=0.2, run=0
    )
    assert backend.calls == 1
    assert not first.cached and second.cached
    assert (second.text, second.tokens_in, second.tokens_out, second.latency_s) == (
        first.text,
        first.tokens_in,
        first.tokens_out,
        first.latency_s,
    )
    assert (second.backend, second.model) == ("counting", "count-1")
    assert (llm.hits, llm.misses) == (1, 1)
    assert (llm.name, llm.model, llm.is_llm) == ("counting", "count-1", True)
    assert isinstance(llm, LLMBackend)


@pytest.mark.parametrize(
    "change",
    [{"run": 1}, {"temperature": 0.5}, {"system": "other"}, {"json_schema": None}, {"prompt_version": "p2"}],
)
def test_any_changed_field_is_a_miss(store: CallStore, change: dict) -> None:
    backend = CountingBackend()
    llm = CachedLLM(backend, store, prompt_version="p1")
    call = {"system": "s", "json_schema": SCHEMA, "temperature": 0.0, "run": 0}
    llm.generate("q", **call)
    llm.generate("q", **{**call, **change})
    assert backend.calls == 2 and (llm.hits, llm.misses) == (0, 2)
    assert len(store) == 2


def test_store_is_durable_across_reopen(tmp_path: Path) -> None:
    path = tmp_path / "calls.sqlite"
    store = CallStore(path)
    fill(store)
    # Committed before the call returned: visible to an independent connection right away.
    with sqlite3.connect(path) as other:
        assert other.execute("SELECT COUNT(*) FROM calls").fetchone()[0] == 3
    store.close()
    with CallStore(path) as reopened:
        backend = CountingBackend()
        llm = CachedLLM(backend, reopened, prompt_version="p1")
        reply = llm.generate("alpha", system="s", run=1)
        assert reply.cached and reply.text == "count-1|s|alpha|t=0.0|r=1"
        assert backend.calls == 0 and len(reopened) == 3


def test_store_records(store: CallStore) -> None:
    fill(store)
    records = list(store.iter_records())
    assert [r["key"] for r in records] == sorted(r["key"] for r in records)
    beta = next(r for r in records if r["prompt"] == "beta")
    assert beta["json_schema"] == SCHEMA and beta["temperature"] == 0.7 and beta["is_llm"] is True
    assert beta["prompt_version"] == "p1" and beta["backend"] == "counting" and beta["created_at"]
    assert beta["key"] == call_key("counting", "count-1", "p1", "", "beta", SCHEMA, 0.7, 0)
    assert store.get("0" * 64) is None


def test_put_keeps_the_first_record(store: CallStore) -> None:
    request = CallRequest("b", "m", "p1", "", "x", None, 0.0, 0)
    first = LLMResponse("one", 1, 1, 0.1, "m", "b")
    assert store.put(request.key(), request, first)
    assert not store.put(request.key(), request, LLMResponse("two", 1, 1, 0.1, "m", "b"))
    assert store.get(request.key()).text == "one"


def test_backend_error_stores_nothing(store: CallStore) -> None:
    class Failing(CountingBackend):
        def generate(self, prompt: str, *args: object, **kwargs: object) -> LLMResponse:
            if prompt == "bad":
                raise LLMError("boom")
            return super().generate(prompt, *args, **kwargs)

    llm = CachedLLM(Failing(), store, prompt_version="p1")
    llm.generate("good")
    with pytest.raises(LLMError):
        llm.generate("bad")
    assert len(store) == 1 and llm.misses == 1


def test_concurrent_generate_calls_backend_once_per_key(store: CallStore) -> None:
    backend = CountingBackend(delay_s=0.002)
    llm = CachedLLM(backend, store, prompt_version="p1")
    errors: list[BaseException] = []

    def worker(offset: int) -> None:
        try:
            for i in range(30):
                j = (i + offset) % 10
                reply = llm.generate(f"q{j}", run=j % 3)
                assert reply.text.endswith(f"|q{j}|t=0.0|r={j % 3}")
        except BaseException as err:  # noqa: BLE001 (reported to the main thread)
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    assert len(store) == 10
    assert backend.calls == 10 and set(backend.per_call.values()) == {1}
    assert (llm.hits, llm.misses) == (8 * 30 - 10, 10)
    assert not llm._inflight


# ---------------------------------------------------------------- cassettes


def test_cassette_round_trip(store: CallStore, tmp_path: Path) -> None:
    fill(store)
    cassette = tmp_path / "out" / "calls.jsonl.gz"
    assert export_cassette(store, cassette) == 3
    lines = gzip.decompress(cassette.read_bytes()).decode().splitlines()
    assert [json.loads(line)["key"] for line in lines] == sorted(r["key"] for r in store.iter_records())
    with CallStore(tmp_path / "copy.sqlite") as copy:
        assert import_cassette(cassette, copy) == 3
        assert import_cassette(cassette, copy) == 0
        assert list(copy.iter_records()) == list(store.iter_records())
        again = tmp_path / "again.jsonl.gz"
        export_cassette(copy, again)
        assert again.read_bytes() == cassette.read_bytes()
        backend = CountingBackend()
        reply = CachedLLM(backend, copy, prompt_version="p1").generate(
            "beta", json_schema=SCHEMA, temperature=0.7
        )
        assert reply.cached and backend.calls == 0


def test_cassette_is_deterministic(store: CallStore, tmp_path: Path) -> None:
    fill(store)
    first, second = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    export_cassette(store, first)
    export_cassette(store, second)
    assert first.read_bytes() == second.read_bytes()
    header = first.read_bytes()[:10]
    assert header[3] & 0x08 == 0  # no file name stored
    assert header[4:8] == b"\x00\x00\x00\x00"  # mtime 0


def test_tampered_cassette_is_rejected(store: CallStore, tmp_path: Path) -> None:
    fill(store)
    cassette = tmp_path / "calls.jsonl.gz"
    export_cassette(store, cassette)
    records = [json.loads(line) for line in gzip.decompress(cassette.read_bytes()).decode().splitlines()]
    records[0]["prompt"] = "changed"
    cassette.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in records).encode()))
    with CallStore(tmp_path / "copy.sqlite") as copy, pytest.raises(ValueError, match="line 1"):
        import_cassette(cassette, copy)


# ---------------------------------------------------------------- ReplayBackend


@pytest.fixture
def cassette(store: CallStore, tmp_path: Path) -> Path:
    fill(store, CountingBackend(name="gemini", model="gemini-2.5-flash"))
    path = tmp_path / "gemini.jsonl.gz"
    export_cassette(store, path)
    return path


def test_replay_hit(cassette: Path) -> None:
    replay = ReplayBackend(cassette)
    reply = replay.generate("beta", json_schema=SCHEMA, temperature=0.7, run=0)
    assert reply.text == "gemini-2.5-flash||beta|t=0.7|r=0"
    assert (reply.backend, reply.model, reply.cached) == ("gemini", "gemini-2.5-flash", True)
    assert (reply.tokens_in, reply.tokens_out, reply.latency_s) == (4, 5, 0.01)
    assert replay.name == "replay" and replay.model == "gemini-2.5-flash" and replay.is_llm
    assert len(replay) == 3 and isinstance(replay, LLMBackend)
    assert replay.generate("alpha", system="s", run=1, prompt_version="p1").text.endswith("r=1")


def test_replay_miss_names_what_is_missing(cassette: Path) -> None:
    replay = ReplayBackend(cassette)
    long_prompt = "gamma " + "x" * 300
    with pytest.raises(LLMError) as info:
        replay.generate(long_prompt, temperature=0.3, run=7, prompt_version="p9")
    message = str(info.value)
    for part in ("replay miss", "prompt_version=p9", "run=7", "temperature=0.3", str(cassette), "gamma xxx",
                 "--backend gemini or local", "ltr-nollm with --plan-limit 0"):
        assert part in message
    assert "x" * 200 not in message
    with pytest.raises(LLMError, match="prompt_version=p2"):
        replay.generate("alpha", system="s", run=0, prompt_version="p2")
    with pytest.raises(LLMError, match="run=5"):
        replay.generate("alpha", system="s", run=5)


def test_replay_model_filter_and_ambiguity(store: CallStore, tmp_path: Path) -> None:
    fill(store, CountingBackend(name="gemini", model="gemini-2.5-flash"))
    fill(store, CountingBackend(name="other", model="other-1"))
    path = tmp_path / "mixed.jsonl.gz"
    export_cassette(store, path)
    with pytest.raises(LLMError, match="ambiguous"):
        ReplayBackend(path).generate("alpha", system="s", run=0)
    reply = ReplayBackend(path, model="other-1").generate("alpha", system="s", run=0)
    assert (reply.backend, reply.model) == ("other", "other-1")
    assert ReplayBackend(path).model == "replay"


def test_replay_several_cassettes_and_is_llm(store: CallStore, tmp_path: Path) -> None:
    fill(store, CountingBackend(name="gemini", model="gemini-2.5-flash"))
    llm_path = tmp_path / "llm.jsonl.gz"
    export_cassette(store, llm_path)
    with CallStore(tmp_path / "rules.sqlite") as rules_store:
        CachedLLM(CountingBackend(name="rules", model="rules", is_llm=False), rules_store, "p1").generate(
            "only"
        )
        rules_path = tmp_path / "rules.jsonl.gz"
        export_cassette(rules_store, rules_path)
    assert not ReplayBackend(rules_path).is_llm
    both = ReplayBackend([llm_path, rules_path])
    assert both.is_llm and len(both) == 4
    assert both.generate("only").backend == "rules"
    assert both.generate("alpha", system="s", run=1).backend == "gemini"


def test_cached_llm_passes_prompt_version_to_replay(cassette: Path, tmp_path: Path) -> None:
    with CallStore(tmp_path / "replayed.sqlite") as replay_store:
        llm = CachedLLM(ReplayBackend(cassette), replay_store, prompt_version="p1")
        assert llm.generate("alpha", system="s", run=0).text.endswith("r=0")
        with pytest.raises(LLMError, match="prompt_version=p2"):
            llm.generate("alpha", system="s", run=0, prompt_version="p2")
        assert len(replay_store) == 1


def test_read_cassette_yields_records(cassette: Path) -> None:
    records = list(read_cassette(cassette))
    assert len(records) == 3 and all(r["backend"] == "gemini" for r in records)


def test_reply_stored_meanwhile_by_another_writer_wins(tmp_path: Path) -> None:
    path = tmp_path / "shared.sqlite"
    with CallStore(path) as mine, CallStore(path) as theirs:

        class Racing(CountingBackend):
            def generate(self, prompt: str, *args: object, **kwargs: object) -> LLMResponse:
                request = CallRequest("counting", "count-1", "p1", "", prompt, None, 0.0, 0)
                theirs.put(request.key(), request, LLMResponse("theirs", 1, 1, 0.1, "count-1", "counting"))
                return super().generate(prompt, *args, **kwargs)

        reply = CachedLLM(Racing(), mine, prompt_version="p1").generate("x")
        assert reply.text == "theirs" and len(mine) == 1


def test_generate_many_over_cached_llm(store: CallStore) -> None:
    from toolbench_lib.llm.gemini import generate_many

    backend = CountingBackend(delay_s=0.001)
    llm = CachedLLM(backend, store, prompt_version="p1")
    requests = [{"prompt": f"q{i % 4}", "run": 0} for i in range(12)]
    replies = generate_many(llm, requests, max_workers=4)
    assert [r.text for r in replies] == [f"count-1||q{i % 4}|t=0.0|r=0" for i in range(12)]
    assert backend.calls == 4 and (llm.hits, llm.misses) == (8, 4)


# ---------------------------------------------------------------- one rule for a key recorded twice


def _lines_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in gzip.decompress(path.read_bytes()).decode().splitlines()]


def _write_lines(path: Path, records: list[dict]) -> Path:
    path.write_bytes(gzip.compress("".join(json.dumps(r) + "\n" for r in records).encode()))
    return path


@pytest.fixture
def doubled(cassette: Path, tmp_path: Path) -> dict[str, Path]:
    """The cassette with its second record repeated at the end: once as is, once with another reply."""
    records = _lines_of(cassette)
    other = {**records[1], "text": "another reply", "created_at": "2030-01-01T00:00:00+00:00"}
    same = {**records[1], "created_at": "2030-01-01T00:00:00+00:00", "latency_s": 9.0}
    return {"same": _write_lines(tmp_path / "same.jsonl.gz", [*records, same]),
            "different": _write_lines(tmp_path / "different.jsonl.gz", [*records, other]),
            "key": records[1]["key"]}


def test_a_key_with_two_replies_is_refused_everywhere(doubled: dict, tmp_path: Path) -> None:
    """Replay, import and info all refuse it, naming lines 2 and 4 (before: last, first and both won)."""
    from toolbench_lib.llm.cassettes import cassette_info
    from toolbench_lib.llm.store import CacheFileError

    path = doubled["different"]
    for attempt in (lambda: ReplayBackend(path), lambda: cassette_info(path)):
        with pytest.raises(CacheFileError) as info:
            attempt()
        message = str(info.value)
        assert "line 2" in message and "line 4" in message and doubled["key"][:12] in message
        assert "different replies" in message and "\n" not in message
    with CallStore(tmp_path / "target.sqlite") as target:
        with pytest.raises(CacheFileError, match="line 4"):
            import_cassette(path, target)
        assert len(target) == 0  # nothing imported, not even the records before the conflict


def test_a_key_repeated_with_the_same_reply_counts_once(doubled: dict, tmp_path: Path, caplog) -> None:
    from toolbench_lib.llm.cassettes import cassette_info

    path = doubled["same"]
    info = cassette_info(path)
    assert info["records"] == 3 and info["repeated_keys"] == 1
    assert sum(g["records"] for g in info["groups"]) == 3
    replay = ReplayBackend(path)
    assert len(replay) == 3
    assert "repeat a key with the same reply" in caplog.text
    with CallStore(tmp_path / "target.sqlite") as target:
        assert import_cassette(path, target) == 3 and len(target) == 3


def test_the_same_key_in_two_cassettes_with_two_replies_is_refused(doubled: dict, cassette: Path,
                                                                   tmp_path: Path) -> None:
    from toolbench_lib.llm.store import CacheFileError

    records = _lines_of(cassette)
    changed = _write_lines(tmp_path / "changed.jsonl.gz", [{**records[0], "text": "not the same"}])
    with pytest.raises(CacheFileError, match=r"line 1.*line 1|different replies"):
        ReplayBackend([cassette, changed])
    assert len(ReplayBackend([cassette, doubled["same"]])) == 3  # same replies: one each


def test_import_refuses_a_reply_that_differs_from_the_store(cassette: Path, tmp_path: Path) -> None:
    from toolbench_lib.llm.store import CacheFileError

    records = _lines_of(cassette)
    changed = _write_lines(tmp_path / "changed.jsonl.gz", [{**records[2], "text": "not the same"},
                                                            records[0]])
    with CallStore(tmp_path / "target.sqlite") as target:
        assert import_cassette(cassette, target) == 3
        before = list(target.iter_records())
        with pytest.raises(CacheFileError, match="another reply than the one call store"):
            import_cassette(changed, target)
        assert list(target.iter_records()) == before


def test_export_refuses_a_row_info_would_reject(store: CallStore, tmp_path: Path) -> None:
    """One row with tokens_in='abc' (SQLite keeps text in an INTEGER column): nothing written."""
    from toolbench_lib.llm.store import CacheFileError

    fill(store)
    key = sorted(r["key"] for r in store.iter_records())[1]
    store._conn.execute("UPDATE calls SET tokens_in = 'abc' WHERE key = ?", (key,))
    store._conn.commit()
    out = tmp_path / "out.jsonl.gz"
    with pytest.raises(CacheFileError) as info:
        export_cassette(store, out)
    message = str(info.value)
    assert f"row {store.row_number(key)}" in message and key[:12] in message and "tokens_in" in message
    assert "not written" in message and not out.exists()
    assert list(tmp_path.glob(".out.jsonl.gz*")) == []


HOLD_LOCK = """
import sqlite3, sys, time
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN EXCLUSIVE")
print("locked", flush=True)
time.sleep(60)
"""


def test_a_locked_store_is_reported_as_a_lock_after_a_bounded_wait(store: CallStore, tmp_path: Path) -> None:
    import subprocess
    import sys

    from toolbench_lib.llm.store import BUSY_TIMEOUT_S, StoreLockedError

    fill(store)
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(store.path)], stdout=subprocess.PIPE,
                              text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        start = time.perf_counter()
        with pytest.raises(StoreLockedError) as info:
            CachedLLM(CountingBackend(), store, prompt_version="p1").generate("new prompt")
        waited = time.perf_counter() - start
    finally:
        holder.kill()
        holder.wait()
    message = str(info.value)
    assert "locked by another process" in message and "wait for it to finish or retry" in message
    assert "delete" not in message and str(store.path) in message
    assert BUSY_TIMEOUT_S - 0.5 <= waited <= BUSY_TIMEOUT_S + 5
    assert CachedLLM(CountingBackend(), store, prompt_version="p1").generate("new prompt").text  # free again
