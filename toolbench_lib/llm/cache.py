"""Durable LLM call cache (SQLite) and portable cassettes (``.jsonl.gz``) for offline replay.

* :class:`CallStore` keeps one row per distinct call, committed before the reply is used.
* :class:`CachedLLM` wraps any backend: identical calls are answered from the store.
* :func:`export_cassette` / :func:`import_cassette` move records between stores as a deterministic file.
* :class:`ReplayBackend` answers only from cassettes, whichever backend recorded them.

Records hold the request and the reply only; no credential is ever part of a record.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import json
import math
import os
import sqlite3
import threading
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..data.atomic import atomic_path
from .base import LLMBackend, LLMError, LLMResponse

KEY_SCHEME_VERSION = 1

RECORD_FIELDS = (
    "key",
    "backend",
    "model",
    "is_llm",
    "prompt_version",
    "system",
    "prompt",
    "json_schema",
    "temperature",
    "run",
    "text",
    "tokens_in",
    "tokens_out",
    "latency_s",
    "created_at",
)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY,
    backend TEXT NOT NULL,
    model TEXT NOT NULL,
    is_llm INTEGER NOT NULL DEFAULT 1,
    prompt_version TEXT NOT NULL,
    system TEXT NOT NULL,
    prompt TEXT NOT NULL,
    json_schema TEXT,
    temperature REAL NOT NULL,
    run INTEGER NOT NULL,
    text TEXT NOT NULL,
    tokens_in INTEGER NOT NULL,
    tokens_out INTEGER NOT NULL,
    latency_s REAL NOT NULL,
    created_at TEXT NOT NULL
)
"""


class CacheFileError(ValueError):
    """A call store or cassette that cannot be read as one; the message names the file."""


