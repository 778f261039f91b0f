"""Fused discovery methods built from rankings a study already stored: no new LLM call, no new search.

Per query, a stored study holds RtP's ranking (the query's own top ``depth`` hits with cosines) and, per
PtR run, every stub's own top ``depth`` hits and PtR's merged ranking. The methods here combine them:

* ``rr``: round-robin over the query's ranking and each stub's ranking (query first; dedupe; cut at k);
  ``rr2`` alternates RtP's and PtR's final rankings.
* ranx's fusion methods over the query's and every stub's ranking (each text one run): ``rrf``;
  ``combmax``, ``combsum``, ``combmnz`` on raw cosines and, with a ``-mm`` suffix, on ranx's min-max
  normalised scores. :func:`combine` computes exactly what ``ranx.fuse`` does (the tests check it on
  every method and norm) in plain Python: ranx builds numba dictionaries per call, seconds each on a
  2-core machine, and the weight grids need hundreds of fusions (``benchmarks/bench_fusion.py``).
  ``combmax`` on raw cosines is max-sim over the query plus the stubs (HyDE-style: the query is one
  more stub), also named ``maxsim``.
* ``meanemb``: the mean of the query's and the stubs' embeddings searched once (needs the index and the
  embedder, so only with a retrieval setup).
* cross-validated forms (``-cv``): ``wsum-cv`` (ranx ``wsum`` of RtP's and PtR's min-max normalised
  rankings, weight ``w`` on RtP), ``wrrf-cv`` (the same over reciprocal-rank scores), and ``route-cv``
  (route-then-fuse: RtP's ranking when its top-1 cosine is at least ``t``, else the ``rrf`` list;
  such a query needs no stub call); ``route-mm-cv`` routes to ``combmax-mm`` instead.

A ``-cv`` method's parameter is chosen by K-fold cross-validation over queries (folds stratified by query
set, seeded): every query's list comes from the parameter that maximised mean recall@k, averaged over
sets, on the other folds. :func:`fit_params` fits on all queries instead, for use unchanged elsewhere.
Nothing looks at a query's own ground truth to build that query's list.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import pandas as pd
from sklearn.model_selection import StratifiedKFold

from ..retrieval.fuse import Ranking, combine, min_max  # noqa: F401  (combine, min_max: this module's API)
from ..retrieval.fuse import ids as _ids
from ..retrieval.fuse import rr_scores as _rr_scores
from ..retrieval.fuse import top as _top
from ..retrieval.fused import best_by_group

Lists = dict[str, list[str]]  # {qkey: [api_id, ...]}

FIXED = ("rtp", "ptr", "rr", "rr2", "maxsim", "rrf", "combmax", "combsum", "combmnz", "combmax-mm",
         "combsum-mm", "combmnz-mm", "rrf2", "combsum2-mm")
NEEDS_SETUP = ("meanemb",)
CV = ("wsum-cv", "wrrf-cv", "route-cv", "route-mm-cv")
ROUTE_BASE = {"route-cv": "rrf", "route-mm-cv": "combmax-mm"}
METHODS = (*FIXED, *NEEDS_SETUP, *CV)
WEIGHT_GRID = tuple(round(w, 2) for w in np.linspace(0.0, 1.0, 21))
DESCRIPTIONS = {
    "rtp": "RtP: the query's own ranking",
    "ptr": "PtR: stubs' rankings merged by best cosine",
    "rr": "round-robin: query, then each stub, rank by rank",
    "rr2": "round-robin of RtP's and PtR's final rankings",
    "maxsim": "max-sim over query + stubs (HyDE-style)",
    "rrf": "ranx RRF of query + each stub",
    "combmax": "ranx CombMAX of query + each stub (raw cosine; = maxsim)",
    "combsum": "ranx CombSUM of query + each stub (raw cosine)",
    "combmnz": "ranx CombMNZ of query + each stub (raw cosine)",
    "combmax-mm": "ranx CombMAX, min-max normalised",
    "combsum-mm": "ranx CombSUM, min-max normalised",
    "combmnz-mm": "ranx CombMNZ, min-max normalised",
    "rrf2": "ranx RRF of RtP's and PtR's final rankings",
    "combsum2-mm": "ranx CombSUM of RtP's and PtR's final rankings, min-max normalised",
    "meanemb": "mean embedding of query + stubs, searched once",
    "wsum-cv": "ranx wsum of RtP and PtR (min-max), weight by CV",
    "wrrf-cv": "weighted RRF of RtP and PtR, weight by CV",
    "route-cv": "RtP if its top-1 cosine >= t, else rrf; t by CV",
    "route-mm-cv": "RtP if its top-1 cosine >= t, else combmax-mm; t by CV",
}


@dataclass
class QueryRankings:
    """One query's stored rankings in one PtR run."""

    query: Ranking
    stubs: list[Ranking]
    ptr: Ranking

    @property
    def top1(self) -> float:
        """RtP's top-1 cosine (NaN when the query has no hit)."""
        return self.query[0][1] if self.query else float("nan")


