"""Tolerant parsers for model replies: JSON extraction, tool stubs, plans, verdicts, API resolution.

Replies from small models come wrapped in code fences or prose, with trailing commas, Python-style
quotes, one object where a list was asked for, or cut off mid-list. These parsers recover what they
can and say when they could not (``fell_back`` for stubs, ``parse_ok`` for plans).

They never raise on any string: huge integers, deep nesting, NUL bytes and lone surrogates are
handled, and the work per reply is bounded (a token and a character budget), so a 1 MB reply is
parsed in well under a second; a reply that exhausts the budget keeps what was found so far.
"""

from __future__ import annotations

import ast
import json
import math
import re
from dataclasses import dataclass, field

from .plan_names import fidelity, resolve_plan_apis, resolve_step, resolve_step_strict  # noqa: F401 (re-export)

_MAX_FAILED_STARTS = 64
_MAX_TRUNCATION_TRIES = 16
_SCAN_TOKEN_BUDGET = 100_000  # brackets and string literals looked at per reply (a decode costs 20)
_LOAD_CHAR_BUDGET = 8_000_000  # characters handed to the JSON decoders per reply
_LITERAL_EVAL_MAX_CHARS = 100_000  # Python-literal fallback only for replies of a sane size
_MAX_STEP_NUMBER = 10_000
_OPEN_TO_CLOSE = {"[": "]", "{": "}"}
_STUB_LIST_KEYS = ("stubs", "tools", "tool_stubs", "apis", "items", "results", "capabilities")
_NAME_KEYS = ("name", "tool_name", "tool", "api_name", "api", "title")
_REASON_KEYS = ("reasoning", "reason", "description", "purpose", "why")
_STEP_LIST_KEYS = ("steps", "plan", "calls", "actions", "tools", "apis")
_STEP_TOOL_KEYS = ("tool_name", "tool")
_STEP_API_KEYS = ("api_name", "api", "endpoint", "name")
_STEP_PURPOSE_KEYS = ("purpose", "reason", "reasoning", "description")


# --------------------------------------------------------------------------- JSON extraction


_STRING = {
    '"': r'"[^"\\]*(?:\\(?:.|\Z)[^"\\]*)*"?',
    "'": r"'[^'\\]*(?:\\(?:.|\Z)[^'\\]*)*'?",
}
_STRINGS = {quotes: re.compile("|".join(_STRING[q] for q in quotes), re.S) for quotes in ('"', "\"'")}
_TOKEN = re.compile(r'"[^"\\]*(?:\\(?:.|\Z)[^"\\]*)*(")?|[\[\]{}]', re.S)
_OPEN = re.compile(r"[\[{]")


class _BudgetSpent(Exception):
    """The reply used up its parsing budget."""


class _Budget:
    """Work left for one reply: tokens scanned and characters decoded."""

    def __init__(self) -> None:
        self.tokens = _SCAN_TOKEN_BUDGET
        self.chars = _LOAD_CHAR_BUDGET
        self.best: object | None = None  # the best value found so far

    def spend(self, tokens: int, chars: int = 0) -> None:
        self.tokens -= tokens
        self.chars -= chars
        if self.tokens < 0 or self.chars < 0:
            raise _BudgetSpent


def _segments(text: str, quotes: str) -> list[tuple[bool, str]]:
    """Split ``text`` into ``(is_string, chunk)`` pieces; strings use any quote char in ``quotes``.

    An unterminated string runs to the end of ``text``.
    """
    out: list[tuple[bool, str]] = []
    pos = 0
    for m in _STRINGS[quotes].finditer(text):
        if m.start() > pos:
            out.append((False, text[pos : m.start()]))
        out.append((True, m.group()))
        pos = m.end()
    if pos < len(text):
        out.append((False, text[pos:]))
    return out


def _outside_strings(text: str, quotes: str, fn) -> str:
    """Apply ``fn`` to the parts of ``text`` outside string literals."""
    return "".join(chunk if is_str else fn(chunk) for is_str, chunk in _segments(text, quotes))


_TRAILING_COMMA = re.compile(r",(\s*[}\]])")


def _drop_trailing_commas(text: str) -> str:
    """Remove commas directly before ``}`` or ``]`` (outside strings)."""
    return _outside_strings(text, '"', lambda s: _TRAILING_COMMA.sub(r"\1", s))


def _pythonish(text: str) -> str:
    """JSON literals turned into Python ones (outside strings) for :func:`ast.literal_eval`."""
    table = {"true": "True", "false": "False", "null": "None"}
    return _outside_strings(
        text, "\"'", lambda s: re.sub(r"\b(true|false|null)\b", lambda m: table[m.group(1)], s)
    )


