"""Record PtR stubs (no plans) for query sets with a live backend, resumably, into a cassette.

``python -m toolbench_lib.pipeline.stub_recording --subset G1_category --subset G1_tool ...`` asks the backend
(default ``local``, behind the durable call cache) for the stubs of every query, in an order that
interleaves the sets (the first query of every set, then the second, ...), so that an interrupted
recording covers the first N queries of every set. Every call is cached when it returns, so a rerun
resumes where the last one stopped. Every ``--export-every`` new calls, and at the end, the cassette
is merged with the cache: its own records are first imported into the cache, then the cache (one model)
is written back, and the cassette is checked to still hold every record it held before.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from ..llm.cassettes import export_cassette, import_cassette, prompt_query, read_cassette
from ..llm.prompts import STUB_PROMPT
from ..llm.store import CallStore

log = logging.getLogger(__name__)

VALIDATION_SETS = ("G1_category", "G1_tool", "G2_instruction", "G2_category", "G3_instruction")


def interleave(frames: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Rows of several frames, position-major: every frame's first row, then every second row, ..."""
    parts = [f.reset_index(drop=True).assign(_pos=range(len(f)), _set=i) for i, f in enumerate(frames)]
    if not parts:
        return pd.DataFrame()
    out = pd.concat(parts, ignore_index=True).sort_values(["_pos", "_set"], kind="stable")
    return out.drop(columns=["_pos", "_set"]).reset_index(drop=True)


def recorded_stub_queries(cassette: str | Path, model: str | None = None, run: int = 0,
                          temperature: float = 0.0) -> set[str]:
    """Query texts whose stub call (this prompt version, run and temperature) the cassette holds."""
    return recorded_stub_runs(cassette, model).get((run, float(temperature)), set())


def recorded_stub_runs(cassette: str | Path, model: str | None = None) -> dict[tuple[int, float], set[str]]:
    """Per ``(run, temperature)``: the query texts whose stub call (this prompt version) the cassette has."""
    path = Path(cassette)
    out: dict[tuple[int, float], set[str]] = {}
    if not path.exists():
        return out
    for r in read_cassette(path):
        if r["prompt_version"] == STUB_PROMPT.version and (model is None or r["model"] == model):
            q = prompt_query(r["prompt"])
            if q is not None:
                out.setdefault((int(r["run"]), float(r["temperature"])), set()).add(q)
    return out


def recorded_limit(cassette: str | Path, queries: pd.DataFrame, sets: Sequence[str],
                   runs: Sequence[tuple[int, float]] = ((0, 0.0),)) -> int:
    """The largest N such that the first N queries of every set (all of a smaller set) have recorded stubs
    in every ``(run, temperature)`` of ``runs``; 0 when the cassette is missing."""
    recorded = recorded_stub_runs(cassette)
    have = set.intersection(*(recorded.get((r, float(t)), set()) for r, t in runs)) if runs else set()
    texts = [queries.loc[queries["subset"] == s, "query"].tolist() for s in sets]
    n = 0
    while any(n < len(q) for q in texts) and all(n >= len(q) or q[n] in have for q in texts):
        n += 1
    return n


def merge_export(store: CallStore, cassette: str | Path, model: str | None) -> tuple[int, int]:
    """Merge the cassette with the cache and write it back; ``(records before, records after)``.

    The merged cassette is written beside the old one and replaces it only if it keeps every record the
    old one held; otherwise ``RuntimeError`` and the old cassette stays as it was.
    """
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


def record_stubs(llm, queries: pd.DataFrame, store: CallStore, cassette: str | Path, export_every: int = 20,
                 chunk: int = 5, echo=print) -> dict:
    """Stub calls for every query (run 0, temperature 0), exporting to ``cassette`` as they accrue."""
    from .study import generate_stubs

    misses_at_export = 0
    t0 = time.time()
    done = 0
    for start in range(0, len(queries), chunk):
        part = queries.iloc[start:start + chunk]
        generate_stubs(llm, part, run=0, temperature=0.0, progress=False)
        done += len(part)
        misses = getattr(llm, "misses", 0)
        if misses - misses_at_export >= export_every:
            before, after = merge_export(store, cassette, llm.model)
            misses_at_export = misses
            echo(f"{done}/{len(queries)} queries, {misses} new calls, cassette {before} -> {after} records, "
                 f"{time.time() - t0:.0f} s")
    before, after = merge_export(store, cassette, llm.model)
    echo(f"done: {done} queries, {getattr(llm, 'misses', 0)} new calls, cassette {before} -> {after} records")
    return {"queries": done, "new_calls": getattr(llm, "misses", 0), "cassette_records": after}


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m toolbench_lib.pipeline.stub_recording", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--subset", action="append", default=None,
                   help=f"query set (repeatable; default the validation sets {', '.join(VALIDATION_SETS)})")
    p.add_argument("--backend", default="local", help="live backend (local or gemini)")
    p.add_argument("--cassette", default=None, help="cassette to merge into (default: the committed one)")
    p.add_argument("--store", default=None, help="call cache (default data/cache/llm/calls.sqlite)")
    p.add_argument("--limit", type=int, default=None, help="first N queries of each set")
    p.add_argument("--export-every", type=int, default=20, help="merge into the cassette every N new calls")
    p.add_argument("--data-dir", default=None)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    from ..data.dataset import load_dataset
    from ..data.queries import query_keys, resolve_subset
    from ..llm.factory import DEFAULT_CASSETTE, DEFAULT_STORE, make_backend

    sets = [resolve_subset(s) for s in (args.subset or VALIDATION_SETS)]
    ds = load_dataset(args.data_dir)
    queries = interleave([ds.subset_queries(s, args.limit) for s in sets])
    queries.insert(0, "qkey", query_keys(queries))
    cassette = Path(args.cassette) if args.cassette else DEFAULT_CASSETTE
    store_path = Path(args.store) if args.store else DEFAULT_STORE
    llm = make_backend(args.backend, store=store_path)
    store = llm.store
    if cassette.exists():
        added = import_cassette(cassette, store)
        print(f"imported {added} records of {cassette} into {store_path}", flush=True)
    have = recorded_stub_queries(cassette, llm.model)
    print(f"{len(queries)} queries of {', '.join(sets)}; {queries['query'].isin(have).sum()} already in the "
          f"cassette", flush=True)
    record_stubs(llm, queries, store, cassette, args.export_every,
                 echo=lambda m: print(time.strftime("%H:%M:%S"), m, flush=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
