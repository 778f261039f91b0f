"""Adaptive routing between RtP and PtR by K-fold cross-validation (RtP's top-1 cosine, or a logistic model on
text features) against fixed policies and the oracle; queries without a plan call get their set's mean."""

from __future__ import annotations

import re
from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..config import FOLDS, SEED
from ..data.folds import query_folds
from ..data.queries import DEFAULT_GT, clusters, subset_alias
from ..eval.evaluation import per_query_runs
from ..eval.stats import auroc, auroc_ci
from ..study.stored import StudyResult
from .style import METHOD_COLORS, set_panels, side_legend
from .summary import method_calls

FEATURES = ("n_words", "n_clauses", "n_conjunctions", "n_requests")
CONJUNCTIONS = frozenset({"and", "also", "plus", "additionally", "moreover", "furthermore", "then",
                          "besides", "another"})
REQUEST_PHRASES = ("can you", "could you", "would you", "please", "i want", "i need", "i'd like",
                   "i would like", "help me", "tell me", "give me", "provide me", "let me know",
                   "suggest", "recommend")
POLICIES = ("always_rtp", "always_ptr", "by_subset", "router_top1_cosine", "router_features", "oracle")
# The paper's own routing: RtP for single-tool queries (G1), PtR for multi-tool ones (G2, G3).
RTP_SUBSETS = ("G1",)
# Signals oriented so that a higher value is expected to favour PtR (fixed before looking at data).
SIGNALS = {"rtp_top1_cosine_low": "low RtP top-1 cosine", "n_words": "more words",
           "n_clauses": "more clauses", "n_conjunctions": "more conjunctions",
           "n_requests": "more requests", "router_features": "cross-validated feature-model probability"}


def query_features(queries: Sequence[str]) -> pd.DataFrame:
    """Cheap text features of each query (columns :data:`FEATURES`): words, clauses (split at sentence ends,
    semicolons, colons or commas), conjunctions (plus "as well"), and question marks plus request phrases."""
    rows = []
    for q in queries:
        low = q.lower()
        words = re.findall(r"[a-z0-9']+", low)
        clauses = [s for s in re.split(r"[.!?;:]+|,", low) if re.search(r"[a-z0-9]", s)]
        n_conj = sum(w in CONJUNCTIONS for w in words) + low.count("as well")
        n_req = low.count("?") + sum(len(re.findall(rf"\b{re.escape(p)}\b", low)) for p in REQUEST_PHRASES)
        rows.append({"n_words": len(words), "n_clauses": max(1, len(clauses)), "n_conjunctions": n_conj,
                     "n_requests": n_req})
    return pd.DataFrame(rows, columns=list(FEATURES))


def best_threshold(signal: np.ndarray, gain: np.ndarray) -> float:
    """The ``t`` for "PtR when signal > t" that maximises the summed ``gain`` (PtR − RtP recall); cuts fall
    between distinct values, ties route fewest. ``inf`` routes nothing, ``-inf`` everything."""
    signal = np.asarray(signal, dtype=float)
    order = np.argsort(-signal, kind="stable")
    s, g = signal[order], np.asarray(gain, dtype=float)[order]
    total = np.concatenate([[0.0], np.cumsum(g)])
    valid = np.ones(len(total), dtype=bool)
    valid[1:-1] = s[:-1] != s[1:]  # a cut after position i needs s[i] > s[i+1]
    total = np.where(valid, total, -np.inf)
    cut = int(np.argmax(np.round(total, 12)))
    return float("inf") if cut == 0 else float("-inf") if cut == len(s) else float((s[cut - 1] + s[cut]) / 2)


def fit_logistic(x: np.ndarray, y: np.ndarray, l2: float = 1.0, max_iter: int = 100) -> np.ndarray:
    """Weights ``[intercept, coefs...]`` of a ridge-penalised logistic regression (Newton's method)."""
    xb = np.column_stack([np.ones(len(x)), x])
    w = np.zeros(xb.shape[1])
    pen = np.full(len(w), float(l2))
    pen[0] = 1e-6
    y = np.asarray(y, dtype=float)
    for _ in range(max_iter):
        p = 1.0 / (1.0 + np.exp(-np.clip(xb @ w, -30, 30)))
        grad = xb.T @ (p - y) + pen * w
        hess = (xb.T * (p * (1 - p))) @ xb + np.diag(pen)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.max(np.abs(step)) < 1e-8:
            break
    return w


