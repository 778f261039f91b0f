"""A warm notebook's opening cell: reading a stored study lazily against building the setup first."""

from __future__ import annotations

from pathlib import Path

from ..study.experiment import ExperimentConfig, build_setup, get_study
from .core import BenchLine, timed


def bench_warm(outputs_dir: Path, params: dict, label: str) -> BenchLine:
    """Seconds of ``get_study`` on a stored study (computed once first, untimed): eager (embedder and index
    first) against lazy, each on a fresh configuration object, as a notebook kernel would."""
    def cfg():
        return ExperimentConfig.build(outputs_dir=str(outputs_dir), **params)

    def eager_study() -> object:
        c = cfg()
        return get_study(c, build_setup(c), progress=False)

    cold = timed(lambda: get_study(cfg(), progress=False))[1]
    eager = timed(eager_study)[1]
    (setup, result), lazy = timed(lambda: get_study(cfg(), progress=False))
    return BenchLine("warm notebook: stored study opening cell", "s", "eager setup", "lazy setup",
                     eager, lazy, better="lower",
                     details={"config": label, "registry": result.provenance.get("registry_size"),
                              "model": result.provenance.get("model"), "first_run_s": round(cold, 1),
                              "lazy_loaded_embedder": getattr(setup, "built", True)})
