"""The query explorer: widgets drive the HTML, which shows stored rankings, hits, stubs and plans; search,
the sortable table, its summary, any two methods and the view's link."""

from __future__ import annotations

import json
import re
from collections import Counter
from html import escape
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from toolbench_lib.eval.evaluation import per_query_runs
from toolbench_lib.explorer.data import FILTERS, NO_PLAN, NO_QUERY, PAGE_ROWS, query_outcomes, run_name_of
from toolbench_lib.explorer.widget import QueryExplorer
from toolbench_lib.study.stored import StudyResult

from .hand_tables import split_hits, study_of_hits, with_tables

DEPTH = 20
N_APIS = 40
# Per query: subset, ranks (1-based) of its ground-truth APIs in RtP's ranking, in PtR's run 0 and run 1.
DESIGN = {
    "G1_instruction:0": ("G1_instruction", [1, 4], [2], [1, 2, 3]),
    "G1_instruction:1": ("G1_instruction", [], [], [6]),
    "G1_instruction:2": ("G1_instruction", [3], [1, 5], []),
    "G1_instruction:3": ("G1_instruction", [2, 8], [9], [2]),
    "G2_category_original:4": ("G2_category_original", [1], [1], [4]),
    "G2_category_original:5": ("G2_category_original", [], [2, 3], [1]),
    "G2_category_original:6": ("G2_category_original", [7], [3], []),
}


def _registry() -> pd.DataFrame:
    rows = [{"api_id": f"Cat{i % 3}/tool{i // 4}/api{i}", "category": f"Cat{i % 3}",
             "tool_name": f"Tool {i // 4}", "api_name": f"Endpoint {i}"} for i in range(N_APIS)]
    return pd.DataFrame(rows)


def _ranking(gt: list[str], ranks: list[int], others: list[str]) -> list[str]:
    """A depth-20 ranking with ``gt[j]`` at ``ranks[j]`` and non-ground-truth APIs elsewhere."""
    out: list[str | None] = [None] * DEPTH
    for api, rank in zip(gt, ranks, strict=False):
        out[rank - 1] = api
    fill = iter(others)
    return [a if a is not None else next(fill) for a in out]


def _hit_rows(qkey: str, method: str, run: int, text_idx: int, ranking: list[str]) -> list[dict]:
    return [{"qkey": qkey, "method": method, "run": run, "text_idx": text_idx, "rank": r + 1, "row": 0,
             "api_id": a, "score": 0.9 - 0.01 * r} for r, a in enumerate(ranking)]


def _steps(names: list[tuple[str, str]]) -> str:
    return json.dumps([{"step": i + 1, "tool_name": t, "api_name": a, "purpose": f"purpose {i + 1}"}
                       for i, (t, a) in enumerate(names)])


@pytest.fixture(scope="module")
def study() -> tuple[pd.DataFrame, StudyResult]:
    reg = _registry()
    ids = reg["api_id"].tolist()
    rng = np.random.default_rng(0)
    queries, hits, stubs = [], [], []
    for n, (qkey, (subset, rtp, ptr0, ptr1)) in enumerate(DESIGN.items()):
        gt = ids[3 * n: 3 * n + 3]
        others = [a for a in rng.permutation(ids).tolist() if a not in gt]
        queries.append({"qkey": qkey, "subset": subset, "query_id": qkey.split(":")[1],
                        "query": f"Please do task number {n} for me.", "candidates": gt, "relevant": gt[:1]})
        hits += _hit_rows(qkey, "rtp", -1, 0, _ranking(gt, rtp, others))
        hits += _hit_rows(qkey, "rtp", -1, -1, _ranking(gt, rtp, others))
        for run, ranks in ((0, ptr0), (1, ptr1)):
            merged = _ranking(gt, ranks, others)
            hits += _hit_rows(qkey, "ptr", run, -1, merged)
            hits += _hit_rows(qkey, "ptr", run, 0, merged)
            hits += _hit_rows(qkey, "ptr", run, 1, _ranking(gt[1:], [1], others[::-1]))
            for i in range(2):
                stubs.append({"qkey": qkey, "run": run, "stub_idx": i, "name": f"Stub {n}-{run}-{i}",
                              "reasoning": f"because {i}", "fell_back": False})
    q0 = "G1_instruction:0"
    plans = pd.DataFrame([
        {"qkey": q0, "method": "rtp", "run": 0, "refusal": False, "parse_ok": True, "n_steps": 2,
         "named_ids": [ids[0], ids[30]], "fidelity": 1.0, "verdict": "Solved",
         "steps_json": _steps([("Tool 0", "Endpoint 0"), ("Tool 7", "Endpoint 30")])},
        {"qkey": "G1_instruction:2", "method": "ptr", "run": 0, "refusal": True, "parse_ok": True,
         "n_steps": 0, "named_ids": [], "fidelity": np.nan, "verdict": "Unsolved", "steps_json": "[]"},
    ])
    prov = {"settings": {"runs": 2, "depth": DEPTH, "k": 5, "methods": ["rtp", "ptr"]}}
    result = study_of_hits(pd.DataFrame(queries), pd.DataFrame(stubs), pd.DataFrame(hits), plans,
                           pd.DataFrame(), prov)
    return reg, result


