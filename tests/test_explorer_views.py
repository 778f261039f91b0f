"""The explorer's precomputed views and API-level filters on a designed study: every answer recounted from
the stored rankings; views written atomically with checksums, and a stale or damaged view never used."""

from __future__ import annotations

import subprocess
import sys
from urllib.parse import urlsplit

import numpy as np
import pandas as pd
import pytest

import toolbench_lib.retrieval.fused as fused_mod
from toolbench_lib.eval.evaluation import per_query_runs
from toolbench_lib.explorer.data import explorer_url
from toolbench_lib.explorer.views import (
    MAX_K,
    VIEWS,
    StudyViews,
    compact,
    compute_views,
    fused_methods,
    load_views,
    study_views,
    view_problem,
    with_fused,
    write_views,
)
from toolbench_lib.explorer.widget import QueryExplorer
from toolbench_lib.retrieval import ltr
from toolbench_lib.retrieval.fused import fused_runs
from toolbench_lib.retrieval.ltr_features import study_runs

from .hand_tables import with_tables
from .test_analysis_explorer import study, three_methods  # noqa: F401 (fixtures)
from .test_ltr import synthetic_study as ranker_study


def _found(result, method: str, run: int, k: int, gt: str = "candidates") -> dict[str, set[str]]:
    """``{qkey: ground-truth APIs in the method's top k}``, recounted from the stored rankings."""
    rel = dict(zip(result.queries["qkey"], result.queries[gt], strict=True))
    h = result.rankings
    h = h[(h["method"] == method) & (h["run"] == run) & (h["rank"] <= k)]
    return {q: set(g["api_id"]) & set(rel[q]) for q, g in h.groupby("qkey")}


@pytest.mark.parametrize("k", [1, 3, 5, 10])
@pytest.mark.parametrize("run", [0, "mean"])
def test_api_filters_recounted_from_the_rankings(three_methods, k, run):  # noqa: F811
    """One run's filters, and the mean of runs' (a method found an API when any run's top k holds it)."""
    reg, result = three_methods
    ex = QueryExplorer(None, result, registry=reg, k=k, run=run)
    assert ex.run.value == run
    ex.subset.value = "all"
    a, b, c = "ptr", "rtp", "rtp@bm25"
    ex.method_a.value, ex.method_b.value, ex.more.value = a, b, (c,)
    runs = [0] if run == 0 else sorted(set(result.rankings["run"]) - {-1}) or [0]

    def found(method):
        out: dict[str, set[str]] = {}
        for r in runs:
            for q, got in _found(result, method, r, k).items():
                out.setdefault(q, set()).update(got)
        return out

    fa, fb, fc = (found(m) for m in (a, b, c))
    keys = result.queries["qkey"].tolist()
    expected = {
        "a_found_b_missed": {q for q in keys if fa.get(q, set()) - fb.get(q, set())},
        "only_a": {q for q in keys if fa.get(q, set()) - fb.get(q, set()) - fc.get(q, set())},
        "all_missed": {q for q in keys if not (fa.get(q) or fb.get(q) or fc.get(q))},
    }
    for name, queries in expected.items():
        ex.filter.value = name
        assert set(ex.visible_queries()) == queries, (name, k)
        assert "with the filter" in ex.count.value and f"({len(keys)} without it)" in ex.count.value
    assert any(expected.values()), "the design gives at least one filter a query"


def test_views_agree_with_the_one_scorer_and_are_verified(study, tmp_path, caplog):  # noqa: F811
    reg, result = study
    folder = tmp_path / "runs" / "key"
    result.save(folder)
    assert view_problem(folder) is not None and load_views(folder) is None
    write_views(folder, result)
    assert view_problem(folder) is None
    views = load_views(folder)
    fresh = StudyViews(views.methods, *compute_views(result))
    assert views.learned.empty  # no ranker's components in this study
    for k in (1, 5, 20):
        pq = per_query_runs(result, k)
        for method in ("rtp", "ptr"):
            for run in (0, 1):
                mine = pq[(pq["method"] == method) & (pq["run"] == run)]
                got = views.scores(method, run, "candidates", k, mine["qkey"])
                assert got["recall"].tolist() == pytest.approx(mine["recall"].tolist())
                assert got["hits"].tolist() == mine["hits"].tolist()
                pairs = views.found_at(method, run, "candidates", k)
                assert len(pairs) == int(mine["hits"].sum())
                assert set(zip(pairs["qkey"].astype(str), pairs["api_id"].astype(str), strict=True)) == {
                    (q, a) for q, apis in _found(result, method, run, k).items() for a in apis}
                assert fresh.scores(method, run, "candidates", k, mine["qkey"]).equals(got)
    # A damaged file is never used; a study saved again makes the views stale; both are computed again.
    recall = folder / VIEWS / "recall.parquet"
    recall.write_bytes(recall.read_bytes()[:-10])
    assert load_views(folder) is None
    study_views(folder, result)
    assert load_views(folder) is not None
    changed = result.queries.assign(query=result.queries["query"] + " again")
    moved = with_tables(result, queries=changed)
    moved.save(folder)
    assert "stale" in view_problem(folder) and load_views(folder) is None
    assert "not used: views of another study (stale)" in caplog.text
    caplog.clear()
    study_views(folder, moved, say=False)  # `make explore` has said why, in one line of its own
    assert view_problem(folder) is None and not caplog.records


