"""GeminiBackend against a local fake of the Gemini REST endpoint, through the real google-genai client."""

from __future__ import annotations

import gzip
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from toolbench_lib.llm.base import LLMError
from toolbench_lib.llm.cached import CachedLLM
from toolbench_lib.llm.cassettes import export_cassette
from toolbench_lib.llm.gemini import GeminiBackend, generate_many
from toolbench_lib.llm.store import CallStore

API_KEY = "test-key-Zq8vR2-do-not-leak"
SCHEMA = {"type": "object", "properties": {"tools": {"type": "array", "items": {"type": "string"}}}}


def gemini_body(text: str, tokens_in: int | None = 7, tokens_out: int | None = 3) -> dict:
    """A reply shaped like the Gemini ``generateContent`` REST response."""
    usage: dict = {}
    if tokens_in is not None:
        usage["promptTokenCount"] = tokens_in
    if tokens_out is not None:
        usage["candidatesTokenCount"] = tokens_out
    return {
        "candidates": [
            {"content": {"role": "model", "parts": [{"text": text}]}, "finishReason": "STOP", "index": 0}
        ],
        "usageMetadata": usage,
        "modelVersion": "gemini-2.5-flash",
    }


def error_body(code: int, status: str, message: str = "failure") -> dict:
    return {"error": {"code": code, "message": message, "status": status}}