def _explorer(study, run=0, **kw) -> QueryExplorer:
    """The explorer of the hand-made study, on run 0 unless told (the tests below count one run by hand)."""
    reg, result = study
    return QueryExplorer(None, result, registry=reg, run=run, **kw)


def _row_ids(ex: QueryExplorer) -> list[str]:
    """The query ids of the table's rows, as its HTML shows them."""
    pattern = r"<button type='button' class='qx-pick[^']*' data-act='[^']*' title='[^']*'>([^<]*)</button>"
    return re.findall(pattern, ex.grid.value)


def _section(html: str, start: str, end: str) -> str:
    i = html.index(start)
    return html[i: html.index(end, i)]


def _top(result: StudyResult, qkey: str, method: str, run: int, k: int,
         text_idx: int | None = None) -> list[str]:
    """The top ``k`` of a method's final ranking (or of one searched text's own ranking)."""
    h = result.rankings if text_idx is None else result.text_rankings
    h = h[(h["qkey"] == qkey) & (h["method"] == method) & (h["run"] == run)]
    if text_idx is not None:
        h = h[h["text_idx"] == text_idx]
    return h.sort_values("rank")["api_id"].head(k).tolist()


def test_filter_ptr_wins_lists_exactly_those_queries(study):
    _, result = study
    ex = _explorer(study)
    ex.subset.value = "G2"
    ex.run.value = 1
    ex.k.value = 3
    ex.filter.value = "b_wins"
    pq = per_query_runs(result, 3)
    pq = pq[(pq["run"] == 1) & (pq["subset"] == "G2_category_original")]
    wide = pq.pivot(index="qkey", columns="method", values="recall")
    expected = sorted(wide.index[wide["ptr"] > wide["rtp"]])
    shown = sorted(v for _, v in ex.query.options)
    assert shown == expected == ["G2_category_original:5"]
    ex.filter.value = "a_wins"
    assert sorted(v for _, v in ex.query.options) == sorted(wide.index[wide["rtp"] > wide["ptr"]])
    assert "<b>1</b> query in G2" in ex.count.value


def test_filters_partition_the_subset(study):
    ex = _explorer(study)
    for run in (0, 1):
        for k in (1, 5, 10):
            ex.run.value, ex.k.value = run, k
            shown = {}
            for name in FILTERS:
                ex.filter.value = name
                shown[name] = {v for _, v in ex.query.options}
            ties = shown["all"] - shown["a_wins"] - shown["b_wins"]
            assert not shown["a_wins"] & shown["b_wins"]
            assert shown["both_missed"] <= ties
            assert shown["both_hit"] | shown["both_missed"] | shown["a_wins"] | shown["b_wins"] \
                == shown["all"]
    ex.run.value, ex.k.value, ex.filter.value = 0, 5, "both_missed"
    assert [v for _, v in ex.query.options] == ["G1_instruction:1"]


def test_marked_hits_are_the_ground_truth_in_the_top_k(study):
    _, result = study
    ex = _explorer(study)
    gt_of = dict(zip(result.queries["qkey"], result.queries["candidates"], strict=True))
    for k in (1, 3, 5, 8):
        ex.k.value = k
        ex.filter.value = "all"
        for subset in ("G1", "G2"):
            ex.subset.value = subset
            for _, qkey in ex.query.options:
                ex.query.value = qkey
                for method, show in (("rtp", "a"), ("ptr", "b")):
                    ex.show.value = show
                    expected = len(set(_top(result, qkey, method, 0, k)) & set(gt_of[qkey]))
                    ranking = _section(ex.output.value, "<h4>Ranking</h4>", "</ol>")
                    assert ranking.count('<li class="hit">✓') == expected, (qkey, method, k)
    assert ex.output.value == ex.render()


def test_ground_truth_switch_marks_relevant_only(study):
    _, result = study
    ex = _explorer(study, k=5)
    ex.show.value = "a"
    ex.query.value = "G1_instruction:0"
    assert _section(ex.render(), "<h4>Ranking</h4>", "</ol>").count('class="hit"') == 2
    ex.gt.value = "relevant"
    # Only the first candidate is relevant; RtP ranks it first.
    assert _section(ex.render(), "<h4>Ranking</h4>", "</ol>").count('class="hit"') == 1
    html = ex.render()
    gt = _section(html, "<h4>Ground truth", "</ul>")
    assert gt.count("<li>") == 3 and gt.count(">relevant</span>") == 1
    assert "<span class='tag active'>relevant</span>" in gt


def test_k_sets_the_list_length(study):
    ex = _explorer(study)
    ex.show.value = "a"
    lengths = {}
    for k in (2, 7, 20):
        ex.k.value = k
        lengths[k] = _section(ex.output.value, "<h4>Ranking</h4>", "</ol>").count("<li")
    assert lengths == {2: 2, 7: 7, 20: 20}
    assert ex.k.max == 20 and ex.k.min == 1


