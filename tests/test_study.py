"""Both architectures end to end on the registry slice: rule-based, cached, replayed and Gemini backends."""

from __future__ import annotations

import json

import pytest

from toolbench_lib.analysis.summary import summary_json
from toolbench_lib.llm.base import LLMError, LLMResponse
from toolbench_lib.llm.cached import CachedLLM
from toolbench_lib.llm.cassettes import export_cassette
from toolbench_lib.llm.replay import ReplayBackend
from toolbench_lib.llm.rules import RulesBackend
from toolbench_lib.llm.store import CallStore
from toolbench_lib.study.result import StudySettings, run_study
from toolbench_lib.study.stored import FORMAT_VERSION, StudyResult

from .test_llm_gemini import fake_gemini, gemini_body  # noqa: F401 (fixture)

SUBSETS = ["G1", "G2", "G3"]
SETTINGS = StudySettings(runs=2, plan_limit=2, workers=1)


class Counting:
    """A backend that counts its calls and can fail after a number of them (an API outage)."""

    def __init__(self, inner, fail_after: int | None = None):
        self.inner, self.calls, self.fail_after = inner, 0, fail_after
        self.name, self.model, self.is_llm = inner.name, inner.model, inner.is_llm

    def generate(self, prompt, system="", json_schema=None, temperature=0.0, run=0) -> LLMResponse:
        if self.fail_after is not None and self.calls >= self.fail_after:
            raise LLMError("HTTP 503 after 6 attempts")
        self.calls += 1
        return self.inner.generate(prompt, system, json_schema, temperature, run)


@pytest.fixture(scope="module")
def rules_result(slice_setup):
    return run_study(slice_setup, RulesBackend(), SETTINGS, progress=False)


def test_tables_and_summary(rules_result, slice_setup):
    r = rules_result
    n = len(slice_setup.queries)
    assert set(r.stubs["run"]) == {0, 1} and r.stubs["qkey"].nunique() == n
    assert set(r.rankings["method"]) == set(r.text_rankings["method"]) == {"rtp", "ptr"}
    assert set(r.rankings["run"]) == set(r.text_rankings["run"]) == {0, 1}  # every method in every run
    assert r.deterministic == ["rtp"] and r.provenance["format_version"] == FORMAT_VERSION
    assert r.ranking("rtp", 0) == r.ranking("rtp", 1)  # RtP's one ranking, stored for each run
    assert (r.text_rankings["text_idx"] >= 0).all() and (r.text_rankings["method"] == "rtp").any()
    assert len(r.plans) == 2 * 2 * 3 * 2  # methods x runs x subsets x plan_limit
    stages = r.calls.groupby("stage").size().to_dict()
    assert stages == {"stubs": 2 * n, "plan": 24, "judge": 24}
    s = summary_json(r, SUBSETS, 5)
    assert s["backend"] == "rules" and s["is_llm"] is False
    assert s["pass_rate_kind"].startswith("rules_proxy")
    g1 = s["subsets"]["G1"]["methods"]
    for m in ("rtp", "ptr"):
        for key in ("recall", "recall_std", "precision", "precision_std", "judged_pass_rate", "tokens_in",
                    "tokens_out"):
            assert key in g1[m]
    assert g1["rtp"]["recall_std"] == 0.0
    assert g1["ptr"]["stubs_per_query"] > 1.0
    assert g1["ptr"]["tokens_in"] > g1["rtp"]["tokens_in"]  # PtR pays for the stub call
    assert 0.0 <= g1["ptr"]["recall"] <= 1.0


def test_save_and_load(rules_result, tmp_path):
    folder = rules_result.save(tmp_path / "run")
    back = StudyResult.load(folder)
    assert summary_json(back, SUBSETS, 5) == summary_json(rules_result, SUBSETS, 5)


def test_cassette_replay_reproduces_the_run(slice_setup, tmp_path, rules_result):
    store = CallStore(tmp_path / "calls.sqlite")
    recorded = run_study(slice_setup, CachedLLM(RulesBackend(), store), SETTINGS, progress=False)
    cassette = tmp_path / "c.jsonl.gz"
    n = export_cassette(store, cassette)
    assert n == len(recorded.calls) - int(recorded.calls["cached"].sum())  # identical prompts: one call
    replayed = run_study(slice_setup, ReplayBackend(cassette), SETTINGS, progress=False)
    a, b = summary_json(recorded, SUBSETS, 5), summary_json(replayed, SUBSETS, 5)
    assert a["subsets"] == b["subsets"]
    assert replayed.calls["cached"].all()
    with pytest.raises(LLMError, match="run"):
        run_study(slice_setup, ReplayBackend(cassette), StudySettings(runs=3, plan_limit=0), progress=False)


def test_api_error_loses_nothing_and_rerun_resumes(slice_setup, tmp_path):
    store = CallStore(tmp_path / "calls.sqlite")
    flaky = Counting(RulesBackend(), fail_after=20)
    with pytest.raises(LLMError, match="503"):
        run_study(slice_setup, CachedLLM(flaky, store), SETTINGS, progress=False)
    assert len(store) == 20
    healthy = Counting(RulesBackend())
    result = run_study(slice_setup, CachedLLM(healthy, store), SETTINGS, progress=False)
    assert healthy.calls == len(store) - 20  # nothing paid for twice
    assert healthy.calls < len(result.calls)
    again = Counting(RulesBackend())
    run_study(slice_setup, CachedLLM(again, store), SETTINGS, progress=False)
    assert again.calls == 0


def test_gemini_backend_end_to_end(slice_setup, fake_gemini, tmp_path, rules_result):  # noqa: F811
    """The real google-genai client against the local fake, which answers as the rule-based baseline."""
    from toolbench_lib.llm.gemini import GeminiBackend

    rules = RulesBackend()

    def reply(prompt: str):
        return 200, gemini_body("```json\n" + rules.generate(prompt).text + "\n```", 50, 20)

    fake_gemini.next_reply = reply
    backend = CachedLLM(GeminiBackend(max_retries=1, retry_base_delay_s=0.001),
                        CallStore(tmp_path / "g.sqlite"))
    settings = StudySettings(runs=1, plan_limit=1, workers=4)
    result = run_study(slice_setup, backend, settings, progress=False)
    s = summary_json(result, SUBSETS, 5)
    assert s["backend"] == "gemini" and s["llm_model"] == "gemini-2.5-flash" and s["is_llm"] is True
    assert s["pass_rate_kind"] == "llm_judge"
    expected = summary_json(rules_result, SUBSETS, 5)
    for name in SUBSETS:
        got, exp = s["subsets"][name]["methods"]["ptr"], expected["subsets"][name]["methods"]["ptr"]
        assert got["recall_by_run"][0] == exp["recall_by_run"][0]
        assert got["fallback_stubs"] == 0
    assert result.calls["tokens_in"].min() == 50
    bodies = [r["body"] for r in fake_gemini.requests]
    assert all(b["generationConfig"]["temperature"] == 0.0 for b in bodies)
    assert "test-key" not in json.dumps(s)
