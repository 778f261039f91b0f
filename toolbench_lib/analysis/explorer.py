"""An interactive per-query view of a stored study: find, sort and compare queries under any two methods.

:class:`QueryExplorer` holds its controls as attributes (``subset``, ``filter``, ``run``, ``k``, ``gt``,
``method_a``, ``method_b``, ``show``, ``search``, ``query``) and shows, for the queries of the current
subset and filter (or of a search, over every subset):

- a summary line (``count``): how many queries, the mean recall@k of both methods, wins, ties and losses;
- a sortable table (``table``): query id, text, both methods' recall, their gap and the winner; a header
  click sorts by its column (again: the other way), a row's button shows that query;
- the selected query (``output``, an ``ipywidgets.HTML``; ``render()`` returns the same HTML): what the
  user asked, its ground truth, and each shown method's ranking, stubs and plan.

The methods are any two of the stored study (``StudyResult.methods``: RtP, PtR, fused methods, other
retriever families). A filter's first query is its most informative one: the largest gap. Scores come from
the one scorer (:func:`~toolbench_lib.eval.runs.score_rankings`, ranx) on the stored rankings cut at ``k``
(never a new retrieval). The whole view is a state (:meth:`QueryExplorer.state`), written as a query string
(:meth:`QueryExplorer.state_query`, the ``link`` shown under the controls) and read back from one
(:meth:`QueryExplorer.apply_state`), so a link opens the same view; served by Voilà, the page's address
follows the view.

:meth:`QueryExplorer.from_run` opens the study a run stored (``outputs/<run>/runs/<key>/``) from its
tables alone, without an embedder or an index. Displayed in a notebook, the explorer is one output
holding both the live widget and a static HTML rendering of what it shows: a frontend with a live kernel
shows the widget, an exported copy (nbconvert, ``report.html``) the static rendering.
"""

from __future__ import annotations

import html
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qsl, quote, urlencode

import ipywidgets as widgets
import numpy as np
import pandas as pd

from ..data.queries import DEFAULT_GT, GT_DEFINITIONS, check_gt, subset_alias
from ..eval.runs import score_rankings
from ..pipeline.study import MERGED, StoredStudyError, StudyResult

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

STYLE = """<style>
.qx {font-family: sans-serif; font-size: 13px; line-height: 1.35; max-width: 100%}
.qx .cols {display: flex; gap: 24px; align-items: flex-start}
.qx .col {flex: 1 1 0; min-width: 0}
.qx code, .qx li, .qx td, .qx blockquote {overflow-wrap: anywhere; word-break: break-word;
  white-space: normal}
.qx .prov {font-size: 11px}
.qx li.hit, .qx li.stub-hit, .qx li.named-hit {color: #1a7f37; font-weight: bold}
.qx .tag {font-size: 11px; padding: 0 4px; border-radius: 3px; background: #eee; margin-left: 4px}
.qx .tag.active {background: #cfe8d6}
.qx .muted {color: #777}
.qx table.steps td, .qx table.steps th {padding: 2px 6px; text-align: left; vertical-align: top}
.qx table.qtable {border-collapse: collapse; width: 100%; table-layout: fixed}
.qx table.qtable td, .qx table.qtable th {padding: 2px 6px; text-align: left; border-bottom: 1px solid #eee}
.qx table.qtable .num {text-align: right; font-variant-numeric: tabular-nums}
.qx-row .widget-html, .qx-row .widget-html-content {min-width: 0; width: 100%; overflow: hidden}
.qx-rowcells {display: flex; gap: 0; font-family: sans-serif; font-size: 13px; align-items: center;
  width: 100%; min-width: 0}
.qx-rowcells span {padding: 0 6px; overflow: hidden; text-overflow: ellipsis; white-space: nowrap;
  flex: 0 0 auto; box-sizing: border-box}
.qx-rowcells .num {text-align: right; font-variant-numeric: tabular-nums}
.qx-rowcells .pos {color: #1a7f37} .qx-rowcells .neg {color: #b42318}
</style>"""

# Column widths (px) of the table, shared by its header buttons and its rows.
MARGINS = 4  # a header button's margins (2 px either side), which a row's cell spans as well
WIDTHS = {"query": 96, "subset": 52, "text": 0, "a": 104, "b": 104, "gap": 84, "winner": 104}


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


