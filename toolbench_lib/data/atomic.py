"""Atomic file writes that concurrent processes cannot interleave."""

from __future__ import annotations

import errno
import fcntl
import glob
import hashlib
import logging
import os
import re
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

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
    """Yield a temporary path (per pid) that replaces ``path`` if the block succeeds (last writer wins)."""
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
    """Remove (and log) the temporaries under ``folders`` of dead processes or older than ``max_age_s``."""
    removed: list[Path] = []
    for folder in folders:  # a missing folder, or a file, holds no temporaries
        for path in sorted(Path(folder).rglob(".*.tmp*"), key=lambda p: len(p.parts)):  # shallowest first
            if (path.is_file() or path.is_dir()) and _remove_stale(path, max_age_s):
                removed.append(path)
    return removed


class FolderWriteError(OSError):
    """A file of a folder being written could not be written (the folder was left as it was)."""


@dataclass
class FolderWriter:
    """The temporary folder of :func:`atomic_folder`: :meth:`path` gives where to write a file."""

    tmp: Path
    folder: Path
    current: Path | None = None

    def path(self, name: str) -> Path:
        """Where to write the file ``name`` (an error while writing it names ``folder/name``)."""
        self.current = self.folder / name
        return self.tmp / name


def _remove_stale(path: Path, max_age_s: float) -> bool:
    """Remove a temporary file or folder of a dead process (or older than ``max_age_s``)."""
    m = _TEMP_NAME.match(path.name)
    if not m:
        return False
    try:
        age = time.time() - path.stat().st_mtime
        if _process_alive(int(m.group(1))) and age < max_age_s:
            return False
        kind = "folder" if path.is_dir() and not path.is_symlink() else "file"
        if kind == "folder":
            shutil.rmtree(path)
        else:
            path.unlink()
    except OSError:  # gone meanwhile, or not ours to remove
        return False
    log.info("removed stale temporary %s %s", kind, path)
    return True


LOCK_NAME = ".lock"  # inside the folder, never removed while the folder stays (removing races)


@contextmanager
def folder_lock(folder: str | os.PathLike[str], shared: bool = False, name: str = LOCK_NAME) -> Iterator[None]:
    """An advisory ``flock`` on ``folder``: :func:`atomic_folder` moves files in under the exclusive lock,
    readers hold the shared one (``name``: another lock file, another lock). Where no lock file can be made
    (read-only) a reader goes on unlocked."""
    path = Path(folder) / name
    fd = None
    for flags in (os.O_RDWR | os.O_CREAT, os.O_RDONLY):
        with suppress(OSError):
            fd = os.open(path, flags, 0o644)
            break
    if fd is None:
        if not shared:
            raise FolderWriteError(errno.EACCES, f"could not lock {path}; {folder} is left as it was")
        yield
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


T = TypeVar("T")


def compute_once(folder: str | os.PathLike[str], read: Callable[[], T | None], make: Callable[[], T]) -> T:
    """``read()``, else ``make()`` (which stores what ``read`` finds) under an exclusive lock in ``folder``
    (``.computing``), reading again first: one that asks while another computes waits, then reads."""
    if (found := read()) is not None:
        return found
    Path(folder).mkdir(parents=True, exist_ok=True)
    with folder_lock(folder, name=".computing"):
        found = read()
        return make() if found is None else found


@contextmanager
def atomic_folder(folder: str | os.PathLike[str], last: tuple[str, ...] = ()) -> Iterator[FolderWriter]:
    """Write a folder's files beside it, then move them in under :func:`folder_lock` (``last``: removed
    first, moved in last); a failed write leaves ``folder`` as it was and raises :class:`FolderWriteError`."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    if (folder.exists() or folder.is_symlink()) and not folder.is_dir():
        raise FolderWriteError(errno.ENOTDIR, f"could not write the folder {folder}: a file of that name is "
                               "there (move or remove it); nothing was written")
    clean_stale_temps(folder)
    for path in folder.parent.glob(f".{glob.escape(folder.name)}.*.tmp*"):
        _remove_stale(path, STALE_AFTER_S)
    tmp = folder.with_name(f".{folder.name}.{os.getpid()}.tmp.d")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    writer = FolderWriter(tmp, folder)
    try:
        try:
            yield writer
        except FolderWriteError:
            raise
        except OSError as exc:
            reason = exc.strerror or " ".join(str(exc).split()) or type(exc).__name__
            raise FolderWriteError(exc.errno, f"could not write {writer.current or folder} ({reason}); "
                                   f"{folder} is left as it was") from exc
        names = sorted(p.name for p in tmp.iterdir())
        folder.mkdir(exist_ok=True)
        with folder_lock(folder):  # one writer moves in at a time; readers wait (see folder_lock)
            for name in last:
                (folder / name).unlink(missing_ok=True)
            for name in [n for n in names if n not in last] + [n for n in last if n in names]:
                os.replace(tmp / name, folder / name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def file_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 of a file's bytes."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def checksum_path(path: str | os.PathLike[str]) -> Path:
    """The sidecar holding the sha256 of ``path``: ``<name>.sha256`` beside it."""
    path = Path(path)
    return path.with_name(path.name + ".sha256")


def write_checksum(path: str | os.PathLike[str]) -> None:
    """Write the sidecar of ``path`` (atomically, after the file itself is complete)."""
    save_text(checksum_path(path), file_sha256(path) + "\n")


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


def read_verified(path: str | os.PathLike[str]) -> bytes | None:
    """The bytes of ``path`` when they match its sidecar (what is parsed is what was checked), else None."""
    try:
        data = Path(path).read_bytes()
        expected = checksum_path(path).read_text().strip()
    except OSError:
        return None
    return data if hashlib.sha256(data).hexdigest() == expected else None


def save_text(path: str | os.PathLike[str], text: str, encoding: str | None = None) -> None:
    """``Path.write_text`` through :func:`atomic_path`: readers see the old text or the whole new one."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding=encoding)


def save_npy(path: str | os.PathLike[str], array: np.ndarray) -> None:
    """``np.save`` through :func:`atomic_path`: readers see the old array or the whole new one."""
    with atomic_path(path) as tmp:
        np.save(tmp, array)
