"""The scale study: RtP and PtR on sub-registries of growing size (per size, seed and set, sampled by category
keeping the set's ground truth), top-k from the cached cosines; PtR is the mean over the study's runs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter
from tqdm.auto import tqdm

from ..config import K
from ..data.queries import DEFAULT_GT, check_gt, clusters, subset_alias
from ..eval.evaluation import hits_at
from ..retrieval.subregistry import sample_subregistry
from .intervals import with_ci
from .similarity import SimilarityCache, topk_columns
from .style import LEGEND_SIZE, METHOD_COLORS, METHOD_LABELS, SET_COLORS

KEEP_GT = ("candidates", "relevant", None)


@dataclass
class SubRegistry:
    """One sampled sub-registry: column positions in the similarity cache and how it was drawn (``seed``)."""

    cols: np.ndarray
    target_size: int
    note: str
    seed: int


def draw_subregistry(registry: pd.DataFrame, size: int | None, seed: int,
                     keep_ids: set[str]) -> SubRegistry:
    """Sample ``size`` rows of ``registry`` (its positions) keeping ``keep_ids``; ``None`` = all of it. When
    the kept APIs outnumber ``size``, the size is raised to their count and a note says so."""
    n = len(registry)
    if size is None or size >= n:
        return SubRegistry(np.arange(n), n if size is None else size,
                           "" if size is None or size == n else f"capped at the index size {n}", seed)
    n_keep = int(registry["api_id"].isin(keep_ids).sum())
    note = f"size raised from {size} to the {n_keep} ground-truth APIs it must hold" if n_keep > size else ""
    return SubRegistry(sample_subregistry(registry, max(size, n_keep), seed, keep_ids), size, note, seed)


def recall_precision(top: np.ndarray, gt_sets: list[set[int]], k: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-query recall (0 without ground truth) and precision at ``k`` of top-k column positions against
    ground-truth columns, from eval's one count (:func:`~toolbench_lib.eval.evaluation.hits_at`)."""
    hits = hits_at([row.tolist() for row in top], gt_sets, k)
    n_gt = np.array([len(g) for g in gt_sets])
    return np.divide(hits, n_gt, out=np.zeros(len(hits)), where=n_gt > 0), hits / k


