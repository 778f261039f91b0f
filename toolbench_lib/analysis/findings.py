"""'What this run found': prose written from a run's tables, so it cannot contradict them."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from .numbers import fmt_p, leader


def recall_verdict(rtp: float, ptr: float, p_holm: float, family: str, paper: Mapping[str, float],
                   alpha: float = 0.05, test: str = "paired t") -> dict:
    """The one verdict on a set's recall (notebook 02 and the report): ``leader``, ``paper_leader`` (None
    without a paper pair), ``significant`` (``p_holm`` below ``alpha``) and ``verdict``: reproduced, same
    direction but not significant, refuted or not reproduced."""
    here, sig = leader(rtp, ptr), bool(np.isfinite(p_holm) and p_holm < alpha)
    if not ("rtp" in paper and "ptr" in paper):
        return {"leader": here, "paper_leader": None, "significant": sig, "verdict": "no paper pair"}
    want = leader(paper["rtp"], paper["ptr"])
    how = "Holm-corrected" if str(family).startswith("Holm") else "unadjusted"
    same = f"same direction, not significant ({how} {test} {fmt_p(p_holm)})"
    verdict = ("reproduced" if here == want and sig else same if here == want else
               "refuted: the other method leads significantly" if sig else
               f"not reproduced: {here} leads here, not significantly")
    return {"leader": here, "paper_leader": want, "significant": sig, "verdict": verdict}


def main_findings(main: pd.DataFrame, paired: pd.DataFrame, paper_recall: Mapping[str, Mapping[str, float]],
                  gt: str = "candidates", alpha: float = 0.05, runs: pd.DataFrame | None = None) -> str:
    """Markdown bullets: per set, both recalls with CIs, the paired difference, its test and the paper's
    direction; with ``runs`` (``main_results.runs_table``), the paper's test over runs too."""
    m = main[main["gt"] == gt].set_index(["subset", "method"])
    p = paired[(paired["gt"] == gt) & (paired["metric"] == "recall")].set_index("subset")
    lines = []
    for subset in dict.fromkeys(main["subset"]):
        if (subset, "rtp") not in m.index or (subset, "ptr") not in m.index or subset not in p.index:
            continue
        r, q, t = m.loc[(subset, "rtp")], m.loc[(subset, "ptr")], p.loc[subset]
        paper = paper_recall.get(subset, {})
        v = recall_verdict(r["recall_mean"], q["recall_mean"], t["p_holm"], t["family"], paper, alpha)
        paper_txt = (f"paper RtP {paper['rtp']:.3f} vs PtR {paper['ptr']:.3f} ({v['paper_leader']} ahead): "
                     f"{v['verdict']}" if v["paper_leader"] else "the paper gives no pair for this set")
        ci = lambda row: f"[{row['recall_ci_low']:.3f}, {row['recall_ci_high']:.3f}]"  # noqa: E731
        lines.append(
            f"- **{subset}** ({int(r['n_queries'])} queries, {int(q['n_runs'])} run(s)): "
            f"RtP recall@{int(r['k'])} {r['recall_mean']:.3f} {ci(r)}, PtR {q['recall_mean']:.3f} {ci(q)}; "
            f"PtR − RtP {t['diff']:+.3f} (95% CI [{t['ci_low']:+.3f}, {t['ci_high']:+.3f}]), wins "
            f"{int(t['ptr_wins'])}–{int(t['rtp_wins'])} (ties {int(t['ties'])}), paired t "
            f"{fmt_p(t['p_holm'])} ({t['family']}). {paper_txt}." + _runs_sentence(runs, subset, gt))
    return "\n".join(lines) if lines else "No set has both methods in this run."


def _runs_sentence(runs: pd.DataFrame | None, subset: str, gt: str) -> str:
    """' Over N runs ...' for a set of ``runs_table`` (the paper's test over runs, a robustness check that
    gives no verdict), or '' when it has no row for it."""
    if runs is None:
        return ""
    r = runs[(runs["subset"] == subset) & (runs["gt"] == gt) & (runs["metric"] == "recall")]
    if r.empty:
        return ""
    r = r.iloc[0]
    return (f" Over {int(r['n_runs'])} runs: PtR {r['ptr_mean']:.3f} ± {r['ptr_std']:.3f} against RtP "
            f"{r['rtp']:.3f}; the paper's test over runs (robustness only) {fmt_p(r['p_runs_robustness'])}.")


def _fmt_paper(value: float | None, spec: str = ".3f") -> str:
    return f"paper {value:{spec}}" if value is not None else "no paper value"


def data_findings(sources: pd.DataFrame, sizes: pd.DataFrame, paper_registry: float | None) -> str:
    """Notebook 01: registry size against the paper's, ground-truth sizes and recall ceilings."""
    n = int(sources["n_apis"].sum())
    lines = [f"- The registry holds {n:,} APIs ({_fmt_paper(paper_registry, ',.0f')}; "
             f"{n - paper_registry:+,.0f})." if paper_registry else f"- The registry holds {n:,} APIs."]
    for _, r in sizes[sizes["gt"] == "candidates"].iterrows():
        ceiling = f", best reachable recall@5 {r['recall_ceiling']:.3f}" if "recall_ceiling" in r else ""
        lines.append(f"- {r['subset']}: {int(r['n_queries'])} queries, {r['mean']:.2f} candidate APIs per "
                     f"query{ceiling}.")
    return "\n".join(lines)


