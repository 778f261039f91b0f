"""Recall and precision as functions of the cut-off ``k``, read from the study's one evaluation (every
merged ranking is evaluated to depth 20: nothing is retrieved or counted again)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..data.queries import GT_DEFINITIONS, check_gt, subset_alias
from ..eval.evaluation import evaluate
from ..eval.stats import holm, paired, ratio_change, t_ci
from ..study.result import METHODS
from ..study.stored import StudyResult
from .intervals import N_RESAMPLES, ci_of, with_ci
from .main_results import subset_order
from .style import LEGEND_SIZE, METHOD_COLORS, METHOD_LABELS

ABLATION_COLUMNS = ["subset", "method", "gt", "k", "recall", "precision"]
RATIO_COLUMNS = ("recall_ratio", "recall_ratio_vs_k1", *ci_of("recall_ratio_vs_k1"))  # PtR's share of RtP's
ABLATION_EXTRA = [*ci_of("recall", "precision"), "recall_gain", *ci_of("recall_gain"), "recall_gain_vs_k1",
                  *ci_of("recall_gain_vs_k1"), "recall_gain_vs_k1_p", "recall_gain_vs_k1_p_holm",
                  *RATIO_COLUMNS, "n_queries"]
BUDGET_COLUMNS = ["subset", "gt", "rtp_k10_recall", "ptr_k5_recall"]
BUDGET_EXTRA = ["rtp_k5_recall", "ptr_k10_recall", *ci_of("rtp_k10_recall", "ptr_k5_recall"),
                "rtp10_minus_ptr5", *ci_of("rtp10_minus_ptr5")]


def stored_depth(result: StudyResult) -> int:
    """The depth of the stored merged rankings."""
    return int(result.provenance.get("settings", {}).get("depth", result.rankings["rank"].max()))


def k_ablation(result: StudyResult, ks: Iterable[int] = range(1, 21),
               gts: Sequence[str] = GT_DEFINITIONS) -> pd.DataFrame:
    """Recall@k and precision@k per subset, method, ground truth and ``k`` (CIs over queries);
    ``recall_gain``: PtR − RtP (the paired test's CI, cluster-robust as in ``compare``);
    ``recall_gain_vs_k1``: its change from k = 1 (NaN without it), with its p and Holm's over the sets."""
    ks = list(ks)
    depth = stored_depth(result)
    if ks and (min(ks) < 1 or max(ks) > depth):
        raise ValueError(f"k must lie in 1..{depth} (the stored depth), got {min(ks)}..{max(ks)}")
    ev = evaluate(result)
    subsets, clusters = ev.subsets, ev.groups if ev.groups is not None else ev.qkeys
    rows = []
    for gt in [check_gt(g) for g in gts]:
        recalls = {k: ev.values("recall", k, gt).mean(axis=1) for k in ks}  # (method, query)
        precisions = {k: ev.values("precision", k, gt).mean(axis=1) for k in ks}
        both = {"rtp", "ptr"} <= set(ev.methods)
        gains = {k: recalls[k][ev.methods.index("ptr")] - recalls[k][ev.methods.index("rtp")]
                 for k in ks} if both else {}
        for i, method in enumerate(ev.methods):
            for k in ks:
                gain = gains.get(k) if method in ("rtp", "ptr") else None
                moved = gain - gains[1] if gain is not None and 1 in gains else None
                values = {"recall": recalls[k][i], "precision": precisions[k][i], "recall_gain": gain,
                          "recall_gain_vs_k1": moved}
                for subset in dict.fromkeys(subsets):
                    mask = subsets == subset
                    row = {"subset": subset_alias(subset), "method": method, "gt": gt, "k": k,
                           "n_queries": int(mask.sum())}
                    for name, v in values.items():
                        row[name] = float(v[mask].mean()) if v is not None else np.nan
                        if name.startswith("recall_gain"):  # a paired difference: the paired test's CI
                            ci = t_ci(v[mask], groups=clusters[mask]) if v is not None else (np.nan, np.nan)
                            row[f"{name}_ci_low"], row[f"{name}_ci_high"] = ci
                        else:
                            with_ci(row, name, *((v[mask], clusters[mask]) if v is not None else ([],)))
                        if name == "recall_gain_vs_k1":  # its p; Holm over the sets comes below
                            zero = np.zeros(int(mask.sum()))
                            row[f"{name}_p"] = paired(zero, v[mask], groups=clusters[mask])["p"] \
                                if v is not None else np.nan
                    row.update(dict.fromkeys(RATIO_COLUMNS, np.nan))
                    if gain is not None:  # PtR's recall as a share of RtP's, and how far it moved from k = 1
                        r, p = (recalls[k][ev.methods.index(m)][mask] for m in ("rtp", "ptr"))
                        row["recall_ratio"] = float(p.mean() / r.mean()) if r.mean() else np.nan
                    if gain is not None and 1 in gains:
                        r1, p1 = (recalls[1][ev.methods.index(m)][mask] for m in ("rtp", "ptr"))
                        row["recall_ratio_vs_k1"], *ci = ratio_change(r1, p1, r, p, N_RESAMPLES)
                        row["recall_ratio_vs_k1_ci_low"], row["recall_ratio_vs_k1_ci_high"] = ci
                    rows.append(row)
    out = pd.DataFrame(rows)
    if out.empty:
        return pd.DataFrame(columns=ABLATION_COLUMNS + ABLATION_EXTRA)
    out["recall_gain_vs_k1_p_holm"] = out.groupby(["gt", "method", "k"])["recall_gain_vs_k1_p"].transform(
        holm)  # a change scanned over every set: Holm over the sets, as the primary endpoint's family
    out = out[ABLATION_COLUMNS + ABLATION_EXTRA]
    order = {subset_alias(s): i for i, s in enumerate(subset_order(result))}
    out = out.assign(_g=out["gt"].map(GT_DEFINITIONS.index), _s=out["subset"].map(order),
                     _m=out["method"].map(lambda m: METHODS.index(m) if m in METHODS else len(METHODS)))
    return out.sort_values(["_g", "_s", "_m", "k"]).drop(columns=["_g", "_s", "_m"]).reset_index(drop=True)


def budget_check(result: StudyResult, gts: Sequence[str] = GT_DEFINITIONS) -> pd.DataFrame:
    """RtP's recall at k = 10 beside PtR's at k = 5 (PtR's stubs search several times the APIs RtP does),
    with their CIs, and RtP at 5 and PtR at 10; ``rtp10_minus_ptr5``: the two compared query by query, with
    the paired test's CI (clustered as in ``compare``)."""
    ab, ev = k_ablation(result, [5, 10], gts), evaluate(result)
    clusters = ev.groups if ev.groups is not None else ev.qkeys
    aliases = np.array([subset_alias(s) for s in ev.subsets])
    rows = []
    for (subset, gt), g in ab.groupby(["subset", "gt"], sort=False):
        g = g.set_index(["method", "k"])
        row: dict = {"subset": subset, "gt": gt}
        for method, k in (("rtp", 10), ("ptr", 5), ("rtp", 5), ("ptr", 10)):
            r = g.loc[(method, k)] if (method, k) in g.index else None
            for end in ("", "_ci_low", "_ci_high") if (method, k) in (("rtp", 10), ("ptr", 5)) else ("",):
                row[f"{method}_k{k}_recall{end}"] = np.nan if r is None else float(r[f"recall{end}"])
        if {"rtp", "ptr"} <= set(ev.methods):
            mask = aliases == subset
            d = (ev.values("recall", 10, gt).mean(axis=1)[ev.methods.index("rtp")][mask]
                 - ev.values("recall", 5, gt).mean(axis=1)[ev.methods.index("ptr")][mask])
            row["rtp10_minus_ptr5"] = float(d.mean())
            row["rtp10_minus_ptr5_ci_low"], row["rtp10_minus_ptr5_ci_high"] = t_ci(d, groups=clusters[mask])
        rows.append(row)
    return pd.DataFrame(rows, columns=[*BUDGET_COLUMNS, *BUDGET_EXTRA])


def k_ablation_figure(table: pd.DataFrame, gt: str = "candidates",
                      paper: dict[tuple[str, str, int], float] | None = None):
    """Recall (top row), precision (middle row) and PtR minus RtP recall (bottom row) against ``k``, one
    column per subset; ``paper`` values ``{(subset, method, k): recall}`` are drawn as open markers."""
    t = table[table["gt"] == gt]
    subsets = list(dict.fromkeys(t["subset"]))
    fig, axes = plt.subplots(3, max(1, len(subsets)), figsize=(3.4 * max(1, len(subsets)), 7.8),
                             sharex=True, sharey="row", squeeze=False)
    for j, subset in enumerate(subsets):
        for i, metric in enumerate(("recall", "precision")):
            ax = axes[i][j]
            for method in METHODS:
                m = t[(t["subset"] == subset) & (t["method"] == method)]
                if len(m):
                    ax.plot(m["k"], m[metric], marker="o", markersize=3, color=METHOD_COLORS.get(method),
                            label=METHOD_LABELS.get(method, method))
                    if f"{metric}_ci_low" in m:  # the bootstrap 95% CI over queries, as a band
                        ax.fill_between(m["k"], m[f"{metric}_ci_low"], m[f"{metric}_ci_high"], lw=0,
                                        alpha=0.15, color=METHOD_COLORS.get(method))
            for (ps, pm, pk), value in (paper or {}).items():
                if ps == subset and metric == "recall":  # one legend entry per method, not per k
                    named = f"paper {METHOD_LABELS.get(pm, pm)}" in ax.get_legend_handles_labels()[1]
                    ax.plot([pk], [value], marker="D", mfc="none", color=METHOD_COLORS.get(pm),
                            label="_nolegend_" if named else f"paper {METHOD_LABELS.get(pm, pm)}")
            ax.set_title(subset if i == 0 else "")
            ax.set_ylabel(metric if j == 0 else "")
        wide = t[t["subset"] == subset].pivot_table(index="k", columns="method", values="recall")
        ax = axes[2][j]
        if {"rtp", "ptr"} <= set(wide.columns):
            diff = wide["ptr"] - wide["rtp"]
            gain = t[(t["subset"] == subset) & (t["method"] == "ptr")].set_index("k").reindex(diff.index)
            ci = ([diff - gain["recall_gain_ci_low"], gain["recall_gain_ci_high"] - diff]
                  if "recall_gain_ci_low" in gain else None)  # the paired t 95% CI of the difference
            ax.bar(diff.index, diff.to_numpy(), yerr=ci, error_kw={"lw": 0.8, "ecolor": "0.3"},
                   color=[METHOD_COLORS.get("ptr") if d > 0 else METHOD_COLORS.get("rtp") for d in diff])
        ax.axhline(0, color="grey", lw=0.8)
        ax.set_ylabel("PtR − RtP recall" if j == 0 else "")
        ax.set_xlabel("k")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=LEGEND_SIZE, frameon=False)
    fig.suptitle(f"Recall, precision and PtR − RtP recall against k ({gt}; bands, bars: 95% CIs)")
    fig.tight_layout(rect=(0, 0.08, 1, 1))  # the legend below the panels, over no data
    return fig