def _as_container(value: object) -> object | None:
    """``value`` if it is a dict or list (tuples become lists), else None."""
    if isinstance(value, tuple):
        value = list(value)
    return value if isinstance(value, (dict, list)) else None


def _loads(text: str, budget: _Budget | None = None) -> object | None:
    """Parse a JSON-ish container: strict, then without trailing commas, then as a Python literal."""
    if budget is not None:
        budget.spend(20, len(text))
    for repair in (None, _drop_trailing_commas):  # the repair pass only when strict JSON fails
        try:
            return _as_container(json.loads(text if repair is None else repair(text)))
        except (ValueError, RecursionError):
            continue
    if len(text) > _LITERAL_EVAL_MAX_CHARS:
        return None
    try:
        return _as_container(ast.literal_eval(_pythonish(text)))
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
    tried = 0
    end = len(text)
    while tried < _MAX_TRUNCATION_TRIES:
        pos = max(text.rfind("}", start, end), text.rfind("]", start, end))
        if pos <= start:
            return None
        piece = text[start : pos + 1]
        _, stack = _match_end(piece, 0, budget)
        if stack:
            value = _loads(piece + "".join(reversed(stack)), budget)
            if value is not None:
                return value
        tried += 1
        end = pos
    return None


def extract_json(text: str | None) -> object | None:
    """The JSON object or list in a model reply, or None when there is none.

    Tolerates code fences, prose around the payload, trailing commas, Python literals / single quotes
    and a reply truncated mid-list. When several bracketed spans parse, the longest wins. Bare scalars
    (numbers, strings) do not count as usable. Never raises; the work per reply is bounded.
    """
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


# --------------------------------------------------------------------------- helpers


def _clean(value: object) -> str:
    """A scalar as a one-line string; containers, None, booleans and unprintable or non-finite numbers
    give ''.

    Lone surrogates become ``?`` so that the text can be encoded (stored, embedded) later.
    """
    if isinstance(value, bool) or value is None or isinstance(value, (dict, list, tuple)):
        return ""
    if isinstance(value, float) and not math.isfinite(value):  # 1e999, NaN, Infinity name nothing
        return ""
    try:
        text = " ".join(str(value).split())
    except (ValueError, RecursionError, MemoryError):  # e.g. an int of more than 4,300 digits
        return ""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        text = text.encode("utf-8", "replace").decode("utf-8")
    return text


def _first(d: dict, keys: tuple[str, ...]) -> str:
    """The first non-empty cleaned value among ``keys`` of ``d``."""
    for key in keys:
        value = _clean(d.get(key))
        if value:
            return value
    return ""


def _truthy(value: object) -> bool:
    """Booleans, numbers and ``"true"/"yes"`` strings as a flag."""
    if isinstance(value, str):
        return value.strip().lower() in {"true", "yes", "y", "1", "refuse", "refused"}
    return bool(value) if isinstance(value, (bool, int, float)) else False


# --------------------------------------------------------------------------- stubs


@dataclass
class Stub:
    """A hypothesised tool: a short API-style name and why the request needs it."""

    name: str
    reasoning: str = ""


def stub_text(stub: Stub) -> str:
    """The text embedded for a stub: ``"name: reasoning"`` (just the name when no reasoning)."""
    return f"{stub.name}: {stub.reasoning}" if stub.reasoning else stub.name


def _name_from_reasoning(reasoning: str, n_words: int = 6) -> str:
    """A stand-in name: the first words of the reasoning."""
    return " ".join(reasoning.split()[:n_words]).strip(" .,;:")


def _stub_items(data: object) -> list:
    """The candidate stub items of a parsed reply."""
    if isinstance(data, list):
        return data
    if not isinstance(data, dict):
        return []
    for key in _STUB_LIST_KEYS:
        if isinstance(data.get(key), list):
            return data[key]
    if any(k in data for k in _NAME_KEYS + _REASON_KEYS):
        return [data]
    lists = [v for v in data.values() if isinstance(v, list)]
    return lists[0] if len(lists) == 1 else []


def _to_stub(item: object) -> Stub | None:
    """One item as a Stub, or None when it names nothing."""
    if isinstance(item, dict):
        name, reasoning = _first(item, _NAME_KEYS), _first(item, _REASON_KEYS)
    else:
        name, reasoning = _clean(item), ""
    if not name and reasoning:
        name = _name_from_reasoning(reasoning)
    return Stub(name=name, reasoning=reasoning) if name else None


