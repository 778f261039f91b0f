"""The one LLM interface every backend implements: ``generate(...)`` returns an :class:`LLMResponse`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable


class LLMError(RuntimeError):
    """An LLM call failed for good (retries exhausted, malformed reply, replay miss, ...)."""


@dataclass
class LLMResponse:
    """One LLM reply with its cost; ``cached`` says it came from a cache or cassette."""

    text: str
    tokens_in: int
    tokens_out: int
    latency_s: float
    model: str
    backend: str
    cached: bool = False


@runtime_checkable
class LLMBackend(Protocol):
    """A text generator. ``is_llm`` is False for the rule-based baseline."""

    name: str
    model: str
    is_llm: bool

    def generate(self, prompt: str, system: str = "", json_schema: dict | None = None,
                 temperature: float = 0.0, run: int = 0) -> LLMResponse:
        """Reply to ``prompt``. ``run`` is the index of an independent sample (seeded where possible)."""
