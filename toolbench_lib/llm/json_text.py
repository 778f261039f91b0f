"""Tolerant extraction of the JSON object or list in a model reply (:func:`extract_json`): it never raises on
any string, and the work per reply is bounded by a token and a character budget."""

from __future__ import annotations

import ast
import json
import re
import warnings

_MAX_FAILED_STARTS = 64
_MAX_TRUNCATION_TRIES = 16
_SCAN_TOKEN_BUDGET = 100_000  # brackets and string literals looked at per reply (a decode costs 20)
_LOAD_CHAR_BUDGET = 8_000_000  # characters handed to the JSON decoders per reply
_LITERAL_EVAL_MAX_CHARS = 100_000  # Python-literal fallback only for replies of a sane size
_OPEN_TO_CLOSE = {"[": "]", "{": "}"}


_STRING = {q: rf"{q}[^{q}\\]*(?:\\(?:.|\Z)[^{q}\\]*)*{q}?" for q in "\"'"}
_STRINGS = {quotes: re.compile("|".join(_STRING[q] for q in quotes), re.S) for quotes in ('"', "\"'")}
_TOKEN = re.compile(r'"[^"\\]*(?:\\(?:.|\Z)[^"\\]*)*(")?|[\[\]{}]', re.S)
_OPEN = re.compile(r"[\[{]")


class _BudgetSpent(Exception):
    """The reply used up its parsing budget."""


class _Budget:
    """Work left for one reply: tokens scanned and characters decoded."""

    def __init__(self) -> None:
        self.tokens, self.chars = _SCAN_TOKEN_BUDGET, _LOAD_CHAR_BUDGET
        self.best: object | None = None  # the best value found so far

    def spend(self, tokens: int, chars: int = 0) -> None:
        self.tokens -= tokens
        self.chars -= chars
        if self.tokens < 0 or self.chars < 0:
            raise _BudgetSpent


def _outside_strings(text: str, quotes: str, fn) -> str:
    """Apply ``fn`` to ``text`` outside string literals (quoted by ``quotes``; unterminated: to the end)."""
    out, pos = [], 0
    for m in _STRINGS[quotes].finditer(text):
        out += [fn(text[pos : m.start()]) if m.start() > pos else "", m.group()]
        pos = m.end()
    return "".join(out) + (fn(text[pos:]) if pos < len(text) else "")


_TRAILING_COMMA = re.compile(r",(\s*[}\]])")
_PY_LITERALS = {"true": "True", "false": "False", "null": "None"}


def _as_container(value: object) -> object | None:
    if isinstance(value, tuple):
        value = list(value)
    return value if isinstance(value, (dict, list)) else None


def _loads(text: str, budget: _Budget | None = None) -> object | None:
    """Parse a JSON-ish container: strict, then without trailing commas, then as a Python literal."""
    if budget is not None:
        budget.spend(20, len(text))
    for repair in (None, lambda s: _TRAILING_COMMA.sub(r"\1", s)):
        try:
            return _as_container(json.loads(text if repair is None else _outside_strings(text, '"', repair)))
        except (ValueError, RecursionError):
            continue
    if len(text) > _LITERAL_EVAL_MAX_CHARS:
        return None
    pythonish = _outside_strings(  # JSON literals turned into Python ones (outside strings)
        text, "\"'", lambda s: re.sub(r"\b(true|false|null)\b", lambda m: _PY_LITERALS[m.group(1)], s))
    try:  # a reply's odd escapes (``\]``) would warn on the user's console: its text is data, not code
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return _as_container(ast.literal_eval(pythonish))
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None


def _match_end(text: str, start: int, budget: _Budget) -> tuple[int | None, list[str]]:
    """Index after the bracket closing ``text[start]`` (None if unclosed/mismatched) and the open stack."""
    stack: list[str] = []
    for m in _TOKEN.finditer(text, start):
        budget.spend(1)
        tok = m.group()
        if tok[0] == '"':
            if m.group(1) is None:  # an unterminated string runs to the end
                return None, stack
            continue
        if tok in _OPEN_TO_CLOSE:
            stack.append(_OPEN_TO_CLOSE[tok])
        elif not stack or stack.pop() != tok:
            return None, []
        elif not stack:
            return m.end(), []
    return None, stack


def _repair_truncated(text: str, start: int, budget: _Budget) -> object | None:
    """Best effort for a reply cut off mid-structure: keep complete items and close the brackets."""
    end = len(text)
    for _ in range(_MAX_TRUNCATION_TRIES):
        pos = max(text.rfind("}", start, end), text.rfind("]", start, end))
        if pos <= start:
            return None
        piece = text[start : pos + 1]
        _, stack = _match_end(piece, 0, budget)
        if stack:
            value = _loads(piece + "".join(reversed(stack)), budget)
            if value is not None:
                return value
        end = pos
    return None


def extract_json(text: str | None) -> object | None:
    """The JSON object or list in a model reply (fences, prose, trailing commas, Python literals, truncation
    tolerated; the longest span that parses wins), or None (a bare scalar too)."""
    if not isinstance(text, str) or not text.strip():
        return None
    budget = _Budget()
    try:
        return _extract(text, budget)
    except _BudgetSpent:
        return budget.best
    except (RecursionError, MemoryError):
        return None


def _extract(text: str, budget: _Budget) -> object | None:
    """:func:`extract_json`'s search, spending ``budget``."""
    whole = text.strip()
    if whole[0] in "[{":
        value = _loads(whole, budget)
        if value is not None:
            return value
    best: tuple[int, int, object] | None = None  # (span length, start, value)
    first_unclosed: int | None = None
    failed = 0
    m = _OPEN.search(text)
    while m is not None and failed < _MAX_FAILED_STARTS:
        i = m.start()
        end, stack = _match_end(text, i, budget)
        value = _loads(text[i:end], budget) if end is not None else None
        if value is not None:
            if best is None or end - i > best[0]:
                best = (end - i, i, value)
                budget.best = value
            m = _OPEN.search(text, end)
            continue
        if end is None and stack and first_unclosed is None:
            first_unclosed = i
        failed += 1
        m = _OPEN.search(text, i + 1)
    if first_unclosed is not None and (best is None or first_unclosed < best[1]):
        repaired = _repair_truncated(text, first_unclosed, budget)
        if repaired is not None:
            return repaired
    return best[2] if best is not None else None
