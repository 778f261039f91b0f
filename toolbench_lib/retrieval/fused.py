"""Every fused method by name, registered as a retriever on import."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import replace

import numpy as np

from ..config import FOLDS, SEED
from .fusion_specs import (
    TOP1,
    FusionInputs,
    FusionSpec,
    MeanEmbedding,
    Ranked,
    RoundRobin,
    RouteGrid,
    Run,
    Spec,
    component_methods,
    component_table,
    rankings_inputs,
    study_component_inputs,
)
from .rankings import Retrieved, ranked_frame
from .retrievers import RETRIEVERS, RunContext, SpecRetriever, register
from .tuning import Tuned

QUERY_AND_STUBS = ("q.dense", "s*.dense")  # the query's ranking and every stub's own ranking
TWO_WAY = ("q.dense", "s.dense")  # RtP's and PtR's final rankings
FOUR = ("q.dense", "q.bm25", "s.dense", "s.bm25")
WEIGHT_GRID = tuple(round(float(w), 2) for w in np.linspace(0.0, 1.0, 21))
RRF = FusionSpec(QUERY_AND_STUBS, "rrf", None)
COMBMAX_MM = FusionSpec(QUERY_AND_STUBS, "max", "min-max")

FUSED: dict[str, Spec] = {
    "rr": RoundRobin(QUERY_AND_STUBS),
    "rr2": RoundRobin(TWO_WAY),
    "maxsim": FusionSpec(QUERY_AND_STUBS, "max", None),
    "rrf": RRF,
    **{f"comb{m}{tag}": FusionSpec(QUERY_AND_STUBS, m, norm)
       for tag, norm in (("", None), ("-mm", "min-max")) for m in ("max", "sum", "mnz")},
    "rrf2": FusionSpec(TWO_WAY, "rrf", None),
    "combsum2-mm": FusionSpec(TWO_WAY, "sum", "min-max"),
    "meanemb": MeanEmbedding(),
    "wsum-cv": Tuned(tuple(FusionSpec(TWO_WAY, "wsum", "min-max", (w, 1 - w)) for w in WEIGHT_GRID)),
    "wrrf-cv": Tuned(tuple(FusionSpec(TWO_WAY, "rrf", None, (w, 1 - w)) for w in WEIGHT_GRID)),
    "route-cv": Tuned(RouteGrid(RRF)),
    "route-mm-cv": Tuned(RouteGrid(COMBMAX_MM)),
    "fuse4": FusionSpec(FOUR, "wsum", "min-max", (1.0, 1.0, 0.5, 0.5)),
    "fuse4-rrf": FusionSpec(FOUR, "rrf", None),
    "fuse2": FusionSpec(("q.dense", "q.bm25"), "wsum", "min-max", (1.0, 1.0)),
}
NAMED = {n: FUSED[n] for n in ("fuse4", "fuse4-rrf", "fuse2")}  # fixed a priori, over retriever families
BASELINES = {"rtp": Ranked("q.dense"), "ptr": Ranked("s.dense")}
METHODS = (*BASELINES, *FUSED)  # every name a fused study can score, in table order
CV = tuple(n for n, s in FUSED.items() if isinstance(s, Tuned))
CV_K = 5  # a tuned method run as a retriever is tuned for recall@5 on the candidates ground truth


def spec_of(name: str) -> Spec:
    """The spec of a fused method or baseline name (``ValueError`` naming the known ones)."""
    if name in METHODS:
        return FUSED[name] if name in FUSED else BASELINES[name]
    raise ValueError(f"unknown method(s) [{name!r}]; choose from {', '.join(METHODS)}")


def methods_over(study_methods: Iterable[str], with_setup: bool = True) -> list[str]:
    """The names of :data:`METHODS` whose components ``study_methods`` hold (``meanemb``: ``with_setup``)."""
    have = set(study_methods)
    return [n for n in METHODS if set(component_methods(spec_of(n).components)) <= have
            and (with_setup or not isinstance(spec_of(n), MeanEmbedding))]


def study_inputs(result, run: int = 0, gt: str = "candidates", names: Iterable[str] | None = None,
                 setup=None) -> FusionInputs:
    """The rankings of a stored study's run that the named methods read (default: every one it holds)."""
    have = set(result.rankings["method"])
    comps = (dict.fromkeys(c for n in names for c in spec_of(n).components) if names is not None
             else [c for c, (m, _) in component_table().items() if m in have])
    return study_component_inputs(result, run, gt, comps, result.stubs, setup)


