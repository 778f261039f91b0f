"""The caching wrapper: any backend behind a :class:`~toolbench_lib.llm.store.CallStore`."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from typing import Any

from .base import LLMBackend, LLMResponse
from .store import CallRequest, CallStore


class CachedLLM:
    """A backend behind a :class:`CallStore` that calls its inner backend once per distinct call."""

    accepts_prompt_version = True

    def __init__(self, backend: LLMBackend, store: CallStore, prompt_version: str = "v0") -> None:
        self.backend, self.store, self.prompt_version = backend, store, prompt_version
        self.name, self.model, self.is_llm = backend.name, backend.model, backend.is_llm
        self.hits = self.misses = 0
        self._lock = threading.Lock()
        self._inflight: dict[str, list[Any]] = {}

    def __repr__(self) -> str:
        return f"CachedLLM({self.backend!r}, {self.store!r}, prompt_version={self.prompt_version!r})"

    @contextlib.contextmanager
    def _key_lock(self, key: str) -> Iterator[None]:
        """Hold a lock private to ``key`` (created on demand, dropped when unused)."""
        with self._lock:
            entry = self._inflight.setdefault(key, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._lock:
                entry[1] -= 1
                if entry[1] == 0:
                    del self._inflight[key]

    def generate(self, prompt: str, system: str = "", json_schema: dict | None = None,
                 temperature: float = 0.0, run: int = 0, *, prompt_version: str | None = None) -> LLMResponse:
        """Stored reply if this exact call was made before; else call the backend, store, return."""
        version = prompt_version if prompt_version is not None else self.prompt_version
        request = CallRequest(backend=self.name, model=self.model, prompt_version=version, system=system,
                              prompt=prompt, json_schema=json_schema, temperature=float(temperature),
                              run=int(run), is_llm=bool(self.is_llm))
        key = request.key()
        with self._key_lock(key):
            cached = self.store.get(key)
            if cached is not None:
                with self._lock:
                    self.hits += 1
                return cached
            takes_version = getattr(self.backend, "accepts_prompt_version", False)
            extra = {"prompt_version": version} if takes_version else {}
            response = self.backend.generate(prompt, system=system, json_schema=json_schema,
                                             temperature=request.temperature, run=request.run, **extra)
            stored_first = self.store.put(key, request, response)
            with self._lock:
                self.misses += 1
            # another process stored this call meanwhile: everyone uses its reply
            return response if stored_first else self.store.get(key) or response
