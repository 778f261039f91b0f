"""Fused discovery methods over runs: (retriever family x searched text) rankings fused by one function.

A *component* is one ranking per query that a study already holds: the query searched by a family
(``q.dense`` = RtP's ranking, ``q.bm25`` = ``rtp@bm25``'s) or the stubs searched by a family and merged
per API (``s.dense`` = PtR's, ``s.bm25`` = ``ptr@bm25``'s). A :class:`FusionSpec` names its components and
fuses them as ``ranx.fuse(runs, method=..., norm=...)`` does (:func:`toolbench_lib.retrieval.fuse.combine`),
with optional weights: one function with parameters instead of a named variant per combination.

Named specs are registered as retrievers when this module is imported (``evaluate --method fuse4``); a
spec whose components include a stub ranking needs PtR's one stub call, the others no LLM call at all.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .fuse import Ranking, combine, top
from .retrievers import RETRIEVERS, RunContext, get_retriever, register

COMPONENTS = {"q.dense": "rtp", "q.bm25": "rtp@bm25", "s.dense": "ptr", "s.bm25": "ptr@bm25"}
QUERY_ONLY = ("q.dense", "q.bm25")


@dataclass(frozen=True)
class FusionSpec:
    """Components fused by ``method`` (``wsum``, ``sum``, ``max``, ``mnz``, ``rrf``) after ``norm``."""

    components: tuple[str, ...]
    method: str = "wsum"
    norm: str | None = "min-max"
    weights: tuple[float, ...] | None = None

    def __post_init__(self) -> None:
        unknown = [c for c in self.components if c not in COMPONENTS]
        if unknown or not self.components:
            raise ValueError(f"unknown fusion component(s) {unknown}; choose from {', '.join(COMPONENTS)}")
        if self.method == "wsum" and (self.weights is None or len(self.weights) != len(self.components)):
            raise ValueError("wsum needs one weight per component")

    @property
    def uses_stubs(self) -> bool:
        """Whether a component is a stub ranking (then the method pays PtR's stub call)."""
        return any(not c.startswith("q.") for c in self.components)

    @property
    def methods(self) -> list[str]:
        """The study methods whose rankings the components are."""
        return [COMPONENTS[c] for c in self.components]

    def describe(self) -> str:
        w = "" if self.weights is None else " weights " + "/".join(f"{x:g}" for x in self.weights)
        norm = f" ({self.norm})" if self.norm and self.method != "rrf" else ""
        return f"{self.method}{norm} of {' + '.join(self.components)}{w}"

    def fuse(self, rankings: Mapping[str, Mapping[str, Ranking]], keys: Iterable[str],
             k: int) -> dict[str, list[str]]:
        """``{qkey: top-k ids}`` from ``rankings[component][qkey]`` (a missing ranking fuses as empty)."""
        weights = list(self.weights) if self.weights is not None else None
        return {key: top(combine([rankings[c].get(key, []) for c in self.components], self.method,
                                 self.norm, weights), k)
                for key in keys}


# Fixed a priori (never tuned): every family and text at weight 1 for the query, 0.5 for the stubs.
NAMED = {
    "fuse4": FusionSpec(("q.dense", "q.bm25", "s.dense", "s.bm25"), "wsum", "min-max", (1.0, 1.0, 0.5, 0.5)),
    "fuse4-rrf": FusionSpec(("q.dense", "q.bm25", "s.dense", "s.bm25"), "rrf", None),
    "fuse2": FusionSpec(("q.dense", "q.bm25"), "wsum", "min-max", (1.0, 1.0)),
}


def study_rankings(result, components: Sequence[str], run: int = 0) -> dict[str, dict[str, Ranking]]:
    """``{component: {qkey: [(api_id, score), ...]}}``: a stored study run's final rankings, full depth."""
    out = {}
    for c in components:
        scored = result.scored_ranking(COMPONENTS[c], run)
        out[c] = {q: list(r.items()) for q, r in scored.items()}
    return out


def weight_grid(n: int, values: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0)) -> list[tuple[float, ...]]:
    """Every weight vector of ``n`` components from ``values`` with at least one positive weight, scaled so
    the largest weight is 1 (a vector and its multiples rank alike: kept once)."""
    seen, out = set(), []
    for w in itertools.product(values, repeat=n):
        if max(w) <= 0:
            continue
        scaled = tuple(round(x / max(w), 6) for x in w)
        if scaled not in seen:
            seen.add(scaled)
            out.append(scaled)
    return out


def candidate_specs(components: Sequence[str], values: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0)
                    ) -> list[FusionSpec]:
    """The specs a choice on the design sets ranges over: RRF, and min-max wsum on every weight vector."""
    comps = tuple(components)
    return [FusionSpec(comps, "rrf", None),
            *(FusionSpec(comps, "wsum", "min-max", w) for w in weight_grid(len(comps), values))]


def best_by_group(recall: np.ndarray, groups: np.ndarray) -> int:
    """Index of the row (a candidate parameter or spec) of ``recall`` (candidates x queries) with the best
    recall averaged within each group (query set), then over groups; ties go to the first in order."""
    per_group = np.stack([recall[:, groups == g].mean(axis=1) for g in np.unique(groups)], axis=1)
    score = per_group.mean(axis=1)
    return int(np.flatnonzero(score >= score.max() - 1e-12)[0])


class FusedRunsRetriever:
    """A :class:`FusionSpec` as a retriever of the study pipeline: it fuses the run's component rankings
    (retrieving a component that was not asked for) and returns its final ranking (``score`` is the fused
    score)."""

    def __init__(self, name: str, spec: FusionSpec) -> None:
        self.name, self.spec = name, spec
        self.uses_stubs = spec.uses_stubs
        self.deterministic = not spec.uses_stubs

    def retrieve(self, ctx: RunContext) -> pd.DataFrame:
        rankings = {}
        for c, method in zip(self.spec.components, self.spec.methods, strict=True):
            h = ctx.hits.get(method)
            if h is None:
                h = get_retriever(method).retrieve(ctx)
            final = h[h["text_idx"] == -1].sort_values(["qkey", "rank"])
            rankings[c] = {q: list(zip(g["api_id"], g["score"].astype(float), strict=True))
                           for q, g in final.groupby("qkey", sort=False)}
        keys = ctx.queries["qkey"].tolist()
        weights = list(self.spec.weights) if self.spec.weights is not None else None
        row_of = {a: i for i, a in enumerate(ctx.setup.api_ids)}
        recs = []
        for key in keys:
            scores = combine([rankings[c].get(key, []) for c in self.spec.components], self.spec.method,
                             self.spec.norm, weights)
            for rank, a in enumerate(top(scores, ctx.depth), 1):
                recs.append((key, self.name, -1, rank, row_of[a], a, float(scores[a])))
        return pd.DataFrame(recs, columns=["qkey", "method", "text_idx", "rank", "row", "api_id", "score"])


for _name, _spec in NAMED.items():
    if _name not in RETRIEVERS:
        register(FusedRunsRetriever(_name, _spec))