def test_both_methods_side_by_side(study):
    _, result = study
    ex = _explorer(study, k=5)
    ex.query.value = "G1_instruction:0"
    html = ex.render()
    assert "method-rtp" in html and "method-ptr" in html
    gt = set(result.queries.loc[0, "candidates"])
    expected = sum(len(set(_top(result, "G1_instruction:0", m, 0, 5)) & gt) for m in ("rtp", "ptr"))
    assert html.count('<li class="hit">') == expected == 3
    ex.show.value = "b"
    assert "method-rtp" not in ex.render()


def test_stubs_show_their_own_top_hits(study):
    _, result = study
    ex = _explorer(study, k=4)
    ex.show.value = "b"
    ex.run.value = 1
    ex.query.value = "G1_instruction:3"
    html = ex.render()
    stubs_html = _section(html, "<h4>Stubs", "<h4>Plan")
    assert "Stub 3-1-0" in stubs_html and "Stub 3-1-1" in stubs_html and "Stub 3-0-0" not in stubs_html
    lists = re.findall(r"<ol>(.*?)</ol>", stubs_html)
    assert [li.count("<li") for li in lists] == [4, 4]
    gt = set(result.queries.set_index("qkey").loc["G1_instruction:3", "candidates"])
    for text_idx, li in enumerate(lists):
        expected = len(set(_top(result, "G1_instruction:3", "ptr", 1, 4, text_idx)) & gt)
        assert li.count('class="stub-hit"') == expected
    assert stubs_html.count('class="stub-hit"') >= 1


def test_plans_shown_where_recorded(study):
    ex = _explorer(study)
    ex.query.value = "G1_instruction:0"
    html = ex.render()
    rtp = _section(html, "method-rtp", "method-ptr")
    assert "Solved" in rtp and "Tool 7" in rtp and "Endpoint 30" in rtp and "purpose 2" in rtp
    assert "refusal: <b>no</b>" in rtp
    assert rtp.count('<li class="named-hit">') == 1  # api0 is ground truth, api30 is not
    assert NO_PLAN in _section(html, "method-ptr", "</div></div></div>")
    ex.query.value = "G1_instruction:2"
    ptr = _section(ex.render(), "method-ptr", "</div></div></div>")
    assert "refusal: <b>yes</b>" in ptr and "Unsolved" in ptr
    ex.run.value = 1
    assert NO_PLAN in ex.render()


def test_empty_filter_says_so(study):
    ex = _explorer(study)
    ex.subset.value = "G2"
    ex.run.value = 0
    ex.k.value = 5
    ex.filter.value = "both_missed"
    assert ex.query.value is None and NO_QUERY in ex.output.value


def test_outcomes_agree_with_a_count_by_hand(study):
    """Each query's hits and recall, read from the evaluation, against a count from the stored rankings."""
    _, result = study
    out = query_outcomes(result, 1, 5).set_index("qkey")
    truth = dict(zip(result.queries["qkey"], result.queries["candidates"], strict=True))
    h = result.rankings[(result.rankings["run"] == 1) & (result.rankings["rank"] <= 5)]
    for method in ("rtp", "ptr"):
        top = h[h["method"] == method].groupby("qkey")["api_id"].agg(set)
        hits = {q: len(top.get(q, set()) & set(truth[q])) for q in truth}
        assert out[f"{method}_hits"].to_dict() == hits and sum(hits.values()) > 0
        assert np.allclose(out[f"{method}_recall"], [hits[q] / len(truth[q]) for q in out.index])


@pytest.fixture(scope="module")
def real_study(slice_setup):
    from toolbench_lib.llm.rules import RulesBackend
    from toolbench_lib.study.result import StudySettings, run_study

    return run_study(slice_setup, RulesBackend(), StudySettings(runs=1, plan_limit=2), progress=False)


def test_explorer_on_a_real_study(slice_setup, real_study):
    ex = QueryExplorer(slice_setup, real_study)
    assert list(ex.subset.options) == ["G1", "G2", "G3", "all"]
    assert ex.run.options == (("run 0", 0),)  # one run: no mean to offer
    ex.subset.value = "G2"
    ex.filter.value = "b_wins"
    pq = per_query_runs(real_study, 5)
    pq = pq[pq["subset"] == "G2_category_original"].pivot(index="qkey", columns="method", values="recall")
    assert sorted(v for _, v in ex.query.options) == sorted(pq.index[pq["ptr"] > pq["rtp"]])
    ex.filter.value = "all"
    shown = {v for _, v in ex.query.options}
    keys = [q for q in real_study.queries["qkey"] if q in shown]  # study order: the first two were planned
    assert len(keys) == 15
    reg = slice_setup.ds.registry.set_index("api_id")
    ex.query.value = keys[0]
    html = ex.render()
    top = _top(real_study, keys[0], "rtp", 0, 5)
    assert escape(str(reg.loc[top[0], "api_name"])) in html
    assert NO_PLAN not in html and "verdict: <b>" in html
    ex.query.value = keys[2]
    assert ex.render().count(NO_PLAN) == 2
    ex.k.value = 3
    assert _section(ex.render(), "<h4>Ranking</h4>", "</ol>").count("<li") == 3


