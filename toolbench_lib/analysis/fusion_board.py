"""Fused methods against the better architecture (paired, :mod:`toolbench_lib.eval.stats`), and the choice
of one on the design sets, scored unchanged on unseen sets: notebooks 10 and 12's leaderboard."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from ..config import FOLDS, SEED, K
from ..data.folds import query_folds
from ..data.normalize import norm_text
from ..data.queries import DEFAULT_GT, clusters, subset_alias
from ..eval.evaluation import METRICS, per_query_runs, recall_at, score_rankings
from ..retrieval.fused import METHODS, NAMED
from ..retrieval.fusion_specs import FusionSpec, study_component_inputs
from ..retrieval.retrievers import method_name, split_method
from ..retrieval.tuning import best_by_group, candidate_specs, held_out_choice
from .intervals import DIFF_CI, LO_HI, mean_ci, paired_columns
from .retrievers import ARCH_LABEL, families_of

BASELINES = ("rtp", "ptr")
VERSUS = {**DIFF_CI, **LO_HI, "p": "p_value", "p_wilcoxon": "p_wilcoxon_robustness", "wins": "wins",
          "losses": "losses", "ties": "ties", "note": "note"}
COMPARISON = {**DIFF_CI, **LO_HI, "wins": "wins", "losses": "losses", "p": "p_value", "note": "note"}


def versus(values: np.ndarray, reference: np.ndarray, groups=None) -> dict:
    """``values`` against ``reference`` (same queries) by :func:`~toolbench_lib.eval.stats.paired`, clustered
    by ``groups``, its fields named as :data:`VERSUS` names them."""
    return paired_columns(reference, values, VERSUS, groups)


def query_clusters(scores: pd.DataFrame, keys) -> list | None:
    """The cluster of each query of ``keys`` from a scores table's ``cluster`` column (None without it)."""
    return (scores.drop_duplicates("qkey").set_index("qkey")["cluster"].reindex(list(keys)).tolist()
            if "cluster" in scores else None)


def better_reference(wide: pd.DataFrame, baselines: Sequence[str] = BASELINES) -> str | None:
    """The baseline column of ``wide`` (queries x methods) with the higher mean; None when there is none."""
    means = {b: wide[b].mean() for b in baselines if b in wide}
    return max(means, key=lambda b: means[b]) if means else None


def leaderboard(scores: pd.DataFrame, k: int = K, metrics: Sequence[str] = METRICS, n_boot: int = 2000,
                seed: int = SEED) -> pd.DataFrame:
    """Per set, method and metric at ``k`` (``scores``: ``qkey, subset, method, metric, k, value``): mean,
    bootstrap CI, and the paired comparison (:func:`versus`) with the better of RtP and PtR there."""
    at = scores[scores["k"] == k]
    rows = []
    for (subset, metric), part in at[at["metric"].isin(metrics)].groupby(["subset", "metric"], sort=False):
        wide = part.pivot_table(index="qkey", columns="method", values="value")
        best, cl = better_reference(wide), query_clusters(part, wide.index)
        for method in wide.columns:
            v = wide[method].to_numpy()
            lo, hi = mean_ci(v, cl, n_boot, seed)
            row = {"subset": subset, "method": method, "metric": metric, "k": k, "n_queries": len(v),
                   "mean": float(v.mean()), "ci_lo": lo, "ci_hi": hi, "reference": best,
                   "reference_mean": float(wide[best].mean()) if best is not None else np.nan}
            if best is not None:
                row.update(versus(v, wide[best].to_numpy(), cl))
            rows.append(row)
    return pd.DataFrame(rows)


def _method_order(s: pd.Series) -> pd.Series:
    order = {m: i for i, m in enumerate(METHODS)}
    return s.map(lambda m: order.get(m, len(order)))


def leaderboard_wide(board: pd.DataFrame, metrics: Sequence[str] = ("recall", "precision", "ndcg", "comp"),
                     ) -> pd.DataFrame:
    """One row per set and method, ``metric [lo, hi]`` per column; recall's paired difference and p."""
    b = board[board["metric"].isin(metrics)]
    cells = b.assign(cell=b.apply(lambda r: f"{r['mean']:.3f} [{r['ci_lo']:.3f}, {r['ci_hi']:.3f}]", axis=1))
    wide = cells.pivot_table(index=["subset", "method"], columns="metric", values="cell", aggfunc="first")
    wide = wide[[m for m in metrics if m in wide.columns]].reset_index()
    rec = board[board["metric"] == "recall"].set_index(["subset", "method"])
    for col in ("reference", "diff", "p_value"):
        wide[f"recall_{col}"] = [rec[col].get((s, m), np.nan) for s, m in zip(wide["subset"], wide["method"],
                                                                               strict=True)]
    return wide.sort_values(["subset", "method"], key=lambda s: _method_order(s) if s.name == "method" else s,
                            kind="stable").reset_index(drop=True)


