"""The statistics of a comparison of two methods; a test that cannot decide is *not testable*."""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence

import numpy as np
from scipy import stats
from sklearn.metrics import roc_auc_score
from statsmodels.stats.contingency_tables import mcnemar
from statsmodels.stats.proportion import proportion_confint

from ..config import SEED

TOL = 1e-12


def resample_counts(n: int, n_resamples: int, seed: int = SEED) -> np.ndarray:
    """``(n_resamples, n)`` counts of each of ``n`` items in each seeded resample with replacement."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n, size=(n_resamples, n))
    rows = np.repeat(np.arange(n_resamples) * n, n)
    return np.bincount(rows + idx.ravel(), minlength=n_resamples * n).reshape(n_resamples, n)


def _percentile_ci(draws: np.ndarray, level: float) -> np.ndarray:
    """The percentile bounds of bootstrap ``draws`` (one resample a row): ``(2, ...)``, low then high."""
    alpha = (1 - level) / 2
    return np.quantile(draws, [alpha, 1 - alpha], axis=0)


def ratio_change(a1, b1, a2, b2, n_resamples: int = 10_000, seed: int = SEED,
                 level: float = 0.95) -> tuple[float, float, float]:
    """``mean(b2)/mean(a2) − mean(b1)/mean(a1)`` of paired scores and its bootstrap CI."""
    x = np.column_stack([np.asarray(v, dtype=float) for v in (a1, b1, a2, b2)])
    with np.errstate(divide="ignore", invalid="ignore"):
        def change(m: np.ndarray) -> np.ndarray:
            return m[..., 3] / m[..., 2] - m[..., 1] / m[..., 0]
        value = float(change(x.mean(axis=0)))
        if len(x) < 2 or n_resamples < 1:
            return value, value, value
        draws = change(resample_counts(len(x), n_resamples, seed) @ x / len(x))
    low, high = _percentile_ci(draws[np.isfinite(draws)], level)
    return value, float(low), float(high)


def grouped_bootstrap_ci(diff: np.ndarray, groups: Sequence | None = None, n_resamples: int = 10_000,
                         seed: int = SEED, level: float = 0.95) -> tuple[float, float, int]:
    """``(low, high, n_groups)``: the percentile bootstrap CI of ``diff``'s mean resampling whole ``groups``
    (default: each value its own); the mean itself where nothing varies or there is nothing to resample."""
    d = np.asarray(diff, dtype=float)
    _, inverse = np.unique(np.arange(d.size) if groups is None else np.asarray(groups), return_inverse=True)
    sums, sizes = np.bincount(inverse, weights=d), np.bincount(inverse).astype(float)
    if len(sums) < 2 or n_resamples < 1 or np.ptp(d) <= TOL:
        return float(d.mean()), float(d.mean()), len(sums)
    counts = resample_counts(len(sums), n_resamples, seed)
    low, high = _percentile_ci((counts @ sums) / (counts @ sizes), level)
    return float(low), float(high), len(sums)


def mean_se(values: Sequence[float], groups: Sequence | None = None) -> tuple[float, float, float]:
    """``(mean, se, df)``: the CR2 cluster-robust SE by ``groups`` with Bell and McCaffrey's Satterthwaite
    df, which is G − 1 for G clusters of one size (default: s/√n on n − 1)."""
    v = np.asarray(values, dtype=float)
    _, inverse = np.unique(np.arange(v.size) if groups is None else np.asarray(groups), return_inverse=True)
    sums, sizes = np.bincount(inverse, weights=v - v.mean()), np.bincount(inverse).astype(float)
    if sizes.size < 2:
        return float(v.mean()), float("nan"), 0.0
    c = 1 / (1 - sizes / v.size)  # CR2's adjustment of each cluster's residual sum
    var = float(np.sum(c * sums**2)) / v.size**2
    # the estimator is sums' c-weighted square, whose covariance under independence is diag(n_g) − n n'/N
    trace = np.sum(c * sizes) - np.sum(c * sizes**2) / v.size
    square = (np.sum((c * sizes) ** 2) - 2 * np.sum(c**2 * sizes**3) / v.size
              + np.sum(c * sizes**2) ** 2 / v.size**2)
    return float(v.mean()), math.sqrt(var), float(trace**2 / square)


def t_ci(values: Sequence[float], level: float = 0.95, groups: Sequence | None = None) -> tuple[float, float]:
    """The cluster-robust t-interval of the mean (the paired test's CI); NaN under 2 groups."""
    v = np.asarray(values, dtype=float)
    if v.size < 2 or np.isnan(v).any():
        return float("nan"), float("nan")
    if np.ptp(v) <= TOL:
        return float(v.mean()), float(v.mean())
    mean, se, df = mean_se(v, groups)
    if not (df > 0 and se > TOL * np.abs(v).max()):  # differences that cancel within every cluster: no SE
        return float("nan"), float("nan")
    half = float(stats.t.ppf(0.5 + level / 2, df)) * se
    return mean - half, mean + half


def paired(a: Sequence[float], b: Sequence[float], level: float = 0.95,
           groups: Sequence | None = None) -> dict:
    """The paired t-test of ``b - a``, cluster-robust by ``groups``, with its CI (:func:`t_ci`); its p and
    the Wilcoxon robustness p are two-sided. NaN differences are neither wins, ties nor losses."""
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired scores need equal lengths, got {x.size} and {y.size}")
    d = y - x
    n = int(d.size)
    n_groups = n if groups is None else int(np.unique(np.asarray(groups)).size)
    nan = float("nan")
    wins, losses = int(np.sum(d > TOL)), int(np.sum(d < -TOL))
    out = {"n": n, "n_groups": n_groups, "mean_a": nan, "mean_b": nan, "diff": nan, "ci_low": nan,
           "ci_high": nan, "t": nan, "df": nan, "p": nan, "wins": wins, "ties": int(np.sum(np.abs(d) <= TOL)),
           "losses": losses, "p_wilcoxon": nan, "testable": False, "note": ""}
    bad = int(np.isnan(d).sum())
    if bad:
        return {**out, "note": f"not testable: {bad} of {n} paired scores are NaN"}
    if n:
        out.update(mean_a=float(x.mean()), mean_b=float(y.mean()), diff=float(d.mean()))
    if n_groups < 2:
        out["note"] = (f"not testable: {n} quer{'y' if n == 1 else 'ies'} in {n_groups} group(s) (a test and "
                       "a CI need at least 2)")
        return out
    out["ci_low"], out["ci_high"] = t_ci(d, level, groups)
    if np.ptp(d) <= TOL:
        return {**out, "note": f"not testable: every query's difference is {out['diff']:+.3f} (no variance; "
                               "the CI is that value)"}
    if np.isnan(out["ci_low"]):  # t_ci found no standard error
        return {**out, "note": "not testable: the differences cancel within every cluster (a cluster-robust "
                               "standard error of 0)"}
    mean, se, df = mean_se(d, groups)
    with warnings.catch_warnings(action="ignore", category=RuntimeWarning):
        t = mean / se
        out.update(t=float(t), df=df, p=float(2 * stats.t.sf(abs(t), df)), testable=True)
        if out["wins"] + out["losses"]:
            out["p_wilcoxon"] = float(stats.wilcoxon(d, zero_method="pratt", alternative="two-sided").pvalue)
    return out


def two_sample(first: Sequence[float], second: Sequence[float], groups_first: Sequence | None = None,
               groups_second: Sequence | None = None, level: float = 0.95) -> dict:
    """``mean(second) − mean(first)`` of independent samples, cluster-robust, on Welch df; p two-sided."""
    (m1, se1, df1), (m2, se2, df2) = mean_se(first, groups_first), mean_se(second, groups_second)
    out = {"diff": m2 - m1, "ci_low": np.nan, "ci_high": np.nan, "t": np.nan, "df": np.nan, "p": np.nan}
    var = se1**2 + se2**2
    if not np.isfinite(var) or var <= 0 or min(df1, df2) < 1 - 1e-9:  # 2 clusters: df 1, up to rounding
        return out
    df = var**2 / (se1**4 / df1 + se2**4 / df2)
    half, t = float(stats.t.ppf(0.5 + level / 2, df)) * math.sqrt(var), out["diff"] / math.sqrt(var)
    return {**out, "ci_low": out["diff"] - half, "ci_high": out["diff"] + half, "t": t, "df": float(df),
            "p": float(2 * stats.t.sf(abs(t), df))}


def holm(p_values: Sequence[float]) -> np.ndarray:
    """Holm-adjusted p-values in the input order; a missing p stays missing and is not in the family. The
    arithmetic of statsmodels' ``multipletests(method="holm")`` (its test oracle), without the full garbage
    collection it runs on every call (0.3 s each in a notebook's heap)."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, np.nan)
    ok = np.flatnonzero(~np.isnan(p))
    order = np.argsort(p[ok])
    adjusted = np.minimum(np.maximum.accumulate(p[ok][order] * np.arange(len(ok), 0, -1)), 1)
    out[ok[order]] = adjusted
    return out


def runs_test(a_values: Sequence[float], b_values: Sequence[float], a_deterministic: bool) -> dict:
    """The paper's test over runs: one-sample t against A's value if deterministic, else Welch's."""
    x, y = np.asarray(a_values, dtype=float), np.asarray(b_values, dtype=float)
    test = "one_sample_t" if a_deterministic else "welch_t"
    out = {"test": test, "n_a": int(x.size), "n_b": int(y.size), "statistic": float("nan"),
           "p_value": float("nan"), "note": ""}
    if np.isnan(x).any() or np.isnan(y).any():
        return {**out, "note": "not testable: a run value is NaN"}
    if y.size < 2 or (not a_deterministic and x.size < 2):
        return {**out, "note": f"not testable: {x.size} run(s) of A and {y.size} of B; a t-test over runs "
                               "needs at least 2"}
    if np.ptp(y) <= TOL and (a_deterministic or np.ptp(x) <= TOL):
        return {**out, "note": "not testable: the run values have no variance"}
    with warnings.catch_warnings(action="ignore", category=RuntimeWarning):
        res = (stats.ttest_1samp(y, float(x.mean())) if a_deterministic
               else stats.ttest_ind(y, x, equal_var=False))
    return {**out, "statistic": float(res.statistic), "p_value": float(res.pvalue)}


def runs_test_summary(mean: float, std: float, n: int, value: float) -> float:
    """The p of the paper's one-sample t over ``n`` run means (``mean``, ``std``) against ``value``."""
    t = (mean - value) / (std / math.sqrt(n))
    return float(2 * stats.t.sf(abs(t), n - 1))


def two_sample_summary(mean_a: float, std_a: float, mean_b: float, std_b: float, n: int) -> float:
    """The p of a two-sample t-test (pooled variance) of two means of ``n`` runs each, from their stds."""
    return float(stats.ttest_ind_from_stats(mean_a, std_a, n, mean_b, std_b, n, equal_var=True).pvalue)


def wilson_ci(count: float, n: float, level: float = 0.95) -> tuple[float, float]:
    """The one Wilson interval of a share ``count / n``; NaN bounds without items or with a missing count."""
    if not n or np.isnan(n) or np.isnan(count):
        return float("nan"), float("nan")
    low, high = proportion_confint(count, n, alpha=1 - level, method="wilson")
    return float(low), float(high)


def mcnemar_exact(only_a: int, only_b: int) -> float:
    """Exact McNemar p of paired binary outcomes from the discordant counts (missing when there are none)."""
    if only_a + only_b == 0:
        return float("nan")
    return float(mcnemar([[0, only_a], [only_b, 0]], exact=True).pvalue)


def spearman(x: Sequence[float], y: Sequence[float]) -> tuple[float, float]:
    """Spearman's rho and its p (both missing when either side is constant)."""
    a, b = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if a.size < 3 or np.ptp(a) <= TOL or np.ptp(b) <= TOL:
        return float("nan"), float("nan")
    res = stats.spearmanr(a, b)
    return float(res.statistic), float(res.pvalue)


def cluster_difference_ci(values: Sequence[float], in_a: Sequence[bool], clusters: Sequence,
                          n_resamples: int = 10_000, seed: int = SEED,
                          level: float = 0.95) -> tuple[float, float]:
    """Percentile bootstrap CI of ``mean(values[in_a]) - mean(values[~in_a])`` resampling whole clusters."""
    v, a = np.asarray(values, dtype=float), np.asarray(in_a, dtype=bool)
    names, c = np.unique(np.asarray(clusters), return_inverse=True)
    if names.size < 2 or a.all() or not a.any():
        return float("nan"), float("nan")
    per = np.stack([np.bincount(c, weights=w) for w in (v * a, a, v * ~a, ~a)], axis=1)  # (cluster, column)
    s = resample_counts(per.shape[0], n_resamples, seed) @ per  # each column summed over resampled clusters
    with np.errstate(invalid="ignore", divide="ignore"):
        diffs = s[:, 0] / s[:, 1] - s[:, 2] / s[:, 3]
    low, high = _percentile_ci(diffs[np.isfinite(diffs)], level)
    return float(low), float(high)


def auroc_ci(scores: Sequence[float], labels: Sequence[bool], n_resamples: int = 2000, seed: int = SEED,
             level: float = 0.95, groups: Sequence | None = None) -> tuple[float, float]:
    """Percentile bootstrap CI of :func:`auroc`: each class resampled apart, or with ``groups`` the clusters
    resampled whole, each query weighted by its cluster's count (NaN under 2 of either class)."""
    s, y = np.asarray(scores, dtype=float), np.asarray(labels, dtype=bool)
    pos, neg = s[y], s[~y]
    if pos.size < 2 or neg.size < 2:
        return float("nan"), float("nan")
    pairs = (pos[:, None] > neg[None, :]) + 0.5 * (pos[:, None] == neg[None, :])  # (positives, negatives)
    if groups is None:
        w, v = resample_counts(pos.size, n_resamples, seed), resample_counts(neg.size, n_resamples, seed + 1)
    else:
        names, of = np.unique(np.asarray(groups), return_inverse=True)
        counts = resample_counts(names.size, n_resamples, seed)[:, of]  # (resample, query): its cluster's
        w, v = counts[:, y], counts[:, ~y]
    with np.errstate(invalid="ignore", divide="ignore"):
        draws = ((w @ pairs) * v).sum(axis=1) / (w.sum(axis=1) * v.sum(axis=1))
    low, high = _percentile_ci(draws[np.isfinite(draws)], level)
    return float(low), float(high)


def auroc(scores: Sequence[float], labels: Sequence[bool]) -> float:
    """Area under the ROC curve of ``scores`` for ``labels``; NaN when either class is empty."""
    y = np.asarray(labels, dtype=bool)
    if y.all() or not y.any():
        return float("nan")
    return float(roc_auc_score(y, np.asarray(scores, dtype=float)))