def k_findings(ablation: pd.DataFrame, budget: pd.DataFrame, gt: str = "candidates") -> str:
    """Notebook 03: where PtR's recall is above RtP's along k, and the equal-budget check."""
    t = ablation[ablation["gt"] == gt].pivot_table(index=["subset", "k"], columns="method", values="recall")
    lines = []
    for subset, g in t.groupby(level="subset", sort=False):
        if not {"rtp", "ptr"} <= set(g.columns):
            continue
        ahead = [int(k) for (_, k), row in g.iterrows() if row["ptr"] > row["rtp"]]
        where = f"PtR ahead at k = {', '.join(map(str, ahead))}" if ahead else "RtP ahead or tied at every k"
        lines.append(f"- {subset}: {where} (of k = {int(g.index.get_level_values('k').min())}.."
                     f"{int(g.index.get_level_values('k').max())}).")
    lines += [f"- {r['subset']}, equal budget: RtP@10 {r['rtp_k10_recall']:.3f} against PtR@5 "
              f"{r['ptr_k5_recall']:.3f}." for _, r in budget[budget["gt"] == gt].iterrows()]
    return "\n".join(lines)


def scale_findings(scale: pd.DataFrame, divergence: pd.DataFrame, paper_small: float | None,
                   paper_full: float | None) -> str:
    """Notebook 04: recall from the smallest to the largest registry, and divergence against the paper."""
    lines = []
    s = scale.groupby(["subset", "method", "size"], sort=False)["recall"].mean().reset_index()
    for (subset, method), g in s.groupby(["subset", "method"], sort=False):
        g = g.sort_values("size")
        first, last = g.iloc[0], g.iloc[-1]
        lines.append(f"- {subset} {method}: recall {first['recall']:.3f} at {int(first['size']):,} APIs, "
                     f"{last['recall']:.3f} at {int(last['size']):,}.")
    d = divergence.groupby("size")["no_overlap_share"].mean().sort_index()
    if len(d):
        lines.append(f"- Disjoint top-k lists: {d.iloc[0]:.0%} of queries at {int(d.index[0]):,} APIs "
                     f"({_fmt_paper(paper_small, '.0%')}), {d.iloc[-1]:.0%} at {int(d.index[-1]):,} "
                     f"({_fmt_paper(paper_full, '.0%')}); notebook 11 tests why.")
    return "\n".join(lines)


def trajectory_findings(traj: pd.DataFrame, miss: pd.DataFrame) -> str:
    """Notebook 05: fidelity (tolerant and strict), plan overlap, steps; behaviour on complete misses."""
    lines = []
    for _, r in traj.iterrows():
        strict = f" (strict {r['fidelity_strict']:.2f})" if pd.notna(r.get("fidelity_strict")) else ""
        lines.append(f"- {r['subset']} {r['method']}: fidelity {r['fidelity']:.2f}{strict}, "
                     f"{r['mean_steps']:.1f} steps, {r['mean_apis_named']:.1f} APIs named, "
                     f"{r['used_share']:.0%} of retrieved APIs used, Jaccard with the other method's plan "
                     f"{r['jaccard_rtp_ptr']:.2f}.")
    lines += [f"- {r['subset']} {r['method']}, complete misses ({int(r['n_complete_miss'])}): "
              f"{r['refusal_rate_on_miss']:.0%} refuse, {r['wrong_tool_rate_on_miss']:.0%} go on with "
              "wrong tools." for _, r in miss.iterrows()]
    return "\n".join(lines) if lines else "No plans in this study."


def stub_findings(stubs: pd.DataFrame, overhead: pd.DataFrame) -> str:
    """Notebook 06: stubs per query, distinct names, stub hits and the token overhead."""
    s = stubs[stubs["gt"] == "candidates"] if "gt" in stubs else stubs
    lines = [f"- {r['subset']}: {r['stubs_per_query']:.2f} stubs per query, {r['unique_name_share']:.0%} "
             f"distinct names, {r['stub_hit_share']:.0%} of stubs find a ground-truth API first (cosine "
             f"{r['cos_correct']:.3f} when right, {r['cos_incorrect']:.3f} when wrong)."
             for _, r in s.iterrows()]
    lines += [f"- {r['subset']}: PtR spends {r['overhead_pct']:.0f}% more LLM tokens per query than RtP "
              f"({r['ptr_tokens']:.0f} against {r['rtp_tokens']:.0f})." for _, r in overhead.iterrows()]
    return "\n".join(lines)


def routing_findings(table: pd.DataFrame) -> str:
    """Notebook 07: per set, the best fixed policy and what each router reaches, in recall and tokens."""
    lines = []
    for subset, g in table.groupby("subset", sort=False):
        g = g.set_index("policy")
        fixed = g.loc[[p for p in ("always_rtp", "always_ptr", "by_subset") if p in g.index]]
        best = fixed["recall"].idxmax()
        parts = [f"{p} {g.loc[p, 'recall']:.3f} ({g.loc[p, 'tokens_per_query']:.0f} tokens)"
                 for p in ("always_rtp", "always_ptr", "by_subset", "router_top1_cosine", "oracle")
                 if p in g.index]
        lines.append(f"- {subset}: best fixed policy {best}; " + ", ".join(parts) + ".")
    return "\n".join(lines)
