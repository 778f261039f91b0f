"""Tests of the reply parsers: JSON extraction, stubs, plans, API resolution, fidelity, verdicts."""

from __future__ import annotations

import json
import warnings

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbench_lib.llm.json_text import extract_json
from toolbench_lib.llm.parsing import (
    MAX_STUBS,
    Plan,
    Stub,
    fidelity,
    parse_plan,
    parse_stubs,
    parse_stubs_counted,
    parse_verdict,
    resolve_plan_apis,
    stub_text,
)

QUERY = "find hotels in Paris"
FALLBACK = [Stub(name=QUERY, reasoning="fallback: raw query")]

# --------------------------------------------------------------------------- strategies


def _norm(s: str) -> str:
    return " ".join(s.split())


names_st = st.lists(
    st.text(min_size=1, max_size=30).filter(lambda s: bool(s.split())),
    min_size=1,
    max_size=8,
    unique_by=lambda s: _norm(s).casefold(),
)
prose_st = st.text(
    alphabet=st.characters(blacklist_characters="[]{}", blacklist_categories=("Cs",)), max_size=40
)
bracket_soup_st = st.text(alphabet=list("[]{}\",:'ab 1\n`\\tuen"), max_size=80)


def _trailing_comma_json(items: list[dict]) -> str:
    """A JSON list with a trailing comma after every member and every item."""
    objs = [
        '{"name": ' + json.dumps(d["name"]) + ', "reasoning": ' + json.dumps(d["reasoning"]) + ",}"
        for d in items
    ]
    return "[" + ", ".join(objs) + ",]"


def _wrap(payload: str, mode: str, before: str, after: str) -> str:
    if mode == "fence":
        return f"```json\n{payload}\n```"
    if mode == "prose":
        return f"{before}\n{payload}\n{after}"
    if mode == "fence+prose":
        return f"{before}\n```json\n{payload}\n```\n{after}"
    return payload


# --------------------------------------------------------------------------- properties


@settings(max_examples=200, deadline=None)
@given(
    names=names_st,
    reasons=st.lists(st.text(max_size=40), min_size=8, max_size=8),
    mode=st.sampled_from(["plain", "fence", "prose", "fence+prose"]),
    trailing=st.booleans(),
    ascii_only=st.booleans(),
    before=prose_st,
    after=prose_st,
)
def test_stub_list_roundtrip(names, reasons, mode, trailing, ascii_only, before, after):
    items = [{"name": n, "reasoning": r} for n, r in zip(names, reasons[: len(names)], strict=True)]
    payload = _trailing_comma_json(items) if trailing else json.dumps(items, ensure_ascii=ascii_only)
    stubs, fell_back = parse_stubs(_wrap(payload, mode, before, after), QUERY)
    assert not fell_back
    assert [s.name for s in stubs] == [_norm(n) for n in names]


@settings(max_examples=200, deadline=None)
@given(text=st.one_of(st.text(max_size=200), bracket_soup_st))
def test_arbitrary_text_never_raises(text):
    stubs, fell_back = parse_stubs(text, QUERY, max_stubs=5)
    assert 1 <= len(stubs) <= 5
    assert all(s.name for s in stubs)
    if fell_back:
        assert stubs == FALLBACK
    else:
        assert extract_json(text) is not None
    plan = parse_plan(text)
    assert isinstance(plan, Plan)
    assert plan.parse_ok or (not plan.steps and not plan.refusal)
    assert parse_verdict(text) in (None, "Solved", "Unsolved")


