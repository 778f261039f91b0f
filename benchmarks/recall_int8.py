"""Does int8 qualify as the default embedding backend? RtP recall@5 on G1, G2, G3, both ground truths.

    python benchmarks/recall_int8.py [--model all-MiniLM-L6-v2] [--max-apis N] [--out FILE]

Embeds the registry with both backends (from the embedding cache when present: the int8 one takes a
while on a shared 2-core CPU), runs retrieval only (RtP, k=5) on the full registry and prints one JSON
object: per backend, set and ground truth, recall and precision, and the int8 - fp32 differences with
the rule (|difference| <= 0.005 everywhere).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from toolbench_lib.analysis.summary import summary_json
from toolbench_lib.data.dataset import load_dataset
from toolbench_lib.retrieval.embedding import load_embedder
from toolbench_lib.retrieval.setup import prepare
from toolbench_lib.study.result import StudySettings, run_study

SUBSETS = ["G1", "G2", "G3"]
GTS = ["candidates", "relevant"]
TOLERANCE = 0.005


def scores(ds, backend: str, model: str, max_apis: int | None) -> dict:
    emb = load_embedder(model, backend=backend)
    setup = prepare(ds, emb, SUBSETS, max_apis=max_apis)
    settings = StudySettings(k=5, runs=1, plan_limit=0, methods=("rtp",))
    result = run_study(setup, None, settings, progress=False)
    out = {"embedder_backend": emb.backend, "variant": emb.variant, "model": emb.name,
           "registry_size": len(setup.index), "data_fingerprint": ds.fingerprint}
    for gt in GTS:
        summary = summary_json(result, SUBSETS, 5, gt)
        for name in SUBSETS:
            r = summary["subsets"][name]
            m = r.get("methods", {}).get("rtp", r)
            out[f"{name}/{gt}"] = {"recall": m["recall"], "precision": m["precision"], "n": r["n_queries"]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="all-MiniLM-L6-v2")
    ap.add_argument("--max-apis", type=int, default=None)
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    ds = load_dataset()
    fp32, int8 = (scores(ds, b, args.model, args.max_apis) for b in ("fp32", "int8"))
    diff = {key: round(int8[key]["recall"] - fp32[key]["recall"], 4) for key in fp32 if "/" in key}
    report = {"k": 5, "tolerance": TOLERANCE, "fp32": fp32, "int8": int8, "recall_diff_int8_minus_fp32": diff,
              "int8_qualifies": all(abs(d) <= TOLERANCE for d in diff.values())}
    text = json.dumps(report, indent=2)
    print(text)
    if args.out:
        Path(args.out).write_text(text)


if __name__ == "__main__":
    main()
