"""Descriptive statistics of the processed dataset (:class:`~toolbench_lib.data.dataset.Dataset`, never a
study run): the registry, its documents and the ground truth."""

from __future__ import annotations

from collections.abc import Sequence

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from ..config import K
from ..data.dataset import Dataset
from ..data.queries import GT_DEFINITIONS, clusters, resolve_subset, subset_alias
from ..data.registry import DOC_TEXT_MAX_CHARS
from .intervals import with_ci
from .style import LEGEND_SIZE

GT_PAIR_COLUMNS = {"candidates": ("n_candidate_pairs", "unresolved_candidates"),
                   "relevant": ("n_relevant_pairs", "unresolved_relevant")}


def dataset_provenance(ds: Dataset) -> str:
    """One line naming the data a table was computed from."""
    return f"data {ds.fingerprint} from {ds.data_dir}, registry {len(ds.registry)} APIs"


def _queries(ds: Dataset, subsets: Sequence[str] | None) -> pd.DataFrame:
    """The dataset's queries of ``subsets`` (all sets when None), in the given or stored order."""
    q = ds.queries
    names = [resolve_subset(s) for s in subsets] if subsets is not None else list(dict.fromkeys(q["subset"]))
    q = q[q["subset"].isin(names)]
    return q.assign(_order=q["subset"].map({n: i for i, n in enumerate(names)})).sort_values(
        "_order", kind="stable").drop(columns="_order")


def _share_table(counts: pd.Series, key: str) -> pd.DataFrame:
    out = counts.rename_axis(key).reset_index(name="n_apis")
    out["share"] = out["n_apis"] / out["n_apis"].sum()
    return out


def apis_per_category(ds: Dataset) -> pd.DataFrame:
    """``category, n_apis, share, n_tools``, largest category first (ties by name)."""
    reg = ds.registry
    counts = reg.groupby("category").size().sort_index().sort_values(ascending=False, kind="stable")
    out = _share_table(counts, "category")
    out["n_tools"] = out["category"].map(reg.groupby("category")["tool_key"].nunique()).astype(int)
    return out


def apis_by_source(ds: Dataset) -> pd.DataFrame:
    """``source, n_apis, share``: which source of the merge each registry API came from."""
    counts = ds.registry.groupby("source").size().sort_values(ascending=False, kind="stable")
    return _share_table(counts, "source")


def recall_ceiling(sizes: np.ndarray, k: int) -> float:
    """The best mean recall@k a perfect ranking can reach: mean of min(1, k / size) (0 for no truth)."""
    sizes = np.asarray(sizes, dtype=float)
    per_query = np.divide(k, sizes, out=np.zeros_like(sizes), where=sizes > 0).clip(max=1.0)
    return float(per_query.mean()) if sizes.size else float("nan")


def gt_sizes(ds: Dataset, subsets: Sequence[str] | None = None, k: int = K) -> pd.DataFrame:
    """Ground-truth APIs per query: ``subset, gt, n_queries, mean, median, min, max, n_empty``, the share
    of queries with more than ``k`` (``share_over_k``), :func:`recall_ceiling` and the mean's CI."""
    q = _queries(ds, subsets)
    rows = []
    for subset, part in q.groupby("subset", sort=False):
        for gt in GT_DEFINITIONS:
            sizes = part[gt].map(len).to_numpy()
            rows.append({"subset": subset_alias(subset), "gt": gt, "n_queries": int(len(sizes)),
                         "mean": float(sizes.mean()), "median": float(np.median(sizes)),
                         "min": int(sizes.min()), "max": int(sizes.max()), "n_empty": int((sizes == 0).sum()),
                         "k": k, "share_over_k": float((sizes > k).mean()),
                         "recall_ceiling": recall_ceiling(sizes, k)})
            with_ci(rows[-1], "mean", sizes, clusters(part))
    return pd.DataFrame(rows)


def gt_resolution(ds: Dataset, subsets: Sequence[str] | None = None) -> pd.DataFrame:
    """``subset, gt, n_pairs, resolved, unresolved, resolved_share``: a query's (tool, API) ground-truth
    entries and how many matched no registry id."""
    q = _queries(ds, subsets)
    rows = []
    for subset, part in q.groupby("subset", sort=False):
        for gt, (pairs_col, unresolved_col) in GT_PAIR_COLUMNS.items():
            n, bad = int(part[pairs_col].sum()), int(part[unresolved_col].sum())
            rows.append({"subset": subset_alias(subset), "gt": gt, "n_pairs": n, "resolved": n - bad,
                         "unresolved": bad, "resolved_share": (n - bad) / n if n else float("nan")})
    return pd.DataFrame(rows)


def doc_lengths(ds: Dataset) -> pd.Series:
    """Characters of every registry API's embedding text, in registry order."""
    return pd.Series([len(t) for t in ds.texts], index=ds.registry["api_id"], name="chars")


def doc_length_stats(ds: Dataset) -> pd.DataFrame:
    """``source, n_apis, mean, median, p05, p95, max, n_capped`` (documents cut at
    ``DOC_TEXT_MAX_CHARS``); the last row (``all``) pools sources."""
    lengths = pd.DataFrame({"source": ds.registry["source"].to_numpy(), "chars": doc_lengths(ds).to_numpy()})
    groups = [(s, g["chars"]) for s, g in lengths.groupby("source")] + [("all", lengths["chars"])]
    rows = [{"source": s, "n_apis": int(len(c)), "mean": float(c.mean()), "median": float(c.median()),
             "p05": float(c.quantile(0.05)), "p95": float(c.quantile(0.95)), "max": int(c.max()),
             "n_capped": int((c >= DOC_TEXT_MAX_CHARS).sum())} for s, c in groups]
    return pd.DataFrame(rows)


def category_figure(categories: pd.DataFrame, top: int = 15):
    """Horizontal bars of the ``top`` largest categories by number of APIs."""
    t = categories.head(top).iloc[::-1]
    fig, ax = plt.subplots(figsize=(6.5, 0.28 * len(t) + 1.2))
    ax.barh(t["category"], t["n_apis"], color="#4c72b0")
    for y, v in enumerate(t["n_apis"]):
        ax.text(v, y, f" {v:,}", va="center", fontsize="x-small")
    ax.set_xlabel("APIs")
    ax.set_title(f"APIs per category (top {len(t)} of {len(categories)})")
    fig.tight_layout()
    return fig


def doc_length_figure(lengths: pd.Series, bins: int = 60):
    """Histogram of document lengths in characters, with the cap marked."""
    fig, ax = plt.subplots(figsize=(6.5, 3.4))
    ax.hist(lengths.to_numpy(), bins=bins, color="#55a868")
    ax.axvline(DOC_TEXT_MAX_CHARS, color="black", linestyle="--", linewidth=1,
               label=f"cap ({DOC_TEXT_MAX_CHARS} chars)")
    ax.axvline(float(lengths.median()), color="#c44e52", linewidth=1, label="median")
    ax.set_xlabel("characters of the embedded text")
    ax.set_ylabel("APIs")
    ax.set_title("Document length")
    ax.legend(fontsize=LEGEND_SIZE)
    fig.tight_layout()
    return fig
