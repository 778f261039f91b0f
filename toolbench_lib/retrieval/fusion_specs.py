"""Fused methods over one run's *components* (``q.``, ``s.``, ``s*.`` rankings of a family) as *specs*."""

from __future__ import annotations

import contextlib
import functools
import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np
import pandas as pd

from .families import FAMILIES
from .fuse import Ranking, as_scores, ids, merge, normalised, top
from .rankings import Retrieved
from .retrievers import method_name, ptr_texts

# {qkey: {api_id: score}}: each query's APIs best first, with the method's own scores
Run = dict[str, dict[str, float]]
TOP1 = "q.dense"  # the component whose best score a route reads (RtP's top-1 cosine)


@functools.cache
def _components(families: tuple[str, ...]) -> dict[str, tuple[str, bool]]:
    return {f"{tag}.{family}": (method_name(arch, family), tag == "s*")
            for family in families for tag, arch in (("q", "rtp"), ("s", "ptr"), ("s*", "ptr"))}


def component_table() -> dict[str, tuple[str, bool]]:
    """component -> (study method whose rankings it reads, whether it is every stub's own), every family."""
    return _components(tuple(FAMILIES))


def check_components(components: Iterable[str], what: str = "fusion") -> tuple[str, ...]:
    """The components, checked (``ValueError`` naming the known ones; ``what`` names the method kind)."""
    comps, known = tuple(components), component_table()
    unknown = [c for c in comps if c not in known]
    if unknown:
        raise ValueError(f"unknown {what} component(s) {unknown}; choose from {', '.join(known)}")
    return comps


def component_methods(components: Iterable[str]) -> list[str]:
    """The study methods whose rankings the components read, each once."""
    return list(dict.fromkeys(component_table()[c][0] for c in check_components(components)))


class _StubUse:
    def __post_init__(self) -> None:
        check_components(self.components)

    @property
    def uses_stubs(self) -> bool:
        """Whether a component is a stub ranking (then the method pays PtR's stub call)."""
        return any(not c.startswith("q.") for c in self.components)


@dataclass
class FusionInputs:
    """One run's rankings per component and query, each query's set and ground truth, and a setup."""

    rankings: dict[str, dict[str, list[Ranking]]]
    keys: list[str]
    subsets: dict[str, str]
    qrels: dict[str, set[str]]
    run: int = 0
    queries: pd.DataFrame | None = None
    stubs: pd.DataFrame | None = None
    setup: Any = None
    cache: dict = field(default_factory=dict, repr=False)

    def texts(self, component: str, key: str) -> list[Ranking]:
        """The component's rankings of one query (none when the component or the query has none)."""
        return self.rankings.get(component, {}).get(key, [])

    def top1(self, key: str) -> float:
        """RtP's top-1 score of a query (NaN when it has no hit)."""
        r = self.texts(TOP1, key)
        return r[0][0][1] if r and r[0] else float("nan")


def rankings_by(frame: pd.DataFrame, by: list[str]) -> dict:
    """``{key: ranking}`` of every group of ``by`` (a tuple key for several columns), best rank first."""
    f = frame.sort_values([*by, "rank"], kind="stable")
    pairs = list(zip(f["api_id"].tolist(), f["score"].astype(float).tolist(), strict=True))
    keys = f[by[0]].tolist() if len(by) == 1 else list(zip(*(f[c].tolist() for c in by), strict=True))
    return {key: [p for _, p in group]
            for key, group in itertools.groupby(zip(keys, pairs, strict=True), key=lambda x: x[0])}


def qrels_of(queries: pd.DataFrame, gt: str) -> dict[str, set[str]]:
    return {k: set(v) for k, v in zip(queries["qkey"], queries[gt], strict=True)}


def text_rankings(got: Retrieved) -> dict[str, list[Ranking]]:
    """``{qkey: [each searched text's own ranking]}`` of a method's rankings (``text_idx`` ascending)."""
    each: dict[str, list[Ranking]] = {}
    for (key, _), r in rankings_by(got.texts, ["qkey", "text_idx"]).items():
        each.setdefault(key, []).append(r)
    return each


