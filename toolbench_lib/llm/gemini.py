"""Gemini backend over the official ``google-genai`` client (imported on first use); the API key never appears
in any message, and HTTP 429 and 5xx are retried here with exponential backoff or as the server asks."""

from __future__ import annotations

import contextlib
import email.utils
import functools
import importlib
import json
import math
import os
import random
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import pydantic

from .base import LLMBackend, LLMError, LLMResponse

if TYPE_CHECKING:
    from google.genai import errors as genai_errors
    from google.genai import types as genai_types

API_KEY_ENV_VARS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
BASE_URL_ENV_VAR = "TOOLBENCH_GEMINI_BASE_URL"
KEY_PIECE = 8  # characters of the API key that are redacted wherever they stand in a message
DEFAULT_MODEL = "gemini-2.5-flash"


@functools.cache
def _transient_transport_errors() -> tuple[type[BaseException], ...]:
    """Connection and timeout errors of the HTTP stacks the client may use (httpx, httpx2)."""
    found: list[type[BaseException]] = []
    for module_name in ("httpx", "httpx2"):
        with contextlib.suppress(ImportError):
            module = importlib.import_module(module_name)
            found += [c for a in ("TimeoutException", "ConnectError", "RemoteProtocolError")
                      if isinstance(c := getattr(module, a, None), type)]
    return tuple(found)


def _genai() -> tuple[Any, Any, Any]:
    from google.genai import Client, errors, types

    return Client, errors, types


def _server_delay_s(err: genai_errors.APIError) -> float | None:
    """The longest wait the server asks for (``Retry-After`` header or ``RetryInfo.retryDelay``), or None."""
    details = err.details if isinstance(err.details, dict) else {}
    inner = details.get("error", details)
    entries = inner.get("details") if isinstance(inner, dict) else None
    entries = entries if isinstance(entries, list) else []
    delays = (e.get("retryDelay") for e in entries if isinstance(e, dict))
    asked = [float(m.group(1)) for d in delays if isinstance(d, str)
             and (m := re.fullmatch(r"\s*([0-9]*\.?[0-9]+)s\s*", d))][:1]
    value = None
    with contextlib.suppress(AttributeError, TypeError):  # no response, or no headers
        value = getattr(err, "response", None).headers.get("retry-after")
    if isinstance(value, str) and value.strip():
        try:
            seconds = float(value.strip())
        except ValueError:
            when = None
            with contextlib.suppress(TypeError, ValueError, IndexError):
                when = email.utils.parsedate_to_datetime(value.strip())
            seconds = when.timestamp() - time.time() if when is not None and when.tzinfo else math.nan
        if math.isfinite(seconds):
            asked.append(max(0.0, seconds))
    return max(asked) if asked else None


