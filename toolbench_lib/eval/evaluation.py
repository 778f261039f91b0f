"""One evaluation per study (:func:`evaluate`): its ground-truth marks and every metric from them."""

from __future__ import annotations

import hashlib
import io
import json
import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from .. import config
from ..data.atomic import atomic_path, read_verified, write_checksum
from ..data.queries import DEFAULT_GT, GT_DEFINITIONS, check_gt, ground_truth_groups
from ..data.tables import code_hash

log = logging.getLogger(__name__)

K_MAX = config.K_MAX  # the cut-off every evaluation holds at least (the k-ablation's 1..20)
METRICS = ("recall", "precision", "ndcg", "mrr", "comp")
EVAL_CODE = ("eval", "config.py")  # the code an evaluation's key covers
EVAL_DIR = "evaluation"  # beside a stored study's tables


def check_metrics(metrics: Sequence[str]) -> list[str]:
    """``metrics`` as a list, each a name of :data:`METRICS`."""
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; choose from {list(METRICS)}")
    return list(metrics)


def check_k(k: int, depth: int = K_MAX) -> int:
    """A cut-off an evaluation of ``depth`` ranks holds (1..``depth``)."""
    if not 1 <= int(k) <= depth:
        raise ValueError(f"k must be between 1 and {depth} (the ranks evaluated), got {k}")
    return int(k)


def relevance(lists: Sequence[Sequence], rels: Sequence[Collection], depth: int = K_MAX) -> np.ndarray:
    """``(len(lists), depth)``: whether the ``r``-th distinct id of each ranking is relevant."""
    out = np.zeros((len(lists), depth), dtype=bool)
    for i, (ids, rel) in enumerate(zip(lists, rels, strict=True)):
        if rel:
            seen = list(dict.fromkeys(ids))[:depth]
            out[i, :len(seen)] = [a in rel for a in seen]
    return out


def metric_values(flags: np.ndarray, n_gt: np.ndarray, metric: str, k: int) -> np.ndarray:
    """``metric@k`` of every ranking from its marks (``flags[..., rank]``) and ground-truth sizes."""
    top = flags[..., :k]
    hits = top.sum(axis=-1)
    n = np.broadcast_to(np.asarray(n_gt), hits.shape)
    has = n > 0
    if metric == "recall":
        return np.where(has, hits / np.maximum(n, 1), 0.0)
    if metric == "precision":
        return hits / k
    if metric == "comp":
        return (has & (hits >= n)).astype(float)
    if metric == "mrr":
        first = np.argmax(top, axis=-1)
        return np.where(top.any(axis=-1), 1.0 / (first + 1), 0.0)
    if metric == "ndcg":
        discount = 1.0 / np.log2(np.arange(2, k + 2))
        dcg = (top * discount).sum(axis=-1)
        ideal = np.concatenate([[0.0], np.cumsum(discount)])[np.minimum(n, k)]
        return np.where(has, dcg / np.where(ideal > 0, ideal, 1.0), 0.0)
    raise ValueError(f"unknown metric {metric!r}; choose from {list(METRICS)}")


def recall_at(lists: Sequence[Sequence], rels: Sequence[Collection], k: int) -> np.ndarray:
    """recall@k of each ranking against its ground truth (0 without ground truth), from :func:`relevance`."""
    return metric_values(relevance(lists, rels, k), np.array([len(r) for r in rels]), "recall", k)


def hits_at(lists: Sequence[Sequence], rels: Sequence[Collection], k: int) -> np.ndarray:
    """How many ground-truth ids each ranking holds in its first ``k`` distinct ids (:func:`relevance`)."""
    return relevance(lists, rels, k).sum(axis=1)


def score_rankings(rankings: Mapping[str, Sequence], queries: pd.DataFrame, gt: str, k: int,
                   metrics: Sequence[str] = ("recall", "precision")) -> pd.DataFrame:
    """Per-query metrics at ``k`` (``qkey, <metric>..., n_gt``) of rankings outside a stored study."""
    check_gt(gt)
    metrics, k = check_metrics(metrics), check_k(k, max(k, 1))
    rels = [set(r) for r in queries[gt]]
    flags = relevance([rankings.get(q, []) for q in queries["qkey"]], rels, k)
    n_gt = np.array([len(r) for r in rels])
    return pd.DataFrame({"qkey": queries["qkey"].to_numpy(),
                         **{m: metric_values(flags, n_gt, m, k) for m in metrics}, "n_gt": n_gt})