def test_one_output_holds_the_live_widget_and_its_static_rendering(study):
    ex = _explorer(study)
    ex.query.value = "G1_instruction:2"
    bundle = ex._repr_mimebundle_()
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"] == ex.widget.model_id
    assert ex.render() in bundle["text/html"] and "G1 query 2" in bundle["text/html"]
    assert "<table class='qtable'>" in bundle["text/html"]  # the summary and the table's first rows
    assert "overflow-wrap: anywhere" in bundle["text/html"]  # long API ids wrap instead of clipping


def test_changing_k_keeps_the_query_while_it_passes_the_filter(study):
    ex = _explorer(study)
    ex.subset.value, ex.filter.value = "G1", "all"
    ex.query.value = "G1_instruction:3"
    for k in (3, 8, 1, 20):
        ex.k.value = k
        assert ex.query.value == "G1_instruction:3" and "G1 query 3 " in ex.output.value
    ex.filter.value = "both_missed"
    kept = ex.query.value
    ex.k.value = 2
    visible = ex.visible_queries()
    assert ex.query.value == (kept if kept in visible else (visible[0] if visible else None))


def test_summary_counts_of_a_view_by_hand(study):
    # G1, run 0, k = 5 (DESIGN, three ground-truth APIs each): RtP 2/3, 0, 1/3, 1/3; PtR 1/3, 0, 2/3, 0.
    ex = _explorer(study, k=5)
    s = ex.summary()
    assert (s.n, s.a_wins, s.ties, s.b_wins) == (4, 2, 1, 1)
    assert s.mean_a == pytest.approx(1 / 3) and s.mean_b == pytest.approx(1 / 4)
    assert "mean recall@5: RtP <b>0.333</b>, PtR <b>0.250</b>" in ex.count.value
    assert "RtP wins <b>2</b>, ties <b>1</b>, PtR wins <b>1</b>" in ex.count.value
    ex.filter.value = "a_wins"
    assert (ex.summary().n, ex.summary().b_wins) == (2, 0) and "<b>2</b> queries in G1" in ex.count.value


def test_the_default_view_is_the_mean_of_runs_as_the_report_counts(study):
    """A study of two runs opens on their mean (the primary endpoint's basis): per query, each method's
    recall averaged over runs, and wins counted on those means; one run stays a choice, in the link too."""
    reg, result = study
    ex = QueryExplorer(None, result, registry=reg, k=5)
    assert ex.run.value == "mean" and ex.run.options[0] == ("mean of 2 runs", "mean")
    pq = per_query_runs(result, 5)
    pq = pq[pq["qkey"].str.startswith("G1_")]
    rtp = pq[pq["method"] == "rtp"].groupby("qkey")["recall"].mean()
    ptr = pq[pq["method"] == "ptr"].groupby("qkey")["recall"].mean()
    assert pq[pq["method"] == "ptr"]["run"].nunique() == 2
    s = ex.summary()
    assert s.mean_a == pytest.approx(rtp.mean()) and s.mean_b == pytest.approx(ptr.mean())
    assert (s.a_wins, s.b_wins) == (int((rtp > ptr + 1e-12).sum()), int((ptr > rtp + 1e-12).sum()))
    assert "recall: mean of 2 runs; rankings, stubs and plans: run 0" in ex.output.value
    assert "run=mean" in ex.state_query()
    ex.apply_state("run=1")
    assert ex.run.value == 1 and "(run 1, k = 5)" in ex.output.value
    ex.apply_state("run=mean")
    assert ex.run.value == "mean"


def test_what_the_view_shares_by_hand(study):
    """G1, run 0, k = 5 (DESIGN: three ground-truth APIs per query). RtP holds 4 of the 12 in its top 5,
    1 at rank 8, 7 nowhere; PtR 3, 1 (rank 9), 8; of PtR's 3, one (G1:2's second, rank 5) is not in RtP's
    top 5: found only by a stub. The best single architecture of G1 is RtP (1/3 against 1/4)."""
    reg, result = study
    ex = _explorer(study, k=5)
    table, (cats, tools) = ex.digest(ex.table_frame())
    t = table.set_index("method")
    assert t.loc["rtp", ["found", "missed_near", "missed_beyond"]].tolist() == pytest.approx([4 / 12, 1 / 12,
                                                                                           7 / 12])
    assert t.loc["ptr", ["found", "missed_near", "missed_beyond"]].tolist() == pytest.approx([3 / 12, 1 / 12,
                                                                                           8 / 12])
    assert t.loc["ptr", "stub_only"] == pytest.approx(1 / 3) and np.isnan(t.loc["rtp", "stub_only"])
    q = result.queries.set_index("qkey")
    for method in ("rtp", "ptr"):  # wrong APIs of a ground-truth API's tool, recounted
        wrong = siblings = 0
        for key, ids in result.ranking(method, 0).items():
            if not key.startswith("G1_"):
                continue
            gt = set(q.loc[key, "candidates"])
            gt_tools = {a.rsplit("/", 1)[0] for a in gt}
            for a in ids[:5]:
                if a not in gt:
                    wrong += 1
                    siblings += a.rsplit("/", 1)[0] in gt_tools
        assert t.loc[method, "wrong_siblings"] == pytest.approx(siblings / wrong)
    gts = [a for key in q.index if key.startswith("G1_") for a in q.loc[key, "candidates"]]
    assert cats == Counter(a.split("/")[0] for a in gts).most_common(3)
    assert tools == Counter(a.split("/")[1] for a in gts).most_common(3)
    assert ex.best_single()[0] == "rtp" and ex.best_single()[1] == pytest.approx(1 / 3)
    box = ex.digest_box.value
    assert "Best single architecture of G1" in box and "<b>RtP" in box and "33%" in box
    assert "★ best single architecture of the set" in _section(ex.output.value, "method-rtp", "</h3>")
    assert "★ best single" not in _section(ex.output.value, "method-ptr", "</h3>")
    ex.filter.value = "both_missed"  # G1:1 alone: nothing found, every ground truth beyond the top 20
    table, _ = ex.digest(ex.table_frame())
    assert table.set_index("method").loc["rtp", "missed_beyond"] == pytest.approx(1.0)
    assert "<b>RtP" in ex.digest_box.value  # the best single is of the set, before the filter