def predict_logistic(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.clip(w[0] + x @ w[1:], -30, 30)))


def cv_threshold_routes(signal: np.ndarray, gain: np.ndarray,
                        folds: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-fold routes (True = PtR) and the threshold applied to each item, chosen on other folds."""
    signal = np.asarray(signal, dtype=float)
    routes = np.zeros(len(signal), dtype=bool)
    thresholds = np.zeros(len(signal))
    for f in np.unique(folds):
        test = folds == f
        t = best_threshold(signal[~test], gain[~test])
        routes[test] = signal[test] > t
        thresholds[test] = t
    return routes, thresholds


def cv_feature_routes(x: np.ndarray, label: np.ndarray, gain: np.ndarray, folds: np.ndarray,
                      l2: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """Out-of-fold (probability, route) of the feature model (standardised on, and fit with its threshold
    on, the other folds)."""
    x = np.asarray(x, dtype=float)
    prob = np.zeros(len(x))
    routes = np.zeros(len(x), dtype=bool)
    for f in np.unique(folds):
        test = folds == f
        mu, sd = x[~test].mean(axis=0), x[~test].std(axis=0)
        sd[sd == 0] = 1.0
        w = fit_logistic((x[~test] - mu) / sd, label[~test], l2)
        t = best_threshold(predict_logistic(w, (x[~test] - mu) / sd), gain[~test])
        prob[test] = predict_logistic(w, (x[test] - mu) / sd)
        routes[test] = prob[test] > t
    return prob, routes


def query_tokens(result: StudyResult) -> pd.DataFrame:
    """Per query: RtP's and PtR's method tokens (in + out, mean over runs) and whether plan tokens
    were imputed from the set's mean (queries without a plan call)."""
    out = result.queries[["qkey", "subset"]].copy()
    if result.calls.empty:
        return out.assign(rtp_tokens=np.nan, ptr_tokens=np.nan, plan_tokens_imputed=True)
    per_run = method_calls(result).groupby(["qkey", "method", "stage", "run"])["tokens"].sum()
    per_q = per_run.groupby(["qkey", "method", "stage"]).mean().unstack(["method", "stage"])
    imputed, plans = np.zeros(len(out), dtype=bool), {}
    for method in ("rtp", "ptr"):
        plan = out["qkey"].map(per_q[(method, "plan")]) if (method, "plan") in per_q else pd.Series(
            np.nan, index=out.index)
        imputed |= plan.isna().to_numpy()
        plans[method] = plan.fillna(plan.groupby(out["subset"]).transform("mean")).fillna(plan.mean())
    stubs = out["qkey"].map(per_q[("ptr", "stubs")]) if ("ptr", "stubs") in per_q else np.nan
    return out.assign(rtp_tokens=plans["rtp"], ptr_tokens=plans["ptr"] + stubs, plan_tokens_imputed=imputed)


def routing_frame(result: StudyResult, k: int, gt: str = DEFAULT_GT) -> pd.DataFrame:
    """Per query: recall/precision of both methods (PtR: mean over runs), the label "PtR beats RtP",
    RtP's top-1 cosine, text features and token costs."""
    pq = per_query_runs(result, k, gt)
    mean = pq.groupby(["qkey", "method"])[["recall", "precision"]].mean().unstack("method")
    out = result.queries[["qkey", "subset", "query"]].copy()
    for method in ("rtp", "ptr"):
        for metric in ("recall", "precision"):
            out[f"{method}_{metric}"] = out["qkey"].map(mean[(metric, method)]).fillna(0.0).to_numpy()
    out["gain"] = out["ptr_recall"] - out["rtp_recall"]
    out["ptr_wins"] = out["gain"] > 1e-12
    h = result.rankings
    top1 = h[(h["method"] == "rtp") & (h["run"] == 0) & (h["rank"] == 1)].set_index("qkey")["score"]
    out["rtp_top1_cosine"] = out["qkey"].map(top1).to_numpy(dtype=float)
    out = pd.concat([out.reset_index(drop=True), query_features(out["query"].tolist())], axis=1)
    tokens = query_tokens(result)[["qkey", "rtp_tokens", "ptr_tokens", "plan_tokens_imputed"]]
    out = out.merge(tokens, on="qkey", how="left")
    out["subset"] = out["subset"].map(subset_alias)
    return out.assign(cluster=clusters(result.queries, out["qkey"]))  # its API sample, as the paired test's


def route_queries(frame: pd.DataFrame, folds: int = FOLDS, seed: int = SEED, l2: float = 1.0) -> pd.DataFrame:
    """Add cross-validated routes (``route_<policy>``, True = PtR), scores and fold numbers."""
    fold = query_folds(frame["subset"].to_numpy(), frame["query"], frame["cluster"], folds, seed)
    gain = frame["gain"].to_numpy()
    low_cos = -frame["rtp_top1_cosine"].fillna(frame["rtp_top1_cosine"].mean()).to_numpy()
    routes, thresholds = cv_threshold_routes(low_cos, gain, fold)
    x = frame[list(FEATURES)].to_numpy(float)
    prob, feature_routes = cv_feature_routes(x, frame["ptr_wins"].to_numpy(), gain, fold, l2)
    return frame.assign(fold=fold, rtp_top1_cosine_low=low_cos, route_router_top1_cosine=routes,
                        top1_cosine_threshold=-thresholds,  # PtR when the top-1 cosine is below it
                        router_features=prob, route_router_features=feature_routes, route_always_rtp=False,
                        route_always_ptr=True, route_by_subset=~frame["subset"].astype(str).isin(RTP_SUBSETS),
                        route_oracle=frame["ptr_wins"])


def _policy_row(part: pd.DataFrame, policy: str) -> dict:
    """One policy's row of :func:`routing_table` over the queries of ``part``."""
    r = part[f"route_{policy}"].to_numpy(bool)
    recall = np.where(r, part["ptr_recall"], part["rtp_recall"])
    precision = np.where(r, part["ptr_precision"], part["rtp_precision"])
    tokens = np.where(r, part["ptr_tokens"], part["rtp_tokens"]).astype(float)
    tpq = float(np.mean(tokens)) if len(tokens) else float("nan")
    ref = float(part["ptr_tokens"].mean())
    return {"policy": policy, "recall": float(recall.mean()), "precision": float(precision.mean()),
            "tokens_per_query": tpq, "share_routed_ptr": float(r.mean()),
            "tokens_saved_vs_ptr_pct": 100 * (1 - tpq / ref) if ref else float("nan"), "n_queries": len(part),
            "plan_tokens_imputed_share": float(part["plan_tokens_imputed"].mean())}


def routing_table(routed: pd.DataFrame, by_subset: bool = True) -> pd.DataFrame:
    """The ``routing`` table: per set (or pooled, ``subset="all"``) and policy."""
    groups = routed.groupby("subset", sort=False) if by_subset else [("all", routed)]
    return pd.DataFrame([{"subset": subset, **_policy_row(part, policy)} for subset, part in groups
                         for policy in POLICIES])


def routing_signal_table(routed: pd.DataFrame, by_subset: bool = True) -> pd.DataFrame:
    """The ``routing_signal`` table: AUROC of each signal for "PtR beats RtP on this query", with its
    clustered bootstrap 95% CI, per set (or pooled, ``subset="all"``)."""
    groups = routed.groupby("subset", sort=False) if by_subset else [("all", routed)]
    return pd.DataFrame([_auroc_row(subset, signal, part["ptr_wins"].to_numpy(bool), part, meaning)
                         for subset, part in groups for signal, meaning in SIGNALS.items()])


def _auroc_row(subset: str, signal: str, y: np.ndarray, part: pd.DataFrame, meaning: str) -> dict:
    """A ``routing_signal`` row: the AUROC of ``part``'s ``signal`` for ``y``, its CI resampling clusters."""
    x = part[signal].to_numpy(float)
    low, high = auroc_ci(x, y, groups=part.get("cluster"))
    return {"subset": subset, "signal": signal, "auroc": auroc(x, y), "auroc_ci_low": low,
            "auroc_ci_high": high, "higher_means": meaning, "n_ptr_wins": int(part["ptr_wins"].sum()),
            "n_queries": len(part)}


MULTI_TOOL = "G1 vs G2, G3"  # routing_signal's row for the paper's own reading of the top-1 cosine


def set_signal_row(routed: pd.DataFrame, signal: str = "rtp_top1_cosine_low") -> pd.DataFrame:
    """The paper's reading of RtP's top-1 cosine: its AUROC for "a multi-tool query" (not in
    :data:`RTP_SUBSETS`), as a ``routing_signal`` row (:data:`MULTI_TOOL`); none without both kinds."""
    y = ~routed["subset"].astype(str).isin(RTP_SUBSETS).to_numpy()
    return (pd.DataFrame() if y.all() or not y.any()
            else pd.DataFrame([_auroc_row(MULTI_TOOL, signal, y, routed, "a multi-tool query (G2, G3)")]))


def threshold_curve(routed: pd.DataFrame, signal: str) -> pd.DataFrame:
    """Recall against share routed to PtR for every cut of ``signal`` (in-sample, descriptive)."""
    rows = []
    for subset, part in routed.groupby("subset", sort=False):
        gain = part["gain"].to_numpy()[np.argsort(-part[signal].to_numpy(float), kind="stable")]
        base = part["rtp_recall"].sum()
        n = len(part)
        cum = np.concatenate([[0.0], np.cumsum(gain)])
        rows.extend({"subset": subset, "signal": signal, "share_routed_ptr": i / n,
                     "recall": (base + cum[i]) / n} for i in range(n + 1))
    return pd.DataFrame(rows)


def plot_routing_curves(routed: pd.DataFrame, table: pd.DataFrame, k: int) -> plt.Figure:
    """Recall@k against the share routed to PtR, one panel per set, with every policy's point."""
    fig, panels = set_panels(routed, 3.8)
    curves = pd.concat([threshold_curve(routed, s) for s in ("rtp_top1_cosine_low", "router_features")])
    styles = {"rtp_top1_cosine_low": ("RtP top-1 cosine (low first)", "-"),
              "router_features": ("feature model (out-of-fold)", "--")}
    router = METHOD_COLORS["router"]
    marks = {"always_rtp": ("o", METHOD_COLORS["rtp"]), "always_ptr": ("o", METHOD_COLORS["ptr"]),
             "by_subset": ("^", router), "router_top1_cosine": ("s", router),
             "router_features": ("D", router), "oracle": ("*", METHOD_COLORS["oracle"])}
    for ax, subset, _ in panels:
        for signal, (label, ls) in styles.items():
            c = curves[(curves["subset"] == subset) & (curves["signal"] == signal)]
            ax.plot(c["share_routed_ptr"], c["recall"], ls=ls, color="0.35", label=label, lw=1.2)
        for _, row in table[table["subset"] == subset].iterrows():
            marker, color = marks[row["policy"]]
            ax.scatter(row["share_routed_ptr"], row["recall"], marker=marker, color=color, s=60, zorder=3,
                       label=row["policy"])
        ax.set_xlabel("share of queries routed to PtR")
        ax.set_ylabel(f"recall@{k}")
    side_legend(fig, panels[0][0])
    fig.suptitle("Routing: recall against the share sent to PtR (curves: every threshold, in-sample)")
    fig.tight_layout()
    return fig


def routing_analysis(result: StudyResult, k: int, gt: str = DEFAULT_GT, folds: int = FOLDS,
                     seed: int = SEED) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``(routing, routing_signal, per-query routed frame)`` of a stored study; the signal table ends on the
    paper's own reading of the top-1 cosine (:func:`set_signal_row`)."""
    routed = route_queries(routing_frame(result, k, gt), folds, seed)
    table = routing_table(routed)
    table.insert(2, "k", k)
    table.insert(3, "gt", gt)
    signal = pd.concat([routing_signal_table(routed), set_signal_row(routed)], ignore_index=True)
    return table, signal, routed
