"""The stored study's format: a folder of format 1 (one ``hits`` table with ``-1`` for a final ranking and
for a ranking stored once for every run), written here by hand, is read through the one converter and
evaluates to the numbers of the same study stored in today's format; a newer format is refused in one line."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pytest

from toolbench_lib.eval.evaluation import METRICS, evaluate, per_query_runs
from toolbench_lib.study.stored import (
    FORMAT_VERSION,
    PROVENANCE,
    TABLE_CHECKSUMS,
    StoredStudyError,
    StudyResult,
)

from .test_analysis_tables import _calls, _hits, _plans, _queries, _stubs, key

PROV = {"settings": {"k": 2, "depth": 10, "runs": 2, "plan_limit": 1, "methods": ["rtp", "ptr"]}}


def _write_format_1(folder: Path) -> Path:
    """The hand-made study of ``test_analysis_tables`` as a format-1 folder: its tables, ``hits`` among
    them, their checksums and a provenance without ``format_version``."""
    folder.mkdir(parents=True)
    tables = {"queries": _queries(), "stubs": _stubs(), "hits": _hits(), "plans": _plans(), "calls": _calls()}
    sums = {}
    for name, frame in tables.items():
        frame.to_parquet(folder / f"{name}.parquet", index=False)
        sums[f"{name}.parquet"] = hashlib.sha256((folder / f"{name}.parquet").read_bytes()).hexdigest()
    prov = json.dumps(PROV, indent=2).encode()
    sums[PROVENANCE] = hashlib.sha256(prov).hexdigest()
    (folder / TABLE_CHECKSUMS).write_text(json.dumps(sums))
    (folder / PROVENANCE).write_bytes(prov)
    return folder


def _files(folder: Path) -> dict[str, bytes]:
    """The folder's files (its lock file left out: a load takes the shared lock)."""
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and p.name != ".lock"}


def _expected_tables() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The two tables of the hand-made study, built row by row: RtP's rows for runs 0 and 1."""
    final, texts = [], []
    for row in _hits().itertuples(index=False):
        for run in ([0, 1] if row.run == -1 else [row.run]):
            values = (row.qkey, row.method, run, row.rank, row.row, row.api_id, row.score)
            if row.text_idx == -1:
                final.append(values)
            else:
                texts.append((*values[:3], row.text_idx, *values[3:]))
    columns = ["qkey", "method", "run", "rank", "row", "api_id", "score"]
    return (pd.DataFrame(final, columns=columns),
            pd.DataFrame(texts, columns=[*columns[:3], "text_idx", *columns[3:]]))


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    keys = [c for c in ("method", "run", "qkey", "text_idx", "rank") if c in frame]
    return frame.sort_values(keys).reset_index(drop=True)


def test_a_format_1_study_is_read_through_the_converter(tmp_path):
    folder = _write_format_1(tmp_path / "old")
    before = _files(folder)
    study = StudyResult.load(folder)
    assert study.provenance["format_version"] == FORMAT_VERSION and study.deterministic == ["rtp"]
    want_final, want_texts = _expected_tables()
    pd.testing.assert_frame_equal(_sorted(study.rankings), _sorted(want_final), check_dtype=False)
    pd.testing.assert_frame_equal(_sorted(study.text_rankings), _sorted(want_texts), check_dtype=False)
    assert set(study.rankings["run"]) == {0, 1} and (study.text_rankings["text_idx"] >= 0).all()
    assert study.ranking("rtp", 0, k=3) == study.ranking("rtp", 1, k=3)
    assert study.ranking("rtp", 1, k=3)[key("q1")] == ["a", "x", "b"]
    assert _files(folder) == before  # a load converts in memory and never writes
    assert study.stored_rankings_sha256() is None  # no stored rankings table to key the evaluation by


def test_a_converted_study_evaluates_to_the_numbers_of_todays_format(tmp_path):
    old = StudyResult.load(_write_format_1(tmp_path / "old"))
    new = _write_format_1(tmp_path / "new")
    StudyResult.load(new).save(new)  # the same study saved again: today's format
    assert json.loads((new / PROVENANCE).read_text())["format_version"] == FORMAT_VERSION
    assert {"rankings.parquet", "text_rankings.parquet"} <= set(_files(new))
    again = StudyResult.load(new)  # read as today's format (the stale hits.parquet is not read)
    assert again.stored_rankings_sha256() is not None
    for k in (1, 2, 5, 10):
        for gt in ("candidates", "relevant"):
            a = per_query_runs(old, k, gt, METRICS)
            b = per_query_runs(again, k, gt, METRICS)
            pd.testing.assert_frame_equal(a, b)
    ea, eb = evaluate(old), evaluate(again)
    assert (ea.flags == eb.flags).all() and ea.deterministic == eb.deterministic == (True, False)
    # by hand (test_analysis_tables): q1 has candidates a, b; RtP ranks a x b, PtR run 0 x a y, run 1 a b x
    pq = per_query_runs(old, 2, "candidates").set_index(["method", "run", "qkey"])["recall"]
    assert [pq[("rtp", r, key("q1"))] for r in (0, 1)] == [0.5, 0.5]
    assert [pq[("ptr", r, key("q1"))] for r in (0, 1)] == [0.5, 1.0]


@pytest.mark.parametrize("version", [FORMAT_VERSION + 1, 0, "2"])
def test_a_format_this_code_cannot_read_is_refused_in_one_line(tmp_path, version):
    folder = _write_format_1(tmp_path / "s")
    StudyResult.load(folder).save(folder)
    prov = json.loads((folder / PROVENANCE).read_text())
    prov["format_version"] = version
    data = json.dumps(prov, indent=2).encode()
    (folder / PROVENANCE).write_bytes(data)
    sums = json.loads((folder / TABLE_CHECKSUMS).read_text())
    sums[PROVENANCE] = hashlib.sha256(data).hexdigest()  # a valid study of that format, not a damaged one
    (folder / TABLE_CHECKSUMS).write_text(json.dumps(sums))
    with pytest.raises(StoredStudyError) as info:
        StudyResult.load(folder)
    said = str(info.value)
    assert "\n" not in said and f"format version {version!r}" in said and str(folder) in said
    if version == FORMAT_VERSION + 1:
        assert "newer than this toolkit reads" in said and "update toolbench_lib" in said
