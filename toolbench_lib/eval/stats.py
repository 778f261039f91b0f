"""The statistics of a comparison of two methods, in one place.

Two families of tests:

* **Paired per-query tests** (work from a single run): each query's score under method B minus method A
  (per query, the mean over runs). Paired t-test, Wilcoxon signed-rank (zero differences split, Pratt),
  exact sign test on per-query wins (ties dropped), and a bootstrap 95% CI of the mean difference
  (queries resampled with replacement, percentile method, fixed seed).
* **The paper's tests over runs**: a one-sample t-test of B's per-run means against A's value when A's
  retrieval is deterministic, or Welch's two-sample t-test of per-run values (pass rate). They need at least
  two runs with some variance; otherwise the row says why and falls back to no decision (p = 1).

Every p-value of a family is Holm-corrected (``p_holm``). No test returns NaN: a test that cannot be
computed on the data (e.g. every difference is zero) reports statistic 0, p = 1 and a note saying why.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy import stats

PAIRED_COLUMNS = ["n", "mean_a", "mean_b", "diff", "ci_low", "ci_high", "t", "p_t", "wilcoxon_w",
                  "p_wilcoxon", "wins_a", "wins_b", "ties", "p_sign", "note"]
TOL = 1e-12


def resample_counts(n: int, n_resamples: int, seed: int = 0) -> np.ndarray:
    """The resampling matrix: ``(n_resamples, n)`` counts of each of ``n`` items in each resample (items
    drawn with replacement, fixed seed: every call of this size and seed draws the same resamples)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_resamples, n))
    rows = np.repeat(np.arange(n_resamples) * n, n)
    return np.bincount(rows + idx.ravel(), minlength=n_resamples * n).reshape(n_resamples, n)


def bootstrap_cis(columns: np.ndarray, n_resamples: int = 10_000, seed: int = 0,
                  level: float = 0.95) -> np.ndarray:
    """Percentile bootstrap CIs of the mean of every column of ``columns`` (``(n, m)``: n items, m
    quantities over the same items), all from one resampling matrix (:func:`resample_counts`), so paired
    quantities are resampled together. Returns ``(m, 2)`` bounds; a constant column's CI is its value."""
    x = np.asarray(columns, dtype=float)
    x = x[:, None] if x.ndim == 1 else x
    n, m = x.shape
    if n == 0:
        return np.zeros((m, 2))
    out = np.repeat(x.mean(axis=0)[:, None], 2, axis=1)
    vary = np.ptp(x, axis=0) > TOL
    if n == 1 or n_resamples < 1 or not vary.any():
        return out
    means = resample_counts(n, n_resamples, seed) @ x[:, vary] / n
    alpha = (1 - level) / 2
    out[vary] = np.quantile(means, [alpha, 1 - alpha], axis=0).T
    return out