def test_fused_and_learned_views_store_each_method_scores_and_registry_rows():
    """Every fused and learned ranking of the views holds the method's own scores (non-increasing, never a
    reciprocal rank but round-robin's reciprocal best rank) and each API's registry row from the study."""
    result = ranker_study(n_per_set=8)
    ids = sorted(set(result.rankings["api_id"]) | set(result.text_rankings["api_id"]))
    pos = {a: i for i, a in enumerate(ids)}  # the designed tables give every API row 0: give each its own

    def as_retrieved(t: pd.DataFrame) -> pd.DataFrame:
        """Each stored ranking ordered by its scores (as a retriever ranks), each API at its own row."""
        keys = [c for c in ("qkey", "method", "run", "text_idx") if c in t]
        t = t.sort_values([*keys, "score"], ascending=[*[True] * len(keys), False], kind="stable")
        return t.assign(rank=t.groupby(keys).cumcount() + 1, row=t["api_id"].map(pos))

    result = with_tables(result, rankings=as_retrieved(result.rankings),
                         text_rankings=as_retrieved(result.text_rankings))
    fused = compute_views(result)[0]
    assert {"rr", "rrf", "route-cv", "wsum-cv", "fuse4", "ltr", "ltr-nollm"} <= set(fused["method"])
    assert fused["row"].tolist() == fused["api_id"].map(pos).tolist()
    for (method, _, key), g in fused.groupby(["method", "run", "qkey"]):
        s = g.sort_values("rank")["score"].to_numpy()
        assert (np.diff(s) <= 0).all(), (method, key)
        if method not in ("rr", "rr2"):
            assert not np.allclose(s, 1.0 / np.arange(1, len(s) + 1)), (method, key)

    def stored(method: str) -> dict[str, list[tuple[str, float]]]:
        mine = fused[(fused["method"] == method) & (fused["run"] == 0)].sort_values(["qkey", "rank"])
        return {key: list(zip(g["api_id"], g["score"], strict=True)) for key, g in mine.groupby("qkey")}

    for method, run in fused_runs(result, fused_methods(result), MAX_K).items():
        assert stored(method) == {key: list(scored.items()) for key, scored in run.items()}, method
    assert not (fused["method"] == "ltr-4runs").any()  # measured by analysis.ltr_study, not explored
    for name in ("ltr", "ltr-nollm"):
        spec = ltr.NAMED[name]
        want, _, _ = ltr.ltr_rankings(study_runs(result, spec), result.queries, spec, MAX_K)
        got = stored(name)
        assert {key: [a for a, _ in v] for key, v in got.items()} == {key: list(v) for key, v in want.items()}
        assert all([s for _, s in got[key]] == pytest.approx(list(v.values())) for key, v in want.items())