def test_a_view_opens_on_its_largest_gap(study):
    ex = _explorer(study, k=5)
    assert ex.query.value == "G1_instruction:0"  # gaps 1/3, 0, 1/3, 1/3: the first of the largest
    ex.subset.value = "G2"  # RtP 1/3, 0, 0; PtR 1/3, 2/3, 1/3: G2:5's gap is the largest, not the first
    assert ex.query.value == "G2_category_original:5" and "G2 query 5 " in ex.output.value
    ex.filter.value = "a_wins"
    assert ex.query.value is None  # no RtP win in G2 at k = 5
    ex.k.value = 7  # G2:6's ground truth at rank 7 for RtP: 1/3 = PtR's, no win either
    assert ex.query.value is None


def test_search_finds_text_ids_and_api_ids_in_every_subset(study):
    _, result = study
    ex = _explorer(study, k=5)
    ex.search.value = "TASK number 5"
    assert ex.visible_queries() == ["G2_category_original:5"] and ex.query.value == "G2_category_original:5"
    assert "matching “TASK number 5” in all subsets" in ex.count.value
    assert "subset" in ex.header_labels() and "<th scope='col' class='qx-h-subset'" in ex.grid.value
    # An API id: the queries with it in their ground truth or in either method's top 5 (stored tables).
    api = "Cat2/tool5/api20"
    gt = {q for q, c in zip(result.queries["qkey"], result.queries["candidates"], strict=True) if api in c}
    top = {q for q in result.queries["qkey"] for m in ("rtp", "ptr") if api in _top(result, q, m, 0, 5)}
    ex.search.value = api
    assert set(ex.visible_queries()) == gt | top and gt == {"G2_category_original:6"}
    ex.search.value = "no such thing"
    assert ex.visible_queries() == [] and ex.query.value is None and NO_QUERY in ex.output.value
    ex.search.value = ""
    assert "subset" not in ex.header_labels() and len(ex.visible_queries()) == 4


def test_table_sorts_by_its_headers_and_rows_select(study):
    ex = _explorer(study, k=5)
    g1 = [f"G1_instruction:{i}" for i in range(4)]
    assert ex.visible_queries() == [g1[0], g1[2], g1[3], g1[1]]  # |gap| 1/3, 1/3, 1/3, 0
    ex.sort_by("a")
    assert ex.visible_queries() == [g1[0], g1[2], g1[3], g1[1]] and ex.header_labels()["a"].endswith("▼")
    assert "aria-sort='descending'><button type='button' class='qx-sort-a'" in ex.grid.value
    ex.sort_by("a")
    assert ex.visible_queries() == [g1[1], g1[2], g1[3], g1[0]] and ex.header_labels()["a"].endswith("▲")
    ex.sort_by("gap")
    assert ex._sort == ("abs_gap", True) and ex.header_labels()["gap"] == "|gap| ▼"
    ex.sort_by("gap")
    assert ex.visible_queries() == [g1[0], g1[3], g1[1], g1[2]]  # gaps +1/3, +1/3, 0, -1/3
    ex.sort_by("gap")
    assert ex.visible_queries() == [g1[2], g1[1], g1[0], g1[3]]
    ex.sort_by("query")
    assert ex.visible_queries() == g1
    assert _row_ids(ex) == ["0", "1", "2", "3"]  # the table's rows: the view's queries, no more
    cells = ex.grid.value.split("<tr class='qx-row'")[3]
    assert "0.333" in cells and "0.667" in cells and "-0.333" in cells and ">PtR<" in cells
    ex.bridge.value = f"pick|{g1[2]}|1"  # what the page sends when the row's button is clicked
    assert ex.query.value == g1[2] and "aria-current='true'><th scope='row'><button type='button' " \
        "class='qx-pick qx-current'" in ex.grid.value and _row_ids(ex)[2] == "2"
    ex.bridge.value = "sort|b|2"
    assert ex._sort == ("b", True)
    ex.bridge.value = "sort|b|3"
    assert ex._sort == ("b", False)
    ex.bridge.value = "pick|<script>|4"  # not a row of the view: ignored
    assert ex.query.value == g1[2]
    ex.sort_by("query")
    assert [v for _, v in ex.query.options] == g1  # the dropdown follows the table's order