def test_a_reply_with_odd_escapes_parses_without_a_warning():
    """A Python-literal reply whose string holds ``\\]`` parses, and no warning reaches the console."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert extract_json("[{'name': 'a\\]b', 'ok': True}]") == [{"name": "a\\]b", "ok": True}]


@settings(max_examples=200, deadline=None)
@given(text=prose_st)
def test_fallback_exactly_when_nothing_usable(text):
    # Without any bracket there is no JSON container, hence nothing usable.
    assert parse_stubs(text, QUERY) == (FALLBACK, True)
    good = text + ' [{"name": "Weather API", "reasoning": "forecast"}] ' + text
    stubs, fell_back = parse_stubs(good, QUERY)
    assert (stubs, fell_back) == ([Stub("Weather API", "forecast")], False)


@settings(max_examples=100, deadline=None)
@given(names=names_st, max_stubs=st.integers(min_value=1, max_value=8))
def test_max_stubs_and_dedup(names, max_stubs):
    items = [{"name": n, "reasoning": ""} for n in names] + [
        {"name": n.upper(), "reasoning": ""} for n in names
    ]
    stubs, _ = parse_stubs(json.dumps(items), QUERY, max_stubs=max_stubs)
    assert len(stubs) <= max_stubs
    assert len({s.name.casefold() for s in stubs}) == len(stubs)


# --------------------------------------------------------------------------- extract_json


@pytest.mark.parametrize(
    "text, expected",
    [
        ('[{"a": 1}]', [{"a": 1}]),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ("Sure! Here it is:\n```\n[1, 2]\n```\nHope that helps.", [1, 2]),
        ('Result: {"a": [1, 2,],} done', {"a": [1, 2]}),
        ("{'name': 'Weather', 'ok': True}", {"name": "Weather", "ok": True}),
        ("[{'a': null, 'b': true}]", [{"a": None, "b": True}]),
        ('see [1] and then {"steps": [{"x": 1}]}', {"steps": [{"x": 1}]}),
        ('{"s": "a ] tricky } string, ]"}', {"s": "a ] tricky } string, ]"}),
        ('[{"name": "A", "reasoning": "x"}, {"name": "B", "reas', [{"name": "A", "reasoning": "x"}]),
    ],
)
def test_extract_json_examples(text, expected):
    assert extract_json(text) == expected


@pytest.mark.parametrize(
    "text", [None, "", "   ", "no json here", "42", '"just a string"', "[unclosed", "{]"]
)
def test_extract_json_nothing_usable(text):
    assert extract_json(text) is None


def test_extract_json_deep_nesting_does_not_raise():
    extract_json("[" * 5000 + "]" * 5000)
    extract_json("{'a': " * 3000)
    assert extract_json("[" * 5000) is None


# --------------------------------------------------------------------------- stubs


def test_stubs_under_key_and_single_object():
    text = '{"stubs": [{"name": "Search Hotels", "reasoning": "hotels"}]}'
    assert parse_stubs(text, QUERY) == ([Stub("Search Hotels", "hotels")], False)
    text = '{"tools": [{"name": "A", "reasoning": "r"}, {"name": "B", "reasoning": "s"}]}'
    assert [s.name for s in parse_stubs(text, QUERY)[0]] == ["A", "B"]
    assert parse_stubs('{"name": "Only One", "reasoning": "r"}', QUERY) == ([Stub("Only One", "r")], False)


def test_stubs_missing_fields_and_strings():
    text = json.dumps(
        [
            {"reasoning": "get the current weather in Paris for tomorrow morning"},
            {"name": "Currency Converter"},
            {},
            {"foo": 1},
            "Hotel Search",
            {"name": None, "reasoning": None},
            3,
        ]
    )
    stubs, fell_back = parse_stubs(text, QUERY)
    assert not fell_back
    assert stubs[0] == Stub(
        "get the current weather in Paris", "get the current weather in Paris for tomorrow morning"
    )
    assert stubs[1] == Stub("Currency Converter", "")
    assert stubs[2] == Stub("Hotel Search", "")
    assert len(stubs) == 3  # a bare number (3) names no tool


@pytest.mark.parametrize("reply", ['{"name": 12}', '[{"name": 12}]', '[{"name": 1.5, "reasoning": 7}]',
                                   '[{"name": true}]', '[12, 13]', '{"stubs": [{"name": [1, 2]}]}'])
def test_stub_names_that_are_not_text_fall_back(reply):
    stubs, fell_back = parse_stubs(reply, QUERY)
    assert fell_back and stubs == [Stub(QUERY, "fallback: raw query")]


def test_a_number_name_with_reasoning_takes_its_name_from_the_reasoning():
    stubs, fell_back = parse_stubs('[{"name": 12, "reasoning": "convert euros to dollars"}]', QUERY)
    assert not fell_back and stubs == [Stub("convert euros to dollars", "convert euros to dollars")]


def test_stubs_beyond_the_cap_are_counted():
    reply = json.dumps([{"name": f"Tool {i}", "reasoning": "r"} for i in range(50)] + [{"name": "tool 0"}])
    stubs, fell_back, dropped = parse_stubs_counted(reply, QUERY)
    assert [s.name for s in stubs] == [f"Tool {i}" for i in range(MAX_STUBS)] and not fell_back
    assert dropped == 50 - MAX_STUBS  # the repeated name is a duplicate, not a dropped stub
    assert parse_stubs_counted(reply, QUERY, max_stubs=60)[2] == 0


def test_stubs_alias_keys():
    text = '[{"tool_name": "Weather API", "description": "weather"}]'
    assert parse_stubs(text, QUERY) == ([Stub("Weather API", "weather")], False)


def test_stubs_dedup_case_insensitive():
    text = '[{"name": "Weather API", "reasoning": "a"}, {"name": "weather  api", "reasoning": "b"}]'
    assert parse_stubs(text, QUERY) == ([Stub("Weather API", "a")], False)


@pytest.mark.parametrize("text", ["", "[]", "{}", '[{}, {"x": 1}]', '{"stubs": []}', "I cannot help.", None])
def test_stubs_fallback(text):
    assert parse_stubs(text, QUERY) == (FALLBACK, True)


def test_stub_text():
    assert stub_text(Stub("Get Weather", "forecast for Paris")) == "Get Weather: forecast for Paris"
    assert stub_text(Stub("Get Weather", "")) == "Get Weather"


# --------------------------------------------------------------------------- plans

PLAN_JSON = json.dumps(
    {
        "refusal": False,
        "reason": "two APIs",
        "steps": [
            {"step": 1, "tool_name": "Hotels", "api_name": "Search Hotels", "purpose": "find hotels"},
            {"step": 2, "tool_name": "Weather", "api_name": "Forecast", "purpose": "weather"},
        ],
    }
)


def test_parse_plan_object():
    plan = parse_plan(f"Here is the plan:\n```json\n{PLAN_JSON}\n```")
    assert plan.parse_ok and not plan.refusal and plan.reason == "two APIs"
    assert [s["api_name"] for s in plan.steps] == ["Search Hotels", "Forecast"]
    assert plan.steps[0] == {
        "step": 1,
        "tool_name": "Hotels",
        "api_name": "Search Hotels",
        "purpose": "find hotels",
    }


def test_parse_plan_bare_list_and_aliases():
    plan = parse_plan(
        '[{"tool": "Hotels", "api": "Search Hotels"}, {"step": "x", "api_name": "Forecast"}, {}]'
    )
    assert plan.parse_ok and not plan.refusal
    assert plan.steps == [
        {"step": 1, "tool_name": "Hotels", "api_name": "Search Hotels", "purpose": ""},
        {"step": 2, "tool_name": "", "api_name": "Forecast", "purpose": ""},
    ]


def test_parse_plan_single_step_object_and_strings():
    assert parse_plan('{"tool_name": "Hotels", "api_name": "Search"}').steps[0]["api_name"] == "Search"
    plan = parse_plan('{"steps": ["Hotels / Search Hotels", "[2]"]}')
    assert [(s["tool_name"], s["api_name"]) for s in plan.steps] == [("Hotels", "Search Hotels"), ("", "[2]")]


@pytest.mark.parametrize(
    "text",
    [
        '{"refusal": true, "reason": "nothing fits", "steps": []}',
        '{"refusal": "yes", "reason": "nothing fits"}',
        '{"reason": "none of the APIs can do this", "steps": []}',
    ],
)
def test_parse_plan_refusal(text):
    plan = parse_plan(text)
    assert plan.parse_ok and plan.refusal and plan.steps == []


def test_parse_plan_not_refusal_when_flag_false_and_steps_empty_without_reason():
    plan = parse_plan('{"refusal": false, "steps": []}')
    assert plan.parse_ok and not plan.refusal


@pytest.mark.parametrize("text", ["", "I would call the weather API.", '{"foo": 1}', None])
def test_parse_plan_no_json(text):
    assert parse_plan(text) == Plan(steps=[], refusal=False, reason="", parse_ok=False)


# --------------------------------------------------------------------------- resolution

RETRIEVED = [
    {"api_id": "a1", "tool_name": "Hotels_v2", "api_name": "Search Hotels", "category": "Travel"},
    {"api_id": "a2", "tool_name": "Weather API", "api_name": "forecast", "category": "Weather"},
    {"api_id": "a3", "tool_name": "Open Weather", "api_name": "forecast", "category": "Weather"},
    {"api_id": "a4", "tool_name": "Cat Facts", "api_name": "random_fact", "category": "Other"},
]


def _plan(*pairs: tuple[str, str]) -> Plan:
    steps = [{"step": i, "tool_name": t, "api_name": a, "purpose": ""} for i, (t, a) in enumerate(pairs, 1)]
    return Plan(steps=steps, parse_ok=True)


def test_resolve_exact_normalised_pair():
    plan = _plan(("hotels", "search-hotels"), ("OPEN WEATHER", "Forecast"), ("Weather API", "forecast"))
    assert resolve_plan_apis(plan, RETRIEVED) == ["a1", "a3", "a2"]


def test_resolve_api_only_when_unique():
    plan = _plan(("Some Other Tool", "Random Fact"), ("Unknown", "forecast"), ("", "search hotels"))
    assert resolve_plan_apis(plan, RETRIEVED) == ["a4", None, "a1"]


def test_resolve_index_reference():
    plan = _plan(("", "[3]"), ("[2] Weather API", "forecast"), ("x", "2"), ("", "[9]"), ("[4]", "whatever"))
    assert resolve_plan_apis(plan, RETRIEVED) == ["a3", "a2", "a2", None, "a4"]


def test_resolve_unknown_and_empty():
    assert resolve_plan_apis(_plan(("Stocks", "Quote")), RETRIEVED) == [None]
    assert resolve_plan_apis(Plan(), RETRIEVED) == []
    assert resolve_plan_apis(_plan(("Hotels", "Search Hotels")), []) == [None]


def test_fidelity():
    assert fidelity([], {"a1"}) is None
    assert fidelity(["a1", None, "a2", "zz"], ["a1", "a2"]) == 0.5
    assert fidelity(["a1"], {"a1"}) == 1.0
    assert fidelity([None, None], {"a1"}) == 0.0


# --------------------------------------------------------------------------- verdicts


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{"verdict": "Solved", "reason": "ok"}', "Solved"),
        ('```json\n{"verdict": "unsolved", "reason": "missing weather"}\n```', "Unsolved"),
        ('I think {"verdict": "SOLVED."} overall', "Solved"),
        ('{"answer": "not solved"}', "Unsolved"),
        ("Verdict: Unsolved, because it has not solved the weather part.", "Unsolved"),
        ("The plan is solved.", "Solved"),
        ('{"reason": "Unsolved parts remain", "verdict": "Solved"}', "Solved"),
        ("I am not sure.", None),
        ("", None),
        (None, None),
        ('{"verdict": "maybe"}', None),
    ],
)
def test_parse_verdict(text, expected):
    assert parse_verdict(text) == expected
