"""The one summary of a study: per subset, method and ground truth, every metric over runs (std NaN with one
run; a bootstrap CI resampling the queries' API-sample clusters), pass rate and cost."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..data.normalize import norm_text
from ..data.queries import DEFAULT_GT, GT_DEFINITIONS, check_gt, clusters, resolve_subset, subset_alias
from ..eval.evaluation import METRICS, per_query_runs
from ..eval.pass_rates import pass_rate_table
from ..eval.stats import grouped_bootstrap_ci
from ..retrieval.methods import load_methods
from ..retrieval.retrievers import split_method

RETRIEVAL_METRICS = ("recall", "precision")


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    arr = np.asarray(values, dtype=float)
    nan = float("nan")
    return float(arr.mean()) if arr.size else nan, float(arr.std(ddof=1)) if arr.size > 1 else nan


def pass_rates(result) -> pd.DataFrame:
    """``subset, method, run, pass_rate, n_judged, n_planned``: share of judged plans rated Solved."""
    cols = ["subset", "method", "run", "pass_rate", "n_judged", "n_planned"]
    plans = result.plans
    if plans.empty or "verdict" not in plans:
        return pd.DataFrame(columns=cols)
    p = plans.merge(result.queries[["qkey", "subset"]], on="qkey")
    p = p.assign(judged=p["verdict"].notna(), solved=p["verdict"] == "Solved")
    out = (p.groupby(["subset", "method", "run"], sort=False)
           .agg(n_judged=("judged", "sum"), n_solved=("solved", "sum"), n_planned=("qkey", "nunique"))
           .reset_index())
    out["pass_rate"] = np.where(out["n_judged"] > 0, out["n_solved"] / out["n_judged"].clip(lower=1), np.nan)
    return out[cols]


METHOD_STAGES = ("stubs", "plan")  # a method's own calls; the judge is evaluation, not a method's cost
CALL_COLUMNS = ["qkey", "subset", "run", "method", "stage", "tokens_in", "tokens_out", "tokens", "latency_s"]


def method_calls(result) -> pd.DataFrame:
    """The methods' own LLM calls (stubs and plans), one row each, with ``tokens`` = in + out: the one
    source of every cost and token figure."""
    calls = result.calls
    if calls is None or calls.empty:
        return pd.DataFrame(columns=CALL_COLUMNS)
    c = calls[calls["stage"].isin(METHOD_STAGES)].merge(result.queries[["qkey", "subset"]], on="qkey")
    c = c.assign(tokens=c["tokens_in"] + c["tokens_out"])
    if "latency_s" not in c:  # tables written without timings
        c = c.assign(latency_s=np.nan)
    return c[CALL_COLUMNS].reset_index(drop=True)


STUB_CALLER = "ptr"  # the method under which a run's one stub call per query is recorded


def stub_users(result) -> list[str]:
    """The study's methods other than PtR that read PtR's stubs (``ptr@bm25``, ``fuse4``, ``rrf``, ...): each
    pays the run's stub call as PtR does."""
    known = load_methods()
    return [m for m in result.methods if m != STUB_CALLER and m in known and known[m].uses_stubs]


def method_cost(result) -> pd.DataFrame:
    """Per set and method, the mean call of each of its own stages summed over stages; a method that reads the
    stubs (:func:`stub_users`) is charged the stub call recorded under PtR."""
    cols = ["subset", "method", "tokens_in", "tokens_out", "latency_s", "llm_calls"]
    c = method_calls(result)
    stubs = c[(c["method"] == STUB_CALLER) & (c["stage"] == "stubs")]
    if len(stubs):
        c = pd.concat([c, *(stubs.assign(method=m) for m in stub_users(result))], ignore_index=True)
    if c.empty:
        return pd.DataFrame(columns=cols)
    by_stage = (c.groupby(["subset", "method", "stage"], sort=False)[["tokens_in", "tokens_out", "latency_s"]]
                .mean().reset_index())
    out = by_stage.groupby(["subset", "method"], sort=False)[["tokens_in", "tokens_out", "latency_s"]].sum()
    out["llm_calls"] = by_stage.groupby(["subset", "method"], sort=False)["stage"].size()
    return out.reset_index()[cols]


def unique_name_shares(stubs: pd.DataFrame) -> tuple[float, float]:
    """``(pooled, per_query)`` shares of distinct normalised stub names over stubs: per run over all stubs
    (averaged over runs), and per query's stub set (averaged over stub sets)."""
    if stubs.empty:
        return float("nan"), float("nan")
    names = stubs.assign(norm=stubs["name"].map(norm_text))
    pooled = names.groupby("run")["norm"].agg(lambda s: s.nunique() / len(s)).mean()
    per_query = names.groupby(["run", "qkey"])["norm"].agg(lambda s: s.nunique() / len(s)).mean()
    return float(pooled), float(per_query)


def stub_stats(result) -> pd.DataFrame:
    """``subset, stubs_per_query, fallback_stubs, unique_stub_name_share``: PtR's stubs per set (the share
    pooled per set and run, as :func:`unique_name_shares`)."""
    cols = ["subset", "stubs_per_query", "fallback_stubs", "unique_stub_name_share"]
    st = result.stubs
    if st is None or st.empty:
        return pd.DataFrame(columns=cols)
    st = st.merge(result.queries[["qkey", "subset"]], on="qkey")
    rows = []
    for subset, g in st.groupby("subset", sort=False):
        per_q = g.groupby(["run", "qkey"]).agg(n=("stub_idx", "size"), fb=("fell_back", "first"))
        rows.append({"subset": subset, "stubs_per_query": float(per_q["n"].mean()),
                     "fallback_stubs": int(per_q["fb"].sum()),
                     "unique_stub_name_share": unique_name_shares(g)[0]})
    return pd.DataFrame(rows, columns=cols)