@pytest.fixture(scope="module")
def three_methods(study):
    """The study with a third method, ``rtp@bm25`` (stored once, like RtP), whose ground truth ranks are
    chosen: G1 queries 0-3 get recall@5 of 0, 1, 1/3 and 2/3."""
    reg, result = study
    ranks = {"G1_instruction:0": [], "G1_instruction:1": [1, 2, 3], "G1_instruction:2": [6, 5],
             "G1_instruction:3": [4, 2]}
    ids = reg["api_id"].tolist()
    rows = []
    for n, qkey in enumerate(result.queries["qkey"]):
        gt = ids[3 * n: 3 * n + 3]
        others = [a for a in ids if a not in gt]
        ranking = _ranking(gt, ranks.get(qkey, [1]), others)
        rows += _hit_rows(qkey, "rtp@bm25", -1, -1, ranking) + _hit_rows(qkey, "rtp@bm25", -1, 0, ranking)
    prov = {**result.provenance, "deterministic": [*result.deterministic, "rtp@bm25"],
            "settings": {**result.provenance["settings"], "methods": ["rtp", "ptr", "rtp@bm25"]}}
    final, texts, _ = split_hits(pd.DataFrame(rows), result.n_runs)
    return reg, with_tables(result, rankings=pd.concat([result.rankings, final], ignore_index=True),
                            text_rankings=pd.concat([result.text_rankings, texts], ignore_index=True),
                            provenance=prov)


def test_the_more_methods_picked_stay_when_the_controls_are_bound_again(three_methods):
    """A study switch binds the method controls to the new study's methods: those picked under "more" that
    it has stay picked (new options alone would empty the choice)."""
    reg, result = three_methods
    ex = QueryExplorer(None, result, registry=reg, k=5, run=0)
    ex.more.value = ("rtp@bm25",)
    settings = {**result.provenance["settings"], "methods": ["rtp@bm25", "rtp", "ptr"]}
    ex._bind(with_tables(result, provenance={**result.provenance, "settings": settings}))  # another study
    ex._study_controls(*ex.methods, ex.subset.value, ex.run.value)  # as switch_run does
    assert ex.more.value == ("rtp@bm25",) and "more=rtp@bm25" in ex.state_query()


def test_the_best_single_architecture_is_of_the_searched_queries(three_methods):
    """Under a search the best single architecture is the one of the queries it finds (before the filter),
    recounted; a search finding nothing names none."""
    reg, result = three_methods
    ex = QueryExplorer(None, result, registry=reg, k=5, run=0)
    ex.search.value = "task number 1"  # the text of one query only
    keys = ex.visible_queries()
    assert keys == ["G1_instruction:1"]
    pq = per_query_runs(result, 5)
    means = pq[(pq["run"] == 0) & pq["qkey"].isin(keys)].groupby("method")["recall"].mean()
    best = max(sorted(means.index), key=lambda m: (means[m], -sorted(means.index).index(m)))
    assert ex.best_single() == (best, pytest.approx(means[best]))
    assert best == "rtp@bm25"  # recall 1 there, where RtP and PtR's run 0 find none
    ex.search.value = "no query holds this"
    assert ex.best_single()[0] is None and "Best single" not in ex.render()


def test_equal_recalls_over_runs_tie_whatever_their_order():
    """The mean over runs of the same per-run recalls in another order (1/3, 2/3, 2/3, 2/3 against
    2/3, 2/3, 2/3, 1/3: float sums differing by 1e-16) is a tie, never a win."""
    reg = _registry()
    ids = reg["api_id"].tolist()
    gt, others = ids[:3], ids[3:]
    runs = {"ptr": [[1], [1, 2], [1, 2], [1, 2]], "ptr@bm25": [[1, 2], [1, 2], [1, 2], [1]]}
    hits = [row for method, per_run in runs.items() for run, ranks in enumerate(per_run)
            for text_idx in (-1, 0) for row in _hit_rows("G1_instruction:0", method, run, text_idx,
                                                         _ranking(gt, ranks, others))]
    stubs = pd.DataFrame([{"qkey": "G1_instruction:0", "run": r, "stub_idx": 0, "name": "Stub",
                           "reasoning": "", "fell_back": False} for r in range(4)])
    query = {"qkey": "G1_instruction:0", "subset": "G1_instruction", "query_id": "0", "query": "Do a task.",
             "candidates": gt, "relevant": gt}
    prov = {"settings": {"runs": 4, "depth": DEPTH, "k": 5, "methods": list(runs)}}
    result = study_of_hits(pd.DataFrame([query]), stubs, pd.DataFrame(hits), pd.DataFrame(), pd.DataFrame(),
                           prov)
    ex = QueryExplorer(None, result, registry=reg, k=5)
    ex.method_a.value, ex.method_b.value = runs
    assert ex.mean_of_runs and ex.methods == ("ptr", "ptr@bm25")
    frame = ex.table_frame()
    assert frame["winner"].tolist() == ["tie"] and frame["gap"].tolist() == [0.0]
    assert (ex.summary().a_wins, ex.summary().ties, ex.summary().b_wins) == (0, 1, 0)
    assert frame["a"].iloc[0] == pytest.approx(7 / 12)


