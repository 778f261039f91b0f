"""The one comparison of two methods: every p-value any table, notebook, report or view prints."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..config import K
from ..data.queries import DEFAULT_GT
from .evaluation import Evaluation, evaluate
from .stats import holm, paired, runs_test, t_ci, two_sample

COMPARE_COLUMNS = ["comparison", "subset", "a", "b", "metric", "k", "gt", "n", "mean_a", "mean_b", "diff",
                   "ci_low", "ci_high", "t", "df", "p", "p_holm", "ci_low_holm", "ci_high_holm", "family",
                   "wins", "ties", "losses", "testable", "note", "p_wilcoxon_robustness", "p_runs_robustness",
                   "n_groups"]


def compare(evaluation, a: str, b: str, sets: Sequence[str] | None = None, gt: str = DEFAULT_GT, k: int = K,
            metric: str = "recall", family: Sequence[str] | None = None) -> pd.DataFrame:
    """``b`` against ``a`` per set: paired t on per-query means, clustered, Holm over ``family``."""
    ev = evaluation if isinstance(evaluation, Evaluation) else evaluate(evaluation)
    if a == b:
        raise ValueError(f"compare needs two different methods, got {a!r} twice")
    vals = ev.values(metric, k, gt)
    runs_a, runs_b = vals[ev._method(a)], vals[ev._method(b)]  # (run, query)
    order = list(dict.fromkeys(ev.subsets))
    sets = list(order if sets is None else sets)
    family = list(sets if family is None else family)
    missing = [s for s in [*sets, *family] if s not in order]
    if missing:
        raise KeyError(f"no queries of set(s) {missing} in this evaluation (has {order})")
    tested = list(dict.fromkeys([*family, *sets]))
    rows, diffs, clusters = {}, {}, {}
    for s in tested:
        mask = np.flatnonzero(ev.subsets == s)
        mask = mask[np.argsort(ev.qkeys[mask], kind="stable")]  # queries by key, whatever the study's order
        x, y = runs_a[:, mask].mean(axis=0), runs_b[:, mask].mean(axis=0)  # each query's mean over runs
        clusters[s] = ev.groups[mask] if ev.groups is not None else None
        res, diffs[s] = paired(x, y, groups=clusters[s]), y - x
        a_runs = runs_a[:1, mask] if ev.is_deterministic(a) else runs_a[:, mask]
        over = runs_test(a_runs.mean(axis=1), runs_b[:, mask].mean(axis=1), ev.is_deterministic(a))
        rows[s] = {"comparison": comparison_key(a, b, metric, k, gt, s), "subset": s, "a": a, "b": b,
                   "metric": metric, "k": k, "gt": gt, **res,
                   "p_wilcoxon_robustness": res["p_wilcoxon"], "p_runs_robustness": over["p_value"]}
    adjusted = holm([rows[s]["p"] for s in family])
    label = f"Holm over {', '.join(family)}" if len(family) > 1 else "one comparison (no adjustment)"
    for s, p in zip(family, adjusted, strict=True):
        rows[s].update(p_holm=float(p), family=label)
    for s in set(sets) - set(family):
        rows[s].update(p_holm=rows[s]["p"], family="one comparison (no adjustment)")
    for s in sets:
        r = rows[s]
        unadjusted = (r["ci_low"], r["ci_high"])
        r["ci_low_holm"], r["ci_high_holm"] = holm_ci(diffs[s], r["p"], r["p_holm"], unadjusted, clusters[s])
    return pd.DataFrame([rows[s] for s in sets], columns=COMPARE_COLUMNS)


INTERACTION_COLUMNS = ["comparison", "a", "b", "metric", "k", "gt", "first", "second", "n_first", "n_second",
                       "diff_first", "diff_second", "diff", "ci_low", "ci_high", "t", "df", "p", "p_holm",
                       "ci_low_holm", "ci_high_holm", "family"]


def interactions(evaluation, a: str, b: str, first: str, others: Sequence[str], gt: str = DEFAULT_GT,
                 k: int = K, metric: str = "recall") -> pd.DataFrame:
    """How ``b − a`` changes from set ``first`` to each of ``others``, Holm-adjusted."""
    ev = evaluation if isinstance(evaluation, Evaluation) else evaluate(evaluation)
    vals = ev.values(metric, k, gt)
    runs_a, runs_b = vals[ev._method(a)], vals[ev._method(b)]

    def per_query(s: str) -> tuple[np.ndarray, np.ndarray | None]:
        mask = np.flatnonzero(ev.subsets == s)
        if not mask.size:
            raise KeyError(f"no queries of set {s!r} in this evaluation")
        return (runs_b[:, mask].mean(axis=0) - runs_a[:, mask].mean(axis=0),
                ev.groups[mask] if ev.groups is not None else None)

    d1, g1 = per_query(first)
    second = {s: per_query(s) for s in others}
    rows = [{"comparison": f"({comparison_key(a, b, metric, k, gt, s)}) − ({first})", "a": a, "b": b,
             "metric": metric, "k": k, "gt": gt, "first": first, "second": s, "n_first": d1.size,
             "n_second": d2.size, "diff_first": float(d1.mean()), "diff_second": float(d2.mean()),
             **two_sample(d1, d2, g1, g2)} for s, (d2, g2) in second.items()]
    adjusted = holm([r["p"] for r in rows]) if rows else []
    for r, p in zip(rows, adjusted, strict=True):
        level = 1 - 0.05 * r["p"] / p if np.isfinite(p) and p > r["p"] else 0.95  # as :func:`holm_ci`
        d2, g2 = second[r["second"]]
        held = two_sample(d1, d2, g1, g2, level=level)
        r.update(p_holm=float(p), ci_low_holm=held["ci_low"], ci_high_holm=held["ci_high"],
                 family=f"Holm over {', '.join(others)} against {first}")
    return pd.DataFrame(rows, columns=INTERACTION_COLUMNS)


def holm_ci(diff, p: float, p_holm: float, unadjusted: tuple[float, float], groups=None,
            alpha: float = 0.05) -> tuple[float, float]:
    """The t-interval of ``diff``'s mean at the level of its Holm adjustment, else ``unadjusted``."""
    if not (np.isfinite(p) and np.isfinite(p_holm)) or p_holm <= p:
        return unadjusted
    return t_ci(diff, 1 - alpha * p / p_holm, groups)


def comparison_key(a: str, b: str, metric: str, k: int, gt: str, subset: str) -> str:
    """The name of one comparison, the same in every table that shows it."""
    return f"{b} − {a} · {metric}@{k} · {gt} · {subset}"


def significant(row, alpha: float = 0.05) -> bool:
    """Whether a compared row's Holm-adjusted p is below ``alpha`` (never for a row that is not testable)."""
    return bool(np.isfinite(row["p_holm"]) and row["p_holm"] < alpha)
