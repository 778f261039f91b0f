"""Atomic file writes that concurrent processes cannot interleave."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np


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


def save_npy(path: str | os.PathLike[str], array: np.ndarray) -> None:
    """``np.save`` through :func:`atomic_path`: readers see the old array or the whole new one."""
    with atomic_path(path) as tmp:
        np.save(tmp, array)