@dataclass
class Evaluation:
    """The marks of a study's final rankings (``flags[gt, method, run, query, rank]``) and ``n_gt``."""

    key: str
    gts: tuple[str, ...]
    methods: tuple[str, ...]
    n_runs: int
    qkeys: np.ndarray
    subsets: np.ndarray
    n_gt: np.ndarray
    flags: np.ndarray
    deterministic: tuple[bool, ...] = ()  # per method: the same retrieval in every run (RtP)
    groups: np.ndarray | None = None  # per query: its cluster, the queries written from one sample of APIs

    def _gt(self, gt: str) -> int:
        check_gt(gt)
        return self.gts.index(gt)

    def _method(self, method: str) -> int:
        if method not in self.methods:
            raise KeyError(f"no method {method!r} in this evaluation (has {list(self.methods)})")
        return self.methods.index(method)

    @property
    def depth(self) -> int:
        """The ranks evaluated: :data:`K_MAX`, or the deepest final ranking's length when longer."""
        return int(self.flags.shape[-1])

    def is_deterministic(self, method: str) -> bool:
        """Whether ``method``'s retrieval is the same in every run (RtP; the study's provenance lists it)."""
        return bool(self.deterministic[self._method(method)]) if self.deterministic else False

    def values(self, metric: str, k: int, gt: str = DEFAULT_GT) -> np.ndarray:
        """``(method, run, query)`` values of ``metric@k`` under ``gt``."""
        g = self._gt(gt)
        return metric_values(self.flags[g], self.n_gt[g][None, None, :], metric, check_k(k, self.depth))

    def scores(self, k: int, gt: str = DEFAULT_GT, metrics: Sequence[str] = ("recall", "precision"),
               methods: Sequence[str] | None = None) -> pd.DataFrame:
        """``qkey, <metrics>..., n_gt, hits, method, run, subset`` per method, run and query."""
        metrics, k = check_metrics(metrics), check_k(k, self.depth)
        g = self._gt(gt)
        chosen = list(self.methods) if methods is None else list(methods)
        idx = [self._method(m) for m in chosen]
        nq, nr = len(self.qkeys), self.n_runs
        flags, n_gt, rows = self.flags[g][idx], self.n_gt[g], len(idx) * nr
        return pd.DataFrame({"qkey": np.tile(self.qkeys, rows),
                             **{m: metric_values(flags, n_gt[None, None, :], m, k).ravel() for m in metrics},
                             "n_gt": np.tile(n_gt, rows), "hits": flags[..., :k].sum(axis=-1).ravel(),
                             "method": np.repeat(chosen, nr * nq),
                             "run": np.tile(np.repeat(np.arange(nr), nq), len(idx)),
                             "subset": np.tile(self.subsets, rows)})

    def save(self, path: Path) -> None:
        """Write the evaluation to ``path`` (npz) and its sha256 sidecar."""
        meta = json.dumps({"key": self.key, "gts": list(self.gts), "methods": list(self.methods),
                           "n_runs": self.n_runs, "deterministic": list(self.deterministic),
                           "depth": self.depth})
        with atomic_path(path) as tmp:  # the temporary name keeps the .npz suffix
            np.savez_compressed(tmp, meta=np.array(meta), qkeys=self.qkeys.astype(str),
                                subsets=self.subsets.astype(str), n_gt=self.n_gt,
                                flags=np.packbits(self.flags, axis=-1),
                                groups=(self.qkeys if self.groups is None else self.groups).astype(str))
        write_checksum(path)

    @classmethod
    def load(cls, path: Path, key: str) -> Evaluation | None:
        """The evaluation stored at ``path`` when it holds its checksum and ``key``; else None."""
        data = read_verified(path)
        if data is None:
            if Path(path).exists():
                log.warning("stored evaluation %s does not match its checksum: computing it again", path)
            return None
        try:
            with np.load(io.BytesIO(data), allow_pickle=False) as z:
                meta = json.loads(str(z["meta"]))
                if meta["key"] != key:
                    return None
                flags = np.unpackbits(z["flags"], axis=-1, count=int(meta.get("depth", K_MAX))).astype(bool)
                return cls(meta["key"], tuple(meta["gts"]), tuple(meta["methods"]), int(meta["n_runs"]),
                           z["qkeys"], z["subsets"], z["n_gt"], flags, tuple(meta["deterministic"]),
                           z["groups"])
        except (OSError, ValueError, KeyError) as exc:
            log.warning("stored evaluation %s is unreadable (%s): computing it again", path, exc)
            return None


def evaluation_key(result) -> str:
    """Content key of a study's evaluation: its final rankings, queries, methods, runs and eval's code."""
    h = hashlib.sha256(code_hash(*EVAL_CODE).encode())
    stored = result.stored_rankings_sha256()
    if stored:  # a stored study's rankings as saved or loaded: the checksum of its table
        h.update(stored.encode())
    else:
        final = result.rankings[["qkey", "method", "run", "rank", "api_id"]]
        h.update(pd.util.hash_pandas_object(final, index=False).to_numpy().tobytes())
    q = result.queries
    h.update(json.dumps({"qrels": {gt: [sorted(v) if v is not None else [] for v in q[gt]]
                                       for gt in GT_DEFINITIONS},
                         "qkeys": list(q["qkey"]), "subsets": list(q["subset"]),
                         "methods": result.methods, "n_runs": result.n_runs,
                         "deterministic": result.deterministic}, sort_keys=True).encode())
    return h.hexdigest()[:20]


