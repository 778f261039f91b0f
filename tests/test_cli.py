"""The command line, run as users run it."""

import json
import os
import subprocess

import pandas as pd
import pytest

from toolbench_lib import config

from .conftest import SLICE_APIS, SLICE_QUERIES
from .forkcli import run_cli


def cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return run_cli(list(args), env={**os.environ, "HF_HUB_OFFLINE": "1", **(env or {})}, timeout=900)


def test_data_summary_json():
    out = cli("data", "summary", "--json")
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    for key in ("apis", "tools", "categories", "subsets", "gt_pairs", "unresolved_gt_pairs"):
        assert key in s
    assert s["unresolved_gt_pairs"] == 0 and s["categories"] == 49
    assert s["subsets"]["G1_instruction"] == 163


def test_data_summary_counts_malformed_files(mini_toolbench):
    out = cli("data", "summary", "--json", "--data-dir", str(mini_toolbench))
    assert out.returncode == 0, out.stderr
    s = json.loads(out.stdout)
    assert s["malformed_files"] == 2 and s["apis"] == 9
    assert "broken.json" in out.stderr


def test_missing_data_dir_is_a_clear_error(tmp_path):
    out = cli("data", "summary", "--data-dir", str(tmp_path / "nowhere"))
    assert out.returncode == 2
    assert "not a ToolBench data folder" in out.stderr and "Traceback" not in out.stderr


def test_unknown_subset(tmp_path):
    out = cli("evaluate", "--subset", "G9", "--limit", "1")
    assert out.returncode == 2 and "unknown query set 'G9'" in out.stderr


def test_evaluate_json_matches_library(slice_setup):
    from toolbench_lib.analysis.summary import summary_json
    from toolbench_lib.data.queries import resolve_subset
    from toolbench_lib.eval.evaluation import METRICS, per_query_runs
    from toolbench_lib.study.result import StudySettings, run_study

    out = cli("evaluate", "--method", "rtp", "--subset", "G1", "--subset", "G2", "--subset", "G3",
              "--k", "5", "--max-apis", str(SLICE_APIS), "--limit", str(SLICE_QUERIES),
              "--model", "all-MiniLM-L6-v2", "--json")
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["model"] == "all-MiniLM-L6-v2" and res["registry_size"] == SLICE_APIS
    assert res["k"] == 5 and res["gt"] == "candidates"
    settings = StudySettings(runs=1, plan_limit=0, methods=("rtp",))
    study = run_study(slice_setup, None, settings, progress=False)
    expected = summary_json(study, ["G1", "G2", "G3"], 5, "candidates")
    for name in ("G1", "G2", "G3"):
        got = res["subsets"][name]
        assert got["n_queries"] == SLICE_QUERIES
        assert abs(got["recall"] - expected["subsets"][name]["recall"]) < 1e-9
        assert abs(got["precision"] - expected["subsets"][name]["precision"]) < 1e-9
        # every metric of eval, each the mean over runs of its per-run mean, counted again from the queries
        each = per_query_runs(study, 5, "candidates", METRICS)
        each = each[each["subset"] == resolve_subset(name)].groupby("run")[list(METRICS)].mean().mean()
        assert {m: got["methods"]["rtp"][m] for m in METRICS} == pytest.approx(each.to_dict(), abs=1e-12)


def test_options_of_an_llm_are_said_to_be_unused_without_one(tmp_path):
    """``evaluate --method rtp`` needs no LLM: a --cassette or --plan-limit given is named as not used."""
    cassette = tmp_path / "c.jsonl.gz"
    cassette.write_bytes(b"")
    out = cli("evaluate", "--method", "rtp", "--subset", "G3", "--limit", "2", "--max-apis", "300", "--json",
              "--cassette", str(cassette), "--plan-limit", "3")
    assert out.returncode == 0, out.stderr
    assert "note: --cassette, --plan-limit not used: rtp search without an LLM" in out.stderr
    assert json.loads(out.stdout)["subsets"]["G3"]["n_queries"] == 2
    small = cli("evaluate", "--method", "rtp", "--subset", "G3", "--limit", "1", "--max-apis", "10", "--json")
    assert small.returncode == 0, small.stderr  # the default depth (20) follows a smaller sub-registry
    assert json.loads(small.stdout)["settings"]["depth"] == 10


def test_default_model_is_make_runs_and_the_papers_falls_back_offline():
    """evaluate's default embedder is `make run`'s (config.EMBEDDER); the paper's GTE-base, asked for while
    offline and not cached, falls back to the packaged all-MiniLM-L6-v2 and says so."""
    from toolbench_lib import config

    args = ("evaluate", "--subset", "G3", "--limit", "2", "--max-apis", "300", "--json")  # 300 APIs: quick
    default = cli(*args, env={"HF_HOME": "/nonexistent-hf-home"})
    assert default.returncode == 0, default.stderr
    res = json.loads(default.stdout)
    assert res["model"] == config.EMBEDDER and not res.get("embedder_fallback")
    out = cli(*args, "--model", config.PAPER_EMBEDDER, env={"HF_HOME": "/nonexistent-hf-home"})
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["model"] == "all-MiniLM-L6-v2" and res["model_requested"] == config.PAPER_EMBEDDER
    assert res["embedder_fallback"] is True
    assert "falling back" in out.stderr


