"""LLM backends behind one small interface (see :mod:`toolbench_lib.llm.base`), the versioned prompts they
are given (``prompts``), the parsers of their replies (``parsing``, resting on the JSON extraction of
``json_text``), plan-name resolution (``plan_names``), the call store (``store``), the caching wrapper
(``cached``), cassettes (``cassettes``) and the replay backend (``replay``).
"""

from .base import LLMBackend, LLMError, LLMResponse
from .cached import CachedLLM
from .cassettes import export_cassette, import_cassette
from .replay import ReplayBackend
from .store import CallStore, call_key

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
