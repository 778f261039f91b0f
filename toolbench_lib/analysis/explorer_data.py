"""The data side of the query explorer: method names, per-query outcomes and their filters, API labels,
the catalogue of stored studies and the link (URL) of an explorer view."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl

import numpy as np
import pandas as pd

from ..data.queries import DEFAULT_GT, check_gt
from ..eval.runs import score_rankings
from ..pipeline.study import StudyResult

FILTERS = ("all", "a_wins", "b_wins", "both_missed", "both_hit")
SHOW = ("both", "a", "b")
SORTS = ("query", "text", "a", "b", "gap", "abs_gap", "winner")
ALL_SUBSETS = "all"
SHORT_NAMES = {"rtp": "RtP", "ptr": "PtR"}
LONG_NAMES = {"rtp": "retrieve, then plan", "ptr": "plan, then retrieve"}
MAX_K = 20
PAGE_ROWS = 12
NO_PLAN = "no plan recorded for this query"
NO_QUERY = "no query matches this filter"
LABEL_COLUMNS = ["api_id", "tool_name", "api_name", "category"]
STATE_KEYS = ("run_name", "run", "subset", "filter", "a", "b", "show", "k", "gt", "search", "sort", "desc",
              "page", "query")

log = logging.getLogger(__name__)


def _ids(value) -> list[str]:
    """A stored list of registry ids (list, numpy array or None) as a Python list."""
    return [] if value is None else [str(v) for v in value]


def method_label(method: str, long: bool = False) -> str:
    """A method's shown name (``RtP``, ``PtR@bm25``, a fused method's own); ``long`` says what it is."""
    family, sep, rest = method.partition("@")
    short = SHORT_NAMES.get(family, family) + (f"@{rest}" if sep else "")
    if long and family in LONG_NAMES:
        return f"{short} ({LONG_NAMES[family]})"
    return short


def query_outcomes(result: StudyResult, run: int, k: int, gt: str = DEFAULT_GT,
                   methods: tuple[str, ...] | list[str] = ("rtp", "ptr"),
                   rankings: dict | None = None) -> pd.DataFrame:
    """Per query: ``qkey, subset`` and ``<method>_recall, <method>_hits`` at ``k`` for one run, scored by
    ranx (:func:`~toolbench_lib.eval.runs.score_rankings`) on the stored rankings.

    A deterministic method's rankings (RtP) are stored once and count for every run
    (``StudyResult.ranking`` decodes that). ``rankings`` may hold ``{(method, run): ranking}`` already read.
    """
    check_gt(gt)
    q = result.queries
    out = q[["qkey", "subset"]].copy()
    for method in methods:
        ranking = (rankings or {}).get((method, run))
        if ranking is None:
            ranking = result.ranking(method, run)
        pq = score_rankings(ranking, q, gt, k, ("recall",)).set_index("qkey")
        recall = out["qkey"].map(pq["recall"]).fillna(0.0).to_numpy()
        out[f"{method}_recall"] = recall
        out[f"{method}_hits"] = np.rint(recall * out["qkey"].map(pq["n_gt"]).fillna(0).to_numpy()).astype(int)
    return out


def filter_outcomes(outcomes: pd.DataFrame, name: str, a: str = "rtp", b: str = "ptr") -> pd.DataFrame:
    """The queries of one filter of methods ``a`` and ``b``: ``a_wins`` / ``b_wins`` compare recall,
    ``both_missed`` / ``both_hit`` look at its zeros."""
    ra, rb = outcomes[f"{a}_recall"], outcomes[f"{b}_recall"]
    masks = {"all": ra == ra, "a_wins": ra > rb, "b_wins": rb > ra,
             "both_missed": (ra == 0) & (rb == 0), "both_hit": (ra > 0) & (rb > 0)}
    if name not in masks:
        raise ValueError(f"unknown filter {name!r}; choose one of {FILTERS}")
    return outcomes[masks[name]]


def filter_labels(a: str, b: str) -> list[tuple[str, str]]:
    """The filter dropdown's ``(label, key)`` pairs for methods ``a`` and ``b``."""
    return [("all", "all"), (f"{method_label(a)} wins", "a_wins"), (f"{method_label(b)} wins", "b_wins"),
            ("both missed", "both_missed"), ("both hit", "both_hit")]


@dataclass(frozen=True)
class Summary:
    """Counts of the shown queries: mean recall of both methods, ``a`` wins, ties and ``b`` wins."""

    n: int
    mean_a: float
    mean_b: float
    a_wins: int
    ties: int
    b_wins: int


def summarise(outcomes: pd.DataFrame, a: str, b: str) -> Summary:
    """The :class:`Summary` of some queries' outcomes under methods ``a`` and ``b``."""
    ra, rb = outcomes[f"{a}_recall"].to_numpy(), outcomes[f"{b}_recall"].to_numpy()
    n = len(outcomes)
    return Summary(n, float(ra.mean()) if n else float("nan"), float(rb.mean()) if n else float("nan"),
                   int((ra > rb).sum()), int((ra == rb).sum()), int((rb > ra).sum()))


def api_labels(registry: pd.DataFrame | None) -> dict[str, str]:
    """``{api_id: "tool / API (category)"}`` from a registry table; empty without one."""
    if registry is None:
        return {}
    cols = zip(registry["api_id"], registry["tool_name"], registry["api_name"], registry["category"],
               strict=True)
    return {a: f"{t} / {n} ({c})" for a, t, n, c in cols}


def stored_registry(result: StudyResult, processed_dir: Path | None = None) -> pd.DataFrame | None:
    """Names of the APIs a study shows, read from the processed registry of its data fingerprint.

    Only the label columns of the ids in the study's hits and ground truth are read; None (ids shown
    alone) when that registry is not on this machine.
    """
    from ..data.paths import PROCESSED_DIR

    fp = result.provenance.get("data_fingerprint")
    path = (processed_dir or PROCESSED_DIR) / str(fp) / "registry.parquet"
    if not fp or not path.exists():
        log.info("no processed registry %s: API ids are shown without names", path)
        return None
    q = result.queries
    ids = set(result.hits["api_id"].astype(str))
    for column in ("candidates", "relevant"):
        ids.update(str(a) for v in q[column] for a in _ids(v))
    if len(result.plans) and "named_ids" in result.plans:
        ids.update(str(a) for v in result.plans["named_ids"] for a in _ids(v))
    return pd.read_parquet(path, columns=LABEL_COLUMNS, filters=[("api_id", "in", sorted(ids))])


def served_by_voila() -> bool:
    """Whether this kernel serves a Voilà page (Voilà names itself in ``SERVER_SOFTWARE``)."""
    return os.environ.get("SERVER_SOFTWARE", "").startswith("voila")


def page_query_string() -> str:
    """The query string of the page this kernel serves (Voilà's ``QUERY_STRING``); empty elsewhere."""
    return os.environ.get("QUERY_STRING", "") if served_by_voila() else ""


def run_name_of(query_string: str) -> str | None:
    """The ``run_name`` a link names, checked as a folder name; None when it names none.

    A name that is not a folder name raises :class:`~toolbench_lib.pipeline.validation.UsageError`.
    """
    from ..pipeline.validation import check_run_name

    value = dict(parse_qsl(query_string or "")).get("run_name")
    return check_run_name(value) if value else None

