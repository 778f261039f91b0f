"""The learned ranker: features by hand on a three-API toy study, cross-fitting honesty, determinism, the
measurement tables on synthetic studies, and ``evaluate --method ltr,ltr-nollm`` on the real slice."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from toolbench_lib.analysis import ltr as L
from toolbench_lib.retrieval import ltr
from toolbench_lib.retrieval.ltr_features import (
    LtrSpec,
    category_of,
    feature_table,
    study_runs,
    tool_of,
)
from toolbench_lib.retrieval.retrievers import RETRIEVERS, RunContext
from toolbench_lib.study.stored import StudyResult

from .hand_tables import HIT_COLUMNS, study_of_hits, with_tables

A1, A2, B1 = "Cat/toolA/a1", "Cat/toolA/a2", "Cat/toolB/b1"
COMPONENT_METHODS = ("rtp", "rtp@bm25", "ptr", "ptr@bm25")


def _rows(key: str, method: str, run: int, text_idx: int, ranking) -> list[tuple]:
    return [(key, method, run, text_idx, i, 0, a, s) for i, (a, s) in enumerate(ranking, 1)]


def toy_study() -> StudyResult:
    """One query over three APIs (two of tool A, one of tool B, one category); two stubs."""
    key = "G1_instruction:1"
    rows = []
    q_dense = [(A1, 0.9), (B1, 0.5), (A2, 0.1)]
    q_bm25 = [(B1, 10.0), (A1, 6.0)]
    for t in (0, -1):
        rows += _rows(key, "rtp", -1, t, q_dense) + _rows(key, "rtp@bm25", -1, t, q_bm25)
    rows += _rows(key, "ptr", 0, 0, [(A2, 0.8)]) + _rows(key, "ptr", 0, 1, [(A1, 0.4), (A2, 0.3)])
    rows += _rows(key, "ptr", 0, -1, [(A2, 0.8), (A1, 0.4)])
    rows += _rows(key, "ptr@bm25", 0, 0, [(A2, 3.0)]) + _rows(key, "ptr@bm25", 0, -1, [(A2, 3.0)])
    q = pd.DataFrame({"qkey": [key], "subset": ["G1_instruction"], "query": ["find a1 in toolA"],
                      "candidates": [[A1, A2]],
                      "relevant": [[A1]]})
    prov = {"settings": {"runs": 1, "methods": ["rtp", "ptr", "rtp@bm25", "ptr@bm25"]}}
    return study_of_hits(q, pd.DataFrame(), pd.DataFrame(rows, columns=HIT_COLUMNS), pd.DataFrame(),
                         pd.DataFrame(), prov)


def test_features_by_hand_on_a_three_api_study():
    spec = ltr.NAMED["ltr"]
    table = feature_table(study_runs(toy_study(), spec), spec, {"G1_instruction:1": {A1, A2}})
    f = table.frame().set_index("api_id")
    assert list(f.index) == [A1, B1, A2]  # first appearance over q.dense, q.bm25, s.dense, s.bm25
    assert f["label"].tolist() == [1, 0, 1]
    want = {
        # q.dense: cosines .9/.5/.1 -> min-max 1/.5/0; q.bm25: 10/6 -> 1/0; s.dense .8/.4 -> 1/0;
        # s.bm25: 3 -> 0 (one score: ranx gives 0)
        A1: {"rr_q_dense": 1, "mm_q_dense": 1, "tool_best_q_dense": 0, "tool_n_q_dense": 1,
             "cat_tools_q_dense": 1, "rr_q_bm25": 0.5, "mm_q_bm25": 0, "tool_best_q_bm25": 0,
             "tool_n_q_bm25": 0, "cat_tools_q_bm25": 1,
             "rr_s_dense": 0.5, "mm_s_dense": 0, "tool_best_s_dense": 1, "tool_n_s_dense": 1,
             "cat_tools_s_dense": 0, "rr_s_bm25": 0, "mm_s_bm25": 0, "tool_best_s_bm25": 0,
             "tool_n_s_bm25": 1,
             "cat_tools_s_bm25": 0, "n_lists": 3, "stubs_dense": 1, "stubs_bm25": 0, "n_stubs": 2},
        B1: {"rr_q_dense": 0.5, "mm_q_dense": 0.5, "tool_best_q_dense": 0, "tool_n_q_dense": 0,
             "cat_tools_q_dense": 1, "rr_q_bm25": 1, "mm_q_bm25": 1, "cat_tools_q_bm25": 1, "rr_s_dense": 0,
             "cat_tools_s_dense": 1, "cat_tools_s_bm25": 1, "n_lists": 2, "stubs_dense": 0, "stubs_bm25": 0},
        A2: {"rr_q_dense": 1 / 3, "mm_q_dense": 0, "tool_best_q_dense": 1, "tool_n_q_dense": 1,
             "rr_q_bm25": 0, "tool_best_q_bm25": 0, "tool_n_q_bm25": 1, "rr_s_dense": 1, "mm_s_dense": 1,
             "tool_best_s_dense": 0, "tool_n_s_dense": 1, "rr_s_bm25": 1, "mm_s_bm25": 0, "tool_n_s_bm25": 0,
             "n_lists": 3, "stubs_dense": 2, "stubs_bm25": 1},
    }
    # per-stub evidence: s.dense's stubs hold [A2] and [A1, A2], s.bm25's one stub [A2]; lexical: the query
    # "find a1 in toolA" holds a1 and tool (toolA and toolB both split to "tool"), never "cat"
    want2 = {A1: (1, 2, 0, 1, 1, 1, 0), B1: (0, 0, 0, 0, 0, 1, 0), A2: (1, 2, 1, 1, 0, 1, 0)}
    names2 = ["stub_rr_dense", "stub_tool_dense", "stub_rr_bm25", "stub_tool_bm25", "lex_api", "lex_tool",
              "lex_cat"]
    for api, values in want.items():
        values.update(zip(names2, want2[api], strict=True))
        for name, value in values.items():
            assert f.loc[api, name] == pytest.approx(value), (api, name)
    nollm = ltr.NAMED["ltr-nollm"]
    assert not nollm.uses_stubs and not any(n.startswith(("stubs", "n_stubs")) for n in nollm.feature_names)
    f2 = feature_table(study_runs(toy_study(), nollm), nollm).frame().set_index("api_id")
    assert list(f2.index) == [A1, B1, A2] and f2.loc[A2, "n_lists"] == 1
    bare = LtrSpec(("q.dense",), tool=False, category=False, lexical=False)
    assert bare.feature_names == ["rr_q_dense", "mm_q_dense", "n_lists"]
    assert tool_of(A1) == "Cat/toolA" and category_of(B1) == "Cat" and tool_of("plain") == "plain"


def test_bad_specs_and_missing_rankings_are_clear():
    with pytest.raises(ValueError, match="unknown ranker component"):
        LtrSpec(("q.sparse",))
    study = toy_study()
    study = with_tables(study, rankings=study.rankings[study.rankings["method"] != "ptr@bm25"],
                        text_rankings=study.text_rankings[study.text_rankings["method"] != "ptr@bm25"])
    with pytest.raises(ValueError, match="no rankings of 'ptr@bm25'"):
        study_runs(study, ltr.NAMED["ltr"])


# -- a synthetic study with a learnable signal ------------------------------------------------------------

DESIGN = ("G1_instruction", "G2_category_original", "G3_instruction_original")


def synthetic_study(sets=DESIGN, n_per_set: int = 12, runs: int = 1, seed: int = 0,
                    prefix: str = "", hybrid: bool = False) -> StudyResult:
    """Each query's ground truth is two APIs of one tool; the query rankings hold one of them low, the
    stub rankings the other, and noise APIs of random tools fill every list (``hybrid``: the hybrid
    family's rankings too, the dense ones again)."""
    rng = np.random.default_rng(seed)
    queries, rows = [], []
    for subset in sets:
        for i in range(n_per_set):
            key = f"{subset}:{prefix}{i}"
            tool = f"C{i % 3}/t{subset[:2]}{i}"
            gt = [f"{tool}/x", f"{tool}/y"]
            queries.append({"qkey": key, "subset": subset, "query": f"{prefix}query {subset} {i}",
                            "candidates": gt, "relevant": gt[:1]})

            def noise(n, top):
                return [(f"C{rng.integers(3)}/n{rng.integers(40)}/a{j}", top - 0.02 * j) for j in range(n)]

            q_d = noise(12, 0.9)
            q_d.insert(int(rng.integers(1, 4)), (gt[0], 0.7))
            q_b = noise(12, 9.0)
            for t in (0, -1):
                rows += _rows(key, "rtp", -1, t, q_d) + _rows(key, "rtp@bm25", -1, t, q_b)
            for r in range(runs):
                s0 = noise(6, 0.8)
                s0.insert(int(rng.integers(0, 4)), (gt[1], 0.75))
                s1 = noise(6, 0.7)
                merged = sorted(dict(sorted(s0 + s1, key=lambda x: x[1])).items(), key=lambda x: -x[1])[:12]
                rows += _rows(key, "ptr", r, 0, s0) + _rows(key, "ptr", r, 1, s1)
                rows += _rows(key, "ptr", r, -1, merged)
                b = noise(8, 5.0)
                rows += _rows(key, "ptr@bm25", r, 0, b) + _rows(key, "ptr@bm25", r, -1, b)
    methods = ["rtp", "ptr", "rtp@bm25", "ptr@bm25"]
    if hybrid:
        rows += [(k, "rtp@hybrid" if m == "rtp" else "ptr@hybrid", *rest)
                 for k, m, *rest in rows if m in ("rtp", "ptr")]
        methods += ["rtp@hybrid", "ptr@hybrid"]
    prov = {"settings": {"runs": runs, "methods": methods}}
    return study_of_hits(pd.DataFrame(queries), pd.DataFrame(), pd.DataFrame(rows, columns=HIT_COLUMNS),
                         pd.DataFrame(), pd.DataFrame(), prov)


def _crossfit(study: StudyResult, spec: LtrSpec, gt: str = "candidates"):
    runs = study_runs(study, spec)
    table = feature_table(runs, spec, ltr.qrels_of(study.queries, gt))
    return table, ltr.crossfit(table, spec, study.queries)


def test_no_query_is_scored_by_a_model_trained_on_it():
    study = synthetic_study((*DESIGN, "heldout"), n_per_set=10)
    q = study.queries
    q.loc[q["qkey"] == "G2_category_original:3", "query"] = "query G1_instruction 3"  # one text in two sets
    spec = ltr.NAMED["ltr"]
    table, cf = _crossfit(study, spec)
    design = [k for k in q["qkey"] if not k.startswith("heldout")]
    assert set(cf.fold) == set(design) and len(cf.trained_on) == 5
    text = q.set_index("qkey")["query"]
    for f, train in enumerate(cf.trained_on):
        scored = {k for k, g in cf.fold.items() if g == f}
        assert not scored & set(train)
        assert not set(text[list(scored)]) & set(text[train])  # grouped by text, not only by key
    assert cf.fold["G2_category_original:3"] == cf.fold["G1_instruction:3"]
    # two queries written from one sample of APIs (one ground-truth set) share a fold too
    sample = [f"G3_instruction_original:{i}" for i in (1, 7, 8, 9)]  # by chance in one fold: (1/5)^3
    same = q.assign(candidates=[q.loc[q["qkey"] == sample[0], "candidates"].iloc[0] if k in sample else c
                                for k, c in zip(q["qkey"], q["candidates"], strict=True)])
    _, cf_same = _crossfit(with_tables(study, queries=same), spec)
    assert len({cf_same.fold[k] for k in sample}) == 1
    # a solvable set beyond G1-G3 is cross-fitted too (the eight sets at once), a query file is not
    _, cf8 = _crossfit(synthetic_study((*DESIGN, "G1_category", "heldout"), n_per_set=10), spec)
    assert {k.split(":")[0] for k in cf8.fold} == {*DESIGN, "G1_category"}
    assert cf8.unseen_model.train_sets == sorted({*DESIGN, "G1_category"})
    assert cf.unseen_model.train_sets == list(DESIGN) and len(cf.unseen_model.train_queries) == len(design)
    # Corrupt the labels of fold 0's queries: their scores do not move, the other folds' do.
    fold0 = [k for k, g in cf.fold.items() if g == 0]
    unseen = [k for k in q["qkey"] if k.startswith("heldout")]

    def corrupted(keys):
        bad = q.assign(candidates=[[f"nothing/{k}"] if k in keys else c
                                   for k, c in zip(q["qkey"], q["candidates"], strict=True)])
        stored = with_tables(study, queries=bad)
        return _crossfit(stored, spec)[1].scores

    scores = corrupted(fold0)
    np.testing.assert_array_equal(cf.scores[table.rows_of(fold0)], scores[table.rows_of(fold0)])
    others = table.rows_of([k for k in design if k not in fold0])
    assert not np.array_equal(cf.scores[others], scores[others])
    # The unseen sets' labels are never read: corrupting them changes no score at all.
    np.testing.assert_array_equal(cf.scores, corrupted(unseen))


def test_an_unseen_query_repeating_a_design_text_is_scored_by_the_model_that_never_saw_it():
    """A query of another set whose (normalised) text is a design query's: scored by that text's fold model,
    not by the model fitted on every design query; the cross-fit lists it."""
    study = synthetic_study((*DESIGN, "heldout"), n_per_set=10)
    q = study.queries
    q.loc[q["qkey"] == "heldout:4", "query"] = "  QUERY g1_instruction   4 "  # G1_instruction:4's text
    spec = ltr.NAMED["ltr"]
    table, cf = _crossfit(study, spec)
    assert cf.leaked == ["heldout:4"]
    rows = table.rows_of(["heldout:4"])
    fold_model = ltr.fit(table, spec, cf.trained_on[cf.fold["G1_instruction:4"]],
                         q.set_index("qkey")["subset"].to_dict(), ltr.SEED, ltr.LABEL_GT)
    np.testing.assert_allclose(cf.scores[rows], fold_model.booster.predict(table.X[rows]))
    assert not np.allclose(cf.scores[rows], cf.unseen_model.booster.predict(table.X[rows]))
    others = table.rows_of(["heldout:5"])  # a new text: the model fitted on every design query
    np.testing.assert_allclose(cf.scores[others], cf.unseen_model.booster.predict(table.X[others]))


def test_a_fixed_seed_gives_identical_rankings():
    study = synthetic_study()
    spec = ltr.NAMED["ltr"]
    runs = study_runs(study, spec)
    a, cf_a, _ = ltr.ltr_rankings(runs, study.queries, spec)
    b, cf_b, _ = ltr.ltr_rankings(runs, study.queries, spec)
    assert a == b and cf_a.fold == cf_b.fold
    np.testing.assert_array_equal(cf_a.scores, cf_b.scores)
    table = feature_table(runs, spec, ltr.qrels_of(study.queries, "candidates"))
    one, two = (ltr.crossfit(table, spec, study.queries, workers=w) for w in (1, 2))  # side by side: the same
    np.testing.assert_array_equal(one.scores, two.scores)
    c, cf_c, _ = ltr.ltr_rankings(runs, study.queries, spec, seed=1)
    assert cf_c.fold != cf_a.fold  # the seed is the one that shuffles the folds
    assert all(list(v.values()) == sorted(v.values(), reverse=True) for v in a.values())  # best first


def test_ranker_learns_the_tool_signal_and_ablations_see_it():
    """Ground truth is two APIs of one tool, one found by the query, one by the stubs: ``ltr`` finds both,
    the query's dense ranking one of the two; the ablation without stubs loses the stub-found one."""
    study = synthetic_study(n_per_set=14)
    scores, models = L.ranker_scores(study, k=5, gts=("candidates",))
    mean = scores.groupby("method")["recall"].mean()
    assert mean["rtp"] == pytest.approx(0.5)  # the query's ranking holds one of the two, in its top 4
    assert mean["ltr"] > 0.9 and mean["ltr"] > mean["ltr-nollm"]
    assert set(models) == {"ltr", "ltr-nollm", "ltr-4runs"}
    cmp = L.comparison(scores)
    row = cmp[(cmp["method"] == "ltr") & (cmp["against"] == "best single")].iloc[0]
    assert row["reference"] in L.single_methods(study) and row["diff"] > 0 and row["ci_low"] > 0
    table = L.issue_table(cmp, "candidates")
    assert table["method"].tolist() == [L.BEST_SINGLE, "ltr", "ltr-nollm", "ltr-4runs"]
    assert list(table.columns[1:]) == ["G1", "G2", "G3"]
    imp = L.importance(models["ltr"])
    assert set(imp["feature"]) == set(ltr.NAMED["ltr"].feature_names)
    assert imp["share"].sum() == pytest.approx(1.0) and set(imp["group"]) <= {"tool", "category", "stubs",
                                                                               "lexical", "rank and score"}


def test_goal_check_by_hand():
    cmp = pd.DataFrame([
        {"gt": "candidates", "part": "design", "subset": "G1", "method": "ltr", "against": "best single",
         "reference": "ptr@bm25", "diff": 0.06, "ci_low": 0.01},
        {"gt": "candidates", "part": "design", "subset": "G2", "method": "ltr", "against": "best single",
         "reference": "ptr@bm25", "diff": 0.04, "ci_low": 0.01},
        {"gt": "relevant", "part": "unseen", "subset": "G1_tool", "method": "ltr", "against": "best single",
         "reference": "rtp", "diff": 0.04, "ci_low": -0.01},
        {"gt": "relevant", "part": "unseen", "subset": "G1_tool", "method": "ltr-nollm",
         "against": "best dense",
         "reference": "rtp", "diff": 0.01, "ci_low": 0.001},
        {"gt": "relevant", "part": "unseen", "subset": "G1_tool", "method": "ltr-nollm",
         "against": "best single",
         "reference": "rtp", "diff": 0.01, "ci_low": 0.001},
    ])
    g = L.goal_check(cmp)
    assert g["met"].tolist() == [True, False, False, True]
    assert g["margin"].tolist() == [0.05, 0.05, 0.03, 0.0]


def test_an_ablation_reading_a_family_the_study_did_not_run_is_left_out():
    abl = L.ablations(synthetic_study(n_per_set=6), gts=("candidates",))
    assert set(abl["method"]) == {*(n for n in L.ABLATIONS if "hybrid" not in n), L.DESIGN_ONLY}


def test_measurement_on_stored_studies_and_the_stored_model(tmp_path, capsys):
    from toolbench_lib.analysis.ltr_study import main

    design = synthetic_study(n_per_set=10, runs=2, hybrid=True)
    validation = synthetic_study(("G1_category", "G1_tool"), n_per_set=10, seed=1, prefix="v", hybrid=True)
    validation.provenance["settings"]["runs"] = 1
    validation = with_tables(validation, rankings=validation.rankings[validation.rankings["run"] <= 0],
                             text_rankings=validation.text_rankings[validation.text_rankings["run"] <= 0])
    d, v = design.save(tmp_path / "design"), validation.save(tmp_path / "validation")
    assert main(["--design", str(d), "--validation", str(v), "--out", str(tmp_path / "out")]) == 0
    printed = capsys.readouterr().out
    assert "gt=relevant" in printed and "best single architecture" in printed
    for name in ("ltr_table_candidates", "ltr_table_relevant", "ltr_ablations", "ltr_importance", "ltr_costs",
                 "ltr_goal", "ltr_comparison"):
        assert (tmp_path / "out" / f"{name}.csv").exists(), name
    table = pd.read_csv(tmp_path / "out" / "ltr_table_relevant.csv")
    assert list(table.columns) == ["method", "G1", "G2", "G3", "G1_category", "G1_tool"]
    assert table["method"].tolist() == [L.BEST_SINGLE, "linear fused (1 stub call)",
                                        "linear fused (no LLM call)", "ltr", "ltr-nollm", "ltr-4runs"]
    goal = pd.read_csv(tmp_path / "out" / "ltr_goal.csv")
    assert len(goal) == 2 * 2 * 5 and goal["part"].tolist()[:3] == ["design"] * 3  # 2 gts, 2 rankers, 5 sets
    abl = pd.read_csv(tmp_path / "out" / "ltr_ablations.csv")
    assert set(abl["method"]) == {*L.ABLATIONS, L.DESIGN_ONLY}  # the hybrid row too: both studies ran it
    assert set(abl["gt"]) == {"candidates", "relevant"}
    assert set(abl.loc[abl["method"] == L.DESIGN_ONLY, "part"]) == {"design", "unseen"}
    assert (abl.loc[abl["method"] == "ltr", "diff"] == 0).all()
    costs = pd.read_csv(tmp_path / "out" / "ltr_costs.csv").set_index("method")
    assert costs.loc["ltr", "model_bytes"] > 0 and costs.loc["ltr", "infer_ms_per_query"] > 0
    calls = {"ltr": 1, "ltr-nollm": 0, "ltr-4runs": 2, "fuse4 (linear fusion)": 1}  # ltr-4runs: a call a run
    assert costs["llm_calls"].to_dict() == calls
    booster, prov = ltr.load_model(d / "ltr", "ltr")
    assert prov["training_sets"] == sorted({*DESIGN, "G1_category", "G1_tool"})  # the eight sets' queries
    assert prov["features"] == ltr.NAMED["ltr"].feature_names
    assert prov["params"]["deterministic"] is True and prov["sha256"]
    assert booster.feature_name() == prov["features"]
    (d / "ltr" / "ltr.txt").write_text((d / "ltr" / "ltr.txt").read_text() + "\n")
    with pytest.raises(ltr.StoredModelError, match="does not match its checksum"):
        ltr.load_model(d / "ltr", "ltr")
    assert main(["--design", str(tmp_path / "nowhere"), "--validation", "none"]) == 2
    assert "error:" in capsys.readouterr().err


def test_retriever_in_the_study_pipeline_matches_the_library():
    study = synthetic_study(n_per_set=8)
    ids = sorted(set(study.rankings["api_id"]) | set(study.text_rankings["api_id"]))
    ctx = RunContext(SimpleNamespace(api_ids=ids), study.queries, 0, 20, None,
                     {m: study.retrieved(m, 0) for m in COMPONENT_METHODS})
    for name in ("ltr", "ltr-nollm"):
        got_back = RETRIEVERS[name].retrieve(ctx)
        out = got_back.final
        assert got_back.texts.empty and (out["method"] == name).all()
        out = out.sort_values(["qkey", "rank"])
        got = {k: list(zip(g["api_id"], g["score"], strict=True)) for k, g in out.groupby("qkey")}
        spec = ltr.NAMED[name]
        want, _, _ = ltr.ltr_rankings(study_runs(study, spec), study.queries, spec)
        assert got == {k: list(v.items()) for k, v in want.items()}  # the model's scores, stored
        assert all(ids[r] == a for r, a in zip(out["row"], out["api_id"], strict=True))
        assert ctx.notes[name] == {"queries_repeating_a_training_text": 0}  # counted in the provenance
    assert RETRIEVERS["ltr"].uses_stubs and RETRIEVERS["ltr-nollm"].deterministic
    only_file = study.queries.assign(subset="my_file")
    with pytest.raises(ValueError, match="trains on the queries of the solvable sets"):
        RETRIEVERS["ltr-nollm"].retrieve(RunContext(ctx.setup, only_file, 0, 20, None, ctx.retrieved))
    with pytest.raises(ValueError, match="reads the stubs of every run of a stored study") as info:
        RETRIEVERS["ltr-4runs"].retrieve(ctx)
    assert "\n" not in str(info.value)


def test_evaluate_and_export_learned_rankers_on_the_slice(ds, embedder, tmp_path, capsys):
    """``evaluate --method ltr,ltr-nollm`` through the one pipeline on the slice, saved, then TREC export."""
    from toolbench_lib.cli import main
    from toolbench_lib.eval.export import export_trec

    code = main(["evaluate", "--method", "rtp,ptr,ltr,ltr-nollm", "--retriever", "dense,bm25",
                 "--backend", "rules", "--runs", "1", "--plan-limit", "0", "--max-apis", "2500",
                 "--limit", "15", "--model", "all-MiniLM-L6-v2", "--save", str(tmp_path / "study"), "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    for name in ("G1", "G2", "G3"):
        methods = out["subsets"][name]["methods"]
        assert list(methods) == ["rtp", "ptr", "ltr", "ltr-nollm", "rtp@bm25", "ptr@bm25"]
        assert all(0.0 <= v["recall"] <= 1.0 for v in methods.values())
    study = StudyResult.load(tmp_path / "study")
    for name in ("ltr", "ltr-nollm"):
        lists = study.ranking(name, 0)
        assert len(lists) == len(study.queries) and all(len(v) == len(set(v)) <= 20 for v in lists.values())
    # ltr's candidates come from its four component rankings only
    pool = study.rankings[study.rankings["rank"] <= 20]
    comps = pool[pool["method"].isin(COMPONENT_METHODS)].groupby("qkey")["api_id"].agg(set)
    assert all(set(v) <= comps[k] for k, v in study.ranking("ltr", 0).items())
    for name in ("ltr", "ltr-nollm"):  # the stored lists are the library's on the stored rankings
        spec = ltr.NAMED[name]  # (ltr-4runs needs every run's stubs: measured by ltr_study, not evaluate)
        want, _, _ = ltr.ltr_rankings(study_runs(study, spec), study.queries, spec)
        assert study.ranking(name, 0) == {k: list(v) for k, v in want.items()}
    manifest = export_trec(study, tmp_path / "trec", ["candidates"])
    assert {f["method"] for f in manifest["files"] if f["kind"] == "run"} >= {"ltr", "ltr-nollm"}


def test_bench_line_times_the_ranker_beside_linear_fusion():
    from toolbench_lib.bench.ltr import bench_ltr
    from toolbench_lib.bench.ltr import synthetic_study as bench_study

    study = bench_study(30)
    assert len(study.queries) == 30 and set(study.methods) == set(COMPONENT_METHODS)
    line = bench_ltr(study, "synthetic", repeats=1)
    assert line.unit == "ms" and line.better == "lower"
    assert line.baseline_value > 0 and line.candidate_value > 0
    d = line.details
    assert d["queries"] == 30 and d["features"] == len(ltr.NAMED["ltr"].feature_names)
    assert d["model_bytes"] > 0 and d["train_s"] >= 0 and d["threads"] == ltr.THREADS


def test_bench_command_has_the_ltr_line(real_data_dir, capsys, tmp_path):
    from toolbench_lib.cli import main

    out = tmp_path / "bench.json"
    assert main(["bench", "--quick", "--only", "ltr", "--json", str(out)]) == 0
    lines = json.loads(out.read_text())["lines"]
    assert [ln["name"] for ln in lines] == ["learned ranker (ltr) beside linear fusion, per query"]
    assert lines[0]["skipped"] is None and lines[0]["details"]["study"].startswith("synthetic")
