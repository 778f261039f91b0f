"""The learned ranker: LightGBM lambdarank over :mod:`.ltr_features`, cross-fitted over query folds."""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from ..config import DEFAULT_GT, DEPTH, FOLDS, SEED
from ..data.atomic import checksum_problem, file_sha256, save_text, write_checksum
from ..data.folds import query_folds
from ..data.machine import available_cpus
from ..data.normalize import norm_text
from ..data.queries import QUERY_SETS, clusters, resolve_subset
from ..data.tables import cached_tables
from .fusion_specs import Run, qrels_of
from .ltr_features import FeatureTable, LtrSpec, QueryRuns, feature_table, runs_from_rankings, study_runs
from .rankings import Retrieved, ranked_frame
from .retrievers import RETRIEVERS, RunContext, SpecRetriever, register

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    import lightgbm as lgb

TRAIN_SETS = tuple(QUERY_SETS)  # the eight solvable sets: every query of theirs is cross-fitted
LABEL_GT = DEFAULT_GT
THREADS = 1  # per model: two were 8x slower on a loaded 2-core machine (OpenMP waiting); crossfit runs models
# side by side instead
PARAMS = {"objective": "lambdarank", "num_leaves": 15, "learning_rate": 0.05, "min_data_in_leaf": 20,
          "deterministic": True, "force_row_wise": True, "num_threads": THREADS, "seed": SEED, "verbose": -1}
ROUNDS = 300
ALL = ("q.dense", "q.bm25", "s.dense", "s.bm25")
NAMED = {"ltr": LtrSpec(ALL), "ltr-nollm": LtrSpec(("q.dense", "q.bm25")),
         "ltr-4runs": LtrSpec(ALL, agreement=True)}  # the stubs of every run: measured on a stored study


@dataclass
class Fitted:
    """A fitted ranker: its booster, spec, training queries and sets, and the seconds it took."""

    booster: lgb.Booster
    spec: LtrSpec
    train_queries: list[str]
    train_sets: list[str]
    label_gt: str = LABEL_GT
    seconds: float = 0.0
    params: dict = field(default_factory=lambda: dict(PARAMS, rounds=ROUNDS))

    def predict(self, table: FeatureTable) -> np.ndarray:
        if table.names != self.spec.feature_names:
            raise ValueError("the feature table was not made with this ranker's features")
        return self.booster.predict(table.X, num_threads=THREADS) if len(table.X) else np.zeros(0)

    def provenance(self) -> dict:
        import lightgbm as lgb

        return {"features": self.spec.feature_names, "spec": self.spec.describe(), "params": self.params,
                "training_sets": self.train_sets, "training_queries": len(self.train_queries),
                "label_gt": self.label_gt, "lightgbm": lgb.__version__,
                "train_seconds": round(self.seconds, 3)}


def fit(table: FeatureTable, spec: LtrSpec, keys: Sequence[str], sets: Mapping[str, str],
        seed: int = SEED, label_gt: str = LABEL_GT) -> Fitted:
    """A lambdarank model fitted on the rows of ``keys`` (each query one group)."""
    import lightgbm as lgb

    t0 = time.perf_counter()
    rows = table.rows_of(keys)
    sizes = Counter(table.qkeys[i] for i in rows)  # rows per query, in table order
    data = lgb.Dataset(table.X[rows], table.y[rows], group=np.array(list(sizes.values()), dtype=int),
                       feature_name=table.names, free_raw_data=True)
    params = dict(PARAMS, seed=seed)
    booster = lgb.train(params, data, num_boost_round=ROUNDS)
    return Fitted(booster, spec, list(sizes), sorted({sets[k] for k in sizes}), label_gt,
                  time.perf_counter() - t0, dict(params, rounds=ROUNDS))


@dataclass
class CrossFit:
    """Cross-fitted scores of every candidate row, the folds and their models."""

    scores: np.ndarray
    fold: dict[str, int]
    trained_on: list[list[str]]
    unseen_model: Fitted | None
    leaked: list[str] = field(default_factory=list)


def is_training(subset: str) -> bool:
    """Whether a set's queries are cross-fitted (one of :data:`TRAIN_SETS`, by name or alias)."""
    try:
        return resolve_subset(subset) in TRAIN_SETS
    except ValueError:
        return False


