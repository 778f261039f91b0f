"""``export trec``: TREC run and qrels files that ranx and trec_eval (pytrec_eval) read back to this toolkit's
own numbers."""

from __future__ import annotations

import json
import math
import shutil
import uuid
from pathlib import Path

import numpy as np
import pytest
from ranx import Qrels, Run, evaluate

from toolbench_lib.analysis.summary import summary_json
from toolbench_lib.eval.export import MANIFEST, export_trec, trec_qrels_lines, trec_run_lines
from toolbench_lib.study.stored import StudyResult

from .test_analysis_tables import study  # noqa: F401 (fixture: the hand-made study, no data)


def _ranx_means(out: Path, manifest: dict, subset: str, method: str, gt: str, k: int) -> tuple[float, float]:
    """Mean over the method's run files of ranx's recall@k and precision@k (what the summary reports)."""
    qrels_file = next(f["path"] for f in manifest["files"]
                      if f["kind"] == "qrels" and f["subset"] == subset and f["gt"] == gt)
    qrels = Qrels.from_file(str(out / qrels_file), kind="trec")
    recall, precision = [], []
    for f in manifest["files"]:
        if f["kind"] == "run" and f["subset"] == subset and f["method"] == method:
            run = Run.from_file(str(out / f["path"]), kind="trec")
            scores = evaluate(qrels, run, [f"recall@{k}", f"precision@{k}"], make_comparable=True)
            recall.append(scores[f"recall@{k}"])
            precision.append(scores[f"precision@{k}"])
    return float(np.mean(recall)), float(np.mean(precision))


def _trec_eval_means(out: Path, manifest: dict, subset: str, method: str, gt: str,
                     k: int) -> tuple[float, float]:
    """The same means from trec_eval itself (pytrec_eval), reading the files as TREC text."""
    import pytrec_eval

    def read(path: str, cols: int) -> list[list[str]]:
        rows = [line.split() for line in (out / path).read_text().splitlines()]
        assert all(len(r) == cols for r in rows), path
        return rows

    qrels_file = next(f["path"] for f in manifest["files"]
                      if f["kind"] == "qrels" and f["subset"] == subset and f["gt"] == gt)
    qrels: dict[str, dict[str, int]] = {}
    for q, _, doc, rel in read(qrels_file, 4):
        qrels.setdefault(q, {})[doc] = int(rel)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {f"P_{k}", f"recall_{k}"})
    recall, precision = [], []
    for f in manifest["files"]:
        if f["kind"] == "run" and f["subset"] == subset and f["method"] == method:
            run: dict[str, dict[str, float]] = {}
            for q, _, doc, _, score, _ in read(f["path"], 6):
                run.setdefault(q, {})[doc] = float(score)
            per_query = evaluator.evaluate(run)
            assert set(per_query) == set(qrels)  # every judged query retrieved something
            recall.append(np.mean([v[f"recall_{k}"] for v in per_query.values()]))
            precision.append(np.mean([v[f"P_{k}"] for v in per_query.values()]))
    return float(np.mean(recall)), float(np.mean(precision))


def _check_against_summary(result: StudyResult, out: Path, manifest: dict, aliases: list[str], k: int) -> int:
    checked = 0
    for gt in ("candidates", "relevant"):
        ours = summary_json(result, aliases, k, gt)
        for alias in aliases:
            entry = ours["subsets"][alias]
            for method, numbers in entry["methods"].items():
                expected = pytest.approx((numbers["recall"], numbers["precision"]), abs=1e-12)
                for reader in (_ranx_means, _trec_eval_means):
                    assert reader(out, manifest, entry["subset"], method, gt, k) == expected, \
                        (reader.__name__, alias, method, gt)
                checked += 1
    return checked


