"""Atomic writes: concurrent processes writing the same files never fail or leave a torn file."""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path

import pandas as pd
import pytest

from toolbench_lib.data.atomic import atomic_path
from toolbench_lib.data.dataset import _read_cache, load_dataset


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
    names = ["checksums.json", "queries.parquet", "registry.parquet", "stats.json"]
    assert sorted(p.name for p in folder.iterdir()) == names
    assert _read_cache(mini_toolbench, ds.fingerprint, folder) is not None  # checksums of the files that won
    assert len(pd.read_parquet(folder / "registry.parquet")) == len(ds.registry)


def test_stale_temporary_files_of_dead_or_old_writers_are_removed(tmp_path):
    import os
    import subprocess
    import sys
    import time

    from toolbench_lib.data.atomic import clean_stale_temps, temp_path

    child = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True,
                           text=True)
    dead_pid = int(child.stdout)  # that process has exited
    (tmp_path / "sub").mkdir()
    dead = tmp_path / "sub" / f".registry.parquet.{dead_pid}.tmp.parquet"
    mine = temp_path(tmp_path / "chunk.npy")  # this live process's own temporary name
    old_mine = temp_path(tmp_path / "calls.sqlite")
    unrelated = tmp_path / ".notes.tmp"
    for path in (dead, mine, old_mine, unrelated):
        path.write_bytes(b"x")
    two_hours_ago = time.time() - 7200
    os.utime(old_mine, (two_hours_ago, two_hours_ago))
    removed = clean_stale_temps(tmp_path, tmp_path / "missing")
    assert sorted(removed) == sorted([dead, old_mine])
    assert mine.exists() and unrelated.exists() and not dead.exists() and not old_mine.exists()
