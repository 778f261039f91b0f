"""One-time import of the former embedding cache layout into the content-addressed store.

The former layout kept one folder per ordered list of texts, ``<model>/<kind>-<fingerprint>/`` with
``meta.json`` and ``chunk_NNNNN.npy`` files of fp32 vectors (no checksums). Given the same list of
texts (for the registry: the processed registry's ``api_text``s in order) its chunks are imported
without embedding them again. Each chunk is checked before it is imported: shape, finite unit-norm
rows, and its first text embedded afresh must match its first row (cosine >= 0.999). The folder is
never moved or deleted; one still being written is imported as far as it goes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .embed_store import EmbeddingStore, text_keys

log = logging.getLogger(__name__)

LEGACY_BACKEND = "fp32"
BUSY_SECONDS = 300


def texts_fingerprint(texts: Sequence[str]) -> str:
    """Short sha256 of an ordered list of texts (the key of the former per-list cache folders)."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:16]


def legacy_folders(root: Path, slug: str, texts: Sequence[str]) -> list[Path]:
    """Former cache folders of exactly this list of texts under ``root/<slug>/``."""
    model_dir = root / slug
    if not model_dir.is_dir():
        return []
    fp = texts_fingerprint(texts)
    return sorted(p for p in model_dir.glob(f"*-{fp}") if (p / "meta.json").is_file())


def _valid_rows(arr: np.ndarray, n: int, dim: int) -> bool:
    if arr.dtype != np.float32 or arr.shape != (n, dim) or not np.isfinite(arr).all():
        return False
    return bool(np.allclose(np.linalg.norm(arr, axis=1), 1.0, atol=1e-3))


def import_legacy(embedder, texts: Sequence[str], store: EmbeddingStore, root: Path) -> int:
    """Import the former cache folders of ``texts`` into ``store``; returns the number of texts added.

    Only fp32 vectors are imported (the former layout had no other backend), and only chunks whose
    texts the store still lacks.
    """
    if getattr(embedder, "backend", LEGACY_BACKEND) != LEGACY_BACKEND or not texts:
        return 0
    added = 0
    for folder in legacy_folders(root, embedder.slug, texts):
        added += _import_folder(embedder, texts, store, folder)
    return added


def _import_folder(embedder, texts: Sequence[str], store: EmbeddingStore, folder: Path) -> int:
    meta = json.loads((folder / "meta.json").read_text())
    cs, n = int(meta["chunk_size"]), int(meta["n"])
    if n != len(texts) or meta.get("model") != embedder.name:
        return 0
    n_chunks = (n + cs - 1) // cs
    paths = [folder / f"chunk_{i:05d}.npy" for i in range(n_chunks)]
    present = [i for i, p in enumerate(paths) if p.exists()]
    all_keys = text_keys(texts)
    held = store.has(all_keys)
    candidates: list[tuple[list[bytes], np.ndarray, int]] = []
    for i in present:
        chunk = texts[i * cs:(i + 1) * cs]
        keys = all_keys[i * cs:(i + 1) * cs]
        if held[i * cs:(i + 1) * cs].all():
            continue
        try:
            arr = np.load(paths[i], allow_pickle=False)
        except (OSError, ValueError, EOFError):
            arr = None
        if arr is None or not _valid_rows(arr, len(chunk), store.dim):
            log.warning("former embedding cache %s is damaged; its texts will be embedded again", paths[i])
            continue
        candidates.append((keys, arr, i))
    if not candidates:
        return 0
    fresh = embedder.encode([texts[i * cs] for _, _, i in candidates])
    added = 0
    for (keys, arr, i), check in zip(candidates, fresh, strict=True):
        if float(arr[0] @ check) < 0.999:
            log.warning("former embedding cache %s does not match its texts; they will be embedded again",
                        paths[i])
            continue
        store.put(keys, arr, {"model": embedder.name, "backend": LEGACY_BACKEND, "kind": meta.get("kind"),
                              "imported_from": f"{folder.name}/{paths[i].name}"})
        added += len(keys)
    age = time.time() - max(paths[i].stat().st_mtime for i in present)
    state = ("complete; it may be deleted" if len(present) == n_chunks
             else f"{len(present)} of {n_chunks} chunks, last written {age:.0f} s ago"
             + (" (still being written)" if age < BUSY_SECONDS else ""))
    log.info("imported %d texts from the former embedding cache %s (%s)", added, folder, state)
    return added