def rankings_inputs(retrieved: Mapping[str, Retrieved], queries: pd.DataFrame, run: int = 0,
                    gt: str = "candidates", components: Iterable[str] = (), stubs: pd.DataFrame | None = None,
                    setup: Any = None) -> FusionInputs:
    """The components' rankings of one run's ``{method: Retrieved}`` (``ValueError`` for a missing one)."""
    comps = tuple(components)
    rankings: dict[str, dict[str, list[Ranking]]] = {}
    for method in component_methods(comps):
        got = retrieved.get(method)
        if got is None or (got.final.empty and got.texts.empty):
            raise ValueError(f"the study has no rankings of {method} for run {run}")
        final = {key: [r] for key, r in rankings_by(got.final, ["qkey"]).items()}
        each = text_rankings(got)
        for c in comps:
            read, per_stub = component_table()[c]
            if read == method:
                rankings[c] = each if per_stub else final
    keys = queries["qkey"].tolist()
    subsets = dict(zip(keys, queries["subset"], strict=True))
    return FusionInputs(rankings, keys, subsets, qrels_of(queries, gt), run, queries, stubs, setup)


def study_component_inputs(result: Any, run: int = 0, gt: str = "candidates", components: Iterable[str] = (),
                           stubs: pd.DataFrame | None = None, setup: Any = None) -> FusionInputs:
    """:func:`rankings_inputs` of a stored study's run (``ValueError`` when it lacks a method or the run)."""
    comps = tuple(components)
    retrieved = {}
    for method in component_methods(comps):
        with contextlib.suppress(KeyError):  # a missing one: rankings_inputs's ValueError
            retrieved[method] = result.retrieved(method, run)
    return rankings_inputs(retrieved, result.queries, run, gt, comps, stubs, setup)


class Spec(Protocol):
    """What every fused method is: components, whether it pays the stub call, and its scored run."""

    components: tuple[str, ...]
    uses_stubs: bool

    def ranked(self, inp: FusionInputs, k: int) -> Run: ...
    def describe(self) -> str: ...


def cached_ranked(spec: Spec, inp: FusionInputs, k: int) -> Run:
    """``spec.ranked(inp, k)``, computed once per inputs (a tuner's candidates share their parts)."""
    key = (spec, k)
    if key not in inp.cache:
        inp.cache[key] = spec.ranked(inp, k)
    return inp.cache[key]


@dataclass(frozen=True)
class FusionSpec(_StubUse):
    """Components fused by ``method`` after ``norm``, with one weight per component."""

    components: tuple[str, ...]
    method: str = "wsum"
    norm: str | None = "min-max"
    weights: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        if not check_components(self.components):
            raise ValueError("a fusion spec needs at least one component")
        if self.method == "wsum" and (self.weights is None or len(self.weights) != len(self.components)):
            raise ValueError("wsum needs one weight per component")

    @property
    def param(self) -> float:
        """The first weight (the weight on RtP in a two-way fusion); NaN without weights."""
        return float(self.weights[0]) if self.weights else float("nan")

    def describe(self) -> str:
        w = "" if self.weights is None else " weights " + "/".join(f"{x:g}" for x in self.weights)
        norm = f" ({self.norm})" if self.norm and self.method != "rrf" else ""
        return f"{self.method}{norm} of {' + '.join(self.components)}{w}"

    def scores(self, inp: FusionInputs, key: str) -> dict[str, float]:
        """One query's fused scores (each component's rankings normalised once per inputs)."""
        runs, weights = [], []
        for i, c in enumerate(self.components):
            slot = ("normalised", c, key, self.method == "rrf", self.norm)
            if slot not in inp.cache:
                texts = inp.texts(c, key) or ([[]] if not component_table()[c][1] else [])
                inp.cache[slot] = normalised(texts, self.method, self.norm)
            runs += inp.cache[slot]
            weights += [self.weights[i] if self.weights is not None else 1.0] * len(inp.cache[slot])
        return merge(runs, self.method, weights if self.weights is not None else None)

    def ranked(self, inp: FusionInputs, k: int) -> Run:
        """Each query's top ``k`` by fused score (ties by id), with that score."""
        scores = {key: self.scores(inp, key) for key in inp.keys}
        return {key: {a: float(s[a]) for a in top(s, k)} for key, s in scores.items()}