class GeminiBackend:
    """Gemini ``generateContent`` with seeded sampling, JSON mode, retries and bounded concurrency."""

    name = "gemini"
    is_llm = True

    def __init__(self, model: str = DEFAULT_MODEL, *, base_url: str | None = None,
                 api_version: str | None = None, max_retries: int = 5, retry_base_delay_s: float = 1.0,
                 retry_max_delay_s: float = 60.0, retry_jitter: float = 0.1, timeout_s: float = 120.0,
                 max_concurrency: int = 16, sleep: Callable[[float], None] = time.sleep) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.model = model
        self.base_url = base_url if base_url is not None else (os.environ.get(BASE_URL_ENV_VAR) or None)
        self.max_retries, self.retry_jitter = max_retries, retry_jitter
        self.retry_base_delay_s, self.retry_max_delay_s = retry_base_delay_s, retry_max_delay_s
        self._sleep, self._rng = sleep, random.Random()
        self._semaphore = threading.BoundedSemaphore(max_concurrency)
        self._api_key = next((v for v in (os.environ.get(n, "").strip() for n in API_KEY_ENV_VARS) if v), "")
        if not self._api_key:
            raise LLMError("No Gemini API key: set the GEMINI_API_KEY or GOOGLE_API_KEY environment variable "
                           "(or use a replay cassette instead of the live backend).")
        client, _, types = _genai()
        retry = types.HttpRetryOptions(attempts=1)  # the client's own retries off: they are made here
        options = types.HttpOptions(base_url=self.base_url, api_version=api_version,
                                    timeout=int(timeout_s * 1000), retry_options=retry)
        self._client = client(api_key=self._api_key, http_options=options)

    def __repr__(self) -> str:
        return f"GeminiBackend(model={self.model!r}, base_url={self.base_url!r})"

    def _scrub(self, message: str) -> str:
        """``message`` without the API key or any :data:`KEY_PIECE` characters of it (an echo cut short, as
        pydantic cuts an input it quotes)."""
        key, n = self._api_key, min(KEY_PIECE, len(self._api_key))
        pieces = sorted({key[i:j] for i in range(len(key)) for j in range(i + n, len(key) + 1)}, key=len)
        return re.sub("|".join(map(re.escape, pieces[::-1])), "[redacted]", message)

    def _malformed(self, detail: str) -> LLMError:
        return LLMError(f"Gemini returned a malformed reply (model {self.model}): {self._scrub(detail)}")

    def _call_with_retries(self, prompt: str, config: genai_types.GenerateContentConfig) -> tuple[Any, float]:
        """``(reply, latency_s)``, calling until success, a non-retryable error or retries run out."""
        errors = _genai()[1]
        malformed = (errors.UnknownApiResponseError, pydantic.ValidationError, json.JSONDecodeError)
        transport = _transient_transport_errors()
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            start = time.perf_counter()
            try:
                with self._semaphore:  # bounded concurrency
                    reply = self._client.models.generate_content(model=self.model, contents=prompt,
                                                                 config=config)
                return reply, time.perf_counter() - start
            except errors.APIError as err:
                if err.code is None or not (err.code == 429 or 500 <= err.code <= 599):
                    raise LLMError(f"Gemini call failed with HTTP {err.code} (model {self.model}, not "
                                   f"retried): {self._scrub(str(err.message or err.status or ''))}") from None
                last = f"HTTP {err.code} {err.status or ''}".strip()
                hint = _server_delay_s(err)
                if hint is not None and hint > self.retry_max_delay_s and attempt + 1 < attempts:
                    raise LLMError(f"Gemini call failed with {last} (model {self.model}); the server asks to "
                                   f"retry after {hint:.0f} s, longer than the {self.retry_max_delay_s:g} s "
                                   "this backend waits: wait or retry later") from None
            except transport as err:
                last, hint = f"network error {type(err).__name__}", None
            except malformed as err:
                raise self._malformed(f"{type(err).__name__}: {self._scrub(str(err))[:300]}") from None
            if attempt + 1 < attempts:
                delay = min(max(self.retry_base_delay_s * (2**attempt), hint or 0.0), self.retry_max_delay_s)
                self._sleep(delay * (1.0 + self.retry_jitter * self._rng.random()))
        raise LLMError(f"Gemini call failed after {attempts} attempts (model {self.model}); last error: "
                       f"{last}")

    def generate(self, prompt: str, system: str = "", json_schema: dict | None = None,
                 temperature: float = 0.0, run: int = 0) -> LLMResponse:
        """Reply to ``prompt``; ``run`` is sent as the sampling seed."""
        kwargs: dict[str, Any] = {"temperature": temperature, "seed": int(run)}
        if system:
            kwargs["system_instruction"] = system
        if json_schema is not None:
            kwargs.update(response_mime_type="application/json", response_json_schema=json_schema)
        reply, latency_s = self._call_with_retries(prompt, _genai()[2].GenerateContentConfig(**kwargs))
        if not getattr(reply, "candidates", None):
            feedback = getattr(reply, "prompt_feedback", None)
            raise self._malformed(f"no candidates in the reply (prompt feedback: {feedback})")
        if reply.text is None:
            reason = getattr(reply.candidates[0], "finish_reason", None)
            raise self._malformed(f"the first candidate has no text (finish reason: {reason})")
        usage = reply.usage_metadata
        return LLMResponse(text=reply.text, tokens_in=int((usage.prompt_token_count or 0) if usage else 0),
                           tokens_out=int((usage.candidates_token_count or 0) if usage else 0),
                           latency_s=latency_s, model=self.model, backend=self.name)


def generate_many(backend: LLMBackend, requests: Sequence[dict], max_workers: int = 4) -> list[LLMResponse]:
    """``backend.generate(**request)`` of each request in a thread pool, in request order; the first failing
    request (in order) raises its error once all calls have finished."""
    if max_workers < 1:
        raise ValueError("max_workers must be >= 1")
    with ThreadPoolExecutor(max_workers=min(max_workers, len(requests) or 1)) as pool:
        futures = [pool.submit(backend.generate, **request) for request in requests]
    return [future.result() for future in futures]
