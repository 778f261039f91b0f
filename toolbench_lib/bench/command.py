"""The ``bench`` subcommand: which lines run, at which sizes, and how the table is printed."""

from __future__ import annotations

import argparse
import functools
import json
import tempfile
from pathlib import Path

import numpy as np

from .. import config
from ..data.atomic import save_text
from ..data.dataset import load_dataset
from ..data.queries import DEFAULT_SUBSETS
from ..retrieval.embedding import Embedder, cached_complete, embed_cached, load_embedder
from ..retrieval.index import VectorIndex
from ..retrieval.onnx_int8 import load_int8_model
from ..study.experiment import stored_study_dir
from ..study.stored import StoredStudyError, StudyResult
from ..study.validation import int_at_least, output_file, run_name
from .core import BenchLine, format_table, machine_info, run_bench
from .embed import bench_embedding, bench_eta, fixed_sample
from .first_run import bench_first_run, bench_warm
from .gemini_fake import bench_gemini
from .llm_local import LockBusy, bench_local_llm
from .ltr import bench_ltr, synthetic_study
from .search import bench_bm25, bench_search

PARTS = ("embedding", "eta", "search", "bm25", "ltr", "warm", "local_llm", "gemini")
FULL = {"docs": 2000, "eta_docs": 3000, "gemini_calls": 96, "gemini_workers": 16, "llm_prompts": 4,
        "llm_tokens": 32}
QUICK = {"docs": 96, "eta_docs": 300, "gemini_calls": 24, "gemini_workers": 8, "llm_prompts": 2,
         "llm_tokens": 8}
# The warm line's study: `make run`'s configuration when the full registry is embedded, else a slice.
WARM_FULL = {"backend": "replay", "embedder": config.EMBEDDER, "runs": 1, "plan_limit": config.PLAN_LIMIT}
WARM_SLICE = {"backend": "rules", "embedder": config.EMBEDDER, "runs": 1, "plan_limit": 3, "max_apis": 400,
              "limit": 4, "subsets": ["G1", "G3"], "scale_sizes": [400], "scale_seeds": 1}


def add_parser(sub, common: argparse.ArgumentParser) -> None:
    b = sub.add_parser("bench", parents=[common], help="speed figures of this machine as side-by-side ratios")
    b.add_argument("target", nargs="?", choices=["first-run"], default=None,
                   help="first-run: time `make run` cold (new run folder and caches) and warm, per notebook")
    b.add_argument("--run-name", default=None, type=run_name,
                   help="first-run: the new run folder (default first-run-<time>)")
    b.add_argument("--workers", type=int_at_least(1), default=None,
                   help="first-run: notebooks at once (default: reproduce's)")
    b.add_argument("--quick", action="store_true", help="tiny sizes (seconds), for tests")
    b.add_argument("--only", default=",".join(PARTS), help=f"comma-separated parts of {', '.join(PARTS)}")
    b.add_argument("--model", default=config.EMBEDDER, help="embedding model")
    b.add_argument("--docs", type=int_at_least(1), default=None, help="registry documents per backend")
    b.add_argument("--llm-lock", default=None,
                   help="file to hold an exclusive flock on while the local model runs (shared with others)")
    b.add_argument("--llm-lock-timeout", type=float, default=120.0,
                   help="seconds to wait for --llm-lock before the local-model line is skipped")
    b.add_argument("--json", default=None, type=output_file,
                   help="also write the lines and the machine as JSON to this file")


