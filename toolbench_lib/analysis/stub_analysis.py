"""PtR's stubs: how many, how varied, how often their own best match is right, and what they cost. A stub's
*top-1* is the first hit of its own search (``text_rankings``), before the merge over the query's stubs."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..config import K
from ..data.queries import DEFAULT_GT, GT_DEFINITIONS, clusters, subset_alias
from ..eval.stats import cluster_difference_ci, grouped_bootstrap_ci, wilson_ci
from ..study.stored import StudyResult
from .intervals import ci_of, with_ci
from .main_results import subset_order
from .summary import method_calls, unique_name_shares

STUB_COLUMNS = ["subset", "stubs_per_query", "unique_name_share", "stub_hit_share", "cos_correct",
                "cos_incorrect", "fallback_share"]
STUB_EXTRA = ["unique_name_share_per_query", "gt", "n_stubs", "n_stub_sets", "n_matched", "n_hits",
              *ci_of("stubs_per_query", "unique_name_share", "stub_hit_share", "cos_correct",
                     "cos_incorrect"), "stub_hit_share_topk", *ci_of("stub_hit_share_topk"),
              "cos_gap", *ci_of("cos_gap"), "cos_sd"]
EXAMPLE_COLUMNS = ["subset", "correct", "qkey", "query", "stub_name", "top1_api_id", "score", "run"]
OVERHEAD_COLUMNS = ["subset", "rtp_tokens", "ptr_tokens", "overhead_pct", "rtp_latency_s", "ptr_latency_s"]
OVERHEAD_EXTRA = ["ptr_stub_tokens", "ptr_stub_latency_s", "n_queries", "n_query_runs",
                  *ci_of("overhead_pct")]
COST_COLUMNS = [f"{v}_{m}" for v in ("tokens", "latency_s") for m in ("rtp_plan", "ptr_stubs", "ptr_plan")]


def stub_top1(result: StudyResult, gt: str = DEFAULT_GT) -> pd.DataFrame:
    """Every stub with its subset, query, own top-1 API, cosine and whether that API is ground truth
    (``correct``); ``any_correct``: whether any API of its own top k (the study's k) is."""
    truth = result.qrels(gt)
    st = result.stubs.merge(result.queries[["qkey", "subset", "query"]], on="qkey")
    h = result.text_rankings
    k = int(result.provenance.get("settings", {}).get("k", K))
    mine = h[(h["method"] == "ptr") & (h["rank"] <= k)].rename(columns={"text_idx": "stub_idx"})
    mine = mine.assign(hit=[a in truth.get(q, set())
                            for q, a in zip(mine["qkey"], mine["api_id"], strict=True)])
    top1 = mine.loc[mine["rank"] == 1, ["qkey", "run", "stub_idx", "api_id", "score"]]
    any_hit = mine.groupby(["qkey", "run", "stub_idx"])["hit"].any().rename("any_correct").reset_index()
    st = st.merge(top1, on=["qkey", "run", "stub_idx"], how="left").merge(
        any_hit, on=["qkey", "run", "stub_idx"], how="left")
    correct = [isinstance(a, str) and a in truth.get(q, set()) for q, a in
               zip(st["qkey"], st["api_id"], strict=True)]
    return st.assign(correct=np.asarray(correct, dtype=bool),
                     any_correct=st["any_correct"].fillna(False).astype(bool))


def stub_stats(result: StudyResult, gts: Sequence[str] = GT_DEFINITIONS) -> pd.DataFrame:
    """Per set and ground truth of ``gts``: stubs per query, distinct-name share (:func:`unique_name_shares`),
    stub hit share, top-1 cosines when right / wrong, their gap and SD, fallback share, with 95% CIs."""
    rows = []
    for gt in gts:
        st = stub_top1(result, gt)
        rows += [_stub_row(st[st["subset"] == subset], subset, gt, result.queries)
                 for subset in subset_order(result)]
    return pd.DataFrame([r for r in rows if r], columns=STUB_COLUMNS + STUB_EXTRA)


def _stub_row(s: pd.DataFrame, subset: str, gt: str, queries: pd.DataFrame) -> dict:
    """:func:`stub_stats`' row of one set's stubs (empty without stubs); its CIs resample the clusters of
    ``queries`` (:func:`~toolbench_lib.data.queries.clusters`)."""
    if s.empty:
        return {}
    s = s.assign(cluster=clusters(queries, s["qkey"]))
    sets = s.groupby(["run", "qkey"]).agg(n=("stub_idx", "size"), fb=("fell_back", "first"))
    pooled, per_query = unique_name_shares(s)
    matched = s[s["api_id"].notna()]
    right, wrong = matched[matched["correct"]], matched[~matched["correct"]]
    row = {"subset": subset_alias(subset), "stubs_per_query": float(sets["n"].mean()),
           "unique_name_share": pooled, "stub_hit_share": float(matched["correct"].mean()),
           "cos_correct": float(right["score"].mean()), "cos_incorrect": float(wrong["score"].mean()),
           "fallback_share": float(sets["fb"].astype(float).mean()),
           "unique_name_share_per_query": per_query, "gt": gt, "n_stubs": int(len(s)),
           "n_stub_sets": int(len(sets)), "n_matched": int(len(matched)),
           "n_hits": int(matched["correct"].sum())}
    per_query = sets["n"].groupby(level="qkey").mean()
    with_ci(row, "stubs_per_query", per_query.to_numpy(dtype=float), clusters(queries, per_query.index))
    per_run = len(s) / max(1, s["run"].nunique())
    row["unique_name_share_ci_low"], row["unique_name_share_ci_high"] = wilson_ci(pooled * per_run, per_run)
    row["stub_hit_share_topk"] = float(matched["any_correct"].mean())
    for name, part, values in (("stub_hit_share", matched, matched["correct"].astype(float)),
                               ("stub_hit_share_topk", matched, matched["any_correct"].astype(float)),
                               ("cos_correct", right, right["score"]),
                               ("cos_incorrect", wrong, wrong["score"])):
        low, high, n = grouped_bootstrap_ci(values, part["cluster"])  # clusters of stubs; NaN under 2 (below)
        row[f"{name}_ci_low"], row[f"{name}_ci_high"] = (low, high) if n >= 2 else (np.nan, np.nan)
    row["cos_gap"], row["cos_sd"] = row["cos_correct"] - row["cos_incorrect"], float(matched["score"].std())
    row["cos_gap_ci_low"], row["cos_gap_ci_high"] = cluster_difference_ci(
        matched["score"], matched["correct"], matched["cluster"])
    return row


def stub_examples(result: StudyResult, gt: str = DEFAULT_GT, n: int = 3, run: int = 0) -> pd.DataFrame:
    """Per subset, the ``n`` most confident correct and incorrect stub matches of ``run`` (highest top-1
    cosine first, ties by query key and stub index; fallback stubs left out)."""
    st = stub_top1(result, gt)
    st = st[(st["run"] == run) & st["api_id"].notna() & ~st["fell_back"].astype(bool)]
    st = st.sort_values(["score", "qkey", "stub_idx"], ascending=[False, True, True])
    parts = [st[(st["subset"] == s) & (st["correct"] == c)].head(n).assign(subset=subset_alias(s))
             for s in subset_order(result) for c in (True, False)]
    if not parts:
        return pd.DataFrame(columns=EXAMPLE_COLUMNS)
    out = pd.concat(parts, ignore_index=True).rename(columns={"name": "stub_name", "api_id": "top1_api_id"})
    return out[EXAMPLE_COLUMNS]


def token_overhead(result: StudyResult) -> pd.DataFrame:
    """Tokens (in + out) and latency per query of each method's own calls over the (query, run) pairs with
    an RtP plan; ``overhead_pct`` = 100 * (PtR - RtP) / RtP, its CI with RtP's mean a fixed denominator."""
    costs = method_calls(result)
    rtp_plans = costs[(costs["method"] == "rtp") & (costs["stage"] == "plan")]
    planned = rtp_plans[["qkey", "run"]].drop_duplicates()
    mine = costs.merge(planned, on=["qkey", "run"])
    if mine.empty:
        return pd.DataFrame({"subset": [subset_alias(s) for s in subset_order(result)], "n_queries": 0,
                             "n_query_runs": 0}, columns=OVERHEAD_COLUMNS + OVERHEAD_EXTRA)
    per = mine.pivot_table(index=["qkey", "run"], columns=["method", "stage"], values=["tokens", "latency_s"],
                           aggfunc="sum", fill_value=0.0)
    per.columns = ["_".join(c) for c in per.columns]  # a call that never happened costs 0
    per = per.reindex(columns=COST_COLUMNS, fill_value=0.0).reset_index()
    per = per.merge(result.queries[["qkey", "subset"]], on="qkey")
    rows = []
    for subset in subset_order(result):
        s = per[per["subset"] == subset]
        if s.empty:
            rows.append({"subset": subset_alias(subset), "n_queries": 0, "n_query_runs": 0})
            continue
        mu = {c: float(s[c].mean()) for c in COST_COLUMNS}
        rtp_tok, stub_tok, stub_lat = mu["tokens_rtp_plan"], mu["tokens_ptr_stubs"], mu["latency_s_ptr_stubs"]
        ptr_tok = stub_tok + mu["tokens_ptr_plan"]
        rows.append({"subset": subset_alias(subset), "rtp_tokens": rtp_tok, "ptr_tokens": ptr_tok,
                     "overhead_pct": 100.0 * (ptr_tok - rtp_tok) / rtp_tok if rtp_tok else np.nan,
                     "rtp_latency_s": mu["latency_s_rtp_plan"],
                     "ptr_latency_s": stub_lat + mu["latency_s_ptr_plan"],
                     "ptr_stub_tokens": stub_tok, "ptr_stub_latency_s": stub_lat,
                     "n_queries": int(s["qkey"].nunique()), "n_query_runs": int(len(s))})
        extra = s["tokens_ptr_stubs"] + s["tokens_ptr_plan"] - s["tokens_rtp_plan"]
        per_query = (100.0 * extra / rtp_tok).groupby(s["qkey"]).mean() if rtp_tok else pd.Series(dtype=float)
        cl = clusters(result.queries, per_query.index)
        with_ci(rows[-1], "overhead_pct", per_query.to_numpy(dtype=float), cl)
    return pd.DataFrame(rows, columns=OVERHEAD_COLUMNS + OVERHEAD_EXTRA)