GOAL = ("a fused or learned method meets the goal on a set when the paired 95% CI of its recall@k minus that "
        "of the best single architecture of any family there (RtP or PtR, with dense, BM25 or hybrid "
        "retrieval, whichever has the highest mean on the set) lies above 0; it meets the goal when it does "
        "on every set, the design sets it was chosen or fitted on and the unseen sets alike")
GOAL_MIN_QUERIES = 10  # fewer queries on a set: the goal is not testable there, so never met
GOAL_TABLE = "retriever_fusion_design"  # notebook 12: every fused method against every single architecture
SINGLE_ARCHITECTURES = tuple(method_name(a, f) for f in ("dense", "bm25", "hybrid") for a in BASELINES)


def single_architectures(methods) -> list[str]:
    """The single architectures (RtP or PtR with one retriever family) among ``methods``."""
    return [m for m in SINGLE_ARCHITECTURES if m in set(methods)]


def goal_table(scores: pd.DataFrame, k: int = K) -> pd.DataFrame:
    """Per method: on every set, recall@k minus the set's best single architecture with its paired 95% CI;
    ``meets_goal`` when every lower bound is above 0 (:data:`GOAL`), never on a set of fewer than
    :data:`GOAL_MIN_QUERIES` queries or without a CI (``goal_note`` says why); ``baselines`` names them."""
    r = scores[(scores["metric"] == "recall") & (scores["k"] == k)]
    base = single_architectures(r["method"])
    rows, untestable = {}, []
    for subset, part in r.groupby("subset", sort=False):
        wide = part.pivot_table(index="qkey", columns="method", values="value")
        best, cl = better_reference(wide, base), query_clusters(part, wide.index)
        if len(wide) < GOAL_MIN_QUERIES:
            untestable.append(f"{subset}: {len(wide)} queries (the goal needs {GOAL_MIN_QUERIES})")
        for method in wide.columns:
            v = versus(wide[method].to_numpy(), wide[best].to_numpy(), cl)
            row = rows.setdefault(method, {"method": method})
            row[f"recall_{subset}"] = float(wide[method].mean())
            row[f"margin_{subset}"], row[f"margin_lo_{subset}"] = v["diff"], v["diff_lo"]
    out = pd.DataFrame(list(rows.values()))
    margins = out.filter(like="margin_lo_")
    testable = not untestable and margins.notna().all(axis=1)  # no CI (one query, a NaN): not testable
    out.insert(1, "min_margin", out[[c for c in out.columns if c.startswith("margin_")
                                     and not c.startswith("margin_lo_")]].min(axis=1))
    out.insert(2, "meets_goal", (margins > 0).all(axis=1) & testable & ~out["method"].isin(base))
    out.insert(3, "baselines", ", ".join(base))
    out.insert(4, "goal_note", "; ".join(untestable) or np.where(margins.notna().all(axis=1), "",
                                                                  "a set without a CI: not testable"))
    return out.sort_values("min_margin", ascending=False).reset_index(drop=True)


def goal_summary(goal: pd.DataFrame) -> str:
    """One line on a :func:`goal_table`: how many meet :data:`GOAL`, and the best one's smallest margin."""
    cand = goal[~goal["method"].isin(SINGLE_ARCHITECTURES)]
    met = cand[cand["meets_goal"]]["method"].tolist()
    base = goal["baselines"].iloc[0] if len(goal) else ""
    if cand.empty:
        return "No fused or learned method was scored."
    best = cand.iloc[0]
    return (f"{len(met)} of {len(cand)} fused or learned methods meet the goal against {base} "
            f"({', '.join(f'`{m}`' for m in met) or 'none'}); the best by smallest margin, "
            f"`{best['method']}`, has a smallest margin of {best['min_margin']:+.3f}.")