def plan_stats(result, subset: str, method: str) -> dict:
    """Mean fidelity (tolerant, and strict where stored) and refusal rate of the method's plans in a set."""
    plans = result.plans
    if plans is None or plans.empty:
        return {}
    keys = set(result.queries.loc[result.queries["subset"] == subset, "qkey"])
    pm = plans[(plans["method"] == method) & plans["qkey"].isin(keys)]
    if pm.empty:
        return {}
    out = {"refusal_rate": float(pm["refusal"].mean())}
    for col in ("fidelity", "fidelity_strict"):
        if col in pm:
            out[col] = float(pd.to_numeric(pm[col], errors="coerce").dropna().mean())
    return out


def objective_pass_rates(result) -> dict[tuple[str, str], dict]:
    """``{(subset, method): {objective_pass_rate, judge_kappa, ...}}``, means over runs (relevant ground
    truth; :mod:`toolbench_lib.eval.pass_rates`, definitions in :mod:`toolbench_lib.analysis.judge`)."""
    if result.plans is None or result.plans.empty or "verdict" not in result.plans:
        return {}
    t = pass_rate_table(result, gt="relevant")
    out = {}
    for (subset, method), g in t.groupby(["subset", "method"], sort=False):
        out[(subset, method)] = {"objective_pass_rate": float(g["objective_pass_rate"].mean()),
                                 "judge_kappa": float(g["kappa"].mean()),
                                 "judge_version": ",".join(sorted(set(g["judge_version"]) - {""}))}
    return out


def summary_table(result, k: int | None = None, gts: Sequence[str] = GT_DEFINITIONS,
                  metrics: Sequence[str] = RETRIEVAL_METRICS, n_resamples: int = 2000) -> pd.DataFrame:
    """Per subset, method and ground truth: ``architecture``, ``retriever``, per metric mean and std over runs
    and CI over queries, the pass rate, ``n_planned``, the cost per query and PtR's stub statistics."""
    k = k or int(result.provenance.get("settings", {}).get("k", 5))
    pr = pass_rates(result)
    objective = objective_pass_rates(result)
    cost = method_cost(result).set_index(["subset", "method"])
    stubs = stub_stats(result).set_index("subset")
    subsets = list(dict.fromkeys(result.queries["subset"]))
    rows = []
    for gt in [check_gt(g) for g in gts]:
        pq = per_query_runs(result, k, gt, metrics)
        for subset in subsets:
            for method in result.methods:
                m = pq[(pq["subset"] == subset) & (pq["method"] == method)]
                architecture, family = split_method(method)
                row = {"subset": subset_alias(subset), "subset_name": subset, "method": method,
                       "architecture": architecture, "retriever": family, "gt": gt, "k": k,
                       "n_queries": int(m["qkey"].nunique()), "n_runs": int(m["run"].nunique())}
                by_run = m.groupby("run")[list(metrics)].mean()
                by_query = m.groupby("qkey")[list(metrics)].mean()
                cl = clusters(result.queries, by_query.index)
                for metric in metrics:
                    row[f"{metric}_mean"], row[f"{metric}_std"] = _mean_std(by_run[metric])
                    row[f"{metric}_ci_low"], row[f"{metric}_ci_high"] = grouped_bootstrap_ci(
                        by_query[metric].to_numpy(), cl, n_resamples)[:2]
                p = pr[(pr["subset"] == subset) & (pr["method"] == method)]
                row["judged_pass_rate_mean"], row["judged_pass_rate_std"] = _mean_std(p["pass_rate"].dropna())
                row["n_planned"] = int(p["n_planned"].max()) if len(p) else 0
                row[f"{metrics[0]}_by_run"] = [round(float(v), 6) for v in by_run[metrics[0]]]
                row.update(plan_stats(result, subset, method))
                row.update(objective.get((subset, method), {}))
                if (subset, method) in cost.index:
                    row.update(cost.loc[(subset, method)].to_dict())
                if architecture != "rtp" and subset in stubs.index:
                    row.update(stubs.loc[subset].to_dict())
                rows.append(row)
    return pd.DataFrame(rows)


def _clean(value):
    """JSON-ready scalar: NaN becomes ``None``, numpy scalars become Python ones."""
    if isinstance(value, float | np.floating):
        return None if np.isnan(value) else float(value)
    return int(value) if isinstance(value, np.integer) else value


def summary_json(result, subsets: Sequence[str], k: int, gt: str = DEFAULT_GT) -> dict:
    """The ``evaluate --json`` object: provenance, then per subset alias and method the summary's row (every
    metric of eval, its mean over runs under the metric's name)."""
    table = summary_table(result, k, [gt], METRICS)
    out = {**result.provenance, "k": k, "gt": gt, "subsets": {}}
    skip = {"subset", "subset_name", "method", "gt", "k"}
    for name in subsets:
        subset = resolve_subset(name)
        part = table[table["subset_name"] == subset]
        n = int(part["n_queries"].max()) if len(part) else 0
        entry = {"subset": subset, "n_queries": n, "methods": {}}
        for _, row in part.iterrows():
            res = {c: _clean(v) for c, v in row.items() if c not in skip}
            res.update({m: res.pop(f"{m}_mean") for m in METRICS})
            res["judged_pass_rate"] = res.pop("judged_pass_rate_mean", None)
            entry["methods"][row["method"]] = res
        if len(entry["methods"]) == 1:
            only = next(iter(entry["methods"].values()))
            entry.update({"recall": only["recall"], "precision": only["precision"]})
        out["subsets"][name] = entry
    return out
