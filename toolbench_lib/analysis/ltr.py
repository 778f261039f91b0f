"""The learned ranker (:mod:`toolbench_lib.retrieval.ltr`) measured on stored retriever studies: out-of-fold
recall, comparisons, ablations, feature importance and costs."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..config import DEFAULT_GT, DEPTH, SEED, K
from ..data.queries import GT_DEFINITIONS, clusters, subset_alias
from ..eval.evaluation import evaluate, recall_at
from ..eval.stats import paired
from ..retrieval.fused import NAMED as FUSED
from ..retrieval.fusion_specs import study_component_inputs
from ..retrieval.ltr import (
    ALL,
    NAMED,
    Fitted,
    fit,
    is_training,
    learned_frame,
    qrels_of,
    ranked,
    study_features,
    training_queries,
)
from ..retrieval.ltr_features import LtrSpec, feature_table, study_runs
from ..retrieval.retrievers import split_method
from .fusion_board import chosen_fusions, query_clusters
from .style import LEGEND_SIZE

SINGLE = ("rtp", "ptr")  # the architectures; with the dense family their method names
ABLATIONS = {
    "ltr": NAMED["ltr"],
    "with every run's stubs (ltr-4runs)": NAMED["ltr-4runs"],
    "with the hybrid rankings": LtrSpec((*ALL, "q.hybrid", "s.hybrid")),  # where the study ran that family
    "without per-stub evidence": LtrSpec(ALL, stub_evidence=False),
    "without lexical overlap": LtrSpec(ALL, lexical=False),
    "without tool-level features": LtrSpec(ALL, tool=False),
    "without category-level features": LtrSpec(ALL, category=False),
    "without stub features": LtrSpec(("q.dense", "q.bm25")),
    "without BM25": LtrSpec(("q.dense", "s.dense")),
    "without dense": LtrSpec(("q.bm25", "s.bm25")),
}
BEST_SINGLE = "best single architecture"
PREFIX_GROUPS = {"tool_": "tool", "cat_": "category", "lex_": "lexical", "runs_": "runs"}  # feature groups


def single_methods(result) -> list[str]:
    """The study's single architectures (RtP and PtR with any retriever family)."""
    return [m for m in result.methods if split_method(m)[0] in SINGLE]


SCORE_COLUMNS = ["qkey", "subset", "part", "method", "gt", "recall", "cluster"]  # cluster: the paired tests'


def _frame(queries, keys, method: str, gt: str, recall) -> pd.DataFrame:
    """:data:`SCORE_COLUMNS` but ``part`` of ``keys`` (of ``queries``), given their recall."""
    subsets = dict(zip(queries["qkey"], queries["subset"].map(subset_alias), strict=True))
    return pd.DataFrame({"qkey": list(keys), "subset": [subsets[q] for q in keys], "method": method, "gt": gt,
                         "recall": recall, "cluster": clusters(queries, keys)})


def _scored(queries, keys, method, gt, runs_lists, k: int) -> pd.DataFrame:
    """``qkey, subset, method, gt, recall``: recall@k of ``keys`` (of ``queries``) under ``gt``, mean over
    ``runs_lists`` (one per run)."""
    qrels = qrels_of(queries, gt)
    recall = np.mean([recall_at([list(x.get(q, [])) for q in keys], [qrels[q] for q in keys], k)
                      for x in runs_lists], axis=0)
    return _frame(queries, keys, method, gt, recall)


def single_scores(result, keys: Sequence[str], k: int = K,
                  gts: Sequence[str] = GT_DEFINITIONS) -> pd.DataFrame:
    """``qkey, subset, method, gt, recall``: recall@k of each single architecture, mean over runs, read from
    the study's evaluation."""
    ev = evaluate(result)
    at = pd.Series(np.arange(len(ev.qkeys)), index=ev.qkeys).loc[list(keys)].to_numpy()
    return pd.concat([_frame(result.queries, keys, m, gt,
                             ev.values("recall", k, gt)[ev.methods.index(m)][:, at].mean(axis=0))
                      for gt in gts for m in single_methods(result)], ignore_index=True)


def _unseen(validation, unseen: set[str] | None) -> list[str]:
    """The keys of ``validation``'s queries in ``unseen``, in its order (none without a validation study)."""
    keep = set(unseen or ())
    return [q for q in validation.queries["qkey"] if q in keep] if validation is not None else []


