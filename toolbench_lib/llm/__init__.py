"""LLM backends behind one small interface (see :mod:`toolbench_lib.llm.base`)."""

from .base import LLMBackend, LLMError, LLMResponse
from .cache import CachedLLM, CallStore, ReplayBackend, call_key, export_cassette, import_cassette

__all__ = [
    "CachedLLM",
    "CallStore",
    "LLMBackend",
    "LLMError",
    "LLMResponse",
    "ReplayBackend",
    "call_key",
    "export_cassette",
    "import_cassette",
]