def method_runs(inp: FusionInputs, names: Iterable[str], k: int, *,
                params: Mapping[str, float] | None = None, folds: int = FOLDS, seed: int = SEED,
                tune_k: int | None = None) -> tuple[dict[str, Run], dict[str, dict[str, float]]]:
    """``({method: Run}, {method: {qkey: parameter}})``, top ``k``; a tuned one uses ``params`` or tunes."""
    out: dict[str, Run] = {}
    chosen: dict[str, dict[str, float]] = {}
    for name in names:
        spec = spec_of(name)
        if isinstance(spec, Tuned):
            spec = replace(spec, folds=folds, seed=seed, tune_k=tune_k)
            if params and name in params:
                out[name] = spec.with_param(inp, params[name]).ranked(inp, k)
                chosen[name] = dict.fromkeys(inp.keys, float(params[name]))
            else:
                out[name], chosen[name] = spec.tune(inp, k)
        else:
            out[name] = spec.ranked(inp, k)
    return out, chosen


def stub_calls(name: str, inp: FusionInputs, chosen: Mapping[str, float] | None = None) -> dict[str, bool]:
    """Per query, whether the method needed PtR's stub call (route-then-fuse skips it above its cut)."""
    spec = spec_of(name)
    if isinstance(spec, Tuned) and chosen:
        return spec.stub_calls(inp, chosen)
    return dict.fromkeys(inp.keys, spec.uses_stubs)


def fit_params(inp: FusionInputs, names: Iterable[str], k: int) -> dict[str, float]:
    """Each tuned method's parameter fitted on all of ``inp``'s queries (to be used unchanged elsewhere)."""
    return {n: float(spec_of(n).fit(inp, k).param) for n in names}


_SHARED: dict[str, Run] = {}  # fused runs by the content of their inputs (the last SHARED_MAX)
SHARED_MAX = 96


def fused_runs(result, names: Iterable[str], k: int, run: int = 0, gt: str = "candidates",
               setup=None, params: Mapping[str, float] | None = None) -> dict[str, Run]:
    """``{method: Run}`` (top ``k``) of the named methods on a stored study's run, reused by content."""
    names = list(names)
    inp = study_inputs(result, run, gt, names, setup)
    if setup is not None:
        return method_runs(inp, names, k, params=params)[0]
    # each method's key: its spec and parameters, and the digests of what it reads (each hashed once)
    shared = hashlib.sha256(repr((k, FOLDS, SEED, inp.keys, sorted(inp.subsets.items()),
                                  sorted((q, sorted(r)) for q, r in inp.qrels.items()))).encode())
    if inp.queries is not None:
        shared.update(repr(inp.queries[["qkey", "query"]].to_numpy().tolist()).encode())
    digest = {c: hashlib.sha256(repr(sorted(inp.rankings.get(c, {}).items())).encode()).hexdigest()
              for c in dict.fromkeys(c for n in names for c in (*spec_of(n).components, TOP1))}
    keys = {n: hashlib.sha256(repr((n, spec_of(n), (params or {}).get(n), shared.hexdigest(), [
        digest[c] for c in (*spec_of(n).components, TOP1)])).encode()).hexdigest() for n in names}
    todo = [n for n in names if keys[n] not in _SHARED]
    _SHARED.update({keys[n]: ranked for n, ranked in method_runs(inp, todo, k, params=params)[0].items()})
    out = {n: _SHARED[keys[n]] for n in names}
    while len(_SHARED) > SHARED_MAX:
        _SHARED.pop(next(iter(_SHARED)))
    return out


class FusedRetriever(SpecRetriever):
    """A fused method as a retriever of the study pipeline."""

    def __repr__(self) -> str:
        return f"FusedRetriever({self.name!r}, {self.spec.describe()!r})"

    def retrieve(self, ctx: RunContext) -> Retrieved:
        parts = self.parts(ctx, component_methods(self.spec.components))
        inp = rankings_inputs(parts, ctx.queries, ctx.run, "candidates", self.spec.components, ctx.stubs,
                              ctx.setup)
        spec = replace(self.spec, tune_k=CV_K) if isinstance(self.spec, Tuned) else self.spec
        ranked = spec.ranked(inp, ctx.depth)
        return Retrieved(ranked_frame(ctx.queries["qkey"].tolist(), self.name, ranked, ctx.setup.api_ids))


for _name, _spec in FUSED.items():
    if _name not in RETRIEVERS:
        register(FusedRetriever(_name, _spec))
