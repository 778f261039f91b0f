"""What the planner does with what it was shown (the merged top-k of its method and run): fidelity,
divergence between methods, refusals. Plans exist for the first ``plan_limit`` queries of each set."""

from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..data.queries import DEFAULT_GT, check_gt, clusters, subset_alias
from ..eval.evaluation import per_query_runs
from ..eval.stats import t_ci
from ..study.result import METHODS
from ..study.stored import StudyResult
from .intervals import ci_of, with_ci
from .main_results import study_k, subset_order
from .style import LEGEND_SIZE, METHOD_COLORS, METHOD_LABELS, paper_marks

TRAJECTORY_COLUMNS = ["subset", "method", "fidelity", "jaccard_rtp_ptr", "used_share", "mean_steps",
                      "mean_apis_named", "refusal_rate", "n_plans"]
# Means over a set's plans (column: the plan's field), each with a CI over queries.
PLAN_MEANS = {"fidelity": "fidelity", "used_share": "used_share", "mean_steps": "n_steps",
              "mean_apis_named": "n_named", "refusal_rate": "refusal"}
TRAJECTORY_EXTRA = ["n_queries", "n_jaccard_pairs", "parse_fail_rate", "mean_unresolved_named",
                    *ci_of("fidelity", "jaccard_rtp_ptr", "used_share", "mean_steps", "mean_apis_named",
                           "refusal_rate")]
PAIRED = {"apis_named": "n_named", "used_share": "used_share", "steps": "n_steps"}  # PtR − RtP per query
TRAJECTORY_EXTRA += [c for name in PAIRED for c in (f"{name}_ptr_minus_rtp", *ci_of(f"{name}_ptr_minus_rtp"))]
MISS_COLUMNS = ["subset", "method", "n_complete_miss", "refusal_rate_on_miss", "wrong_tool_rate_on_miss"]
MISS_EXTRA = ["gt", "n_plans", "n_miss_queries", "no_api_rate_on_miss", "n_refusal_on_miss",
              "n_wrong_tool_on_miss", *ci_of("refusal_rate_on_miss", "wrong_tool_rate_on_miss")]


def jaccard(a: set, b: set) -> float:
    """|A ∩ B| / |A ∪ B|; NaN when both sets are empty (nothing to compare)."""
    union = a | b
    return len(a & b) / len(union) if union else float("nan")


def plan_table(result: StudyResult, k: int | None = None) -> pd.DataFrame:
    """One row per plan with its subset, named APIs as a set, the top-``k`` it saw and their overlap."""
    k = k or study_k(result)
    p = result.plans.merge(result.queries[["qkey", "subset"]], on="qkey")
    final = result.rankings[result.rankings["rank"] <= k].sort_values("rank")
    top = final.groupby(["qkey", "method", "run"], sort=False)["api_id"].apply(list).to_dict()
    named = [set(x) if x is not None else set() for x in p["named_ids"]]
    shown = [top.get((q, m, r), []) for q, m, r in zip(p["qkey"], p["method"], p["run"], strict=True)]
    used = [len(n & set(s)) / len(s) if s else np.nan for n, s in zip(named, shown, strict=True)]
    return p.assign(named=named, shown=shown, n_named=[len(n) for n in named], used_share=used)


def jaccard_pairs(plans: pd.DataFrame) -> pd.DataFrame:
    """``qkey, subset, run, jaccard`` of RtP's and PtR's named APIs for the same query and run."""
    r = plans[plans["method"] == "rtp"][["qkey", "subset", "run", "named"]]
    p = plans[plans["method"] == "ptr"][["qkey", "run", "named"]]
    m = r.merge(p, on=["qkey", "run"], suffixes=("_rtp", "_ptr"))
    values = [jaccard(a, b) for a, b in zip(m["named_rtp"], m["named_ptr"], strict=True)]
    return m[["qkey", "subset", "run"]].assign(jaccard=values)


