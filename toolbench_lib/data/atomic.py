"""Atomic file writes that concurrent processes cannot interleave."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

log = logging.getLogger(__name__)

# ``.<name>.<pid>.tmp<suffix>``, as :func:`temp_path` names them.
_TEMP_NAME = re.compile(r"^\..+\.(\d+)\.tmp(\.[^.]*)?$")
STALE_AFTER_S = 3600.0


def temp_path(path: Path) -> Path:
    """A hidden per-process temporary name beside ``path`` that keeps its suffix (``np.save`` needs it)."""
    return path.with_name(f".{path.name}.{os.getpid()}.tmp{path.suffix}")


@contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path to write; it replaces ``path`` when the block ends without error.

    The temporary name carries the process id, so two processes writing the same file at once each
    rename a whole file of their own and the last one wins; a failed write leaves ``path`` untouched.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path(path)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return pid > 0
    return True


def clean_stale_temps(*folders: str | os.PathLike[str], max_age_s: float = STALE_AFTER_S) -> list[Path]:
    """Remove the temporary files of :func:`atomic_path` left by dead processes or older than ``max_age_s``.

    Looks through ``folders`` recursively; returns the removed paths (each is logged).
    """
    removed: list[Path] = []
    now = time.time()
    for folder in folders:
        folder = Path(folder)
        if not folder.is_dir():
            continue
        for path in folder.rglob(".*.tmp*"):
            m = _TEMP_NAME.match(path.name)
            if not m or not path.is_file():
                continue
            try:
                age = now - path.stat().st_mtime
                if _process_alive(int(m.group(1))) and age < max_age_s:
                    continue
                path.unlink()
            except OSError:  # gone meanwhile, or not ours to remove
                continue
            log.info("removed stale temporary file %s", path)
            removed.append(path)
    return removed


def file_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 of a file's bytes, read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def checksum_path(path: str | os.PathLike[str]) -> Path:
    """The sidecar holding the sha256 of ``path``: ``<name>.sha256`` beside it."""
    path = Path(path)
    return path.with_name(path.name + ".sha256")


def write_checksum(path: str | os.PathLike[str]) -> None:
    """Write the sidecar of ``path`` (atomically, after the file itself is complete)."""
    with atomic_path(checksum_path(path)) as tmp:
        tmp.write_text(file_sha256(path) + "\n")


def checksum_problem(path: str | os.PathLike[str]) -> str | None:
    """None when ``path`` matches its sidecar, else what is wrong (for a log line)."""
    try:
        expected = checksum_path(path).read_text().strip()
    except OSError:
        return "no checksum file"
    try:
        return None if file_sha256(path) == expected else "does not match its checksum"
    except OSError as exc:
        return f"unreadable ({exc})"


def save_npy(path: str | os.PathLike[str], array: np.ndarray) -> None:
    """``np.save`` through :func:`atomic_path`: readers see the old array or the whole new one."""
    with atomic_path(path) as tmp:
        np.save(tmp, array)
