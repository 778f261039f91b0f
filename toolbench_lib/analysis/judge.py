"""How far the pass-rate judge can be trusted, and an objective pass rate beside it (definitions
in :mod:`toolbench_lib.eval.pass_rates`, re-exported here); the paper's pass-rate ordering re-tested."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from ..data.queries import subset_alias
from ..eval.pass_rates import (  # noqa: F401 (re-exported: the objective pass rate's definitions)
    EVIDENCE,
    PASS_RATE_COLUMNS,
    equivalence_keys,
    kappa,
    pass_rate_table,
    plan_evidence,
    validity_row,
)
from ..eval.stats import mcnemar_exact
from ..study.stored import StudyResult

VALIDITY_COLUMNS = ["subset", "method", "judge_version", "n_plans", "n_judged", "judged_pass_rate",
                    "objective_pass_rate", "ceiling", "coverage", "evidence_all", "evidence_some",
                    "evidence_none", "kappa", "kappa_any", "solved_rate_none", "solved_rate_some",
                    "solved_rate_all", "gt"]
ORDERING_COLUMNS = ["subset", "pass_rate", "judge_version", "rtp", "ptr", "leader", "paper_leader", "holds",
                    "n_pairs", "rtp_only", "ptr_only", "p_value"]
FIDELITY_COLUMNS = ["subset", "method", "fidelity_strict", "fidelity", "resolved_strict", "resolved",
                    "n_plans", "n_steps"]
PAPER_PASS_LEADER = {"G1": "rtp", "G2": "ptr", "G3": "ptr"}  # paper: G1 0.884 vs 0.840, G2 0.747 vs 0.855,
# G3 0.732 vs 0.820 (RtP vs PtR)


def confusion(ev: pd.DataFrame, by: Sequence[str] = ()) -> pd.DataFrame:
    """Counts of verdict (Solved / Unsolved / none) against evidence (all / some / none), per ``by``."""
    v = ev.assign(verdict=ev["verdict"].fillna("none"), subset=ev["subset"].map(subset_alias))
    table = v.groupby([*by, "verdict"])["evidence"].value_counts().unstack("evidence", fill_value=0)
    table = table.reindex(columns=list(EVIDENCE), fill_value=0)
    table["total"] = table.sum(axis=1)
    return table.reset_index().rename_axis(columns=None)


def judge_validity(ev: pd.DataFrame, by: Sequence[str] = ("subset", "method")) -> pd.DataFrame:
    """Per ``by`` group (and judge version): pass rates, evidence counts, kappa and "Solved" rates by
    evidence. Subsets are shown by alias (G1, G2, G3)."""
    keys = [*by, "judge_version"]
    rows = [{**dict(zip(keys, values, strict=True)), **validity_row(g), "gt": g["gt"].iloc[0]}
            for values, g in ev.groupby(keys, sort=False, dropna=False)]
    out = pd.DataFrame(rows)
    if "subset" in out:
        out["subset"] = out["subset"].map(subset_alias)
    cols = [c for c in VALIDITY_COLUMNS if c in out] + [c for c in out if c not in VALIDITY_COLUMNS]
    return out[cols] if rows else pd.DataFrame(columns=VALIDITY_COLUMNS)


def ordering(ev: pd.DataFrame) -> pd.DataFrame:
    """The paper's pass-rate ordering re-tested per subset under the judged and the objective pass rate, on
    (query, run) pairs planned (for the judged rate, judged) for both; ``holds``: the paper's leader leads."""
    rows = []
    for (subset, version), g in ev.groupby(["subset", "judge_version"], sort=False, dropna=False):
        alias = subset_alias(subset)
        w = g.assign(solved=g["verdict"] == "Solved", judged=g["verdict"].notna())
        wide = w.pivot_table(index=["qkey", "run"], columns="method",
                             values=["solved", "judged", "objective_pass"], aggfunc="first")
        if not {("solved", "rtp"), ("solved", "ptr")} <= set(wide.columns):
            continue
        wide.columns = [f"{v}_{m}" for v, m in wide.columns]
        wide = wide.dropna()
        judged = wide[wide["judged_rtp"].astype(bool) & wide["judged_ptr"].astype(bool)]
        for kind, pairs, cols in (("judged", judged, ("solved_rtp", "solved_ptr")),
                                  ("objective", wide, ("objective_pass_rtp", "objective_pass_ptr"))):
            if pairs.empty:
                continue
            a, b = pairs[cols[0]].astype(bool), pairs[cols[1]].astype(bool)
            only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
            ra, rb, paper = float(a.mean()), float(b.mean()), PAPER_PASS_LEADER.get(alias)
            leader = "rtp" if ra > rb else "ptr" if rb > ra else "tie"
            rows.append({"subset": alias, "pass_rate": kind, "judge_version": version, "rtp": ra, "ptr": rb,
                         "leader": leader, "n_pairs": int(len(pairs)), "rtp_only": only_a, "ptr_only": only_b,
                         "p_value": mcnemar_exact(only_a, only_b), "paper_leader": paper,
                         "holds": (leader == paper) if paper else None})
    return pd.DataFrame(rows, columns=ORDERING_COLUMNS)


