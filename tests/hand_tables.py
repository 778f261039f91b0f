"""Studies written by hand in a compact form: one ``hits`` table of ``qkey, method, run, text_idx, rank, row,
api_id, score`` rows where ``text_idx = -1`` marks a query's final ranking (others a searched text's own)
and ``run = -1`` a deterministic method written once for every run. :func:`study_of_hits` turns such a table
into the study's ``rankings`` and ``text_rankings`` (every method in every run) and lists the deterministic
methods in the provenance, so a hand-made study reads as short as before."""

from __future__ import annotations

import pandas as pd

from toolbench_lib.study.stored import RANKINGS_COLUMNS, TEXT_RANKINGS_COLUMNS, StudyResult

HIT_COLUMNS = ["qkey", "method", "run", "text_idx", "rank", "row", "api_id", "score"]


def split_hits(hits: pd.DataFrame, runs: int) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """``(rankings, text_rankings, deterministic methods)`` of a compact hits table over ``runs`` runs."""
    if hits.empty:
        return (pd.DataFrame(columns=RANKINGS_COLUMNS), pd.DataFrame(columns=TEXT_RANKINGS_COLUMNS), [])
    every = hits["run"] == -1
    each = [hits[every].assign(run=r) for r in range(runs)]
    rows = pd.concat([hits[~every], *each], ignore_index=True).astype({"run": "int64"})
    final = rows["text_idx"] == -1
    return (rows.loc[final, RANKINGS_COLUMNS].reset_index(drop=True),
            rows.loc[~final, TEXT_RANKINGS_COLUMNS].reset_index(drop=True),
            list(dict.fromkeys(hits.loc[every, "method"])))


def study_of_hits(queries: pd.DataFrame, stubs: pd.DataFrame, hits: pd.DataFrame, plans: pd.DataFrame,
               calls: pd.DataFrame, provenance: dict | None = None) -> StudyResult:
    """The study of a compact hits table (runs: the provenance's ``settings.runs``, else 1)."""
    provenance = dict(provenance or {})
    runs = int(provenance.get("settings", {}).get("runs", 1))
    rankings, text_rankings, deterministic = split_hits(hits, runs)
    provenance.setdefault("deterministic", deterministic)
    return StudyResult(queries, stubs, rankings, text_rankings, plans, calls, provenance)


def with_tables(study: StudyResult, **tables: pd.DataFrame) -> StudyResult:
    """A copy of ``study`` with some tables (or the provenance) replaced."""
    parts = {name: getattr(study, name) for name in (*StudyResult.TABLES, "provenance")}
    return StudyResult(**{**parts, **tables})