def ranker_lists(design, validation, spec: LtrSpec, run: int = 0, seed: int = SEED,
                 label_gt: str = "candidates", depth: int = DEPTH, fit_model: bool = True,
                 tables: dict | None = None) -> tuple[dict, Fitted | None]:
    """``(lists, model)``: the out-of-fold lists of :func:`learned_frame` and the model fitted on its training
    queries (None without ``fit_model``). ``tables`` keeps each run's features for other labels."""
    frame = learned_frame(design, validation, spec, run, seed, label_gt, depth, tables)
    lists = {q: g.tolist() for q, g in frame.groupby("qkey", sort=False)["api_id"]}
    if not fit_model:
        return lists, None
    queries = training_queries(design, validation)
    table = study_features(design, validation, spec, run, qrels_of(queries, label_gt), depth, tables)
    sets = queries.set_index("qkey")["subset"].to_dict()
    trained = [k for k in table.queries if is_training(sets[k])]  # the queries the cross-fit trained on
    return lists, fit(table, spec, trained, sets, seed, label_gt)


def linear_fusion_scores(design, validation=None, unseen: set[str] | None = None, k: int = K,
                         gts: Sequence[str] = GT_DEFINITIONS, seed: int = SEED) -> pd.DataFrame:
    """Per query recall@k (:func:`ranker_scores`' columns) of the two linear fusions chosen on the design sets
    (:func:`.fusion_board.chosen_fusions`), mean over the design runs; the unseen sets from run 0."""
    specs, _ = chosen_fusions(design, k, "candidates", seed)
    frames = []
    parts = [("design", design, design.queries["qkey"].tolist(), range(design.n_runs))]
    if ukeys := _unseen(validation, unseen):
        parts.append(("unseen", validation, ukeys, [0]))
    for part, result, keys, runs in parts:
        for name, spec in specs.items():
            lists = [spec.ranked(study_component_inputs(result, r, components=spec.components), k)
                     for r in runs]
            for gt in gts:
                frames.append(_scored(result.queries, keys, f"linear {name}", gt, lists, k).assign(part=part))
    return pd.concat(frames, ignore_index=True)[SCORE_COLUMNS]


def ranker_scores(design, validation=None, unseen: set[str] | None = None,
                  specs: Mapping[str, LtrSpec] | None = None, k: int = K, gts: Sequence[str] = GT_DEFINITIONS,
                  runs: Sequence[int] | None = None, seed: int = SEED, label_gt: str | None = None,
                  fit_models: bool = True) -> tuple[pd.DataFrame, dict[str, Fitted]]:
    """``(scores, models)``: out-of-fold recall@k per query (``part``: ``design``, mean over ``runs``, or
    ``unseen``, run 0) of each ranker (labels: each ground truth, or ``label_gt``) and single architecture."""
    specs = dict(specs or NAMED)
    runs = list(range(design.n_runs)) if runs is None else list(runs)
    dkeys, ukeys = design.queries["qkey"].tolist(), _unseen(validation, unseen)
    queries = training_queries(design, validation)
    labels = {gt: gt for gt in gts} if label_gt is None else {label_gt: None}
    model_label = label_gt or (DEFAULT_GT if DEFAULT_GT in gts else gts[0])
    frames, models, tables = [], {}, {}
    for name, spec in specs.items():
        # a ranker of deterministic methods only (RtP's) reads the same rankings in every run: fitted once
        same_each_run = set(spec.methods) <= set(design.deterministic)
        for label, only in labels.items():
            scored = [only] if only else list(gts)
            runs_lists = []
            for r in runs:
                if r == runs[0] or not same_each_run:
                    fit_now = fit_models and r == runs[0] and label == model_label
                    lists, model = ranker_lists(design, validation, spec, r, seed, label, fit_model=fit_now,
                                                tables=tables)
                    if r == runs[0] and model is not None:
                        models[name] = model
                runs_lists.append(lists)
            parts = [("unseen", ukeys, runs_lists[:1])] if ukeys else []
            for part, keys, part_lists in [*parts, ("design", dkeys, runs_lists)]:
                for gt in scored:
                    frames.append(_scored(queries, keys, name, gt, part_lists, k).assign(part=part))
    frames.append(single_scores(design, dkeys, k, gts).assign(part="design"))
    if ukeys:
        frames.append(single_scores(validation, ukeys, k, gts).assign(part="unseen"))
    return pd.concat(frames, ignore_index=True)[SCORE_COLUMNS], models


