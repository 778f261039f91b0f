"""'What this run found': prose written from a run's tables, so it cannot contradict them."""

from __future__ import annotations

from collections.abc import Mapping

import pandas as pd


def _lead(rtp: float, ptr: float) -> str:
    return "PtR" if ptr > rtp else "RtP" if rtp > ptr else "neither"


def main_findings(main: pd.DataFrame, paired: pd.DataFrame, paper_recall: Mapping[str, Mapping[str, float]],
                  gt: str = "candidates", alpha: float = 0.05) -> str:
    """Markdown bullets: per set, both recalls with CIs, the paired difference, its test, and the paper's
    direction (reproduced, refuted or not significant here)."""
    m = main[main["gt"] == gt].set_index(["subset", "method"])
    p = paired[(paired["gt"] == gt) & (paired["metric"] == "recall")].set_index("subset")
    lines = []
    for subset in dict.fromkeys(main["subset"]):
        if (subset, "rtp") not in m.index or (subset, "ptr") not in m.index or subset not in p.index:
            continue
        r, q, t = m.loc[(subset, "rtp")], m.loc[(subset, "ptr")], p.loc[subset]
        here = _lead(r["recall_mean"], q["recall_mean"])
        sig = t["p_wilcoxon_holm"] < alpha
        paper = paper_recall.get(subset, {})
        if "rtp" in paper and "ptr" in paper:
            want = _lead(paper["rtp"], paper["ptr"])
            verdict = ("reproduced" if here == want and sig else
                       "same direction, not significant (Holm-corrected Wilcoxon p = "
                       f"{t['p_wilcoxon_holm']:.3g})" if here == want else
                       "refuted: the other method leads significantly" if sig else
                       f"not reproduced: {here} leads here, not significantly")
            paper_txt = f"paper RtP {paper['rtp']:.3f} vs PtR {paper['ptr']:.3f} ({want} ahead): {verdict}"
        else:
            paper_txt = "the paper gives no pair for this set"
        ci = lambda row: f"[{row['recall_ci_low']:.3f}, {row['recall_ci_high']:.3f}]"  # noqa: E731
        lines.append(
            f"- **{subset}** ({int(r['n_queries'])} queries, {int(q['n_runs'])} run(s)): "
            f"RtP recall@{int(r['k'])} {r['recall_mean']:.3f} {ci(r)}, PtR {q['recall_mean']:.3f} {ci(q)}; "
            f"PtR − RtP "
            f"{t['diff']:+.3f} (95% CI [{t['ci_low']:+.3f}, {t['ci_high']:+.3f}]), wins {int(t['ptr_wins'])}–"
            f"{int(t['rtp_wins'])} (ties {int(t['ties'])}), Holm p: t {t['p_t_holm']:.3g}, Wilcoxon "
            f"{t['p_wilcoxon_holm']:.3g}, sign {t['p_sign_holm']:.3g}. {paper_txt}.")
    return "\n".join(lines) if lines else "No set has both methods in this run."
