"""95% intervals for the saved tables: a mean over queries (the bootstrap of :mod:`..eval.stats`), and the
paired comparison of two methods' per-query scores under each table's names."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np

from ..config import SEED
from ..eval.stats import grouped_bootstrap_ci, paired

N_RESAMPLES = 2000
# Names of :func:`~toolbench_lib.eval.stats.paired`'s fields in the tables of PtR against RtP.
DIFF_CI = {"diff": "diff", "ci_low": "ci_low", "ci_high": "ci_high"}
PTR_VS_RTP = {**DIFF_CI, "p": "p", "note": "note", "wins": "ptr_wins", "losses": "rtp_wins"}
LO_HI = {"ci_low": "diff_lo", "ci_high": "diff_hi"}


def ci_of(*columns: str) -> list[str]:
    """The CI columns ``<c>_ci_low``, ``<c>_ci_high`` of each column."""
    return [f"{c}_ci_{end}" for c in columns for end in ("low", "high")]


def mean_ci(values, groups: Sequence | None = None, n_resamples: int = N_RESAMPLES,
            seed: int = SEED) -> tuple[float, float]:
    """The percentile bootstrap 95% CI of the mean of ``values``, whole ``groups`` (each value's cluster)
    resampled together when given."""
    return grouped_bootstrap_ci(values, groups, n_resamples, seed)[:2]


def with_ci(row: dict, name: str, values: Sequence[float] | np.ndarray,
            groups: Sequence | None = None) -> dict:
    """``row`` with ``<name>_ci_low`` and ``<name>_ci_high``: :func:`mean_ci` of ``values`` without NaNs."""
    x = np.asarray(values, dtype=float)
    keep = ~np.isnan(x)
    ci = mean_ci(x[keep], None if groups is None else np.asarray(groups)[keep]) if keep.any() else None
    row[f"{name}_ci_low"], row[f"{name}_ci_high"] = ci or (math.nan, math.nan)
    return row


def paired_columns(a, b, names: Mapping[str, str], groups: Sequence | None = None) -> dict:
    """``b`` against ``a`` by eval's one paired test (:func:`~toolbench_lib.eval.stats.paired`, clustered by
    ``groups``), its fields named as ``names`` maps them, in that order (fields it does not name left out)."""
    res = paired(a, b, groups=groups)
    return {new: res[old] for old, new in names.items()}
