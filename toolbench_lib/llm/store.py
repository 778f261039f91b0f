"""Durable store of LLM calls (SQLite): one row per distinct call (request and reply, never a credential),
keyed by :func:`call_key`, committed before the reply is used; the record helpers of cassettes and replay."""

from __future__ import annotations

import hashlib
import json
import math
import os
import sqlite3
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .base import LLMResponse

KEY_SCHEME_VERSION = 1

RECORD_FIELDS = ("key", "backend", "model", "is_llm", "prompt_version", "system", "prompt", "json_schema",
                 "temperature", "run", "text", "tokens_in", "tokens_out", "latency_s", "created_at")
KEY_FIELDS = ("backend", "model", "prompt_version", "system", "prompt", "json_schema", "temperature", "run")

_SCHEMA = """CREATE TABLE IF NOT EXISTS calls (
    key TEXT PRIMARY KEY, backend TEXT NOT NULL, model TEXT NOT NULL, is_llm INTEGER NOT NULL DEFAULT 1,
    prompt_version TEXT NOT NULL, system TEXT NOT NULL, prompt TEXT NOT NULL, json_schema TEXT,
    temperature REAL NOT NULL, run INTEGER NOT NULL, text TEXT NOT NULL, tokens_in INTEGER NOT NULL,
    tokens_out INTEGER NOT NULL, latency_s REAL NOT NULL, created_at TEXT NOT NULL)"""


class CacheFileError(ValueError):
    """A call store or cassette that cannot be read as one; the message names the file."""


BUSY_TIMEOUT_S = 5.0  # how long a call waits for a store another process holds locked


class StoreLockedError(CacheFileError):
    """A call store that another process kept locked for longer than :data:`BUSY_TIMEOUT_S`."""


def _is_lock(exc: sqlite3.Error) -> bool:
    text = str(exc).lower()
    return isinstance(exc, sqlite3.OperationalError) and ("locked" in text or "busy" in text)