def _canonical_schema(json_schema: dict | None) -> str | None:
    """Canonical JSON text of a schema (sorted keys), or None."""
    if json_schema is None:
        return None
    return json.dumps(json_schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def call_key(
    backend: str,
    model: str,
    prompt_version: str,
    system: str,
    prompt: str,
    json_schema: dict | None,
    temperature: float,
    run: int,
) -> str:
    """SHA-256 hex digest of the canonical JSON of everything that determines a call."""
    payload = {
        "v": KEY_SCHEME_VERSION,
        "backend": backend,
        "model": model,
        "prompt_version": prompt_version,
        "system": system,
        "prompt": prompt,
        "json_schema": json_schema,
        "temperature": float(temperature),
        "run": int(run),
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CallRequest:
    """The fields of one call that go into its key (``is_llm`` is stored alongside, not keyed)."""

    backend: str
    model: str
    prompt_version: str
    system: str
    prompt: str
    json_schema: dict | None
    temperature: float
    run: int
    is_llm: bool = True

    def key(self) -> str:
        """The cache key of this request."""
        return call_key(
            self.backend,
            self.model,
            self.prompt_version,
            self.system,
            self.prompt,
            self.json_schema,
            self.temperature,
            self.run,
        )


def _now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _row_to_record(row: sqlite3.Row) -> dict:
    """A store row as a plain record (``json_schema`` parsed, ``is_llm`` a bool)."""
    record = {name: row[name] for name in RECORD_FIELDS}
    record["is_llm"] = bool(record["is_llm"])
    record["json_schema"] = json.loads(record["json_schema"]) if record["json_schema"] is not None else None
    return record


def _record_to_response(record: dict) -> LLMResponse:
    """The recorded reply, marked as cached."""
    return LLMResponse(
        text=record["text"],
        tokens_in=int(record["tokens_in"]),
        tokens_out=int(record["tokens_out"]),
        latency_s=float(record["latency_s"]),
        model=record["model"],
        backend=record["backend"],
        cached=True,
    )


_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    **{name: str for name in ("key", "backend", "model", "prompt_version", "system", "prompt", "text",
                              "created_at")},
    "tokens_in": int, "tokens_out": int, "run": int, "temperature": (int, float), "latency_s": (int, float),
}


def _validate_record(record: dict) -> dict:
    """Check a record read from a cassette: all fields present and the key matches the request."""
    missing = [name for name in RECORD_FIELDS if name not in record and name != "is_llm"]
    if missing:
        raise ValueError(f"cassette record lacks fields {missing}")
    clean = {name: record.get(name) for name in RECORD_FIELDS}
    clean["is_llm"] = bool(record.get("is_llm", True))
    wrong = [name for name, kinds in _FIELD_TYPES.items()
             if not isinstance(clean[name], kinds) or isinstance(clean[name], bool)
             or (isinstance(clean[name], float) and not math.isfinite(clean[name]))]
    if not isinstance(clean["json_schema"], (dict, type(None))):
        wrong.append("json_schema")
    if wrong:
        raise ValueError(f"cassette record has fields of the wrong type: {wrong}")
    expected = call_key(
        clean["backend"],
        clean["model"],
        clean["prompt_version"],
        clean["system"],
        clean["prompt"],
        clean["json_schema"],
        clean["temperature"],
        clean["run"],
    )
    if expected != clean["key"]:
        raise ValueError(
            f"cassette record {str(clean['key'])[:12]}... has a key that does not match its fields"
        )
    return clean


class CallStore:
    """SQLite store of LLM calls (WAL journal, synchronous commits), safe to share between threads."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        self._conn = sqlite3.connect(str(self.path), check_same_thread=False, timeout=30.0)
        self._conn.row_factory = sqlite3.Row
        try:
            with self._lock:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=FULL")
                self._conn.execute(_SCHEMA)
                self._conn.commit()
                problem = self._check()
        except sqlite3.DatabaseError as exc:
            problem = f"not a usable SQLite database ({exc})"
        if problem:
            self._conn.close()
            raise CacheFileError(
                f"call store {self.path}: {problem}; move it aside or delete it (calls exported to a "
                "cassette can be imported again)"
            )

    def _check(self) -> str | None:
        """What is wrong with the open database (integrity, table columns), or None."""
        verdict = self._conn.execute("PRAGMA quick_check").fetchone()[0]
        if verdict != "ok":
            return f"damaged ({verdict})"
        columns = {row[1] for row in self._conn.execute("PRAGMA table_info(calls)")}
        missing = [name for name in RECORD_FIELDS if name not in columns]
        return f"its calls table lacks columns {missing}" if missing else None

    def _record(self, row: sqlite3.Row) -> dict:
        """A row as a record; a damaged row is an error naming the store and the key."""
        try:
            return _row_to_record(row)
        except (ValueError, TypeError, KeyError) as exc:
            raise CacheFileError(f"call store {self.path}: record {str(row['key'])[:12]}... is damaged "
                                 f"({type(exc).__name__}: {exc}); delete that row or the store") from None

    def __repr__(self) -> str:
        return f"CallStore({str(self.path)!r})"

    def __enter__(self) -> CallStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (idempotent)."""
        with self._lock:
            self._conn.close()

    def __len__(self) -> int:
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def __contains__(self, key: object) -> bool:
        with self._lock:
            return self._conn.execute("SELECT 1 FROM calls WHERE key = ?", (key,)).fetchone() is not None

    def get(self, key: str) -> LLMResponse | None:
        """The stored reply for ``key`` (with ``cached=True``), or None."""
        record = self.get_record(key)
        return _record_to_response(record) if record is not None else None

    def get_record(self, key: str) -> dict | None:
        """The full stored record for ``key``, or None."""
        with self._lock:
            row = self._conn.execute("SELECT * FROM calls WHERE key = ?", (key,)).fetchone()
        return self._record(row) if row is not None else None

    def put(self, key: str, request: CallRequest, response: LLMResponse) -> bool:
        """Store one call and commit at once; returns False if ``key`` was already stored (kept as is)."""
        record = {
            "key": key,
            "backend": request.backend,
            "model": request.model,
            "is_llm": request.is_llm,
            "prompt_version": request.prompt_version,
            "system": request.system,
            "prompt": request.prompt,
            "json_schema": request.json_schema,
            "temperature": float(request.temperature),
            "run": int(request.run),
            "text": response.text,
            "tokens_in": int(response.tokens_in),
            "tokens_out": int(response.tokens_out),
            "latency_s": float(response.latency_s),
            "created_at": _now_iso(),
        }
        return self.put_record(record)

    def put_record(self, record: dict) -> bool:
        """Insert a full record and commit; returns False if its key was already stored."""
        values = dict(record)
        values["is_llm"] = int(bool(values.get("is_llm", True)))
        values["json_schema"] = _canonical_schema(values["json_schema"])
        columns = ", ".join(RECORD_FIELDS)
        marks = ", ".join("?" for _ in RECORD_FIELDS)
        with self._lock:
            cursor = self._conn.execute(
                f"INSERT OR IGNORE INTO calls ({columns}) VALUES ({marks})",
                tuple(values[name] for name in RECORD_FIELDS),
            )
            self._conn.commit()
        return cursor.rowcount == 1

    def iter_records(self) -> Iterator[dict]:
        """All records, sorted by key."""
        with self._lock:
            rows = self._conn.execute("SELECT * FROM calls ORDER BY key").fetchall()
        for row in rows:
            yield self._record(row)


class CachedLLM:
    """A backend wrapper that answers repeated calls from a :class:`CallStore`.

    Identical concurrent calls are serialised per key, so the inner backend is called once per key.
    """

    accepts_prompt_version = True

    def __init__(self, backend: LLMBackend, store: CallStore, prompt_version: str = "v0") -> None:
        self.backend = backend
        self.store = store
        self.prompt_version = prompt_version
        self.hits = 0
        self.misses = 0
        self._lock = threading.Lock()
        self._inflight: dict[str, list[Any]] = {}

    @property
    def name(self) -> str:
        return self.backend.name

    @property
    def model(self) -> str:
        return self.backend.model

    @property
    def is_llm(self) -> bool:
        return self.backend.is_llm

    def __repr__(self) -> str:
        return f"CachedLLM({self.backend!r}, {self.store!r}, prompt_version={self.prompt_version!r})"

    @contextlib.contextmanager
    def _key_lock(self, key: str) -> Iterator[None]:
        """Hold a lock private to ``key`` (created on demand, dropped when unused)."""
        with self._lock:
            entry = self._inflight.setdefault(key, [threading.Lock(), 0])
            entry[1] += 1
        try:
            with entry[0]:
                yield
        finally:
            with self._lock:
                entry[1] -= 1
                if entry[1] == 0:
                    del self._inflight[key]

    def _count(self, hit: bool) -> None:
        with self._lock:
            if hit:
                self.hits += 1
            else:
                self.misses += 1

    def _call_inner(self, request: CallRequest) -> LLMResponse:
        kwargs: dict[str, Any] = {
            "system": request.system,
            "json_schema": request.json_schema,
            "temperature": request.temperature,
            "run": request.run,
        }
        if getattr(self.backend, "accepts_prompt_version", False):
            kwargs["prompt_version"] = request.prompt_version
        return self.backend.generate(request.prompt, **kwargs)

    def generate(
        self,
        prompt: str,
        system: str = "",
        json_schema: dict | None = None,
        temperature: float = 0.0,
        run: int = 0,
        *,
        prompt_version: str | None = None,
    ) -> LLMResponse:
        """Stored reply if this exact call was made before; else call the backend, store, return."""
        request = CallRequest(
            backend=self.name,
            model=self.model,
            prompt_version=prompt_version if prompt_version is not None else self.prompt_version,
            system=system,
            prompt=prompt,
            json_schema=json_schema,
            temperature=float(temperature),
            run=int(run),
            is_llm=bool(self.is_llm),
        )
        key = request.key()
        with self._key_lock(key):
            cached = self.store.get(key)
            if cached is not None:
                self._count(hit=True)
                return cached
            response = self._call_inner(request)
            stored_first = self.store.put(key, request, response)
            self._count(hit=False)
            if not stored_first:  # another process stored this call meanwhile: everyone uses its reply
                return self.store.get(key) or response
            return response


def _write_gzip_deterministic(path: Path, lines: Iterable[str]) -> None:
    """Write text lines gzip-compressed with a fixed header (no name, mtime 0), atomically."""
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as gz:
        for line in lines:
            gz.write(line.encode("utf-8"))
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        handle.write(buffer.getvalue())
        handle.flush()
        os.fsync(handle.fileno())


def export_cassette(store: CallStore, path: str | os.PathLike[str], model: str | None = None) -> int:
    """Write the records of ``store`` (only ``model``'s when given) to a ``.jsonl.gz`` cassette, sorted by
    key; returns the count."""
    records = [r for r in store.iter_records() if model is None or r["model"] == model]
    lines = (json.dumps(record, sort_keys=True, ensure_ascii=False) + "\n" for record in records)
    _write_gzip_deterministic(Path(path), lines)
    return len(records)


def read_cassette(path: str | os.PathLike[str]) -> Iterator[dict]:
    """Validated records of one cassette, in file order.

    A file that is not a whole gzip stream of UTF-8 text, or a bad record, is a :class:`CacheFileError`
    naming the file (and the line).
    """
    number = 0
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                    if not isinstance(record, dict):
                        raise ValueError("a record must be a JSON object")
                    clean = _validate_record(record)
                except (ValueError, TypeError, OverflowError, RecursionError) as err:
                    raise CacheFileError(f"cassette {path}: line {number}: {err}") from None
                yield clean
    except (gzip.BadGzipFile, zlib.error) as err:
        raise CacheFileError(f"cassette {path} is not a readable gzip file ({err}); restore or re-export "
                             "it") from None
    except EOFError:
        raise CacheFileError(f"cassette {path} is truncated after line {number}; restore or re-export "
                             "it") from None
    except UnicodeDecodeError as err:
        raise CacheFileError(f"cassette {path}: line {number + 1} is not UTF-8 text ({err.reason}); restore "
                             "or re-export it") from None


def import_cassette(path: str | os.PathLike[str], store: CallStore) -> int:
    """Add the cassette's records to ``store``; returns how many were new (importing twice adds none)."""
    return sum(1 for record in read_cassette(path) if store.put_record(record))


def _match_key(
    prompt_version: str | None,
    system: str,
    prompt: str,
    json_schema: dict | None,
    temperature: float,
    run: int,
) -> tuple:
    return (prompt_version, system, prompt, _canonical_schema(json_schema), float(temperature), int(run))


class ReplayBackend:
    """Answers only from recorded cassettes; a call that was never recorded raises :class:`LLMError`.

    Matching ignores which backend recorded a reply; pass ``model`` to use only one recorded model.
    Replies keep the recording backend's name and model and are marked ``cached``.
    """

    name = "replay"
    accepts_prompt_version = True

    def __init__(
        self,
        cassette_path_or_paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]],
        model: str | None = None,
    ) -> None:
        if isinstance(cassette_path_or_paths, (str, os.PathLike)):
            cassette_path_or_paths = [cassette_path_or_paths]
        self.paths = [Path(p) for p in cassette_path_or_paths]
        self.model_filter = model
        self._by_version: dict[tuple, dict[str, dict]] = {}
        self._any_version: dict[tuple, dict[str, dict]] = {}
        models: set[str] = set()
        llm_flags: set[bool] = set()
        for path in self.paths:
            for record in read_cassette(path):
                if model is not None and record["model"] != model:
                    continue
                self._index(record)
                models.add(record["model"])
                llm_flags.add(record["is_llm"])
        self.model = model if model is not None else (models.pop() if len(models) == 1 else "replay")
        self.is_llm = llm_flags != {False}

    def __repr__(self) -> str:
        return f"ReplayBackend({[str(p) for p in self.paths]!r}, model={self.model_filter!r})"

    def __len__(self) -> int:
        return sum(len(group) for group in self._by_version.values())

    def _index(self, record: dict) -> None:
        args = (
            record["system"],
            record["prompt"],
            record["json_schema"],
            record["temperature"],
            record["run"],
        )
        self._by_version.setdefault(_match_key(record["prompt_version"], *args), {})[record["key"]] = record
        self._any_version.setdefault(_match_key(None, *args), {})[record["key"]] = record

    def _describe(self, prompt_version: str | None, prompt: str, temperature: float, run: int) -> str:
        head = prompt[:120] + ("..." if len(prompt) > 120 else "")
        where = ", ".join(str(p) for p in self.paths)
        model = f", model={self.model_filter}" if self.model_filter else ""
        return (
            f"prompt_version={prompt_version if prompt_version is not None else '(any)'}, run={run}, "
            f"temperature={temperature}{model}, prompt={head!r}; cassette(s): {where}"
        )

    def generate(
        self,
        prompt: str,
        system: str = "",
        json_schema: dict | None = None,
        temperature: float = 0.0,
        run: int = 0,
        *,
        prompt_version: str | None = None,
    ) -> LLMResponse:
        """The recorded reply for this call; raises :class:`LLMError` on a miss or an ambiguous match."""
        index = self._by_version if prompt_version is not None else self._any_version
        found = index.get(_match_key(prompt_version, system, prompt, json_schema, temperature, run), {})
        if not found:
            raise LLMError(
                "replay miss: no recorded reply for "
                + self._describe(prompt_version, prompt, temperature, run)
            )
        if len(found) > 1:
            origins = sorted({f"{r['backend']}/{r['model']}@{r['prompt_version']}" for r in found.values()})
            raise LLMError(
                f"replay ambiguous: {len(found)} recorded replies ({', '.join(origins)}) for "
                + self._describe(prompt_version, prompt, temperature, run)
                + "; pass model=... or prompt_version=... to choose one"
            )
        return _record_to_response(next(iter(found.values())))
