"""Gemini backend over the official ``google-genai`` client (imported on first use: it takes about a second).

The API key (``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``) never appears in any message. HTTP 429 and 5xx are
retried here with exponential backoff, exactly ``max_retries + 1`` attempts; a server's ``Retry-After`` or
``RetryInfo.retryDelay`` is honoured, and one longer than ``retry_max_delay_s`` is reported at once.
"""

from __future__ import annotations

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
DEFAULT_MODEL = "gemini-2.5-flash"


@functools.cache
def _transient_transport_errors() -> tuple[type[BaseException], ...]:
    """Connection and timeout errors of the HTTP stacks the client may use (httpx, httpx2)."""
    found: list[type[BaseException]] = []
    for module_name in ("httpx", "httpx2"):
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        for attr in ("TimeoutException", "ConnectError", "RemoteProtocolError"):
            cls = getattr(module, attr, None)
            if isinstance(cls, type):
                found.append(cls)
    return tuple(found)


def _genai() -> tuple[Any, Any, Any]:
    """``google.genai``'s ``(Client, errors, types)``, imported on first use."""
    from google.genai import Client, errors, types

    return Client, errors, types


def _malformed_reply_errors() -> tuple[type[BaseException], ...]:
    """Errors of a reply that came back but cannot be read."""
    return _genai()[1].UnknownApiResponseError, pydantic.ValidationError, json.JSONDecodeError


def read_api_key() -> str:
    """Return the Gemini API key from the environment, or raise :class:`LLMError`."""
    for var in API_KEY_ENV_VARS:
        value = os.environ.get(var, "").strip()
        if value:
            return value
    raise LLMError(
        "No Gemini API key: set the GEMINI_API_KEY or GOOGLE_API_KEY environment variable "
        "(or use a replay cassette instead of the live backend)."
    )


def is_retryable_status(code: int | None) -> bool:
    """HTTP 429 and 5xx are retried; everything else fails at once."""
    return code is not None and (code == 429 or 500 <= code <= 599)


def _retry_delay_hint(err: genai_errors.APIError) -> float | None:
    """Seconds from a Gemini ``RetryInfo.retryDelay`` detail (e.g. ``"12s"``), if present."""
    details = err.details if isinstance(err.details, dict) else {}
    inner = details.get("error", details)
    entries = inner.get("details") if isinstance(inner, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        delay = entry.get("retryDelay") if isinstance(entry, dict) else None
        match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)s\s*", delay) if isinstance(delay, str) else None
        if match:
            return float(match.group(1))
    return None


def _retry_after_s(err: genai_errors.APIError, now: float | None = None) -> float | None:
    """Seconds from the reply's ``Retry-After`` header (delay-seconds or an HTTP date), if present."""
    headers = getattr(getattr(err, "response", None), "headers", None)
    try:
        value = headers.get("retry-after") if headers is not None else None
    except (AttributeError, TypeError):
        return None
    if not isinstance(value, str) or not value.strip():
        return None
    try:
        seconds = float(value.strip())
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value.strip())
        except (TypeError, ValueError, IndexError):
            return None
        if when is None or when.tzinfo is None:
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _server_delay_s(err: genai_errors.APIError) -> float | None:
    """The longest wait the server asks for (``Retry-After`` or ``RetryInfo``), if any."""
    asked = [d for d in (_retry_after_s(err), _retry_delay_hint(err)) if d is not None]
    return max(asked) if asked else None


