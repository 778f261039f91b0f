"""Which executed notebooks of a run folder are still current (a warm `make run` keeps them): their keys and
the sha256 of every output file, recorded in ``notebooks/fresh.json``."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path

from ..data.atomic import file_sha256, save_text
from ..data.paths import PROJECT_ROOT

MANIFEST = "fresh.json"
REPORT_FILES = ("report.md", "report.html")
# What every notebook's outputs depend on besides its own file and parameters (relative to the checkout).
SOURCES = ("toolbench_lib/**/*.py", "references/**/*", "data/cassettes/**/*", "requirements*.lock",
           "pyproject.toml")


def code_fingerprint(root: Path = PROJECT_ROOT, patterns: Iterable[str] = SOURCES) -> str:
    """sha256 over the checkout's code, references, cassettes and lock files (names and contents)."""
    h = hashlib.sha256()
    for path in sorted({p for pat in patterns for p in root.glob(pat)
                        if p.is_file() and "__pycache__" not in p.parts}):
        h.update(str(path.relative_to(root)).encode())
        h.update(file_sha256(path).encode())
    return h.hexdigest()


def notebook_key(notebook: Path, parameters: Mapping, study_key: str, code: str) -> str:
    """The key of one notebook's outputs: its file, its parameters, the study key and the code."""
    blob = json.dumps({"notebook": file_sha256(notebook), "parameters": dict(parameters), "study": study_key,
                       "code": code}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def output_checksums(out_dir: Path) -> dict[str, str]:
    """sha256 of every file the run wrote, by path relative to ``out_dir``; the stored studies (``runs/``)
    and lock files aside."""
    return {str(path.relative_to(out_dir)): file_sha256(path) for path in sorted(out_dir.rglob("*"))
            if path.is_file() and path.name != MANIFEST and path.relative_to(out_dir).parts[0] != "runs"
            and not path.name.endswith(".lock") and not path.name.startswith(".")}


def current_notebooks(out_dir: Path, keys: Mapping[str, str]) -> set[str]:
    """The notebooks whose recorded key equals ``keys[name]``, when every recorded output file of the run
    folder still holds its checksum (else none)."""
    try:
        manifest = json.loads((out_dir / "notebooks" / MANIFEST).read_text(encoding="utf-8"))
        recorded, files = dict(manifest["notebooks"]), dict(manifest["files"])
    except (OSError, ValueError, KeyError, TypeError):
        return set()
    if any(not (path := out_dir / rel).is_file() or file_sha256(path) != digest
           for rel, digest in files.items()):
        return set()
    return {name for name, key in keys.items() if recorded.get(name) == key}


def write_manifest(out_dir: Path, keys: Mapping[str, str]) -> Path:
    """Record ``keys`` (merged over the notebooks recorded before) and the output files' checksums."""
    path = out_dir / "notebooks" / MANIFEST
    try:
        before = dict(json.loads(path.read_text(encoding="utf-8"))["notebooks"])
    except (OSError, ValueError, KeyError, TypeError):
        before = {}
    record = {"notebooks": {**before, **keys}, "files": output_checksums(out_dir)}
    save_text(path, json.dumps(record, indent=1, sort_keys=True), encoding="utf-8")
    return path