def crossfit(table: FeatureTable, spec: LtrSpec, queries: pd.DataFrame, folds: int = FOLDS, seed: int = SEED,
             label_gt: str = LABEL_GT, workers: int | None = None) -> CrossFit:
    """Cross-fitted scores of ``table``'s rows, fitting ``workers`` models at once (default: the CPUs)."""
    q = queries.set_index("qkey")
    keys = table.queries
    sets = q["subset"].to_dict()
    design = [k for k in keys if is_training(sets[k])]
    if len(design) < 2:
        raise ValueError(f"the learned ranker trains on the queries of the solvable sets "
                         f"({', '.join(TRAIN_SETS)}), and this run has {len(design)}: evaluate it with "
                         f"some of those sets")
    texts = q["query"].to_dict()
    per_set = pd.Series([sets[k] for k in design]).value_counts().sort_index()
    # queries that repeat a text or share a ground-truth set (written from one sample of APIs) share a fold
    samples = clusters(queries, design) if "candidates" in queries else design  # queries of one API sample
    ids = query_folds([sets[k] for k in design], [texts[k] for k in design], samples, folds, seed)
    if len(set(ids.tolist())) < 2:
        counts = ", ".join(f"{name} {n}" for name, n in per_set.items())
        raise ValueError(f"the learned ranker is cross-fitted over at least 2 folds of the solvable sets' "
                         "queries (split by query text and ground-truth set, stratified by set), which "
                         f"needs 2 unrelated queries; this run has {counts}: evaluate it on more queries "
                         "(--limit 2 or more)")
    fold = {k: int(f) for k, f in zip(design, ids, strict=True)}
    scores = np.zeros(len(table.qkeys))

    def score(model: Fitted, scored: list[str]) -> None:
        rows = table.rows_of(scored)
        scores[rows] = model.booster.predict(table.X[rows], num_threads=THREADS)

    numbers = sorted(set(fold.values()))
    trained_on = [[k for k in design if fold[k] != f] for f in numbers]
    others = [k for k in keys if not is_training(sets[k])]
    # Each fit is single-threaded and deterministic, so fitting them side by side (LightGBM leaves the GIL
    # while it trains) gives the same models in less time where a CPU is free.
    with ThreadPoolExecutor(max_workers=workers or available_cpus()) as pool:
        fitted = list(pool.map(lambda train: fit(table, spec, train, sets, seed, label_gt),
                               [*trained_on, *([design] if others else [])]))
    models = dict(zip(numbers, fitted, strict=False))
    for f in numbers:
        score(models[f], [k for k in design if fold[k] == f])
    text_fold = {norm_text(texts[k]): fold[k] for k in design}
    leaked = [k for k in others if norm_text(texts[k]) in text_fold]
    for k in leaked:
        score(models[text_fold[norm_text(texts[k])]], [k])
    clean = [k for k in others if k not in set(leaked)]
    unseen = fitted[-1] if others else None
    if clean:
        score(unseen, clean)
    if leaked:
        log.warning("learned ranker: %d queries of other sources repeat a training query's text; each is "
                    "scored by the fold model trained without that text", len(leaked))
    return CrossFit(scores, fold, trained_on, unseen, leaked)


def ranked(table: FeatureTable, scores: np.ndarray, depth: int) -> Run:
    """``{qkey: {api_id: model score}}``: each query's top ``depth`` candidates (ties by id)."""
    per: dict[str, list[tuple[str, float]]] = {}
    for key, a, s in zip(table.qkeys, table.api_ids, scores.tolist(), strict=True):
        per.setdefault(key, []).append((a, s))
    return {key: dict(sorted(v, key=lambda x: (-x[1], x[0]))[:depth]) for key, v in per.items()}


def ltr_rankings(runs: Mapping[str, QueryRuns], queries: pd.DataFrame, spec: LtrSpec, depth: int = DEPTH,
                 folds: int = FOLDS, seed: int = SEED, label_gt: str = LABEL_GT
                 ) -> tuple[Run, CrossFit, FeatureTable]:
    """Cross-fitted rankings of every query of ``runs``."""
    table = feature_table(runs, spec, qrels_of(queries, label_gt), depth)
    cf = crossfit(table, spec, queries[queries["qkey"].isin(runs)], folds, seed, label_gt)
    return ranked(table, cf.scores, depth), cf, table


TOP_EXPLAINED = 3  # the top APIs of each query whose features are kept (the explorer's "why")


def training_queries(design, validation) -> pd.DataFrame:
    """The queries of both studies (the validation study's keys that the design study lacks)."""
    if validation is None:
        return design.queries
    v = validation.queries
    return pd.concat([design.queries, v[~v["qkey"].isin(set(design.queries["qkey"]))]], ignore_index=True)


def study_features(design, validation, spec: LtrSpec, run: int, qrels, depth: int, tables: dict | None):
    """The features of ``design``'s run ``run`` and ``validation``'s run 0, labelled by ``qrels``."""
    table = (tables or {}).get((spec, run, depth))
    if table is not None:  # the same candidates and features, these labels
        pairs = zip(table.qkeys, table.api_ids, strict=True)
        return replace(table, y=np.array([float(a in qrels.get(q, ())) for q, a in pairs]))
    runs = study_runs(design, spec, run)
    if validation is not None:
        more = [k for k in validation.queries["qkey"] if k not in runs]
        runs.update(study_runs(validation, spec, 0, more))
    table = feature_table(runs, spec, qrels, depth)
    if tables is not None:
        tables[(spec, run, depth)] = table
    return table


