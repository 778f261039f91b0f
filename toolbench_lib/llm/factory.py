"""Build a backend by name (``gemini``, ``local``, ``rules``, ``replay``), live ones behind the call cache."""

from __future__ import annotations

from pathlib import Path

from ..data.paths import CACHE_DIR, DATA_ROOT
from .base import LLMBackend
from .cached import CachedLLM
from .gemini import GeminiBackend
from .local import LocalBackend
from .replay import ReplayBackend
from .rules import RulesBackend
from .store import CallStore

BACKENDS = ("replay", "rules", "local", "gemini")
DEFAULT_CASSETTE = DATA_ROOT / "cassettes" / "local-qwen2.5-coder-1.5b.jsonl.gz"
DEFAULT_STORE = CACHE_DIR / "llm" / "calls.sqlite"


def default_workers(name: str) -> int:
    """Concurrent calls a backend takes by default: Gemini 16, a local model or replay one."""
    return 16 if name == "gemini" else 1


def make_backend(name: str, cassette: str | Path | None = None, model: str | None = None,
                 store: str | Path | None = DEFAULT_STORE) -> LLMBackend:
    """A backend by name; ``replay`` reads ``cassette`` (default: the committed local-model cassette), live
    ones (``gemini``, ``local``) are wrapped in the durable call cache unless ``store=None``."""
    if name == "replay":
        path = Path(cassette) if cassette else DEFAULT_CASSETTE
        if not path.exists():
            raise FileNotFoundError(f"cassette {path} not found")
        return ReplayBackend(path, model=model)
    if name == "rules":
        return RulesBackend()
    if name == "local":
        backend: LLMBackend = LocalBackend() if model is None else LocalBackend(model_path=Path(model))
    elif name == "gemini":
        backend = GeminiBackend(model=model) if model else GeminiBackend()
    else:
        raise ValueError(f"unknown backend {name!r}; choose one of {BACKENDS}")
    return backend if store is None else CachedLLM(backend, CallStore(store))
