"""Command line: ``python -m toolbench_lib {data summary, index build, evaluate}``."""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time

from .paths import DataNotFoundError
from .queries import DEFAULT_GT, DEFAULT_SUBSETS, GT_DEFINITIONS, UnknownSubsetError, resolve_subset

log = logging.getLogger("toolbench_lib")


def _common() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(add_help=False)
    p.add_argument("--data-dir", default=None,
                   help="ToolBench data folder (else TOOLBENCH_DATA, data/raw/toolbench, "
                        "../shared/toolbench)")
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    return p


def build_parser() -> argparse.ArgumentParser:
    common = _common()
    parser = argparse.ArgumentParser(prog="python -m toolbench_lib", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    data = sub.add_parser("data", help="registry and query sets")
    data_sub = data.add_subparsers(dest="action", required=True)
    summ = data_sub.add_parser("summary", parents=[common], help="counts of registry, queries, ground truth")
    summ.add_argument("--json", action="store_true", help="print one JSON object")
    summ.add_argument("--rebuild", action="store_true", help="rebuild the processed parquet cache")

    index = sub.add_parser("index", help="embedding index")
    index_sub = index.add_subparsers(dest="action", required=True)
    build = index_sub.add_parser("build", parents=[common], help="embed the registry (cached) and index it")
    build.add_argument("--model", default=None, help="sentence-transformers model name or local folder")
    build.add_argument("--max-apis", type=int, default=None, help="index a sub-registry of N APIs")
    build.add_argument("--seed", type=int, default=0, help="sub-registry sampling seed")
    build.add_argument("--no-keep-gt", action="store_true",
                       help="sample the sub-registry without keeping the default subsets' ground-truth APIs")

    ev = sub.add_parser("evaluate", parents=[common], help="evaluate retrieval methods")
    ev.add_argument("--method", default="rtp", help="rtp")
    ev.add_argument("--subset", action="append", default=None,
                    help=f"query set or alias ({', '.join(DEFAULT_SUBSETS)}); repeatable; default all three")
    ev.add_argument("--k", type=int, default=5)
    ev.add_argument("--gt", choices=GT_DEFINITIONS, default=DEFAULT_GT, help="ground-truth definition")
    ev.add_argument("--max-apis", type=int, default=None, help="evaluate on a sub-registry of N APIs")
    ev.add_argument("--limit", type=int, default=None, help="first N queries of each set")
    ev.add_argument("--seed", type=int, default=0, help="sub-registry sampling seed")
    ev.add_argument("--model", default=None, help="embedding model (default thenlper/gte-base)")
    ev.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def cmd_data_summary(args: argparse.Namespace) -> int:
    from .dataset import load_dataset, summary

    s = summary(load_dataset(args.data_dir, rebuild=args.rebuild))
    if args.json:
        print(json.dumps(s, indent=2))
    else:
        print(f"{s['apis']} APIs, {s['tools']} tools, {s['categories']} categories ({s['data_dir']})")
        for name, n in s["subsets"].items():
            print(f"  {name:26s} {n:4d} queries")
        print(f"ground-truth pairs: {s['gt_pairs']} candidates, {s['gt_pairs_relevant']} relevant, "
              f"{s['unresolved_gt_pairs']} unresolved")
    return 0


def cmd_index_build(args: argparse.Namespace) -> int:
    from .dataset import load_dataset
    from .embedding import load_embedder
    from .index import build_index, index_path
    from .queries import DEFAULT_SUBSETS
    from .subregistry import sample_subregistry

    ds = load_dataset(args.data_dir)
    emb = load_embedder(args.model)
    rows = None
    if args.max_apis:
        q = ds.queries[ds.queries["subset"].isin(list(DEFAULT_SUBSETS.values()))]
        keep = set() if args.no_keep_gt else {a for ids in q["candidates"] for a in ids}
        rows = sample_subregistry(ds.registry, args.max_apis, args.seed, keep)
    t0 = time.time()
    index = build_index(ds, emb, rows)
    path = index_path(ds, emb, len(index))
    index.save(path)
    print(json.dumps({"model": emb.name, "model_requested": emb.fallback_from or emb.name,
                      "apis": len(index), "dim": index.dim, "index": str(path),
                      "seconds": round(time.time() - t0, 1)}))
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from .dataset import load_dataset
    from .embedding import load_embedder
    from .evaluate import evaluate_rtp

    subsets = args.subset or list(DEFAULT_SUBSETS)
    for s in subsets:
        resolve_subset(s)
    methods = [m.strip() for m in args.method.split(",") if m.strip()]
    if methods != ["rtp"]:
        raise SystemExit(f"unknown method(s) {args.method!r}; available: rtp")
    ds = load_dataset(args.data_dir)
    emb = load_embedder(args.model)
    result = evaluate_rtp(ds, emb, subsets, args.k, args.gt, args.max_apis, args.limit, args.seed)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"{result['method']} k={result['k']} gt={result['gt']} model={result['model']} "
              f"registry={result['registry_size']}")
        for name, r in result["subsets"].items():
            print(f"  {name:4s} {r['subset']:26s} n={r['n_queries']:4d} "
                  f"recall={r['recall']:.3f} precision={r['precision']:.3f}")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if getattr(args, "verbose", False) else logging.INFO,
                        format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    for noisy in ("faiss.loader", "httpx", "sentence_transformers.base.model"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    try:
        if args.command == "data":
            return cmd_data_summary(args)
        if args.command == "index":
            return cmd_index_build(args)
        return cmd_evaluate(args)
    except (DataNotFoundError, UnknownSubsetError, FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
