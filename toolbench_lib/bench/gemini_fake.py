"""Gemini client calls/s against a local fake ``generateContent`` endpoint that answers after a delay."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from unittest.mock import patch

from ..llm.factory import default_workers
from ..llm.gemini import GeminiBackend, generate_many
from .core import BenchLine, timed

FAKE_KEY = "bench-key-not-a-secret"


class _Handler(BaseHTTPRequestHandler):
    delay_s = 0.2
    protocol_version = "HTTP/1.1"  # keep-alive, as the real endpoint

    def do_POST(self) -> None:  # noqa: N802 - http.server naming
        length = int(self.headers.get("Content-Length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        time.sleep(self.delay_s)
        prompt = body.get("contents", [{}])[0].get("parts", [{}])[0].get("text", "")
        data = json.dumps({
            "candidates": [{"content": {"role": "model", "parts": [{"text": f"echo:{prompt}"}]},
                            "finishReason": "STOP", "index": 0}],
            "usageMetadata": {"promptTokenCount": 7, "candidatesTokenCount": 3},
            "modelVersion": "gemini-2.5-flash"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def fake_gemini_server(delay_s: float = 0.2) -> Iterator[str]:
    """A threaded fake Gemini endpoint on 127.0.0.1 answering every call after ``delay_s``; yields its URL."""
    handler = type("Handler", (_Handler,), {"delay_s": delay_s})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


def _calls_per_s(url: str, n: int, workers: int) -> float:
    backend = GeminiBackend(base_url=url, max_concurrency=workers, max_retries=0)
    requests = [{"prompt": f"query {i}", "run": 0} for i in range(n)]
    replies, dt = timed(generate_many, backend, requests, max_workers=workers)
    if [r.text for r in replies] != [f"echo:query {i}" for i in range(n)]:
        raise RuntimeError("the fake server's replies came back out of order")
    return n / dt


def bench_gemini(calls: int = 64, workers: int = 16, delay_s: float = 0.2, target: float = 20.0) -> BenchLine:
    """Calls/s of the real google-genai client, one at a time against ``workers`` concurrent calls (the
    ratio); ``target`` is in calls/s."""
    env = {"GEMINI_API_KEY": FAKE_KEY, "NO_PROXY": "127.0.0.1,localhost"}
    with fake_gemini_server(delay_s) as url, patch.dict(os.environ, env):
        serial_rate = _calls_per_s(url, max(4, calls // 8), 1)
        parallel_rate = _calls_per_s(url, calls, workers)
        default = default_workers("gemini")
        default_rate = _calls_per_s(url, calls // 2, default)
    return BenchLine("gemini client calls/s (fake server, 200 ms)", "calls/s", "1 at a time",
                     f"{workers} concurrent", serial_rate, parallel_rate,
                     details={"server_delay_ms": int(delay_s * 1000), "calls": calls,
                              f"default_workers_{default}_calls_per_s": round(default_rate, 1),
                              "target_calls_per_s": target, "target_met": parallel_rate >= target})
