"""The stored study's format: a folder of format 1 (one ``hits`` table with ``-1`` for a final ranking and
for a ranking stored once for every run), or of any format but today's, is refused in one line that names
its version and what to do."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from toolbench_lib.study.stored import (
    FORMAT_VERSION,
    PROVENANCE,
    TABLE_CHECKSUMS,
    StoredStudyError,
    StudyResult,
)

from .hand_tables import study_of_hits
from .test_analysis_tables import _calls, _hits, _plans, _queries, _stubs

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


def _refusal(folder: Path) -> str:
    with pytest.raises(StoredStudyError) as info:
        StudyResult.load(folder)
    said = str(info.value)
    assert "\n" not in said and str(folder) in said
    return said


def test_a_format_1_study_is_refused_in_one_line(tmp_path):
    folder = _write_format_1(tmp_path / "old")
    files = sorted(p.name for p in folder.iterdir())
    said = _refusal(folder)
    assert "format version 1," in said and "run the study again" in said
    assert sorted(p.name for p in folder.iterdir() if p.name != ".lock") == files  # nothing written or lost


@pytest.mark.parametrize("version", [FORMAT_VERSION + 1, 0, "2", True])
def test_a_format_this_code_cannot_read_is_refused_in_one_line(tmp_path, version):
    folder = tmp_path / "s"
    study_of_hits(_queries(), _stubs(), _hits(), _plans(), _calls(), PROV).save(folder)
    assert StudyResult.load(folder).ranking("rtp", 1, k=3) == StudyResult.load(folder).ranking("rtp", 0, k=3)
    prov = json.loads((folder / PROVENANCE).read_text())
    assert prov["format_version"] == FORMAT_VERSION
    prov["format_version"] = version
    data = json.dumps(prov, indent=2).encode()
    (folder / PROVENANCE).write_bytes(data)
    sums = json.loads((folder / TABLE_CHECKSUMS).read_text())
    sums[PROVENANCE] = hashlib.sha256(data).hexdigest()  # a valid study of that format, not a damaged one
    (folder / TABLE_CHECKSUMS).write_text(json.dumps(sums))
    said = _refusal(folder)
    assert f"format version {version!r}" in said
    if version == FORMAT_VERSION + 1:
        assert "newer than this toolkit reads" in said and "update toolbench_lib" in said
    else:
        assert "run the study again" in said
