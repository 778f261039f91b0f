"""The committed cassette of the local model: what it covers, and that PtR replays from it."""

from __future__ import annotations

import subprocess
from collections import Counter

import pytest

from toolbench_lib import config
from toolbench_lib.analysis.summary import summary_json
from toolbench_lib.data.paths import PROJECT_ROOT
from toolbench_lib.llm.cassettes import cassette_info, read_cassette
from toolbench_lib.llm.factory import DEFAULT_CASSETTE
from toolbench_lib.llm.prompts import JUDGE_PROMPT, PLAN_PROMPT, STUB_PROMPT, extract_section
from toolbench_lib.llm.replay import ReplayBackend
from toolbench_lib.study.result import StudySettings, run_study

MODEL = "qwen2.5-coder-1.5b-instruct-q4_k_m"


@pytest.fixture(scope="module")
def records():
    assert DEFAULT_CASSETTE.exists(), f"{DEFAULT_CASSETTE} is committed"
    return list(read_cassette(DEFAULT_CASSETTE))


def test_recorded_by_the_local_model(records):
    assert records
    assert {r["backend"] for r in records} == {"local"}
    assert {r["model"] for r in records} == {MODEL}
    assert all(r["is_llm"] for r in records)
    assert all(r["tokens_in"] > 0 and r["latency_s"] > 0 for r in records)


def test_stubs_cover_every_default_query(records, ds):
    stub_prompts = {r["prompt"] for r in records
                    if r["prompt_version"] == STUB_PROMPT.version and r["run"] == 0 and r["temperature"] == 0}
    default = ds.queries[ds.queries["subset"].isin(
        ["G1_instruction", "G2_category_original", "G3_instruction_original"])]
    missing = [q for q in default["query"] if STUB_PROMPT.render(query=q) not in stub_prompts]
    assert len(default) == 462
    assert not missing, f"{len(missing)} default-subset queries have no recorded stubs"


PLANNED_PER_SUBSET = config.PLAN_LIMIT  # `make run` replays plans of this many queries


def _queries_in(records, version: str) -> list[str]:
    return [extract_section(r["prompt"], "query") for r in records
            if r["prompt_version"] == version and r["run"] == 0]


def test_plans_and_verdicts_cover_the_first_queries_of_each_subset(records, ds):
    """Both methods' plans and verdicts for the first PLANNED_PER_SUBSET queries of G1, G2 and G3."""
    plans = Counter(_queries_in(records, PLAN_PROMPT.version))
    verdicts = set(_queries_in(records, JUDGE_PROMPT.version))
    for name in ("G1", "G2", "G3"):
        first = ds.subset_queries(name, PLANNED_PER_SUBSET)["query"].tolist()
        assert len(first) == PLANNED_PER_SUBSET
        unplanned = [q for q in first if q not in plans]
        unjudged = [q for q in first if q not in verdicts]
        assert not unplanned, f"{name}: {len(unplanned)} of the first queries have no plan"
        assert not unjudged, f"{name}: {len(unjudged)} of the first queries have no verdict"
        # One plan per method, unless both methods retrieved the same APIs in the same order (one prompt).
        assert sum(plans[q] >= 2 for q in first) >= PLANNED_PER_SUBSET // 2


def test_makefile_replays_what_the_cassette_covers():
    make = subprocess.run(["make", "-n", "run"], cwd=PROJECT_ROOT, capture_output=True, text=True,
                          check=True).stdout
    assert f"--plan-limit {PLANNED_PER_SUBSET}" in make
    info = cassette_info(DEFAULT_CASSETTE)
    assert info["distinct_queries_by_prompt_version"][PLAN_PROMPT.version] >= 3 * PLANNED_PER_SUBSET - 2


def test_ptr_replays_on_the_slice(slice_setup):
    """Stubs depend only on the query, so they replay on any registry."""
    result = run_study(slice_setup, ReplayBackend(DEFAULT_CASSETTE), StudySettings(runs=1, plan_limit=0),
                       progress=False)
    s = summary_json(result, ["G1", "G2", "G3"], 5)
    assert s["backend"] == "replay" and s["llm_model"] == MODEL and s["is_llm"] is True
    for name in ("G1", "G2", "G3"):
        ptr = s["subsets"][name]["methods"]["ptr"]
        assert 1.0 <= ptr["stubs_per_query"] <= 8.0
        assert ptr["fallback_stubs"] < 15
        assert ptr["recall"] > 0.1
    assert result.calls["cached"].all()
