"""The explorer's navigation: the view as a link's query string, and the run's family of stored studies, each
loaded when switched to and searched across."""

from __future__ import annotations

from urllib.parse import parse_qsl, quote, urlencode

from ..data.markdown import html_text
from ..study.stored import StudyResult
from .data import (
    ALL_SUBSETS,
    MEAN_RUNS,
    SORTS,
    STATE_KEYS,
    api_labels,
    method_label,
    run_options,
    search_queries,
    stored_registry,
)
from .views import MAX_K, study_views, with_fused

MAX_SEARCH = 200  # characters of a link's search kept


class QueryNavigation:
    """State and study family, as methods of :class:`~toolbench_lib.explorer.widget.QueryExplorer`."""

    def switch_run(self, name: str) -> None:
        """Show another stored study of the family, read now (the kernel holds one); the search is kept."""
        if name == self.run_name:
            return
        folder = next(e.folder for e in self.entries if e.run_name == name)
        result = StudyResult.load(folder)
        views = study_views(folder, result)
        self.labels = api_labels(stored_registry(result, self.processed_dir))
        self.views, self.source, self.run_name = views, f"{name}/{folder.parent.name}/{folder.name}", name
        self._bind(with_fused(result, views))
        with self._quiet():
            self.study.value = name
        self._study_controls(*self.methods, self.subset.value, self.run.value)
        self.provenance.value = self._provenance_html()
        self._relabel()
        self._refresh()

    def _study_controls(self, a: str, b: str, subset: str | None, run: int | str | None) -> None:
        """The method, subset and run controls offer the bound study's; ``a``, ``b``, ``subset``, ``run``
        (and the more methods picked) are kept where it has them."""
        methods = list(self.result.methods)
        subsets = list(dict.fromkeys(self._base["subset"]))
        with self._quiet():
            more = tuple(m for m in self.more.value if m in methods)
            for control in (self.method_a, self.method_b, self.more):
                control.options = [(method_label(m), m) for m in methods]
            self.more.value = more  # (new options empty a multiple choice)
            self.method_a.value = a if a in methods else methods[0]
            self.method_b.value = b if b in methods else methods[min(1, len(methods) - 1)]
            self.subset.options = [*subsets, ALL_SUBSETS]
            self.subset.value = subset if subset in self.subset.options else subsets[0] if subsets else None
            self.run.options = run_options(self._study_runs)
            values = [v for _, v in self.run.options]
            self.run.value = run if run in values else values[0]
            self.k.max = min(MAX_K, self.depth)  # k beyond the study's depth is moved down to it

    def _on_study_change(self, _change) -> None:
        if not self._updating and self.study.value != self.run_name:
            self.switch_run(str(self.study.value))

    def _switch_to_found(self) -> None:
        if self._elsewhere:
            name, qkey = self._elsewhere[0]
            self.switch_run(name)
            if qkey in self.queries.index:
                self.select(qkey)

    def _draw_elsewhere(self) -> None:
        """Where a search that finds no query of this study finds one: the run named, a button to go."""
        term = str(self.search.value).strip()
        found_here = bool(term) and bool(self._searched(term).any())
        self._elsewhere = [(name, str(k)) for name, q in self.family_queries.items()  # [(run, query key)]
                           if term and not found_here and name != self.run_name
                           for k in search_queries(q, term)["qkey"].head(1)]
        if not self._elsewhere:
            self.switch.layout.display = "none"
            self._show_problems()
            return
        name, qkey = self._elsewhere[0]
        runs = sorted({n for n, _ in self._elsewhere})
        also = f" (also in {html_text(', '.join(runs[1:]))})" if len(runs) > 1 else ""
        self.message.value = ("<div class='qx'><p class='qx-elsewhere' role='status'>“"
                              f"{html_text(term)}” is not in {html_text(str(self.run_name))}: query "
                              f"<code>{html_text(qkey)}</code> is in the study <b>{html_text(name)}</b>"
                              f"{also}</p></div>")
        self.switch.description = f"open it in {name}"
        self.switch.layout.display = None

    def state(self) -> dict[str, str]:
        """The view as strings, by the keys of :data:`STATE_KEYS` that have a value."""
        column, desc = self._sort
        own = {"run_name": self.run_name, "a": self.methods[0], "b": self.methods[1], "sort": column,
               "more": ",".join(str(m) for m in self.more.value), "desc": "1" if desc else "0",
               "page": str(self._page + 1), "query": self.query.value}  # the others: a control's value
        out = {key: own[key] if key in own else str(getattr(self, key).value) for key in STATE_KEYS}
        return {key: value for key, value in out.items() if value not in (None, "")}

    def state_query(self) -> str:
        """The view as a URL query string (``run=0&subset=G2&...``)."""
        return urlencode(self.state(), quote_via=quote, safe=":@")

    def apply_state(self, query_string: str | dict) -> list[str]:
        """Open the view a query string (or dict) describes; what cannot be used is left as it is and
        listed, one line each (also shown above the table)."""
        given = dict(parse_qsl(query_string)) if isinstance(query_string, str) else dict(query_string)
        if not given:  # the view as opened: nothing to recompute
            self.problems = []
            self._show_problems()
            return []
        problems = [f"link: ignored {key}={value!r} (not a setting of the explorer)"
                    for key, value in given.items() if key not in STATE_KEYS]
        with self._quiet():
            names = [value for _, value in self.method_a.options]
            for key in [key for key in ("a", "b", "more") if key in given]:
                wanted = [m for m in given[key].split(",") if m] if key == "more" else [given[key]]
                bad = [m for m in wanted if m not in names]
                if key == "more":
                    self.more.value = tuple(m for m in wanted if m in names)
                elif not bad:
                    getattr(self, f"method_{key}").value = wanted[0]
                if bad:
                    problems.append(f"link: ignored {key}={','.join(bad)!r} (the study's methods: "
                                    f"{', '.join(names)})")
            self._relabel()
            for key in [key for key in ("run", "subset", "filter", "show", "gt") if key in given]:
                control = getattr(self, key)
                allowed = [str(v if not isinstance(v, tuple) else v[1]) for v in control.options]
                if given[key] in allowed:
                    value = given[key]
                    control.value = int(value) if key == "run" and value != MEAN_RUNS else value
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
                self.search.value = given["search"][:MAX_SEARCH]
                if len(given["search"]) > MAX_SEARCH:
                    problems.append(f"link: search shortened to its first {MAX_SEARCH} characters")
            if given.get("sort") in SORTS:
                self._sort = (given["sort"], given.get("desc", "1") != "0")
            elif "sort" in given:
                problems.append(f"link: ignored sort={given['sort']!r} (one of {', '.join(SORTS)})")
        wanted = given.get("query")
        if wanted is not None and wanted not in self.queries.index:
            problems.append(f"link: ignored query={wanted!r} (no such query in this study)")
            wanted = None
        self._refresh(prefer=wanted)
        if wanted is not None and self.query.value != wanted:
            self.select(wanted)
        if "page" in given:  # a turned page keeps its query selected: the page comes after it
            try:
                self.turn_page(int(given["page"]) - 1 - self._page)
            except ValueError:
                problems.append(f"link: ignored page={given['page']!r} (a page number)")
        self.problems = problems
        self._show_problems()
        return problems

    def _show_problems(self) -> None:
        self.message.value = "".join(f"<div class='qx'><p class='muted'>{html_text(p)}</p></div>"
                                     for p in self.problems)