def _versus(g: pd.DataFrame, ref: str, method: str) -> dict:
    w = g.pivot(index="qkey", columns="method", values="recall")
    res = paired(w[ref].to_numpy(), w[method].to_numpy(), groups=query_clusters(g, w.index))
    return {"n_queries": res["n"], "recall": res["mean_b"], "reference": ref,
            "reference_recall": res["mean_a"], **{c: res[c] for c in ("diff", "ci_low", "ci_high", "wins",
                                                                      "losses", "p", "note")}}


def comparison(scores: pd.DataFrame, methods: Sequence[str] = tuple(NAMED)) -> pd.DataFrame:
    """Per ground truth, set and ranker: paired against the set's best single architecture of any family
    (``against = best single``) and its better dense one (``best dense``)."""
    rows = []
    for (gt, part, subset), g in scores.groupby(["gt", "part", "subset"], sort=False):
        means = g.groupby("method")["recall"].mean()
        singles = [m for m in means.index if split_method(m)[0] in SINGLE]
        dense = [m for m in singles if m in SINGLE]
        refs = {against: max(names, key=lambda m: (means[m], m))
                for against, names in (("best single", singles), ("best dense", dense)) if names}
        rows += [{"gt": gt, "part": part, "subset": subset, "method": m, "against": against,
                  **_versus(g, ref, m)} for m in methods if m in means.index for against, ref in refs.items()]
    out = pd.DataFrame(rows)
    return out.sort_values(["gt", "part"], kind="stable", ignore_index=True) if len(out) else out


def issue_table(cmp: pd.DataFrame, gt: str, digits: int = 3) -> pd.DataFrame:
    """One ground truth's wide table: the best single architecture (named per set) and each ranker with its
    difference and CI; one column per set (design sets first)."""
    c = cmp[(cmp["gt"] == gt) & (cmp["against"] == "best single")]
    sets = list(dict.fromkeys(c.sort_values("part", kind="stable")["subset"]))
    rows = {}
    for s in sets:
        first = c[c["subset"] == s].iloc[0]
        rows.setdefault(BEST_SINGLE, {})[s] = f"{first['reference_recall']:.{digits}f} ({first['reference']})"
        for _, r in c[c["subset"] == s].iterrows():
            d = digits
            rows.setdefault(r["method"], {})[s] = (f"{r['recall']:.{d}f} ({r['diff']:+.{d}f} "
                                                   f"[{r['ci_low']:+.{d}f}, {r['ci_high']:+.{d}f}])")
    return pd.DataFrame([{"method": m, **v} for m, v in rows.items()], columns=["method", *sets])


