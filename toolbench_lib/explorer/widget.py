"""The query explorer: find, sort and compare a stored study's queries under any methods, from its stored
rankings alone; its view is a link's query string, and an exported notebook shows it as static HTML."""
from __future__ import annotations

import html
import json
from contextlib import contextmanager
from pathlib import Path

import ipywidgets as widgets
import numpy as np
import pandas as pd
from ipywidgets import Layout

from ..config import K
from ..data.markdown import html_text, visible_controls
from ..data.queries import DEFAULT_GT, GT_DEFINITIONS, check_gt, subset_alias
from ..study.experiment import provenance_line, stored_study_dir
from ..study.stored import StoredStudyError, StudyResult
from .data import (
    PAGE_ROWS,
    SORTS,
    CatalogueEntry,
    _ids,
    api_labels,
    catalogue,
    family_base,
    filter_labels,
    method_label,
    page_query_string,
    run_name_of,
    searched_text,
    served_by_voila,
    stored_registry,
)
from .nav import QueryNavigation
from .render import STYLE, QueryRendering
from .scores import QueryScores
from .views import MAX_K, StudyViews, ViewsFolderError, study_views, with_fused

# Sent with every address update (once per page): the table's clicks sent to the kernel, and the k
# slider's handle named for assistive technology.
A11Y_JS = """(function () {
  if (window.__qxNamed) return;
  window.__qxNamed = true;
  document.addEventListener('click', (e) => {
    const b = e.target.closest('.qx-grid button[data-act]');
    const box = b && b.closest('.query-explorer').querySelector('.qx-bridge input');
    if (!box) return;
    box.value = b.dataset.act + '|' + Date.now();
    box.dispatchEvent(new Event('change', {bubbles: true}));
  });
  const name = () => document.querySelectorAll('.qx-k [role=slider]').forEach(h => {
    if (!h.getAttribute('aria-label')) h.setAttribute('aria-label', 'k: each ranking is cut at its top k');
  });
  name();
  new MutationObserver(name).observe(document.body, {childList: true, subtree: true});
})();"""


# Each control's tooltip (shown on hover and focus), and the help beside the controls.
TOOLTIPS = {
    "study": "the stored study of the run's family: main, retriever families, validation sets",
    "subset": "the query set shown (all: every set)",
    "filter": "keep only the queries where the selected methods differ or agree, at this k and run",
    "run": "the mean of every run (the report's basis) or one LLM run",
    "k": "each ranking is cut at its top k (1 to the study's depth, at most 20)",
    "gt": "candidates: the query's whole api_list; relevant: ToolBench's relevant APIs",
    "method_a": "the first method compared (the table's A column)",
    "method_b": "the second method compared (the table's B column)",
    "more": "further methods shown side by side (Ctrl or Shift to pick several)",
    "search": "a query's text or id, or an API id in its ground truth or the methods' top k; Enter",
    "show": "show every selected method's column, or one",
}
HELP = ("<details class='qx qx-help'><summary>How to read this page</summary><p>Pick a <b>study</b> and a "
        "<b>subset</b>; <b>Method A</b>, <b>Method B</b> and <b>More methods</b> are the columns compared. "
        "The line beside the search counts the view's queries, the mean recall@k of A and B and their wins. "
        "The summary above the table says, per selected method, where the view's ground-truth APIs sat and "
        "what its wrong APIs were; ★ marks the set's best single architecture. A row's button shows the "
        "query: its ground truth (✓ where retrieved), each method's ranking, PtR's stubs and the plans. "
        "Every method's long name and description head its column; the report's Glossary defines them. "
        "Hover or focus a control for what it does.</p></details>")


