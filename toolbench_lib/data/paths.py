"""Where the ToolBench data and the project's caches live."""

from __future__ import annotations

import os
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
DATA_ROOT = PROJECT_ROOT / "data"
PROCESSED_DIR = DATA_ROOT / "processed"
CACHE_ENV_VAR = "TOOLBENCH_CACHE"  # another cache folder (a cold run's, in `bench first-run`)
CACHE_DIR = Path(os.environ.get(CACHE_ENV_VAR) or DATA_ROOT / "cache")
OUTPUTS_DIR = PROJECT_ROOT / "outputs"
NOTEBOOKS_DIR = PROJECT_ROOT / "notebooks"

EXPECTED_LAYOUT = ("toolenv/tools/<Category>/<tool>.json, test_instruction/G1_instruction.json ... (optional:"
                   " toolenv_2023/tools/, test_instruction_original/, retrieval_corpus/G3_corpus.jsonl)")


class DataNotFoundError(FileNotFoundError):
    """No ToolBench data folder was found in any of the places looked in."""


def is_toolbench_dir(path: Path) -> bool:
    """True when ``path`` holds at least the registry and the test queries."""
    return (path / "toolenv" / "tools").is_dir() and (path / "test_instruction").is_dir()


def find_data_dir(data_dir: str | os.PathLike | None = None) -> Path:
    """The ToolBench data folder, from ``--data-dir``, ``TOOLBENCH_DATA``, ``data/raw/toolbench``,
    ``../shared/toolbench``; a given one that is no ToolBench folder is an error, never skipped."""
    env = os.environ.get("TOOLBENCH_DATA")
    places = [("--data-dir", Path(data_dir))] if data_dir else []  # the places looked in, in order
    places += [("TOOLBENCH_DATA", Path(env))] if env else []
    places += [("default", DATA_ROOT / "raw" / "toolbench"),
               ("shared", PROJECT_ROOT.parent / "shared" / "toolbench")]
    if data_dir is not None:
        label, path = places[0]
        if is_toolbench_dir(path):
            return path.resolve()
        raise DataNotFoundError(f"{label} {path} is not a ToolBench data folder. Expected layout: "
                                f"{EXPECTED_LAYOUT}")
    if env and not is_toolbench_dir(Path(env)):  # a set variable is a choice: never silently skipped
        others = " and ".join(str(path) for label, path in places if label != "TOOLBENCH_DATA")
        raise DataNotFoundError(f"TOOLBENCH_DATA {env} is not a ToolBench data folder (unset it to look in "
                                f"{others}). Expected layout: {EXPECTED_LAYOUT}")
    for _label, path in places:
        if is_toolbench_dir(path):
            return path.resolve()
    looked = "\n".join(f"  - {label}: {path}" for label, path in places)
    raise DataNotFoundError(f"No ToolBench data folder found. Looked in:\n{looked}\nExpected layout: "
                            f"{EXPECTED_LAYOUT}\nPass --data-dir, set TOOLBENCH_DATA, or place the data "
                            "under data/raw/toolbench/.")
