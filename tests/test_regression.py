"""Reference scores of references/regression.yaml, reproduced (Pyserini-style regression)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from toolbench_lib.llm.factory import DEFAULT_CASSETTE
from toolbench_lib.llm.replay import ReplayBackend
from toolbench_lib.llm.rules import RulesBackend
from toolbench_lib.pipeline.study import StudySettings, run_study, summarise_study
from toolbench_lib.retrieval.embedding import cached_complete

from .conftest import SLICE_APIS, SLICE_QUERIES

REFERENCE_FILE = Path(__file__).resolve().parent.parent / "references" / "regression.yaml"
REFERENCE = yaml.safe_load(REFERENCE_FILE.read_text())
BACKENDS = {"replay": lambda: ReplayBackend(DEFAULT_CASSETTE), "rules": RulesBackend}


def _check(result, scores: dict, tol: float) -> None:
    for gt, per_subset in scores.items():
        summary = summarise_study(result, list(per_subset), REFERENCE["k"], gt)
        for subset, methods in per_subset.items():
            for method, (recall, precision) in methods.items():
                got = summary["subsets"][subset]["methods"][method]
                assert got["recall"] == pytest.approx(recall, abs=tol), (gt, subset, method, "recall")
                assert got["precision"] == pytest.approx(precision, abs=tol), (gt, subset, method, "prec.")


@pytest.mark.parametrize("backend", sorted(REFERENCE["slice"]["scores"]))
def test_slice_matrix(slice_setup, backend):
    ref = REFERENCE["slice"]
    assert (ref["max_apis"], ref["limit"], ref["seed"]) == (SLICE_APIS, SLICE_QUERIES, 0)
    assert slice_setup.embedder.name == REFERENCE["embedder"]
    result = run_study(slice_setup, BACKENDS[backend](), StudySettings(runs=1, plan_limit=0), progress=False)
    _check(result, ref["scores"][backend], tol=2e-3)


@pytest.mark.parametrize("backend", sorted(REFERENCE["full"]["scores"]))
def test_full_registry_matrix(ds, embedder, backend):
    if not cached_complete(embedder, ds.texts, "registry"):
        pytest.skip("the full registry is not embedded in the local cache (make run builds it)")
    from toolbench_lib.retrieval.setup import prepare

    setup = prepare(ds, embedder, ["G1", "G2", "G3"], progress=False)
    result = run_study(setup, BACKENDS[backend](), StudySettings(runs=1, plan_limit=0), progress=False)
    _check(result, REFERENCE["full"]["scores"][backend], tol=1.5e-3)