class GeminiBackend:
    """Gemini ``generateContent`` with seeded sampling, JSON mode, retries and bounded concurrency."""

    name = "gemini"
    is_llm = True

    def __init__(
        self,
        model: str = DEFAULT_MODEL,
        *,
        base_url: str | None = None,
        api_version: str | None = None,
        max_retries: int = 5,
        retry_base_delay_s: float = 1.0,
        retry_max_delay_s: float = 60.0,
        retry_jitter: float = 0.1,
        timeout_s: float = 120.0,
        max_concurrency: int = 16,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if max_concurrency < 1:
            raise ValueError("max_concurrency must be >= 1")
        self.model = model
        self.base_url = base_url if base_url is not None else (os.environ.get(BASE_URL_ENV_VAR) or None)
        self.max_retries = max_retries
        self.retry_base_delay_s = retry_base_delay_s
        self.retry_max_delay_s = retry_max_delay_s
        self.retry_jitter = retry_jitter
        self._sleep = sleep
        self._semaphore = threading.BoundedSemaphore(max_concurrency)
        self._rng = random.Random()
        self._api_key = read_api_key()
        self._client = _genai()[0](api_key=self._api_key,
                                   http_options=self._http_options(api_version, timeout_s))

    def __repr__(self) -> str:
        return f"GeminiBackend(model={self.model!r}, base_url={self.base_url!r})"

    def _http_options(self, api_version: str | None, timeout_s: float) -> genai_types.HttpOptions:
        """Client options: custom endpoint, timeout, and the client's own retries off (one attempt)."""
        types = _genai()[2]
        return types.HttpOptions(base_url=self.base_url, api_version=api_version,
                                 timeout=int(timeout_s * 1000),
                                 retry_options=types.HttpRetryOptions(attempts=1))

    def _config(self, system: str, json_schema: dict | None, temperature: float,
                run: int) -> genai_types.GenerateContentConfig:
        """Generation config: temperature, ``seed=run``, system instruction and JSON mode."""
        kwargs: dict[str, Any] = {"temperature": temperature, "seed": int(run)}
        if system:
            kwargs["system_instruction"] = system
        if json_schema is not None:
            kwargs["response_mime_type"] = "application/json"
            kwargs["response_json_schema"] = json_schema
        return _genai()[2].GenerateContentConfig(**kwargs)

    def _scrub(self, message: str) -> str:
        """Remove the API key from a message coming from the client or the server."""
        return message.replace(self._api_key, "[redacted]") if self._api_key else message

    def _backoff_s(self, attempt: int, hint: float | None) -> float:
        """Delay before retry number ``attempt + 1``: exponential, capped, with a little jitter."""
        delay = self.retry_base_delay_s * (2**attempt)
        if hint is not None:
            delay = max(delay, hint)
        delay = min(delay, self.retry_max_delay_s)
        return delay * (1.0 + self.retry_jitter * self._rng.random())

    def _call_once(self, prompt: str, config: genai_types.GenerateContentConfig) -> Any:
        """One HTTP attempt, holding a concurrency slot."""
        with self._semaphore:
            return self._client.models.generate_content(model=self.model, contents=prompt, config=config)

    def _malformed(self, detail: str) -> LLMError:
        return LLMError(f"Gemini returned a malformed reply (model {self.model}): {self._scrub(detail)}")

    def _call_with_retries(self, prompt: str, config: genai_types.GenerateContentConfig) -> tuple[Any, float]:
        """Call until success, a non-retryable error, or retries run out; returns (reply, latency_s)."""
        errors = _genai()[1]
        malformed, transport = _malformed_reply_errors(), _transient_transport_errors()
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            start = time.perf_counter()
            try:
                reply = self._call_once(prompt, config)
                return reply, time.perf_counter() - start
            except errors.APIError as err:
                if not is_retryable_status(err.code):
                    raise LLMError(
                        f"Gemini call failed with HTTP {err.code} (model {self.model}, not retried): "
                        f"{self._scrub(str(err.message or err.status or ''))}"
                    ) from None
                last = f"HTTP {err.code} {err.status or ''}".strip()
                hint = _server_delay_s(err)
                if hint is not None and hint > self.retry_max_delay_s and attempt + 1 < attempts:
                    raise LLMError(
                        f"Gemini call failed with {last} (model {self.model}); the server asks to retry "
                        f"after {hint:.0f} s, longer than the {self.retry_max_delay_s:g} s this backend "
                        "waits: wait or retry later"
                    ) from None
            except transport as err:
                last, hint = f"network error {type(err).__name__}", None
            except malformed as err:
                raise self._malformed(f"{type(err).__name__}: {str(err)[:300]}") from None
            if attempt + 1 < attempts:
                self._sleep(self._backoff_s(attempt, hint))
        raise LLMError(f"Gemini call failed after {attempts} attempts (model {self.model}); last error: "
                       f"{last}")

    def _to_response(self, reply: Any, latency_s: float) -> LLMResponse:
        """Turn a ``GenerateContentResponse`` into an :class:`LLMResponse`, or raise on a malformed one."""
        if not getattr(reply, "candidates", None):
            feedback = getattr(reply, "prompt_feedback", None)
            raise self._malformed(f"no candidates in the reply (prompt feedback: {feedback})")
        text = reply.text
        if text is None:
            reason = getattr(reply.candidates[0], "finish_reason", None)
            raise self._malformed(f"the first candidate has no text (finish reason: {reason})")
        usage = reply.usage_metadata
        tokens_in = (usage.prompt_token_count or 0) if usage else 0
        tokens_out = (usage.candidates_token_count or 0) if usage else 0
        return LLMResponse(text=text, tokens_in=int(tokens_in), tokens_out=int(tokens_out),
                           latency_s=latency_s, model=self.model, backend=self.name)

    def generate(self, prompt: str, system: str = "", json_schema: dict | None = None,
                 temperature: float = 0.0, run: int = 0) -> LLMResponse:
        """Reply to ``prompt``; ``run`` is sent as the sampling seed."""
        config = self._config(system, json_schema, temperature, run)
        return self._to_response(*self._call_with_retries(prompt, config))


def generate_many(backend: LLMBackend, requests: Sequence[dict], max_workers: int = 4) -> list[LLMResponse]:
    """``backend.generate(**request)`` of each request in a thread pool, in request order; the first failing
    request (in order) raises its error once all calls have finished."""
    if max_workers < 1:
        raise ValueError("max_workers must be >= 1")
    if not requests:
        return []
    with ThreadPoolExecutor(max_workers=min(max_workers, len(requests))) as pool:
        futures = [pool.submit(backend.generate, **request) for request in requests]
    return [future.result() for future in futures]
