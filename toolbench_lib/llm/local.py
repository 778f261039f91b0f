"""Local backend: a GGUF model on the CPU through llama-cpp-python, loaded on first use; no KV-cache reuse (a
reply would depend on the call before), ``json_schema`` ignored unless ``use_grammar`` (it costs ~40%)."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from ..data.machine import available_cpus
from .base import LLMError, LLMResponse
from .local_model import GGUF_ENV_VAR, INSTALL_HINT, MODEL_NAME, ModelFileError, resolve_gguf


def _default_threads() -> int:
    """One thread fewer than the CPUs this process may run on (at least one): llama.cpp's threads spin at
    every barrier, so on 2 cores beside one busy process 2 threads made 1-4 tokens/s, 1 thread 19."""
    return max(available_cpus() - 1, 1)


class LocalBackend:
    """A GGUF chat model (``model_path``, else ``$TOOLBENCH_GGUF``, else the assembled Qwen2.5-Coder GGUF)
    run in-process with llama.cpp, calls serialised by a lock; ``run`` is the sampling seed."""

    name = "local"
    is_llm = True

    def __init__(self, model_path: Path | None = None, n_ctx: int = 4096, n_threads: int | None = None,
                 max_tokens: int = 512, *, use_grammar: bool = False, reuse_prefix: bool = False) -> None:
        if n_ctx < 1 or max_tokens < 1:
            raise ValueError("n_ctx and max_tokens must be >= 1")
        self.model_path = Path(model_path) if model_path is not None else None
        custom = self.model_path or os.environ.get(GGUF_ENV_VAR, "").strip()
        self.model = Path(custom).stem if custom else MODEL_NAME
        self.n_ctx, self.max_tokens = n_ctx, max_tokens
        self.n_threads = n_threads if n_threads is not None else _default_threads()
        self.use_grammar, self.reuse_prefix = use_grammar, reuse_prefix
        self._llama: Any = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"LocalBackend(model={self.model!r}, n_ctx={self.n_ctx}, n_threads={self.n_threads})"

    def _load(self) -> Any:
        """The ``Llama`` object, created on first use (caller holds the lock)."""
        if self._llama is not None:
            return self._llama
        try:
            import llama_cpp
        except ImportError as err:
            raise LLMError(f"llama-cpp-python is not installed ({err}); install it with "
                           f"{INSTALL_HINT}") from None
        try:
            path = resolve_gguf(self.model_path)
        except ModelFileError as err:
            raise LLMError(str(err)) from None
        try:
            self._llama = llama_cpp.Llama(model_path=str(path), n_ctx=self.n_ctx, n_threads=self.n_threads,
                                          n_threads_batch=self.n_threads, verbose=False)
        except Exception as err:  # llama.cpp reports load failures as ValueError / RuntimeError
            raise LLMError(f"Could not load GGUF model {path}: {type(err).__name__}: {err}") from None
        return self._llama

    def generate(self, prompt: str, system: str = "", json_schema: dict | None = None,
                 temperature: float = 0.0, run: int = 0) -> LLMResponse:
        """Reply to ``prompt`` (system + user chat messages); ``run`` seeds the sampler."""
        messages = [{"role": "system", "content": system}] if system else []
        messages.append({"role": "user", "content": prompt})
        kwargs: dict[str, Any] = {"messages": messages, "temperature": float(temperature), "seed": int(run),
                                  "max_tokens": self.max_tokens}
        if self.use_grammar and json_schema is not None:
            kwargs["response_format"] = {"type": "json_object", "schema": json_schema}
        with self._lock:
            llama = self._load()
            start = time.perf_counter()
            try:
                if not self.reuse_prefix:
                    llama.reset()
                reply = llama.create_chat_completion(**kwargs)
            except Exception as err:  # e.g. ValueError when the prompt exceeds the context window
                raise LLMError(f"Local model call failed ({self.model}): {type(err).__name__}: "
                               f"{err}") from None
            latency_s = time.perf_counter() - start
        try:
            text = reply["choices"][0]["message"]["content"]
            usage = reply.get("usage") or {}
        except (KeyError, IndexError, TypeError) as err:
            raise LLMError(f"Local model returned a malformed reply ({self.model}): {err!r}") from None
        if text is None:
            raise LLMError(f"Local model returned no text ({self.model})")
        return LLMResponse(text=text, tokens_in=int(usage.get("prompt_tokens") or 0),
                           tokens_out=int(usage.get("completion_tokens") or 0), latency_s=latency_s,
                           model=self.model, backend=self.name)
