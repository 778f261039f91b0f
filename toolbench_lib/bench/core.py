"""The bench table: its lines, the machine they were measured on, and the runner."""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

from ..data.machine import available_cpus

log = logging.getLogger(__name__)


@dataclass
class BenchLine:
    """One measured comparison of a candidate against a baseline (``better``: which way is better)."""

    name: str
    unit: str
    baseline: str
    candidate: str
    baseline_value: float | None = None
    candidate_value: float | None = None
    better: str = "higher"
    target: float | None = None
    details: dict = field(default_factory=dict)
    skipped: str | None = None
    seconds: float = 0.0

    @property
    def ratio(self) -> float | None:
        """How many times better the candidate is (``baseline / candidate`` for times)."""
        a, b = self.baseline_value, self.candidate_value
        if a is None or b is None or a <= 0 or b <= 0:
            return None
        return b / a if self.better == "higher" else a / b

    @property
    def meets_target(self) -> bool | None:
        return None if self.target is None or self.ratio is None else self.ratio >= self.target

    def to_dict(self) -> dict:
        return {**asdict(self), "ratio": self.ratio, "meets_target": self.meets_target}


def timed(fn: Callable, *args, **kwargs) -> tuple[object, float]:
    """``fn(*args, **kwargs)`` and the seconds it took."""
    t0 = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t0


def best_of(fn: Callable[[], object], repeats: int) -> float:
    """The fewest seconds ``fn()`` took in ``repeats`` calls."""
    return min((timed(fn)[1] for _ in range(repeats)), default=float("inf"))


def machine_info() -> dict:
    """CPU model, cores, memory and load: the machine every figure was measured on."""
    model = platform.processor() or ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8") as f:
        model = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), model)
    mem_gib = None
    with contextlib.suppress(ValueError, OSError, AttributeError):
        mem_gib = round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    return {"cpu": model, "cores": available_cpus(), "memory_gib": mem_gib, "load_avg": list(os.getloadavg()),
            "python": platform.python_version()}


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    return f"{value:.3g} {unit}" if abs(value) < 1000 else f"{value:,.0f} {unit}"


def format_table(lines: list[BenchLine], machine: dict) -> str:
    """The bench as one Markdown table, with the machine under it."""
    rows = ["| measure | baseline | candidate | ratio | target | details |", "|---|---|---|---|---|---|"]
    for ln in lines:
        if ln.skipped:
            rows.append(f"| {ln.name} | {ln.baseline} | {ln.candidate} | skipped | "
                        f"{'' if ln.target is None else f'>= {ln.target:g}x'} | {ln.skipped} |")
            continue
        detail = ", ".join(f"{k}={v}" for k, v in ln.details.items())
        ratio = "-" if ln.ratio is None else f"{ln.ratio:.2f}x"
        target = "" if ln.target is None else f">= {ln.target:g}x ({'met' if ln.meets_target else 'not met'})"
        rows.append(f"| {ln.name} | {ln.baseline}: {_fmt(ln.baseline_value, ln.unit)} | "
                    f"{ln.candidate}: {_fmt(ln.candidate_value, ln.unit)} | {ratio} | {target} | {detail} |")
    return "\n".join([*rows, "", machine_line(machine)])


def machine_line(machine: dict) -> str:
    """The line under a bench table: the machine (:func:`machine_info`; its SIMD flags where recorded)."""
    simd = (f"SIMD flags: {', '.join(machine['simd_flags']) or 'none found'}; "
            if "simd_flags" in machine else "")
    load = ", ".join(f"{x:.2f}" for x in machine.get("load_avg", []))
    return (f"Machine: {machine.get('cpu')}, {machine.get('cores')} cores, {machine.get('memory_gib')} GiB; "
            f"{simd}load average at the start {load}; Python {machine.get('python')}.")


def run_bench(parts: dict[str, Callable[[], BenchLine]],
              skip_on: tuple[type[BaseException], ...] = ()) -> list[BenchLine]:
    """Run each part; a part that fails becomes a skipped line naming the error (``skip_on``: the reason)."""
    lines = []
    for name, part in parts.items():
        t0 = time.perf_counter()
        try:
            line = part()
        except skip_on as exc:
            line = BenchLine(name, "", "", "", skipped=str(exc))
        except Exception as exc:  # noqa: BLE001 - one failing part must not lose the others
            log.warning("bench %s failed: %s: %s", name, type(exc).__name__, exc)
            line = BenchLine(name, "", "", "", skipped=f"failed: {type(exc).__name__}: {exc}")
        line.seconds = round(time.perf_counter() - t0, 1)
        log.info("bench %s: %s", name, line.to_dict())
        lines.append(line)
    return lines