def test_the_digest_names_ranks_by_the_studys_depth(study):
    """The digest's rank columns are bounded by the depth the study stored, not a fixed 20."""
    reg, result = study
    ex = _explorer(study)
    ex.k.value = 20
    assert "<th scope='col'>after rank 20</th>" in ex.digest_box.value and "21–20" not in ex.digest_box.value
    settings = {**result.provenance["settings"], "depth": 10}
    cut = with_tables(result, provenance={**result.provenance, "settings": settings})
    ex = QueryExplorer(None, cut, registry=reg, run=0, k=5)
    assert ex.k.max == 10
    wide = _explorer(study)  # a study switch binds k to the new study's depth
    wide.k.value = 20
    wide._bind(cut)
    wide._study_controls(*wide.methods, wide.subset.value, wide.run.value)
    assert (wide.k.max, wide.k.value) == (10, 10)
    assert all(f"<th scope='col'>{h}</th>" in ex.digest_box.value for h in ("at ranks 6–10", "beyond 10"))


def test_the_study_picker_names_the_methods_a_study_stored():
    """The picker's label counts the stored methods; the method lists add the fused ones its views compute."""
    from toolbench_lib.explorer.data import CatalogueEntry

    sets = ("G1_instruction", "G2_category_original")
    entry = CatalogueEntry("demo", Path("runs/k"), sets, ("rtp", "ptr"), 4, 9)
    assert entry.label() == "demo (G1, G2; 2 stored methods; 4 runs)"


def test_any_two_methods_of_the_study(three_methods):
    reg, result = three_methods
    ex = QueryExplorer(None, result, registry=reg, k=5, run=0)
    assert [v for _, v in ex.method_b.options] == ["rtp", "ptr", "rtp@bm25"]
    ex.method_a.value = "rtp@bm25"
    assert ex.filter.options[1] == ("RtP@bm25 higher recall", "a_wins")
    assert ex.show.options[1][0] == "RtP@bm25 only"
    # rtp@bm25 against PtR (run 0): 0 vs 1/3, 1 vs 0, 1/3 vs 2/3, 2/3 vs 0.
    ex.filter.value = "a_wins"
    assert sorted(ex.visible_queries()) == ["G1_instruction:1", "G1_instruction:3"]
    assert ex.query.value == "G1_instruction:1"  # gap 1 beats 2/3
    assert ex.header_labels()["a"] == "RtP@bm25 R@5"
    pq = per_query_runs(result, 5)
    mine = pq[(pq["method"] == "rtp@bm25") & (pq["run"] == 0)].set_index("qkey")["recall"]
    frame = ex.table_frame().set_index("qkey")
    assert np.allclose(frame["a"], mine.loc[frame.index])
    html = ex.render()
    assert "method-rtp@bm25" in html and "method-ptr" in html and "<h4>Stubs" in html
    ex.show.value = "a"
    assert "<h4>Stubs" not in ex.render() and "RtP@bm25 (retrieve, then plan)" in ex.render()


def test_every_selected_method_is_a_column_and_the_filter_names_them(three_methods):
    reg, result = three_methods
    ex = QueryExplorer(None, result, registry=reg, k=5, run=0)
    assert ex.show.options[0] == ("every selected", "both")
    assert ["<div class='col method-rtp'>" in ex.render(), "method-rtp@bm25" in ex.render()] == [True, False]
    ex.more.value = ("rtp@bm25",)
    html = ex.render()
    assert all(f"<div class='col method-{m}'>" in html for m in ("rtp", "ptr", "rtp@bm25")), html[-800:]
    # each column says what its method is, in the glossary's words
    assert "<p class='muted qx-desc'>RtP (retrieve, then plan) with bm25 retrieval.</p>" in html
    ex.filter.value = "all_missed"
    assert dict(ex.filter.options)["every selected method (3) missed"] == "all_missed"
    assert "every selected method (3) missed" in ex.count.value
    pq = per_query_runs(result, 5)
    recall = pq[pq["run"] == 0].pivot_table(index="qkey", columns="method", values="recall")
    subset = set(result.queries[result.queries["subset"] == result.queries["subset"].iloc[0]]["qkey"])
    missed = (recall[["rtp", "ptr", "rtp@bm25"]] == 0).all(axis=1)
    assert sorted(ex.visible_queries()) == sorted(q for q in recall.index[missed] if q in subset)


def test_a_link_opens_the_same_view(study):
    ex = _explorer(study)
    ex.method_b.value = "ptr"
    ex.subset.value, ex.run.value, ex.k.value, ex.gt.value = "G2", 1, 3, "relevant"
    ex.filter.value = "b_wins"
    ex.sort_by("b")
    ex.show.value = "b"
    link = ex.state_query()
    assert "subset=G2" in link and "run=1" in link and "k=3" in link and "filter=b_wins" in link
    assert f"query={ex.query.value}" in link and "sort=b" in link and "gt=relevant" in link
    assert f"href='?{link}'" in ex.link.value.replace("&amp;", "&")
    other = _explorer(study)
    assert other.apply_state(link) == []
    assert other.state_query() == link and other.render() == ex.render()
    assert other.visible_queries() == ex.visible_queries()
    # A view of every set sorted by its set column (a header click) opens from its link as well.
    ex.subset.value, ex.bridge.value = "all", "sort|subset|1"
    assert ex._sort == ("subset", False) and "sort=subset" in (link := ex.state_query())
    other = _explorer(study)
    assert other.apply_state(link) == [] and other.visible_queries() == ex.visible_queries()
    # A query outside the link's filter is still shown (its subset chosen, the filter widened).
    other.apply_state("query=G1_instruction:1&filter=a_wins")
    assert other.query.value == "G1_instruction:1" and other.subset.value == "G1"


