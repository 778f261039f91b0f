"""The toolkit's one fold maker: seeded, stratified folds over queries (scikit-learn, imported on use)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..config import FOLDS, SEED

Split = tuple[np.ndarray, np.ndarray]  # (train indices, test indices)


def n_folds(groups: Sequence, folds: int) -> int:
    """``folds``, at most the size of the smallest group, at least 2."""
    return max(2, min(folds, int(pd.Series(np.asarray(groups)).value_counts().min())))


def stratified_folds(groups: Sequence, folds: int = FOLDS, seed: int = SEED) -> list[Split]:
    """``(train, test)`` index pairs: ``StratifiedKFold`` by ``groups`` (:func:`n_folds`), seeded."""
    from sklearn.model_selection import StratifiedKFold

    g = np.asarray(groups)
    splitter = StratifiedKFold(n_splits=n_folds(g, folds), shuffle=True, random_state=seed)
    return list(splitter.split(np.zeros(len(g)), g))


def fold_ids(groups: Sequence, folds: int = FOLDS, seed: int = SEED) -> np.ndarray:
    """The fold number of every item under :func:`stratified_folds`."""
    out = np.empty(len(groups), dtype=np.int64)
    for f, (_, test) in enumerate(stratified_folds(groups, folds, seed)):
        out[test] = f
    return out


def leave_one_group_out(groups: Sequence) -> list[Split]:
    """``(train, test)`` index pairs holding out one group at a time (``ValueError`` with fewer than two)."""
    from sklearn.model_selection import LeaveOneGroupOut

    g = np.asarray(groups)
    if len(np.unique(g)) < 2:
        raise ValueError("leave-one-set-out needs queries of at least two sets")
    return list(LeaveOneGroupOut().split(np.zeros(len(g)), groups=g))


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
    (``StratifiedGroupKFold``, shuffled with ``seed``; :func:`n_folds` folds, at most one per group)."""
    from sklearn.model_selection import StratifiedGroupKFold

    y, g = np.asarray(labels), np.asarray(groups)
    splits = max(2, min(n_folds(y, folds), len(np.unique(g))))  # never more folds than groups
    splitter = StratifiedGroupKFold(n_splits=splits, shuffle=True, random_state=seed)
    out = np.empty(len(y), dtype=np.int64)
    for f, (_, test) in enumerate(splitter.split(np.zeros(len(y)), y, g)):
        out[test] = f
    return out
