"""The HTML of the query explorer: the summary line, the table and one query's view. Every untrusted text is
escaped where it is written (:func:`toolbench_lib.data.markdown.html_text`)."""

from __future__ import annotations

import html
import json

import pandas as pd

from ..data.markdown import html_text
from ..data.queries import subset_alias
from ..retrieval.ltr_features import feature_words
from ..retrieval.methods import describe_method
from .data import ALL_SUBSETS, NO_PLAN, NO_QUERY, PAGE_ROWS, _ids, filter_phrase, method_label
from .scores import DIGEST_COLUMNS

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
.qx .muted {color: #595959}
.query-explorer.qx-busy {cursor: progress}
.query-explorer.qx-busy .qx-output, .query-explorer.qx-busy .qx-table {opacity: 0.55}
.query-explorer.qx-busy .qx-count::before {content: "updating… "; font-style: italic}
.qx .tag {color: #1a1a1a; font-weight: normal}
.qx .tag.kept {background: #d7ecdd} .qx .tag.dropped {background: #f9e3e3}
.query-explorer :focus-visible, .query-explorer button:focus, .query-explorer input:focus,
.query-explorer select:focus {outline: 3px solid #1f5fbf !important; outline-offset: 2px}
.qx table.steps td, .qx table.steps th {padding: 2px 6px; text-align: left; vertical-align: top}
.qx table.qtable {border-collapse: collapse; width: 100%; table-layout: fixed}
.qx table.qtable td, .qx table.qtable th {padding: 2px 6px; text-align: left; border-bottom: 1px solid #eee}
.qx table.qtable .num {text-align: right; font-variant-numeric: tabular-nums}
</style>"""


GRID_STYLE = """<style>
.qx-grid {border-collapse: collapse; width: 100%; table-layout: fixed; font-family: sans-serif;
  font-size: 13px}
.qx-grid th, .qx-grid td {padding: 2px 6px; text-align: left; border-bottom: 1px solid #ddd;
  overflow: hidden; text-overflow: ellipsis; white-space: nowrap}
.qx-grid .num {text-align: right; font-variant-numeric: tabular-nums; width: 96px}
.qx-grid .pos {color: #116329} .qx-grid .neg {color: #a40e26}
.qx-grid thead th {width: 96px} .qx-grid thead th.qx-h-text {width: auto}
.qx-grid thead th.qx-h-subset {width: 56px}
.qx-grid thead th.qx-h-query {width: 104px}
.qx-grid button {font: inherit; background: #f2f2f2; color: #1a1a1a; border: 1px solid #767676;
  border-radius: 3px; padding: 1px 6px; cursor: pointer; max-width: 100%; overflow: hidden;
  text-overflow: ellipsis}
.qx-grid thead button {background: none; border: none; font-weight: bold; padding: 0}
.qx-grid tr[aria-current] {background: #e8f0fb} .qx-grid button.qx-current {background: #1f5fbf; color: #fff}
.qx-grid button:focus-visible {outline: 3px solid #1f5fbf; outline-offset: 1px}
.qx-caption {text-align: left; color: #595959; font-size: 12px; caption-side: top}
</style>"""
NUMBERS = ("a", "b", "gap")  # the table's numeric columns
KEPT = "<span class='tag kept' data-merge='kept'>kept in the final top k</span>"
DROPPED = "<span class='tag dropped' data-merge='dropped'>dropped by the merge</span>"


def _cells(r: pd.Series) -> dict[str, str]:
    """A table row's cells as shown: its query id, set, text, both recalls, the gap and the winner."""
    return {"query": html_text(str(r["query_id"])), "subset": html_text(str(r["subset"])),
            "text": html_text(str(r["text"])), "a": f"{r['a']:.3f}", "b": f"{r['b']:.3f}",
            "gap": f"{r['gap']:+.3f}", "winner": html_text(str(r["winner"]))}


class QueryRendering:
    """The explorer's HTML, as methods of :class:`~toolbench_lib.explorer.widget.QueryExplorer`."""

    def _scope(self) -> str:
        """The view's queries in words: the search or the subset, then the active filter and how many queries
        the scope holds without it."""
        term, subset, name = str(self.search.value).strip(), str(self.subset.value), str(self.filter.value)
        scope = (f"matching “{html_text(term)}” in all subsets" if term
                 else "in all subsets" if subset == ALL_SUBSETS else f"in {html_text(subset)}")
        if name == "all":
            return scope
        phrase = filter_phrase(name, *self.methods, len(self.selected))
        return (f"{scope} with the filter <i class='qx-active-filter'>{html_text(phrase)}</i> "
                f"({self._n_unfiltered} without it)")

    def _summary_html(self, frame: pd.DataFrame) -> str:
        a, b = (html_text(method_label(m)) for m in self.methods)
        s, k = self.summary(frame), int(self.k.value)
        if not s.n:
            return f"<span class='muted'>0 queries {self._scope()}</span>"
        return (f"<b>{s.n}</b> {'query' if s.n == 1 else 'queries'} {self._scope()} · "
                f"mean recall@{k}: {a} <b>{s.mean_a:.3f}</b>, {b} <b>{s.mean_b:.3f}</b> · {a} wins "
                f"<b>{s.a_wins}</b>, ties <b>{s.ties}</b>, {b} wins <b>{s.b_wins}</b>")

    def _best_html(self) -> str:
        best, mean = self._best
        if best is None:
            return ""
        scope = "this view's queries" if self._multi_subset() else html_text(str(self.subset.value))
        return (f"<p class='qx-best'>★ Best single architecture of {scope} (mean recall@{int(self.k.value)} "
                f"before the filter): <b>{html_text(method_label(best, True))}</b> {mean:.3f}</p>")

    def _digest_html(self, frame: pd.DataFrame) -> str:
        """The summary of the view's queries: per selected method, where its ground truth sat and what its
        wrong APIs were (:func:`.scores.digest`), their common categories and tools, the best single."""
        self._best = self.best_single()
        if frame.empty:
            return f"<div class='qx qx-digest'>{self._best_html()}</div>"
        table, (cats, tools) = self.digest(frame)
        k = int(self.k.value)
        runs = f", pooled over {len(self._scored_runs())} runs" if self.mean_of_runs else ""
        depth = self.depth  # of the stored rankings
        heads = ["method", f"ground truth in the top {k}",
                 f"at ranks {k + 1}–{depth}" if k < depth else f"after rank {k}", f"beyond {depth}",
                 "found only by a stub", "wrong APIs of a ground-truth API's tool"]
        body = "".join(
            f"<tr><th scope='row'>{html_text(method_label(r['method']))}"
            f"{' ★' if r['method'] == self._best[0] else ''}</th>"
            + "".join(f"<td class='num'>{'–' if pd.isna(r[c]) else f'{100 * r[c]:.0f}%'}</td>"
                      for c in DIGEST_COLUMNS[1:])
            + "</tr>" for _, r in table.iterrows())
        named = "; ".join(f"{what}: " + ", ".join(f"{html_text(n)} ({c})" for n, c in pairs)
                          for what, pairs in (("categories", cats), ("tools", tools)) if pairs)
        return (f"<div class='qx qx-digest'>{self._best_html()}<table class='qtable qx-digest-table'>"
                f"<caption class='muted'>What the {len(frame)} queries of the view share (shares of their "
                f"ground-truth APIs{runs}; ★ the best single architecture)</caption><thead><tr>"
                + "".join(f"<th scope='col'>{html_text(h)}</th>" for h in heads)
                + f"</tr></thead><tbody>{body}</tbody></table>"
                f"<p class='muted'>Their ground truth's most frequent {named}</p></div>")

    def _multi_subset(self) -> bool:
        return bool(str(self.search.value).strip()) or self.subset.value == ALL_SUBSETS

    def header_labels(self) -> dict[str, str]:
        """The table's column headers as shown (the sorted one with its arrow); ``subset`` only when the
        view spans several sets."""
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
        if not self._multi_subset():
            del names["subset"]
        return names

    def _draw_table(self, frame: pd.DataFrame) -> None:
        """The table's page (turned back within its pages): a <table> whose header buttons sort and whose
        row buttons show a query, and the pager under it."""
        n = len(frame)
        pages = max(1, -(-n // PAGE_ROWS))
        self._page = min(max(0, self._page), pages - 1)
        start = self._page * PAGE_ROWS
        page = frame.iloc[start:start + PAGE_ROWS]
        self._rows_shown = page["qkey"].tolist()
        names = self.header_labels()
        column, desc = self._sort
        sorted_by = "gap" if column == "abs_gap" else column
        aria = f" aria-sort='{'descending' if desc else 'ascending'}'"
        head = "".join(f"<th scope='col' class='qx-h-{c}{' num' * (c in NUMBERS)}'{aria * (c == sorted_by)}>"
                       f"<button type='button' class='qx-sort-{c}' data-act='sort|{c}' title='sort by {c}'>"
                       f"{html_text(text)}</button></th>" for c, text in names.items())
        body = []
        for _, r in page.iterrows():
            current, values = r["qkey"] == self.query.value, _cells(r)
            sign = "pos" if r["gap"] > 0 else "neg" if r["gap"] < 0 else ""
            kind = dict(text=" class='text'", a=" class='num'", b=" class='num'", gap=f" class='num {sign}'")
            cells = [f"<th scope='row'><button type='button' class='qx-pick{' qx-current' * current}' "
                     f"data-act='pick|{html.escape(str(r['qkey']), quote=True)}' "
                     f"title='{html_text(str(r['text'])[:300], quote=True)}'>{values['query']}</button></th>",
                     *(f"<td{kind.get(c, '')}>{values[c]}</td>" for c in names if c != "query")]
            mark = " aria-current='true'" if current else ""
            body.append(f"<tr class='qx-row'{mark}>{''.join(cells)}</tr>")
        self.grid.value = (f"{GRID_STYLE}<table class='qx-grid'><caption class='qx-caption'>Queries of the "
                           f"view (a header sorts by its column; a query's button shows it)</caption><thead>"
                           f"<tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>")
        self.page_label.value = (f"<span class='muted'>rows {start + 1}–{min(n, start + PAGE_ROWS)} of {n} "
                                 f"(page {self._page + 1} of {pages})</span>" if n else
                                 f"<span class='muted'>{NO_QUERY}</span>")
        self.prev_page.disabled = self._page == 0
        self.next_page.disabled = self._page >= pages - 1

    def table_html(self, rows: int = PAGE_ROWS) -> str:
        """The summary and the table's first ``rows`` rows as static HTML (for a copy without a kernel)."""
        frame = self.table_frame()
        names = self.header_labels()
        width = {"query": "12%", "subset": "6%", "text": "auto", "a": "11%", "b": "11%", "gap": "10%",
                 "winner": "10%"}
        head = "".join(f"<th style='width:{width[c]}' class='{'num' if c in NUMBERS else ''}'>"
                       f"{html_text(text)}</th>" for c, text in names.items())
        body = "".join("<tr>" + "".join(f"<td class='{'num' if c in NUMBERS else ''}'>{values[c]}</td>"
                                        for c in names) + "</tr>"
                       for values in (_cells(r) for _, r in frame.head(rows).iterrows()))
        more = (f"<p class='muted'>first {min(rows, len(frame))} of {len(frame)} rows</p>"
                if len(frame) > rows else "")
        return (f"<div class='qx'><p>{self._summary_html(frame)}</p></div>{self._digest_html(frame)}"
                f"<div class='qx'><table class='qtable'><thead><tr>{head}"
                f"</tr></thead><tbody>{body}</tbody></table>{more}</div>")

    def _api(self, api_id: str) -> str:
        label, code = self.labels.get(api_id), f"<code>{html_text(api_id)}</code>"
        return f"{html_text(label)} {code}" if label else code

    def _ranked(self, qkey: str, method: str, text_idx: int | None = None) -> pd.DataFrame:
        """The method's top k of the run: the final ranking, or with ``text_idx`` that text's own (from the
        study's ``rankings`` or ``text_rankings``, grouped by query once)."""
        name = "rankings" if text_idx is None else "text_rankings"
        table = getattr(self.result, name)
        if name not in self._hits_by_query:
            self._hits_by_query[name] = dict(tuple(table.groupby("qkey", sort=False)))
        h = self._hits_by_query[name].get(qkey, table.iloc[0:0])
        mine = h[(h["method"] == method) & (h["run"] == self.shown_run)]
        if text_idx is not None:
            mine = mine[mine["text_idx"] == text_idx]
        return mine.sort_values("rank").head(int(self.k.value))

    def _list(self, hits: pd.DataFrame, gt: set[str], hit_class: str, final: set[str] | None = None) -> str:
        """A ranking as a list, ground-truth hits checked; with ``final`` (the method's final top k), each
        item marked as kept by the merge or dropped by it."""
        items = []
        for api_id, score in zip(hits["api_id"], hits["score"], strict=True):
            cls, mark = (f' class="{hit_class}"', "✓ ") if api_id in gt else ("", "")
            merge = "" if final is None else KEPT if api_id in final else DROPPED
            items.append(f"<li{cls}>{mark}{self._api(api_id)} "
                         f"<span class='muted'>{score:.3f}</span>{merge}</li>")
        return "<ol>" + "".join(items) + "</ol>" if items else "<p class='muted'>no stored hits</p>"

    def _ground_truth(self, qkey: str) -> str:
        row = self.queries.loc[qkey]
        candidates, relevant = _ids(row["candidates"]), set(_ids(row["relevant"]))
        active = self.gt.value
        items = []
        for api_id in [*candidates, *sorted(relevant - set(candidates))]:
            tags = [t for t, ids in (("candidates", candidates), ("relevant", relevant)) if api_id in ids]
            badges = "".join(f"<span class='tag{' active' if t == active else ''}'>{t}</span>" for t in tags)
            items.append(f"<li>{self._api(api_id)}{badges}</li>")
        body = "<ul>" + "".join(items) + "</ul>" if items else "<p class='muted'>no ground truth</p>"
        return (f"<h4>Ground truth ({len(candidates)} candidates, {len(relevant)} relevant; "
                f"hits are marked against <b>{active}</b>)</h4>{body}")

    def _stubs(self, qkey: str, gt: set[str], method: str) -> str:
        s = self.result.stubs
        mine = s[(s["qkey"] == qkey) & (s["run"] == self.shown_run)].sort_values("stub_idx")
        if mine.empty:
            return "<h4>Stubs</h4><p class='muted'>no stubs recorded for this query and run</p>"
        fell_back = bool(mine["fell_back"].iloc[0])
        parts = [f"<h4>Stubs ({len(mine)}{', fallback: the raw query' if fell_back else ''})</h4>"]
        final = set(self._ranked(qkey, method)["api_id"])
        for idx, name, reasoning in zip(mine["stub_idx"], mine["name"], mine["reasoning"], strict=True):
            parts.append(f"<p class='qx-stub'><b>{html_text(str(name))}</b>: {html_text(str(reasoning))}</p>"
                         + self._list(self._ranked(qkey, method, int(idx)), gt, "stub-hit", final))
        return "".join(parts)

    def _plan(self, qkey: str, method: str, gt: set[str]) -> str:
        p, run = self.result.plans, self.shown_run
        mine = p if p.empty else p[(p["qkey"] == qkey) & (p["method"] == method) & (p["run"] == run)]
        if mine.empty:
            return f"<h4>Plan</h4><p class='muted'>{NO_PLAN}</p>"
        plan = mine.iloc[0]
        verdict, fid = plan.get("verdict"), plan.get("fidelity")
        verdict = "not judged" if pd.isna(verdict) else str(verdict)
        fid_text = "n/a" if pd.isna(fid) else f"{float(fid):.2f}"
        head = (f"<h4>Plan</h4><p>verdict: <b>{html_text(verdict)}</b>, refusal: "
                f"<b>{'yes' if bool(plan['refusal']) else 'no'}</b>, steps: {int(plan['n_steps'])}, "
                f"fidelity: {fid_text}</p>")
        steps = json.loads(plan["steps_json"]) if isinstance(plan.get("steps_json"), str) else []
        rows = "".join("<tr>" + "".join(f"<td>{html_text(st.get(c, i + 1 if c == 'step' else ''))}</td>"
                                        for c in ("step", "tool_name", "api_name", "purpose")) + "</tr>"
                       for i, st in enumerate(steps) if isinstance(st, dict))
        table = (f"<table class='steps'><tr><th>step</th><th>tool</th><th>API</th><th>purpose</th></tr>"
                 f"{rows}</table>") if rows else ""
        named_items = "".join(
            (f'<li class="named-hit">✓ {self._api(a)}</li>' if a in gt else f"<li>{self._api(a)}</li>")
            for a in _ids(plan.get("named_ids")))
        named_html = f"<p>APIs named (resolved):</p><ul>{named_items}</ul>" if named_items else ""
        return head + table + named_html

    def _has_texts(self, method: str) -> bool:
        """Whether a method searched with stubs: its hits rank texts beyond the first (PtR)."""
        if method not in self._texts:
            h = self.result.text_rankings
            self._texts[method] = method.partition("@")[0] == "ptr" or bool(
                ((h["method"] == method) & (h["text_idx"] >= 1)).any())
        return self._texts[method]

    def _learned(self, qkey: str, method: str) -> str:
        """For a learned ranker: the features behind its top API (empty for any other method)."""
        if self.views is None or method not in self.views.learned_methods:
            return ""
        f = self.views.features(method, self.shown_run, qkey, 1)
        if f.empty:
            return "<h4>Why the top API</h4><p class='muted'>no features stored for this query</p>"
        values = dict(zip(f["feature"], f["value"], strict=True))
        n_stubs = int(values.get("n_stubs", 0)) or None
        said = [w for w in (feature_words(n, v, n_stubs) for n, v in values.items()) if w]
        rows = "".join(f"<tr><td><code>{html_text(str(n))}</code></td><td class='num'>{v:.3f}</td></tr>"
                       for n, v in values.items() if v)
        return (f"<h4>Why the top API</h4><p>{self._api(str(f['api_id'].iloc[0]))}: out-of-fold score "
                f"{float(f['score'].iloc[0]):.3f}, because it is "
                f"{html_text('; '.join(said) or 'in none of the rankings')}.</p>"
                f"<details class='qx-raw'><summary>its non-zero features, as the ranker names them</summary>"
                f"<table class='steps qx-features'><thead><tr><th scope='col'>feature</th>"
                f"<th scope='col'>value</th></tr></thead><tbody>{rows}</tbody></table></details>")

    def _method_column(self, qkey: str, method: str, gt: set[str]) -> str:
        scores = self._method_scores(method)
        pos = int(self._base.index[self._base["qkey"] == qkey][0])
        recall, hits = float(scores.iloc[pos, 0]), float(scores.iloc[pos, 1])
        k = int(self.k.value)
        name = html_text(method_label(method, True))
        if method == self._best[0]:
            name += " <span class='tag qx-best-tag'>★ best single architecture of the set</span>"
        found = (f"{hits:.2f} ground-truth APIs in the top {k}, mean of {len(self._study_runs)} runs; the "
                 f"ranking below is run {self.shown_run}'s" if self.mean_of_runs
                 else f"{hits:.0f} ground-truth APIs in the top {k}")
        return "".join([f"<div class='col method-{html_text(method)}'><h3>{name}</h3>",
                        f"<p class='muted qx-desc'>{html_text(describe_method(method))}</p>",
                        f"<p>recall@{k}: <b>{recall:.3f}</b> ({found})</p>",
                        "<h4>Ranking</h4>", self._list(self._ranked(qkey, method), gt, "hit"),
                        self._stubs(qkey, gt, method) if self._has_texts(method) else "",
                        self._learned(qkey, method), self._plan(qkey, method, gt), "</div>"])

    def render(self) -> str:
        """The HTML of the selected query under the current settings."""
        qkey = self.query.value
        if qkey is None:
            return f"{STYLE}<div class='qx'><p class='muted'>{NO_QUERY}</p></div>"
        row = self.queries.loc[qkey]
        gt = set(_ids(row[self.gt.value]))
        a, b = self.methods  # the columns shown: every selected method (A, B, then the others picked) or one
        shown = {"both": self.selected, "a": [a], "b": [b]}[str(self.show.value)]
        cols = "".join(self._method_column(qkey, m, gt) for m in shown)
        runs = (f"recall: mean of {len(self._study_runs)} runs; rankings, stubs and plans: run "
                f"{self.shown_run}" if self.mean_of_runs else f"run {int(self.run.value)}")
        return (f"{STYLE}<div class='qx'><h3>{html_text(subset_alias(str(row['subset'])))} query "
                f"{html_text(str(row['query_id']))} <span class='muted'>({runs}, "
                f"k = {int(self.k.value)})</span></h3><blockquote>{html_text(str(row['query']))}"
                f"</blockquote>{self._ground_truth(qkey)}<div class='cols'>{cols}</div></div>")