def learned_frame(design, validation, spec: LtrSpec, run: int = 0, seed: int = SEED,
                  label_gt: str = LABEL_GT, depth: int = DEPTH, tables: dict | None = None) -> pd.DataFrame:
    """One ranker's out-of-fold ranking of ``design``'s run ``run`` and ``validation``'s run 0, cached."""
    def make() -> dict[str, pd.DataFrame]:
        queries = training_queries(design, validation)
        table = study_features(design, validation, spec, run, qrels_of(queries, label_gt), depth, tables)
        cf = crossfit(table, spec, queries, seed=seed, label_gt=label_gt)
        frame = table.frame().drop(columns="label").assign(score=cf.scores)
        frame = frame.sort_values(["qkey", "score", "api_id"], ascending=[True, False, True], kind="stable")
        frame.insert(1, "rank", frame.groupby("qkey", sort=False).cumcount() + 1)
        frame = frame[frame["rank"] <= depth].reset_index(drop=True)
        frame.loc[frame["rank"] > TOP_EXPLAINED, table.names] = np.nan
        return {"lists": frame[["qkey", "rank", "api_id", "score", *table.names]]}

    studies = [s for s in (design, validation) if s is not None]
    shas = [s.stored_rankings_sha256() for s in studies]
    if design.folder is None or None in shas:
        return make()["lists"]  # a study not stored: computed, not kept
    what = json.dumps([repr(spec), run, seed, label_gt, depth, shas, [str(s.folder) for s in studies]])
    key = f"learned-run{run}-{label_gt}-{hashlib.sha256(what.encode()).hexdigest()[:16]}"
    return cached_tables(design.folder, key, make, code="retrieval/ltr.py")["lists"]


class StoredModelError(ValueError):
    """A stored ranker that is missing or does not match its checksum."""


def save_model(model: Fitted, folder: str | Path, name: str, extra: Mapping | None = None) -> Path:
    """Write ``<name>.txt`` with its sha256 sidecar, then ``<name>.json`` (provenance, sha256, ``extra``)."""
    path = Path(folder) / f"{name}.txt"
    save_text(path, model.booster.model_to_string())
    write_checksum(path)
    prov = {**model.provenance(), "name": name, "model_file": path.name, "sha256": file_sha256(path),
            "model_bytes": path.stat().st_size, **dict(extra or {})}
    save_text(path.with_suffix(".json"), json.dumps(prov, indent=2, default=str))
    return path


def load_model(folder: str | Path, name: str) -> tuple[lgb.Booster, dict]:
    """The stored booster and its provenance (:class:`StoredModelError` when either is bad)."""
    import lightgbm as lgb

    path = Path(folder) / f"{name}.txt"
    problem = checksum_problem(path)
    if problem is not None:
        raise StoredModelError(f"stored ranker {path}: {problem}; fit it again")
    about = Path(folder) / f"{name}.json"
    try:
        prov = json.loads(about.read_text())
    except FileNotFoundError:
        raise StoredModelError(f"stored ranker {path}: its description {about} is missing; fit it again "
                               "(python -m toolbench_lib.analysis.ltr_study)") from None
    except (OSError, ValueError) as exc:
        raise StoredModelError(f"stored ranker {path}: its description {about} cannot be read "
                               f"({' '.join(str(exc).split())}); fit it again") from None
    return lgb.Booster(model_str=path.read_text()), prov


class LtrRetriever(SpecRetriever):
    """A learned ranker as a retriever (``--method ltr``), cross-fitted over the run's queries."""

    def retrieve(self, ctx: RunContext) -> Retrieved:
        if self.spec.agreement:
            raise ValueError(f"{self.name} reads the stubs of every run of a stored study, which one run of "
                             f"evaluate does not have: it is measured by notebook 12 and python -m "
                             f"toolbench_lib.analysis.ltr_study; choose ltr or ltr-nollm here")
        retrieved = self.parts(ctx, self.spec.methods)
        keys = ctx.queries["qkey"].tolist()
        texts = dict(zip(keys, ctx.queries["query"], strict=True))
        lists, cf, _ = ltr_rankings(runs_from_rankings(retrieved, keys, self.spec, texts), ctx.queries,
                                    self.spec, ctx.depth)
        ctx.notes[self.name] = {"queries_repeating_a_training_text": len(cf.leaked)}
        return Retrieved(ranked_frame(keys, self.name, lists, ctx.setup.api_ids))


for _name, _spec in NAMED.items():
    if _name not in RETRIEVERS:
        register(LtrRetriever(_name, _spec))