@dataclass
class FusionInputs:
    """Every query's rankings in one run, with its set and ground truth (used only for tuning)."""

    rankings: dict[str, QueryRankings]
    subsets: dict[str, str]
    qrels: dict[str, set[str]]
    run: int = 0
    meta: dict = field(default_factory=dict)

    @property
    def keys(self) -> list[str]:
        return list(self.rankings)


def _ranking(frame: pd.DataFrame) -> Ranking:
    f = frame.sort_values("rank")
    return list(zip(f["api_id"].tolist(), f["score"].astype(float).tolist(), strict=True))


def hits_inputs(hits: pd.DataFrame, queries: pd.DataFrame, run: int = 0,
                gt: str = "candidates") -> FusionInputs:
    """The rankings in a hits table (RtP's and PtR's rows) for PtR run ``run``, keyed by query."""
    rtp = hits[(hits["method"] == "rtp") & (hits["text_idx"] == 0)]
    ptr = hits[(hits["method"] == "ptr") & (hits["run"] == run)]
    if ptr.empty:
        raise ValueError(f"the study has no PtR hits for run {run}")
    q_by = {k: _ranking(g) for k, g in rtp.groupby("qkey", sort=False)}
    stubs: dict[str, dict[int, Ranking]] = {}
    merged: dict[str, Ranking] = {}
    for (key, t), g in ptr.groupby(["qkey", "text_idx"], sort=False):
        if t == -1:
            merged[key] = _ranking(g)
        else:
            stubs.setdefault(key, {})[int(t)] = _ranking(g)
    rankings = {key: QueryRankings(q_by.get(key, []), [s for _, s in sorted(stubs.get(key, {}).items())],
                                   merged.get(key, []))
                for key in queries["qkey"]}
    return FusionInputs(rankings, dict(zip(queries["qkey"], queries["subset"], strict=True)),
                        {k: set(v) for k, v in zip(queries["qkey"], queries[gt], strict=True)}, run,
                        {"gt": gt, "run": run})


def study_inputs(result, run: int = 0, gt: str = "candidates") -> FusionInputs:
    """The rankings of ``result`` (a stored study) for PtR run ``run``, keyed by query."""
    return hits_inputs(result.hits, result.queries, run, gt)


# -- fixed methods ------------------------------------------------------------------------------------------

def round_robin(rankings: Sequence[Sequence[str]], k: int) -> list[str]:
    """Interleave ranked lists rank by rank (list order within a rank), dropping repeats; first ``k``."""
    out: list[str] = []
    seen: set[str] = set()
    for depth in range(max((len(r) for r in rankings), default=0)):
        for r in rankings:
            if depth < len(r) and r[depth] not in seen:
                seen.add(r[depth])
                out.append(r[depth])
                if len(out) == k:
                    return out
    return out


def fuse_lists(texts: Mapping[str, Sequence[Ranking]], method: str, norm: str | None, k: int,
               weights: Sequence[float] | None = None) -> Lists:
    """Each query's texts fused (:func:`combine`), top ``k`` (ties by id)."""
    return {key: _top(combine(rs, method, norm, weights), k) for key, rs in texts.items()}


def _query_texts(inp: FusionInputs) -> dict[str, list[Ranking]]:
    return {key: [r.query, *r.stubs] for key, r in inp.rankings.items()}


def _two_way(inp: FusionInputs) -> dict[str, list[Ranking]]:
    return {key: [r.query, r.ptr] for key, r in inp.rankings.items()}


