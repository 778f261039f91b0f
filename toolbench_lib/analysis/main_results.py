"""The headline comparison: recall, precision and pass rate per subset and method, tests and wins (means over
runs of per-run means; a std over runs needs two runs)."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..data.queries import GT_DEFINITIONS, check_gt, clusters, subset_alias
from ..eval.compare import compare
from ..eval.evaluation import per_query_runs
from ..eval.stats import runs_test
from ..study.result import METHODS
from ..study.stored import StudyResult
from .intervals import ci_of, with_ci
from .references import paper_query_counts
from .style import LEGEND_SIZE, METHOD_COLORS, METHOD_LABELS, paper_marks
from .summary import pass_rates, summary_table

MAIN_COLUMNS = ["subset", "method", "gt", "n_queries", "n_runs", "recall_mean", "recall_std",
                "precision_mean", "precision_std", "judged_pass_rate_mean", "judged_pass_rate_std",
                "n_planned"]
TTEST_COLUMNS = ["subset", "gt", "metric", "test", "statistic", "p_runs_robustness", "rtp_value",
                 "ptr_mean", "n_rtp", "n_ptr", "note"]
WINS_COLUMNS = ["subset", "gt", "metric", "rtp_wins", "ptr_wins", "ties", "basis", "n_queries",
                *ci_of("rtp_wins_share", "ptr_wins_share")]


def study_k(result: StudyResult) -> int:
    """The ``k`` the study's planner saw (the default cut-off of every analysis)."""
    return int(result.provenance.get("settings", {}).get("k", 5))


def study_runs(result: StudyResult) -> int:
    """Number of independent runs of the study."""
    return result.n_runs


def subset_order(result: StudyResult) -> list[str]:
    """Canonical subset names in the order the queries list them."""
    return list(dict.fromkeys(result.queries["subset"]))


def main_results(result: StudyResult, k: int | None = None,
                 gts: Sequence[str] = GT_DEFINITIONS) -> pd.DataFrame:
    """Recall@k, precision@k and pass rate per subset, method and ground truth, mean ± std over runs, from
    :func:`~toolbench_lib.analysis.summary.summary_table`; ``n_planned``: the queries with plans."""
    k = k or study_k(result)
    table = summary_table(result, k, gts)
    return table[[*MAIN_COLUMNS, "k", *ci_of("recall", "precision")]].reset_index(drop=True)


def _run_tests(result: StudyResult, k: int, gt: str) -> list[dict]:
    """Per subset, for recall then precision, the paper's test over runs (robustness only): RtP's value, PtR's
    run means (``ptr_runs``), their mean and std, a one-sample t and compare's ``p_runs_robustness``."""
    rm = (per_query_runs(result, k, gt).groupby(["subset", "method", "run"], sort=False)
          .agg(recall=("recall", "mean"), precision=("precision", "mean"), n_queries=("qkey", "nunique"))
          .reset_index())  # per-run means over each subset's queries
    sets = subset_order(result)
    tested = {m: compare(result, "rtp", "ptr", sets, gt, k, m).set_index("subset") for m in ("recall",
                                                                                           "precision")}
    rows = []
    for subset in sets:
        s = rm[rm["subset"] == subset]
        rtp, ptr = s[s["method"] == "rtp"], s[s["method"] == "ptr"].sort_values("run")
        for metric in ("recall", "precision"):
            a = float(rtp[metric].mean()) if len(rtp) else float("nan")
            b = ptr[metric].to_numpy(float)
            mean = float(b.mean()) if b.size else float("nan")
            res = runs_test([a], b, a_deterministic=True)
            rows.append({"subset": subset_alias(subset), "gt": gt, "metric": metric,
                         "n_queries": int(ptr["n_queries"].max()) if len(ptr) else 0, "n_runs": int(b.size),
                         "rtp": a, "ptr_runs": [round(float(v), 4) for v in b], "ptr_mean": mean,
                         "ptr_std": float(b.std(ddof=1)) if b.size > 1 else float("nan"),
                         "ptr_minus_rtp": mean - a, "t": res["statistic"],
                         "p_runs_robustness": float(tested[metric].loc[subset, "p_runs_robustness"]),
                         "note": res["note"], "n_rtp": int(rtp["run"].nunique())})
    return rows


