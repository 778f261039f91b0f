"""Reference scores of references/regression.yaml, reproduced (Pyserini-style regression)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from toolbench_lib.analysis.summary import summary_json
from toolbench_lib.llm.factory import DEFAULT_CASSETTE
from toolbench_lib.llm.replay import ReplayBackend
from toolbench_lib.llm.rules import RulesBackend
from toolbench_lib.retrieval.embedding import cached_complete
from toolbench_lib.study.result import StudySettings, run_study

from .conftest import SLICE_APIS, SLICE_QUERIES

REFERENCE_FILE = Path(__file__).resolve().parent.parent / "references" / "regression.yaml"
REFERENCE = yaml.safe_load(REFERENCE_FILE.read_text())
BACKENDS = {"replay": lambda: ReplayBackend(DEFAULT_CASSETTE), "rules": RulesBackend}


def _check(result, scores: dict, tol: float) -> None:
    for gt, per_subset in scores.items():
        summary = summary_json(result, list(per_subset), REFERENCE["k"], gt)
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
    if not cached_complete(embedder, ds.texts):
        pytest.skip("the full registry is not embedded in the local cache (make run builds it)")
    from toolbench_lib.retrieval.setup import prepare

    setup = prepare(ds, embedder, ["G1", "G2", "G3"], progress=False)
    result = run_study(setup, BACKENDS[backend](), StudySettings(runs=1, plan_limit=0), progress=False)
    _check(result, REFERENCE["full"]["scores"][backend], tol=1.5e-3)


# -- the retriever families on the slice (references/regression.yaml: slice_families) -------------------


def test_slice_families_matrix(real_data_dir):
    """A fresh ``evaluate --retriever dense,bm25`` on the slice reproduces the stored block, and its dense
    numbers are those of the slice matrix above (the rules backend's)."""
    from toolbench_lib.bench import regression

    ref = regression.stored()
    assert ref["command"] == " ".join(["evaluate", *regression.ARGS])
    fresh = regression.measure(str(real_data_dir))
    assert regression.differences(fresh, ref) == []
    for gt, per_subset in REFERENCE["slice"]["scores"]["rules"].items():
        for subset, methods in per_subset.items():
            for method, values in methods.items():
                assert ref["scores"][gt][subset][method] == pytest.approx(values, abs=1e-6)


def _block(recall: float) -> dict:
    from toolbench_lib.bench import regression

    return {"command": " ".join(["evaluate", *regression.ARGS]), **regression.SLICE, "registry_size": 2500,
            "n_queries": {"G1": 15}, "scores": {"candidates": {"G1": {"rtp": [recall, 0.5]}}}}


def test_differences_name_every_number_out_of_tolerance():
    from toolbench_lib.bench.regression import differences

    ref = _block(0.6)
    assert differences(_block(0.6019), ref) == []
    assert differences(_block(0.603), ref) == ["candidates G1 rtp recall: stored 0.6, now 0.603"]
    fresh = _block(0.6) | {"registry_size": 2499}
    fresh["scores"]["candidates"]["G1"]["ptr@bm25"] = [0.1, 0.1]
    assert differences(fresh, ref) == ["registry_size: stored 2500, now 2499",
                                       "candidates G1 ptr@bm25: not stored"]
    assert differences(_block(0.6) | {"scores": {"candidates": {"G1": {}}}}, ref) == [
        "candidates G1 rtp: missing from the run"]


def test_write_replaces_only_its_own_block(tmp_path):
    from toolbench_lib.bench import regression

    path = tmp_path / "regression.yaml"
    path.write_text("# kept comment\nversion: 1\nslice:\n  seed: 0\n")
    regression.write(_block(0.6), path)
    first = path.read_text()
    assert first.startswith("# kept comment\nversion: 1\nslice:\n  seed: 0\n# Retriever families")
    assert regression.stored(path) == _block(0.6)
    regression.write(_block(0.7), path)  # written again: replaced, not appended
    assert path.read_text() == first.replace("[0.6, 0.5]", "[0.7, 0.5]")
    assert yaml.safe_load(path.read_text())["slice"] == {"seed": 0}
    path.write_text("version: 1\n")
    with pytest.raises(KeyError, match="bench.regression --write"):
        regression.stored(path)


def test_readme_reference_tables_are_made_from_the_file(tmp_path):
    """README states the stored numbers, not a retyped copy: its block is readme_tables of the file."""
    from toolbench_lib.bench import regression

    text = regression.README.read_text()
    block = text.split(regression.README_BEGIN, 1)[1].split(regression.README_END, 1)[0]
    assert block == "\n" + regression.readme_tables(REFERENCE)
    g1 = REFERENCE["full"]["scores"]["replay"]["candidates"]["G1"]
    assert f"| G1 | candidates | {g1['rtp'][0]:.3f} / {g1['rtp'][1]:.3f} |" in block
    # a changed number in the file changes the README block written from it
    ref = tmp_path / "regression.yaml"
    ref.write_text(REFERENCE_FILE.read_text().replace(f"rtp: [{g1['rtp'][0]},", "rtp: [0.999,", 1))
    readme = tmp_path / "README.md"
    readme.write_text(f"# x\n{regression.README_BEGIN}\nold\n{regression.README_END}\nrest\n")
    regression.write_readme(readme, ref)
    assert "| G1 | candidates | 0.999 / " in readme.read_text() and readme.read_text().endswith("\nrest\n")
