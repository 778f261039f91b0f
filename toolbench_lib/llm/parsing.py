"""Tolerant parsers for model replies (stubs, plans, verdicts): they never raise on any string and say when
they could not parse (``fell_back`` for stubs, ``parse_ok`` for plans)."""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

from .cassettes import read_cassette
from .json_text import extract_json
from .plan_names import RULES, RegistryNames, fidelity, parse_api_docs, resolve_plan_apis, resolve_plan_detail
from .prompts import PLAN_PROMPT, extract_section

_MAX_STEP_NUMBER = 10_000
_STUB_LIST_KEYS = ("stubs", "tools", "tool_stubs", "apis", "items", "results", "capabilities")
_NAME_KEYS = ("name", "tool_name", "tool", "api_name", "api", "title")
_REASON_KEYS = ("reasoning", "reason", "description", "purpose", "why")
_STEP_LIST_KEYS = ("steps", "plan", "calls", "actions", "tools", "apis")
_STEP_TOOL_KEYS = ("tool_name", "tool")
_STEP_API_KEYS = ("api_name", "api", "endpoint", "name")
_STEP_PURPOSE_KEYS = ("purpose", "reason", "reasoning", "description")


def _clean(value: object) -> str:
    """A scalar as a one-line string (lone surrogates as ``?``); containers, None, bools, nan, inf give ''."""
    if (value is None or isinstance(value, (bool, dict, list, tuple))
            or (isinstance(value, float) and not math.isfinite(value))):  # 1e999, NaN, Infinity name nothing
        return ""
    try:
        text = " ".join(str(value).split())
    except (ValueError, RecursionError, MemoryError):  # e.g. an int of more than 4,300 digits
        return ""
    return text.encode("utf-8", "replace").decode("utf-8")


def _first(d: dict, keys: tuple[str, ...]) -> str:
    """The first non-empty cleaned value among ``keys`` of ``d``."""
    return next((value for key in keys if (value := _clean(d.get(key)))), "")


def _truthy(value: object) -> bool:
    """Booleans, numbers and ``"true"/"yes"`` strings as a flag."""
    if isinstance(value, str):
        return value.strip().lower() in {"true", "yes", "y", "1", "refuse", "refused"}
    return bool(value) if isinstance(value, (bool, int, float)) else False


@dataclass
class Stub:
    """A hypothesised tool: a short API-style name and why the request needs it."""

    name: str
    reasoning: str = ""


def stub_text(stub: Stub) -> str:
    """The text embedded for a stub: ``"name: reasoning"`` (just the name when no reasoning)."""
    return f"{stub.name}: {stub.reasoning}" if stub.reasoning else stub.name


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
    """One item as a Stub, or None when it names nothing (a number, flag or container is no name)."""
    if isinstance(item, dict):
        texts = {k: v for k, v in item.items() if isinstance(v, str)}
        name, reasoning = _first(texts, _NAME_KEYS), _first(texts, _REASON_KEYS)
    else:
        name, reasoning = (_clean(item) if isinstance(item, str) else ""), ""
    if not name and reasoning:  # a stand-in name: the first words of the reasoning
        name = " ".join(reasoning.split()[:6]).strip(" .,;:")
    return Stub(name=name, reasoning=reasoning) if name else None


MAX_STUBS = 8  # stubs kept per reply; the paper reports 2.4-2.5 per query, so a longer list is a runaway


def parse_stubs(text: str | None, query: str, max_stubs: int = MAX_STUBS) -> tuple[list[Stub], bool]:
    """``(stubs, fell_back)``: one per name (any case), ``max_stubs`` at most; else the raw query alone."""
    return parse_stubs_counted(text, query, max_stubs)[:2]


def parse_stubs_counted(text: str | None, query: str,
                        max_stubs: int = MAX_STUBS) -> tuple[list[Stub], bool, int]:
    """:func:`parse_stubs` and the number of distinct usable stubs left out beyond ``max_stubs``."""
    distinct: dict[str, Stub] = {}
    for stub in map(_to_stub, _stub_items(extract_json(text))):
        if stub is not None:
            distinct.setdefault(stub.name.casefold(), stub)
    stubs = list(distinct.values())[:max_stubs]
    if stubs:
        return stubs, False, len(distinct) - len(stubs)
    return [Stub(name=query, reasoning="fallback: raw query")], True, 0


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
    """A :class:`Plan` from a reply: an object with ``steps`` (and ``refusal``/``reason``) or a bare list; a
    refusal is the ``refusal`` flag, or an empty step list that comes with a reason."""
    raw_steps, obj = _plan_parts(extract_json(text))
    refusal_key = next((k for k in ("refusal", "refuse", "refused") if k in obj), None)
    reason = _first(obj, ("reason", "reasoning", "explanation"))
    if raw_steps is None and refusal_key is None and not reason:
        return Plan(parse_ok=False)
    steps = [s for i, item in enumerate(raw_steps or [], start=1) if (s := _to_step(item, i))]
    refusal = _truthy(obj.get(refusal_key)) if refusal_key else False
    refusal = refusal or (not steps and bool(reason))
    return Plan(steps=steps, refusal=refusal, reason=reason, parse_ok=True)


_VERDICT_RE = re.compile(r"\b(unsolved|not\s+solved|solved)\b", re.IGNORECASE)
_VERDICT_KEYS = ("verdict", "answer", "label", "result", "judgement", "judgment")


def _verdict_word(text: str) -> str | None:
    m = _VERDICT_RE.search(text)
    return None if not m else "Solved" if m.group(1).lower() == "solved" else "Unsolved"


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


def cassette_resolution(path, registry: RegistryNames | None = None) -> dict:
    """Strict against tolerant resolution of a cassette's ``plan-v1`` records: plans, steps, mean fidelity
    of plans naming an API, steps resolved, and the steps per tolerant rule (``none``: unresolved)."""
    rules: Counter = Counter()
    strict_f, tolerant_f, n_plans, strict_steps = [], [], 0, 0
    for record in read_cassette(path):
        if record["prompt_version"] != PLAN_PROMPT.version:
            continue
        n_plans += 1
        docs = parse_api_docs(extract_section(record["prompt"], "apis") or "", registry)
        plan = parse_plan(record["text"])
        ids = [d["api_id"] for d in docs]
        strict = resolve_plan_apis(plan, docs, strict=True)
        detail = resolve_plan_detail(plan, docs, registry)
        strict_steps += sum(x is not None for x in strict)
        rules.update((d.rule if d.shown else f"{d.rule}, not shown") if d.api_id else "none" for d in detail)
        if plan.steps:
            strict_f.append(fidelity(strict, ids))
            tolerant_f.append(fidelity([d.api_id for d in detail], ids))
    steps = sum(rules.values())
    shown = sum(n for r, n in rules.items() if r in RULES)
    return {"plans": n_plans, "steps": steps, "plans_with_steps": len(strict_f),
            "fidelity_strict": sum(strict_f) / len(strict_f) if strict_f else float("nan"),
            "fidelity_tolerant": sum(tolerant_f) / len(tolerant_f) if tolerant_f else float("nan"),
            "resolved_strict": strict_steps / steps if steps else float("nan"),
            "resolved_shown": shown / steps if steps else float("nan"),
            "steps_by_rule": dict(rules.most_common())}