def maxsim(inp: FusionInputs, k: int) -> Lists:
    """Each API's best cosine over the query and its stubs (the query is one more stub)."""
    out = {}
    for key, r in inp.rankings.items():
        best: dict[str, float] = {}
        for text in [r.query, *r.stubs]:
            for a, s in text:
                best[a] = max(best.get(a, -np.inf), s)
        out[key] = _top(best, k)
    return out


def fixed_lists(inp: FusionInputs, name: str, k: int) -> Lists:
    """The top-``k`` lists of one fixed method."""
    R = inp.rankings
    if name == "rtp":
        return {key: _ids(r.query)[:k] for key, r in R.items()}
    if name == "ptr":
        return {key: _ids(r.ptr)[:k] for key, r in R.items()}
    if name == "rr":
        return {key: round_robin([_ids(r.query), *map(_ids, r.stubs)], k) for key, r in R.items()}
    if name == "rr2":
        return {key: round_robin([_ids(r.query), _ids(r.ptr)], k) for key, r in R.items()}
    if name == "maxsim":
        return maxsim(inp, k)
    if name == "rrf":
        return fuse_lists(_query_texts(inp), "rrf", None, k)
    if name == "rrf2":
        return fuse_lists(_two_way(inp), "rrf", None, k)
    if name == "combsum2-mm":
        return fuse_lists(_two_way(inp), "sum", "min-max", k)
    if name.startswith("comb"):
        base, _, norm = name.partition("-")
        return fuse_lists(_query_texts(inp), base.removeprefix("comb"), "min-max" if norm else None, k)
    raise ValueError(f"unknown fixed method {name!r}; choose one of {', '.join(FIXED)}")


def mean_embedding_lists(inp: FusionInputs, setup, queries: pd.DataFrame, stubs: pd.DataFrame,
                         k: int) -> Lists:
    """Search the normalised mean of each query's and its stubs' embeddings (one search per query)."""
    from ..retrieval.retrievers import ptr_texts

    q = queries.set_index("qkey").loc[inp.keys].reset_index()
    texts = [[query, *(t for t in st if t != query)]
             for query, st in zip(q["query"], ptr_texts(q, stubs, inp.run), strict=True)]
    flat = [t for ts in texts for t in ts]
    vecs = setup.encode(flat)
    means, pos = [], 0
    for ts in texts:
        m = vecs[pos:pos + len(ts)].mean(axis=0)
        pos += len(ts)
        means.append(m / (np.linalg.norm(m) or 1.0))
    scores, rows = setup.index.search(np.asarray(means, dtype=np.float32), k)
    ids = setup.api_ids
    return {key: [ids[int(r)] for r in rr] for key, rr in zip(inp.keys, rows, strict=True)}


# -- cross-validated methods --------------------------------------------------------------------------------

def param_grid(inp: FusionInputs, name: str, k: int) -> dict[float, Lists]:
    """Every candidate parameter of a ``-cv`` method and the lists it gives."""
    if name == "wsum-cv":
        two = _two_way(inp)
        return {w: fuse_lists(two, "wsum", "min-max", k, [w, 1 - w]) for w in WEIGHT_GRID}
    if name == "wrrf-cv":
        two = {key: [list(_rr_scores(r).items()) for r in rs] for key, rs in _two_way(inp).items()}
        return {w: fuse_lists(two, "wsum", None, k, [w, 1 - w]) for w in WEIGHT_GRID}
    if name in ROUTE_BASE:
        rtp, fused = fixed_lists(inp, "rtp", k), fixed_lists(inp, ROUTE_BASE[name], k)
        top1 = {key: r.top1 for key, r in inp.rankings.items()}
        cuts = sorted({round(v, 4) for v in top1.values() if v == v})
        grid = [-np.inf, *cuts, np.inf]  # -inf: always RtP; inf: always the fused list
        return {t: {key: rtp[key] if top1[key] >= t else fused[key] for key in inp.keys} for t in grid}
    raise ValueError(f"unknown cross-validated method {name!r}; choose one of {', '.join(CV)}")


def _recall_matrix(grid: Mapping[float, Lists], keys: Sequence[str], qrels: Mapping[str, set[str]],
                   k: int) -> np.ndarray:
    """Recall@k of every (parameter, query)."""
    out = np.zeros((len(grid), len(keys)))
    for i, lists in enumerate(grid.values()):
        for j, key in enumerate(keys):
            rel = qrels.get(key) or set()
            out[i, j] = len(set(lists[key][:k]) & rel) / len(rel) if rel else 0.0
    return out


