"""Portable cassettes (sorted ``.jsonl.gz``, fixed header, no credential) of recorded calls for replay."""

from __future__ import annotations

import gzip
import json
import logging
import os
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator

from ..data.atomic import atomic_path
from .prompts import extract_section
from .store import CacheFileError, CallStore, _validate_record

log = logging.getLogger(__name__)
REPLY_FIELDS = ("text", "tokens_in", "tokens_out", "is_llm")


def export_cassette(store: CallStore, path: str | os.PathLike[str], model: str | None = None) -> int:
    """Write the records of ``store`` (only ``model``'s when given) to a cassette; returns the count.
    A record :func:`read_cassette` would refuse is a :class:`CacheFileError` and nothing is written."""
    lines = []
    for record in store.iter_records():
        if model is not None and record["model"] != model:
            continue
        line = json.dumps(record, sort_keys=True, ensure_ascii=False)
        try:
            _validate_record(json.loads(line))
        except (ValueError, TypeError, OverflowError, RecursionError) as err:
            raise CacheFileError(f"call store {store.path}: row {store.row_number(record['key'])} (key "
                                 f"{str(record['key'])[:12]}...) cannot be exported: {err}; delete or repair "
                                 f"that row, {path} not written") from None
        lines.append(line + "\n")
    with atomic_path(path) as tmp, open(tmp, "wb") as handle:
        with gzip.GzipFile(filename="", mode="wb", fileobj=handle, mtime=0) as gz:  # a fixed header
            for line in lines:
                gz.write(line.encode("utf-8"))
        handle.flush()
        os.fsync(handle.fileno())
    return len(lines)


def read_cassette(path: str | os.PathLike[str]) -> Iterator[dict]:
    """Validated records of one cassette, in file order (repeated keys included)."""
    return (record for _, record in _numbered_records(path))


def _numbered_records(path: str | os.PathLike[str]) -> Iterator[tuple[int, dict]]:
    """``(line number, validated record)`` of a cassette; a bad file or record: :class:`CacheFileError`."""
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
                yield number, clean
    except (gzip.BadGzipFile, zlib.error) as err:
        raise CacheFileError(f"cassette {path} is not a readable gzip file ({err}); restore or re-export "
                             "it") from None
    except EOFError:
        raise CacheFileError(f"cassette {path} is truncated after line {number}; restore or re-export "
                             "it") from None
    except UnicodeDecodeError as err:
        raise CacheFileError(f"cassette {path}: line {number + 1} is not UTF-8 text ({err.reason}); restore "
                             "or re-export it") from None


def _same_reply(a: dict, b: dict) -> bool:
    return all(a[name] == b[name] for name in REPLY_FIELDS)


def unique_records(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[dict]:
    """Validated records of cassettes, one per key; a key with two replies is a :class:`CacheFileError`."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    first: dict[str, tuple[dict, str]] = {}
    collapsed = 0
    for path in paths:
        for number, record in _numbered_records(path):
            where = f"{path} line {number}"
            seen = first.get(record["key"])
            if seen is None:
                first[record["key"]] = (record, where)
            elif _same_reply(seen[0], record):
                collapsed += 1
            else:
                raise CacheFileError(f"cassette {path}: key {record['key'][:12]}... is recorded twice with "
                                     f"different replies ({seen[1]} and line {number}); keep one of them "
                                     "(re-export from the store)")
    if collapsed:
        log.warning("%s: %d record(s) repeat a key with the same reply; each is used once",
                    ", ".join(map(str, paths)), collapsed)
    return [record for record, _ in first.values()]


def import_cassette(path: str | os.PathLike[str], store: CallStore | str | os.PathLike[str]) -> int:
    """Add a cassette's records to ``store`` (none if a reply differs from the store's); returns how many. A
    store given by path is opened (made) once the whole cassette has been read."""
    records = unique_records(path)
    store = store if isinstance(store, CallStore) else CallStore(store)
    for record in records:
        held = store.get_record(record["key"])
        if held is not None and not _same_reply(held, record):
            raise CacheFileError(f"cassette {path}: key {record['key'][:12]}... has another reply than the "
                                 f"one call store {store.path} holds; nothing imported (export the store, or "
                                 "import into another one)")
    return sum(1 for record in records if store.put_record(record))


def cassette_info(path: str | os.PathLike[str]) -> dict:
    """Records (one per key) per model, prompt version and run, queries per version, repeated keys."""
    records = unique_records(path)
    by = Counter((r["backend"], r["model"], r["prompt_version"], r["run"], r["temperature"]) for r in records)
    queries: dict[str, set[str]] = {}
    for r in records:
        query = extract_section(r["prompt"], "query")
        queries.setdefault(r["prompt_version"], set()).add(query or r["prompt"])
    return {
        "cassette": str(path), "records": len(records),
        "repeated_keys": sum(1 for _ in read_cassette(path)) - len(records),
        "groups": [{"backend": b, "model": m, "prompt_version": v, "run": run, "temperature": t, "records": n}
                   for (b, m, v, run, t), n in sorted(by.items())],
        "distinct_queries_by_prompt_version": {v: len(q) for v, q in sorted(queries.items())},
        "tokens_in": sum(int(r["tokens_in"]) for r in records),
        "tokens_out": sum(int(r["tokens_out"]) for r in records),
        "recorded_latency_s": round(sum(float(r["latency_s"]) for r in records), 1),
    }