class QueryExplorer:
    """Browse a study query by query: find, filter, sort and compare any two methods' rankings.

    ``setup`` is only used for its registry (API names); pass ``registry`` instead to go without one.
    ``run_name`` names the run in links; ``url_sync`` makes the page's address follow the view (Voilà).
    """

    def __init__(self, setup=None, result: StudyResult | None = None, k: int = 5, gt: str = DEFAULT_GT,
                 registry: pd.DataFrame | None = None, source: str | None = None, run_name: str | None = None,
                 url_sync: bool = False):
        if result is None:
            raise ValueError("QueryExplorer needs a StudyResult")
        check_gt(gt)
        methods = list(result.methods)
        if not methods:
            raise ValueError("the study has no method with rankings to explore")
        self.result = result
        self.source = source
        self.run_name = run_name
        self.url_sync = url_sync
        if registry is None and setup is not None:
            registry = setup.ds.registry
        self.labels = api_labels(registry)
        q = result.queries
        self.queries = q.set_index("qkey", drop=False)
        self._base = pd.DataFrame({
            "qkey": q["qkey"].to_numpy(), "subset": q["subset"].map(subset_alias).to_numpy(),
            "query_id": q["query_id"].astype(str).to_numpy(), "text": q["query"].astype(str).to_numpy(),
            "order": np.arange(len(q))})
        self._lower = (self._base["query_id"] + "\n" + self._base["text"]).str.lower()
        self._gt_text = pd.Series(
            ["\n".join(_ids(c) + _ids(r)).lower()
             for c, r in zip(q["candidates"], q["relevant"], strict=True)],
            index=q.index)
        self._rankings: dict[tuple[str, int], dict[str, list[str]]] = {}
        self._scores: dict[tuple[str, int, int, str], pd.DataFrame] = {}
        self._hits_by_query: dict[str, pd.DataFrame] | None = None
        self._texts: dict[str, bool] = {}
        self._updating = False
        self._sort = ("abs_gap", True)
        self._page = 0
        self._rows_shown: list[str] = []
        self._last_options: tuple = ()
        self.problems: list[str] = []

        a = "rtp" if "rtp" in methods else methods[0]
        b = "ptr" if "ptr" in methods else methods[min(1, len(methods) - 1)]
        subsets = list(dict.fromkeys(self._base["subset"]))
        runs = self._runs()
        depth = int(result.provenance.get("settings", {}).get("depth", MAX_K))
        style = {"description_width": "initial"}
        self.subset = widgets.Dropdown(options=[*subsets, ALL_SUBSETS], value=subsets[0] if subsets else None,
                                       description="Subset", style=style,
                                       layout=widgets.Layout(width="150px"))
        self.filter = widgets.Dropdown(options=filter_labels(a, b), value="all", description="Filter",
                                       style=style, layout=widgets.Layout(width="220px"))
        self.run = widgets.Dropdown(options=runs, value=runs[0], description="Run", style=style,
                                    layout=widgets.Layout(width="110px"))
        self.k = widgets.IntSlider(value=min(k, depth), min=1, max=min(MAX_K, depth), description="k",
                                   style=style, layout=widgets.Layout(width="260px"))
        self.gt = widgets.ToggleButtons(options=list(GT_DEFINITIONS), value=gt, description="Ground truth",
                                        style={**style, "button_width": "90px"})
        options = [(method_label(m), m) for m in methods]
        self.method_a = widgets.Dropdown(options=options, value=a, description="Method A", style=style,
                                         layout=widgets.Layout(width="230px"))
        self.method_b = widgets.Dropdown(options=options, value=b, description="Method B", style=style,
                                         layout=widgets.Layout(width="230px"))
        self.show = widgets.ToggleButtons(options=self._show_options(a, b), value="both", description="Show",
                                          style={**style, "button_width": "110px"})
        self.search = widgets.Text(value="", placeholder="query text, query id or API id (Enter)",
                                   description="Search", continuous_update=False, style=style,
                                   layout=widgets.Layout(width="420px"))
        self.query = widgets.Dropdown(options=[], description="Query", style=style,
                                      layout=widgets.Layout(width="70%"))
        self.count = widgets.HTML()
        self.link = widgets.HTML()
        self.message = widgets.HTML()
        self.output = widgets.HTML(layout=widgets.Layout(width="100%"))
        self.provenance = widgets.HTML(self._provenance_html())
        self._js = widgets.Output(layout=widgets.Layout(display="none"))
        self.header = {c: widgets.Button(description="", tooltip=f"sort by {c}", layout=self._cell_layout(c))
                       for c in ("query", "subset", "text", "a", "b", "gap", "winner")}
        for column, button in self.header.items():
            button.add_class(f"qx-sort-{column}")
            button.on_click(lambda _b, c=column: self.sort_by(c))
        self.row_buttons = [widgets.Button(layout=self._cell_layout("query")) for _ in range(PAGE_ROWS)]
        self.row_cells = [widgets.HTML(layout=widgets.Layout(flex="1 1 0%", width="auto", min_width="0"))
                          for _ in range(PAGE_ROWS)]
        self.rows = []
        for i, (button, cells) in enumerate(zip(self.row_buttons, self.row_cells, strict=True)):
            button.on_click(lambda _b, i=i: self._pick_row(i))
            row = widgets.HBox([button, cells], layout=widgets.Layout(width="100%"))
            row.add_class("qx-row")
            self.rows.append(row)
        self.prev_page = widgets.Button(description="◀ previous", layout=widgets.Layout(width="110px"))
        self.next_page = widgets.Button(description="next ▶", layout=widgets.Layout(width="110px"))
        self.prev_page.on_click(lambda _b: self.turn_page(-1))
        self.next_page.on_click(lambda _b: self.turn_page(1))
        self.page_label = widgets.HTML()
        for name in ("subset", "filter", "run", "k", "method_a", "method_b", "show", "gt", "search", "query",
                     "count", "output", "provenance", "link", "message", "page_label", "prev_page",
                     "next_page"):
            getattr(self, name).add_class(f"qx-{name.replace('_', '-')}")
        for control in (self.subset, self.filter, self.run, self.k, self.gt, self.search):
            control.observe(self._on_selection_change, names="value")
        for control in (self.method_a, self.method_b):
            control.observe(self._on_methods_change, names="value")
        self.query.observe(self._on_query_change, names="value")
        self.show.observe(self._on_view_change, names="value")
        header = widgets.HBox(list(self.header.values()), layout=widgets.Layout(width="100%"))
        pager = widgets.HBox([self.prev_page, self.next_page, self.page_label])
        self.table = widgets.VBox([header, *self.rows, pager],
                                  layout=widgets.Layout(width="100%"))
        self.table.add_class("qx-table")
        wrap = widgets.Layout(flex_flow="row wrap")
        self.widget = widgets.VBox([
            widgets.HBox([self.subset, self.filter, self.run, self.k], layout=wrap),
            widgets.HBox([self.method_a, self.method_b, self.gt], layout=wrap),
            widgets.HBox([self.search, self.count], layout=widgets.Layout(flex_flow="row wrap",
                                                                          align_items="center")),
            self.message,
            self.table,
            widgets.HBox([self.query, self.link], layout=widgets.Layout(align_items="center")),
            self.show,
            self.output,
            self.provenance,
            self._js,
        ], layout=widgets.Layout(width="100%"))
        self.widget.add_class("query-explorer")
        self._refresh()

    @classmethod
    def from_run(cls, run_name: str = "default", study: str | None = None, k: int = 5, gt: str = DEFAULT_GT,
                 outputs_dir: str | Path | None = None, processed_dir: Path | None = None,
                 url_sync: bool = False) -> QueryExplorer:
        """The explorer of the study stored for a run, from its tables alone (no embedder, no index).

        ``study`` picks one stored study by key when the run holds several; by default it is the one the
        run record names. Nothing is computed or written.
        """
        from ..pipeline.experiment import stored_study_dir

        folder = stored_study_dir(run_name, study, outputs_dir)
        result = StudyResult.load(folder)
        return cls(None, result, k=k, gt=gt, registry=stored_registry(result, processed_dir),
                   source=f"{run_name}/{folder.parent.name}/{folder.name}", run_name=run_name,
                   url_sync=url_sync)

    @classmethod
    def for_page(cls, run_name: str = "default", study: str | None = None, k: int = 5,
                 gt: str = DEFAULT_GT) -> QueryExplorer | widgets.HTML:
        """The explorer a page asks for: the run its link names (else ``run_name``), in the view the link
        describes; served by Voilà, the page's address then follows the view. A run with no readable
        stored study gives a one-line page saying so (never a traceback)."""
        qs = page_query_string()
        try:
            named = run_name_of(qs)
        except ValueError as exc:
            named, problem = None, f"link: ignored run_name ({exc})"
        else:
            problem = None
        try:
            explorer = cls.from_run(named or run_name, study=study, k=k, gt=gt, url_sync=served_by_voila())
        except (FileNotFoundError, StoredStudyError, KeyError, ValueError) as exc:
            line = " ".join(str(exc).split()) or type(exc).__name__
            return widgets.HTML(f"<p class='qx-error' role='alert'>explorer: {html.escape(line)}</p>")
        explorer.apply_state(qs)
        if problem:
            explorer.problems.insert(0, problem)
            explorer._show_problems()
        return explorer

    def _provenance_html(self) -> str:
        from ..pipeline.experiment import provenance_line

        where = f"; stored in outputs/{html.escape(self.source)}" if self.source else ""
        return (f"<div class='qx'><p class='muted prov'>{html.escape(provenance_line(self.result))}"
                f"{where}</p></div>")

    @staticmethod
    def _cell_layout(column: str) -> widgets.Layout:
        width = WIDTHS[column]
        if not width:
            return widgets.Layout(flex="1 1 0%", width="auto", min_width="0")
        return widgets.Layout(width=f"{width}px", flex="0 0 auto")

    @staticmethod
    def _show_options(a: str, b: str) -> list[tuple[str, str]]:
        return [("both", "both"), (f"{method_label(a)} only", "a"), (f"{method_label(b)} only", "b")]

    # -- scores ----------------------------------------------------------------------------------

    def _runs(self) -> list[int]:
        runs = sorted(int(r) for r in self.result.hits["run"].unique() if int(r) >= 0)
        if not runs:
            runs = list(range(max(1, self.result.n_runs)))
        return runs

    @property
    def methods(self) -> tuple[str, str]:
        """The two methods compared: ``(A, B)``."""
        return str(self.method_a.value), str(self.method_b.value)

    def _method_scores(self, method: str) -> pd.DataFrame:
        run, k, gt = int(self.run.value), int(self.k.value), str(self.gt.value)
        key = (method, run, k, gt)
        if key not in self._scores:
            if (method, run) not in self._rankings:
                self._rankings[(method, run)] = self.result.ranking(method, run)
            pq = query_outcomes(self.result, run, k, gt, (method,), rankings=self._rankings)
            self._scores[key] = pq[[f"{method}_recall", f"{method}_hits"]]
        return self._scores[key]

    def outcomes(self) -> pd.DataFrame:
        """Per query (study order): ``qkey, subset`` (alias), ``query_id, text`` and both methods'
        ``<method>_recall, <method>_hits`` for the current run, ``k`` and ground truth."""
        out = self._base.copy()
        for method in dict.fromkeys(self.methods):
            scores = self._method_scores(method)
            for column in scores:
                out[column] = scores[column].to_numpy()
        return out

    def _searched(self, term: str) -> np.ndarray:
        """Which queries (study order) the search term finds in their id, text, ground truth or the shown
        methods' top ``k``."""
        term = term.strip().lower()
        found = (self._lower.str.contains(term, regex=False).to_numpy()
                 | self._gt_text.str.contains(term, regex=False).to_numpy())
        k, run = int(self.k.value), int(self.run.value)
        keys = set()
        for method in dict.fromkeys(self.methods):
            if (method, run) not in self._rankings:
                self._rankings[(method, run)] = self.result.ranking(method, run)
            ranking = self._rankings[(method, run)]
            keys.update(q for q, ids in ranking.items() if any(term in a.lower() for a in ids[:k]))
        return found | self._base["qkey"].isin(keys).to_numpy()

    def table_frame(self) -> pd.DataFrame:
        """The rows of the table for the current view, sorted: ``qkey, query_id, subset, text, a, b, gap,
        abs_gap, winner, order``."""
        a, b = self.methods
        o = self.outcomes()
        term = str(self.search.value).strip()
        if term:
            o = o[self._searched(term)]
        elif self.subset.value != ALL_SUBSETS:
            o = o[o["subset"] == self.subset.value]
        o = filter_outcomes(o, str(self.filter.value), a, b)
        ra, rb = o[f"{a}_recall"].to_numpy(), o[f"{b}_recall"].to_numpy()
        frame = pd.DataFrame({"qkey": o["qkey"].to_numpy(), "query_id": o["query_id"].to_numpy(),
                              "subset": o["subset"].to_numpy(), "text": o["text"].to_numpy(),
                              "a": ra, "b": rb,
                              "gap": ra - rb, "abs_gap": np.abs(ra - rb),
                              "winner": np.where(ra > rb, method_label(a), np.where(rb > ra, method_label(b),
                                                                                     "tie")),
                              "order": o["order"].to_numpy()})
        column, desc = self._sort
        if column == "query":
            return frame.sort_values("order", ascending=not desc, kind="stable")
        by = "text" if column == "text" else column
        # Ties keep study order, whichever the direction.
        return frame.sort_values([by, "order"], ascending=[not desc, True], kind="stable")

    def visible_queries(self) -> list[str]:
        """Query keys of the current view, in the table's order."""
        return self.table_frame()["qkey"].tolist()

    def informative_query(self, frame: pd.DataFrame | None = None) -> str | None:
        """The view's most informative query: the largest gap between the methods (first in study order)."""
        frame = self.table_frame() if frame is None else frame
        if frame.empty:
            return None
        ranked = frame.sort_values(["abs_gap", "order"], ascending=[False, True], kind="stable")
        return str(ranked["qkey"].iloc[0])

    def summary(self, frame: pd.DataFrame | None = None) -> Summary:
        """The :class:`Summary` of the view's queries."""
        frame = self.table_frame() if frame is None else frame
        return summarise(frame.rename(columns={"a": "a_recall", "b": "b_recall"}), "a", "b")

    # -- state -----------------------------------------------------------------------------------

    def state(self) -> dict[str, str]:
        """The view as strings: run name, run, subset, filter, methods, k, ground truth, search, sort,
        page and query (its key)."""
        column, desc = self._sort
        out = {"run_name": self.run_name, "run": str(self.run.value), "subset": str(self.subset.value),
               "filter": str(self.filter.value), "a": self.methods[0], "b": self.methods[1],
               "show": str(self.show.value), "k": str(self.k.value), "gt": str(self.gt.value),
               "search": str(self.search.value), "sort": column, "desc": "1" if desc else "0",
               "page": str(self._page + 1), "query": self.query.value}
        return {key: value for key, value in out.items() if value not in (None, "")}

    def state_query(self) -> str:
        """The view as a URL query string (``run=0&subset=G2&...``)."""
        return urlencode(self.state(), quote_via=quote, safe=":@")

    def apply_state(self, query_string: str | dict) -> list[str]:
        """Open the view a query string (or dict) describes; what cannot be used is left as it is and
        listed, one line each (also shown above the table)."""
        given = dict(parse_qsl(query_string)) if isinstance(query_string, str) else dict(query_string)
        problems = [f"link: ignored {key}={value!r} (not a setting of the explorer)"
                    for key, value in given.items() if key not in STATE_KEYS]
        self._updating = True
        try:
            methods = self.method_a.options
            names = [value for _, value in methods]
            for key, control in (("a", self.method_a), ("b", self.method_b)):
                if key in given:
                    if given[key] in names:
                        control.value = given[key]
                    else:
                        problems.append(f"link: ignored {key}={given[key]!r} (the study's methods: "
                                        f"{', '.join(names)})")
            self._relabel()
            choices = {"run": self.run, "subset": self.subset, "filter": self.filter, "show": self.show,
                       "gt": self.gt}
            for key, control in choices.items():
                if key not in given:
                    continue
                allowed = [str(v if not isinstance(v, tuple) else v[1]) for v in control.options]
                if given[key] in allowed:
                    control.value = int(given[key]) if control is self.run else given[key]
                else:
                    problems.append(f"link: ignored {key}={given[key]!r} (one of {', '.join(allowed)})")
            if "k" in given:
                try:
                    value = int(given["k"])
                    if not self.k.min <= value <= self.k.max:
                        raise ValueError
                    self.k.value = value
                except ValueError:
                    problems.append(f"link: ignored k={given['k']!r} (a whole number from {self.k.min} to "
                                    f"{self.k.max})")
            if "search" in given:
                self.search.value = given["search"][:200]
            if "sort" in given:
                if given["sort"] in SORTS:
                    self._sort = (given["sort"], given.get("desc", "1") != "0")
                else:
                    problems.append(f"link: ignored sort={given['sort']!r} (one of {', '.join(SORTS)})")
        finally:
            self._updating = False
        wanted = given.get("query")
        if wanted is not None and wanted not in self.queries.index:
            problems.append(f"link: ignored query={wanted!r} (no such query in this study)")
            wanted = None
        self._refresh(prefer=wanted)
        if wanted is not None and self.query.value != wanted:
            self.select(wanted)
        if "page" in given and wanted is None:
            try:
                self.turn_page(int(given["page"]) - 1 - self._page)
            except ValueError:
                problems.append(f"link: ignored page={given['page']!r} (a page number)")
        self.problems = problems
        self._show_problems()
        return problems

    def _show_problems(self) -> None:
        self.message.value = "".join(f"<div class='qx'><p class='muted'>{html.escape(p)}</p></div>"
                                     for p in self.problems)

    # -- events ----------------------------------------------------------------------------------

    def _relabel(self) -> None:
        """The filter and show options named after the current methods (their values kept)."""
        a, b = self.methods
        keep_filter, keep_show = self.filter.value, self.show.value
        was = self._updating
        self._updating = True
        try:
            self.filter.options = filter_labels(a, b)
            self.filter.value = keep_filter
            self.show.options = self._show_options(a, b)
            self.show.value = keep_show
        finally:
            self._updating = was

    def _on_methods_change(self, _change) -> None:
        if self._updating:
            return
        self._relabel()
        self._refresh()

    def _on_selection_change(self, _change) -> None:
        if not self._updating:
            self._refresh()

    def _on_query_change(self, _change) -> None:
        if self._updating:
            return
        self._follow_query()
        self._draw_table(self._frame)
        self.output.value = self.render()
        self._sync_url()

    def _on_view_change(self, _change) -> None:
        if not self._updating:
            self.output.value = self.render()
            self._sync_url()

    def sort_by(self, column: str) -> None:
        """Sort the table by a column; the same column again reverses it. The gap column cycles through
        the largest gap either way, A ahead first, and B ahead first."""
        current, desc = self._sort
        if column == "gap":
            cycle = [("abs_gap", True), ("gap", True), ("gap", False)]
            self._sort = cycle[(cycle.index(self._sort) + 1) % 3] if self._sort in cycle else cycle[0]
        elif column == current:
            self._sort = (column, not desc)
        else:
            self._sort = (column, column in ("a", "b"))
        self._frame = self.table_frame()
        self._page = 0
        self._follow_query()
        self._draw_table(self._frame)
        self._set_query_options(self._frame)
        self._sync_url()

    def turn_page(self, step: int) -> None:
        """Show the table's next (``1``) or previous (``-1``) page of rows."""
        pages = max(1, -(-len(self._frame) // PAGE_ROWS))
        self._page = min(max(0, self._page + step), pages - 1)
        self._draw_table(self._frame)
        self._sync_url()

    def _pick_row(self, i: int) -> None:
        if i < len(self._rows_shown):
            self.query.value = self._rows_shown[i]

    def _follow_query(self) -> None:
        """Turn to the page holding the selected query (if the view holds it)."""
        keys = self._frame["qkey"].tolist()
        if self.query.value in keys:
            self._page = keys.index(self.query.value) // PAGE_ROWS

    def _set_query_options(self, frame: pd.DataFrame) -> None:
        options = tuple((f"{qid}: {text[:90]}{'…' if len(text) > 90 else ''}", key)
                        for key, qid, text in zip(frame["qkey"], frame["query_id"], frame["text"],
                                                  strict=True))
        if options != self._last_options:
            self._last_options = options
            was = self._updating
            self._updating = True
            try:
                previous = self.query.value
                self.query.options = options
                keys = [key for _, key in options]
                self.query.value = previous if previous in keys else None
            finally:
                self._updating = was

    def _refresh(self, prefer: str | None = None) -> None:
        """Recompute the view after a change of its queries: rows, summary, the query shown, the page."""
        self._frame = self.table_frame()
        keys = self._frame["qkey"].tolist()
        previous = self.query.value
        self._set_query_options(self._frame)
        if prefer in keys:
            chosen = prefer
        elif previous in keys:
            chosen = previous
        else:
            chosen = self.informative_query(self._frame)
        self._updating = True
        try:
            self.query.value = chosen
        finally:
            self._updating = False
        self._page = keys.index(chosen) // PAGE_ROWS if chosen in keys else 0
        self._draw_summary(self._frame)
        self._draw_table(self._frame)
        self.output.value = self.render()
        self._sync_url()

    # -- the table and the summary ---------------------------------------------------------------

    def _scope(self) -> str:
        term = str(self.search.value).strip()
        if term:
            return f"matching “{html.escape(term)}” in all subsets"
        if self.subset.value == ALL_SUBSETS:
            return "in all subsets"
        return f"in {html.escape(str(self.subset.value))}"

    def _summary_html(self, frame: pd.DataFrame) -> str:
        a, b = (method_label(m) for m in self.methods)
        s = self.summary(frame)
        k = int(self.k.value)
        if not s.n:
            return f"<span class='muted'>0 queries {self._scope()}</span>"
        return (f"<b>{s.n}</b> {'query' if s.n == 1 else 'queries'} {self._scope()} · mean recall@{k}: "
                f"{html.escape(a)} "
                f"<b>{s.mean_a:.3f}</b>, {html.escape(b)} <b>{s.mean_b:.3f}</b> · {html.escape(a)} wins "
                f"<b>{s.a_wins}</b>, ties <b>{s.ties}</b>, {html.escape(b)} wins <b>{s.b_wins}</b>")

    def _draw_summary(self, frame: pd.DataFrame) -> None:
        self.count.value = f"<span class='qx-summary'>{self._summary_html(frame)}</span>"

    def _multi_subset(self) -> bool:
        return bool(str(self.search.value).strip()) or self.subset.value == ALL_SUBSETS

    def _headers(self) -> dict[str, str]:
        a, b = (method_label(m) for m in self.methods)
        k = int(self.k.value)
        names = {"query": "query", "subset": "set", "text": "query text", "a": f"{a} R@{k}",
                 "b": f"{b} R@{k}", "gap": "gap", "winner": "winner"}
        column, desc = self._sort
        arrow = " ▼" if desc else " ▲"
        if column == "abs_gap":
            names["gap"] = "|gap|" + arrow
        elif column in names:
            names[column] += arrow
        return names

    def _draw_table(self, frame: pd.DataFrame) -> None:
        multi = self._multi_subset()
        for column, text in self._headers().items():
            button = self.header[column]
            button.description = text
            button.layout.display = "none" if column == "subset" and not multi else None
        start = self._page * PAGE_ROWS
        page = frame.iloc[start:start + PAGE_ROWS]
        self._rows_shown = page["qkey"].tolist()
        for i, row in enumerate(self.rows):
            if i >= len(page):
                row.layout.display = "none"
                continue
            r = page.iloc[i]
            row.layout.display = None
            button = self.row_buttons[i]
            button.description = str(r["query_id"])
            button.tooltip = str(r["text"])[:300]
            button.button_style = "info" if r["qkey"] == self.query.value else ""
            self.row_cells[i].value = self._row_cells(r, multi)
        n = len(frame)
        pages = max(1, -(-n // PAGE_ROWS))
        self.page_label.value = (f"<span class='muted'>rows {start + 1}–{min(n, start + PAGE_ROWS)} of {n} "
                                 f"(page {self._page + 1} of {pages})</span>" if n else
                                 f"<span class='muted'>{NO_QUERY}</span>")
        self.prev_page.disabled = self._page == 0
        self.next_page.disabled = self._page >= pages - 1

    @staticmethod
    def _row_cells(r, multi: bool) -> str:
        gap = float(r["gap"])
        sign = "pos" if gap > 0 else ("neg" if gap < 0 else "")
        w = {c: WIDTHS[c] + MARGINS for c in WIDTHS}
        subset = html.escape(str(r["subset"]))
        cells = [f"<span style='width:{w['subset']}px'>{subset}</span>"] if multi else []
        cells += [f"<span style='flex:1 1 0;min-width:0'>{html.escape(str(r['text']))}</span>",
                  f"<span class='num' style='width:{w['a']}px'>{r['a']:.3f}</span>",
                  f"<span class='num' style='width:{w['b']}px'>{r['b']:.3f}</span>",
                  f"<span class='num {sign}' style='width:{w['gap']}px'>{gap:+.3f}</span>",
                  f"<span style='width:{w['winner']}px'>{html.escape(str(r['winner']))}</span>"]
        return f"<div class='qx-rowcells'>{''.join(cells)}</div>"

    def table_html(self, rows: int = PAGE_ROWS) -> str:
        """The summary and the table's first ``rows`` rows as static HTML (for a copy without a kernel)."""
        frame = self.table_frame()
        names = self._headers()
        multi = self._multi_subset()
        columns = [c for c in ("query", "subset", "text", "a", "b", "gap", "winner")
                   if multi or c != "subset"]
        width = {"query": "12%", "subset": "6%", "text": "auto", "a": "11%", "b": "11%", "gap": "10%",
                 "winner": "10%"}
        head = "".join(f"<th style='width:{width[c]}' class='{'num' if c in ('a', 'b', 'gap') else ''}'>"
                       f"{html.escape(names[c])}</th>" for c in columns)
        body = []
        for _, r in frame.head(rows).iterrows():
            values = {"query": html.escape(str(r["query_id"])), "subset": html.escape(str(r["subset"])),
                      "text": html.escape(str(r["text"])), "a": f"{r['a']:.3f}", "b": f"{r['b']:.3f}",
                      "gap": f"{r['gap']:+.3f}", "winner": html.escape(str(r["winner"]))}
            body.append("<tr>" + "".join(f"<td class='{'num' if c in ('a', 'b', 'gap') else ''}'>{values[c]}"
                                         "</td>" for c in columns) + "</tr>")
        more = (f"<p class='muted'>first {min(rows, len(frame))} of {len(frame)} rows</p>"
                if len(frame) > rows else "")
        return (f"<div class='qx'><p>{self._summary_html(frame)}</p><table class='qtable'><thead><tr>{head}"
                f"</tr></thead><tbody>{''.join(body)}</tbody></table>{more}</div>")

    # -- the address of the view -----------------------------------------------------------------

    def _sync_url(self) -> None:
        qs = self.state_query()
        self.link.value = (f"<a class='qx-permalink' href='?{html.escape(qs, quote=True)}' target='_self'>"
                           "link to this view</a>")
        if self.url_sync:
            from IPython.display import Javascript, display

            self._js.clear_output()
            with self._js:
                display(Javascript("window.history.replaceState(window.history.state, '', "
                                   f"'?' + {json.dumps(qs)});"))

    # -- rendering -------------------------------------------------------------------------------

    def _api(self, api_id: str) -> str:
        label = self.labels.get(api_id)
        name = html.escape(label) if label else ""
        return f"{name} <code>{html.escape(api_id)}</code>" if name else f"<code>{html.escape(api_id)}</code>"

    def _gt_ids(self, qkey: str) -> set[str]:
        return set(_ids(self.queries.loc[qkey, self.gt.value]))

    def _ranked(self, qkey: str, method: str, text_idx: int) -> pd.DataFrame:
        h = self._hits_of(qkey)
        run = self.result.stored_run(method, int(self.run.value))
        mine = h[(h["method"] == method) & (h["run"] == run) & (h["text_idx"] == text_idx)]
        return mine.sort_values("rank").head(int(self.k.value))

    def _hits_of(self, qkey: str) -> pd.DataFrame:
        if self._hits_by_query is None:
            self._hits_by_query = dict(tuple(self.result.hits.groupby("qkey", sort=False)))
        return self._hits_by_query.get(qkey, self.result.hits.iloc[0:0])

    def _list(self, hits: pd.DataFrame, gt: set[str], hit_class: str) -> str:
        items = []
        for api_id, score in zip(hits["api_id"], hits["score"], strict=True):
            is_hit = api_id in gt
            cls = f' class="{hit_class}"' if is_hit else ""
            mark = "✓ " if is_hit else ""
            items.append(f"<li{cls}>{mark}{self._api(api_id)} <span class='muted'>{score:.3f}</span></li>")
        if not items:
            return "<p class='muted'>no stored hits</p>"
        return "<ol>" + "".join(items) + "</ol>"

    def _ground_truth(self, qkey: str) -> str:
        row = self.queries.loc[qkey]
        relevant = set(_ids(row["relevant"]))
        active = self.gt.value
        items = []
        for api_id in _ids(row["candidates"]):
            tags = ["candidates"] + (["relevant"] if api_id in relevant else [])
            badges = "".join(f"<span class='tag{' active' if t == active else ''}'>{t}</span>" for t in tags)
            items.append(f"<li>{self._api(api_id)}{badges}</li>")
        for api_id in sorted(relevant - set(_ids(row["candidates"]))):
            badge = f"<span class='tag{' active' if active == 'relevant' else ''}'>relevant</span>"
            items.append(f"<li>{self._api(api_id)}{badge}</li>")
        body = "<ul>" + "".join(items) + "</ul>" if items else "<p class='muted'>no ground truth</p>"
        return (f"<h4>Ground truth ({len(_ids(row['candidates']))} candidates, {len(relevant)} relevant; "
                f"hits are marked against <b>{active}</b>)</h4>{body}")

    def _stubs(self, qkey: str, gt: set[str], method: str) -> str:
        s = self.result.stubs
        mine = s[(s["qkey"] == qkey) & (s["run"] == int(self.run.value))].sort_values("stub_idx")
        if mine.empty:
            return "<h4>Stubs</h4><p class='muted'>no stubs recorded for this query and run</p>"
        fell_back = bool(mine["fell_back"].iloc[0])
        parts = [f"<h4>Stubs ({len(mine)}{', fallback: the raw query' if fell_back else ''})</h4>"]
        for idx, name, reasoning in zip(mine["stub_idx"], mine["name"], mine["reasoning"], strict=True):
            top = self._ranked(qkey, method, int(idx))
            parts.append(f"<p><b>{html.escape(str(name))}</b>: {html.escape(str(reasoning))}</p>"
                         + self._list(top, gt, "stub-hit"))
        return "".join(parts)

    def _plan(self, qkey: str, method: str, gt: set[str]) -> str:
        p = self.result.plans
        if p.empty:
            return f"<h4>Plan</h4><p class='muted'>{NO_PLAN}</p>"
        mine = p[(p["qkey"] == qkey) & (p["method"] == method) & (p["run"] == int(self.run.value))]
        if mine.empty:
            return f"<h4>Plan</h4><p class='muted'>{NO_PLAN}</p>"
        plan = mine.iloc[0]
        verdict = plan.get("verdict")
        verdict = "not judged" if verdict is None or verdict != verdict else str(verdict)
        fid = plan.get("fidelity")
        fid_text = "n/a" if fid is None or fid != fid else f"{float(fid):.2f}"
        head = (f"<h4>Plan</h4><p>verdict: <b>{html.escape(verdict)}</b>, refusal: "
                f"<b>{'yes' if bool(plan['refusal']) else 'no'}</b>, steps: {int(plan['n_steps'])}, "
                f"fidelity: {fid_text}</p>")
        steps = json.loads(plan["steps_json"]) if isinstance(plan.get("steps_json"), str) else []
        rows = "".join(
            f"<tr><td>{html.escape(str(st.get('step', i + 1)))}</td>"
            f"<td>{html.escape(str(st.get('tool_name', '')))}</td>"
            f"<td>{html.escape(str(st.get('api_name', '')))}</td>"
            f"<td>{html.escape(str(st.get('purpose', '')))}</td></tr>"
            for i, st in enumerate(steps) if isinstance(st, dict))
        table = (f"<table class='steps'><tr><th>step</th><th>tool</th><th>API</th><th>purpose</th></tr>"
                 f"{rows}</table>") if rows else ""
        named = _ids(plan.get("named_ids"))
        named_items = "".join(
            (f'<li class="named-hit">✓ {self._api(a)}</li>' if a in gt else f"<li>{self._api(a)}</li>")
            for a in named)
        named_html = f"<p>APIs named (resolved):</p><ul>{named_items}</ul>" if named_items else ""
        return head + table + named_html


    def _has_texts(self, method: str) -> bool:
        """Whether a method searched with stubs: its hits rank texts beyond the first (PtR)."""
        if method not in self._texts:
            h = self.result.hits
            self._texts[method] = method.partition("@")[0] == "ptr" or bool(
                ((h["method"] == method) & (h["text_idx"] >= 1)).any())
        return self._texts[method]

    def _method_column(self, qkey: str, method: str, gt: set[str]) -> str:
        scores = self._method_scores(method)
        pos = int(self._base.index[self._base["qkey"] == qkey][0])
        recall, hits = float(scores.iloc[pos, 0]), int(scores.iloc[pos, 1])
        top = self._ranked(qkey, method, MERGED)
        k = int(self.k.value)
        name = html.escape(method_label(method, True))
        parts = [f"<div class='col method-{html.escape(method)}'><h3>{name}</h3>",
                 f"<p>recall@{k}: <b>{recall:.3f}</b> ({hits} ground-truth APIs in the top {k})</p>",
                 "<h4>Ranking</h4>", self._list(top, gt, "hit")]
        if self._has_texts(method):
            parts.append(self._stubs(qkey, gt, method))
        parts.append(self._plan(qkey, method, gt))
        parts.append("</div>")
        return "".join(parts)

    def methods_shown(self) -> list[str]:
        """The methods whose columns are shown: both (A, then B) or one of them."""
        a, b = self.methods
        return {"both": list(dict.fromkeys([a, b])), "a": [a], "b": [b]}[str(self.show.value)]

    def render(self) -> str:
        """The HTML of the selected query under the current settings."""
        qkey = self.query.value
        if qkey is None:
            return f"{STYLE}<div class='qx'><p class='muted'>{NO_QUERY}</p></div>"
        row = self.queries.loc[qkey]
        gt = self._gt_ids(qkey)
        cols = "".join(self._method_column(qkey, m, gt) for m in self.methods_shown())
        return (f"{STYLE}<div class='qx'><h3>{html.escape(subset_alias(str(row['subset'])))} query "
                f"{html.escape(str(row['query_id']))} <span class='muted'>(run {int(self.run.value)}, "
                f"k = {int(self.k.value)})</span></h3><blockquote>{html.escape(str(row['query']))}"
                f"</blockquote>{self._ground_truth(qkey)}<div class='cols'>{cols}</div></div>")

    def select(self, qkey: str) -> None:
        """Show one query by key, switching subset (and filter to ``all``, search off) when needed."""
        if qkey not in self.queries.index:
            raise KeyError(f"no query {qkey!r} in this study")
        if qkey not in self.visible_queries():
            self._updating = True
            try:
                self.search.value = ""
                self.subset.value = subset_alias(str(self.queries.loc[qkey, "subset"]))
                if qkey not in self.visible_queries():
                    self.filter.value = "all"
            finally:
                self._updating = False
            self._refresh(prefer=qkey)
        self.query.value = qkey

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """The live widget and, for a copy without a kernel, a static rendering of what it shows."""
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle["text/html"] = STYLE + self.table_html() + self.render() + self._provenance_html()
        bundle["text/plain"] = f"QueryExplorer ({len(self.queries)} queries)"
        return bundle