def trajectory(result: StudyResult, k: int | None = None) -> pd.DataFrame:
    """Per subset and method: fidelity, RtP–PtR Jaccard of named APIs (per query and run, the same on both
    rows), share of the shown top-``k`` named, plan size, refusal rate, each with a bootstrap 95% CI over
    queries; PtR minus RtP APIs named, used share and steps (:data:`PAIRED`), with their paired CIs."""
    if result.plans.empty:
        return pd.DataFrame(columns=TRAJECTORY_COLUMNS + TRAJECTORY_EXTRA)
    plans = plan_table(result, k)
    jac = jaccard_pairs(plans)
    rows = []
    per_query = plans.groupby(["subset", "qkey", "method"])[list(PAIRED.values())].mean()
    wide = {name: per_query[src].unstack("method") for name, src in PAIRED.items()}  # a column per method
    for subset in subset_order(result):
        js = jac[jac["subset"] == subset]["jaccard"].dropna()
        gaps = {}  # per query planned by both: PtR's minus RtP's
        for name, w in wide.items():
            both = w.loc[subset].dropna() if subset in w.index and {"rtp", "ptr"} <= set(w) else None
            gaps[name] = (both["ptr"] - both["rtp"]) if both is not None else pd.Series(dtype=float)
        for method in METHODS:
            m = plans[(plans["subset"] == subset) & (plans["method"] == method)]
            if m.empty:
                continue
            m = m.assign(refusal=m["refusal"].astype(float))
            row = {"subset": subset_alias(subset), "method": method, "jaccard_rtp_ptr": float(js.mean()),
                   "n_plans": int(len(m)), "n_queries": int(m["qkey"].nunique()), "n_jaccard_pairs": len(js),
                   "parse_fail_rate": float(1.0 - m["parse_ok"].astype(float).mean()),
                   "mean_unresolved_named": float(m["n_named_unresolved"].mean())
                   if "n_named_unresolved" in m else np.nan}
            by_query = m.groupby("qkey")[list(PLAN_MEANS.values())].mean()
            cl = clusters(result.queries, by_query.index)
            for col, src in PLAN_MEANS.items():
                row[col] = float(m[src].mean())
                with_ci(row, col, by_query[src].to_numpy(dtype=float), cl)
            jq = jac[jac["subset"] == subset].groupby("qkey")["jaccard"].mean()
            with_ci(row, "jaccard_rtp_ptr", jq.to_numpy(dtype=float), clusters(result.queries, jq.index))
            for name, gap in gaps.items():  # a paired difference: the paired t-test's CI
                row[f"{name}_ptr_minus_rtp"] = float(gap.mean())
                low, high = t_ci(gap.to_numpy(dtype=float), groups=clusters(result.queries, gap.index))
                row[f"{name}_ptr_minus_rtp_ci_low"], row[f"{name}_ptr_minus_rtp_ci_high"] = low, high
            rows.append(row)
    return pd.DataFrame(rows, columns=TRAJECTORY_COLUMNS + TRAJECTORY_EXTRA)


def miss_behaviour(result: StudyResult, gt: str = DEFAULT_GT, k: int | None = None) -> pd.DataFrame:
    """Over plans whose shown top-``k`` holds no ground-truth API (complete misses): the shares that
    refused, named an API anyway (a wrong tool) or neither, with counts and 95% CIs resampling API samples
    (NaN without), per set and method, then pooled over both (subset ``all``, method ``both``)."""
    check_gt(gt)
    if result.plans.empty:
        return pd.DataFrame(columns=MISS_COLUMNS + MISS_EXTRA)
    k = k or study_k(result)
    plans = plan_table(result, k)
    hits = per_query_runs(result, k, gt)[["qkey", "method", "run", "hits"]]  # the evaluation's count
    found = plans[["qkey", "method", "run"]].merge(hits, on=["qkey", "method", "run"], how="left")["hits"]
    plans = plans.assign(complete_miss=found.fillna(0).to_numpy() == 0)
    units = [(subset_alias(s), method, (plans["subset"] == s) & (plans["method"] == method))
             for s in subset_order(result) for method in METHODS]
    rows = []
    for subset, method, mask in [*units, ("all", "both", plans["method"].isin(METHODS))]:
        m = plans[mask]
        if m.empty:
            continue
        mm = m[m["complete_miss"]]
        refused = mm["refusal"].astype(bool)
        named = (mm["n_named"] > 0) & ~refused
        rows.append({"subset": subset, "method": method, "n_complete_miss": len(mm),
                     "refusal_rate_on_miss": float(refused.mean()),  # NaN without a miss
                     "wrong_tool_rate_on_miss": float(named.mean()),
                     "gt": gt, "n_plans": int(len(m)), "n_miss_queries": int(mm["qkey"].nunique()),
                     "no_api_rate_on_miss": float((~refused & ~named).mean()),
                     "n_refusal_on_miss": int(refused.sum()), "n_wrong_tool_on_miss": int(named.sum())})
        cl = clusters(result.queries, mm["qkey"])  # its sample: one cluster (both plans of a query in it)
        with_ci(rows[-1], "refusal_rate_on_miss", refused.to_numpy(dtype=float), cl)
        with_ci(rows[-1], "wrong_tool_rate_on_miss", named.to_numpy(dtype=float), cl)
    return pd.DataFrame(rows, columns=MISS_COLUMNS + MISS_EXTRA)