def bootstrap_ci(diff: np.ndarray, n_resamples: int = 10_000, seed: int = 0,
                 level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of the mean of ``diff`` (resampling its elements): :func:`bootstrap_cis`
    of one column."""
    low, high = bootstrap_cis(np.asarray(diff, dtype=float), n_resamples, seed, level)[0]
    return float(low), float(high)


def paired_test(a: Sequence[float], b: Sequence[float], n_resamples: int = 10_000, seed: int = 0,
                ci: tuple[float, float] | None = None) -> dict:
    """Paired comparison of per-query scores ``a`` and ``b`` (same queries, same order); ``diff = b - a``.
    ``ci``: the bootstrap CI of the mean difference when already computed (:func:`bootstrap_cis`)."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired scores need equal lengths, got {x.size} and {y.size}")
    d = y - x
    n = int(d.size)
    wins_a, wins_b = int(np.sum(d < -TOL)), int(np.sum(d > TOL))
    out = {"n": n, "mean_a": float(x.mean()) if n else 0.0, "mean_b": float(y.mean()) if n else 0.0,
           "diff": float(d.mean()) if n else 0.0, "wins_a": wins_a, "wins_b": wins_b,
           "ties": n - wins_a - wins_b}
    out["ci_low"], out["ci_high"] = ci if ci is not None else bootstrap_ci(d, n_resamples, seed)
    notes = []
    if n < 2 or np.ptp(d) <= TOL:
        out["t"], out["p_t"] = 0.0, 1.0 if abs(out["diff"]) <= TOL or n < 2 else 0.0
        notes.append("paired t: differences have no variance" if n >= 2 else "paired t: fewer than 2 queries")
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            res = stats.ttest_rel(y, x)
        out["t"], out["p_t"] = float(res.statistic), float(res.pvalue)
    if wins_a + wins_b == 0:
        out["wilcoxon_w"], out["p_wilcoxon"] = 0.0, 1.0
        notes.append("wilcoxon: every difference is zero")
    else:
        res = stats.wilcoxon(d, zero_method="pratt", alternative="two-sided")
        out["wilcoxon_w"], out["p_wilcoxon"] = float(res.statistic), float(res.pvalue)
    out["p_sign"] = float(stats.binomtest(wins_b, wins_a + wins_b, 0.5).pvalue) if wins_a + wins_b else 1.0
    out["note"] = "; ".join(notes)
    return out


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm-adjusted p-values (statsmodels), in the input order."""
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(p_values, dtype=float)
    if p.size == 0:
        return p
    return multipletests(p, method="holm")[1]


def paired_comparison(per_query: pd.DataFrame, a: str, b: str, metrics: Sequence[str],
                      by: Sequence[str] = ("subset",), n_resamples: int = 10_000,
                      seed: int = 0) -> pd.DataFrame:
    """Paired tests of method ``b`` against ``a`` per group of ``by`` and metric, Holm-corrected.

    ``per_query`` has ``qkey, method, run`` and the metric columns; scores are averaged over runs per query
    first. Columns: ``*by, metric, a, b`` + :data:`PAIRED_COLUMNS` + ``p_t_holm, p_wilcoxon_holm,
    p_sign_holm``.
    """
    by = list(by)
    mean = per_query.groupby([*by, "qkey", "method"], sort=False)[list(metrics)].mean().reset_index()
    rows = []
    for key, g in mean.groupby(by, sort=False):
        key = key if isinstance(key, tuple) else (key,)
        wide = {m: g.pivot(index="qkey", columns="method", values=m) for m in metrics}
        pairs = {m: wide[m][[a, b]].dropna() for m in metrics if a in wide[m] and b in wide[m]}
        # one resampling matrix per group: every metric over the same queries resampled together
        cis = {}
        for n in {len(w) for w in pairs.values()}:
            same = [m for m, w in pairs.items() if len(w) == n]
            diffs = np.column_stack([pairs[m][b].to_numpy() - pairs[m][a].to_numpy() for m in same])
            cis.update(zip(same, map(tuple, bootstrap_cis(diffs, n_resamples, seed)), strict=True))
        for m, w in pairs.items():
            rows.append({**dict(zip(by, key, strict=True)), "metric": m, "a": a, "b": b,
                         **paired_test(w[a].to_numpy(), w[b].to_numpy(), n_resamples, seed, cis[m])})
    out = pd.DataFrame(rows, columns=[*by, "metric", "a", "b", *PAIRED_COLUMNS])
    for col in ("p_t", "p_wilcoxon", "p_sign"):
        out[f"{col}_holm"] = holm(out[col].to_numpy())
    return out


def runs_test(a_values: Sequence[float], b_values: Sequence[float], a_deterministic: bool) -> dict:
    """The paper's test over runs: one-sample t of B's run means against A's value (A deterministic), else
    Welch's two-sample t. Returns ``test, statistic, p_value, n_a, n_b, note``; never NaN."""
    x, y = np.asarray(a_values, dtype=float), np.asarray(b_values, dtype=float)
    test = "one_sample_t" if a_deterministic else "welch_t"
    base = {"test": test, "n_a": int(x.size), "n_b": int(y.size)}
    if y.size < 2 or (not a_deterministic and x.size < 2):
        return {**base, "statistic": 0.0, "p_value": 1.0,
                "note": f"not decidable: {x.size} run(s) of A and {y.size} of B; "
                        "a t-test over runs needs >= 2"}
    if a_deterministic:
        if np.ptp(y) <= TOL:
            same = abs(float(y.mean()) - float(x.mean())) <= TOL
            return {**base, "statistic": 0.0, "p_value": 1.0 if same else 0.0,
                    "note": "B's run means have no variance"}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            res = stats.ttest_1samp(y, float(x.mean()))
    else:
        if np.ptp(x) <= TOL and np.ptp(y) <= TOL:
            same = abs(float(y.mean()) - float(x.mean())) <= TOL
            return {**base, "statistic": 0.0, "p_value": 1.0 if same else 0.0,
                    "note": "both methods' run values have no variance"}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            res = stats.ttest_ind(y, x, equal_var=False)
    return {**base, "statistic": float(res.statistic), "p_value": float(res.pvalue), "note": ""}
