"""The explorer's scores: each method's recall per query (run, k, ground truth), the table's rows, and what
the view's queries share per selected method (where the ground truth sat, what only a stub found, wrong APIs
of a ground-truth API's tool, the common categories and tools, the best single architecture)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import numpy as np
import pandas as pd

from ..config import DEPTH
from ..eval.evaluation import found_apis
from ..retrieval.ltr_features import category_of, tool_of
from ..retrieval.retrievers import ARCHITECTURES, split_method
from .data import (
    ALL_SUBSETS,
    API_FILTERS,
    MEAN_RUNS,
    Summary,
    _ids,
    filter_outcomes,
    method_label,
    query_outcomes,
)

DIGEST_COLUMNS = ["method", "found", "missed_near", "missed_beyond", "stub_only", "wrong_siblings"]
TOP_NAMES = 3


def _share(n: Mapping[str, int], part: str, whole: str) -> float:
    return n[part] / n[whole] if n[whole] else float("nan")


class QueryScores:
    """Scores and the table's rows, as methods of :class:`~toolbench_lib.explorer.widget.QueryExplorer`."""

    @property
    def mean_of_runs(self) -> bool:
        """Whether the scores are the mean over every run (the report's basis) rather than one run's."""
        return self.run.value == MEAN_RUNS

    @property
    def depth(self) -> int:
        """The depth of the bound study's stored rankings (its settings; else the default)."""
        return int(self.result.provenance.get("settings", {}).get("depth", DEPTH))

    @property
    def shown_run(self) -> int:
        """The run whose rankings, stubs and plans are shown (the first under the mean of runs)."""
        return self._scored_runs()[0]

    def _scored_runs(self) -> list[int]:
        return self._study_runs if self.mean_of_runs else [int(self.run.value)]

    @property
    def methods(self) -> tuple[str, str]:
        """The two methods compared: ``(A, B)``."""
        return str(self.method_a.value), str(self.method_b.value)

    @property
    def selected(self) -> list[str]:
        """Every selected method: A, B, then the others picked."""
        return list(dict.fromkeys([*self.methods, *(str(m) for m in self.more.value)]))

    def _ranking_of(self, method: str, run: int) -> dict[str, list[str]]:
        if (method, run) not in self._rankings:
            self._rankings[(method, run)] = self.result.ranking(method, run)
        return self._rankings[(method, run)]

    def found(self, method: str) -> pd.DataFrame:
        """``qkey, api_id``: the ground-truth APIs of the method's top k (current run and ground truth; under
        the mean of runs, those of any run's top k, so "missed" means missed in every run)."""
        return pd.concat([self._found_in(method, r) for r in self._scored_runs()],
                         ignore_index=True).drop_duplicates(ignore_index=True)

    def _found_in(self, method: str, run: int) -> pd.DataFrame:
        k, gt = int(self.k.value), str(self.gt.value)
        if self.views is not None and (method, run, gt) in self.views._recall:  # views holding the method
            return self.views.found_at(method, run, gt, k)  # (empty where it found nothing)
        if self._found_apis is None:  # the study's found APIs, read from its evaluation
            self._found_apis = dict(tuple(found_apis(self.result).groupby(["method", "run", "gt"])))
        f = self._found_apis.get((method, run, gt), pd.DataFrame(columns=["qkey", "api_id", "rank"]))
        return f.loc[f["rank"] <= k, ["qkey", "api_id"]].reset_index(drop=True)

    def _method_scores(self, method: str) -> pd.DataFrame:
        """``<method>_recall, <method>_hits`` per query (study order): one run's, or the mean over runs."""
        if not self.mean_of_runs:
            return self._run_scores(method, int(self.run.value))
        key = (method, MEAN_RUNS, int(self.k.value), str(self.gt.value))
        if key not in self._scores:
            per_run = [self._run_scores(method, r) for r in self._study_runs]
            # rounded: the same runs' recalls summed in another order must tie, not win by 1e-16
            self._scores[key] = (sum(per_run[1:], per_run[0]) / len(per_run)).round(12)
        return self._scores[key]

    def _run_scores(self, method: str, run: int) -> pd.DataFrame:
        k, gt = int(self.k.value), str(self.gt.value)
        key = (method, run, k, gt)
        if key not in self._scores and self.views is not None and (method, run, gt) in self.views._recall:
            scores = self.views.scores(method, run, gt, k, self._base["qkey"])
            self._scores[key] = scores.add_prefix(f"{method}_")
        if key not in self._scores:
            pq = query_outcomes(self.result, run, k, gt, (method,))
            self._scores[key] = pq[[f"{method}_recall", f"{method}_hits"]]
        return self._scores[key]

    def _searched(self, term: str) -> np.ndarray:
        """Which queries (study order) the search term finds in their id, text, ground truth or the shown
        methods' top ``k``."""
        term = term.strip().lower()
        found = (self._lower.str.contains(term, regex=False).to_numpy()
                 | self._gt_text.str.contains(term, regex=False).to_numpy())
        k, run = int(self.k.value), self.shown_run
        keys = {q for m in dict.fromkeys(self.methods) for q, ids in self._ranking_of(m, run).items()
                if any(term in a.lower() for a in ids[:k])}
        return found | self._base["qkey"].isin(keys).to_numpy()

    def table_frame(self) -> pd.DataFrame:
        """The rows of the table for the current view (``a``, ``b``: the two methods' recall), sorted."""
        a, b = self.methods
        o = self._base.copy()  # then every selected method's <method>_recall, <method>_hits
        for method in self.selected:
            scores = self._method_scores(method)
            for column in scores:
                o[column] = scores[column].to_numpy()
        term = str(self.search.value).strip()
        if term:
            o = o[self._searched(term)]
        elif self.subset.value != ALL_SUBSETS:
            o = o[o["subset"] == self.subset.value]
        self._n_unfiltered = len(o)
        name = str(self.filter.value)
        found = {m: self.found(m) for m in self.selected} if name in API_FILTERS else None
        o = filter_outcomes(o, name, a, b, found=found, selected=self.selected)
        ra, rb = o[f"{a}_recall"].to_numpy(), o[f"{b}_recall"].to_numpy()
        winner = np.where(ra > rb, method_label(a), np.where(rb > ra, method_label(b), "tie"))
        frame = o[["qkey", "query_id", "subset", "text"]].reset_index(drop=True).assign(
            a=ra, b=rb, gap=ra - rb, abs_gap=np.abs(ra - rb), winner=winner, order=o["order"].to_numpy())
        column, desc = self._sort
        if column == "query":
            return frame.sort_values("order", ascending=not desc, kind="stable")
        # Ties keep study order, whichever the direction.
        return frame.sort_values([column, "order"], ascending=[not desc, True], kind="stable")

    def visible_queries(self) -> list[str]:
        """Query keys of the current view, in the table's order."""
        return self.table_frame()["qkey"].tolist()

    def informative_query(self, frame: pd.DataFrame) -> str | None:
        """The view's most informative query: the largest gap between the methods (first in study order)."""
        ranked = frame.sort_values(["abs_gap", "order"], ascending=[False, True], kind="stable")
        return None if frame.empty else str(ranked["qkey"].iloc[0])

    def summary(self, frame: pd.DataFrame | None = None) -> Summary:
        """The :class:`Summary` of the view's queries."""
        frame = self.table_frame() if frame is None else frame
        ra, rb, n = frame["a"].to_numpy(), frame["b"].to_numpy(), len(frame)
        return Summary(n, float(ra.mean()) if n else float("nan"), float(rb.mean()) if n else float("nan"),
                       int((ra > rb).sum()), int((ra == rb).sum()), int((rb > ra).sum()))

    def best_single(self) -> tuple[str | None, float]:
        """The single architecture (RtP or PtR with any retriever family) of best mean recall over the view's
        queries before the filter (the search's, else the subset's; ties: the first name in order) and that
        mean; ``(None, nan)`` when the study has none or the view no query."""
        term = str(self.search.value).strip()
        rows = self._searched(term) if term else (self._base["subset"] == self.subset.value).to_numpy() | (
            self.subset.value == ALL_SUBSETS)
        singles = sorted(m for m in self.result.methods if split_method(m)[0] in ARCHITECTURES)
        if not singles or not rows.any():
            return None, float("nan")
        means = {m: float(self._method_scores(m).iloc[rows, 0].mean()) for m in singles}
        best = max(singles, key=lambda m: (means[m], -singles.index(m)))
        return best, means[best]

    def digest(self, frame: pd.DataFrame) -> tuple[pd.DataFrame, tuple[list, list]]:
        """What the view's queries share: one row of :data:`DIGEST_COLUMNS` per selected method (shares of
        their ground-truth APIs over the scored runs; NaN where a share has nothing to count), and their
        ground truth's :data:`TOP_NAMES` most frequent categories and tools, with their counts."""
        keys, k, gt_name = frame["qkey"].tolist(), int(self.k.value), str(self.gt.value)
        gts = {q: set(_ids(self.queries.loc[q, gt_name])) for q in keys}
        rows = []
        for method in self.selected:
            stubs = "rtp" in self.result.methods and self._has_texts(method)  # stub_only: against RtP's top k
            n = dict.fromkeys(("gt", "found", "near", "beyond", "stub_only", "wrong", "siblings"), 0)
            for run in self._scored_runs():
                ranking = self._ranking_of(method, run)
                base = self._ranking_of("rtp", run) if stubs else {}
                for q in keys:
                    ids = list(dict.fromkeys(ranking.get(q, [])))
                    place = {a: p for p, a in enumerate(ids, 1)}
                    gt = gts[q]
                    tools = {tool_of(a) for a in gt}
                    shown_by_rtp = set(list(dict.fromkeys(base.get(q, [])))[:k])
                    n["gt"] += len(gt)
                    for a in gt:
                        where = place.get(a)
                        bucket = "beyond" if where is None else "found" if where <= k else "near"
                        n[bucket] += 1
                        n["stub_only"] += bucket == "found" and stubs and a not in shown_by_rtp
                    wrong = [a for a in ids[:k] if a not in gt]
                    n["wrong"] += len(wrong)
                    n["siblings"] += sum(tool_of(a) in tools for a in wrong)
            stub_only = _share(n, "stub_only", "found") if stubs else np.nan
            rows.append([method, *(_share(n, part, "gt") for part in ("found", "near", "beyond")), stub_only,
                         _share(n, "siblings", "wrong")])
        apis = [a for q in keys for a in sorted(gts[q])]
        return pd.DataFrame(rows, columns=DIGEST_COLUMNS), (
            Counter(category_of(a) for a in apis).most_common(TOP_NAMES),
            Counter(tool_of(a).split("/", 1)[-1] for a in apis).most_common(TOP_NAMES))