def round_robin(rankings: Sequence[Sequence[str]], k: int) -> dict[str, float]:
    """The lists interleaved rank by rank, repeats dropped, first ``k``, each scored ``1 / its best rank``."""
    out: dict[str, float] = {}
    for depth in range(max((len(r) for r in rankings), default=0)):
        for r in rankings:
            if depth < len(r) and r[depth] not in out:
                out[r[depth]] = 1.0 / (depth + 1)
                if len(out) == k:
                    return out
    return out


@dataclass(frozen=True)
class RoundRobin(_StubUse):
    """The components' rankings interleaved by :func:`round_robin` (score: 1 / the API's best rank)."""

    components: tuple[str, ...]

    def describe(self) -> str:
        return f"round-robin of {' + '.join(self.components)}"

    def ranked(self, inp: FusionInputs, k: int) -> Run:
        return {key: round_robin([ids(r) for c in self.components for r in inp.texts(c, key)], k)
                for key in inp.keys}


@dataclass(frozen=True)
class Ranked(_StubUse):
    """One component's own ranking and scores, unchanged (RtP's or PtR's list as a baseline)."""

    component: str

    @property
    def components(self) -> tuple[str, ...]:
        return (self.component,)

    def describe(self) -> str:
        return f"{self.component} as ranked"

    def ranked(self, inp: FusionInputs, k: int) -> Run:
        return {key: as_scores(next(iter(inp.texts(self.component, key)), [])[:k]) for key in inp.keys}


@dataclass(frozen=True)
class MeanEmbedding:
    """The normalised mean of the query's and its stubs' embeddings, searched once."""

    components: tuple[str, ...] = ()
    uses_stubs: bool = True

    def describe(self) -> str:
        return "mean embedding of the query and its stubs, searched once"

    def ranked(self, inp: FusionInputs, k: int) -> Run:
        if inp.setup is None or inp.queries is None or inp.stubs is None:
            raise ValueError("meanemb needs the index and the embedder (a retrieval setup)")
        q = inp.queries.set_index("qkey").loc[inp.keys].reset_index()
        texts = [[query, *(t for t in st if t != query)]
                 for query, st in zip(q["query"], ptr_texts(q, inp.stubs, inp.run), strict=True)]
        vecs = inp.setup.encode([t for ts in texts for t in ts])
        ends = np.cumsum([len(ts) for ts in texts], dtype=int)
        means = [vecs[end - len(ts):end].mean(axis=0) for ts, end in zip(texts, ends, strict=True)]
        means = [m / (np.linalg.norm(m) or 1.0) for m in means]
        scores, rows = inp.setup.index.search(np.asarray(means, dtype=np.float32), k)
        api_ids = inp.setup.api_ids
        return {key: as_scores([(api_ids[int(r)], float(s)) for r, s in zip(rr, ss, strict=True)])
                for key, rr, ss in zip(inp.keys, rows, scores, strict=True)}


@dataclass(frozen=True)
class Route:
    """RtP's list (and scores) when its top-1 score is at least ``threshold``, else ``base``'s."""

    threshold: float
    base: Spec
    uses_stubs: bool = True

    @property
    def components(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys((TOP1, *self.base.components)))

    @property
    def param(self) -> float:
        return float(self.threshold)

    def describe(self) -> str:
        return f"RtP if its top-1 score >= {self.threshold:g}, else {self.base.describe()}"

    def ranked(self, inp: FusionInputs, k: int) -> Run:
        rtp, fused = cached_ranked(Ranked(TOP1), inp, k), cached_ranked(self.base, inp, k)
        return {key: rtp[key] if inp.top1(key) >= self.threshold else fused[key] for key in inp.keys}


@dataclass(frozen=True)
class RouteGrid:
    """Every useful route threshold on a run: ``-inf``, each query's top-1 score (4 decimals), ``inf``."""

    base: Spec
    uses_stubs: bool = True

    @property
    def components(self) -> tuple[str, ...]:
        return Route(0.0, self.base).components

    def describe(self) -> str:
        return f"a route to {self.base.describe()} at every top-1 score"

    def __call__(self, inp: FusionInputs) -> tuple[Route, ...]:
        cuts = sorted({round(v, 4) for v in map(inp.top1, inp.keys) if v == v})
        return tuple(Route(t, self.base) for t in [-np.inf, *cuts, np.inf])