def cv_lists(inp: FusionInputs, name: str, k: int, folds: int = 5, seed: int = 0,
             tune_k: int | None = None) -> tuple[Lists, dict[str, float]]:
    """Out-of-fold top-``k`` lists of a ``-cv`` method and each query's chosen parameter.

    The parameter maximises recall@``tune_k`` (default ``k``) on the other folds.
    """
    grid = param_grid(inp, name, k)
    params = list(grid)
    keys = inp.keys
    groups = np.array([inp.subsets[key] for key in keys])
    recall = _recall_matrix(grid, keys, inp.qrels, tune_k or k)
    n_folds = max(2, min(folds, int(pd.Series(groups).value_counts().min())))
    splitter = StratifiedKFold(n_splits=n_folds, shuffle=True, random_state=seed)
    lists: Lists = {}
    chosen: dict[str, float] = {}
    for train, test in splitter.split(np.zeros(len(keys)), groups):
        p = params[best_by_group(recall[:, train], groups[train])]
        for j in test:
            lists[keys[j]] = grid[p][keys[j]]
            chosen[keys[j]] = float(p)
    return {key: lists[key] for key in keys}, chosen


def leave_one_set_out(inp: FusionInputs, name: str, k: int) -> tuple[Lists, dict[str, float]]:
    """Lists of a ``-cv`` method whose parameter, for each query set, was fitted on the other sets only
    (scikit-learn ``LeaveOneGroupOut``): does a tuned parameter carry over to another kind of query?"""
    from sklearn.model_selection import LeaveOneGroupOut

    grid = param_grid(inp, name, k)
    params, keys = list(grid), inp.keys
    groups = np.array([inp.subsets[key] for key in keys])
    if len(np.unique(groups)) < 2:
        raise ValueError("leave-one-set-out needs queries of at least two sets")
    recall = _recall_matrix(grid, keys, inp.qrels, k)
    lists: Lists = {}
    chosen: dict[str, float] = {}
    for train, test in LeaveOneGroupOut().split(np.zeros(len(keys)), groups=groups):
        p = params[best_by_group(recall[:, train], groups[train])]
        for j in test:
            lists[keys[j]], chosen[keys[j]] = grid[p][keys[j]], float(p)
    return {key: lists[key] for key in keys}, chosen


def fit_params(inp: FusionInputs, names: Iterable[str], k: int) -> dict[str, float]:
    """Each ``-cv`` method's parameter fitted on all of ``inp``'s queries (to be used unchanged elsewhere)."""
    keys = inp.keys
    groups = np.array([inp.subsets[key] for key in keys])
    out = {}
    for name in names:
        grid = param_grid(inp, name, k)
        out[name] = float(list(grid)[best_by_group(_recall_matrix(grid, keys, inp.qrels, k), groups)])
    return out


def apply_params(inp: FusionInputs, name: str, param: float, k: int) -> Lists:
    """A ``-cv`` method's lists with a given parameter (fitted elsewhere)."""
    if name in ROUTE_BASE:
        rtp, fused = fixed_lists(inp, "rtp", k), fixed_lists(inp, ROUTE_BASE[name], k)
        return {key: rtp[key] if r.top1 >= param else fused[key] for key, r in inp.rankings.items()}
    grid = param_grid(inp, name, k)
    if param not in grid:
        raise ValueError(f"{name}: parameter {param} is not in its grid")
    return grid[param]


def check_methods(names: Iterable[str], have_setup: bool = False) -> list[str]:
    """The method names, checked; ``ValueError`` naming the known ones otherwise."""
    names = list(names)
    unknown = [n for n in names if n not in METHODS]
    if unknown:
        raise ValueError(f"unknown method(s) {unknown}; choose from {', '.join(METHODS)}")
    if not have_setup and any(n in NEEDS_SETUP for n in names):
        raise ValueError("meanemb needs the index and the embedder (a retrieval setup)")
    return names