FIGURE4_DIMENSIONS = (("fidelity", "fidelity"), ("jaccard_rtp_ptr", "Jaccard RtP–PtR"),
                      ("used_share", "retrieved APIs used"), ("mean_steps", "plan steps"),
                      ("mean_apis_named", "APIs named"))


PAIR_COLUMNS = ("jaccard_rtp_ptr",)  # measured on the pair of plans, the same for both architectures


def figure4(traj: pd.DataFrame, paper: dict | None = None):
    """The paper's Figure 4: the five trajectory dimensions per set and method, one panel each; ``paper``
    maps ``(subset or "all", method or None, column)`` to the paper's value (diamonds or a dashed line)."""
    subsets = list(dict.fromkeys(traj["subset"]))
    methods = [m for m in ("rtp", "ptr") if m in set(traj["method"])]
    fig, axes = plt.subplots(1, len(FIGURE4_DIMENSIONS), figsize=(16, 3.4))
    x = np.arange(len(subsets))
    width = 0.8 / max(1, len(methods))
    for ax, (col, title) in zip(axes, FIGURE4_DIMENSIONS, strict=True):
        if col in PAIR_COLUMNS:  # one value per set for the two plans together: one bar, one diamond
            one = traj.drop_duplicates("subset").set_index("subset").reindex(subsets)
            ax.bar(x, one[col].to_numpy(float), width, color="0.45", label="RtP and PtR plans",
                   yerr=_ci(one, col), error_kw=ERROR_KW)
            refs = [[(paper or {}).get((s, m, col)) for m in (None, *methods)] for s in subsets]
            paper_marks(ax, x, [next((r for r in rs if r is not None), None) for rs in refs])
        else:
            for i, method in enumerate(methods):
                m = traj[traj["method"] == method].set_index("subset").reindex(subsets)
                pos = x + (i - (len(methods) - 1) / 2) * width
                ax.bar(pos, m[col].to_numpy(float), width, color=METHOD_COLORS.get(method),
                       label=METHOD_LABELS.get(method, method), yerr=_ci(m, col), error_kw=ERROR_KW)
                paper_marks(ax, pos, [(paper or {}).get((s, method, col)) for s in subsets])
            for key, ref in (paper or {}).items():
                if key[0] == "all" and key[2] == col:
                    ax.axhline(ref, ls="--", lw=1, color=METHOD_COLORS.get(key[1], "grey"))
        ax.set_xticks(x, subsets)
        ax.set_title(title)
    labels = {}  # every panel's entries once, below the panels
    for ax in axes:
        labels.update({lab: h for h, lab in zip(*ax.get_legend_handles_labels(), strict=True)})
    fig.legend(labels.values(), labels.keys(), loc="lower center", ncol=len(labels), fontsize=LEGEND_SIZE,
               frameon=False)
    fig.suptitle("Plan trajectories: five dimensions (95% CIs; diamonds and dashed lines: the paper)")
    fig.tight_layout(rect=(0, 0.1, 1, 1))
    return fig


ERROR_KW = {"lw": 0.8, "ecolor": "0.25", "capsize": 2}


def _ci(rows: pd.DataFrame, col: str):
    """Error bars of ``col`` from its ``_ci_low``/``_ci_high`` columns (None when the table has none)."""
    if f"{col}_ci_low" not in rows:
        return None
    value = rows[col].to_numpy(float)
    return np.clip([value - rows[f"{col}_ci_low"].to_numpy(float),
                    rows[f"{col}_ci_high"].to_numpy(float) - value], 0, None)
