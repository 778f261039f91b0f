"""Retrieval metrics per query and averaged, and per-query wins between two methods."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd


def recall_at_k(ranked: Sequence[str], relevant: set[str] | Sequence[str], k: int) -> float:
    """Share of the ground-truth APIs found in the top ``k`` (0 when there is no ground truth)."""
    rel = set(relevant)
    if not rel:
        return 0.0
    return len(set(ranked[:k]) & rel) / len(rel)


def precision_at_k(ranked: Sequence[str], relevant: set[str] | Sequence[str], k: int) -> float:
    """Share of the ``k`` retrieved slots that hold a ground-truth API (a short list is padded)."""
    if k <= 0:
        raise ValueError("k must be positive")
    return len(set(ranked[:k]) & set(relevant)) / k


def per_query_metrics(run: Mapping[str, Sequence[str]], qrels: Mapping[str, set[str]],
                      k: int) -> pd.DataFrame:
    """``qkey, recall, precision, hits, n_gt`` for every query of ``qrels``.

    A query missing from ``run`` counts as having retrieved nothing.
    """
    rows = []
    for key, rel in qrels.items():
        ranked = list(run.get(key, []))
        rows.append({
            "qkey": key,
            "recall": recall_at_k(ranked, rel, k),
            "precision": precision_at_k(ranked, rel, k),
            "hits": len(set(ranked[:k]) & set(rel)),
            "n_gt": len(rel),
        })
    return pd.DataFrame(rows)


def mean_metrics(per_query: pd.DataFrame) -> dict[str, float]:
    """Mean recall and precision over queries."""
    if per_query.empty:
        return {"recall": float("nan"), "precision": float("nan")}
    return {"recall": float(per_query["recall"].mean()), "precision": float(per_query["precision"].mean())}


def wins(a: pd.DataFrame, b: pd.DataFrame, metric: str = "recall", names: tuple[str, str] = ("a", "b"),
         ) -> dict[str, int]:
    """Per-query wins of two methods on one metric: ``{a: n, b: n, "tie": n}`` over shared queries."""
    m = a[["qkey", metric]].merge(b[["qkey", metric]], on="qkey", suffixes=("_a", "_b"))
    diff = m[f"{metric}_a"].to_numpy() - m[f"{metric}_b"].to_numpy()
    tol = 1e-12
    return {names[0]: int(np.sum(diff > tol)), names[1]: int(np.sum(diff < -tol)),
            "tie": int(np.sum(np.abs(diff) <= tol))}