def test_lines_and_ids():
    assert trec_run_lines({"G1:1": {"a/b/c": 0.75, "d/e/f": 0.5}}, "rtp.run0") == (
        ["G1:1 Q0 a/b/c 1 0.75 rtp.run0", "G1:1 Q0 d/e/f 2 0.5 rtp.run0"], 0)
    lines, ties = trec_run_lines({"q": {"a": 0.5, "b": 0.5, "c": 0.25}}, "t")  # the retriever's order kept
    scores = [float(line.split()[4]) for line in lines]
    assert ties == 1 and scores[0] == 0.5 and scores[0] > scores[1] > scores[2] == 0.25
    assert scores[1] == math.nextafter(0.5, 0.0)
    assert trec_qrels_lines({"G1:1": {"z", "a"}, "G1:2": set()}) == ["G1:1 0 a 1", "G1:1 0 z 1"]
    with pytest.raises(ValueError, match="document id 'a b' is empty or holds whitespace"):
        trec_run_lines({"q": {"a b": 1.0}}, "t")


def test_hand_study_files_give_the_summarys_numbers(study, tmp_path):  # noqa: F811
    out = tmp_path / "trec"
    manifest = export_trec(study, out)
    assert json.loads((out / MANIFEST).read_text()) == json.loads(json.dumps(manifest))
    runs = [f for f in manifest["files"] if f["kind"] == "run"]
    assert len(runs) == 2 * 2 * 2  # subsets x methods x runs (RtP's one stored ranking in every run)
    assert all(f["queries_without_gt"] == 0 for f in manifest["files"] if f["kind"] == "qrels")
    aliases = list(dict.fromkeys(study.queries["subset"]))
    for k in (1, 2, 3):
        assert _check_against_summary(study, out, manifest, aliases, k) == 2 * 2 * 2


def test_export_command_reads_the_runs_stored_study(study, tmp_path, monkeypatch, capsys):  # noqa: F811
    from toolbench_lib.cli import main
    from toolbench_lib.study import experiment

    monkeypatch.setattr(experiment, "OUTPUTS_DIR", tmp_path / "outputs")
    study.save(tmp_path / "outputs" / "hand" / "runs" / "abc123")
    args = ["export", "trec", "--run-name", "hand", "--out", str(tmp_path / "trec"),
            "--gt", "relevant", "--gt", "relevant"]  # named twice, written once
    assert main(args) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["run_files"] == 8 and printed["qrels_files"] == 2
    assert sorted(p.name for p in (tmp_path / "trec" / "qrels").iterdir())[0].endswith(".relevant.qrels")
    assert len(json.loads((tmp_path / "trec" / "manifest.json").read_text())["files"]) == 10
    assert main(["export", "trec", "--run-name", "nothing", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no stored study under")


@pytest.mark.slow
def test_exported_rules_study_on_the_slice_matches_evaluate(slice_setup, tmp_path, capsys):
    """A small stored study (rules backend, 2 runs, both methods) under outputs/<run>/runs/<key>/, exported
    by the command: ranx on the files gives summary_json's (evaluate --json's) recall@5 and precision@5."""
    from toolbench_lib.cli import main
    from toolbench_lib.data.paths import OUTPUTS_DIR
    from toolbench_lib.llm.rules import RulesBackend
    from toolbench_lib.study.result import StudySettings, run_study

    settings = StudySettings(runs=2, plan_limit=2, methods=("rtp", "ptr"))
    result = run_study(slice_setup, RulesBackend(), settings, progress=False)
    run_name = f"export-test-{uuid.uuid4().hex[:8]}"
    try:
        result.save(OUTPUTS_DIR / run_name / "runs" / "slice")
        assert main(["export", "trec", "--run-name", run_name, "--out", str(tmp_path / "trec")]) == 0
        manifest = json.loads((tmp_path / "trec" / MANIFEST).read_text())
        assert manifest["provenance"]["backend"] == "rules" and manifest["provenance"]["model"]
        stored = StudyResult.load(OUTPUTS_DIR / run_name / "runs" / "slice")
        assert _check_against_summary(stored, tmp_path / "trec", manifest, ["G1", "G2", "G3"], 5) == 12
    finally:
        shutil.rmtree(OUTPUTS_DIR / run_name, ignore_errors=True)
    capsys.readouterr()