def goal_sentence(design: pd.DataFrame, ledger=None) -> str:
    """The goal's verdict from notebook 12's comparison rows: which fused or learned methods meet it on every
    set, and the best one's margin per set. ``ledger`` (the report's) records each number."""
    put = ledger.put if ledger is not None else (lambda name, text: text)
    fused = design[~design["method"].isin(SINGLE_ARCHITECTURES)]
    if fused.empty:
        return "No fused or learned method was scored."
    met = [m for m, g in fused.groupby("method", sort=False) if bool((g["diff_lo"] > 0).all())]
    best = str(fused.groupby("method", sort=False)["diff"].mean().idxmax())
    per_set = "; ".join(
        f"{subset_alias(r.subset)} " + put(f"{best} {subset_alias(r.subset)} margin", f"{r.diff:+.3f}") + " "
        + put(f"{best} {subset_alias(r.subset)} margin CI", f"[{r.diff_lo:+.3f}, {r.diff_hi:+.3f}]")
        + f" over `{r.reference}`" for r in fused[fused["method"] == best].itertuples())
    sets = list(dict.fromkeys(subset_alias(s) for s in fused["subset"]))
    verdict = (f"{len(met)} of {fused['method'].nunique()} fused or learned methods meet the goal on all "
               f"{len(sets)} sets ({', '.join(sets)}): {', '.join(f'`{m}`' for m in met) or 'none'}")
    return (f"**The goal:** {GOAL}. **Here:** {verdict}. The best on average, `{best}`: {per_set}.")


def metric_wide(scores: pd.DataFrame, k: int, metric: str = "recall") -> pd.DataFrame:
    """``subset, qkey`` and one column per method: each query's ``metric`` at ``k``."""
    at = scores[(scores["metric"] == metric) & (scores["k"] == k)]
    return at.pivot_table(index=["subset", "qkey"], columns="method", values="value").reset_index()


def pooled_margin(scores: pd.DataFrame, k: int = K, metric: str = "recall") -> pd.DataFrame:
    """Per method, over every set's queries together: each query's score minus its own set's better
    architecture's, with :func:`versus`' paired CI and tests."""
    wide = metric_wide(scores, k, metric)
    ref = pd.Series(np.nan, index=wide.index)
    for _, part in wide.groupby("subset", sort=False):
        ref.loc[part.index] = part[better_reference(part)]
    rows, cl = [], query_clusters(scores, wide["qkey"])
    for method in [c for c in wide.columns if c not in ("subset", "qkey")]:
        rows.append({"method": method, "metric": metric, "k": k, "n_queries": len(wide),
                     "mean": float(wide[method].mean()), "reference_mean": float(ref.mean()),
                     **versus(wide[method].to_numpy(), ref.to_numpy(), cl)})
    return pd.DataFrame(rows).sort_values("method", key=_method_order).reset_index(drop=True)


def fusion_comparison(scores: pd.DataFrame, methods: Sequence[str],
                      baselines: Sequence[str] = BASELINES) -> pd.DataFrame:
    """Per set and method (``scores``: ``qkey, subset, method, recall``): mean recall and its CI, and
    :func:`versus` the set's better baseline."""
    rows = []
    wide = scores.pivot_table(index=["subset", "qkey"], columns="method", values="recall")
    for subset in dict.fromkeys(scores["subset"]):
        w = wide.loc[subset]
        ref, cl = better_reference(w, baselines), query_clusters(scores, w.index)
        for m in methods:
            v = w[m].to_numpy()
            lo, hi = mean_ci(v, cl)
            rows.append({"subset": subset, "method": m, "n_queries": len(v), "recall": float(v.mean()),
                         "recall_lo": lo, "recall_hi": hi, "reference": ref,
                         "reference_recall": float(w[ref].mean()),
                         **paired_columns(w[ref].to_numpy(), v, COMPARISON, cl)})
    return pd.DataFrame(rows)


def spec_recalls(specs: Sequence[FusionSpec], result, k: int, gt: str = DEFAULT_GT) -> np.ndarray:
    """Recall@k of every (spec, query), averaged over the study's runs (eval's one count)."""
    keys = result.queries["qkey"].tolist()
    comps = list(dict.fromkeys(c for s in specs for c in s.components))
    out = np.zeros((len(specs), len(keys)))
    for run in range(result.n_runs):
        inp = study_component_inputs(result, run, gt, comps)
        for i, spec in enumerate(specs):
            ranked = spec.ranked(inp, k)
            out[i] += recall_at([ranked[key] for key in keys], [inp.qrels[key] for key in keys], k)
    return out / result.n_runs


