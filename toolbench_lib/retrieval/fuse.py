"""Score fusion of rankings exactly as ``ranx.fuse`` computes it, in plain Python (ranx is slow)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

Ranking = list[tuple[str, float]]  # (api_id, score), best first

RRF_K = 60
METHODS = ("rrf", "max", "sum", "mnz", "wsum")
COMBINE = {"max": max, "sum": sum, "mnz": lambda v: sum(v) * len(v)}


def ids(r: Ranking) -> list[str]:
    """The ranking's ids in order."""
    return [a for a, _ in r]


def top(scores: Mapping[str, float], k: int) -> list[str]:
    """The ``k`` best ids by score; ties by id, so every list is deterministic."""
    if k <= 0 or not scores:
        return []
    values = sorted(scores.values(), reverse=True)
    kth = values[min(k, len(values)) - 1]  # only ids scoring at least the k-th best need ordering
    best = [x for x in scores.items() if x[1] >= kth]
    return [a for a, _ in sorted(best, key=lambda x: (-x[1], x[0]))[:k]]


def as_scores(r: Ranking) -> dict[str, float]:
    """``{id: score}`` of a ranking; a repeated id keeps its first (best) score."""
    out: dict[str, float] = {}
    for a, s in r:
        out.setdefault(a, s)
    return out


def min_max(scores: Mapping[str, float]) -> dict[str, float]:
    """ranx's min-max normalisation of one query's scores (denominator at least 1e-9)."""
    if not scores:
        return {}
    lo, hi = min(scores.values()), max(scores.values())
    return {a: (s - lo) / max(hi - lo, 1e-9) for a, s in scores.items()}


def combine(texts: Sequence[Ranking], method: str, norm: str | None = None,
            weights: Sequence[float] | None = None) -> dict[str, float]:
    """One query's fused scores, as ``ranx.fuse(runs, norm, method)`` computes them."""
    return merge(normalised(texts, method, norm), method, weights)


def normalised(texts: Sequence[Ranking], method: str, norm: str | None = None) -> list[dict[str, float]]:
    """Each ranking's scores as :func:`combine` fuses them: reciprocal ranks (rrf), else after ``norm``."""
    if method == "rrf":  # ranx's RRF term: 1 / (60 + rank)
        return [{a: 1.0 / (RRF_K + i) for i, a in enumerate(dict.fromkeys(ids(t)), 1)} for t in texts]
    runs = [as_scores(t) for t in texts]
    if norm == "min-max":
        return [min_max(r) for r in runs]
    if norm is not None:
        raise ValueError(f"unknown norm {norm!r}; choose from None, 'min-max'")
    return runs


def merge(runs: Sequence[Mapping[str, float]], method: str,
          weights: Sequence[float] | None = None) -> dict[str, float]:
    """:func:`combine`'s second step: the :func:`normalised` scores fused by ``method``."""
    if method == "rrf":
        method = "sum" if weights is None else "wsum"
    if method == "wsum":
        if weights is None or len(weights) != len(runs):
            raise ValueError("wsum needs one weight per ranking")
        runs, method = [{a: w * v for a, v in r.items()} for w, r in zip(weights, runs, strict=True)], "sum"
    if method not in COMBINE:
        raise ValueError(f"unknown fusion method {method!r}; choose from {', '.join(METHODS)}")
    acc: dict[str, list[float]] = {}
    for r in runs:
        for a, v in r.items():
            acc.setdefault(a, []).append(v)
    return {a: COMBINE[method](v) for a, v in acc.items()}
