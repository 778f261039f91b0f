"""Command line: ``python -m toolbench_lib {data summary, index build, evaluate}``."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path

from . import config
from .bench.command import add_parser as add_bench_parser
from .bench.command import cmd_bench
from .data.atomic import clean_stale_temps
from .data.dataset import load_dataset, summary
from .data.paths import CACHE_DIR, PROCESSED_DIR, DataNotFoundError, find_data_dir
from .data.queries import (
    DEFAULT_GT,
    DEFAULT_SUBSETS,
    GT_DEFINITIONS,
    UnknownSubsetError,
    external_sets,
    query_file_sets,
    resolve_subset,
    user_set_files,
)
from .eval.export import MANIFEST, export_trec
from .llm import factory
from .llm.base import LLMError
from .llm.cassettes import cassette_info, export_cassette, import_cassette
from .llm.factory import BACKENDS, DEFAULT_CASSETTE, DEFAULT_STORE, default_workers
from .llm.store import CallStore
from .report.reproduce import add_parser as add_reproduce_parser
from .report.reproduce import cmd_reproduce
from .retrieval.embedding import embed_cached, load_embedder, torch_threads
from .retrieval.families import FAMILIES
from .retrieval.index import build_index, search_threads
from .retrieval.methods import load_methods
from .retrieval.retrievers import ARCHITECTURES, method_name
from .retrieval.setup import prepare, select_queries
from .retrieval.subregistry import sample_subregistry
from .study.experiment import stored_study_dir
from .study.result import StudySettings, run_study
from .study.stored import StudyResult
from .study.stub_recording import record_stubs, recorded_search_texts
from .study.validation import (
    MAX_DEPTH,
    OneLineParser,
    check_dataset,
    check_max_apis,
    check_run_name,
    check_subsets,
    data_dir,
    existing_file,
    int_at_least,
    int_in_range,
    output_dir,
    output_file,
    report,
    run_indices,
    run_name,
    subset_name,
    temperature,
)

log = logging.getLogger("toolbench_lib")


def retriever_families(text: str) -> list[str]:
    """``--retriever``: comma-separated retriever families, each checked (one line naming the known ones)."""
    names = list(dict.fromkeys(t.strip() for t in text.split(",") if t.strip()))
    bad = [n for n in names if n not in FAMILIES]
    if bad or not names:
        raise argparse.ArgumentTypeError(f"unknown retriever {', '.join(bad) or repr(text)}; choose from "
                                         f"{', '.join(FAMILIES)} (comma-separated)")
    return names


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)  # the options every data command takes
    common.add_argument("--data-dir", default=None, type=data_dir,
                        help="ToolBench data folder (else TOOLBENCH_DATA, data/raw/toolbench, "
                             "../shared/toolbench)")
    common.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    parser = OneLineParser(prog="python -m toolbench_lib", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    data = sub.add_parser("data", help="registry and query sets")
    data_sub = data.add_subparsers(dest="action", required=True)
    summ = data_sub.add_parser("summary", parents=[common], help="counts of registry, queries, ground truth")
    summ.add_argument("--json", action="store_true", help="print one JSON object")
    summ.add_argument("--rebuild", action="store_true", help="rebuild the processed parquet cache")
    summ.add_argument("--queries", action="append", default=None, type=existing_file, metavar="FILE",
                      help="a ToolBench-format query file from anywhere (a set named after its stem); "
                           "repeatable")

    index = sub.add_parser("index", help="embedding index")
    index_sub = index.add_subparsers(dest="action", required=True)
    build = index_sub.add_parser("build", parents=[common], help="embed the registry (cached) and index it")
    build.add_argument("--model", default=None, help="sentence-transformers model name or local folder")
    build.add_argument("--max-apis", type=int_at_least(1), default=None, help="a sub-registry of N APIs")
    build.add_argument("--seed", type=int_at_least(0), default=config.SEED, help="sub-registry sampling seed")
    build.add_argument("--no-keep-gt", action="store_true",
                       help="sample the sub-registry without keeping the default subsets' ground-truth APIs")
    build.add_argument("--with-recorded", action="store_true",
                       help="also embed every query and every recorded stub of the default cassette (what a "
                            "replayed `make run` searches), in the same estimated run as the registry")

    ev = sub.add_parser("evaluate", parents=[common], help="evaluate retrieval methods")
    ev.add_argument("--method", default="rtp",
                    help="comma-separated methods on the same runs: rtp, ptr, or a fused method of "
                         "toolbench_lib.retrieval.fused (rr, rrf, combsum2-mm, wsum-cv, route-cv, fuse4...)")
    ev.add_argument("--retriever", default="dense", type=retriever_families,
                    help="comma-separated retriever families each architecture (rtp, ptr) runs with: "
                         "dense (cosine, the default), bm25, hybrid (min-max CombSUM of both), hybrid-rrf; "
                         "rtp with bm25 is reported as rtp@bm25")
    ev.add_argument("--backend", choices=BACKENDS, default=None,
                    help="LLM backend for stubs, plans and judge (default: replay of the committed cassette "
                         "when PtR is evaluated; RtP alone is retrieval only unless a backend is given)")
    ev.add_argument("--cassette", default=None, type=existing_file, help="cassette file for --backend replay")
    ev.add_argument("--llm-model", default=None,
                    help="backend model (gemini model id, GGUF path, replay filter)")
    ev.add_argument("--runs", type=int_at_least(1), default=config.RUNS,
                    help="independent runs (LLM samples)")
    ev.add_argument("--temperature", type=temperature(), default=config.TEMPERATURE,
                    help="temperature of run 0")
    ev.add_argument("--run-temperature", type=temperature(True), default=config.RUN_TEMPERATURE,
                    help="temperature of runs 1.. (seed = run); negative: same as --temperature")
    ev.add_argument("--plan-limit", type=int_at_least(0), default=None,
                    help=f"plan and judge only the first N queries of each set (0: retrieval only; default "
                         f"{config.PLAN_LIMIT}, as `make run` and the recorded plans)")
    ev.add_argument("--plan-runs", type=int_at_least(1), default=None,
                    help=f"plan and judge the first N runs (default {config.PLAN_RUNS}, as `make run`)")
    ev.add_argument("--no-judge", action="store_true", help="skip the pass-rate judge")
    ev.add_argument("--workers", type=int_at_least(1), default=None,
                    help="concurrent LLM calls (default 16 for gemini, else 1)")
    ev.add_argument("--depth", type=int_in_range(1, MAX_DEPTH), default=None,
                    help=f"hits kept per searched text (>= k, at most {MAX_DEPTH}; default "
                         f"{config.DEPTH}, or --max-apis when that is smaller)")
    ev.add_argument("--save", default=None, type=output_dir, help="folder for the run's tables (parquet)")
    ev.add_argument("--subset", action="append", default=None, type=subset_name,
                    help=f"query set or alias ({', '.join(DEFAULT_SUBSETS)}, or the name of a "
                         "test_instruction/<name>.json); repeatable; default all three (none with --queries)")
    ev.add_argument("--queries", action="append", default=None, type=existing_file, metavar="FILE",
                    help="evaluate a ToolBench-format query file from anywhere (a set named after its stem, "
                         "its api_list docs join the registry); repeatable")
    ev.add_argument("--k", type=int_in_range(1, MAX_DEPTH), default=config.K,
                    help=f"APIs per query scored (1 to {MAX_DEPTH}, and at most the registry's size)")
    ev.add_argument("--gt", choices=GT_DEFINITIONS, default=DEFAULT_GT, help="ground-truth definition")
    ev.add_argument("--max-apis", type=int_at_least(1), default=None, help="a sub-registry of N APIs")
    ev.add_argument("--limit", type=int_at_least(1), default=None, help="first N queries of each set")
    ev.add_argument("--seed", type=int_at_least(0), default=config.SEED, help="sub-registry sampling seed")
    ev.add_argument("--model", default=None,
                    help=f"embedding model (default {config.EMBEDDER}; the paper's: {config.PAPER_EMBEDDER})")
    ev.add_argument("--json", action="store_true", help="print one JSON object")
    cas = sub.add_parser("cassette", help="export, import and describe recorded LLM calls")
    cas_sub = cas.add_subparsers(dest="action", required=True)
    exp = cas_sub.add_parser("export", help="write the call cache (or part of it) to a jsonl.gz cassette")
    exp.add_argument("--store", default=None, type=existing_file,
                     help="call cache (default data/cache/llm/calls.sqlite)")
    exp.add_argument("--out", required=True, type=output_file, help="cassette path (.jsonl.gz)")
    exp.add_argument("--llm-model", default=None, help="only calls of this model")
    imp = cas_sub.add_parser("import", help="load a cassette into the call cache")
    imp.add_argument("cassette", type=existing_file)
    imp.add_argument("--store", default=None, type=output_file)
    info = cas_sub.add_parser("info", help="what a cassette covers")
    info.add_argument("cassette", type=existing_file)
    rec = sub.add_parser("record", help="record a live backend's replies for replay")
    rec_sub = rec.add_subparsers(dest="action", required=True)
    rst = rec_sub.add_parser("stubs", parents=[common],
                             help="PtR stubs only (no registry needed), first N of every set and run first")
    rst.add_argument("--backend", choices=("local", "gemini"), default="local")
    rst.add_argument("--llm-model", default=None, help="backend model (gemini model id, GGUF path)")
    rst.add_argument("--subset", action="append", default=None, type=subset_name,
                     help="query set or alias; repeatable")
    rst.add_argument("--runs", default="0", type=run_indices, help="comma-separated run indices, e.g. 1,2,3")
    rst.add_argument("--chunk", type=int_at_least(1), default=25, help="queries per set per round")
    rst.add_argument("--limit", type=int_at_least(1), default=None, help="first N queries of each set")
    export = sub.add_parser("export", help="a stored study's rankings and ground truth for other tools")
    export_sub = export.add_subparsers(dest="action", required=True)
    trec = export_sub.add_parser("trec", parents=[common],
                                 help="TREC run files per subset, method and run, qrels per subset and "
                                      "ground truth (ranx, ir-measures, trec_eval)")
    trec.add_argument("--run-name", default="default", type=run_name,
                      help="the run of outputs/<run-name>/ (default: default)")
    trec.add_argument("--study", default=None,
                      help="the study key under outputs/<run-name>/runs/ (default: the run's own study)")
    trec.add_argument("--out", required=True, type=output_dir, help="folder for runs/, qrels/, manifest.json")
    trec.add_argument("--gt", action="append", choices=GT_DEFINITIONS, default=None,
                      help="ground-truth definition; repeatable (default: both)")
    add_reproduce_parser(sub, common)
    add_bench_parser(sub, common)
    return parser


def cmd_export(args: argparse.Namespace) -> int:
    """``export trec``: read the run's stored study, write its TREC files, print the manifest's summary."""
    folder = stored_study_dir(check_run_name(args.run_name), args.study)
    gts = list(dict.fromkeys(args.gt or GT_DEFINITIONS))  # a ground truth named twice is written once
    manifest = export_trec(StudyResult.load(folder), args.out, gts, source=str(folder))
    kinds = [f["kind"] for f in manifest["files"]]
    print(json.dumps({"study": str(folder), "out": str(Path(args.out)), "run_files": kinds.count("run"),
                      "qrels_files": kinds.count("qrels"), "manifest": str(Path(args.out) / MANIFEST)}))
    return 0


def cmd_record(args: argparse.Namespace) -> int:
    subsets = list(dict.fromkeys(args.subset or DEFAULT_SUBSETS))
    runs = [int(r) for r in args.runs.split(",") if r.strip()]
    llm = factory.make_backend(args.backend, model=args.llm_model)
    queries = select_queries(load_dataset(args.data_dir), subsets, args.limit)
    made = record_stubs(llm, queries, runs, args.chunk)["calls"]
    print(json.dumps({"calls": made, "new": getattr(llm, "misses", None),
                      "cached": getattr(llm, "hits", None)}))
    return 0


def cmd_cassette(args: argparse.Namespace) -> int:
    if args.action == "info":
        print(json.dumps(cassette_info(args.cassette), indent=2))
        return 0
    path = args.store or DEFAULT_STORE
    if args.action == "import":  # the store is made once the cassette is read: a damaged one leaves none
        print(json.dumps({"store": str(path), "added": import_cassette(args.cassette, path)}))
        return 0
    if not os.path.isfile(path):  # never an empty store made by a typo
        raise FileNotFoundError(f"call store {path} does not exist: nothing to export, {args.out} "
                                "not written")
    store = CallStore(path, read_only=True)
    if not any(args.llm_model is None or r["model"] == args.llm_model for r in store.iter_records()):
        which = f" of model {args.llm_model!r}" if args.llm_model else ""
        raise ValueError(f"call store {path} holds no call{which}: nothing to export, {args.out} not written")
    n = export_cassette(store, args.out, model=args.llm_model)
    print(json.dumps({"cassette": args.out, "records": n}))
    return 0


def cmd_data_summary(args: argparse.Namespace) -> int:
    s = summary(load_dataset(args.data_dir, rebuild=args.rebuild, query_files=args.queries or ()))
    if args.json:
        print(json.dumps(s, indent=2))
    else:
        print(f"{s['apis']} APIs, {s['tools']} tools, {s['categories']} categories ({s['data_dir']})")
        for name, n in s["subsets"].items():
            unresolved = s["unresolved_gt_pairs_by_subset"].get(name, 0)
            print(f"  {name:26s} {n:4d} queries" + (f", {unresolved} unresolved pairs" if unresolved else ""))
        print(f"ground-truth pairs: {s['gt_pairs']} candidates, {s['gt_pairs_relevant']} relevant, "
              f"{s['unresolved_gt_pairs']} unresolved")
    return 0


def cmd_index_build(args: argparse.Namespace) -> int:
    ds = load_dataset(args.data_dir)
    check_max_apis(args.max_apis, len(ds.registry))
    emb = load_embedder(args.model)
    rows = None
    if args.max_apis:
        q = ds.queries[ds.queries["subset"].isin(list(DEFAULT_SUBSETS.values()))]
        keep = set() if args.no_keep_gt else {a for ids in q["candidates"] for a in ids}
        rows = sample_subregistry(ds.registry, args.max_apis, args.seed, keep)
    t0 = time.time()
    index = build_index(ds, emb, rows)  # embeds what the cache lacks; the index itself lives in memory
    if args.with_recorded:  # the notebooks then only search: every text they embed is in the store
        embed_cached(emb, recorded_search_texts(DEFAULT_CASSETTE, ds.queries["query"].tolist()), "queries")
    print(json.dumps({"model": emb.name, "model_requested": emb.fallback_from or emb.name,
                      "apis": len(index), "dim": index.dim, "seconds": round(time.time() - t0, 1)}))
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    RETRIEVERS = load_methods()  # with every fused method (toolbench_lib.retrieval.fused)
    # --subset names (default: the three, none with --queries) and the --queries files' sets, checked
    # against the data folder's sets before anything is loaded
    root, files = find_data_dir(args.data_dir), args.queries or []
    users = [*user_set_files(root), *external_sets(root, files)]
    names = (args.subset or ([] if files else list(DEFAULT_SUBSETS))) + query_file_sets(root, files)
    subsets = check_subsets("--subset", names, users)
    methods = expand_methods([m.strip() for m in args.method.split(",") if m.strip()], args.retriever)
    unknown = [m for m in methods if m not in RETRIEVERS]
    if unknown or not methods:
        raise ValueError(f"--method: unknown method(s) in {args.method!r}; "
                         f"choose from {', '.join(RETRIEVERS)}")
    ds = load_dataset(args.data_dir, query_files=args.queries or ())
    args.depth = args.depth or min(config.DEPTH, args.max_apis or config.DEPTH)  # a default never refused
    check_dataset(ds, args.max_apis, subsets, args.k, args.depth)
    needs_llm = any(RETRIEVERS[m].uses_stubs for m in methods)
    backend = args.backend or ("replay" if needs_llm else None)
    # one pipeline: run_study (retrieval only when there is no backend), then the one summary
    from .analysis.summary import summary_json

    llm = factory.make_backend(backend, cassette=args.cassette, model=args.llm_model) if backend else None
    given = [f for f, v in (("--cassette", args.cassette), ("--llm-model", args.llm_model), ("--plan-limit",
                            args.plan_limit), ("--plan-runs", args.plan_runs)) if v is not None]
    if llm is None and given:  # said, not silently dropped
        print(f"note: {', '.join(given)} not used: {', '.join(methods)} search without an LLM (give "
              "--backend to plan and judge)", file=sys.stderr)
    setup = prepare(ds, load_embedder(args.model), subsets, args.max_apis, args.limit, args.seed)
    settings = StudySettings(
        k=args.k, depth=args.depth, runs=args.runs if llm is not None else 1, temperature=args.temperature,
        run_temperature=None if args.run_temperature < 0 else args.run_temperature,
        plan_limit=0 if llm is None else config.PLAN_LIMIT if args.plan_limit is None else args.plan_limit,
        plan_runs=args.plan_runs or config.PLAN_RUNS, methods=tuple(methods),
        workers=args.workers or default_workers(backend or ""), judge=not args.no_judge,
    )
    study = run_study(setup, llm, settings, progress=False)
    if args.save:
        study.save(Path(args.save))
    result = summary_json(study, subsets, args.k, args.gt)
    for name, counts in unresolved_report(setup.queries, subsets).items():
        result["subsets"][name]["unresolved_gt_pairs"] = counts
    result["method"] = ",".join(methods)
    if args.json:
        print(json.dumps(result, indent=2, default=str))
    else:
        _print_result(result)
    return 0


def expand_methods(methods: list[str], families: list[str]) -> list[str]:
    """Each architecture (``rtp``, ``ptr``) once per retriever family, other methods as given; no repeats."""
    out: list[str] = []
    for f in families:
        out += [method_name(m, f) if m in ARCHITECTURES else m for m in methods]
    return list(dict.fromkeys(out))


def unresolved_report(queries, subsets: list[str]) -> dict[str, dict[str, int]]:
    """Per evaluated set, the ground-truth pairs that resolved to no registry API, by definition (logged)."""
    out = {}
    for name in subsets:
        q = queries[queries["subset"] == resolve_subset(name, list(dict.fromkeys(queries["subset"])))]
        counts = {gt: int(q[f"unresolved_{gt}"].sum()) for gt in GT_DEFINITIONS}
        if any(counts.values()):
            log.warning("query set %s: %d of %d ground-truth pairs resolve to no registry API "
                        "(candidates %d, relevant %d)", name, sum(counts.values()),
                        int(q["n_candidate_pairs"].sum() + q["n_relevant_pairs"].sum()), *counts.values())
        empty = {gt: int(q[gt].map(len).eq(0).sum()) for gt in GT_DEFINITIONS}
        if any(empty.values()):
            log.warning("query set %s: queries with no ground truth: %d of %d under candidates, %d under "
                        "relevant; their recall and precision count as 0", name, empty["candidates"], len(q),
                        empty["relevant"])
        out[name] = counts
    return out


def _print_result(result: dict) -> None:
    print(f"{result['method']} k={result['k']} gt={result['gt']} model={result['model']} "
          f"registry={result['registry_size']}" + (f" backend={result['backend']} ({result['llm_model']})"
                                                   if "backend" in result else ""))
    names = [m for r in result["subsets"].values() for m in (r.get("methods") or [result["method"]])]
    width = max((len(m) for m in names), default=4)
    for name, r in result["subsets"].items():
        methods = r.get("methods") or {result["method"]: r}
        for m, v in methods.items():
            shown = ("judged_pass_rate", "objective_pass_rate", "ndcg", "mrr", "comp")  # None: no plans
            extra = "".join(f" {x}={v[x]:.3f}" for x in shown if v.get(x) is not None)
            print(f"  {name:4s} {r['subset']:26s} {m:{width}s} n={r['n_queries']:4d} "
                  f"recall={v['recall']:.3f} precision={v['precision']:.3f}{extra}")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)

    logging.basicConfig(level=logging.DEBUG if getattr(args, "verbose", False) else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    for noisy in ("faiss.loader", "httpx", "sentence_transformers.base.model", "bm25s"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        search_threads(), torch_threads()  # a bad thread count is one line now, not after the embedding
        clean_stale_temps(PROCESSED_DIR, CACHE_DIR)
        commands = {"data": cmd_data_summary, "index": cmd_index_build, "cassette": cmd_cassette,
                    "reproduce": cmd_reproduce, "bench": cmd_bench, "record": cmd_record,
                    "export": cmd_export}
        return commands.get(args.command, cmd_evaluate)(args)
    except (DataNotFoundError, UnknownSubsetError, FileNotFoundError, ValueError, LLMError) as exc:
        return report(exc)
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - whatever is left still ends as one line, never a traceback
        if getattr(args, "verbose", False):
            log.exception("failed")
        return report(exc)