def test_the_footer_names_sections_the_report_has(study):
    from toolbench_lib.report import write
    from toolbench_lib.report.appendix import APPENDIX_WORKED

    reg, result = study
    footer = QueryExplorer(None, result, registry=reg, k=5, run_name="default").provenance.value
    assert "Glossary" in footer and '"## Glossary"' in Path(write.__file__).read_text()
    assert f"{APPENDIX_WORKED.split(':')[0]} (worked queries)" in footer
    assert "section 08" not in footer


def test_a_bad_link_is_named_one_line_each(study):
    ex = _explorer(study)
    before = ex.state_query()
    problems = ex.apply_state("k=99&subset=G9&a=bm42&query=nope&colour=red")
    assert len(problems) == 5 and ex.state_query() == before
    assert any("k='99'" in p and "from 1 to 20" in p for p in problems)
    assert any("subset='G9'" in p and "G1, G2, all" in p for p in problems)
    assert any("a='bm42'" in p and "rtp, ptr" in p for p in problems)
    assert all(p.startswith("link: ignored") and "\n" not in p for p in problems)
    assert "colour=&#x27;red&#x27;" in ex.message.value
    assert ex.apply_state("search=" + "x" * 250) == ["link: search shortened to its first 200 characters"]
    assert ex.search.value == "x" * 200
    assert run_name_of("run_name=smoke&k=3") == "smoke" and run_name_of("k=3") is None
    with pytest.raises(ValueError, match="folder name"):
        run_name_of("run_name=..")


def test_pages_of_a_real_study(slice_setup, real_study):
    ex = QueryExplorer(slice_setup, real_study)
    ex.subset.value = "all"
    n = len(real_study.queries)
    assert len(ex.visible_queries()) == n and n > PAGE_ROWS
    ex.sort_by("query")
    first = real_study.queries["query_id"].astype(str)[:PAGE_ROWS].tolist()
    assert _row_ids(ex) == first
    ex.turn_page(1)
    assert _row_ids(ex)[0] == str(real_study.queries["query_id"].iloc[PAGE_ROWS])
    assert f"rows {PAGE_ROWS + 1}–" in ex.page_label.value and "page=2" in ex.state_query()
    assert ex.prev_page.disabled is False
    other = QueryExplorer(slice_setup, real_study)  # the turned page's link opens that page, its query kept
    assert other.apply_state(ex.state_query()) == [] and other.state_query() == ex.state_query()
    assert _row_ids(other) == _row_ids(ex) and other.page_label.value == ex.page_label.value


def test_the_page_says_it_is_busy_while_a_change_is_computed(study):
    ex = _explorer(study)
    seen = []
    render = ex.render
    ex.render = lambda: seen.append("qx-busy" in ex.widget._dom_classes) or render()
    ex.k.value = 3
    ex.show.value = "a"
    assert seen and all(seen) and "qx-busy" not in ex.widget._dom_classes
    from toolbench_lib.explorer.render import STYLE
    assert ".query-explorer.qx-busy .qx-count::before" in STYLE


def test_every_control_has_a_tooltip_and_help_sits_beside_the_controls(study):
    from toolbench_lib.explorer.widget import TOOLTIPS

    ex = _explorer(study)
    controls = ("study", "subset", "filter", "run", "k", "gt", "method_a", "method_b", "more", "search",
                "show")
    assert set(controls) <= set(TOOLTIPS)
    assert all(getattr(ex, c).tooltip == TOOLTIPS[c] for c in controls)
    children = list(ex.widget.children)
    assert children.index(ex.help) == 3 and "How to read this page" in ex.help.value  # under the controls
    assert all(getattr(ex, c).layout.width == "auto" for c in ("filter", "method_a", "method_b", "more"))


def test_a_switched_study_reads_its_registry_where_the_first_was_read(study, tmp_path):
    """A study opened with another processed-data folder keeps reading API names from there when the picker
    switches to another study of its family."""
    reg, result = study
    result = with_tables(result, provenance={**result.provenance, "data_fingerprint": "fp"})
    for name in ("fam", "fam-retrievers"):
        result.save(tmp_path / "out" / name / "runs" / "study")
    (tmp_path / "processed" / "fp").mkdir(parents=True)
    reg.to_parquet(tmp_path / "processed" / "fp" / "registry.parquet")
    ex = QueryExplorer.from_run("fam", outputs_dir=tmp_path / "out" / "fam",
                                processed_dir=tmp_path / "processed")
    assert [e.run_name for e in ex.entries] == ["fam", "fam-retrievers"] and len(ex.labels) == len(reg)
    ex.study.value = "fam-retrievers"
    assert ex.run_name == "fam-retrievers" and len(ex.labels) == len(reg)
