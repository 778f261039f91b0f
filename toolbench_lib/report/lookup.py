"""Numbers read off a run's saved tables for the reading-group material: a table, row or column the run
did not save raises :class:`NotInRun`, whose message names it (and the notebook that saves it)."""

from __future__ import annotations

import math
from collections.abc import Callable

import pandas as pd

from ..data.queries import subset_alias
from .locate import TableCache

SETS = ("G1", "G2", "G3")
SAVED_BY = {"main_results": "02", "paired_tests": "02", "judge_validity": "02", "primary_endpoint": "02",
            "primary_endpoint_families": "12", "stub_stats": "06", "ablation_decomposition": "11",
            "ablation_stub_text": "11", "ablation_query_coupling": "11", "ablation_embedder": "11"}


class NotInRun(LookupError):
    """A table, or a row of it, that this run did not save."""


def rows(cache: TableCache | None, table: str, **where: str) -> pd.DataFrame:
    """The rows of a saved table equal to ``where`` (a set by its alias); :class:`NotInRun` without them (or
    without tables)."""
    df = cache.get(table) if cache is not None else None
    if df is None or df.empty:
        raise NotInRun(f"no `{table}` table (notebook {SAVED_BY.get(table, '?')} saves it)")
    for col, wanted in where.items():
        if col not in df:
            raise NotInRun(f"`{table}` has no {col} column")
        cells = df[col].astype(str)
        df = df[(cells.map(subset_alias) if col == "subset" else cells) == wanted]
    return df


def value(cache: TableCache | None, table: str, column: str, **where: str) -> float:
    """One number of a saved table: the first row equal to ``where``."""
    df = rows(cache, table, **where)
    if df.empty or column not in df:
        raise NotInRun(f"`{table}` has no {column} for " + ", ".join(f"{c} {v}" for c, v in where.items()))
    return float(pd.to_numeric(df[column], errors="coerce").iloc[0])


def architectures(cache: TableCache, table: str, column: str, **where: str) -> pd.Series:
    """``column`` of a table's RtP and PtR rows of G1-G3 (and ``where``), numbers only."""
    df = rows(cache, table, **where)
    keep = df["subset"].astype(str).map(subset_alias).isin(SETS) & df["method"].isin(["rtp", "ptr"]) \
        if {"subset", "method"} <= set(df) else pd.Series(False, index=df.index)
    found = pd.to_numeric(df.loc[keep, column], errors="coerce").dropna() if column in df else pd.Series()
    if found.empty:
        raise NotInRun(f"`{table}` has no {column} of RtP and PtR")
    return found


def per_set(make: Callable[[str], str]) -> str:
    """``make(set)`` for every set this run has; the last :class:`NotInRun` when none has."""
    parts, missing = [], NotInRun("no set")
    for s in SETS:
        try:
            parts.append(make(s))
        except NotInRun as exc:
            missing = exc
    if not parts:
        raise missing
    return "; ".join(parts)


def judge_rows(t: pd.DataFrame | None) -> pd.DataFrame | None:
    """The rows of ``judge_validity`` the report reads the judge and the pass rates from, wherever it says
    them: every plan of RtP and PtR, on the design sets that have both, by (subset, method); None without."""
    t = t[t["plans"] == "all"] if t is not None and "plans" in t else t  # every plan, not only both judges'
    if t is None or "method" not in t:
        return None
    t = t[t["method"].isin(["rtp", "ptr"])].set_index(["subset", "method"])
    sets = [s for s in SETS if (s, "rtp") in t.index and (s, "ptr") in t.index]
    return t.loc[sets] if sets else None


def solved_share(t: pd.DataFrame, evidence: str = "none") -> tuple[float, int]:
    """The judge's "Solved" share of the plans whose ground-truth evidence is ``evidence`` (none, some,
    all), pooled over ``judge_validity``'s rows, and how many plans that is."""
    n = t[f"evidence_{evidence}"].where(t[f"solved_rate_{evidence}"].notna(), 0)
    share = float((t[f"solved_rate_{evidence}"].fillna(0) * n).sum() / n.sum()) if n.sum() else math.nan
    return share, int(n.sum())
