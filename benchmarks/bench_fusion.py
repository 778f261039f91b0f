"""Fusion of RtP's and PtR's rankings: ``ranx.fuse`` against :func:`toolbench_lib.retrieval.fuse.combine`.

Both compute the same scores (``tests/test_fusion.py`` checks it); this measures their time side by side on
synthetic rankings of the study's shape (``--queries`` queries, 2 rankings of depth 20), the weighted-sum
form the cross-validated grids call once per weight. Run: ``python benchmarks/bench_fusion.py``.
"""

from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np
from ranx import Run, fuse

from toolbench_lib.retrieval.fuse import combine, top


def rankings(n_queries: int, depth: int = 20, seed: int = 0) -> dict[str, list[list[tuple[str, float]]]]:
    rng = np.random.default_rng(seed)
    docs = [f"api{i}" for i in range(5000)]
    def one() -> list[tuple[str, float]]:
        scores = np.sort(rng.uniform(0.2, 0.9, depth))[::-1]
        return [(d, float(s)) for d, s in zip(rng.choice(docs, depth, replace=False), scores, strict=True)]

    return {f"q{i}": [one(), one()] for i in range(n_queries)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--queries", type=int, default=462)
    p.add_argument("--repeats", type=int, default=3)
    args = p.parse_args()
    texts = rankings(args.queries)
    out = {"queries": args.queries, "machine": platform.machine(), "python": platform.python_version()}
    t = time.perf_counter()
    runs = [Run.from_dict({q: dict(ts[j]) for q, ts in texts.items()}) for j in range(2)]
    fuse(runs, norm="min-max", method="wsum", params={"weights": [0.5, 0.5]})
    out["ranx_first_call_s"] = round(time.perf_counter() - t, 3)  # includes numba compilation
    def with_ranx():
        runs = [Run.from_dict({q: dict(ts[j]) for q, ts in texts.items()}) for j in range(2)]
        return fuse(runs, norm="min-max", method="wsum", params={"weights": [0.3, 0.7]})

    for name, fn in {
        "ranx_fuse_s": with_ranx,
        "plain_python_s": lambda: {q: top(combine(ts, "wsum", "min-max", [0.3, 0.7]), 20)
                                   for q, ts in texts.items()},
    }.items():
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        out[name] = round(min(times), 4)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
