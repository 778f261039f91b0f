"""The learned rankers (``ltr``, ``ltr-nollm``) of a stored study as explorer methods: each query's ranking
by the out-of-fold LightGBM score (every query scored by a model that never saw it, as
:func:`~toolbench_lib.analysis.ltr.explain` scores it) and the features behind its top APIs.

Computed once with the explorer's views (:mod:`.explorer_views`) where the study holds a ranker's
components (the retriever study: dense and BM25 rankings of the query and of the stubs)."""

from __future__ import annotations

import logging

import pandas as pd

from ..config import DEPTH, SEED
from ..retrieval.fusion_specs import component_methods
from ..retrieval.ltr import NAMED, crossfit, qrels_of
from ..retrieval.ltr_features import feature_table, study_runs
from ..study.stored import RANKINGS_COLUMNS

TOP_EXPLAINED = 3  # the top APIs of each query whose features are stored
EXPLORED = ("ltr", "ltr-nollm")  # ltr-4runs, every run's stubs at once, is measured by analysis.ltr_study
FEATURE_COLUMNS = ["method", "run", "qkey", "rank", "api_id", "score", "feature", "value"]

log = logging.getLogger(__name__)


def learned_methods(result) -> list[str]:
    """The learned rankers whose components the study holds."""
    have = set(result.methods)
    return [n for n, spec in NAMED.items()
            if n in EXPLORED and set(component_methods(spec.components)) <= have]


def learned_views(result, depth: int = DEPTH, seed: int = SEED,
                  label_gt: str = "candidates") -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(rankings, features)``: each learned ranker's final ranking per run (``rankings`` rows, the score
    its out-of-fold LightGBM score, the row the study's rankings give the API) and the features of each
    query's top :data:`TOP_EXPLAINED` APIs (``method, run, qkey, rank, api_id, score, feature, value``)."""
    hits, features = [], []
    api_rows = result.api_rows()
    for name in learned_methods(result):
        spec = NAMED[name]
        once = set(spec.methods) <= set(result.deterministic)  # the same rankings in every run
        first: tuple[pd.DataFrame, pd.DataFrame] | None = None
        for run in range(result.n_runs):
            if once and first is not None:  # computed once, stored for each run
                hits.append(first[0].assign(run=run))
                features.append(first[1].assign(run=run))
                continue
            try:
                table = feature_table(study_runs(result, spec, run), spec, qrels_of(result.queries, label_gt))
                cf = crossfit(table, spec, result.queries, seed=seed, label_gt=label_gt)
            except (KeyError, ValueError) as exc:  # too few queries to cross-fit, a run without stubs
                log.warning("learned ranker %s of run %d not computed: %s", name, run, exc)
                continue
            frame = table.frame().assign(score=cf.scores)
            frame = frame.sort_values(["qkey", "score", "api_id"], ascending=[True, False, True],
                                      kind="stable")
            frame["rank"] = frame.groupby("qkey", sort=False).cumcount() + 1
            top = frame[frame["rank"] <= depth]
            hits.append(pd.DataFrame({"qkey": top["qkey"].to_numpy(), "method": name, "run": run,
                                      "rank": top["rank"].to_numpy(),
                                      "row": top["api_id"].map(api_rows).astype("int64").to_numpy(),
                                      "api_id": top["api_id"].to_numpy(), "score": top["score"].to_numpy()}))
            explained = top[top["rank"] <= TOP_EXPLAINED].drop(columns="label")
            long = explained.melt(id_vars=["qkey", "rank", "api_id", "score"], var_name="feature",
                                  value_name="value")
            features.append(long.assign(method=name, run=run)[FEATURE_COLUMNS])
            first = hits[-1], features[-1]
    hits_frame = pd.concat(hits, ignore_index=True) if hits else pd.DataFrame(columns=RANKINGS_COLUMNS)
    features_frame = (pd.concat(features, ignore_index=True) if features else
                      pd.DataFrame(columns=FEATURE_COLUMNS))
    return hits_frame, features_frame.astype({"value": float, "score": float})
