"""ranx ``Run`` and ``Qrels`` as the one currency between retrieval and evaluation.

A ranking is ``{qkey: [api_id, ...]}`` best first. It is handed to ranx with strictly decreasing scores
derived from the rank, so ranx orders every list exactly as the retriever did (ties in cosine included),
and recall/precision@k equal the plain set definitions (precision divides by ``k`` even for a shorter list).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..data.paths import CACHE_DIR
from ..data.queries import DEFAULT_GT, check_gt
from ..data.tables import cached_tables

SCORES_DIR = CACHE_DIR / "scores"  # per-query scores of stored studies, keyed by content

# ranx metric names of the measures this toolkit reports, and the column each becomes.
METRICS = {"recall": "recall@{k}", "precision": "precision@{k}", "ndcg": "ndcg@{k}", "mrr": "mrr@{k}",
           "comp": "comp@{k}"}


def qrels_dict(queries: pd.DataFrame, gt: str) -> dict[str, dict[str, int]]:
    """``{qkey: {api_id: 1}}`` of one ground-truth definition (every query, even one without ground truth)."""
    check_gt(gt)
    return {key: {a: 1 for a in ids} for key, ids in zip(queries["qkey"], queries[gt], strict=True)}


def _comp(ranked: Sequence[str], rel: set[str], k: int) -> float:
    """COMP@k: 1 when every ground-truth API is in the top ``k`` (ToolRet's completeness)."""
    return float(bool(rel) and rel <= set(ranked[:k]))


class ScoreMismatchError(RuntimeError):
    """ranx's per-query scores disagree with a direct count: they are never used."""


def direct_hits(ranked: Sequence, rel: set, k: int) -> int:
    """Ground-truth ids among the first ``k`` distinct ids of ``ranked`` (a repeated id counts at its first
    rank), counted directly."""
    return len(set(list(dict.fromkeys(ranked))[:k]) & rel)


def direct_recall(ranked: Sequence, rel: set, k: int) -> float:
    """recall@k counted directly (distinct ids of the first ``k``); 0 without ground truth.

    The plain-count twin of :func:`score_rankings`' ranx recall, which it checks; also used where ranx
    would be too slow (the scale study's thousands of sub-registries, by column positions).
    """
    return direct_hits(ranked, rel, k) / len(rel) if rel else 0.0


def check_recall(scores: Mapping[str, float], rankings: Mapping[str, Sequence[str]],
                 qrels: Mapping[str, set[str]], k: int, tol: float = 1e-9) -> None:
    """Raise :class:`ScoreMismatchError` when a query's recall@k in ``scores`` is not the direct count."""
    bad = [q for q, rel in qrels.items()
           if abs(float(scores.get(q, 0.0)) - direct_recall(list(rankings.get(q, [])), set(rel), k)) > tol]
    if bad:
        raise ScoreMismatchError(
            f"ranx's recall@{k} differs from a direct count for {len(bad)} of {len(qrels)} queries (e.g. "
            f"{bad[0]!r}); the scores were not used. A stale compiled cache of ranx (numba) can cause this: "
            "remove the __pycache__ folders of the ranx package and run again.")


def score_rankings(rankings: Mapping[str, Sequence[str]], queries: pd.DataFrame, gt: str, k: int,
                   metrics: Sequence[str] = ("recall", "precision")) -> pd.DataFrame:
    """Per-query metrics at ``k`` computed by ranx: ``qkey, <metric>..., n_gt`` for every query.

    A query without ground truth scores 0; a query the ranking misses has retrieved nothing.
    """
    from ranx import evaluate

    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; choose from {sorted(METRICS)}")
    qd = qrels_dict(queries, gt)
    keys = list(qd)
    out = pd.DataFrame({"qkey": keys, "n_gt": [len(qd[q]) for q in keys]})
    judged = [q for q in keys if qd[q]]
    ranx_names = [METRICS[m].format(k=k) for m in metrics if m != "comp"]
    per_query: dict[str, dict[str, float]] = {m: {} for m in metrics}
    if judged and ranx_names:
        from ranx import Qrels, Run

        qrels = Qrels({q: qd[q] for q in judged})
        # Every judged query is in the run (an empty list becomes one impossible id scoring 0).
        body = {}
        for q in judged:
            ids = list(dict.fromkeys(rankings.get(q, [])))  # a repeated id counts at its first rank
            body[q] = {a: float(len(ids) - i) for i, a in enumerate(ids)} if ids else {"__none__": 0.0}
        run = Run(body)
        recall_name = METRICS["recall"].format(k=k)  # always computed: checked against a direct count
        evaluate(qrels, run, list(dict.fromkeys([*ranx_names, recall_name])), return_mean=False,
                 make_comparable=True)
        check_recall(dict(run.scores[recall_name]), rankings, {q: set(qd[q]) for q in judged}, k)
        for m, name in zip([m for m in metrics if m != "comp"], ranx_names, strict=True):
            per_query[m] = dict(run.scores[name])
    if "comp" in metrics:
        per_query["comp"] = {q: _comp(list(rankings.get(q, [])), set(qd[q]), k) for q in keys}
    for m in metrics:
        out[m] = np.array([float(per_query[m].get(q, 0.0)) for q in keys], dtype=float)
    return out[["qkey", *metrics, "n_gt"]]


def scores_key(result, k: int, gt: str, metrics: Sequence[str]) -> str:
    """Content key of a study's per-query scores: its hits, its queries' sets and ground truth, its methods
    and runs, ``k``, ``gt``, the metrics and this module's code."""
    h = hashlib.sha256(Path(__file__).read_bytes())
    h.update(pd.util.hash_pandas_object(result.hits, index=False).to_numpy().tobytes())
    q = result.queries
    h.update(json.dumps({"qrels": {key: sorted(v) for key, v in qrels_dict(q, gt).items()},
                         "subsets": dict(zip(q["qkey"], q["subset"], strict=True)), "methods": result.methods,
                         "n_runs": result.n_runs, "k": k, "gt": gt, "metrics": list(metrics)},
                        sort_keys=True).encode())
    return h.hexdigest()[:20]


def per_query_runs(result, k: int, gt: str = DEFAULT_GT,
                   metrics: Sequence[str] = ("recall", "precision")) -> pd.DataFrame:
    """Metrics at ``k`` per query, method and run, scored by ranx (RtP repeated for every run).

    ``result`` is a study's :class:`~toolbench_lib.pipeline.study.StudyResult`. Columns: ``qkey,
    <metrics>..., n_gt, hits, method, run, subset``. Scored once per study content (:func:`scores_key`):
    kept on the result for the process and, for a stored study (one with a ``study_key``), checksummed
    under the cache folder for every later notebook.
    """
    check_gt(gt)
    key = scores_key(result, k, gt, metrics)
    memo = result.__dict__.setdefault("_per_query_runs", {})
    if key not in memo:
        if result.provenance.get("study_key"):
            made = cached_tables(SCORES_DIR, key, lambda: {"scores": _score_runs(result, k, gt, metrics)})
            memo[key] = made["scores"]
        else:
            memo[key] = _score_runs(result, k, gt, metrics)
    return memo[key].copy()


def _score_runs(result, k: int, gt: str, metrics: Sequence[str]) -> pd.DataFrame:
    """:func:`per_query_runs`, computed."""
    q = result.queries
    frames = []
    for method in result.methods:
        for run in range(result.n_runs):
            pq = score_rankings(result.ranking(method, run), q, gt, k, metrics)
            if "recall" in pq:
                pq["hits"] = (pq["recall"] * pq["n_gt"]).round().astype(int)
            frames.append(pq.assign(method=method, run=run))
    out = pd.concat(frames, ignore_index=True)
    return out.merge(q[["qkey", "subset"]], on="qkey")