def _parts(args: argparse.Namespace, sizes: dict) -> dict:
    ds = load_dataset(args.data_dir)
    fp32 = functools.cache(lambda: load_embedder(args.model, backend="fp32"))

    def embedding() -> BenchLine:
        f = fp32()
        model = load_int8_model(f)
        i8 = Embedder(f.name, model, f.fallback_from, "int8", model.variant)
        return bench_embedding(f, i8, fixed_sample(ds.texts, args.docs or sizes["docs"]))

    def search() -> BenchLine:
        if not args.quick and cached_complete(fp32(), ds.texts):
            vecs = embed_cached(fp32(), ds.texts, "registry", progress=False)
            qs = ds.queries[ds.queries["subset"].isin(list(DEFAULT_SUBSETS.values()))]["query"].tolist()
            return bench_search(vecs, embed_cached(fp32(), qs, "queries", progress=False),
                                source=f"{fp32().name} fp32 registry")
        rng = np.random.default_rng(0)
        n, q = (5000, 64) if args.quick else (len(ds.texts), 462)
        vecs = rng.standard_normal((n, 384), dtype=np.float32)
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        return bench_search(vecs, vecs[:q].copy(), source="random unit vectors (registry not embedded)")

    def bm25() -> BenchLine:
        qs = [q for s in DEFAULT_SUBSETS for q in ds.subset_queries(s)["query"]]
        texts, qs = (ds.texts[:3000], qs[:64]) if args.quick else (ds.texts, qs)
        index = VectorIndex(embed_cached(fp32(), texts, "registry", progress=False))
        def dense(q: list[str]):
            return index.search(embed_cached(fp32(), q, "queries", progress=False), 20)
        return bench_bm25(texts, qs, dense, source=f"{len(texts)} registry texts")

    def warm() -> BenchLine:
        full = not args.quick and cached_complete(fp32(), ds.texts)
        params = dict(WARM_FULL if full else WARM_SLICE, data_dir=args.data_dir)
        with tempfile.TemporaryDirectory(prefix="bench-warm-") as tmp:
            return bench_warm(Path(tmp), params, "make run (full registry, replay)" if full
                              else f"slice of {WARM_SLICE['max_apis']} APIs, rules backend")

    def local_llm() -> BenchLine:
        queries = ds.subset_queries("G1", sizes["llm_prompts"])["query"].tolist()
        return bench_local_llm(n_seq=sizes["llm_prompts"], max_new=sizes["llm_tokens"],
                               n_prompts=sizes["llm_prompts"], lock=args.llm_lock, queries=queries,
                               lock_timeout_s=args.llm_lock_timeout)

    return {"embedding": embedding,
            "eta": lambda: bench_eta(fp32(), ds.texts, args.docs or sizes["eta_docs"]),
            "search": search, "bm25": bm25, "ltr": lambda: bench_ltr(*_ltr_study(args.quick)), "warm": warm,
            "local_llm": local_llm,
            "gemini": lambda: bench_gemini(calls=sizes["gemini_calls"], workers=sizes["gemini_workers"])}


def _ltr_study(quick: bool):
    """The learned ranker's study: the stored retriever study of ``make run`` when there is one (not with
    ``--quick``), else a synthetic one of the same shape."""
    if not quick:
        try:
            folder = stored_study_dir("default-retrievers")
            return StudyResult.load(folder), str(folder)
        except (FileNotFoundError, StoredStudyError):
            pass
    n = 60 if quick else 462
    return synthetic_study(n), f"synthetic, {n} queries (no stored retriever study)"


def cmd_bench(args: argparse.Namespace) -> int:
    if args.target == "first-run":
        table, where = bench_first_run(args.run_name, args.workers)
        print(table)
        print(f"written: {where}")
        return 0
    only = [p.strip() for p in args.only.split(",") if p.strip()]
    unknown = [p for p in only if p not in PARTS]
    if unknown or not only:
        raise ValueError(f"--only: unknown part(s) {', '.join(unknown) or '(none given)'}; "
                         f"choose from {', '.join(PARTS)}")
    machine = machine_info()
    parts = _parts(args, QUICK if args.quick else FULL)
    lines = run_bench({name: parts[name] for name in only}, skip_on=(LockBusy,))
    print(format_table(lines, machine))
    if args.json:
        save_text(args.json, json.dumps({"machine": machine, "quick": args.quick,
                                         "lines": [ln.to_dict() for ln in lines]}, indent=2))
    return 0