def ttests(result: StudyResult, k: int | None = None, gts: Sequence[str] = GT_DEFINITIONS) -> pd.DataFrame:
    """PtR against RtP per subset and ground truth: a one-sample t of PtR's run means against RtP's value
    on recall and precision; Welch's t of both methods' per-run pass rates (repeated per ``gt``)."""
    k = k or study_k(result)
    pr = pass_rates(result).dropna(subset=["pass_rate"])
    rows = []
    for gt in map(check_gt, gts):
        runs = _run_tests(result, k, gt)
        for subset in subset_order(result):
            alias = subset_alias(subset)
            rows += [{**r, "test": "one_sample_t", "statistic": r["t"], "rtp_value": r["rtp"],
                      "n_ptr": r["n_runs"]} for r in runs if r["subset"] == alias]
            ps = pr[pr["subset"] == subset]
            a = ps[ps["method"] == "rtp"]["pass_rate"].to_numpy()
            b = ps[ps["method"] == "ptr"]["pass_rate"].to_numpy()
            res = runs_test(a, b, a_deterministic=False)
            rows.append({"subset": alias, "gt": gt, "metric": "pass_rate", "test": "welch_t",
                         "statistic": res["statistic"], "p_runs_robustness": res["p_value"],
                         "rtp_value": float(a.mean()) if a.size else float("nan"),
                         "ptr_mean": float(b.mean()) if b.size else float("nan"),
                         "n_rtp": int(a.size), "n_ptr": int(b.size), "note": res["note"]})
    return pd.DataFrame(rows, columns=TTEST_COLUMNS)


def wins(result: StudyResult, k: int | None = None, gts: Sequence[str] = GT_DEFINITIONS,
         metrics: Sequence[str] = ("recall",), basis: str = "mean") -> pd.DataFrame:
    """Per-query wins of RtP and PtR on each metric; ``basis``: each query's mean over runs (the primary
    endpoint's, as :func:`~toolbench_lib.eval.compare.compare` counts them) or run 0 alone (``run0``)."""
    if basis not in ("run0", "mean"):
        raise ValueError(f"basis must be 'run0' or 'mean', not {basis!r}")
    k = k or study_k(result)
    rows = []
    for gt in map(check_gt, gts):
        pq = per_query_runs(result, k, gt)
        pq = pq[pq["run"] == 0] if basis == "run0" else pq.groupby(
            ["qkey", "subset", "method"], sort=False)[["recall", "precision"]].mean().reset_index()
        for subset in subset_order(result):
            s = pq[pq["subset"] == subset]
            for metric in metrics:
                w = s.pivot(index="qkey", columns="method", values=metric)[["rtp", "ptr"]].dropna()
                d = w["ptr"].to_numpy() - w["rtp"].to_numpy()
                row = {"subset": subset_alias(subset), "gt": gt, "metric": metric,
                       "rtp_wins": int((d < -1e-12).sum()), "ptr_wins": int((d > 1e-12).sum()),
                       "ties": int((np.abs(d) <= 1e-12).sum()), "basis": basis, "n_queries": len(d)}
                cl = clusters(result.queries, w.index)  # each share's CI resamples API samples
                with_ci(row, "rtp_wins_share", (d < -1e-12).astype(float), cl)
                rows.append(with_ci(row, "ptr_wins_share", (d > 1e-12).astype(float), cl))
    return pd.DataFrame(rows, columns=WINS_COLUMNS)


def paired_tests(result: StudyResult, k: int | None = None, gts: Sequence[str] = GT_DEFINITIONS,
                 metrics: Sequence[str] = ("recall", "precision")) -> pd.DataFrame:
    """PtR against RtP per set, ground truth and metric: :func:`~toolbench_lib.eval.compare.compare`'s rows
    (each query's mean over runs; Holm over the study's sets, as the primary endpoint)."""
    k = k or study_k(result)
    sets = subset_order(result)
    frames = [compare(result, "rtp", "ptr", sets, gt, k, m) for gt in map(check_gt, gts) for m in metrics]
    out = pd.concat(frames, ignore_index=True)
    out["subset"] = out["subset"].map(subset_alias)
    return out.rename(columns={"mean_a": "rtp_mean", "mean_b": "ptr_mean", "losses": "rtp_wins",
                               "wins": "ptr_wins"})


