"""Sub-registries for the scale study: proportional category sampling that keeps ground truth."""

from __future__ import annotations

import numpy as np
import pandas as pd


def proportional_quota(category_sizes: pd.Series, total: int) -> pd.Series:
    """Largest-remainder allocation of ``total`` slots across categories in proportion to their sizes."""
    share = category_sizes / category_sizes.sum() * total
    quota = np.floor(share).astype(int)
    rest = int(total - quota.sum())
    if rest > 0:
        order = (share - quota).sort_values(ascending=False, kind="stable").index[:rest]
        quota.loc[order] += 1
    return quota.clip(upper=category_sizes)


def sample_subregistry(registry: pd.DataFrame, size: int, seed: int,
                       keep_ids: set[str] | None = None) -> np.ndarray:
    """Sorted registry rows of a sub-registry of ``size`` APIs keeping ``keep_ids``, sampled with ``seed``."""
    n = len(registry)
    if size >= n:
        return np.arange(n)
    is_kept = registry["api_id"].isin(keep_ids or set()).to_numpy()
    if is_kept.sum() > size:
        raise ValueError(f"{int(is_kept.sum())} ground-truth APIs do not fit in a sub-registry of {size}")
    rng = np.random.default_rng(seed)
    cats = registry["category"].to_numpy()
    sizes = registry["category"].value_counts().sort_index()
    quota = proportional_quota(sizes, size)
    kept_per_cat = pd.Series(cats[is_kept]).value_counts().reindex(sizes.index, fill_value=0)
    free = (quota - kept_per_cat).clip(lower=0)
    avail = sizes - kept_per_cat
    budget = size - int(is_kept.sum())
    while free.sum() != budget:
        gap = budget - int(free.sum())
        room = (avail - free) if gap > 0 else free
        room = room[room > 0]
        extra = proportional_quota(room.astype(float), abs(gap))
        if extra.sum() == 0:
            extra.loc[room.index[0]] = 1
        free = free.add(np.sign(gap) * extra, fill_value=0).astype(int)
    rows = np.flatnonzero(~is_kept)
    of_cat = pd.Series(rows).groupby(cats[rows]).indices  # each category's rows not kept, in registry order
    chosen = [np.flatnonzero(is_kept)]
    for cat, m in free.items():
        if m > 0:
            chosen.append(rng.choice(rows[of_cat[cat]], size=int(m), replace=False))
    return np.sort(np.concatenate(chosen))
