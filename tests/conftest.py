"""Shared fixtures: the real data, the real offline embedder, a small synthetic ToolBench folder.

Test tiers. Plain ``pytest`` runs the fast tier: tests that need neither the ToolBench data folder nor the
embedding model. Tests that do are marked here, from the fixtures they use (``ds``, ``embedder``,
``slice_setup``, ``real_data_dir``, ...) and from :data:`NEEDS` for modules that reach the data or a model
without a fixture, and are deselected by ``addopts`` in pyproject.toml; ``make test`` runs every test
(``pytest -m ""``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

SLICE_APIS = 2500
SLICE_QUERIES = 15

# Fixture -> markers of every test that uses it (directly or through another fixture).
FIXTURE_MARKS: dict[str, tuple[str, ...]] = {
    "ds": ("data",),
    "real_data_dir": ("data",),
    "small_data": ("data",),  # test_bad_inputs: a small copy of the real data
    "clean": ("model",),  # test_bad_inputs: the clean run's numbers
    "embedder": ("model",),
    "slice_setup": ("data", "model"),
}
# Modules (or single tests, "module::test") that need the data or a model without one of those fixtures.
# "slow": heavy without either (a notebook kernel, a thousand fuzzed replies, cross-validated routers).
NEEDS: dict[str, tuple[str, ...]] = {
    "test_analysis_beyond.py::test_report_states_notebook_10s_goal_result": ("data",),  # report provenance
    "test_analysis_judge.py::test_rejudge_command": ("data",),
    "test_analysis_report.py::test_build_report_one_row_per_entry_with_missing_tables": ("data",),
    "test_analysis_report.py::test_write_report_with_provenance_and_figures": ("data",),
    "test_analysis_report.py::test_write_report_without_any_outputs": ("data",),
    "test_analysis_report.py::test_report_appendix_holds_the_wide_tables_saved": ("data",),
    "test_analysis_report.py::test_report_opens_with_the_answer_and_places_every_figure_once": ("data",),
    "test_analysis_routing.py::test_routers_match_the_oracle_on_a_separating_signal": ("slow",),
    "test_bench.py::test_bench_command_quick": ("data",),
    "test_cli.py::test_data_summary_json": ("data",),
    "test_cli.py::test_unknown_subset": ("data",),  # a set name is checked against the data folder's sets
    "test_cli.py::test_default_model_is_make_runs_and_the_papers_falls_back_offline": ("data", "model"),
    "test_cli.py::test_index_build_slice": ("data", "model"),
    "test_cli.py::test_evaluate_both_methods_with_rules_backend": ("data", "model"),
    "test_cli.py::test_replay_miss_is_a_clear_error": ("data", "model"),
    "test_embedding.py::test_offline_fallback_is_quick_and_recorded": ("model",),
    "test_parsing_fuzz.py::test_thousand_adversarial_replies": ("slow",),
    "test_parsing_fuzz.py::test_one_mb_replies_parse_in_bounded_time": ("slow",),
    "test_query_sets.py::test_ltr_on_a_file_without_recorded_stubs_says_what_to_do_in_one_line": ("model",),
    "test_regression.py::test_slice_families_matrix": ("model",),  # evaluate loads the embedder
    "test_reproduce.py::test_failing_notebook_stops_the_run": ("slow",),  # starts a kernel
    "test_reproduce.py::test_console_is_quiet_when_nothing_fails": ("data", "slow"),  # the report reads data
    "test_reproduce.py::test_notebooks_between_run_together_and_the_report_after_them": ("data", "slow"),
}
TIER_MARKERS = ("data", "model", "slow", "local_llm")


def pytest_collection_modifyitems(config, items) -> None:
    """Mark each test that needs the data folder or a model (see the module docstring); an entry of
    :data:`NEEDS` naming no test of a collected module is an error, so the table cannot go stale."""
    modules = {}
    for item in items:
        module = item.path.name
        modules[module] = getattr(item, "module", None)
        keys = [k for k in (module, f"{module}::{item.originalname}") if k in NEEDS]
        wanted = {m for k in keys for m in NEEDS[k]}
        for name in getattr(item, "fixturenames", ()):
            wanted.update(FIXTURE_MARKS.get(name, ()))
        for marker in sorted(wanted):
            item.add_marker(marker)
    stale = [k for k in NEEDS if "::" in k and k.split("::")[0] in modules
             and not hasattr(modules[k.split("::")[0]], k.split("::")[1])]
    if stale:
        raise pytest.UsageError(f"tests/conftest.py NEEDS names tests that do not exist: {stale}")


@pytest.fixture(autouse=True)
def _no_data_outside_the_data_tier(request, monkeypatch):
    """A test not marked ``data`` finds no data folder in this process, even on a machine that has one
    (only ``TOOLBENCH_DATA`` set by the test itself, or an explicit folder, is found)."""
    if request.node.get_closest_marker("data") is None:
        # Modules that take a path from the project root when first imported take it before the patch: one
        # first imported under it would keep the fake path for the rest of the process (a data-tier test run
        # after it in the same process would then miss the committed cassette).
        import toolbench_lib.analysis.references  # noqa: F401
        import toolbench_lib.llm.factory  # noqa: F401
        import toolbench_lib.report.freshness  # noqa: F401
        import toolbench_lib.report.scorecard  # noqa: F401
        import toolbench_lib.report.teaching  # noqa: F401
        from toolbench_lib.data import paths

        nowhere = Path("/nonexistent-toolbench-fast-tier")
        monkeypatch.setattr(paths, "DATA_ROOT", nowhere / "data")
        monkeypatch.setattr(paths, "PROJECT_ROOT", nowhere / "repo")
        monkeypatch.delenv("TOOLBENCH_DATA", raising=False)


@pytest.fixture(scope="session")
def real_data_dir():
    """The ToolBench data folder (``paths.find_data_dir``)."""
    from toolbench_lib.data.paths import find_data_dir

    return find_data_dir()


@pytest.fixture(scope="session")
def ds():
    from toolbench_lib.data.dataset import load_dataset

    return load_dataset()


@pytest.fixture(scope="session")
def embedder():
    from toolbench_lib.retrieval.embedding import load_embedder

    return load_embedder("all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def slice_setup(ds, embedder):
    """RtP setup on a sub-registry of 2,500 APIs holding the first 15 queries' ground truth per set."""
    from toolbench_lib.retrieval.setup import prepare

    return prepare(ds, embedder, ["G1", "G2", "G3"], max_apis=SLICE_APIS, limit=SLICE_QUERIES, seed=0)