def no_overlap(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row: True when the two top-k sets share no API."""
    return np.array([not set(x.tolist()) & set(y.tolist()) for x, y in zip(a, b, strict=True)], dtype=bool)


def non_identical(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Per row: True when the two top-k sets differ in at least one API (the looser reading of divergence)."""
    return np.array([set(x.tolist()) != set(y.tolist()) for x, y in zip(a, b, strict=True)], dtype=bool)


def gt_column_sets(cache: SimilarityCache, queries: pd.DataFrame, gt: str) -> list[set[int]]:
    """Ground truth of each query as cache columns; APIs outside the index count via placeholders."""
    lookup = {a: i for i, a in enumerate(cache.api_ids)}
    return [{lookup.get(a, -1 - j) for j, a in enumerate(dict.fromkeys(ids))} for ids in queries[gt]]


def scale_draws(cache: SimilarityCache, queries: pd.DataFrame, registry: pd.DataFrame,
                sizes: Sequence[int | None], seeds: Sequence[int], k: int, gt: str, keep_gt: str | None,
                runs: Sequence[int]):
    """Every sub-registry of the scale study (sizes, seeds, sets): ``(set, its queries, the draw, the kept
    ground truth's columns, RtP's top-k columns, PtR's per run, the ground truth as columns)``."""
    local = registry.iloc[cache.rows].reset_index(drop=True)
    per_subset = {}
    for subset in dict.fromkeys(queries["subset"]):
        sq = queries[queries["subset"] == subset]
        keep = cache.columns_of({a for ids in sq[check_gt(keep_gt)] for a in ids} if keep_gt else set())
        qpos = cache.query_positions(sq["qkey"].tolist())
        per_subset[subset] = (sq, keep, set(cache.api_ids[keep]), qpos, gt_column_sets(cache, sq, gt))
    for size in sizes:
        for seed in seeds if size is not None and size < cache.n_columns else [0]:
            for subset, (sq, keep, keep_ids, qpos, gt_sets) in per_subset.items():
                sub = draw_subregistry(local, size, seed, keep_ids)
                yield (subset, sq, sub, keep, topk_columns(cache.rtp[qpos], sub.cols, k)[0],
                       [topk_columns(cache.ptr[run][qpos], sub.cols, k)[0] for run in runs], gt_sets)


def scale_study(cache: SimilarityCache, queries: pd.DataFrame, registry: pd.DataFrame,
                sizes: Sequence[int | None], seeds: Sequence[int], k: int = K, gt: str = DEFAULT_GT,
                keep_gt: str | None = "candidates", runs: Sequence[int] | None = None,
                progress: bool = True) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``(scale, scale_divergence, divergence_queries)`` over :func:`scale_draws`, PtR averaged over ``runs``
    (default: all), divergence shares with clustered 95% intervals; ``divergence_queries``: each query's
    two readings per draw (disjoint, non-identical) and its cluster, for pooled intervals."""
    check_gt(gt)
    if keep_gt not in KEEP_GT:
        raise ValueError(f"keep_gt must be one of {KEEP_GT}")
    runs = list(cache.runs if runs is None else runs)
    draws = scale_draws(cache, queries, registry, sizes, seeds, k, gt, keep_gt, runs)
    scale_rows, div_rows, per_query_rows = [], [], []
    for subset, sq, sub, _, rtp_top, ptr_tops, gt_sets in tqdm(draws, desc="scale (size, seed, set)",
                                                               disable=not progress):
        base = {"size": len(sub.cols), "target_size": sub.target_size, "seed": sub.seed,
                "subset": subset_alias(subset)}
        extra = {"k": k, "n_queries": len(sq), "keep_gt": keep_gt, "note": sub.note}
        for method, tops in (("rtp", [rtp_top]), ("ptr", ptr_tops)):
            if tops:  # means over runs of the query means
                arr = np.array([[v.mean() for v in recall_precision(top, gt_sets, k)] for top in tops])
                scale_rows.append({**base, "method": method, "gt": gt, "recall": arr[:, 0].mean(),
                                   "precision": arr[:, 1].mean(), "n_runs": len(tops), **extra})
        if ptr_tops:
            per_query = np.mean([no_overlap(rtp_top, top) for top in ptr_tops], axis=0)  # mean over runs
            differ = np.mean([non_identical(rtp_top, top) for top in ptr_tops], axis=0)
            groups = clusters(queries, sq["qkey"])
            row = {**base, "no_overlap_share": float(per_query.mean()),
                   "non_identical_share": float(differ.mean()), "n_runs": len(ptr_tops), **extra}
            div_rows.append(with_ci(row, "no_overlap_share", per_query, groups))
            per_query_rows.append(pd.DataFrame({**base, "qkey": sq["qkey"].to_numpy(), "cluster": groups,
                                                "disjoint_share": per_query, "non_identical_share": differ}))
    per_query_table = (pd.concat(per_query_rows, ignore_index=True) if per_query_rows else
                       pd.DataFrame(columns=["size", "target_size", "seed", "subset", "qkey", "cluster",
                                             "disjoint_share", "non_identical_share"]))
    return pd.DataFrame(scale_rows), pd.DataFrame(div_rows), per_query_table


def scale_summary(scale: pd.DataFrame) -> pd.DataFrame:
    """Mean and standard deviation over seeds of recall per size, set and method (wide, for reading)."""
    out = scale.groupby(["subset", "method", "size"])["recall"].agg(recall_mean="mean", recall_std="std",
                                                                   n_seeds="size")
    return out.reset_index().fillna({"recall_std": 0.0})


def plot_scale_recall(scale: pd.DataFrame, k: int, claim: pd.DataFrame | None = None) -> plt.Figure:
    """Recall@k against sub-registry size (log x), one panel per set, spread over seeds; with ``claim``
    (``scale_claim``) a second row: PtR − RtP per size with its paired 95% CI (cluster-robust t)."""
    sets = list(dict.fromkeys(scale["subset"]))
    rows = 1 if claim is None else 2
    fig, axes = plt.subplots(rows, len(sets), figsize=(4.2 * len(sets), 3.8 if rows == 1 else 6.6),
                             sharey="row", sharex="col", squeeze=False, height_ratios=[3, 2][:rows])
    for ax, s in zip(axes[0], sets, strict=True):
        part = scale[scale["subset"] == s]
        sns.lineplot(part, x="size", y="recall", hue="method", palette=METHOD_COLORS, marker="o",
                     errorbar="sd", ax=ax, hue_order=[m for m in ("rtp", "ptr") if m in set(part["method"])])
        _size_axis(ax, part["size"])
        ax.set_title(s)
        ax.set_ylabel(f"recall@{k}" if ax is axes[0][0] else "")
        handles, labels = ax.get_legend_handles_labels()
        ax.get_legend().remove()
        if claim is not None:
            c = claim[claim["subset"].map(subset_alias) == subset_alias(s)].sort_values("size")
            gap = axes[1][list(sets).index(s)]
            gap.errorbar(c["size"], c["diff"], yerr=[c["diff"] - c["ci_low"], c["ci_high"] - c["diff"]],
                         marker="o", color="0.3", capsize=3, lw=1)
            gap.axhline(0, color="grey", lw=0.8)
            gap.set_ylabel("PtR − RtP (95% CI)" if s == sets[0] else "")
            _size_axis(gap, part["size"])
            ax.set_xlabel("")
    names = [METHOD_LABELS.get(lb, lb) for lb in labels]
    fig.legend(handles, names, loc="lower center", ncol=2, bbox_to_anchor=(0.5, -0.06) if rows == 1 else None,
               frameon=False)
    below = "" if rows == 1 else "; below: PtR − RtP, clustered 95% CI"
    fig.suptitle(f"Recall@{k} as the registry grows (bands: sd over seeds{below})")
    fig.tight_layout(rect=None if rows == 1 else (0, 0.05, 1, 1))
    return fig


def _size_axis(ax: plt.Axes, sizes: pd.Series) -> None:
    """Log-scaled x axis with a tick at every size, labelled in thousands."""
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(FixedLocator(sorted(set(sizes))))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v / 1000:.3g}k"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("APIs in the sub-registry (log scale)")


def plot_divergence(divergence: pd.DataFrame, k: int,
                    paper: dict[str, float] | None = None) -> plt.Figure:
    """Shares of queries whose RtP and PtR top-k sets are disjoint (solid) or differ at all (dashed) against
    size (log x), per set; ``paper`` values (``{"smallest": 0.88, "full": 0.98}``) as stars."""
    fig, ax = plt.subplots(figsize=(8.5, 3.8))
    readings = {"no_overlap_share": "disjoint", "non_identical_share": "non-identical"}
    long = divergence.melt(id_vars=["size", "subset"], value_vars=[c for c in readings if c in divergence],
                           var_name="reading", value_name="share").replace({"reading": readings})
    palette = {s: SET_COLORS.get(subset_alias(s), "0.4") for s in long["subset"].unique()}
    sns.lineplot(long, x="size", y="share", hue="subset", style="reading", marker="o", errorbar="sd",
                 palette=palette, ax=ax)
    sizes = sorted(divergence["size"].unique())
    marks = [(sizes[0] if where == "smallest" else sizes[-1], value) for where, value in (paper or {}).items()
             if sizes and value is not None]
    if marks:  # one legend entry for the paper's values
        ax.plot(*zip(*marks, strict=True), marker="*", markersize=12, color="black", linestyle="none",
                label="paper (smallest and full registry)" if len(marks) > 1 else "paper")
    ax.legend(fontsize=LEGEND_SIZE, loc="center left", bbox_to_anchor=(1.0, 0.5))
    _size_axis(ax, divergence["size"])
    ax.set_ylim(0, 1.02)
    ax.set_ylabel(f"queries whose top-{k} sets diverge")
    ax.set_title("Tool-selection divergence between RtP and PtR")
    fig.tight_layout()
    return fig