def figure2(table: pd.DataFrame, wins_table: pd.DataFrame, paper: dict | None = None, gt: str = "candidates",
            validity: pd.DataFrame | None = None, min_kappa: float = 0.4):
    """The paper's Figure 2: recall, precision, pass rate and per-query wins (95% CI) per set and method;
    ``paper``: ``{(subset, method, metric): value}`` as diamonds; ``validity``: :func:`_objective_panel`;
    the wins on each query's mean over runs (``basis`` mean)."""
    t = table[table["gt"] == gt]
    w = wins_table[(wins_table["gt"] == gt) & (wins_table["metric"] == "recall")
                   & (wins_table.get("basis", "mean") == "mean")].set_index("subset")  # the paired test's
    subsets = list(dict.fromkeys(t["subset"]))
    methods = [m for m in METHODS if m in set(t["method"])]
    fig, axes = plt.subplots(1, 4, figsize=(15, 3.8))
    x = np.arange(len(subsets))
    width = 0.8 / max(1, len(methods))
    for ax, metric in zip(axes[:3], ("recall", "precision", "judged_pass_rate"), strict=True):
        top = 0.0  # the highest bar, CI or diamond: recall and precision are drawn up to it, not to 1
        for i, method in enumerate(methods):
            m = t[t["method"] == method].set_index("subset").reindex(subsets)
            mean = m[f"{metric}_mean"].to_numpy(float)
            lo, hi = m.get(f"{metric}_ci_low"), m.get(f"{metric}_ci_high")
            err = (m[f"{metric}_std"].fillna(0.0).to_numpy(float) if lo is None or hi is None
                   else np.vstack([mean - lo.to_numpy(float), hi.to_numpy(float) - mean]))
            pos = x + (i - (len(methods) - 1) / 2) * width
            ax.bar(pos, mean, width, yerr=np.nan_to_num(err), capsize=3, color=METHOD_COLORS.get(method),
                   label=METHOD_LABELS.get(method, method))
            refs = [(paper or {}).get((s, method, metric.removeprefix("judged_"))) for s in subsets]
            paper_marks(ax, pos, refs, "paper" if i == 0 else None)
            top = np.nanmax([top, *(mean + np.nan_to_num(err if np.ndim(err) == 1 else err[1])),
                             *(r for r in refs if r is not None)])
        ax.set_xticks(x, subsets)
        ax.set_title(metric.replace("_", " "))
        ax.set_ylim(0, 1 if metric == "judged_pass_rate" else min(1.0, float(top) * 1.15 or 1.0))
    if validity is not None and len(validity):
        _objective_panel(axes[2], validity, subsets, methods, width, paper, min_kappa)
    ax = axes[3]
    w = w.reindex(subsets)
    paper_n = paper_query_counts().set_index("subset")["n_queries"].to_dict()
    for i, method in enumerate(methods):
        share = w[f"{method}_wins"].to_numpy(float) / w["n_queries"].to_numpy(float)
        ci = w[ci_of(f"{method}_wins_share")].to_numpy(float)  # clustered, as wins saves it
        err = np.nan_to_num(np.vstack([share - ci[:, 0], ci[:, 1] - share]))
        pos = x + (i - (len(methods) - 1) / 2) * width
        ax.bar(pos, share, width, yerr=err, capsize=3, color=METHOD_COLORS.get(method),
               label=METHOD_LABELS.get(method, method))
        refs = [(paper or {}).get((s, method, "wins")) for s in subsets]
        paper_marks(ax, pos, [r / paper_n[s] if r is not None and paper_n.get(s) else None
                              for r, s in zip(refs, subsets, strict=True)])
    ax.set_xticks(x, subsets)
    ax.set_ylim(0, 1)
    ax.set_title("queries won on recall\n(share, 95% CI)")
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=LEGEND_SIZE, frameon=False)
    fig.suptitle(f"RtP and PtR per set (ground truth: {gt}); diamonds: the paper")
    fig.tight_layout(rect=(0, 0.07, 1, 1))  # the legend below the panels, over no bar
    return fig


