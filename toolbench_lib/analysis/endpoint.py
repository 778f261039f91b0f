"""The study's primary endpoint (:class:`Endpoint`), declared once, and its one test per comparison: every
table of the report that shows this comparison takes its numbers from here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..config import K
from ..data.queries import shared_tool_groups, subset_alias
from ..eval.compare import INTERACTION_COLUMNS, compare, interactions
from ..eval.evaluation import evaluate
from ..eval.stats import holm
from .findings import recall_verdict


@dataclass(frozen=True)
class Endpoint:
    """What the study's answer is measured by (one definition for every notebook and the report)."""

    metric: str = "recall"
    k: int = K
    gt: str = "candidates"
    basis: str = "per-query mean over runs"
    test: str = "paired t-test clustered by API sample (CR2, Bell and McCaffrey's df)"
    family: str = "Holm over a family's three sets"
    secondary: str = "the paper's one-sample t-test over runs, unadjusted"

    def at(self, k: int) -> Endpoint:
        """The same endpoint at cut-off ``k`` (a run made with another ``k``)."""
        return replace(self, k=k)

    def text(self, robustness: bool = True, temperatures: Mapping | None = None) -> str:
        """One sentence stating the endpoint, for the top of the report (``robustness``: and its robustness
        test; ``temperatures``: a study's settings, whose runs after the first may sample at another)."""
        first, later = run_temperatures(temperatures)
        mixed = f" (run 0 at temperature {first:g}, the later runs at {later:g})" if later is not None else ""
        return (f"**Primary endpoint:** {self.metric}@{self.k} on `{self.gt}`, {self.basis}{mixed}; "
                f"PtR − RtP by a {self.test}, {self.family}."
                + (f" **Robustness** (no verdict): {self.secondary}." if robustness else ""))


def run_temperatures(settings: Mapping | None) -> tuple[float | None, float | None]:
    """A study's run-0 temperature, and its later runs' where they sample at another (else None)."""
    first, later = (settings or {}).get("temperature"), (settings or {}).get("run_temperature")
    return first, later if first is not None and later not in (None, first) else None


PRIMARY = Endpoint()
FAMILY_OF = {"": "dense", "@bm25": "bm25", "@hybrid": "hybrid", "@dense": "dense"}
ENDPOINT_COLUMNS = ["comparison", "retriever", "subset", "n_queries", "n_runs", "rtp", "ptr", "diff",
                    "ci_low", "ci_high", "p", "p_holm", "ci_low_holm", "ci_high_holm",
                    "p_family", "p_runs_robustness", "note", "leader",
                    "significant", "paper_rtp", "paper_ptr", "paper_leader", "verdict", "n_groups",
                    "p_wilcoxon_robustness", "largest_cluster", "largest_cluster_n"]
ROBUSTNESS = {"tool_clusters": "queries sharing any tool in one cluster",
              "run0": "run 0 alone (temperature 0)",
              "no_largest_cluster": "each set without its dominant cluster, where one dominates"}
ENDPOINT_COLUMNS += [f"{c}_{v}_robustness" for v in ROBUSTNESS
                     for c in ("n_groups", "n", "diff", "p_holm", "ci_low_holm", "ci_high_holm")]
ENDPOINT_COLUMNS.append("p_holm_all_families_robustness")  # Holm over every family × set at once


def family_pairs(methods: Sequence[str]) -> dict[str, tuple[str, str]]:
    """``{retriever family: (rtp method, ptr method)}`` for every family whose two architectures ran."""
    out = {}
    for suffix, family in FAMILY_OF.items():
        a, b = f"rtp{suffix}", f"ptr{suffix}"
        if a in methods and b in methods and family not in out:
            out[family] = (a, b)
    return out


def endpoint_table(result, endpoint: Endpoint = PRIMARY,
                   paper: Mapping[str, Mapping[str, float]] | None = None,
                   families: Sequence[str] | None = None, sets: Sequence[str] | None = None) -> pd.DataFrame:
    """The primary comparison per retriever family and set (:data:`ENDPOINT_COLUMNS`); ``paper``: ``{set:
    {"rtp": recall, "ptr": recall}}``; ``families`` / ``sets``: only those (Holm over ``sets``)."""
    paper = paper or {}
    pairs = family_pairs(result.methods)
    if families is not None:
        pairs = {f: p for f, p in pairs.items() if f in families}
    if not pairs:
        return pd.DataFrame(columns=ENDPOINT_COLUMNS)
    ev = evaluate(result)
    sets = list(dict.fromkeys(ev.subsets)) if sets is None else [s for s in sets if s in set(ev.subsets)]
    if not sets:
        return pd.DataFrame(columns=ENDPOINT_COLUMNS)
    largest = _largest_clusters(ev, sets)
    variants = _robustness_variants(ev, result.queries, largest)
    rows = []
    for family, (a, b) in pairs.items():
        tests = compare(ev, a, b, sets, endpoint.gt, endpoint.k, endpoint.metric)
        for name, variant in variants.items():
            alt = compare(variant, a, b, sets, endpoint.gt, endpoint.k, endpoint.metric).set_index("subset")
            tests = tests.assign(**{f"{c}_{name}_robustness": tests["subset"].map(alt[c]) for c in (
                "n_groups", "n", "diff", "p_holm", "ci_low_holm", "ci_high_holm")})
        tests = tests.assign(largest_cluster=tests["subset"].map(lambda s: largest[s][0]),
                             largest_cluster_n=tests["subset"].map(lambda s: largest[s][1]))
        undefined = tests["largest_cluster"] == ""  # none dominates: leaving one out would be arbitrary
        tests.loc[undefined, [c for c in tests if c.endswith("_no_largest_cluster_robustness")]] = np.nan
        for t in tests.itertuples():
            ref = dict(paper.get(subset_alias(t.subset), paper.get(t.subset, {})))
            v = recall_verdict(t.mean_a, t.mean_b, t.p_holm, t.family, ref)
            rows.append({**t._asdict(), **v, "retriever": family, "n_queries": int(t.n), "n_runs": ev.n_runs,
                         "rtp": t.mean_a, "ptr": t.mean_b, "p_family": f"{t.family} ({family})",
                         "paper_rtp": ref.get("rtp", np.nan), "paper_ptr": ref.get("ptr", np.nan)})
    out = pd.DataFrame(rows, columns=ENDPOINT_COLUMNS)
    over = holm(out["p"].to_numpy(float)) if len(pairs) > 1 else np.nan
    return out.assign(p_holm_all_families_robustness=over)