class FakeGemini:
    """State of the fake server: scripted replies, seen requests, in-flight accounting."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list[dict] = []
        self.script: list[tuple[int, object]] = []
        self.fallback: tuple[int, object] | None = None
        self.delay_s = 0.0
        self.inflight = 0
        self.max_inflight = 0
        self.url = ""

    def next_reply(self, prompt: str) -> tuple[int, object]:
        with self.lock:
            if self.script:
                return self.script.pop(0)
        if self.fallback is not None:
            return self.fallback
        return 200, gemini_body(f"echo:{prompt}")


def make_handler(fake: FakeGemini) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 (http.server naming)
            length = int(self.headers.get("Content-Length", "0"))
            body = json.loads(self.rfile.read(length) or b"{}")
            with fake.lock:
                fake.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                fake.inflight += 1
                fake.max_inflight = max(fake.max_inflight, fake.inflight)
            try:
                if fake.delay_s:
                    time.sleep(fake.delay_s)
                prompt = body.get("contents", [{}])[0].get("parts", [{}])[0].get("text", "")
                status, payload, *extra = fake.next_reply(prompt)
                data = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                for name, value in (extra[0] if extra else {}).items():
                    self.send_header(name, value)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            finally:
                with fake.lock:
                    fake.inflight -= 1

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.fixture
def fake_gemini(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeGemini]:
    """A fake Gemini endpoint on 127.0.0.1; the environment points the backend at it, with a test key."""
    fake = FakeGemini()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(fake))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    fake.url = f"http://127.0.0.1:{server.server_port}"
    for var in (
        "GOOGLE_API_KEY",
        "GOOGLE_GEMINI_BASE_URL",
        "GOOGLE_GENAI_API_VERSION",
        "GOOGLE_GENAI_HTTP_CLIENT",
    ):
        monkeypatch.delenv(var, raising=False)
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("GEMINI_API_KEY", API_KEY)
    monkeypatch.setenv("TOOLBENCH_GEMINI_BASE_URL", fake.url)
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def make_backend(**kwargs: object) -> GeminiBackend:
    options: dict = {"max_retries": 2, "retry_base_delay_s": 0.001, "retry_jitter": 0.0}
    options.update(kwargs)
    return GeminiBackend(**options)


def test_success_returns_text_tokens_model_latency(fake_gemini: FakeGemini) -> None:
    backend = make_backend()
    assert backend.base_url == fake_gemini.url
    reply = backend.generate("find a weather API", system="You plan tool calls.", temperature=0.7, run=3)
    assert reply.text == "echo:find a weather API"
    assert (reply.tokens_in, reply.tokens_out) == (7, 3)
    assert reply.model == "gemini-2.5-flash" and reply.backend == "gemini" and not reply.cached
    assert reply.latency_s > 0
    [request] = fake_gemini.requests
    assert request["path"].endswith("/models/gemini-2.5-flash:generateContent")
    assert API_KEY not in request["path"]
    assert request["headers"].get("x-goog-api-key") == API_KEY
    config = request["body"]["generationConfig"]
    assert config["temperature"] == 0.7 and config["seed"] == 3
    assert "responseMimeType" not in config
    assert request["body"]["systemInstruction"]["parts"][0]["text"] == "You plan tool calls."


def test_json_schema_is_sent(fake_gemini: FakeGemini) -> None:
    fake_gemini.script.append((200, gemini_body('{"tools": ["weather"]}')))
    reply = make_backend().generate("plan", json_schema=SCHEMA, run=0)
    assert json.loads(reply.text) == {"tools": ["weather"]}
    config = fake_gemini.requests[0]["body"]["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == SCHEMA
    assert config["seed"] == 0 and config["temperature"] == 0.0


def test_missing_token_counts_are_zero(fake_gemini: FakeGemini) -> None:
    fake_gemini.script.append((200, gemini_body("ok", tokens_in=None, tokens_out=None)))
    reply = make_backend().generate("x")
    assert (reply.tokens_in, reply.tokens_out) == (0, 0)


def test_429_then_success(fake_gemini: FakeGemini) -> None:
    fake_gemini.script.append((429, error_body(429, "RESOURCE_EXHAUSTED", "quota")))
    sleeps: list[float] = []
    reply = make_backend(sleep=sleeps.append).generate("retry me")
    assert reply.text == "echo:retry me"
    assert len(fake_gemini.requests) == 2
    assert len(sleeps) == 1


def test_429_retry_delay_hint_is_honoured(fake_gemini: FakeGemini) -> None:
    body = error_body(429, "RESOURCE_EXHAUSTED")
    body["error"]["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.25s"}]
    fake_gemini.script.append((429, body))
    sleeps: list[float] = []
    make_backend(sleep=sleeps.append).generate("x")
    assert sleeps == [pytest.approx(0.25)]


def test_429_retry_after_seconds_is_honoured(fake_gemini: FakeGemini) -> None:
    """``Retry-After: 3`` on two 429s: each wait is the 3 s asked, not the 1 ms of the exponential backoff."""
    for _ in range(2):
        fake_gemini.script.append((429, error_body(429, "RESOURCE_EXHAUSTED"), {"Retry-After": "3"}))
    sleeps: list[float] = []
    reply = make_backend(sleep=sleeps.append).generate("x")
    assert reply.text == "echo:x" and len(fake_gemini.requests) == 3
    assert sleeps == [pytest.approx(3.0), pytest.approx(3.0)]


def test_429_retry_after_date_and_the_longer_of_two_hints(fake_gemini: FakeGemini) -> None:
    """An HTTP-date ``Retry-After`` about 20 s ahead, beside a 0.5 s ``retryDelay``: the longer wait wins."""
    import email.utils

    body = error_body(429, "RESOURCE_EXHAUSTED")
    body["error"]["details"] = [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.5s"}]
    when = email.utils.formatdate(time.time() + 20, usegmt=True)
    fake_gemini.script.append((429, body, {"Retry-After": when}))
    sleeps: list[float] = []
    make_backend(sleep=sleeps.append).generate("x")
    assert len(sleeps) == 1 and 17.0 <= sleeps[0] <= 20.5  # whole seconds in the date, a little time passed


def test_429_retry_after_beyond_the_cap_is_reported_not_slept(fake_gemini: FakeGemini) -> None:
    fake_gemini.script.append((429, error_body(429, "RESOURCE_EXHAUSTED"), {"Retry-After": "3600"}))
    sleeps: list[float] = []
    with pytest.raises(LLMError) as info:
        make_backend(sleep=sleeps.append, retry_max_delay_s=60.0).generate("x")
    assert sleeps == [] and len(fake_gemini.requests) == 1
    message = str(info.value)
    assert "3600 s" in message and "60 s" in message and "retry later" in message and "\n" not in message
    assert API_KEY not in message


@pytest.mark.parametrize("value", ["soon", "-5", "nan", ""])
def test_429_unreadable_retry_after_falls_back_to_backoff(fake_gemini: FakeGemini, value: str) -> None:
    fake_gemini.script.append((429, error_body(429, "RESOURCE_EXHAUSTED"), {"Retry-After": value}))
    sleeps: list[float] = []
    make_backend(sleep=sleeps.append, retry_base_delay_s=0.01).generate("x")
    # "-5" is a wait of 0 s asked: the exponential backoff (10 ms) is longer and used
    assert sleeps == [pytest.approx(0.01)]


def test_5xx_until_retries_run_out(fake_gemini: FakeGemini) -> None:
    fake_gemini.fallback = (503, error_body(503, "UNAVAILABLE", "overloaded"))
    sleeps: list[float] = []
    backend = make_backend(max_retries=3, retry_base_delay_s=0.01, sleep=sleeps.append)
    with pytest.raises(LLMError) as info:
        backend.generate("doomed")
    assert len(fake_gemini.requests) == 4
    assert sleeps == [pytest.approx(0.01), pytest.approx(0.02), pytest.approx(0.04)]
    message = str(info.value)
    assert "4 attempts" in message and "503" in message
    assert API_KEY not in message and API_KEY not in repr(info.value)


def test_real_backoff_sleeps_are_short_with_tiny_delay(fake_gemini: FakeGemini) -> None:
    fake_gemini.fallback = (500, error_body(500, "INTERNAL"))
    start = time.perf_counter()
    with pytest.raises(LLMError):
        make_backend(max_retries=2, retry_base_delay_s=0.001).generate("x")
    assert len(fake_gemini.requests) == 3
    assert time.perf_counter() - start < 5


def test_other_4xx_fails_at_once_without_leaking_key(fake_gemini: FakeGemini) -> None:
    fake_gemini.fallback = (403, error_body(403, "PERMISSION_DENIED", f"API key {API_KEY} is not valid"))
    with pytest.raises(LLMError) as info:
        make_backend(max_retries=5).generate("x")
    assert len(fake_gemini.requests) == 1
    assert "403" in str(info.value)
    assert API_KEY not in str(info.value) and API_KEY not in repr(info.value)
    assert info.value.__cause__ is None


def test_400_is_not_retried(fake_gemini: FakeGemini) -> None:
    fake_gemini.fallback = (400, error_body(400, "INVALID_ARGUMENT", "bad schema"))
    with pytest.raises(LLMError, match="HTTP 400"):
        make_backend().generate("x")
    assert len(fake_gemini.requests) == 1


@pytest.mark.parametrize(
    "payload",
    [
        b"this is not json",
        {"candidates": []},
        {"candidates": [{"finishReason": "SAFETY"}]},
        {"candidates": "not-a-list"},
    ],
    ids=["non-json", "no-candidates", "no-text", "wrong-shape"],
)
def test_malformed_body(fake_gemini: FakeGemini, payload: object) -> None:
    fake_gemini.fallback = (200, payload)
    with pytest.raises(LLMError, match="malformed"):
        make_backend().generate("x")
    assert len(fake_gemini.requests) == 1


@pytest.mark.parametrize("pad", [200, 250, 280, 290])
def test_a_malformed_reply_quoting_the_key_says_none_of_it(fake_gemini: FakeGemini, pad: int) -> None:
    """pydantic quotes a malformed field cut short, and the message is cut at 300 characters: no piece of the
    key of 8 characters or more is left in what is said, wherever it stood."""
    for quoted in ("x" * pad + API_KEY, API_KEY + "z" * pad):
        body = {"candidates": [{"content": {"parts": quoted}}], "usageMetadata": {"promptTokenCount": quoted}}
        fake_gemini.fallback = (200, body)
        with pytest.raises(LLMError, match="malformed") as info:
            make_backend().generate("x")
        said = str(info.value)
        pieces = [API_KEY[i:i + 8] for i in range(len(API_KEY) - 7)]
        assert "input_value=" in said and "[redacted]" in said and not any(p in said for p in pieces), said


def test_missing_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    monkeypatch.setenv("TOOLBENCH_GEMINI_BASE_URL", "http://127.0.0.1:9")
    with pytest.raises(LLMError, match="GEMINI_API_KEY"):
        GeminiBackend()


def test_google_api_key_is_accepted(fake_gemini: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY")
    monkeypatch.setenv("GOOGLE_API_KEY", "other-test-key")
    make_backend().generate("x")
    assert fake_gemini.requests[0]["headers"]["x-goog-api-key"] == "other-test-key"


def test_key_not_in_repr(fake_gemini: FakeGemini) -> None:
    backend = make_backend()
    assert API_KEY not in repr(backend)


def test_explicit_base_url_wins(fake_gemini: FakeGemini, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLBENCH_GEMINI_BASE_URL", "http://127.0.0.1:9")
    backend = make_backend(base_url=fake_gemini.url)
    assert backend.generate("x").text == "echo:x"


def test_generate_many_keeps_order_and_bounds_concurrency(fake_gemini: FakeGemini) -> None:
    fake_gemini.delay_s = 0.05
    backend = make_backend(max_concurrency=2)
    requests = [{"prompt": f"p{i}", "run": i} for i in range(6)]
    replies = generate_many(backend, requests, max_workers=6)
    assert [r.text for r in replies] == [f"echo:p{i}" for i in range(6)]
    assert fake_gemini.max_inflight <= 2
    assert sorted(r["body"]["generationConfig"]["seed"] for r in fake_gemini.requests) == list(range(6))


def test_generate_many_raises_first_failure(fake_gemini: FakeGemini) -> None:
    fake_gemini.fallback = (400, error_body(400, "INVALID_ARGUMENT"))
    with pytest.raises(LLMError):
        generate_many(make_backend(), [{"prompt": "a"}, {"prompt": "b"}], max_workers=2)


def test_cached_gemini_hit_makes_no_request(fake_gemini: FakeGemini, tmp_path: Path) -> None:
    with CallStore(tmp_path / "calls.sqlite") as store:
        llm = CachedLLM(make_backend(), store, prompt_version="p1")
        first = llm.generate("same", json_schema=SCHEMA, run=1)
        second = llm.generate("same", json_schema=SCHEMA, run=1)
        assert len(fake_gemini.requests) == 1
        assert second.cached and not first.cached
        assert (second.text, second.tokens_in, second.tokens_out) == (first.text, 7, 3)
        assert (second.backend, second.model) == ("gemini", "gemini-2.5-flash")
        llm.generate("same", json_schema=SCHEMA, run=2)
        assert len(fake_gemini.requests) == 2
        assert (llm.hits, llm.misses) == (1, 2)


def test_failed_call_is_not_stored(fake_gemini: FakeGemini, tmp_path: Path) -> None:
    with CallStore(tmp_path / "calls.sqlite") as store:
        llm = CachedLLM(make_backend(max_retries=2), store, prompt_version="p1")
        llm.generate("good")
        fake_gemini.fallback = (503, error_body(503, "UNAVAILABLE"))
        with pytest.raises(LLMError, match="3 attempts"):
            llm.generate("bad")
        assert len(fake_gemini.requests) == 1 + 3
        assert len(store) == 1
        assert [r["prompt"] for r in store.iter_records()] == ["good"]
        assert llm.generate("good").cached
        assert len(fake_gemini.requests) == 4


def test_cassette_and_store_never_hold_the_key(fake_gemini: FakeGemini, tmp_path: Path) -> None:
    db = tmp_path / "calls.sqlite"
    cassette = tmp_path / "calls.jsonl.gz"
    with CallStore(db) as store:
        llm = CachedLLM(make_backend(), store, prompt_version="p1")
        llm.generate("plan a trip", system="sys", json_schema=SCHEMA, temperature=0.5, run=4)
        export_cassette(store, cassette)
        stored = [p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("calls.sqlite")]
    assert all(API_KEY.encode() not in blob for blob in stored)
    raw = cassette.read_bytes()
    text = gzip.decompress(raw).decode("utf-8")
    assert API_KEY not in text and API_KEY.encode() not in raw
    [record] = [json.loads(line) for line in text.splitlines()]
    assert record["backend"] == "gemini" and record["prompt"] == "plan a trip" and record["run"] == 4
