"""The toolkit's one fold maker: seeded folds over queries, stratified by set and grouped so that related
queries share a fold (scikit-learn, imported on use); tuning, routing and the learned ranker use it."""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..config import FOLDS, SEED
from .normalize import norm_text


def n_folds(groups: Sequence, folds: int) -> int:
    """``folds``, at most the size of the smallest group, at least 2."""
    return max(2, min(folds, int(pd.Series(np.asarray(groups)).value_counts().min())))


def query_folds(strata: Sequence, texts: Sequence[str], samples: Sequence, folds: int = FOLDS,
                seed: int = SEED) -> np.ndarray:
    """The fold of every query: stratified by ``strata`` (its set), and the queries that repeat a text (case
    and spacing aside) or were written from one sample of APIs (``samples``) in one fold. Made once per
    query set (every run and tuned method of a study asks for the same folds)."""
    return _query_folds(tuple(map(str, strata)), tuple(norm_text(t) for t in texts), tuple(map(str, samples)),
                        folds, seed).copy()


@functools.lru_cache(maxsize=16)
def _query_folds(strata: tuple, texts: tuple, samples: tuple, folds: int, seed: int) -> np.ndarray:
    return grouped_fold_ids(strata, linked_groups(texts, samples), folds, seed)


def one_group_out(groups: Sequence) -> np.ndarray:
    """One fold per group (leave one set out; ``ValueError`` with fewer than two groups)."""
    names, codes = np.unique(np.asarray(groups), return_inverse=True)
    if len(names) < 2:
        raise ValueError("leave-one-set-out needs queries of at least two sets")
    return codes


def linked_groups(*keys: Sequence) -> np.ndarray:
    """One group number per item: items sharing a value of any of ``keys`` (equal-length sequences) are in
    one group, transitively (a query text repeated, or a ground-truth set shared, links two queries)."""
    n = len(keys[0]) if keys else 0
    parent = list(range(n))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for key in keys:
        first: dict = {}
        for i, v in enumerate(key):
            parent[root(i)] = root(first.setdefault(v, i))
    return np.unique([root(i) for i in range(n)], return_inverse=True)[1].astype(np.int64)


def grouped_fold_ids(labels: Sequence, groups: Sequence, folds: int = FOLDS, seed: int = SEED) -> np.ndarray:
    """The fold number of every item: stratified by ``labels``, and every item of a group in one fold
    (``StratifiedGroupKFold``, shuffled with ``seed``; :func:`n_folds` folds, at most one per group; one
    fold, nothing to hold out, for a single group or one item per label)."""
    from sklearn.model_selection import StratifiedGroupKFold

    y, g = np.asarray(labels), np.asarray(groups)
    if len(np.unique(g)) < 2 or np.unique(y, return_counts=True)[1].max(initial=0) < 2:  # no second fold to make
        return np.zeros(len(y), dtype=np.int64)
    splits = max(2, min(n_folds(y, folds), len(np.unique(g))))  # never more folds than groups
    splitter = StratifiedGroupKFold(n_splits=splits, shuffle=True, random_state=seed)
    out = np.empty(len(y), dtype=np.int64)
    for f, (_, test) in enumerate(splitter.split(np.zeros(len(y)), y, g)):
        out[test] = f
    return out
