"""Record PtR stubs of a live backend for later replay, in an order that is useful when interrupted.

Stubs depend only on the query, so they need no registry, embeddings or index. Queries are taken in
rounds of ``chunk`` queries per set, interleaving the sets, and within a round every requested run, so a
recording stopped at any point covers the first N queries of every set in every run. Every call goes
through the durable call cache, so a rerun resumes where the last one stopped.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pandas as pd

from ..data.dataset import Dataset
from ..llm.base import LLMBackend
from ..retrieval.setup import select_queries
from .study import StudySettings, generate_stubs

log = logging.getLogger(__name__)


def recording_order(queries: pd.DataFrame, chunk: int) -> list[pd.DataFrame]:
    """Rounds of at most ``chunk`` queries of each set, sets interleaved, in query order."""
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    q = queries.assign(_pos=queries.groupby("subset", sort=False).cumcount())
    q = q.assign(_round=q["_pos"] // chunk)
    return [g.drop(columns=["_pos", "_round"]) for _, g in q.groupby("_round", sort=True)]


def record_stubs(llm: LLMBackend, ds: Dataset, subsets: Sequence[str], runs: Sequence[int],
                 chunk: int = 25, limit: int | None = None, settings: StudySettings | None = None) -> int:
    """Generate (and so record) the stubs of ``runs`` for the sets' queries; returns the calls made."""
    settings = settings or StudySettings()
    queries = select_queries(ds, list(subsets), limit)
    made = 0
    for i, part in enumerate(recording_order(queries, chunk)):
        for run in runs:
            _, calls = generate_stubs(llm, part, run, settings.temperature_of(run), progress=False)
            made += len(calls)
            log.info("round %d run %d: %d queries (%s)", i, run, len(part),
                     ", ".join(f"{s} {n}" for s, n in part["subset"].value_counts(sort=False).items()))
    return made
