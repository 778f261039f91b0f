"""The bench command: its table, and the quick run of the parts that need no model."""

from __future__ import annotations

import json

import numpy as np
import pytest

from toolbench_lib.bench import BenchLine, format_table, machine_info
from toolbench_lib.bench.embed import fixed_sample
from toolbench_lib.bench.gemini_fake import bench_gemini
from toolbench_lib.bench.search import bench_search
from toolbench_lib.cli import main


def test_ratio_direction_and_table():
    rate = BenchLine("emb", "docs/s", "fp32", "int8", 10.0, 25.0, target=2.5)
    time_ = BenchLine("search", "s", "bound", "faiss", 0.5, 1.0, better="lower")
    skipped = BenchLine("llm", "tok/s", "1", "4", skipped="llama-cpp-python is not installed")
    assert rate.ratio == pytest.approx(2.5) and rate.meets_target
    assert time_.ratio == pytest.approx(0.5) and time_.meets_target is None
    table = format_table([rate, time_, skipped], machine_info())
    lines = table.splitlines()
    assert lines[0].startswith("| measure |") and len([x for x in lines if x.startswith("| ")]) == 4
    assert "2.50x" in table and "met" in table and "skipped" in table and "Machine:" in table


def test_fixed_sample_is_fixed():
    texts = [f"t{i}" for i in range(1000)]
    a, b = fixed_sample(texts, 50), fixed_sample(texts, 50)
    assert a == b and len(set(a)) == 50 and a == sorted(a, key=lambda t: int(t[1:]))


def test_search_line_measures_both():
    rng = np.random.default_rng(1)
    v = rng.standard_normal((2000, 32), dtype=np.float32)
    line = bench_search(v, v[:10].copy(), k=5, repeats=1, source="random")
    # times, lower is better: the ratio is matmul bound over FAISS, and the GFLOP/s are the product's
    # 2 x 10 x 2000 x 32 operations over the bound's seconds.
    assert (line.unit, line.better, line.baseline, line.candidate) == (
        "s", "lower", "matmul bound", "faiss IndexFlatIP top-k")
    assert line.ratio == pytest.approx(line.baseline_value / line.candidate_value)
    assert line.details["matmul_gflops"] == pytest.approx(2 * 10 * 2000 * 32 / line.baseline_value / 1e9,
                                                          abs=0.051)
    assert {k: line.details[k] for k in ("vectors", "registry", "queries", "dim", "k")} == {
        "vectors": "random", "registry": 2000, "queries": 10, "dim": 32, "k": 5}
    assert 0 < line.candidate_value < 5 and 0 < line.baseline_value < 5  # 10 x 2000 x 32 is milliseconds


def test_gemini_line_uses_the_real_client_against_the_fake_server(monkeypatch):
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    line = bench_gemini(calls=8, workers=4, delay_s=0.05)
    # Every call waits 50 ms at the server: at most 20 calls/s one at a time, 80 with four at once, and
    # four at once must beat one at a time by far (the client really runs them concurrently).
    assert 0 < line.baseline_value <= 20.0 and 0 < line.candidate_value <= 80.0
    assert line.ratio == pytest.approx(line.candidate_value / line.baseline_value) and line.ratio > 1.5
    assert line.details["server_delay_ms"] == 50 and line.details["calls"] == 8
    assert line.details["target_calls_per_s"] == 20.0
    assert line.details["target_met"] == (line.candidate_value >= 20.0)
    import os

    assert "GEMINI_API_KEY" not in os.environ  # the fake key is not left behind


def test_bench_command_quick(capsys, tmp_path):
    out = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--only", "search,gemini", "--json", str(out)]) == 0
    table = capsys.readouterr().out
    assert "exact search vs matmul bound" in table and "gemini client calls/s" in table
    data = json.loads(out.read_text())
    assert [ln["name"] for ln in data["lines"]] == ["exact search vs matmul bound",
                                                    "gemini client calls/s (fake server, 200 ms)"]
    for ln in data["lines"]:
        a, b = ln["baseline_value"], ln["candidate_value"]
        assert ln["skipped"] is None
        assert ln["ratio"] == pytest.approx(a / b if ln["better"] == "lower" else b / a)
    from toolbench_lib.data.machine import available_cpus

    assert data["machine"]["cores"] == available_cpus()


def test_bench_rejects_unknown_part(capsys):
    assert main(["bench", "--only", "gpu"]) == 2
    assert "unknown part" in capsys.readouterr().err


def test_local_model_line_waits_for_the_shared_lock_then_gives_up(tmp_path):
    import fcntl

    from toolbench_lib.bench.llm_local import LockBusy, file_lock

    lock = tmp_path / "llm.lock"
    with open(lock, "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX)
        with pytest.raises(LockBusy, match="held by another process"), file_lock(str(lock), timeout_s=1.5):
            pass
        fcntl.flock(held, fcntl.LOCK_UN)
    with file_lock(str(lock), timeout_s=1.5):  # free again: taken at once
        pass


def test_bm25_line_times_both_searches_of_the_same_queries():
    """The BM25 line on a tiny corpus: both searches run on the same queries, its build and cache load are
    timed, and the ratio is dense seconds over BM25 seconds."""
    from toolbench_lib.bench.search import bench_bm25

    calls = []

    def dense(q):
        calls.append(list(q))

    texts = ["weather forecast for cities", "currency exchange rates", "city weather alerts"] * 10
    line = bench_bm25(texts, ["weather", "currency", "alerts"], dense, k=5)
    assert calls == [["weather", "currency"], ["weather", "currency", "alerts"]]  # warm-up, then all
    d = line.details
    assert d["apis"] == 30 and d["queries"] == 3 and d["k"] == 5
    assert d["bm25_build_s"] >= 0 and d["bm25_mean_hits"] == 5.0
    assert line.ratio == pytest.approx(line.baseline_value / line.candidate_value)