def goal_check(cmp: pd.DataFrame, margins: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Per set: ``ltr`` ahead of the best single architecture by each ground truth's margin (0.05
    candidates, 0.03 relevant), CI above 0; ``ltr-nollm`` ahead of the better dense one."""
    margins = dict(margins or {"candidates": 0.05, "relevant": 0.03})
    rows = []
    for _, r in cmp.iterrows():
        need = {("ltr", "best single"): margins.get(r["gt"]),
                ("ltr-nollm", "best dense"): 0.0}.get((r["method"], r["against"]))
        if need is None:
            continue
        rows.append({"gt": r["gt"], "part": r["part"], "subset": r["subset"], "method": r["method"],
                     "against": r["reference"], "diff": r["diff"], "ci_low": r["ci_low"], "margin": need,
                     "met": bool(r["diff"] > need - 1e-12 and r["ci_low"] > 0 and r["diff"] > 0)})
    return pd.DataFrame(rows)


DESIGN_ONLY = "ltr trained on G1–G3 only"


def design_only_scores(design, validation=None, unseen: set[str] | None = None, k: int = K,
                       gts: Sequence[str] = GT_DEFINITIONS, run: int = 0, seed: int = SEED) -> pd.DataFrame:
    """``ltr`` cross-fitted over the design study's queries alone, the unseen sets scored by its model fitted
    on G1–G3: per query recall (:func:`ranker_scores`' columns), each ground truth by its own labels."""
    spec = NAMED["ltr"]
    dkeys, ukeys = design.queries["qkey"].tolist(), _unseen(validation, unseen)
    queries = training_queries(design, validation)
    frames = []
    for gt in gts:
        lists, model = ranker_lists(design, None, spec, run, seed, gt)
        frames.append(_scored(queries, dkeys, DESIGN_ONLY, gt, [lists], k).assign(part="design"))
        if ukeys:
            table = feature_table(study_runs(validation, spec, 0, ukeys), spec)
            u_lists = [ranked(table, model.predict(table), DEPTH)]
            frames.append(_scored(queries, ukeys, DESIGN_ONLY, gt, u_lists, k).assign(part="unseen"))
    return pd.concat(frames, ignore_index=True)


def ablations(design, validation=None, unseen: set[str] | None = None, k: int = K,
              gts: Sequence[str] = GT_DEFINITIONS, runs: Sequence[int] | None = (0,),
              seed: int = SEED) -> pd.DataFrame:
    """Per ground truth and set: each ablated ranker of :data:`ABLATIONS` whose rankings the study holds, and
    ``ltr`` trained on G1–G3 only (:func:`design_only_scores`), against the full ``ltr``."""
    studies = [s for s in (design, validation) if s is not None]
    specs = {n: s for n, s in ABLATIONS.items() if all(set(s.methods) <= set(x.methods) for x in studies)}
    scores, _ = ranker_scores(design, validation, unseen, specs, k, gts, runs, seed)
    run = 0 if runs is None else list(runs)[0]
    scores = pd.concat([scores, design_only_scores(design, validation, unseen, k, gts, run, seed)],
                       ignore_index=True)
    return pd.DataFrame([{"gt": gt, "part": part, "subset": subset, "method": name, **_versus(g, "ltr", name)}
                         for (gt, part, subset), g in scores.groupby(["gt", "part", "subset"], sort=False)
                         for name in (*specs, DESIGN_ONLY)])


def importance(model: Fitted) -> pd.DataFrame:
    """``feature, group, gain, share``: LightGBM's total gain per feature, largest first."""
    gain = model.booster.feature_importance("gain")
    names = model.booster.feature_name()
    total = float(gain.sum()) or 1.0

    def group(name: str) -> str:
        prefixed = [g for p, g in PREFIX_GROUPS.items() if name.startswith(p)]
        if prefixed:
            return prefixed[0]
        stubs = name.startswith("stub") or name == "n_stubs" or "_s_" in f"_{name}"
        return "stubs" if stubs else "rank and score"

    out = pd.DataFrame({"feature": names, "group": [group(n) for n in names], "gain": gain.astype(float),
                        "share": gain / total})
    return out.sort_values(["gain", "feature"], ascending=[False, True], ignore_index=True)


def importance_figure(table: pd.DataFrame, top: int = 20) -> plt.Figure:
    """Horizontal bars of the ``top`` features' gain share, coloured by group."""
    t = table.head(top).iloc[::-1]
    colors = {"tool": "#DD8452", "category": "#55A868", "stubs": "#8172B2", "lexical": "#937860",
              "runs": "#DA8BC3", "rank and score": "#4C72B0"}
    fig, ax = plt.subplots(figsize=(6.5, 0.28 * len(t) + 1.2))
    ax.barh(t["feature"], t["share"], color=[colors.get(g, "#999999") for g in t["group"]])
    ax.set_xlabel("share of total gain")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in colors.values()]
    ax.legend(handles, list(colors), loc="lower right", fontsize=LEGEND_SIZE)
    fig.tight_layout()
    return fig


def costs(design, models: Mapping[str, Fitted], run: int = 0, repeats: int = 3) -> pd.DataFrame:
    """Per ranker: training seconds, inference milliseconds per query (features and scores, best of
    ``repeats``) and model bytes; beside linear fusion (``fuse4``: the fusion alone)."""
    rows = []
    keys = design.queries["qkey"].tolist()
    for name, model in models.items():
        runs = study_runs(design, model.spec, run)
        best = np.inf
        for _ in range(repeats):
            t0 = time.perf_counter()
            table = feature_table(runs, model.spec)
            ranked(table, model.predict(table), 20)
            best = min(best, time.perf_counter() - t0)
        calls = int(model.spec.uses_stubs) * (design.n_runs if model.spec.agreement else 1)  # a call a run
        rows.append({"method": name, "train_s": model.seconds, "infer_ms_per_query": 1000 * best / len(keys),
                     "model_bytes": len(model.booster.model_to_string().encode()), "llm_calls": calls})
    spec = FUSED["fuse4"]
    inputs = study_component_inputs(design, run, components=spec.components)
    t0 = time.perf_counter()
    spec.ranked(inputs, 20)
    rows.append({"method": "fuse4 (linear fusion)", "train_s": 0.0,
                 "infer_ms_per_query": 1000 * (time.perf_counter() - t0) / len(keys), "model_bytes": 0,
                 "llm_calls": 1})
    return pd.DataFrame(rows)