class QueryExplorer(QueryNavigation, QueryScores, QueryRendering):
    """Browse a study query by query. ``setup`` (or ``registry``) gives API names; ``url_sync``: the page's
    address follows the view (Voilà); ``run``: the run scored first (default: the mean over every run)."""

    def __init__(self, setup=None, result: StudyResult | None = None, k: int = K, gt: str = DEFAULT_GT,
                 registry: pd.DataFrame | None = None, source: str | None = None, run_name: str | None = None,
                 url_sync: bool = False, views: StudyViews | None = None,
                 family: tuple[list[CatalogueEntry], dict] | None = None, run: int | str | None = None,
                 processed_dir: Path | None = None):
        if result is None:
            raise ValueError("QueryExplorer needs a StudyResult")
        check_gt(gt)
        if views is not None:
            result = with_fused(result, views)
        if not result.methods:
            raise ValueError("the study has no method with rankings to explore")
        self.views, self.source, self.run_name, self.url_sync = views, source, run_name, url_sync
        self.entries, self.family_queries = family or ([], {})
        self._elsewhere: list[tuple[str, str]] = []
        self.labels = api_labels(setup.ds.registry if registry is None and setup is not None else registry)
        self._bind(result)
        self._updating, self._sort, self._page = False, ("abs_gap", True), 0
        self._rows_shown: list[str] = []
        self._last_options: tuple = ()
        self.problems: list[str] = []
        self.processed_dir = processed_dir  # where a switched study's API names are read

        style = {"description_width": "initial"}
        wide, hidden = Layout(width="auto", max_width="100%"), Layout(display="none")
        self.subset = widgets.Dropdown(description="Subset", style=style, layout=Layout(width="150px"))
        self.filter = widgets.Dropdown(options=[("all", "all")], description="Filter", style=style,
                                       layout=wide)
        self.run = widgets.Dropdown(description="Run", style=style, layout=Layout(width="190px"))
        self.k = widgets.IntSlider(value=min(k, self.depth), min=1, max=min(MAX_K, self.depth),
                                   description="k", style=style, layout=Layout(width="260px"))
        self.gt = widgets.ToggleButtons(options=list(GT_DEFINITIONS), value=gt, description="Ground truth",
                                        style={**style, "button_width": "90px"})
        self.method_a, self.method_b = (widgets.Dropdown(description=f"Method {x}", style=style, layout=wide)
                                        for x in "AB")
        self.more = widgets.SelectMultiple(rows=4, description="More methods", style=style, layout=wide)
        studies = [(e.label(), e.run_name) for e in self.entries] or [(str(run_name), str(run_name))]
        self.study = widgets.Dropdown(options=studies, value=run_name if run_name in [v for _, v in studies]
                                      else studies[0][1], description="Study", style=style, layout=wide)
        self.switch = widgets.Button(description="", layout=Layout(display="none", width="auto"))
        self.switch.on_click(lambda _b: self._switch_to_found())
        self.show = widgets.ToggleButtons(options=[("every selected", "both")], description="Show",
                                          style={**style, "button_width": "110px"})
        self.search = widgets.Text(value="", placeholder="query text, query id or API id (Enter)",
                                   description="Search", continuous_update=False, style=style,
                                   layout=Layout(width="420px"))
        self.query = widgets.Dropdown(description="Query", style=style, layout=Layout(width="70%"))
        self.count, self.link, self.message, self.page_label = (widgets.HTML() for _ in range(4))
        self.digest_box, self.output, self.grid = (widgets.HTML(layout=Layout(width="100%"))
                                                   for _ in range(3))
        self._best: tuple[str | None, float] = (None, float("nan"))
        self.provenance = widgets.HTML(self._provenance_html())
        self._js = widgets.Output(layout=hidden)
        # The table's header and row buttons reach the kernel through this hidden box, filled by A11Y_JS.
        self.bridge = widgets.Text(value="", continuous_update=False, layout=hidden)
        self.bridge.observe(self._on_bridge, names="value")
        self.prev_page, self.next_page = (widgets.Button(description=d, layout=Layout(width="110px"))
                                          for d in ("◀ previous", "next ▶"))
        self.prev_page.on_click(lambda _b: self.turn_page(-1))
        self.next_page.on_click(lambda _b: self.turn_page(1))
        for name in ("subset", "filter", "run", "k", "method_a", "method_b", "more", "study", "switch",
                     "show", "grid", "bridge", "gt", "search", "query", "count", "digest_box", "output",
                     "provenance", "link", "message", "page_label", "prev_page", "next_page"):
            getattr(self, name).add_class(f"qx-{name.replace('_', '-')}")
        for name, text in TOOLTIPS.items():
            getattr(self, name).tooltip = text
        self.help = widgets.HTML(HELP)
        for control in (self.subset, self.filter, self.run, self.k, self.gt, self.search, self.method_a,
                        self.method_b, self.more):
            control.observe(self._on_change, names="value")
        self.study.observe(self._on_study_change, names="value")
        for control in (self.query, self.show):
            control.observe(self._on_shown_change, names="value")
        pager = widgets.HBox([self.prev_page, self.next_page, self.page_label])
        self.table = widgets.VBox([self.grid, pager, self.bridge], layout=Layout(width="100%"))
        self.table.add_class("qx-table")
        wrap = Layout(flex_flow="row wrap")
        self.widget = widgets.VBox([
            widgets.HBox([self.study], layout=wrap),
            widgets.HBox([self.subset, self.filter, self.run, self.k], layout=wrap),
            widgets.HBox([self.method_a, self.method_b, self.more, self.gt], layout=wrap),
            self.help,
            widgets.HBox([self.search, self.count],
                         layout=Layout(flex_flow="row wrap", align_items="center")),
            widgets.HBox([self.message, self.switch], layout=Layout(align_items="center")),
            self.digest_box, self.table,
            widgets.HBox([self.query, self.link], layout=Layout(align_items="center")),
            self.show, self.output, self.provenance, self._js,
        ], layout=Layout(width="100%"))
        self.widget.add_class("query-explorer")
        self._study_controls("rtp", "ptr", None, run)
        self._relabel()
        self._refresh()

    @classmethod
    def from_run(cls, run_name: str = "default", study: str | None = None, k: int = K, gt: str = DEFAULT_GT,
                 outputs_dir: str | Path | None = None, processed_dir: Path | None = None,
                 url_sync: bool = False) -> QueryExplorer:
        """The explorer of the study a run stored (``study``: its key), from its tables and views alone."""
        folder = stored_study_dir(run_name, study, outputs_dir)
        result = StudyResult.load(folder)
        return cls(None, result, k=k, gt=gt, registry=stored_registry(result, processed_dir),
                   source=f"{run_name}/{folder.parent.name}/{folder.name}", run_name=run_name,
                   url_sync=url_sync, views=study_views(folder, result),
                   family=catalogue(run_name, Path(outputs_dir).parent if outputs_dir else None),
                   processed_dir=processed_dir)

    @classmethod
    def for_page(cls, run_name: str = "default", study: str | None = None, k: int = K,
                 gt: str = DEFAULT_GT) -> QueryExplorer | widgets.HTML:
        """The explorer of the run and view a page's link names (else ``run_name``); a run with no readable
        stored study gives a one-line page saying so."""
        qs, problem = page_query_string(), None
        try:
            named = run_name_of(qs)
        except ValueError as exc:
            named, problem = None, f"link: ignored run_name ({exc})"
        try:
            explorer = cls.from_run(named or run_name, study=study, k=k, gt=gt, url_sync=served_by_voila())
        except (FileNotFoundError, StoredStudyError, ViewsFolderError, KeyError, ValueError) as exc:
            line = " ".join(str(exc).split()) or type(exc).__name__
            return widgets.HTML(f"<p class='qx-error' role='alert'>explorer: {html_text(line)}</p>")
        explorer.apply_state(qs)
        if problem:
            explorer.problems.insert(0, problem)
            explorer._show_problems()
        return explorer

    def _bind(self, result: StudyResult) -> None:
        """Hold one study's tables and empty the caches of the one before."""
        self.result, q = result, result.queries
        self._study_runs = (sorted(int(r) for r in result.rankings["run"].unique())
                            or list(range(max(1, result.n_runs))))
        self.queries = q.set_index("qkey", drop=False)
        self._base = pd.DataFrame({
            "qkey": q["qkey"].to_numpy(), "subset": q["subset"].map(subset_alias).to_numpy(),
            "query_id": q["query_id"].astype(str).to_numpy(), "text": q["query"].astype(str).to_numpy(),
            "order": np.arange(len(q))})
        self._lower = searched_text(self._base["qkey"], self._base["query_id"], self._base["text"])
        self._gt_text = pd.Series(["\n".join(_ids(c) + _ids(r)).lower() for c, r in
                                   zip(q["candidates"], q["relevant"], strict=True)], index=q.index)
        self._rankings: dict[tuple[str, int], dict[str, list[str]]] = {}
        self._scores: dict[tuple[str, int, int, str], pd.DataFrame] = {}
        self._found_apis: dict[tuple[str, int, str], pd.DataFrame] | None = None  # without views
        self._hits_by_query: dict[str, dict[str, pd.DataFrame]] = {}  # table -> qkey -> its rows
        self._texts: dict[str, bool] = {}
        self._n_unfiltered = 0

    def _provenance_html(self) -> str:
        where = f"; stored in outputs/{html_text(self.source)}" if self.source else ""
        # the report of the family's main run names the methods and works queries through
        report = (f"<br>How to read it: the report's Glossary (every method's name) and Appendix D "
                  f"(worked queries), <code>outputs/{html_text(family_base(str(self.run_name)))}"
                  f"/report.html</code>") if self.run_name else ""
        return (f"<div class='qx'><p class='muted prov'>{html_text(provenance_line(self.result))}"
                f"{where}{report}</p></div>")

    def _relabel(self) -> None:
        """The filter and show options named after the current methods (their values kept)."""
        a, b = self.methods
        keep_filter, keep_show = self.filter.value, self.show.value
        with self._quiet():
            self.filter.options = filter_labels(a, b, len(self.selected))
            self.filter.value = keep_filter
            self.show.options = [("every selected", "both"), (f"{method_label(a)} only", "a"),
                                 (f"{method_label(b)} only", "b")]
            self.show.value = keep_show

    def _on_change(self, change) -> None:
        if not self._updating:
            if change["owner"] in (self.method_a, self.method_b, self.more):
                self._relabel()
            self._refresh()

    def _on_shown_change(self, change) -> None:
        """Another query (its table page followed) or other methods shown."""
        if self._updating:
            return
        with self.busy():
            if change["owner"] is self.query:
                self._follow_query()
                self._draw_table(self._frame)
            self.output.value = self.render()
            self._sync_url()

    def sort_by(self, column: str) -> None:
        """Sort the table by a column (again: reversed; ``gap`` cycles |gap|, A ahead, B ahead)."""
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
        self._page += step  # kept within the table's pages as it is drawn
        self._draw_table(self._frame)
        self._sync_url()

    def _on_bridge(self, change) -> None:
        """A click in the table: ``sort|<column>|<nonce>`` or ``pick|<query key>|<nonce>``."""
        act, _, rest = str(change["new"]).partition("|")
        arg = rest.rpartition("|")[0]
        if act == "sort" and arg in SORTS:
            self.sort_by(arg)
        elif act == "pick" and arg in self._rows_shown:
            self.query.value = arg

    def _follow_query(self) -> None:
        """Turn to the page holding the selected query (if the view holds it)."""
        keys = self._frame["qkey"].tolist()
        if self.query.value in keys:
            self._page = keys.index(self.query.value) // PAGE_ROWS

    def _set_query_options(self, frame: pd.DataFrame) -> None:
        options = tuple((visible_controls(f"{qid}: {text[:90]}{'…' if len(text) > 90 else ''}"), key)
                        for key, qid, text in zip(frame["qkey"], frame["query_id"], frame["text"],
                                                  strict=True))
        if options != self._last_options:
            self._last_options = options
            with self._quiet():
                previous = self.query.value
                self.query.options = options
                self.query.value = previous if previous in [key for _, key in options] else None

    @contextmanager
    def _quiet(self):
        """Changes of the controls made inside do not reach their observers."""
        was, self._updating = self._updating, True
        try:
            yield
        finally:
            self._updating = was

    @contextmanager
    def busy(self):
        """While a change is computed, the explorer carries the class ``qx-busy`` (the page says so)."""
        self.widget.add_class("qx-busy")
        try:
            yield
        finally:
            self.widget.remove_class("qx-busy")

    def _refresh(self, prefer: str | None = None) -> None:
        """Recompute the view after a change of its queries: rows, summary, the query shown, the page."""
        with self.busy():
            self._frame = self.table_frame()
            keys = self._frame["qkey"].tolist()
            previous = self.query.value
            self._set_query_options(self._frame)
            chosen = (prefer if prefer in keys else previous if previous in keys
                      else self.informative_query(self._frame))
            with self._quiet():
                self.query.value = chosen
            self._page = keys.index(chosen) // PAGE_ROWS if chosen in keys else 0
            self.count.value = f"<span class='qx-summary'>{self._summary_html(self._frame)}</span>"
            self.digest_box.value = self._digest_html(self._frame)
            self._draw_elsewhere()
            self._draw_table(self._frame)
            self.output.value = self.render()
            self._sync_url()

    def _sync_url(self) -> None:
        qs = self.state_query()
        self.link.value = (f"<a class='qx-permalink' href='?{html.escape(qs, quote=True)}' target='_self'>"
                           "link to this view</a>")
        from IPython.display import Javascript, display

        address = (f"\nwindow.history.replaceState(window.history.state, '', '?' + {json.dumps(qs)});"
                   if self.url_sync else "")
        self._js.clear_output()
        with self._js:
            display(Javascript(A11Y_JS + address))

    def select(self, qkey: str) -> None:
        """Show one query by key, switching subset (and filter to ``all``, search off) when needed."""
        if qkey not in self.queries.index:
            raise KeyError(f"no query {qkey!r} in this study")
        if qkey not in self.visible_queries():
            with self._quiet():
                self.search.value = ""
                self.subset.value = subset_alias(str(self.queries.loc[qkey, "subset"]))
                if qkey not in self.visible_queries():
                    self.filter.value = "all"
            self._refresh(prefer=qkey)
        self.query.value = qkey

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """The live widget and, for a copy without a kernel, a static rendering of what it shows."""
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle["text/html"] = STYLE + self.table_html() + self.render() + self._provenance_html()
        bundle["text/plain"] = f"QueryExplorer ({len(self.queries)} queries)"
        return bundle
