"""An interactive per-query view of a stored study: ground truth, both rankings, stubs and plans.

:class:`QueryExplorer` holds its controls as attributes (``subset``, ``filter``, ``query``, ``method``,
``gt``, ``k``, ``run``) and shows the selected query in ``output`` (an ``ipywidgets.HTML``);
``render()`` returns the same HTML as a string. Everything shown comes from the stored tables: the
rankings are the stored hits cut at ``k`` (never a new retrieval).

:meth:`QueryExplorer.from_run` opens the study a run stored (``outputs/<run>/runs/<key>/``) from its
tables alone, without an embedder or an index. Displayed in a notebook, the explorer is one output
holding both the live widget and a static HTML rendering of the query it shows: a frontend with a live
kernel shows the widget, an exported copy (nbconvert, ``report.html``) the static rendering.
"""

from __future__ import annotations

import html
import json
import logging
from pathlib import Path

import ipywidgets as widgets
import pandas as pd

from ..data.queries import DEFAULT_GT, GT_DEFINITIONS, check_gt, subset_alias
from ..eval.metrics import per_query_metrics
from ..pipeline.study import StudyResult

FILTERS = ("all", "RtP wins", "PtR wins", "both missed", "both hit")
METHOD_VIEWS = ("both", "rtp", "ptr")
METHOD_NAMES = {"rtp": "RtP (retrieve, then plan)", "ptr": "PtR (plan, then retrieve)"}
MAX_K = 20
NO_PLAN = "no plan recorded for this query"
NO_QUERY = "no query matches this filter"
LABEL_COLUMNS = ["api_id", "tool_name", "api_name", "category"]

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
</style>"""


def _ids(value) -> list[str]:
    """A stored list of registry ids (list, numpy array or None) as a Python list."""
    return [] if value is None else [str(v) for v in value]


def query_outcomes(result: StudyResult, run: int, k: int, gt: str = DEFAULT_GT) -> pd.DataFrame:
    """Per query: ``qkey, subset, rtp_recall, ptr_recall, rtp_hits, ptr_hits`` at ``k`` for one run.

    RtP's rankings are stored once and count for every run (``StudyResult.ranking`` decodes that).
    """
    check_gt(gt)
    q = result.queries
    qrels = {key: set(_ids(ids)) for key, ids in zip(q["qkey"], q[gt], strict=True)}
    out = q[["qkey", "subset"]].copy()
    for method in ("rtp", "ptr"):
        pq = per_query_metrics(result.ranking(method, run, k=k), qrels, k).set_index("qkey")
        out[f"{method}_recall"] = out["qkey"].map(pq["recall"]).fillna(0.0).to_numpy()
        out[f"{method}_hits"] = out["qkey"].map(pq["hits"]).fillna(0).astype(int).to_numpy()
    return out


def filter_outcomes(outcomes: pd.DataFrame, name: str) -> pd.DataFrame:
    """The queries of one filter: RtP wins / PtR wins compare recall, both missed / both hit its zeros."""
    rtp, ptr = outcomes["rtp_recall"], outcomes["ptr_recall"]
    masks = {"all": rtp == rtp, "RtP wins": rtp > ptr, "PtR wins": ptr > rtp,
             "both missed": (rtp == 0) & (ptr == 0), "both hit": (rtp > 0) & (ptr > 0)}
    if name not in masks:
        raise ValueError(f"unknown filter {name!r}; choose one of {FILTERS}")
    return outcomes[masks[name]]


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


class QueryExplorer:
    """Browse a study query by query: filters by per-query outcome, both rankings, stubs and plans.

    ``setup`` is only used for its registry (API names); pass ``registry`` instead to go without one.
    """

    def __init__(self, setup=None, result: StudyResult | None = None, k: int = 5, gt: str = DEFAULT_GT,
                 registry: pd.DataFrame | None = None, source: str | None = None):
        if result is None:
            raise ValueError("QueryExplorer needs a StudyResult")
        check_gt(gt)
        self.result = result
        self.source = source
        if registry is None and setup is not None:
            registry = setup.ds.registry
        self.labels = api_labels(registry)
        self.queries = result.queries.set_index("qkey", drop=False)
        self._outcomes: dict[tuple[int, int, str], pd.DataFrame] = {}
        self._updating = False
        self._hits_by_query: dict[str, pd.DataFrame] | None = None

        subsets = list(dict.fromkeys(subset_alias(s) for s in result.queries["subset"]))
        runs = self._runs()
        depth = int(result.provenance.get("settings", {}).get("depth", MAX_K))
        self.subset = widgets.Dropdown(options=subsets, value=subsets[0] if subsets else None,
                                       description="Subset")
        self.filter = widgets.Dropdown(options=list(FILTERS), value="all", description="Filter")
        self.run = widgets.Dropdown(options=runs, value=runs[0], description="Run")
        self.k = widgets.IntSlider(value=min(k, depth), min=1, max=min(MAX_K, depth), description="k")
        self.method = widgets.ToggleButtons(options=list(METHOD_VIEWS), value="both", description="Method")
        self.gt = widgets.ToggleButtons(options=list(GT_DEFINITIONS), value=gt, description="Ground truth")
        self.query = widgets.Dropdown(options=[], description="Query", layout=widgets.Layout(width="80%"))
        self.count = widgets.HTML()
        self.output = widgets.HTML(layout=widgets.Layout(width="100%"))
        self.provenance = widgets.HTML(self._provenance_html())
        for name in ("subset", "filter", "run", "k", "method", "gt", "query", "count", "output",
                     "provenance"):
            getattr(self, name).add_class(f"qx-{name}")
        for control in (self.subset, self.filter, self.run, self.k, self.gt):
            control.observe(self._on_selection_change, names="value")
        for control in (self.query, self.method):
            control.observe(self._on_view_change, names="value")
        self.widget = widgets.VBox([
            widgets.HBox([self.subset, self.filter, self.run]),
            widgets.HBox([self.k, self.gt]),
            self.method,
            widgets.HBox([self.query, self.count]),
            self.output,
            self.provenance,
        ], layout=widgets.Layout(width="100%"))
        self.widget.add_class("query-explorer")
        self._refresh_queries()

    @classmethod
    def from_run(cls, run_name: str = "default", study: str | None = None, k: int = 5, gt: str = DEFAULT_GT,
                 outputs_dir: str | Path | None = None, processed_dir: Path | None = None) -> QueryExplorer:
        """The explorer of the study stored for a run, from its tables alone (no embedder, no index).

        ``study`` picks one stored study by key when the run holds several; by default it is the one the
        run record names. Nothing is computed or written.
        """
        from ..pipeline.experiment import stored_study_dir

        folder = stored_study_dir(run_name, study, outputs_dir)
        result = StudyResult.load(folder)
        return cls(None, result, k=k, gt=gt, registry=stored_registry(result, processed_dir),
                   source=str(folder))

    def _provenance_html(self) -> str:
        from ..pipeline.experiment import provenance_line

        where = f"; stored in {html.escape(self.source)}" if self.source else ""
        return (f"<div class='qx'><p class='muted prov'>{html.escape(provenance_line(self.result))}"
                f"{where}</p></div>")

    # -- state -----------------------------------------------------------------------------------

    def _runs(self) -> list[int]:
        runs = sorted(int(r) for r in self.result.hits["run"].unique() if int(r) >= 0)
        if not runs:
            n = int(self.result.provenance.get("settings", {}).get("runs", 1))
            runs = list(range(max(1, n)))
        return runs

    def outcomes(self) -> pd.DataFrame:
        """Per-query recall and hits of both methods for the current run, ``k`` and ground truth."""
        key = (int(self.run.value), int(self.k.value), str(self.gt.value))
        if key not in self._outcomes:
            self._outcomes[key] = query_outcomes(self.result, *key)
        return self._outcomes[key]

    def visible_queries(self) -> list[str]:
        """Query keys of the current subset that pass the current filter, in study order."""
        o = self.outcomes()
        o = o[o["subset"].map(subset_alias) == self.subset.value]
        return filter_outcomes(o, self.filter.value)["qkey"].tolist()

    def _query_label(self, qkey: str) -> str:
        row = self.queries.loc[qkey]
        text = str(row["query"])
        return f"{row['query_id']}: {text[:90]}{'…' if len(text) > 90 else ''}"

    def _refresh_queries(self) -> None:
        keys = self.visible_queries()
        previous = self.query.value
        self._updating = True
        try:
            self.query.options = [(self._query_label(q), q) for q in keys]
            self.query.value = previous if previous in keys else (keys[0] if keys else None)
        finally:
            self._updating = False
        n_subset = int((self.outcomes()["subset"].map(subset_alias) == self.subset.value).sum())
        self.count.value = f"<span class='muted'>{len(keys)} of {n_subset} queries</span>"
        self.output.value = self.render()

    def _on_selection_change(self, _change) -> None:
        self._refresh_queries()

    def _on_view_change(self, _change) -> None:
        if not self._updating:
            self.output.value = self.render()

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

    def _stubs(self, qkey: str, gt: set[str]) -> str:
        s = self.result.stubs
        mine = s[(s["qkey"] == qkey) & (s["run"] == int(self.run.value))].sort_values("stub_idx")
        if mine.empty:
            return "<h4>Stubs</h4><p class='muted'>no stubs recorded for this query and run</p>"
        fell_back = bool(mine["fell_back"].iloc[0])
        parts = [f"<h4>Stubs ({len(mine)}{', fallback: the raw query' if fell_back else ''})</h4>"]
        for idx, name, reasoning in zip(mine["stub_idx"], mine["name"], mine["reasoning"], strict=True):
            top = self._ranked(qkey, "ptr", int(idx))
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

    def _method_column(self, qkey: str, method: str, gt: set[str]) -> str:
        o = self.outcomes().set_index("qkey").loc[qkey]
        top = self._ranked(qkey, method, -1)
        parts = [f"<div class='col method-{method}'><h3>{METHOD_NAMES[method]}</h3>",
                 f"<p>recall@{int(self.k.value)}: <b>{o[f'{method}_recall']:.3f}</b> "
                 f"({int(o[f'{method}_hits'])} ground-truth APIs in the top {int(self.k.value)})</p>",
                 "<h4>Ranking</h4>", self._list(top, gt, "hit")]
        if method == "ptr":
            parts.append(self._stubs(qkey, gt))
        parts.append(self._plan(qkey, method, gt))
        parts.append("</div>")
        return "".join(parts)

    def methods_shown(self) -> list[str]:
        return ["rtp", "ptr"] if self.method.value == "both" else [self.method.value]

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
        """Show one query by key, switching subset (and filter to ``all``) when needed."""
        subset = subset_alias(str(self.queries.loc[qkey, "subset"]))
        if self.subset.value != subset:
            self.subset.value = subset
        if qkey not in self.visible_queries():
            self.filter.value = "all"
        self.query.value = qkey

    def _repr_mimebundle_(self, include=None, exclude=None) -> dict:
        """The live widget and, for a copy without a kernel, a static rendering of the shown query."""
        bundle = dict(self.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
        bundle["text/html"] = self.render() + self._provenance_html()
        bundle["text/plain"] = f"QueryExplorer ({len(self.queries)} queries)"
        return bundle
