"""LLM backends behind one small interface (see :mod:`toolbench_lib.llm.base`), the versioned prompts they
are given (``prompts``), the parsers of their replies (``parsing``) and plan-name resolution (``plan_names``).
"""

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
