"""Every registered fused method by name, through both entry points on the registry slice: ``run_study``
(as a notebook calls it, with no registration step) and ``evaluate --method`` (the command line), with the
same numbers; a method that reads PtR's stubs reports the stub call's tokens."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys

import numpy as np
import pytest

from toolbench_lib.analysis.summary import summary_json
from toolbench_lib.cli import main
from toolbench_lib.llm.rules import RulesBackend
from toolbench_lib.retrieval.fused import FUSED
from toolbench_lib.retrieval.fusion_specs import MeanEmbedding, RoundRobin
from toolbench_lib.study.result import StudySettings, run_study

SUBSETS = ["G1", "G2", "G3"]
NAMES = list(FUSED)


def test_every_fused_name_is_registered_when_the_pipeline_is_imported() -> None:
    """A fresh interpreter that imports only the study pipeline finds every fused name (no registration
    call), as a notebook does."""
    code = ("from toolbench_lib.study.result import run_study\n"
            "from toolbench_lib.retrieval.retrievers import RETRIEVERS\n"
            f"missing = set({NAMES!r}) - set(RETRIEVERS)\n"
            "assert not missing, missing\n")
    subprocess.run([sys.executable, "-c", code], check=True)


@pytest.fixture(scope="module")
def cli_all(ds, embedder) -> dict:
    """``evaluate --method rtp,ptr,<every fused name> --json`` on the slice (rules stubs, one run)."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["evaluate", "--method", ",".join(["rtp", "ptr", *NAMES]), "--backend", "rules",
                     "--runs", "1", "--plan-limit", "0", "--max-apis", "2500", "--limit", "15", "--seed", "0",
                     "--model", "all-MiniLM-L6-v2", "--json"])
    assert code == 0
    return json.loads(out.getvalue())


@pytest.mark.parametrize("name", NAMES)
def test_fused_name_through_run_study_and_evaluate(name: str, slice_setup, cli_all) -> None:
    """The method alone in a study (it retrieves the rankings it fuses) scores as it does beside RtP and
    PtR on the command line; it finds something on the slice."""
    result = run_study(slice_setup, RulesBackend(), StudySettings(runs=1, plan_limit=0, methods=(name,)),
                       progress=False)
    assert result.methods == [name]
    alone = summary_json(result, SUBSETS, 5)
    recalls = []
    for subset in SUBSETS:
        mine, cli = alone["subsets"][subset]["methods"][name], cli_all["subsets"][subset]["methods"][name]
        assert mine["recall"] == pytest.approx(cli["recall"]) and mine["precision"] == pytest.approx(
            cli["precision"]), (name, subset)
        assert cli_all["subsets"][subset]["n_queries"] == 15
        recalls.append(cli["recall"])
    assert max(recalls) > 0, name
    # The stored ranking holds the method's own scores, best first, and each API's registry row.
    final = result.rankings.sort_values(["qkey", "rank"])
    assert [slice_setup.api_ids[r] for r in final["row"]] == final["api_id"].tolist()
    for key, g in final.groupby("qkey"):
        s = g["score"].to_numpy()
        assert (np.diff(s) <= 1e-12).all(), (name, key)
        if not isinstance(FUSED[name], RoundRobin) and len(s) > 1:
            assert not np.allclose(s, 1.0 / np.arange(1, len(s) + 1)), (name, key)
        if isinstance(FUSED[name], MeanEmbedding):
            assert (np.abs(s) <= 1 + 1e-5).all(), key  # a cosine


def test_stub_readers_report_the_stub_call_tokens(cli_all) -> None:
    """``fuse4`` (and every fused method that reads the stubs) pays PtR's stub call and says so; ``fuse2``
    (the query's two rankings) makes no LLM call."""
    for subset in SUBSETS:
        methods = cli_all["subsets"][subset]["methods"]
        ptr = methods["ptr"]
        assert ptr["tokens_in"] > 0 and ptr["tokens_out"] > 0
        for name, spec in FUSED.items():
            got = (methods[name].get("tokens_in"), methods[name].get("tokens_out"))
            want = (ptr["tokens_in"], ptr["tokens_out"]) if spec.uses_stubs else (None, None)
            assert got == want, (subset, name)
        assert FUSED["fuse4"].uses_stubs and not FUSED["fuse2"].uses_stubs
