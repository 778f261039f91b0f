"""Versioned prompt templates for the stub writer, the planner and the judge: each starts with a marker line
``# task: <version>`` and wraps free text in ``<query>``, ``<apis>`` and ``<plan>`` sections."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

MARKER_PREFIX = "# task: "
_MARKER_RE = re.compile(r"^# task: (\S+)[ \t]*$", re.MULTILINE)
DOC_MAX_CHARS = 300


@dataclass(frozen=True)
class PromptTemplate:
    """A named, versioned prompt: ``template`` is a :meth:`str.format` string (literal braces doubled)."""

    name: str
    version: str
    system: str
    template: str
    json_schema: dict | None = field(default=None, hash=False, compare=False)

    @property
    def marker(self) -> str:
        return MARKER_PREFIX + self.version

    def render(self, **fields: object) -> str:
        """The prompt text with ``fields`` filled in (a missing field raises KeyError)."""
        return self.template.format(**fields)


def template_of(prompt: str) -> tuple[str, str] | None:
    """``(name, version)`` of the template a rendered prompt came from, or None."""
    m = _MARKER_RE.search(prompt or "")
    return (re.sub(r"-v\d+$", "", m.group(1)), m.group(1)) if m else None


def extract_section(prompt: str, tag: str) -> str | None:
    """Text between ``<tag>`` and ``</tag>`` lines of a rendered prompt (None when absent)."""
    m = re.search(rf"<{tag}>\n(.*?)\n?</{tag}>", prompt or "", re.DOTALL)
    return m.group(1) if m else None


def _one_line(value: object) -> str:
    return " ".join(str(value if value is not None else "").split())


def _param_names(value: object) -> list[str]:
    """Parameter names from a JSON string or a list of dicts / strings."""
    if isinstance(value, str):
        try:
            value = json.loads(value) if value.strip() else []
        except ValueError:
            return []
    if not isinstance(value, list):
        return []
    names = (p.get("name") if isinstance(p, dict) else p if isinstance(p, str) else None for p in value)
    return [_one_line(name) for name in names if name and _one_line(name)]


def _shorten(text: str, limit: int) -> str:
    """``text`` cut at a word boundary to at most ``limit`` characters (with ``...``)."""
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 3, 0)].rsplit(" ", 1)[0] if limit > 3 else ""
    return cut.rstrip(" ,.;:") + "..."


def format_api_docs(apis: list[dict]) -> str:
    """Numbered API docs (1-based, in the given order), one line of at most :data:`DOC_MAX_CHARS` each
    (a description keeps 40 at least): ``[i] tool_name / api_name (category): description params: a, b``."""
    lines = []
    for index, api in enumerate(apis, start=1):
        tool, name = (_one_line(api.get(key)) or "?" for key in ("tool_name", "api_name"))
        category = _one_line(api.get("category")).replace("(", "").replace(")", "") or "Unknown"
        head = f"[{index}] {tool} / {name} ({category}): "
        params = _param_names(api.get("required_parameters"))
        tail = _shorten(f" params: {', '.join(params)}" if params else "", 80)
        desc = _one_line(api.get("api_description")) or _one_line(api.get("tool_description"))
        lines.append(head + _shorten(desc, max(DOC_MAX_CHARS - len(head) - len(tail), 40)) + tail)
    return "\n".join(lines)


def format_plan(steps: list[dict], refusal: bool = False, reason: str = "") -> str:
    """A plan as the judge reads it: ``1. tool_name / api_name: purpose`` lines, or ``REFUSED: reason``."""
    if refusal:
        return f"REFUSED: {_one_line(reason) or 'no reason given'}"
    lines = []
    for i, s in enumerate(steps, start=1):
        tool, api = _one_line(s.get("tool_name")) or "?", _one_line(s.get("api_name")) or "?"
        purpose = _one_line(s.get("purpose"))
        lines.append(f"{s.get('step', i)}. {tool} / {api}" + (f": {purpose}" if purpose else ""))
    return "\n".join(lines) if lines else "(no steps)"


STUB_SCHEMA: dict = {
    "type": "array", "minItems": 1, "maxItems": 8,
    "items": {"type": "object", "properties": {"name": {"type": "string"}, "reasoning": {"type": "string"}},
              "required": ["name", "reasoning"]},
}

PLAN_SCHEMA: dict = {
    "type": "object",
    "properties": {"refusal": {"type": "boolean"}, "reason": {"type": "string"},
                   "steps": {"type": "array", "items": {
                       "type": "object",
                       "properties": {"step": {"type": "integer"}, "tool_name": {"type": "string"},
                                      "api_name": {"type": "string"}, "purpose": {"type": "string"}},
                       "required": ["step", "tool_name", "api_name", "purpose"]}}},
    "required": ["refusal", "reason", "steps"],
}

JUDGE_SCHEMA: dict = {
    "type": "object",
    "properties": {"verdict": {"type": "string", "enum": ["Solved", "Unsolved"]},
                   "reason": {"type": "string"}},
    "required": ["verdict", "reason"],
}

STUB_PROMPT = PromptTemplate(
    name="stubs", version="stubs-v1",
    system="You design API calls for user requests. Reply with JSON only.",
    template="# task: stubs-v1\n"
             "No tools are shown. Imagine the RapidAPI-style APIs needed to fulfil the request below.\n"
             "Write one stub per distinct capability the request needs (usually 1-4, no duplicates).\n"
             '"name": a short API name, e.g. "Get Weather Forecast" or "Search Hotels".\n'
             '"reasoning": which part of the request it serves.\n'
             "<query>\n{query}\n</query>\n"
             'Reply with only a JSON list: [{{"name": "...", "reasoning": "..."}}]\n',
    json_schema=STUB_SCHEMA,
)

PLAN_PROMPT = PromptTemplate(
    name="plan", version="plan-v1",
    system="You plan API calls for user requests. Reply with JSON only.",
    template="# task: plan-v1\n"
             "Plan the API calls that fulfil the request, using ONLY the numbered APIs listed.\n"
             "Copy tool_name and api_name exactly as listed. Use as few steps as needed.\n"
             'If no listed API fits, set "refusal": true, explain in "reason", and leave "steps" empty.\n'
             "<query>\n{query}\n</query>\n"
             "<apis>\n{api_docs}\n</apis>\n"
             'Reply with only JSON: {{"refusal": false, "reason": "...", "steps": '
             '[{{"step": 1, "tool_name": "...", "api_name": "...", "purpose": "..."}}]}}\n',
    json_schema=PLAN_SCHEMA,
)

JUDGE_PROMPT = PromptTemplate(
    name="judge", version="judge-v1",
    system="You grade tool-use plans. Reply with JSON only.",
    template="# task: judge-v1\n"
             "Assume every step of the plan runs successfully. Would the plan fully solve the request?\n"
             'Answer "Solved" only if every part of the request is served by a suitable step; '
             'a refusal, a missing part or an unsuitable API means "Unsolved".\n'
             "<query>\n{query}\n</query>\n"
             "<plan>\n{plan}\n</plan>\n"
             'Reply with only JSON: {{"verdict": "Solved" or "Unsolved", "reason": "..."}}\n',
    json_schema=JUDGE_SCHEMA,
)

JUDGE_V2_SCHEMA: dict = {
    "type": "object",
    "properties": {"uncovered": {"type": "array", "items": {"type": "string"}},
                   "verdict": {"type": "string", "enum": ["Solved", "Unsolved"]}},
    "required": ["uncovered", "verdict"],
}

# A stricter rubric in the manner of ToolEval: the judge also sees the APIs the planner was shown.
JUDGE_PROMPT_V2 = PromptTemplate(
    name="judge", version="judge-v2",
    system="You grade tool-use plans strictly. Reply with JSON only.",
    template="# task: judge-v2\n"
             "Check whether the plan can fulfil the request, using the API list the planner was given.\n"
             "1. Split the request into its sub-tasks.\n"
             "2. A sub-task is covered only by a step whose listed API, by its description, can do it.\n"
             "   A step naming an API that is not listed, or an API that does something else, covers "
             "nothing.\n"
             '3. "uncovered": every sub-task no step covers. "verdict": "Solved" only if "uncovered" is '
             'empty; a refusal or an empty plan is "Unsolved".\n'
             "<query>\n{query}\n</query>\n"
             "<apis>\n{api_docs}\n</apis>\n"
             "<plan>\n{plan}\n</plan>\n"
             'Reply with only JSON: {{"uncovered": ["..."], "verdict": "Solved" or "Unsolved"}}\n',
    json_schema=JUDGE_V2_SCHEMA,
)

# judge-v1 stays the default: the recorded studies were judged with it and replay by its version.
JUDGE_PROMPTS: dict[str, PromptTemplate] = {t.version: t for t in (JUDGE_PROMPT, JUDGE_PROMPT_V2)}
DEFAULT_JUDGE = JUDGE_PROMPT.version


def judge_prompt(version: str = DEFAULT_JUDGE) -> PromptTemplate:
    """The judge template of ``version`` (``judge-v1`` or ``judge-v2``); an unknown one raises ValueError."""
    if version not in JUDGE_PROMPTS:
        raise ValueError(f"unknown judge prompt {version!r}; choose one of {sorted(JUDGE_PROMPTS)}")
    return JUDGE_PROMPTS[version]
