"""LLM backends behind one small interface (see :mod:`toolbench_lib.llm.base`)."""

from .base import LLMBackend, LLMError, LLMResponse

__all__ = ["LLMBackend", "LLMError", "LLMResponse"]