def _canonical(value: object) -> str | None:
    if value is None:
        return None
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def call_key(backend: str, model: str, prompt_version: str, system: str, prompt: str,
             json_schema: dict | None, temperature: float, run: int) -> str:
    """SHA-256 hex digest of the canonical JSON of everything that determines a call."""
    payload = {"v": KEY_SCHEME_VERSION, "backend": backend, "model": model, "prompt_version": prompt_version,
               "system": system, "prompt": prompt, "json_schema": json_schema,
               "temperature": float(temperature), "run": int(run)}
    return hashlib.sha256(_canonical(payload).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class CallRequest:
    """The fields of one call that go into its key (``is_llm`` is stored, not keyed)."""

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
        return call_key(*(getattr(self, name) for name in KEY_FIELDS))


def _record_to_response(record: dict) -> LLMResponse:
    return LLMResponse(text=record["text"], tokens_in=int(record["tokens_in"]),
                       tokens_out=int(record["tokens_out"]), latency_s=float(record["latency_s"]),
                       model=record["model"], backend=record["backend"], cached=True)


_FIELD_TYPES: dict[str, type | tuple[type, ...]] = {
    **{name: str for name in ("key", "backend", "model", "prompt_version", "system", "prompt", "text",
                              "created_at")},
    "tokens_in": int, "tokens_out": int, "run": int, "temperature": (int, float), "latency_s": (int, float),
    "json_schema": (dict, type(None)),
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
    if wrong:
        raise ValueError(f"cassette record has fields of the wrong type: {wrong}")
    if call_key(*(clean[name] for name in KEY_FIELDS)) != clean["key"]:
        raise ValueError(f"cassette record {str(clean['key'])[:12]}... has a key that does not match its "
                         "fields")
    return clean


class CallStore:
    """SQLite store of LLM calls (WAL journal, synchronous commits), safe to share between threads."""

    def __init__(self, path: str | os.PathLike[str], read_only: bool = False) -> None:
        """The store at ``path``, made when missing; ``read_only``: an existing one, only read (an export)."""
        self.path = Path(path)
        if not read_only:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.RLock()
        where = self.path.resolve().as_uri() + "?mode=ro" if read_only else str(self.path)
        self._conn = sqlite3.connect(where, uri=read_only, check_same_thread=False, timeout=BUSY_TIMEOUT_S)
        self._conn.row_factory = sqlite3.Row
        try:  # no other thread holds the store yet: no lock needed
            if not read_only:
                self._conn.execute("PRAGMA journal_mode=WAL")
                self._conn.execute("PRAGMA synchronous=FULL")
                self._conn.execute(_SCHEMA)
                self._conn.commit()
            problem = self._check()
        except sqlite3.DatabaseError as exc:
            if _is_lock(exc):
                self._conn.close()
                raise self._locked() from None
            problem = f"not a usable SQLite database ({exc})"
        if problem:
            self._conn.close()
            raise CacheFileError(f"call store {self.path}: {problem}; move it aside or delete it (calls "
                                 "exported to a cassette can be imported again)")

    def _locked(self) -> StoreLockedError:
        return StoreLockedError(f"call store {self.path} is locked by another process (waited "
                                f"{BUSY_TIMEOUT_S:g} s); wait for it to finish or retry")

    def _execute(self, sql: str, params: tuple = (), commit: bool = False) -> sqlite3.Cursor:
        """Run one statement (and commit); raises :class:`StoreLockedError` past the busy timeout."""
        with self._lock:
            try:
                cursor = self._conn.execute(sql, params)
                if commit:
                    self._conn.commit()
                return cursor
            except sqlite3.OperationalError as exc:
                if _is_lock(exc):
                    if self._conn.in_transaction:
                        self._conn.rollback()
                    raise self._locked() from None
                raise

    def row_number(self, key: str) -> int | None:
        """The SQLite rowid of ``key``'s row (to name a row in a message), or None."""
        row = self._execute("SELECT rowid FROM calls WHERE key = ?", (key,)).fetchone()
        return int(row[0]) if row is not None else None

    def _check(self) -> str | None:
        """What is wrong with the open database (integrity, table columns), or None."""
        verdict = self._conn.execute("PRAGMA quick_check").fetchone()[0]
        if verdict != "ok":
            return f"damaged ({verdict})"
        columns = {row[1] for row in self._conn.execute("PRAGMA table_info(calls)")}
        missing = [name for name in RECORD_FIELDS if name not in columns]
        return ("it holds no calls table" if not columns else
                f"its calls table lacks columns {missing}" if missing else None)

    def _record(self, row: sqlite3.Row) -> dict:
        """A row as a plain record (``json_schema`` parsed, ``is_llm`` a bool)."""
        try:
            schema = row["json_schema"]
            return {**{name: row[name] for name in RECORD_FIELDS}, "is_llm": bool(row["is_llm"]),
                    "json_schema": json.loads(schema) if schema is not None else None}
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
        return int(self._execute("SELECT COUNT(*) FROM calls").fetchone()[0])

    def get(self, key: str) -> LLMResponse | None:
        """The stored reply for ``key`` (with ``cached=True``), or None."""
        record = self.get_record(key)
        return _record_to_response(record) if record is not None else None

    def get_record(self, key: str) -> dict | None:
        """The full stored record for ``key``, or None."""
        with self._lock:
            row = self._execute("SELECT * FROM calls WHERE key = ?", (key,)).fetchone()
        return self._record(row) if row is not None else None

    def put(self, key: str, request: CallRequest, response: LLMResponse) -> bool:
        """Store one call and commit at once; returns False if ``key`` was already stored (kept as is)."""
        return self.put_record({
            "key": key, **{name: getattr(request, name) for name in KEY_FIELDS}, "is_llm": request.is_llm,
            "temperature": float(request.temperature), "run": int(request.run), "text": response.text,
            "tokens_in": int(response.tokens_in), "tokens_out": int(response.tokens_out),
            "latency_s": float(response.latency_s),
            "created_at": datetime.now(UTC).isoformat(timespec="seconds")})

    def put_record(self, record: dict) -> bool:
        """Insert a full record and commit; returns False if its key was already stored."""
        values = {**record, "is_llm": int(bool(record.get("is_llm", True))),
                  "json_schema": _canonical(record["json_schema"])}
        return self._execute(f"INSERT OR IGNORE INTO calls ({', '.join(RECORD_FIELDS)}) VALUES "
                             f"({', '.join('?' * len(RECORD_FIELDS))})",
                             tuple(values[name] for name in RECORD_FIELDS), commit=True).rowcount == 1

    def iter_records(self) -> Iterator[dict]:
        """All records, sorted by key."""
        with self._lock:
            rows = self._execute("SELECT * FROM calls ORDER BY key").fetchall()
        for row in rows:
            yield self._record(row)
