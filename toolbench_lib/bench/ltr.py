"""The learned ranker beside linear fusion: training seconds, milliseconds per query, model size, on a stored
retriever study when there is one, else a synthetic study of the same shape."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..config import SEED
from ..retrieval.fused import NAMED as FUSED
from ..retrieval.fusion_specs import study_component_inputs
from ..retrieval.ltr import NAMED, fit, qrels_of, ranked
from ..retrieval.ltr_features import feature_table, study_runs
from ..study.stored import RANKINGS_COLUMNS, TEXT_RANKINGS_COLUMNS, StudyResult
from .core import BenchLine, best_of

SETS = ("G1_instruction", "G2_category_original", "G3_instruction_original")


def _ranking(rng: np.random.Generator, gt: list[str], top: float) -> list[tuple[str, float]]:
    """20 APIs of random tools, one of them a ground-truth API at a random rank."""
    ids = [f"C{rng.integers(49)}/n{rng.integers(4000)}/a{j}" for j in range(20)]
    ids[int(rng.integers(20))] = gt[int(rng.integers(2))]
    return [(a, top - 0.01 * j) for j, a in enumerate(dict.fromkeys(ids))]


def _rows(key: str, method: str, ranking: list[tuple[str, float]], *text: int) -> list[tuple]:
    """Rows of run 0 of ``rankings`` (or of ``text_rankings`` with the text's index)."""
    return [(key, method, 0, *text, j, 0, a, s) for j, (a, s) in enumerate(ranking, 1)]


def synthetic_study(queries: int = 462, seed: int = SEED):
    """A retriever study's shape without its data: per query four top-20 rankings (ptr's merged from two
    stubs), ground truth two APIs of one tool placed at random ranks."""
    rng = np.random.default_rng(seed)
    rows, texts, qs = [], [], []
    for i in range(queries):
        key, subset = f"{SETS[i % 3]}:{i}", SETS[i % 3]
        gt = [f"C{i % 49}/t{i}/x", f"C{i % 49}/t{i}/y"]
        qs.append({"qkey": key, "subset": subset, "query": f"query {i}", "candidates": gt,
                   "relevant": gt[:1]})
        for method in ("rtp", "rtp@bm25"):
            r = _ranking(rng, gt, 0.9)
            rows += _rows(key, method, r)
            texts += _rows(key, method, r, 0)
        for method in ("ptr", "ptr@bm25"):
            best: dict[str, float] = {}
            for t, top in enumerate((0.8, 0.7)):
                r = _ranking(rng, gt, top)
                texts += _rows(key, method, r, t)
                for a, s in r:
                    best[a] = max(best.get(a, -1.0), s)
            rows += _rows(key, method, sorted(best.items(), key=lambda x: -x[1])[:20])
    rankings = pd.DataFrame(rows, columns=RANKINGS_COLUMNS)
    text_rankings = pd.DataFrame(texts, columns=TEXT_RANKINGS_COLUMNS)
    prov = {"settings": {"runs": 1, "methods": ["rtp", "ptr", "rtp@bm25", "ptr@bm25"]},
            "deterministic": ["rtp", "rtp@bm25"]}
    return StudyResult(pd.DataFrame(qs), pd.DataFrame(), rankings, text_rankings, pd.DataFrame(),
                       pd.DataFrame(), prov)


def bench_ltr(study, source: str, name: str = "ltr", repeats: int = 3) -> BenchLine:
    """Milliseconds per query of linear fusion (``fuse4``) and of the ranker (features and scores), best of
    ``repeats``."""
    spec = NAMED[name]
    runs = study_runs(study, spec)
    table = feature_table(runs, spec, qrels_of(study.queries, "candidates"))
    sets = study.queries.set_index("qkey")["subset"].to_dict()
    model = fit(table, spec, table.queries, sets)

    def infer_once() -> None:
        t = feature_table(runs, spec)
        ranked(t, model.predict(t), 20)

    infer = best_of(infer_once, repeats)
    fuse = FUSED["fuse4"]
    inputs = study_component_inputs(study, 0, components=fuse.components)
    linear = best_of(lambda: fuse.ranked(inputs, 20), repeats)
    n = max(len(study.queries), 1)
    details = {"study": source, "queries": len(study.queries), "candidate_rows": len(table.qkeys),
               "features": len(table.names), "train_s": round(model.seconds, 2),
               "model_bytes": len(model.booster.model_to_string().encode()),
               "threads": model.params["num_threads"], "trees": model.params["rounds"]}
    return BenchLine(f"learned ranker ({name}) beside linear fusion, per query", "ms",
                     "fuse4 (linear fusion)", f"{name} (features + LightGBM)", 1000 * linear / n,
                     1000 * infer / n, better="lower", details=details)
