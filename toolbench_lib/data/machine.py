"""What the machine offers this process."""

from __future__ import annotations

import os


def available_cpus() -> int:
    """The CPUs this process may run on (its affinity mask; else the machine's count; at least 1)."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def env_threads(var: str, unset: str) -> int | None:
    """The thread count set in ``var`` (None when unset); ``ValueError`` unless a whole number 1-1024."""
    env = os.environ.get(var, "").strip()
    if not env:
        return None
    if not (env.isascii() and env.isdigit()) or not 1 <= int(env) <= 1024:
        raise ValueError(f"{var}={env!r}: a whole number of threads from 1 to 1024, or unset for {unset}")
    return int(env)