def _write(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj) if not isinstance(obj, str) else obj, encoding="utf-8")


def _api(name: str, desc: str = "", req=None, opt=None) -> dict:
    return {"name": name, "url": "", "description": desc, "method": "GET",
            "required_parameters": req or [], "optional_parameters": opt or []}


@pytest.fixture()
def mini_toolbench(tmp_path: Path) -> Path:
    """A tiny ToolBench folder exercising every merge rule and naming quirk."""
    root = tmp_path / "toolbench"
    tools = root / "toolenv" / "tools"
    _write(tools / "Weather" / "weather_now.json", {
        "tool_name": "Weather Now", "tool_description": "Current weather.",
        "api_list": [_api("Current Weather", "Weather for a city",
                          req=[{"name": "city", "type": "STRING", "description": ""}]),
                     _api("current_weather", "duplicate name, dropped"),
                     _api("Forecast", "Five-day forecast")]})
    # Two tools share a display name in one category; the file name tells them apart.
    _write(tools / "Music" / "shazamapi.json", {
        "tool_name": "ShazamAPI", "tool_description": "a", "api_list": [_api("Search", "track search")]})
    _write(tools / "Music" / "shazam_api.json", {
        "tool_name": "Shazam api", "tool_description": "b", "api_list": [_api("Search", "other search")]})
    _write(tools / "Finance" / "yahoo_finance.json", {
        "tool_name": "Yahoo Finance", "tool_description": "Quotes", "api_list": [_api("Get Quote", "q")]})
    _write(tools / "Finance" / "broken.json", "{not json")
    queries = [
        {"query": "What is the weather in Paris and the forecast?", "query_id": 1,
         "api_list": [
             {"category_name": "Weather", "tool_name": "Weather Now", "api_name": "Current Weather",
              "api_description": "x", "required_parameters": [], "optional_parameters": [], "method": "GET"},
             {"category_name": "Weather", "tool_name": "Weather Now", "api_name": "Old Forecast API",
              "api_description": "renamed since", "required_parameters": [], "optional_parameters": [],
              "method": "GET"}],
         "relevant APIs": [["Weather Now", "current weather"], ["Weather Now", "Old Forecast API"]]},
        {"query": "Quote for AAPL", "query_id": 2,
         "api_list": [{"category_name": "Finance", "tool_name": "Yahoo Finance_v2", "api_name": "Get-Quote",
                       "api_description": "", "required_parameters": [], "optional_parameters": [],
                       "method": "GET"},
                      {"category_name": "Finance", "tool_name": "Old Tool", "api_name": "Legacy",
                       "api_description": "", "required_parameters": [], "optional_parameters": [],
                       "method": "GET"}],
         "relevant APIs": [["Yahoo Finance_v2", "Get Quote"]]},
    ]
    _write(root / "test_instruction" / "G1_instruction.json", queries)
    _write(root / "toolenv_2023" / "tools" / "Finance" / "old_tool.json", {
        "tool_name": "Old Tool", "tool_description": "2023 tool",
        "api_list": [{"name": "Legacy", "description": "from 2023", "method": "GET",
                      "parameters": [{"name": "id", "type": "STRING", "required": True}]},
                     {"name": "Extra", "description": "only in 2023", "method": "POST", "parameters": []}]})
    corpus = [
        {"_id": "0", "text": "category_name:Food, tool_name:The Cocktail DB, api_name:List of Cocktails, "
                             "api_description:Lists cocktails, with names, required_params: [], "
                             "optional_params: [{\"name\": \"page\"}], return_schema: {\"id\": \"str\"}"},
        {"_id": "1", "text": "category_name:Weather, tool_name:Weather Now, api_name:Forecast, "
                             "api_description:dup, required_params: [], optional_params: []"},
        {"_id": "2", "text": "garbage"},
    ]
    _write(root / "retrieval_corpus" / "G3_corpus.jsonl", "\n".join(json.dumps(c) for c in corpus))
    return root
