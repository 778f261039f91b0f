"""Atomic writes: concurrent processes writing the same files never fail or leave a torn file."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

import pandas as pd
import pytest

from toolbench_lib.atomic import atomic_path
from toolbench_lib.dataset import load_dataset


def _write_many(start, path: str, tag: int, times: int) -> None:
    start.wait(60)
    for _ in range(times):
        with atomic_path(Path(path)) as tmp:
            tmp.write_text(f"{tag}\n" * 2000)


def _build_many(start, data_dir: str, processed: str, times: int) -> None:
    start.wait(60)
    for _ in range(times):
        load_dataset(data_dir, processed_dir=Path(processed), rebuild=True)


def _run_in_processes(target, args_per_process) -> list[int]:
    """Start one process per argument tuple; they begin together once all have started."""
    ctx = mp.get_context("spawn")
    start = ctx.Event()
    procs = [ctx.Process(target=target, args=(start, *args)) for args in args_per_process]
    for p in procs:
        p.start()
    time.sleep(3)  # let both finish importing
    start.set()
    for p in procs:
        p.join(timeout=300)
    return [p.exitcode for p in procs]


def test_two_processes_writing_one_file_both_succeed(tmp_path):
    target = tmp_path / "out" / "file.txt"
    codes = _run_in_processes(_write_many, [(str(target), tag, 300) for tag in (1, 2)])
    assert codes == [0, 0]
    lines = set(target.read_text().splitlines())
    assert lines in ({"1"}, {"2"}), "the file holds one writer's whole content"
    assert [p.name for p in target.parent.iterdir()] == ["file.txt"], "no temporary file left behind"


def test_failed_write_keeps_the_old_file(tmp_path):
    target = tmp_path / "file.txt"
    target.write_text("old")
    with pytest.raises(RuntimeError), atomic_path(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("killed mid-write")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["file.txt"]


def test_concurrent_dataset_builds_do_not_collide(mini_toolbench, tmp_path):
    processed = tmp_path / "processed"
    codes = _run_in_processes(_build_many, [(str(mini_toolbench), str(processed), 15)] * 2)
    assert codes == [0, 0]
    ds = load_dataset(mini_toolbench, processed_dir=processed)
    folder = processed / ds.fingerprint
    assert sorted(p.name for p in folder.iterdir()) == ["queries.parquet", "registry.parquet", "stats.json"]
    assert len(pd.read_parquet(folder / "registry.parquet")) == len(ds.registry)