def fidelity_table(result: StudyResult) -> pd.DataFrame:
    """Per subset and method: strict and tolerant fidelity (mean over plans naming an API) and the share
    of plan steps each resolver resolves."""
    p = result.plans
    if p.empty or "fidelity_strict" not in p:
        return pd.DataFrame(columns=FIDELITY_COLUMNS)
    p = p.merge(result.queries[["qkey", "subset"]], on="qkey")
    rows = []
    for (subset, method), g in p.groupby(["subset", "method"], sort=False):
        steps = int(g["n_steps"].sum())
        strict = sum(len(x) for x in g["named_ids_strict"])
        rows.append({"subset": subset_alias(subset), "method": method,
                     "fidelity_strict": float(g["fidelity_strict"].dropna().mean()),
                     "fidelity": float(g["fidelity"].dropna().mean()),
                     "resolved_strict": strict / steps if steps else float("nan"),
                     "resolved": 1 - int(g["n_named_unresolved"].sum()) / steps if steps else float("nan"),
                     "n_plans": int(len(g)), "n_steps": steps})
    return pd.DataFrame(rows, columns=FIDELITY_COLUMNS)


def pass_rate_comparison(validity: pd.DataFrame) -> pd.DataFrame:
    """Per subset and method: each judge version's judged pass rate and kappa beside the objective rate
    (over the plans that version judged), one row per subset, method and judge version."""
    cols = ["subset", "method", "judge_version", "n_judged", "judged_pass_rate", "objective_pass_rate",
            "coverage", "kappa", "kappa_any", "solved_rate_none"]
    return validity[cols].sort_values(["subset", "method", "judge_version"]).reset_index(drop=True)


def _fmt(x: float) -> str:
    return "n/a" if x != x else f"{x:.2f}"


def findings(ev: pd.DataFrame, order: pd.DataFrame) -> list[str]:
    """One line per judge version (pooled over subsets and methods) and one per re-tested claim, written
    from ``ev`` (:func:`plan_evidence`, one or several judge versions) and :func:`ordering`."""
    lines = []
    for version, g in ev.groupby("judge_version", sort=True):
        r = validity_row(g)
        judged = g[g["verdict"].notna()]["evidence"].value_counts()
        lines.append(f"{version}: {r['n_judged']} plans judged, {_fmt(r['judged_pass_rate'])} rated Solved "
                     f"against an objective pass rate of {_fmt(r['objective_pass_rate'])}; kappa "
                     f"{_fmt(r['kappa'])}; Solved for {_fmt(r['solved_rate_none'])} of the "
                     f"{judged.get('none', 0)} judged plans that name no ground-truth API and for "
                     f"{_fmt(r['solved_rate_all'])} of the {judged.get('all', 0)} that name all of it.")
    for r in order.itertuples():
        paper = {"rtp": "RtP ahead", "ptr": "PtR ahead"}.get(r.paper_leader, "no claim")
        sig = pd.notna(r.p_value) and r.p_value < 0.05  # McNemar: an ordering needs it, not a point estimate
        verdict = ("n/a" if r.holds is None else ("holds" if r.holds else "is reversed") if sig else
                   f"{'matches' if r.holds else 'differs'} at the point estimates only, not significantly")
        label = f"judged by {r.judge_version}" if r.pass_rate == "judged" \
            else f"objective (on {r.judge_version}'s plans)"
        lines.append(f"{r.subset}, {label} pass rate: RtP {r.rtp:.3f} vs PtR {r.ptr:.3f} over {r.n_pairs} "
                     f"pairs (McNemar p = {_fmt(r.p_value)}); paper: {paper}; the ordering {verdict}.")
    return lines