def test_index_build_slice():
    too_small = cli("index", "build", "--model", "all-MiniLM-L6-v2", "--max-apis", "300")
    assert too_small.returncode == 2 and "do not fit in a sub-registry of 300" in too_small.stderr
    out = cli("index", "build", "--model", "all-MiniLM-L6-v2", "--max-apis", "300", "--no-keep-gt")
    assert out.returncode == 0, out.stderr
    info = json.loads(out.stdout.strip().splitlines()[-1])
    assert info["apis"] == 300 and info["dim"] == 384
    assert set(info) == {"model", "model_requested", "apis", "dim", "seconds"}  # nothing written to read back


def test_evaluate_both_methods_with_rules_backend(tmp_path, capsys):
    out = cli("evaluate", "--method", "rtp,ptr", "--backend", "rules", "--subset", "G1", "--subset", "G2",
              "--subset", "G3", "--max-apis", str(SLICE_APIS), "--limit", str(SLICE_QUERIES),
              "--model", "all-MiniLM-L6-v2", "--runs", "2", "--plan-limit", "2", "--json",
              "--save", str(tmp_path / "run"))
    assert out.returncode == 0, out.stderr
    res = json.loads(out.stdout)
    assert res["backend"] == "rules" and res["is_llm"] is False and res["method"] == "rtp,ptr"
    for name in ("G1", "G2", "G3"):
        methods = res["subsets"][name]["methods"]
        for key in ("recall", "recall_std", "precision", "precision_std", "judged_pass_rate", "tokens_in",
                    "tokens_out"):
            assert key in methods["rtp"] and key in methods["ptr"]
        assert methods["ptr"]["stubs_per_query"] > 0 and methods["ptr"]["fallback_stubs"] == 0
    assert (tmp_path / "run" / "stubs.parquet").exists()
    from toolbench_lib.cli import _print_result

    _print_result(res)  # the same summary without --json: every method's line names its pass rates
    lines = [line for line in capsys.readouterr().out.splitlines() if "recall=" in line]
    assert len(lines) == 6 and all("judged_pass_rate=" in x and "objective_pass_rate=" in x for x in lines)


def test_evaluate_plans_as_make_run_does_by_default(tmp_path):
    """Without --plan-limit and --plan-runs, evaluate plans what `make run` plans (config's first runs and
    queries), so the recorded cassette answers it; --plan-runs asks for more runs."""
    base = ["evaluate", "--method", "rtp,ptr", "--backend", "rules", "--subset", "G1", "--limit", "3",
            "--max-apis", str(SLICE_APIS), "--model", "all-MiniLM-L6-v2", "--runs", "2", "--no-judge"]
    for extra, runs in (([], list(range(config.PLAN_RUNS))), (["--plan-runs", "2"], [0, 1])):
        out = cli(*base, *extra, "--save", str(tmp_path / str(len(extra))))
        assert out.returncode == 0, out.stderr
        plans = pd.read_parquet(tmp_path / str(len(extra)) / "plans.parquet")
        assert sorted(plans["run"].unique()) == runs and plans["qkey"].nunique() == min(3, config.PLAN_LIMIT)


def test_replay_miss_is_a_clear_error(tmp_path):
    import gzip

    empty = tmp_path / "empty.jsonl.gz"
    with gzip.open(empty, "wt") as fh:
        fh.write("")
    out = cli("evaluate", "--method", "ptr", "--backend", "replay", "--cassette", str(empty),
              "--subset", "G3",
              "--limit", "1", "--max-apis", str(SLICE_APIS), "--model", "all-MiniLM-L6-v2", "--runs", "1")
    assert out.returncode == 2
    assert "stubs-v1" in out.stderr and "Traceback" not in out.stderr


def test_a_forked_call_answers_as_a_fresh_process(monkeypatch, tmp_path):
    """The fork server behind ``cli`` (tests/forkcli.py) against ``python -m toolbench_lib`` itself: the
    same exit code, stdout and stderr for a help page, a refused option and a missing data folder."""
    calls = (["--help"], ["evaluate", "--k", "0"], ["data", "summary"])
    env = {"TOOLBENCH_DATA": str(tmp_path / "none")}
    forked = [cli(*args, env=env) for args in calls]
    monkeypatch.setenv("TOOLBENCH_TEST_FORK", "0")
    fresh = [cli(*args, env=env) for args in calls]
    assert [(f.returncode, f.stdout, f.stderr) for f in forked] == [(f.returncode, f.stdout, f.stderr)
                                                                     for f in fresh]
    assert [f.returncode for f in forked] == [0, 2, 2] and "usage:" in forked[0].stdout
