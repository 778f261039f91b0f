"""95% intervals for the saved tables: a mean over queries (the bootstrap of :mod:`..eval.stats`) and a
share of a count (Wilson)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ..eval.stats import bootstrap_ci, wilson_ci

N_RESAMPLES = 2000


def ci_of(*columns: str) -> list[str]:
    """The CI columns ``<c>_ci_low``, ``<c>_ci_high`` of each column."""
    return [f"{c}_ci_{end}" for c in columns for end in ("low", "high")]


def with_ci(row: dict, name: str, values: Sequence[float] | np.ndarray) -> dict:
    """``row`` with ``<name>_ci_low`` and ``<name>_ci_high``: the percentile bootstrap 95% CI of the mean of
    ``values`` (NaNs dropped; NaN, NaN when none is left)."""
    x = np.asarray(values, dtype=float)
    x = x[~np.isnan(x)]
    ci = bootstrap_ci(x, N_RESAMPLES) if x.size else (math.nan, math.nan)
    row[f"{name}_ci_low"], row[f"{name}_ci_high"] = ci
    return row


def with_wilson(row: dict, name: str, count: float, n: float) -> dict:
    """``row`` with ``<name>_ci_low`` and ``<name>_ci_high`` from eval's one Wilson interval."""
    row[f"{name}_ci_low"], row[f"{name}_ci_high"] = wilson_ci(count, n)
    return row