DOMINATES = 0.2  # a cluster holding this share of its set's queries, and more than any other, dominates it


def _largest_clusters(ev, sets: Sequence[str]) -> dict[str, tuple[str, int]]:
    """Per set, its dominant cluster (queries written from one sample of APIs: the one largest, holding at
    least :data:`DOMINATES` of the set) and the largest cluster's size; no name (``""``) where none dominates
    (a tie for the largest, a smaller share, or a set of one cluster, which leaving it out would empty)."""
    out = {}
    for s in sets:
        groups = ev.groups[ev.subsets == s] if ev.groups is not None else []
        names, counts = np.unique(groups, return_counts=True)
        top = int(counts.max()) if len(counts) else 0
        dominant = len(counts) > 1 and (counts == top).sum() == 1 and top >= DOMINATES * counts.sum()
        out[s] = (str(names[np.argmax(counts)]) if dominant else "", top)
    return out


def _robustness_variants(ev, queries: pd.DataFrame, largest: Mapping[str, tuple[str, int]]) -> dict:
    """The evaluation as each robustness check of :data:`ROBUSTNESS` reads it: coarser clusters (queries
    linked by any shared tool), run 0 alone, and every set with its dominant cluster moved out of it."""
    coarse = shared_tool_groups(queries)
    groups = ev.groups if ev.groups is not None else np.full(len(ev.qkeys), None)
    dropped = np.array([bool(largest.get(s, ("", 0))[0]) and largest[s][0] == str(g)
                        for s, g in zip(ev.subsets, groups, strict=True)])
    return {"tool_clusters": replace(ev, groups=np.array([coarse[q] for q in ev.qkeys])),
            "run0": replace(ev, flags=ev.flags[:, :, :1], n_runs=1),
            "no_largest_cluster": replace(ev, subsets=np.where(dropped, "largest cluster", ev.subsets))}


def per_query_table(result, endpoint: Endpoint = PRIMARY) -> pd.DataFrame:
    """The dense primary comparison's inputs, one row per query: its set, its cluster and its coarser
    shared-tool cluster, RtP's value, PtR's per run and mean over runs (what every paired test reads)."""
    ev, coarse = evaluate(result), shared_tool_groups(result.queries)
    vals = ev.values(endpoint.metric, endpoint.k, endpoint.gt)
    rtp, ptr = vals[ev._method("rtp")], vals[ev._method("ptr")]
    out = pd.DataFrame({"qkey": ev.qkeys, "subset": ev.subsets, "cluster": ev.groups,
                        "tool_cluster": [coarse[q] for q in ev.qkeys], "rtp": rtp.mean(axis=0)})
    return out.assign(**{f"ptr_run{r}": ptr[r] for r in range(ptr.shape[0])}, ptr=ptr.mean(axis=0),
                      metric=f"{endpoint.metric}@{endpoint.k}", gt=endpoint.gt)


def interaction_table(result, endpoint: Endpoint = PRIMARY,
                      paper: Mapping[str, Mapping[str, float]] | None = None,
                      families: Sequence[str] | None = None) -> pd.DataFrame:
    """The paper's crossover as one test per family and later set: how PtR − RtP changes from G1 to G2 and
    to G3 (:func:`~toolbench_lib.eval.compare.interactions`, Holm over the two), with the paper's own change
    (``paper_diff``, from ``paper``'s recalls) where it reports both sets."""
    columns = ["retriever", *INTERACTION_COLUMNS, "paper_diff"]
    pairs = {f: p for f, p in family_pairs(result.methods).items() if families is None or f in families}
    ev = evaluate(result) if pairs else None
    sets = {subset_alias(s): s for s in dict.fromkeys(ev.subsets)} if ev is not None else {}
    if "G1" not in sets or len(sets) < 2:
        return pd.DataFrame(columns=columns)
    paper = {subset_alias(s): v for s, v in (paper or {}).items()}

    def paper_gap(s: str) -> float:
        v = paper.get(s, {})
        return v["ptr"] - v["rtp"] if "ptr" in v and "rtp" in v else np.nan

    frames = []
    for family, (a, b) in pairs.items():
        t = interactions(ev, a, b, sets["G1"], [s for alias, s in sets.items() if alias != "G1"],
                         endpoint.gt, endpoint.k, endpoint.metric)
        t.insert(0, "retriever", family)
        t["paper_diff"] = [paper_gap(subset_alias(s)) - paper_gap("G1") for s in t["second"]]
        frames.append(t)
    return pd.concat(frames, ignore_index=True)[columns]