def test_learned_views_of_a_study_pair_read_the_reported_cross_fit(tmp_path, monkeypatch):
    """The retriever study and its validation study, stored as `make run` stores them: the views of both show
    notebook 12's rankings (``ranker_lists``, cross-fitted over both studies at once, one cross-fit per design
    run) read from the kept cross-fits, and a changed partner makes the views stale."""
    from toolbench_lib.analysis import ltr as L
    from toolbench_lib.study.stored import StudyResult

    design = ranker_study(n_per_set=8, runs=2)
    validation = ranker_study(("G1_category", "G1_tool"), n_per_set=8, seed=1, prefix="v")
    dfolder = design.save(tmp_path / "x-retrievers" / "runs" / "one")
    vfolder = validation.save(tmp_path / "x-validation-retrievers" / "runs" / "two")
    d, v = StudyResult.load(dfolder), StudyResult.load(vfolder)
    spec = ltr.NAMED["ltr"]
    want = {r: L.ranker_lists(d, v, spec, r, fit_model=False)[0] for r in range(d.n_runs)}  # kept, per run
    assert want[0] == L.ranker_lists(d, v, spec, 0)[0]  # the same lists as a cross-fit that is not kept
    assert want[0] != want[1]  # each run's stubs give a ranking of their own
    fits: list[int] = []
    real = ltr.crossfit
    monkeypatch.setattr(ltr, "crossfit", lambda *a, **kw: (fits.append(1), real(*a, **kw))[1])
    views = {"design": compute_views(d), "validation": compute_views(v)}
    for part, one in (("design", d), ("validation", v)):
        fused, learned = views[part][0], views[part][3]
        for run in range(one.n_runs):
            mine = fused[(fused["method"] == "ltr") & (fused["run"] == run)].sort_values(["qkey", "rank"])
            got = {key: g["api_id"].tolist() for key, g in mine.groupby("qkey")}
            assert got == {key: want[run][key][:MAX_K] for key in one.queries["qkey"]}, (part, run)
        assert set(learned["qkey"]) == set(one.queries["qkey"]) and learned["rank"].max() == 3
    assert len(fits) == 1  # ltr-nollm's one cross-fit (RtP's rankings only); ltr's were read
    write_views(dfolder, d)
    assert view_problem(dfolder) is None
    with_tables(v, queries=v.queries.assign(query=v.queries["query"] + " again")).save(vfolder)
    assert "stale" in view_problem(dfolder)


def test_fused_runs_of_the_same_inputs_are_computed_once(monkeypatch):
    """A second study whose dense rankings, queries and ground truth are the first's (the retriever study
    beside the main one) reuses the first's dense-only fused runs and computes only what differs; a changed
    query text changes every key."""
    computed: list[str] = []
    real = fused_mod.method_runs
    monkeypatch.setattr(fused_mod, "method_runs", lambda inp, names, *a, **kw: (
        computed.extend(names), real(inp, names, *a, **kw))[1])
    monkeypatch.setattr(fused_mod, "_SHARED", {})
    first = ranker_study(n_per_set=6)
    names = fused_methods(first)
    want = fused_runs(first, names, MAX_K)
    bm25 = first.rankings["method"].str.contains("bm25")
    second = with_tables(first, rankings=first.rankings.assign(
        score=first.rankings["score"].where(~bm25, first.rankings["score"] * 0.5)))
    computed.clear()
    assert fused_runs(second, names, MAX_K) == want | {n: fused_runs(second, [n], MAX_K)[n] for n in computed}
    assert computed and set(computed) < set(names)
    assert all("bm25" in " ".join(fused_mod.spec_of(n).components) for n in computed)
    computed.clear()
    fused_runs(with_tables(first, queries=first.queries.assign(query=first.queries["query"] + "!")), names,
               MAX_K)
    assert sorted(computed) == sorted(names)


def test_a_learned_method_says_why_in_words():
    """The top API of a learned ranker is explained in words (the ranker's feature names behind a toggle),
    from the stored features."""
    from toolbench_lib.data.markdown import html_text
    from toolbench_lib.explorer.views import StudyViews
    from toolbench_lib.retrieval.ltr_features import feature_words

    result = ranker_study(n_per_set=8)
    result = with_tables(result, queries=result.queries.assign(query_id=result.queries["qkey"]))
    views = StudyViews(["ltr"], *compute_views(result))
    ex = QueryExplorer(None, result, views=views)
    ex.method_a.value = "ltr"
    key = ex.query.value
    page = ex.output.value
    f = views.features("ltr", 0, key, 1)
    values = dict(zip(f["feature"], f["value"], strict=True))
    said = [feature_words(n, v, int(values["n_stubs"])) for n, v in values.items()]
    assert [w for w in said if w] and all(html_text(w) in page for w in said if w)
    assert "because it is" in page and "<details class='qx-raw'>" in page
    raw = page[page.index("<details class='qx-raw'>"):]
    assert all(f"<code>{n}</code>" in raw for n, v in values.items() if v)
    assert "<code>rr_" not in page[:page.index("<details class='qx-raw'>")]  # names only behind the toggle