def choose_fusion(result, components: Sequence[str], k: int = K, gt: str = DEFAULT_GT, folds: int = FOLDS,
                  seed: int = SEED, values: Sequence[float] = (0.0, 0.5, 1.0)) -> dict:
    """The candidate over ``components`` (RRF, or min-max wsum on a weight grid) with the best recall@k
    averaged within each set, then over sets: ``spec``, out-of-fold ``cv_recall`` and ``n_candidates``."""
    specs = candidate_specs(components, values)
    keys, groups = result.queries["qkey"].tolist(), result.queries["subset"].map(subset_alias).to_numpy()
    recall = spec_recalls(specs, result, k, gt)
    fold = query_folds(groups, result.queries["query"], clusters(result.queries), folds, seed)
    cv = recall[held_out_choice(recall, groups, fold), np.arange(len(keys))]
    return {"spec": specs[best_by_group(recall, groups)], "cv_recall": pd.Series(cv, index=keys),
            "n_candidates": len(specs)}


def unseen_queries(queries: pd.DataFrame, design: pd.DataFrame,
                   min_queries: int = 10) -> tuple[set[str], pd.DataFrame]:
    """Keys of the queries whose text (:func:`~toolbench_lib.data.normalize.norm_text`) is in no design
    query, and a per-set count; a set with fewer than ``min_queries`` unseen queries is dropped."""
    seen = queries["query"].map(norm_text).isin({norm_text(t) for t in design["query"]})
    counts = queries.assign(seen=seen).groupby("subset", sort=False)["seen"].agg(n="size", seen="sum")
    counts["unseen"] = counts["n"] - counts["seen"]
    counts["kept"] = counts["unseen"] >= min_queries
    keys = set(queries.loc[~seen & queries["subset"].isin(counts.index[counts["kept"]]), "qkey"])
    return keys, counts.reset_index()


def fusion_scores(result, specs: Mapping[str, FusionSpec], k: int = K, gt: str = DEFAULT_GT) -> pd.DataFrame:
    """``qkey, subset, method, recall``: per query recall@k (mean over runs) of each named spec and of
    every RtP/PtR method of the study."""
    frames = []
    comps = list(dict.fromkeys(c for s in specs.values() for c in s.components))
    for run in range(result.n_runs):
        inp = study_component_inputs(result, run, gt, comps)
        for name, spec in specs.items():
            pq = score_rankings(spec.ranked(inp, k), result.queries, gt, k, ("recall",))
            frames.append(pq.assign(method=name, run=run))
    pq = per_query_runs(result, k, gt, ("recall",))
    single = pq["method"].map(lambda m: split_method(m)[0] in ARCH_LABEL)
    frames.append(pq[single][["qkey", "recall", "method", "run"]])
    allq = pd.concat(frames, ignore_index=True)
    mean = allq.groupby(["qkey", "method"], sort=False)["recall"].mean().reset_index()
    alias = dict(zip(result.queries["qkey"], result.queries["subset"].map(subset_alias), strict=True))
    return mean.assign(subset=mean["qkey"].map(alias), cluster=clusters(result.queries, mean["qkey"]))[
        ["qkey", "subset", "method", "recall", "cluster"]]


STUB_COMPONENTS = ("q.dense", "q.bm25", "s.dense", "s.bm25")
NO_LLM_COMPONENTS = ("q.dense", "q.bm25")
FUSED_WITH_STUBS = "fused (1 stub call)"
FUSED_NO_LLM = "fused (no LLM call)"


def chosen_fusions(design, k: int = K, gt: str = DEFAULT_GT, seed: int = SEED) -> tuple[dict, pd.DataFrame]:
    """``({name: spec}, table)``: the fused methods chosen on the design study over all four components (one
    stub call) and over the query's two rankings (no LLM call), with candidates and out-of-fold recall@k."""
    specs, rows = {}, []
    q_alias = design.queries.set_index("qkey")["subset"].map(subset_alias)
    for name, comps, values in (
        (FUSED_WITH_STUBS, STUB_COMPONENTS, (0.0, 0.5, 1.0)),
        (FUSED_NO_LLM, NO_LLM_COMPONENTS, (0.0, 0.25, 0.5, 0.75, 1.0)),
    ):
        got = choose_fusion(design, comps, k, gt, seed=seed, values=values)
        specs[name] = got["spec"]
        cv = got["cv_recall"].groupby(q_alias).mean()
        rows.append({"method": name, "spec": got["spec"].describe(), "candidates": got["n_candidates"],
                     **{f"cv_recall_{s}": float(v) for s, v in cv.items()}})
    return specs, pd.DataFrame(rows)


