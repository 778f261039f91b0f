"""Content-addressed embedding store: checksummed ``.npz`` packs of text keys and vectors."""

from __future__ import annotations

import hashlib
import json
import logging
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from ..data.atomic import atomic_path

log = logging.getLogger(__name__)

KEY_BYTES = 16
PACK_GLOB = "pack-*.npz"


class CorruptPackError(ValueError):
    """A pack whose content does not match the checksum written with it."""


def text_keys(texts: Iterable[str]) -> list[bytes]:
    """Each text's store key: the first 16 bytes of its UTF-8 sha256."""
    return [hashlib.sha256(t.encode("utf-8")).digest()[:KEY_BYTES] for t in texts]


def _checksum(keys: np.ndarray, vectors: np.ndarray, meta: np.ndarray) -> bytes:
    h = hashlib.sha256()
    for part in (keys, vectors, meta):
        h.update(np.ascontiguousarray(part).tobytes())
    return h.digest()


def write_pack(folder: Path, keys: Sequence[bytes], vectors: np.ndarray, meta: dict) -> Path:
    """Write one pack atomically (name derived from its keys) and return its path."""
    karr = np.frombuffer(b"".join(keys), dtype=np.uint8).reshape(len(keys), KEY_BYTES)
    vecs = np.ascontiguousarray(vectors, dtype=np.float32)
    marr = np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8)
    name = hashlib.sha256(karr.tobytes()).hexdigest()[:20]
    path = folder / f"pack-{name}.npz"
    with atomic_path(path) as tmp:
        np.savez(tmp, keys=karr, vectors=vecs, meta=marr,
                 sha256=np.frombuffer(_checksum(karr, vecs, marr), dtype=np.uint8))
    return path


def read_pack(path: Path) -> tuple[list[bytes], np.ndarray, dict]:
    """Keys, vectors and meta of a pack, after checking its checksum (:class:`CorruptPackError`)."""
    try:
        with np.load(path, allow_pickle=False) as z:
            karr, vecs, marr, digest = z["keys"], z["vectors"], z["meta"], z["sha256"].tobytes()
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile) as exc:
        raise CorruptPackError(f"{path}: unreadable ({type(exc).__name__})") from exc
    if _checksum(karr, vecs, marr) != digest or karr.ndim != 2 or len(karr) != len(vecs):
        raise CorruptPackError(f"{path}: content does not match its checksum")
    return [k.tobytes() for k in karr], vecs, json.loads(marr.tobytes().decode())


class EmbeddingStore:
    """The packs of one (model, backend) folder, read lazily and verified once per process."""

    _cache: dict[Path, tuple] = {}  # path -> (size, mtime, inode), keys, vectors

    def __init__(self, folder: Path, dim: int) -> None:
        self.folder, self.dim = Path(folder), dim

    def _pack(self, path: Path) -> tuple[list[bytes], np.ndarray] | None:
        """The verified pack at ``path`` (cached by size and mtime); a corrupt one is removed."""
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        sig = (st.st_size, st.st_mtime_ns, st.st_ino)
        hit = self._cache.get(path)
        if hit is not None and hit[0] == sig:
            return hit[1:]
        try:
            keys, vecs, _meta = read_pack(path)
            if vecs.ndim != 2 or vecs.shape[1] != self.dim:
                raise CorruptPackError(f"{path}: vectors of shape {vecs.shape}, expected dim {self.dim}")
        except CorruptPackError as exc:
            log.warning("embedding cache: %s; removed, its texts will be embedded again", exc)
            path.unlink(missing_ok=True)
            self._cache.pop(path, None)
            return None
        self._cache[path] = (sig, keys, vecs)
        return keys, vecs

    def get(self, keys: Sequence[bytes]) -> tuple[np.ndarray, np.ndarray]:
        """``(vectors, found)`` for ``keys``: rows of the stored vectors and a boolean mask of hits."""
        want: dict[bytes, list[int]] = {}
        for i, k in enumerate(keys):
            want.setdefault(k, []).append(i)
        out = np.zeros((len(keys), self.dim), dtype=np.float32)
        found = np.zeros(len(keys), dtype=bool)
        for path in sorted(self.folder.glob(PACK_GLOB)):
            if not want:
                break
            pack = self._pack(path)
            if pack is None:
                continue
            dst, src = [], []
            for row, k in enumerate(pack[0]):
                pos = want.pop(k, None)
                if pos is not None:
                    dst.extend(pos)
                    src.extend([row] * len(pos))
            if dst:
                out[dst] = pack[1][src]
                found[dst] = True
        return out, found

    def put(self, keys: Sequence[bytes], vectors: np.ndarray, meta: dict) -> Path:
        """Store one chunk as a new pack."""
        return write_pack(self.folder, keys, vectors, {**meta, "n": len(keys), "dim": self.dim})
