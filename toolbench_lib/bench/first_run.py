"""``bench first-run``: a newcomer's `make run`, timed cold (a new run folder, a cache holding only what
`index build` wrote) and warm, notebook by notebook; and a warm notebook's opening cell."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .. import config
from ..data.paths import CACHE_DIR, CACHE_ENV_VAR, OUTPUTS_DIR, PROJECT_ROOT
from ..retrieval.embed_store import read_pack
from ..study.experiment import ExperimentConfig, build_setup, get_study
from .core import BenchLine, machine_info, machine_line, timed

# CPU flags that decide which kernels the numeric libraries run (recorded beside every figure).
SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16",
              "avx_vnni", "amx_tile", "amx_int8")
MAKE_RUN = {"backend": "replay", "embedder": config.EMBEDDER, "runs": config.RUNS,
            "plan_limit": config.PLAN_LIMIT}


def cpu_flags(cpuinfo: str | None = None) -> list[str]:
    """The CPU's flags (``/proc/cpuinfo``'s first ``flags`` line); empty where there is none."""
    with contextlib.suppress(OSError):
        cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8") if cpuinfo is None else cpuinfo
    line = next((ln for ln in (cpuinfo or "").splitlines() if ln.startswith("flags")), "")
    return line.split(":", 1)[1].split() if ":" in line else []


def simd_flags(flags: list[str]) -> list[str]:
    """Of ``flags``, the SIMD ones of :data:`SIMD_FLAGS`, in that order."""
    return [f for f in SIMD_FLAGS if f in flags]


def cold_cache(dest: Path, embedder: str = MAKE_RUN["embedder"], source: Path = CACHE_DIR) -> Path:
    """A cache folder as a fresh clone has it when its notebooks start: links to the registry packs of
    ``embedder``'s vector store in ``source`` (what `index build` wrote) and to its ``models`` folder."""
    dest.mkdir(parents=True, exist_ok=True)
    stores = source / "embeddings" / "by-text" / embedder
    for folder in sorted(p for p in stores.glob("*") if p.is_dir()):
        target = dest / folder.relative_to(source)
        target.mkdir(parents=True, exist_ok=True)
        for pack in sorted(folder.glob("pack-*.npz")):
            with contextlib.suppress(ValueError, OSError):  # an unreadable pack is simply not there
                if read_pack(pack)[2].get("kind") == "registry":
                    (target / pack.name).symlink_to(pack.resolve())
    if (source / "models").is_dir():
        (dest / "models").symlink_to((source / "models").resolve())
    return dest


@dataclass
class Pass:
    """One `make run`: its steps' seconds, the notebooks' seconds, and the whole wall time."""

    steps: dict[str, float] = field(default_factory=dict)
    notebooks: dict[str, float] = field(default_factory=dict)
    wall: float = 0.0


def make_run_commands(run_name: str, workers: int | None = None) -> dict[str, list]:
    """The commands `make run` runs after its install steps, by name."""
    py, params = [sys.executable, "-m", "toolbench_lib"], MAKE_RUN
    reproduce = [*py, "reproduce", "--run-name", run_name, "--backend", params["backend"], "--embedder",
                 params["embedder"], "--runs", str(params["runs"]), "--plan-limit", str(params["plan_limit"])]
    if workers:
        reproduce += ["--workers", str(workers)]
    return {"data summary": [*py, "data", "summary"],
            "index build": [*py, "index", "build", "--model", params["embedder"], "--with-recorded"],
            "reproduce": reproduce}


NOTEBOOK_LINE = re.compile(r"^\s+(\d\d_\S+\.ipynb)\s+([0-9.]+) s$", re.MULTILINE)


def notebook_seconds(console: str) -> dict[str, float]:
    """Seconds per notebook from ``reproduce``'s closing lines (0 for a notebook kept as current)."""
    return {name: float(s) for name, s in NOTEBOOK_LINE.findall(console)}