def cost_table(result, families: Sequence[str], specs: Mapping[str, FusionSpec],
               search_ms: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Per method: LLM calls before planning, the stub call's tokens per query and, when measured, search
    milliseconds per query (a fused method pays its components' searches)."""
    calls = result.calls
    c = calls[calls["stage"] == "stubs"] if calls is not None and len(calls) else calls
    stub_tokens = float((c["tokens_in"] + c["tokens_out"]).mean()) if c is not None and len(c) else np.nan
    ms = dict(search_ms or {})
    rows = []
    for f in families:
        for arch in ("rtp", "ptr"):
            uses = arch == "ptr"
            key = f"{f}:{'stubs' if uses else 'query'}"
            rows.append({"method": method_name(arch, f), "architecture": ARCH_LABEL[arch], "retriever": f,
                         "llm_calls": int(uses), "stub_tokens": stub_tokens if uses else 0.0,
                         "search_ms": ms.get(key, np.nan)})
    comp_key = {c: f"{c[2:]}:{'query' if c[0] == 'q' else 'stubs'}" for c in STUB_COMPONENTS}  # dense:query
    for name, spec in specs.items():
        parts = [ms.get(comp_key[c], np.nan) for c in spec.components]
        rows.append({"method": name, "architecture": "fused", "retriever": "+".join(spec.components),
                     "llm_calls": int(spec.uses_stubs),
                     "stub_tokens": stub_tokens if spec.uses_stubs else 0.0,
                     "search_ms": float(np.sum(parts)) if parts else np.nan})
    return pd.DataFrame(rows)


def fusion_sentences(design_cmp: pd.DataFrame, unseen_cmp: pd.DataFrame | None) -> list[str]:
    """Per fused method, a line: its margin over the best single architecture per design and unseen set, and
    whether it meets :data:`GOAL` on every set."""
    lines = []
    parts = [("design", design_cmp)]
    if unseen_cmp is not None and len(unseen_cmp):
        parts.append(("unseen", unseen_cmp))
    for m in dict.fromkeys(design_cmp["method"]):
        bits, ok = [], True
        for label, cmp in parts:
            g = cmp[cmp["method"] == m]
            ok &= bool((g["diff_lo"] > 0).all())
            bits.append(f"{label} sets: " + ", ".join(f"{r['subset']} {r['diff']:+.3f} [{r['diff_lo']:+.3f}, "
                                                      f"{r['diff_hi']:+.3f}] over {r['reference']}"
                                                      for _, r in g.iterrows()))
        lines.append(f"`{m}` {'meets' if ok else 'misses'} the goal (paired 95% CI above 0 against the best "
                     "single architecture of any family on every set): " + "; ".join(bits) + ".")
    return lines


def unseen_keys(validation, design) -> tuple[set[str], pd.DataFrame]:
    """Keys of ``validation``'s queries whose text is in no design query, and a per-set count."""
    return unseen_queries(validation.queries, design.queries)


def fusion_and_costs(design, validation, unseen: set[str] | None, setup_ms: dict, k: int = K,
                     gt: str = DEFAULT_GT, seed: int = SEED) -> dict[str, pd.DataFrame]:
    """The fused methods chosen on ``design``, scored unchanged on ``validation``'s ``unseen`` queries, their
    verdicts and :func:`cost_table` (``retriever_costs``), as one dict of tables."""
    specs, choice = chosen_fusions(design, k, gt, seed)
    specs = {**specs, "fuse4 (fixed a priori)": NAMED["fuse4"]}
    shown = [*specs, *(method_name(a, f) for f in families_of(design) if f != "dense" for a in BASELINES)]
    design_cmp = fusion_comparison(fusion_scores(design, specs, k, gt), shown,
                                   single_architectures(design.methods)).assign(runs=design.n_runs)
    tables = {"retriever_fusion_choice": choice, "retriever_fusion_design": design_cmp}
    unseen_fused = None
    if validation is not None and unseen:
        vs = fusion_scores(validation, specs, k, gt)
        vs = vs[vs["qkey"].isin(unseen)]
        if len(vs):
            unseen_cmp = fusion_comparison(vs, [m for m in shown if m in set(vs["method"])],
                                           single_architectures(validation.methods)).assign(runs=validation.n_runs)
            tables["retriever_fusion_unseen"] = unseen_cmp
            unseen_fused = unseen_cmp[unseen_cmp["method"].isin(specs)]
    lines = fusion_sentences(design_cmp[design_cmp["method"].isin(specs)], unseen_fused)
    tables["retriever_fusion_verdicts"] = pd.DataFrame({"text": lines})
    tables["retriever_costs"] = cost_table(design, families_of(design), specs, setup_ms)
    return tables
