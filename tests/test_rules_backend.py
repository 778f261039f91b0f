"""Tests of the rule-based backend and the prompt templates it reads."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolbench_lib.llm.base import LLMBackend, LLMError
from toolbench_lib.llm.parsing import parse_plan, parse_stubs, parse_verdict, resolve_plan_apis
from toolbench_lib.llm.prompts import (
    JUDGE_PROMPT,
    PLAN_PROMPT,
    STUB_PROMPT,
    extract_section,
    format_api_docs,
    format_plan,
    template_of,
)
from toolbench_lib.llm.rules import RulesBackend, split_subgoals, stub_name

PARIS = (
    "I'm planning a trip to Paris. Can you find hotels near the Eiffel Tower and also give me the "
    "weather forecast for next week?"
)
PARTY = (
    "I'm organizing a party for my friend's birthday. Please suggest some random trivia questions, "
    "fetch a funny Chuck Norris joke, and recommend a cocktail recipe with vodka."
)
FINANCE = (
    "My company wants to expand abroad; get the current exchange rate from USD to EUR, "
    "then show the latest stock price of Apple as well as the top business news headlines."
)

HOTEL = {
    "api_id": "h1",
    "tool_name": "Hotels com Provider",
    "api_name": "Search hotels",
    "api_description": "Search hotels near a location or landmark",
    "category": "Travel",
    "required_parameters": '[{"name": "location", "type": "STRING"}]',
}
WEATHER = {
    "api_id": "w1",
    "tool_name": "Weather API",
    "api_name": "forecast_weather",
    "api_description": "Weather forecast for up to 14 days",
    "category": "Weather",
}
WEATHER_2 = {
    "api_id": "w2",
    "tool_name": "Open Weather",
    "api_name": "Daily Forecast",
    "api_description": "Weather forecast by city",
    "category": "Weather",
}
CATS = {
    "api_id": "c1",
    "tool_name": "Cat Facts",
    "api_name": "random_fact",
    "api_description": "A random fact about cats",
    "category": "Other",
}
MOVIES = {
    "api_id": "m1",
    "tool_name": "IMDb",
    "api_name": "Top Movies",
    "api_description": "The 250 best rated films",
    "category": "Movies",
}

rules = RulesBackend()


def _plan(query: str, apis: list[dict]):
    reply = rules.generate(PLAN_PROMPT.render(query=query, api_docs=format_api_docs(apis)))
    return parse_plan(reply.text)


def _judge(query: str, steps: list[dict], refusal: bool = False) -> str | None:
    prompt = JUDGE_PROMPT.render(query=query, plan=format_plan(steps, refusal=refusal, reason="none fit"))
    return parse_verdict(rules.generate(prompt).text)


# --------------------------------------------------------------------------- templates


def test_templates_have_markers_and_schemas():
    for tpl, name in ((STUB_PROMPT, "stubs"), (PLAN_PROMPT, "plan"), (JUDGE_PROMPT, "judge")):
        assert tpl.name == name and tpl.version.startswith(name + "-v")
        assert tpl.template.startswith(tpl.marker + "\n")
        assert tpl.json_schema is not None and tpl.system
    rendered = STUB_PROMPT.render(query=PARIS)
    assert template_of(rendered) == ("stubs", "stubs-v1")
    assert extract_section(rendered, "query") == PARIS
    assert template_of("no marker") is None
    with pytest.raises(KeyError):
        PLAN_PROMPT.render(query=PARIS)


def test_templates_are_compact():
    # Rough token estimate: words * 1.4 covers punctuation-heavy JSON examples.
    assert len(STUB_PROMPT.render(query="").split()) * 1.4 < 200
    assert len(PLAN_PROMPT.render(query="", api_docs="").split()) * 1.4 < 150


def test_format_api_docs():
    long_desc = dict(HOTEL, api_description="word " * 200)
    text = format_api_docs([long_desc, WEATHER, {"api_id": "x", "tool_name": "T"}])
    lines = text.splitlines()
    assert lines[0].startswith("[1] Hotels com Provider / Search hotels (Travel): word word")
    assert lines[0].endswith("params: location") and "..." in lines[0]
    assert len(lines[0]) <= 300
    assert lines[1] == "[2] Weather API / forecast_weather (Weather): Weather forecast for up to 14 days"
    assert lines[2].startswith("[3] T / ? (Unknown):")
    with_list = format_api_docs([dict(WEATHER, required_parameters=[{"name": "q"}, "days"])])
    assert with_list.endswith("params: q, days")


def test_backend_protocol_and_errors():
    assert isinstance(rules, LLMBackend)
    assert (rules.name, rules.model, rules.is_llm) == ("rules", "rules-v1", False)
    with pytest.raises(LLMError):
        rules.generate("What is the weather?")
    with pytest.raises(LLMError):
        rules.generate("# task: summary-v1\n<query>\nx\n</query>")


# --------------------------------------------------------------------------- sub-goals


@pytest.mark.parametrize(
    "query, n_min, must_have",
    [
        (PARIS, 2, ["hotels", "weather"]),
        (PARTY, 3, ["trivia", "joke", "cocktail"]),
        (FINANCE, 3, ["exchange rate", "stock price", "news"]),
        ("Translate 'good morning' to Spanish; then find synonyms for happy.", 2, ["Spanish", "synonyms"]),
    ],
)
def test_split_subgoals_realistic(query, n_min, must_have):
    goals = split_subgoals(query)
    assert len(goals) >= n_min
    for word in must_have:
        assert sum(word.lower() in g.lower() for g in goals) == 1, (word, goals)


def test_split_subgoals_drops_scene_setting_and_merges_fragments():
    goals = split_subgoals(PARIS)
    assert goals == [
        "Can you find hotels near the Eiffel Tower",
        "give me the weather forecast for next week",
    ]
    # "restaurants" alone is too short to be its own sub-goal.
    assert split_subgoals("Find cheap hotels and restaurants.") == ["Find cheap hotels and restaurants"]
    assert split_subgoals("Hi, list hotels in Rome, Italy.") == ["Hi, list hotels in Rome, Italy"]
    assert split_subgoals("I'm a movie buff.") == ["I'm a movie buff"]
    assert split_subgoals("Thanks!") == []
    assert split_subgoals("") == []


def test_stub_name():
    assert stub_name("give me the weather forecast for next week") == "Get Weather Forecast"
    assert stub_name("Can you please find hotels near the Eiffel Tower") == "Find Hotels Eiffel Tower"


# --------------------------------------------------------------------------- stubs


def test_stubs_reply_parses():
    reply = rules.generate(STUB_PROMPT.render(query=PARIS), system=STUB_PROMPT.system)
    stubs, fell_back = parse_stubs(reply.text, PARIS)
    assert not fell_back
    assert [s.name for s in stubs] == ["Find Hotels Eiffel Tower", "Get Weather Forecast"]
    assert stubs[1].reasoning == "give me the weather forecast for next week"
    assert reply.tokens_in == len(STUB_PROMPT.render(query=PARIS).split()) + len(STUB_PROMPT.system.split())
    assert reply.tokens_out == len(reply.text.split())
    assert (
        reply.latency_s >= 0 and reply.backend == "rules" and reply.model == "rules-v1" and not reply.cached
    )


def test_stubs_reply_empty_query_falls_back():
    reply = rules.generate(STUB_PROMPT.render(query="Thanks!"))
    assert json.loads(reply.text) == []
    assert parse_stubs(reply.text, "Thanks!")[1] is True


@settings(max_examples=100, deadline=None)
@given(query=st.text(max_size=200))
def test_rules_never_raise_on_rendered_prompts(query):
    stubs, _ = parse_stubs(rules.generate(STUB_PROMPT.render(query=query)).text, query)
    assert stubs
    plan = parse_plan(rules.generate(PLAN_PROMPT.render(query=query, api_docs=format_api_docs([HOTEL]))).text)
    assert plan.parse_ok
    verdict = parse_verdict(
        rules.generate(JUDGE_PROMPT.render(query=query, plan=format_plan(plan.steps))).text
    )
    assert verdict in ("Solved", "Unsolved")


# --------------------------------------------------------------------------- plan


def test_plan_picks_overlapping_apis_in_subgoal_order():
    apis = [CATS, WEATHER, MOVIES, HOTEL]
    plan = _plan(PARIS, apis)
    assert plan.parse_ok and not plan.refusal
    assert resolve_plan_apis(plan, apis) == ["h1", "w1"]
    assert [s["step"] for s in plan.steps] == [1, 2]


def test_plan_ties_go_to_earlier_listed():
    assert resolve_plan_apis(
        _plan("weather forecast for Paris", [WEATHER_2, WEATHER]), [WEATHER_2, WEATHER]
    ) == ["w2"]
    assert resolve_plan_apis(
        _plan("weather forecast for Paris", [WEATHER, WEATHER_2]), [WEATHER, WEATHER_2]
    ) == ["w1"]


def test_plan_uses_each_api_once():
    plan = _plan("Get the weather forecast for Paris and the weather forecast for Rome", [WEATHER, CATS])
    assert [s["api_name"] for s in plan.steps] == ["forecast_weather"]


def test_plan_refuses_on_unrelated_docs():
    plan = _plan(PARIS, [CATS, MOVIES])
    assert plan.parse_ok and plan.refusal and plan.steps == [] and plan.reason


# --------------------------------------------------------------------------- judge


def test_judge_proxy():
    steps = [
        {"step": 1, "tool_name": "Hotels com Provider", "api_name": "Search hotels", "purpose": "hotels"},
        {"step": 2, "tool_name": "Weather API", "api_name": "forecast_weather", "purpose": "weather"},
    ]
    assert _judge(PARIS, steps) == "Solved"
    # The weather sub-goal is left uncovered (a purpose alone does not count).
    assert (
        _judge(PARIS, [steps[0], dict(steps[1], tool_name="Cat Facts", api_name="random_fact")]) == "Unsolved"
    )
    assert _judge(PARIS, steps[:1]) == "Unsolved"
    assert _judge(PARIS, steps, refusal=True) == "Unsolved"
    assert _judge(PARIS, []) == "Unsolved"


def test_judge_reason_is_labelled_proxy_and_accepts_json_plan():
    prompt = JUDGE_PROMPT.render(
        query="weather forecast for Paris", plan=json.dumps([{"tool_name": "Weather API", "api_name": "x"}])
    )
    reply = json.loads(rules.generate(prompt).text)
    assert reply["verdict"] == "Solved" and reply["reason"].startswith("proxy:")


def test_end_to_end_rtp_style_pipeline_is_solved():
    apis = [HOTEL, WEATHER, CATS]
    plan = _plan(PARIS, apis)
    assert _judge(PARIS, plan.steps, plan.refusal) == "Solved"


# --------------------------------------------------------------------------- determinism


def test_deterministic_across_runs_and_temperature():
    prompts = [
        STUB_PROMPT.render(query=PARTY),
        PLAN_PROMPT.render(query=PARTY, api_docs=format_api_docs([CATS, MOVIES, HOTEL, WEATHER])),
        JUDGE_PROMPT.render(query=PARTY, plan=format_plan([{"tool_name": "Cat Facts", "api_name": "fact"}])),
    ]
    for prompt in prompts:
        texts = {rules.generate(prompt, temperature=t, run=r).text for t in (0.0, 0.7) for r in range(3)}
        assert len(texts) == 1
        assert RulesBackend().generate(prompt).text in texts