def timed_pass(run_name: str, cache: Path, workers: int | None, log) -> Pass:
    """Run `make run`'s commands once with ``cache`` as the cache folder; raises when one fails."""
    env = {**os.environ, CACHE_ENV_VAR: str(cache), "TQDM_DISABLE": "1"}
    out = Pass()
    t_all = time.perf_counter()
    for name, cmd in make_run_commands(run_name, workers).items():
        done, seconds = timed(subprocess.run, cmd, cwd=PROJECT_ROOT, env=env, capture_output=True, text=True)
        out.steps[name] = round(seconds, 1)
        log.write(f"$ {' '.join(cmd)}\n{done.stdout}{done.stderr}\n")
        if done.returncode != 0:
            tail = "\n".join((done.stderr or done.stdout).strip().splitlines()[-5:])
            raise RuntimeError(f"{name} failed ({done.returncode}):\n{tail}")
        if name == "reproduce":
            out.notebooks = notebook_seconds(done.stdout)
    out.wall = round(time.perf_counter() - t_all, 1)
    return out


def format_first_run(cold: Pass, warm: Pass, machine: dict) -> str:
    """The Markdown table of a cold and a warm `make run`, with the machine under it."""
    rows = ["| step | cold s | warm s |", "|---|---:|---:|"]
    rows += [f"| {name} | {s:.1f} | {warm.notebooks.get(name, float('nan')):.1f} |"
             for name, s in cold.notebooks.items()]
    for name in cold.steps:
        label = "notebooks and report (`reproduce`, wall)" if name == "reproduce" else f"`{name}`"
        rows.append(f"| {label} | {cold.steps[name]:.1f} | {warm.steps.get(name, float('nan')):.1f} |")
    rows.append(f"| **`make run` after install (wall)** | **{cold.wall:.1f}** | **{warm.wall:.1f}** |")
    return "\n".join([*rows, "", machine_line({"simd_flags": [], **machine})])


def bench_first_run(run_name: str | None = None, workers: int | None = None) -> tuple[str, Path]:
    """Time a cold, then a warm `make run` in a new run folder; returns the table and where it was written
    (``outputs/<run>/bench/first_run.md`` and ``.json``). The cold cache folder is removed after."""
    run_name = run_name or f"first-run-{time.strftime('%Y%m%d-%H%M%S')}"
    if (OUTPUTS_DIR / run_name).exists():
        raise FileExistsError(f"outputs/{run_name} exists: a cold run needs a new run name")
    machine = {**machine_info(), "flags": cpu_flags()}
    machine["simd_flags"] = simd_flags(machine["flags"])
    tmp = Path(tempfile.mkdtemp(prefix="first-run-cache-"))
    bench_dir = OUTPUTS_DIR / run_name / "bench"
    try:  # the log stays out of the timed run folder: a file changing there would make the warm pass cold
        cache = cold_cache(tmp / "cache")
        with open(tmp / "first_run.log", "w", encoding="utf-8") as log:
            print(f"cold `make run` into outputs/{run_name} (cache {cache}) ...")
            cold = timed_pass(run_name, cache, workers, log)
            print(f"cold: {cold.wall:.1f} s; warm `make run` ...")
            warm = timed_pass(run_name, cache, workers, log)
            print(f"warm: {warm.wall:.1f} s")
    finally:
        bench_dir.mkdir(parents=True, exist_ok=True)
        if (tmp / "first_run.log").exists():
            shutil.move(tmp / "first_run.log", bench_dir / "first_run.log")
        shutil.rmtree(tmp, ignore_errors=True)
    table = format_first_run(cold, warm, machine)
    (bench_dir / "first_run.md").write_text(table + "\n", encoding="utf-8")
    (bench_dir / "first_run.json").write_text(json.dumps(
        {"machine": machine, "cold": asdict(cold), "warm": asdict(warm)}, indent=2), encoding="utf-8")
    return table, bench_dir / "first_run.md"


def bench_warm(outputs_dir: Path, params: dict, label: str) -> BenchLine:
    """Seconds of ``get_study`` on a stored study (computed once first, untimed): eager (embedder and index
    first) against lazy, each on a fresh configuration object, as a notebook kernel would."""
    def study(eager: bool = False) -> object:
        cfg = ExperimentConfig.build(outputs_dir=str(outputs_dir), **params)
        return get_study(cfg, build_setup(cfg) if eager else None, progress=False)

    cold = timed(study)[1]
    eager = timed(study, True)[1]
    (setup, result), lazy = timed(study)
    return BenchLine("warm notebook: stored study opening cell", "s", "eager setup", "lazy setup",
                     eager, lazy, better="lower",
                     details={"config": label, "registry": result.provenance.get("registry_size"),
                              "model": result.provenance.get("model"), "first_run_s": round(cold, 1),
                              "lazy_loaded_embedder": getattr(setup, "built", True)})
