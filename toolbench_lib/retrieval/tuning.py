"""Tuned fused methods: each query's list is that of the candidate chosen by cross-validation."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..config import FOLDS, SEED
from ..data.folds import one_group_out, query_folds
from ..data.queries import clusters
from ..eval.evaluation import recall_at
from .fusion_specs import FusionInputs, FusionSpec, Route, RouteGrid, Run, Spec, cached_ranked


def best_by_group(recall: np.ndarray, groups: np.ndarray) -> int:
    """The first row of ``recall`` (candidates x queries) best on average within groups, then over them."""
    per_group = np.stack([recall[:, groups == g].mean(axis=1) for g in np.unique(groups)], axis=1)
    score = per_group.mean(axis=1)
    return int(np.flatnonzero(score >= score.max() - 1e-12)[0])


def held_out_choice(recall: np.ndarray, groups: np.ndarray, fold: np.ndarray) -> np.ndarray:
    """Per query (column of ``recall``), the candidate chosen on the queries of the other folds."""
    chosen = np.zeros(recall.shape[1], dtype=np.int64)
    if len(np.unique(fold)) < 2:
        raise ValueError(f"cross-validation needs queries of two unrelated groups (another text and sample "
                         f"of APIs); these {recall.shape[1]} queries form one")
    for f in np.unique(fold):
        chosen[fold == f] = best_by_group(recall[:, fold != f], groups[fold != f])
    return chosen


def recall_matrix(grid: Sequence[Run], keys: Sequence[str], qrels: Mapping[str, set[str]],
                  k: int) -> np.ndarray:
    """Recall@k of every (candidate, query), 0 without ground truth; a shared list is counted once."""
    rels = [qrels.get(key) or set() for key in keys]
    out = np.zeros((len(grid), len(keys)))
    seen: dict[tuple[int, int], float] = {}  # (id of a list, query): the lists live as long as ``grid``
    for g, run in enumerate(grid):
        lists = [run[key] for key in keys]
        new = [j for j, lst in enumerate(lists) if (id(lst), j) not in seen]
        if new:
            values = recall_at([lists[j] for j in new], [rels[j] for j in new], k)
            seen.update(((id(lists[j]), j), float(v)) for j, v in zip(new, values, strict=True))
        out[g] = [seen[(id(lst), j)] for j, lst in enumerate(lists)]
    return out


@dataclass(frozen=True)
class Tuned:
    """A fused method whose spec is chosen among ``candidates`` by cross-validation of recall@``tune_k``."""

    candidates: tuple[Spec, ...] | Callable[[FusionInputs], Sequence[Spec]]
    folds: int = FOLDS
    seed: int = SEED
    tune_k: int | None = None

    def grid(self, inp: FusionInputs) -> list[Spec]:
        """The candidate specs on these inputs."""
        return list(self.candidates(inp) if callable(self.candidates) else self.candidates)

    @property
    def components(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(c for s in self._shapes for c in s.components))

    @property
    def uses_stubs(self) -> bool:
        return any(s.uses_stubs for s in self._shapes)

    @property
    def _shapes(self) -> Sequence:
        """The candidates, or the function that makes them (which knows their components)."""
        return [self.candidates] if callable(self.candidates) else self.candidates

    def describe(self) -> str:
        what = self.candidates.describe() if callable(self.candidates) else \
            f"{len(self.candidates)} candidates ({self.candidates[0].describe()}, ...)"
        return f"tuned by {self.folds}-fold cross-validation over {what}"

    def _choose(self, inp: FusionInputs, k: int, tune_k: int | None,
                choose: Callable[[np.ndarray, np.ndarray], np.ndarray | int]) -> tuple:
        """``(specs, runs, choice)``: the candidates, their top-``k`` runs, and ``choose(recall, groups)``."""
        specs = self.grid(inp)
        runs = [cached_ranked(s, inp, k) for s in specs]
        groups = np.array([inp.subsets[key] for key in inp.keys])
        return specs, runs, choose(recall_matrix(runs, inp.keys, inp.qrels, tune_k or k), groups)

    def _per_query(self, inp: FusionInputs, k: int, choose: Callable) -> tuple[Run, dict[str, float]]:
        specs, runs, chosen = self._choose(inp, k, self.tune_k, choose)
        return ({key: runs[i][key] for key, i in zip(inp.keys, chosen, strict=True)},
                {key: float(specs[i].param) for key, i in zip(inp.keys, chosen, strict=True)})

    def tune(self, inp: FusionInputs, k: int) -> tuple[Run, dict[str, float]]:
        """The out-of-fold top-``k`` run and each query's chosen parameter (a weight, a threshold)."""
        texts = inp.queries.drop_duplicates("qkey").set_index("qkey")["query"].reindex(inp.keys).fillna("")
        fold = query_folds([inp.subsets[key] for key in inp.keys], texts, clusters(inp.queries, inp.keys),
                           self.folds, self.seed)
        return self._per_query(inp, k, lambda r, g: held_out_choice(r, g, fold))

    def ranked(self, inp: FusionInputs, k: int) -> Run:
        return self.tune(inp, k)[0]

    def leave_one_set_out(self, inp: FusionInputs, k: int) -> tuple[Run, dict[str, float]]:
        """The run whose candidate, for each query set, was chosen on the other sets only."""
        return self._per_query(inp, k, lambda r, g: held_out_choice(r, g, one_group_out(g)))

    def fit(self, inp: FusionInputs, k: int) -> Spec:
        """The candidate chosen on every query of ``inp`` (recall@``k``)."""
        specs, _, chosen = self._choose(inp, k, k, best_by_group)
        return specs[chosen]

    def with_param(self, inp: FusionInputs, param: float) -> Spec:
        """The candidate with a given parameter (fitted elsewhere); ``ValueError`` when none has it."""
        if isinstance(self.candidates, RouteGrid):
            return Route(param, self.candidates.base)
        for s in self.grid(inp):
            if s.param == param:
                return s
        raise ValueError(f"parameter {param} is not in its grid")

    def stub_calls(self, inp: FusionInputs, chosen: Mapping[str, float]) -> dict[str, bool]:
        """Per query, whether its chosen candidate needed the stub call (a route above its cut does not)."""
        if isinstance(self.candidates, RouteGrid):
            return {key: not inp.top1(key) >= chosen[key] for key in inp.keys}
        return dict.fromkeys(inp.keys, self.uses_stubs)


def weight_grid(n: int, values: Sequence[float] = (0.0, 0.25, 0.5, 0.75, 1.0)) -> list[tuple[float, ...]]:
    """Every nonzero weight vector of ``n`` components from ``values``, scaled to a largest weight of 1."""
    return list(dict.fromkeys(tuple(round(x / max(w), 6) for x in w)
                              for w in itertools.product(values, repeat=n) if max(w) > 0))


def candidate_specs(components: Sequence[str], values: Sequence[float]) -> tuple[FusionSpec, ...]:
    """The specs a choice over ``components`` ranges over: RRF, and min-max wsum on every weight vector."""
    comps = tuple(components)
    return (FusionSpec(comps, "rrf", None),
            *(FusionSpec(comps, "wsum", "min-max", w) for w in weight_grid(len(comps), values)))