def method_lists(inp: FusionInputs, names: Iterable[str], k: int, *,
                 params: Mapping[str, float] | None = None, folds: int = 5, seed: int = 0, setup=None,
                 result=None, tune_k: int | None = None) -> tuple[dict[str, Lists], dict]:
    """``({method: {qkey: [api_id, ...]}}, chosen parameters)``: top-``k`` lists of one run's inputs.

    ``-cv`` methods use ``params[name]`` when given (fitted elsewhere), else out-of-fold cross-validation
    of recall@``tune_k`` (default ``k``).
    """
    names = check_methods(names, setup is not None)
    out: dict[str, Lists] = {}
    chosen: dict = {}
    for name in names:
        if name in CV:
            if params and name in params:
                out[name] = apply_params(inp, name, params[name], k)
                chosen[name] = {"fitted_elsewhere": params[name]}
            else:
                out[name], per_query = cv_lists(inp, name, k, folds, seed, tune_k)
                chosen[name] = per_query
        elif name == "meanemb":
            out[name] = mean_embedding_lists(inp, setup, result.queries, result.stubs, k)
        else:
            out[name] = fixed_lists(inp, name, k)
    return out, chosen


def fused_runs(result, names: Iterable[str], k: int, run: int = 0, gt: str = "candidates",
               setup=None, params: Mapping[str, float] | None = None) -> dict[str, Lists]:
    """``{method: {qkey: [api_id, ...]}}`` (top ``k``) of the named methods on a stored study's run."""
    inp = study_inputs(result, run, gt)
    return method_lists(inp, names, k, params=params, setup=setup, result=result)[0]


def stub_call_share(name: str, lists_chosen: Mapping | None, inp: FusionInputs) -> dict[str, bool]:
    """Per query, whether the method needed PtR's stub call (route-then-fuse skips it above the cut)."""
    if name == "rtp":
        return dict.fromkeys(inp.keys, False)
    if name in ROUTE_BASE and lists_chosen is not None:
        t_of: Callable[[str], float] = (lambda key: lists_chosen["fitted_elsewhere"]) \
            if "fitted_elsewhere" in lists_chosen else (lambda key: lists_chosen[key])
        return {key: not (r.top1 >= t_of(key)) for key, r in inp.rankings.items()}
    return dict.fromkeys(inp.keys, True)


# -- the retriever interface --------------------------------------------------------------------------------

CV_K = 5  # a -cv method run as a retriever is tuned for recall@5 on the candidates ground truth


class FusedRetriever:
    """A fused method as a retriever of the study pipeline (``--method rtp,ptr,<name>``).

    It reads RtP's and PtR's hits of the same run from the context (retrieving them when they were not
    asked for) and returns its final ranking (``text_idx = -1``, ``depth`` APIs; ``score`` is
    ``1 / rank``, the fused scores being on different scales). A ``-cv`` method cross-validates over the
    run's queries, tuned for recall@:data:`CV_K` on the candidates ground truth.
    """

    uses_stubs = True
    deterministic = False

    def __init__(self, name: str) -> None:
        check_methods([name], have_setup=True)
        self.name = name

    def __repr__(self) -> str:
        return f"FusedRetriever({self.name!r})"

    def _base(self, ctx, name: str) -> pd.DataFrame:
        from ..retrieval.retrievers import get_retriever

        h = ctx.hits.get(name)
        if h is None:
            h = get_retriever(name).retrieve(ctx)
        if "run" not in h:
            h = h.assign(run=-1 if name == "rtp" else ctx.run)
        return h

    def retrieve(self, ctx) -> pd.DataFrame:
        hits = pd.concat([self._base(ctx, "rtp"), self._base(ctx, "ptr")], ignore_index=True)
        inp = hits_inputs(hits, ctx.queries, ctx.run)
        view = SimpleNamespace(queries=ctx.queries, stubs=ctx.stubs)  # what meanemb reads of a study
        lists, _ = method_lists(inp, [self.name], ctx.depth, setup=ctx.setup, result=view, tune_k=CV_K)
        row_of = {a: i for i, a in enumerate(ctx.setup.api_ids)}
        recs = [(key, self.name, -1, rank, row_of[a], a, 1.0 / rank)
                for key in ctx.queries["qkey"] for rank, a in enumerate(lists[self.name][key], 1)]
        return pd.DataFrame(recs, columns=["qkey", "method", "text_idx", "rank", "row", "api_id", "score"])


def register_all() -> None:
    """Make every fused method selectable in the study pipeline and ``evaluate --method``."""
    from ..retrieval.retrievers import RETRIEVERS, register

    for name in METHODS:
        if name not in RETRIEVERS:
            register(FusedRetriever(name))
