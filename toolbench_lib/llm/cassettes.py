"""Portable cassettes (``.jsonl.gz``) of recorded calls for offline replay, and what a cassette covers.

* :func:`export_cassette` / :func:`import_cassette` move records between call stores as a deterministic
  file (sorted by key, fixed gzip header); :func:`read_cassette` reads and validates one.
* :func:`cassette_info`: records per model, prompt version and run; :func:`prompt_query`.

Records hold the request and the reply only; no credential is ever part of a record.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..data.atomic import atomic_path
from .store import CacheFileError, CallStore, _validate_record

_QUERY = re.compile(r"<query>\n(.*?)\n</query>", re.DOTALL)


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


def prompt_query(prompt: str) -> str | None:
    """The query a templated prompt was rendered for (``None`` for a prompt without one)."""
    m = _QUERY.search(prompt)
    return m.group(1) if m else None


def cassette_info(path: str | os.PathLike[str]) -> dict:
    """Records per model, prompt version and run, and how many distinct queries each version covers."""
    by = Counter()
    queries: dict[str, set[str]] = {}
    tokens = Counter()
    for r in read_cassette(path):
        by[(r["backend"], r["model"], r["prompt_version"], r["run"], r["temperature"])] += 1
        queries.setdefault(r["prompt_version"], set()).add(prompt_query(r["prompt"]) or r["prompt"])
        tokens["in"] += int(r["tokens_in"])
        tokens["out"] += int(r["tokens_out"])
        tokens["latency_s"] += float(r["latency_s"])
    return {
        "cassette": str(path),
        "records": sum(by.values()),
        "groups": [{"backend": b, "model": m, "prompt_version": v, "run": run, "temperature": t, "records": n}
                   for (b, m, v, run, t), n in sorted(by.items())],
        "distinct_queries_by_prompt_version": {v: len(q) for v, q in sorted(queries.items())},
        "tokens_in": tokens["in"],
        "tokens_out": tokens["out"],
        "recorded_latency_s": round(tokens["latency_s"], 1),
    }