def _objective_panel(ax, validity: pd.DataFrame, subsets: list[str], methods: list[str], width: float,
                     paper: dict | None, min_kappa: float) -> None:
    """Figure 2's pass-rate panel: the objective pass rate (filled), the judged one (outlined) and the paper's
    diamond only where the judge's kappa reaches ``min_kappa``, and a black line at each bar's ceiling."""
    ax.clear()
    v = validity.drop_duplicates(["subset", "method"]).set_index(["subset", "method"])
    x = np.arange(len(subsets))
    drawn = hidden = False
    top = 0.1  # the axis ends a little above the highest bar or ceiling drawn
    for i, method in enumerate(methods):
        pos = x + (i - (len(methods) - 1) / 2) * width
        rows = [v.loc[(s, method)] if (s, method) in v.index else None for s in subsets]
        valid = [r is not None and float(r["kappa"]) >= min_kappa for r in rows]  # the judge agrees enough
        obj = [np.nan if r is None else float(r["objective_pass_rate"]) for r in rows]
        bars = ax.bar(pos, obj, width, color=METHOD_COLORS.get(method),
                      label=f"{METHOD_LABELS.get(method, method)}, objective")
        ax.bar_label(bars, fmt="%.2f", fontsize=LEGEND_SIZE - 2, padding=2)  # a rate of 0 stays readable
        for j, r in enumerate(rows):
            if r is None:
                continue
            top = max(top, np.nan_to_num(obj[j]))
            if "ceiling" in r and pd.notna(r["ceiling"]):  # the most the objective rate can be
                ax.hlines(float(r["ceiling"]), pos[j] - width / 2, pos[j] + width / 2, colors="black",
                          linewidth=1.6)
                top = max(top, float(r["ceiling"]))
            if valid[j]:
                ax.bar(pos[j], float(r["judged_pass_rate"]), width, fill=False,
                       edgecolor=METHOD_COLORS.get(method), linewidth=1.2)
                top = max(top, float(r["judged_pass_rate"]), 1.0)
        drawn |= any(valid)
        hidden |= any(r is not None and not ok for r, ok in zip(rows, valid, strict=True))
        # the paper's rates are judged ones: beside a judged bar only, never over an objective one alone
        paper_marks(ax, pos, [(paper or {}).get((s, method, "pass_rate")) if ok else None
                              for s, ok in zip(subsets, valid, strict=True)])
    ax.set_xticks(x, subsets)
    ax.set_ylim(0, min(1.0, top * 1.3))
    judged = ("judged: outline" + (f", not where kappa < {min_kappa:g}" if hidden else "") if drawn else
              f"(judged rate and the paper's hidden: kappa < {min_kappa:g})")
    ceiling = "ceiling" in validity and validity["ceiling"].notna().any()
    gt = f" ({validity['gt'].iloc[0]})" if "gt" in validity and len(validity) else ""
    ax.set_title(f"objective pass rate{gt}" + ("; line = its ceiling" if ceiling else "") + f"\n{judged}",
                 fontsize=LEGEND_SIZE)


RUNS_COLUMNS = ["subset", "gt", "metric", "n_queries", "n_runs", "rtp", "ptr_runs", "ptr_mean", "ptr_std",
                "ptr_minus_rtp", "t", "p_runs_robustness", "note"]


def runs_table(result: StudyResult, k: int | None = None,
               gts: Sequence[str] = GT_DEFINITIONS) -> pd.DataFrame:
    """The paper's test over runs (a robustness check, no verdict) per subset, ground truth and metric:
    PtR's per-run means (``ptr_runs``, run 0 first) against RtP's value by a one-sample t."""
    k = k or study_k(result)
    return pd.DataFrame([r for gt in map(check_gt, gts) for r in _run_tests(result, k, gt)],
                        columns=RUNS_COLUMNS)


def runs_figure(table: pd.DataFrame, paper: dict | None = None, gt: str = "candidates",
                metric: str = "recall"):
    """Per set: RtP's value (a bar) and PtR's per-run means (dots, run 0 filled) with their mean (a bar);
    ``paper`` maps ``(subset, method)`` to the paper's value, drawn as open diamonds."""
    t = table[(table["gt"] == gt) & (table["metric"] == metric)].reset_index(drop=True)
    fig, ax = plt.subplots(figsize=(6.5, 4.6))
    x = np.arange(len(t))
    for i, method in enumerate(METHODS):
        pos = x + (i - 0.5) * 0.4
        vals = t["rtp"] if method == "rtp" else t["ptr_mean"]
        ax.bar(pos, vals, 0.4, color=METHOD_COLORS.get(method), alpha=0.8,
               label=METHOD_LABELS.get(method, method) + (" (mean over runs)" if method == "ptr" else ""))
        for j, row in t.iterrows() if method == "ptr" else ():
            runs = list(row["ptr_runs"])
            ax.scatter([pos[j]] * len(runs), runs, s=14, color="black", zorder=3,
                       facecolors=["black"] + ["white"] * (len(runs) - 1),
                       label="PtR per run (run 0 filled)" if j == 0 else None)
        paper_marks(ax, pos, [(paper or {}).get((s, method)) for s in t["subset"]],
                    "paper" if i == 0 else None)
    n = int(t["n_runs"].max()) if len(t) else 0
    ax.set_xticks(x, [f"{s}\n(n={q})" for s, q in zip(t["subset"], t["n_queries"], strict=True)])
    ax.set_ylabel(f"{metric}@k")
    ax.set_title(f"{metric.capitalize()} over {n} runs (ground truth: {gt})")
    ax.legend(fontsize=LEGEND_SIZE, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2,
              frameon=False)  # below the axes, over no bar
    fig.tight_layout()
    return fig