def _distinct(result, methods: Sequence[str],
              qkeys: np.ndarray) -> tuple[pd.DataFrame, np.ndarray, np.ndarray]:
    """The final rankings' distinct APIs of ``methods`` and ``qkeys``, with their 0-based rank ``r``, and
    each row's method and query index."""
    final = result.rankings.sort_values(["method", "run", "qkey", "rank"]).drop_duplicates(
        ["method", "run", "qkey", "api_id"])
    final = final.assign(r=final.groupby(["method", "run", "qkey"], sort=False).cumcount())
    pos = pd.Series(np.arange(len(qkeys)), index=qkeys)
    final = final[final["qkey"].isin(pos.index) & final["method"].isin(methods)]
    return (final, final["method"].map({m: i for i, m in enumerate(methods)}).to_numpy(dtype=np.int64),
            pos.loc[final["qkey"].to_numpy()].to_numpy(dtype=np.int64))


def _compute(result, key: str) -> Evaluation:
    """:func:`evaluate`, computed: one vectorised pass over the final rankings."""
    q = result.queries
    qkeys = q["qkey"].to_numpy().astype(str)
    methods, n_runs = tuple(result.methods), result.n_runs
    final, m_idx, q_idx = _distinct(result, methods, qkeys)
    depth = max(K_MAX, int(final["r"].max()) + 1 if len(final) else 0)
    flags = np.zeros((len(GT_DEFINITIONS), len(methods), n_runs, len(qkeys), depth), dtype=bool)
    n_gt = np.zeros((len(GT_DEFINITIONS), len(qkeys)), dtype=np.int64)
    runs, apis, ranks = final["run"].to_numpy(), final["api_id"].tolist(), final["r"].to_numpy()
    for g, gt in enumerate(GT_DEFINITIONS):
        rels = [set() if v is None else set(v) for v in q[gt]]
        n_gt[g] = [len(r) for r in rels]
        rel = np.fromiter((a in rels[i] for a, i in zip(apis, q_idx.tolist(), strict=True)), dtype=bool,
                          count=len(final))
        for run in range(n_runs):
            take = rel & (runs == run)
            flags[g, m_idx[take], run, q_idx[take], ranks[take]] = True
    shared = set(result.deterministic)  # the provenance's deterministic methods
    groups = ground_truth_groups(q)
    return Evaluation(key, GT_DEFINITIONS, methods, n_runs, qkeys, q["subset"].to_numpy().astype(str), n_gt,
                      flags, tuple(m in shared for m in methods), np.array([groups[k] for k in qkeys]))


def evaluate(result) -> Evaluation:
    """The study's one evaluation, read from beside a stored study when its key matches, else computed."""
    key = evaluation_key(result)
    memo = result.__dict__.get("_evaluation")
    if memo is not None and memo.key == key:
        return memo
    folder = getattr(result, "folder", None)
    path = Path(folder) / EVAL_DIR / "evaluation.npz" if folder else None
    ev = Evaluation.load(path, key) if path is not None else None
    if ev is None:
        ev = _compute(result, key)
        if path is not None:
            try:
                ev.save(path)
            except OSError as exc:  # a read-only run folder: the evaluation is still used
                log.warning("could not store the evaluation in %s (%s)", path, exc)
    result.__dict__["_evaluation"] = ev
    return ev


def found_apis(result, ev: Evaluation | None = None) -> pd.DataFrame:
    """``method, run, gt, qkey, api_id, rank``: the ground-truth APIs each final ranking holds, at their rank
    among its distinct APIs, as the study's evaluation (``ev``, read if not given) marks them."""
    ev = evaluate(result) if ev is None else ev
    final, m_idx, q_idx = _distinct(result, ev.methods, ev.qkeys)
    at = (m_idx, final["run"].to_numpy(dtype=np.int64), q_idx, final["r"].to_numpy())
    found = pd.concat([final[ev.flags[g][at]].assign(gt=gt) for g, gt in enumerate(ev.gts)])
    return found.assign(rank=found["r"] + 1)[["method", "run", "gt", "qkey", "api_id", "rank"]]


def per_query_runs(result, k: int, gt: str = DEFAULT_GT,
                   metrics: Sequence[str] = ("recall", "precision")) -> pd.DataFrame:
    """Metrics at ``k`` per query, method and run of a study (:meth:`Evaluation.scores`)."""
    return evaluate(result).scores(k, gt, metrics)