def parse_stubs(text: str | None, query: str, max_stubs: int = 8) -> tuple[list[Stub], bool]:
    """Stubs from a reply, deduplicated by name (case-insensitive), at most ``max_stubs``.

    Returns ``(stubs, fell_back)``; when nothing usable is found the only stub is the raw query.
    """
    stubs: list[Stub] = []
    seen: set[str] = set()
    for item in _stub_items(extract_json(text)):
        stub = _to_stub(item)
        if stub is None or stub.name.casefold() in seen:
            continue
        seen.add(stub.name.casefold())
        stubs.append(stub)
        if len(stubs) >= max_stubs:
            break
    if stubs:
        return stubs, False
    return [Stub(name=query, reasoning="fallback: raw query")], True


# --------------------------------------------------------------------------- plans


@dataclass
class Plan:
    """A parsed plan. ``parse_ok`` is False when the reply held no plan-like JSON."""

    steps: list[dict] = field(default_factory=list)
    refusal: bool = False
    reason: str = ""
    parse_ok: bool = False


def _to_step(item: object, position: int) -> dict | None:
    """One step as ``{step, tool_name, api_name, purpose}``, or None when it names no API."""
    if isinstance(item, dict):
        tool, api = _first(item, _STEP_TOOL_KEYS), _first(item, _STEP_API_KEYS)
        purpose = _first(item, _STEP_PURPOSE_KEYS)
        number = item.get("step")
    else:
        text = _clean(item)
        tool, _, api = text.partition(" / ") if " / " in text else ("", "", text)
        purpose, number = "", None
    if not tool and not api:
        return None
    try:
        step = int(number) if not isinstance(number, bool) and number is not None else position
    except (TypeError, ValueError, OverflowError):
        step = position
    if not 0 <= step <= _MAX_STEP_NUMBER:
        step = position
    return {"step": step, "tool_name": tool.strip(), "api_name": api.strip(), "purpose": purpose}


def _plan_parts(data: object) -> tuple[list | None, dict]:
    """The raw step list (None when the reply has no step list) and the enclosing object."""
    if isinstance(data, list):
        return data, {}
    if not isinstance(data, dict):
        return None, {}
    for key in _STEP_LIST_KEYS:
        if isinstance(data.get(key), list):
            return data[key], data
    if any(k in data for k in _STEP_TOOL_KEYS + ("api_name",)):
        return [data], {}
    return None, data


def parse_plan(text: str | None) -> Plan:
    """A :class:`Plan` from a reply: an object with ``steps`` (and ``refusal``/``reason``) or a bare list.

    A refusal is the ``refusal`` flag, or an empty step list that comes with a reason.
    """
    data = extract_json(text)
    raw_steps, obj = _plan_parts(data)
    refusal_key = next((k for k in ("refusal", "refuse", "refused") if k in obj), None)
    reason = _first(obj, ("reason", "reasoning", "explanation"))
    if raw_steps is None and refusal_key is None and not reason:
        return Plan(parse_ok=False)
    steps = [s for i, item in enumerate(raw_steps or [], start=1) if (s := _to_step(item, i))]
    refusal = _truthy(obj.get(refusal_key)) if refusal_key else False
    refusal = refusal or (not steps and bool(reason))
    return Plan(steps=steps, refusal=refusal, reason=reason, parse_ok=True)


# --------------------------------------------------------------------------- resolution
# Plan-name resolution lives in :mod:`toolbench_lib.llm.plan_names` (imported above for existing callers).

# --------------------------------------------------------------------------- verdicts

_VERDICT_RE = re.compile(r"\b(unsolved|not\s+solved|solved)\b", re.IGNORECASE)
_VERDICT_KEYS = ("verdict", "answer", "label", "result", "judgement", "judgment")


def _verdict_word(text: str) -> str | None:
    """The first Solved/Unsolved mention in ``text``."""
    m = _VERDICT_RE.search(text)
    if not m:
        return None
    return "Solved" if m.group(1).lower() == "solved" else "Unsolved"


def parse_verdict(text: str | None) -> str | None:
    """``"Solved"``, ``"Unsolved"`` or None, from a JSON verdict field or the first mention in prose."""
    if not text:
        return None
    data = extract_json(text)
    if isinstance(data, dict):
        for key in _VERDICT_KEYS:
            value = data.get(key)
            if isinstance(value, str) and (word := _verdict_word(value)):
                return word
    return _verdict_word(text)
