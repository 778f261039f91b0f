"""Record PtR stubs (no plans) of a live backend for replay, resumably, in an order useful when interrupted.

Queries go in rounds of ``chunk`` per set (sets interleaved, every requested run within a round), so a
recording stopped anywhere covers the first N queries of every set in every run; every call goes through the
durable call cache, so a rerun resumes. Given a cassette, it is merged with the cache every ``export_every``
new calls and at the end, and checked to keep every record it held. Entry points: ``python -m toolbench_lib
record stubs`` (any sets and runs, no cassette) and ``python -m toolbench_lib.study.stub_recording`` (run 0,
one query per set per round, merged into the cassette; default sets: the validation sets).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from ..data.dataset import load_dataset
from ..llm import factory
from ..llm.base import LLMBackend
from ..llm.cassettes import export_cassette, import_cassette, read_cassette
from ..llm.parsing import parse_stubs_counted, stub_text
from ..llm.prompts import STUB_PROMPT, extract_section
from ..llm.store import CallStore
from ..retrieval.setup import select_queries
from .result import StudySettings, generate_stubs
from .validation import OneLineParser, data_dir, int_at_least, output_file, report, subset_name

log = logging.getLogger(__name__)

VALIDATION_SETS = ("G1_category", "G1_tool", "G2_instruction", "G2_category", "G3_instruction")


def recording_order(queries: pd.DataFrame, chunk: int) -> list[pd.DataFrame]:
    """Rounds of at most ``chunk`` queries of each set, sets interleaved, in query order."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    q = queries.assign(_pos=queries.groupby("subset", sort=False).cumcount())
    q = q.assign(_round=q["_pos"] // chunk)
    return [g.drop(columns=["_pos", "_round"]) for _, g in q.groupby("_round", sort=True)]


def _stub_records(cassette: str | Path, model: str | None = None):
    """``(record, query text)`` of the cassette's stub calls (``model``'s when given), if any."""
    path = Path(cassette)
    for r in read_cassette(path) if path.exists() else ():
        if r["prompt_version"] == STUB_PROMPT.version and (model is None or r["model"] == model):
            q = extract_section(r["prompt"], "query")
            if q is not None:
                yield r, q


def recorded_stub_runs(cassette: str | Path, model: str | None = None) -> dict[tuple[int, float], set[str]]:
    """Per ``(run, temperature)``: the query texts whose stub call (this prompt version) the cassette has."""
    out: dict[tuple[int, float], set[str]] = {}
    for r, q in _stub_records(cassette, model):
        out.setdefault((int(r["run"]), float(r["temperature"])), set()).add(q)
    return out


def recorded_stub_queries(cassette: str | Path, model: str | None = None) -> set[str]:
    """Query texts whose stub call (this prompt version, run 0 at temperature 0) the cassette holds."""
    return recorded_stub_runs(cassette, model).get((0, 0.0), set())


def recorded_search_texts(cassette: str | Path, queries: Sequence[str]) -> list[str]:
    """Every text a study replayed from ``cassette`` searches by meaning: ``queries`` and their stubs."""
    texts = dict.fromkeys(queries)
    for r, q in _stub_records(cassette):
        texts.update(dict.fromkeys(stub_text(s) for s in parse_stubs_counted(r["text"], q)[0]))
    return list(texts)


def recorded_limit(cassette: str | Path, queries: pd.DataFrame, sets: Sequence[str],
                   runs: Sequence[tuple[int, float]] = ((0, 0.0),)) -> int:
    """The largest N whose first N queries of every set have recorded stubs in every one of ``runs``."""
    recorded = recorded_stub_runs(cassette)
    have = set.intersection(*(recorded.get((r, float(t)), set()) for r, t in runs)) if runs else set()
    texts = [queries.loc[queries["subset"] == s, "query"].tolist() for s in sets]
    n = 0
    while any(n < len(q) for q in texts) and all(n >= len(q) or q[n] in have for q in texts):
        n += 1
    return n


def merge_export(store: CallStore, cassette: str | Path, model: str | None) -> tuple[int, int]:
    """Merge the cassette into the cache, write ``model``'s records back if none is lost; (before, after)."""
    path = Path(cassette)
    before = {r["key"] for r in read_cassette(path)} if path.exists() else set()
    if path.exists():
        import_cassette(path, store)
    tmp = path.with_name(f".{path.name}.merge-{os.getpid()}.jsonl.gz")
    try:
        n = export_cassette(store, tmp, model=model)
        lost = before - {r["key"] for r in read_cassette(tmp)}
        if lost:
            raise RuntimeError(f"cassette {path} would lose {len(lost)} of its {len(before)} records in the "
                               f"export (model filter {model!r}); left unchanged")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    return len(before), n


def record_stubs(llm: LLMBackend, queries: pd.DataFrame, runs: Sequence[int] = (0,), chunk: int = 25,
                 store: CallStore | None = None, cassette: str | Path | None = None, export_every: int = 20,
                 echo: Callable[[str], object] = log.info) -> dict:
    """Generate (and so record) the stubs of ``runs`` for ``queries`` in :func:`recording_order`."""
    if cassette is not None and store is None:
        raise ValueError("recording into a cassette needs the call store behind the backend")
    settings, t0, made, done, exported_at, after = StudySettings(), time.time(), 0, 0, 0, None
    for i, part in enumerate(recording_order(queries, chunk)):
        for run in runs:
            _, calls = generate_stubs(llm, part, run, settings.temperature_of(run), progress=False)
            made += len(calls)
        done += len(part)
        misses = getattr(llm, "misses", 0)
        sets = ", ".join(f"{s} {n}" for s, n in part["subset"].value_counts(sort=False).items())
        if cassette is not None and misses - exported_at >= export_every:
            before, after = merge_export(store, cassette, llm.model)
            exported_at = misses
            echo(f"{done}/{len(queries)} queries, {misses} new calls, cassette {before} -> {after} records, "
                 f"{time.time() - t0:.0f} s")
        else:
            log.info("round %d, runs %s: %d queries (%s)", i, ",".join(map(str, runs)), len(part), sets)
    new = getattr(llm, "misses", 0)
    if cassette is not None:
        before, after = merge_export(store, cassette, llm.model)
        echo(f"done: {done} queries, {new} new calls, cassette {before} -> {after} records")
    return {"calls": made, "queries": done, "new_calls": new, "cassette_records": after}


def build_parser() -> argparse.ArgumentParser:
    p = OneLineParser(prog="python -m toolbench_lib.study.stub_recording", description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--subset", action="append", default=None, type=subset_name,
                   help=f"query set (repeatable; default the validation sets {', '.join(VALIDATION_SETS)})")
    p.add_argument("--backend", default="local", choices=("local", "gemini"), help="live backend")
    p.add_argument("--cassette", default=None, type=output_file,
                   help="cassette to merge into (default: the committed one)")
    p.add_argument("--store", default=None, type=output_file,
                   help="call cache (default data/cache/llm/calls.sqlite)")
    p.add_argument("--limit", type=int_at_least(1), default=None, help="first N queries of each set")
    p.add_argument("--export-every", type=int_at_least(1), default=20,
                   help="merge into the cassette every N new calls")
    p.add_argument("--data-dir", default=None, type=data_dir)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    try:  # a bad set, data folder, key or cassette: one line, nothing recorded
        wanted = list(args.subset or VALIDATION_SETS)
        queries = select_queries(load_dataset(args.data_dir), wanted, args.limit)
        sets = list(dict.fromkeys(queries["subset"]))
        cassette = Path(args.cassette) if args.cassette else factory.DEFAULT_CASSETTE
        store_path = Path(args.store) if args.store else factory.DEFAULT_STORE
        llm = factory.make_backend(args.backend, store=store_path)
        if cassette.exists():
            added = import_cassette(cassette, llm.store)
            print(f"imported {added} records of {cassette} into {store_path}", flush=True)
        have = recorded_stub_queries(cassette, llm.model)
        print(f"{len(queries)} queries of {', '.join(sets)}; {queries['query'].isin(have).sum()} already in "
              "the cassette", flush=True)
        record_stubs(llm, queries, runs=(0,), chunk=1, store=llm.store, cassette=cassette,
                     export_every=args.export_every,
                     echo=lambda m: print(time.strftime("%H:%M:%S"), m, flush=True))
    except Exception as exc:  # noqa: BLE001 - one line, never a traceback
        return report(exc)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
