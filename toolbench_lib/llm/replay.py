"""The replay backend: answers only from cassettes, whichever backend recorded them."""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from .base import LLMError, LLMResponse
from .cassettes import unique_records
from .store import _canonical, _record_to_response

# What a user can do about a miss (stubs for PtR, ltr and ltr-4runs, or plans, of queries never recorded).
MISS_CHOICES = ("a live backend answers it (--backend gemini or local; --backend rules writes rule-based "
                "stubs), or choose methods that call no LLM (rtp, rtp@bm25, rtp@hybrid, ltr-nollm with "
                "--plan-limit 0)")


def _match_key(prompt_version: str | None, system: str, prompt: str, json_schema: dict | None,
               temperature: float, run: int) -> tuple:
    return (prompt_version, system, prompt, _canonical(json_schema), float(temperature), int(run))


class ReplayBackend:
    """Answers only from recorded cassettes (any recording backend, or only ``model``'s), a miss raising
    :class:`LLMError`; replies keep the recording backend's name and model and are marked ``cached``."""

    name = "replay"
    accepts_prompt_version = True

    def __init__(self, cassette_path_or_paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
                 model: str | None = None) -> None:
        if isinstance(cassette_path_or_paths, (str, os.PathLike)):
            cassette_path_or_paths = [cassette_path_or_paths]
        self.paths = [Path(p) for p in cassette_path_or_paths]
        self.model_filter = model
        self._by_version: dict[tuple, dict[str, dict]] = {}
        self._any_version: dict[tuple, dict[str, dict]] = {}
        records = [r for r in unique_records(self.paths) if model is None or r["model"] == model]
        for record in records:
            args = tuple(record[name] for name in ("system", "prompt", "json_schema", "temperature", "run"))
            for index, version in ((self._by_version, record["prompt_version"]), (self._any_version, None)):
                index.setdefault(_match_key(version, *args), {})[record["key"]] = record
        models = {r["model"] for r in records}
        self.model = model if model is not None else (models.pop() if len(models) == 1 else "replay")
        self.is_llm = {r["is_llm"] for r in records} != {False}

    def __repr__(self) -> str:
        return f"ReplayBackend({[str(p) for p in self.paths]!r}, model={self.model_filter!r})"

    def __len__(self) -> int:
        return sum(len(group) for group in self._by_version.values())

    def _describe(self, prompt_version: str | None, prompt: str, temperature: float, run: int) -> str:
        head = prompt[:120] + ("..." if len(prompt) > 120 else "")
        where = ", ".join(str(p) for p in self.paths)
        model = f", model={self.model_filter}" if self.model_filter else ""
        return (f"prompt_version={prompt_version if prompt_version is not None else '(any)'}, run={run}, "
                f"temperature={temperature}{model}, prompt={head!r}; cassette(s): {where}")

    def generate(self, prompt: str, system: str = "", json_schema: dict | None = None,
                 temperature: float = 0.0, run: int = 0, *, prompt_version: str | None = None) -> LLMResponse:
        """The recorded reply for this call; raises :class:`LLMError` on a miss or an ambiguous match."""
        index = self._by_version if prompt_version is not None else self._any_version
        found = index.get(_match_key(prompt_version, system, prompt, json_schema, temperature, run), {})
        if not found:
            raise LLMError(f"replay miss: no recorded reply for "
                           f"{self._describe(prompt_version, prompt, temperature, run)}; {MISS_CHOICES}")
        if len(found) > 1:
            origins = sorted({f"{r['backend']}/{r['model']}@{r['prompt_version']}" for r in found.values()})
            raise LLMError(f"replay ambiguous: {len(found)} recorded replies ({', '.join(origins)}) for "
                           f"{self._describe(prompt_version, prompt, temperature, run)}; pass model=... or "
                           "prompt_version=... to choose one")
        return _record_to_response(next(iter(found.values())))