def test_feature_words_by_hand():
    from toolbench_lib.retrieval.ltr_features import feature_words as words

    assert words("rr_q_dense", 0.5) == "rank 2 in the query's dense ranking"
    assert words("stubs_dense", 3, 4) == "found by 3 of 4 stubs (dense)"
    assert words("stub_tool_bm25", 1, 2) == "1 of 2 stubs (BM25) find an API of its tool"
    assert words("tool_best_s_bm25", 1) == "another API of its tool scores 1.00 in the stubs' BM25 ranking"
    assert words("lex_cat", 0.5) == "50% of its category's terms are in the query"
    assert words("runs_n_s_dense", 3) == "in 3 runs' versions of the stubs' dense ranking"
    assert words("n_lists", 2) == "in 2 of the ranker's rankings"
    assert words("rr_q_dense", 0) is None and words("n_stubs", 4) is None


def test_a_teaching_link_opens_its_view(three_methods):  # noqa: F811
    reg, result = three_methods
    url = explorer_url("demo", "G1_instruction:1", ["rtp@bm25", "ptr", "rtp"], k=8, filter="only_a",
                       subset="G1")
    ex = QueryExplorer(None, result, registry=reg, run_name="demo")
    assert ex.apply_state(urlsplit(url).query) == []
    assert (ex.methods, tuple(ex.more.value), ex.k.value) == (("rtp@bm25", "ptr"), ("rtp",), 8)
    assert ex.filter.value == "only_a" and ex.subset.value == "G1"
    assert ex.query.value == "G1_instruction:1" and "G1_instruction:1" in pd.Index(ex.visible_queries())


def test_the_explorer_holds_compact_tables_with_the_same_values(study, tmp_path):  # noqa: F811
    """compact(): repeated strings become categories and integers the smallest type, values unchanged;
    the views' fused rankings are added to one study only (a second use is a clear error)."""
    _, result = study
    table = pd.concat([result.rankings] * 3, ignore_index=True).assign(rank=lambda t: t["rank"] + 300)
    small = compact(table)
    assert isinstance(small["method"].dtype, pd.CategoricalDtype) and small["rank"].dtype == np.uint16
    assert small["score"].dtype == table["score"].dtype
    assert small.astype({c: table[c].dtype for c in table}).equals(table)
    assert small.memory_usage(deep=True).sum() < table.memory_usage(deep=True).sum() / 2
    folder = tmp_path / "runs" / "key"
    result.save(folder)
    views = study_views(folder, result)
    shown = with_fused(result, views)
    assert set(shown.rankings["method"]) == set(result.rankings["method"]) | set(fused_methods(result))
    with pytest.raises(ValueError, match="already added"):
        with_fused(result, views)


def test_a_page_kernel_imports_no_plotting_statistics_or_learning_library():
    """The explorer's page reads stored views: its kernel loads neither the analysis stack (matplotlib,
    seaborn, scikit-learn, statsmodels) nor a model library, which computing views or tables would."""
    heavy = ("matplotlib", "seaborn", "sklearn", "statsmodels", "lightgbm", "torch", "sentence_transformers")
    code = f"import sys, toolbench_lib.explorer.widget; print([m for m in {heavy!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=120)
    assert out.stdout.strip() == "[]", out.stdout


def test_every_study_of_a_run_belongs_to_its_family():
    from toolbench_lib.explorer.data import family_base

    for name in ("s", "s-retrievers", "s-runs4", "s-validation", "s-validation-retrievers",
                 "s-g2-instruction-retrievers", "s-rules"):
        assert family_base(name) == "s", name
    assert family_base("s-g2-instruction") == "s-g2-instruction"  # only a study's folder is of the family


def test_the_g2_instruction_study_shows_no_learned_ranker(tmp_path):
    """Notebook 12's G2_instruction study has no partner to fit a learned ranker with as the report does."""
    from toolbench_lib.explorer.views import learned_methods
    from toolbench_lib.study.stored import StudyResult

    one = ranker_study(("G2_instruction",), n_per_set=4, runs=1)
    assert learned_methods(one)  # its components are there
    g2i = StudyResult.load(one.save(tmp_path / "x-g2-instruction-retrievers" / "runs" / "one"))
    assert learned_methods(g2i) == []
    design = StudyResult.load(one.save(tmp_path / "x-retrievers" / "runs" / "one"))
    assert learned_methods(design) == learned_methods(one)
