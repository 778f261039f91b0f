"""The retriever study on a hand-built study (values worked out by hand), fusion specs against ranx.fuse,
and the retriever factor through evaluate on the real slice."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from toolbench_lib.analysis import fusion_board
from toolbench_lib.analysis import retrievers as rv
from toolbench_lib.retrieval.fused import NAMED
from toolbench_lib.retrieval.fusion_specs import FusionInputs, FusionSpec
from toolbench_lib.retrieval.retrievers import get_retriever, method_name, split_method
from toolbench_lib.retrieval.tuning import candidate_specs, weight_grid
from toolbench_lib.study.stored import StudyResult

from .conftest import SLICE_APIS, SLICE_QUERIES
from .hand_tables import HIT_COLUMNS, study_of_hits

# Two sets of two queries; ground truth: G1 q1 {a}, q2 {b}; G2 q3 {c, d}, q4 {e, f}.
QUERIES = pd.DataFrame({
    "qkey": ["G1_instruction:1", "G1_instruction:2", "G2_category_original:3", "G2_category_original:4"],
    "subset": ["G1_instruction", "G1_instruction", "G2_category_original", "G2_category_original"],
    "query": ["q one", "q two", "q three", "q four"],
    "candidates": [["a"], ["b"], ["c", "d"], ["e", "f"]],
    "relevant": [["a"], ["b"], ["c", "d"], ["e", "f"]],
})
# Top lists per method (k = 2 is used below); PtR's lists per run.
LISTS = {
    "rtp": {1: ["a", "x"], 2: ["b", "x"], 3: ["c", "x"], 4: ["x", "y"]},  # G1 1, 1; G2 .5, 0
    "rtp@bm25": {1: ["a", "x"], 2: ["x", "y"], 3: ["c", "d"], 4: ["e", "x"]},  # G1 1, 0; G2 1, .5
}
PTR = {
    "ptr": [{1: ["x", "y"], 2: ["b", "y"], 3: ["c", "d"], 4: ["e", "y"]},  # run 0: G1 0, 1; G2 1, .5
            {1: ["a", "y"], 2: ["y", "z"], 3: ["c", "y"], 4: ["e", "f"]}],  # run 1: G1 1, 0; G2 .5, 1
    "ptr@bm25": [{1: ["a", "b"], 2: ["b", "a"], 3: ["c", "d"], 4: ["e", "f"]},  # G1 1, 1; G2 1, 1
                 {1: ["a", "b"], 2: ["b", "a"], 3: ["c", "d"], 4: ["e", "f"]}],
}


def _rows(method, run, lists):
    out = []
    for q, ids in lists.items():
        key = QUERIES["qkey"][q - 1]
        for rank, a in enumerate(ids, 1):
            out.append((key, method, run, -1, rank, 0, a, 1.0 / rank))
    return out


def _study() -> StudyResult:
    rows = []
    for m, lists in LISTS.items():
        rows += _rows(m, -1, lists)
    for m, runs in PTR.items():
        for r, lists in enumerate(runs):
            rows += _rows(m, r, lists)
    hits = pd.DataFrame(rows, columns=HIT_COLUMNS)
    calls = pd.DataFrame({"qkey": QUERIES["qkey"].tolist() * 2, "method": "ptr", "run": [0] * 4 + [1] * 4,
                          "stage": "stubs", "tokens_in": 100, "tokens_out": 20, "latency_s": 1.0,
                          "cached": True, "backend": "replay", "model": "m"})
    prov = {"settings": {"runs": 2, "k": 2, "depth": 2, "methods": ["rtp", "ptr", "rtp@bm25", "ptr@bm25"]},
            "retrievers": {"dense": "cosine", "bm25": {"k1": 1.5}}}
    return study_of_hits(QUERIES, pd.DataFrame(), hits, pd.DataFrame(), calls, prov)


def test_method_names_carry_the_family():
    assert method_name("rtp") == "rtp" and method_name("ptr", "bm25") == "ptr@bm25"
    assert split_method("ptr@hybrid") == ("ptr", "hybrid") and split_method("fuse4") == ("fuse4", "dense")
    assert get_retriever("ptr@bm25").uses_stubs and not get_retriever("rtp@hybrid").uses_stubs


def test_family_table_by_hand():
    t = rv.family_table(_study(), k=2).set_index(["subset", "retriever", "method"])
    assert t.loc[("G1", "dense", "rtp"), "recall_mean"] == pytest.approx(1.0)
    assert t.loc[("G2", "dense", "rtp"), "recall_mean"] == pytest.approx(0.25)
    # PtR dense: run 0 G1 mean 0.5, run 1 0.5; G2 run 0 0.75, run 1 0.75
    assert t.loc[("G1", "dense", "ptr"), "recall_mean"] == pytest.approx(0.5)
    assert t.loc[("G2", "dense", "ptr"), "recall_mean"] == pytest.approx(0.75)
    assert t.loc[("G1", "bm25", "rtp"), "recall_mean"] == pytest.approx(0.5)
    assert t.loc[("G2", "bm25", "ptr"), "recall_mean"] == pytest.approx(1.0)
    assert t.loc[("G1", "bm25", "ptr"), "llm_calls"] == 1 and t.loc[("G1", "bm25", "rtp"), "llm_calls"] == 0
    assert (t["n_runs"] == 2).all()


def test_tests_and_crossover_by_hand():
    tests = rv.family_tests(_study(), k=2).set_index(["subset", "retriever"])
    assert tests.loc[("G1", "dense"), "diff"] == pytest.approx(-0.5)
    assert tests.loc[("G2", "dense"), "diff"] == pytest.approx(0.5)
    assert tests.loc[("G1", "bm25"), "diff"] == pytest.approx(0.5)
    assert tests.loc[("G2", "bm25"), "ptr_wins"] == 1 and tests.loc[("G2", "bm25"), "ties"] == 1
    tested = tests[tests["p"].notna()]
    assert (tested["p_holm"] >= tested["p"] - 1e-12).all()  # Holm never lowers a p-value
    untested = tests[tests["p"].isna()]  # 2 queries with equal differences: not testable, and says so
    assert untested["note"].str.startswith("not testable").all() and untested["p_holm"].isna().all()
    assert tests["family"].str.startswith("Holm over G1_instruction, G2_").all()  # the study's two sets
    cross = rv.crossover(tests.reset_index()).set_index("retriever")
    assert cross.loc["dense", "ahead_G1"] == "RtP" and cross.loc["dense", "ahead_G2"] == "PtR"
    assert bool(cross.loc["dense", "pattern_holds"]) and not bool(cross.loc["bm25", "pattern_holds"])
    text = rv.crossover_sentence(cross.reset_index())
    assert "depends on the retriever" in text and "with dense but not with bm25" in text


def test_divergence_and_routing_by_hand():
    d = rv.family_divergence(_study(), k=2).set_index(["subset", "retriever"])
    # dense G1: q1 rtp {a,x} vs ptr run0 {x,y} (x), run1 {a,y} (a); q2 {b,x} vs {b,y} (b), {y,z} (none):
    # one disjoint pair of four
    assert d.loc[("G1", "dense"), "disjoint_share"] == pytest.approx(0.25)
    r = rv.routing_by_subset(rv.family_table(_study(), k=2)).set_index("retriever")
    # dense: by subset = RtP on G1 (1.0, 2 queries) + PtR on G2 (0.75, 2 queries) = 0.875
    assert r.loc["dense", "by_subset"] == pytest.approx(0.875)
    assert r.loc["dense", "stub_calls_saved"] == pytest.approx(0.5)


def test_fusion_spec_equals_ranx_fuse():
    from ranx import Run, fuse

    rng = np.random.default_rng(3)
    comps = ("q.dense", "q.bm25", "s.dense", "s.bm25")
    rankings = {c: {q: [(f"d{i}", float(s)) for i, s in zip(rng.choice(30, 8, replace=False),
                                                           np.sort(rng.random(8))[::-1], strict=True)]
                    for q in ("q1", "q2")} for c in comps}
    for spec in (NAMED["fuse4"], NAMED["fuse4-rrf"], FusionSpec(comps, "sum", "min-max")):
        inp = FusionInputs({c: {q: [r] for q, r in per_q.items()} for c, per_q in rankings.items()},
                           ["q1", "q2"], {}, {})
        got = spec.ranked(inp, 10)
        runs = [Run({q: dict(rankings[c][q]) for q in ("q1", "q2")}) for c in comps]
        kwargs = {"method": spec.method, "norm": spec.norm}
        if spec.method == "wsum":
            kwargs["params"] = {"weights": list(spec.weights)}
        want = fuse(runs, **kwargs).to_dict()
        for q in ("q1", "q2"):
            expected = [a for a, _ in sorted(want[q].items(), key=lambda x: (-x[1], x[0]))[:10]]
            assert list(got[q]) == expected
            assert all(got[q][a] == pytest.approx(want[q][a], rel=1e-6) for a in expected)  # ranx's score


def test_weight_grid_and_bad_specs():
    g = weight_grid(2, (0.0, 0.5, 1.0))
    assert g == [(0.0, 1.0), (1.0, 0.0), (1.0, 1.0), (0.5, 1.0), (1.0, 0.5)]  # multiples kept once
    assert len(candidate_specs(("q.dense", "q.bm25"), (0.0, 0.5, 1.0))) == 1 + len(g)
    with pytest.raises(ValueError, match="unknown fusion component"):
        FusionSpec(("q.sparse",))
    with pytest.raises(ValueError, match="one weight per component"):
        FusionSpec(("q.dense", "q.bm25"), "wsum", "min-max", (1.0,))


def test_fusion_choice_prefers_what_recall_says():
    study = _study()
    chosen = fusion_board.choose_fusion(study, ("q.dense", "q.bm25"), k=2, folds=2, values=(0.0, 1.0))
    # q.dense alone: G1 1.0, G2 0.25 (mean 0.625); q.bm25 alone: G1 0.5, G2 0.75 (0.625); the fused lists
    # interleave the two rankings' best ids; whatever wins, its recall is the best of the candidates.
    rec = fusion_board.spec_recalls(candidate_specs(("q.dense", "q.bm25"), (0.0, 1.0)), study, 2)
    groups = study.queries["subset"].to_numpy()
    per_set = np.stack([rec[:, groups == g].mean(axis=1) for g in np.unique(groups)], axis=1).mean(axis=1)
    best = candidate_specs(("q.dense", "q.bm25"), (0.0, 1.0))[int(np.argmax(per_set))]
    assert chosen["spec"] == best and len(chosen["cv_recall"]) == 4


def test_costs_name_calls_tokens_and_time():
    study = _study()
    c = fusion_board.cost_table(study, ["dense", "bm25"], {"fuse4": NAMED["fuse4"]},
                      {"dense:query": 1.0, "bm25:query": 0.5, "dense:stubs": 2.0, "bm25:stubs": 1.0})
    c = c.set_index("method")
    assert c.loc["rtp", "llm_calls"] == 0 and c.loc["ptr@bm25", "llm_calls"] == 1
    assert c.loc["ptr", "stub_tokens"] == pytest.approx(120.0) and c.loc["rtp@bm25", "stub_tokens"] == 0
    assert c.loc["fuse4", "search_ms"] == pytest.approx(4.5)


def test_evaluate_with_retriever_families_on_the_slice(ds, embedder, capsys, tmp_path):
    from toolbench_lib.cli import main

    # the suite's slice (its embeddings are cached by then): G1-G3, 15 queries each, 2,500 APIs
    assert main(["evaluate", "--method", "rtp,fuse2", "--retriever", "dense,bm25,hybrid", "--max-apis",
                 str(SLICE_APIS), "--limit", str(SLICE_QUERIES), "--json", "--save",
                 str(tmp_path / "s")]) == 0
    out = json.loads(capsys.readouterr().out)
    methods = out["subsets"]["G1"]["methods"]
    assert set(methods) == {"rtp", "rtp@bm25", "rtp@hybrid", "fuse2"}
    assert methods["rtp@bm25"]["retriever"] == "bm25" and methods["rtp@bm25"]["architecture"] == "rtp"
    assert "bm25" in out["retrievers"] and "Snowball" in out["retrievers"]["bm25"]["stemmer"]
    saved = StudyResult.load(tmp_path / "s")
    assert saved.ranking("rtp@bm25")  # the family's rankings are in the stored study's tables
    with pytest.raises(SystemExit) as exc:
        main(["evaluate", "--retriever", "sparse", "--subset", "G1"])
    assert exc.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown retriever sparse; choose from dense, bm25, hybrid" in err[0]


def test_bm25_scale_study_indexes_each_sub_registry_on_its_own():
    from .test_bm25 import bm25s_hits

    words = ["weather", "currency", "sports", "music", "travel", "hotel", "news", "movies"]
    texts = [f"{words[i % 8]} api number {i} {words[(i * 3) % 8]}" for i in range(40)]
    registry = pd.DataFrame({"api_id": [f"t/{i}" for i in range(40)],
                             "category": ["A" if i % 2 else "B" for i in range(40)]})
    queries = pd.DataFrame({"qkey": ["G1_instruction:1", "G1_instruction:2"],
                            "subset": ["G1_instruction"] * 2, "query": ["weather travel", "hotel news"],
                            "candidates": [["t/0", "t/16"], ["t/5"]], "relevant": [["t/0"], ["t/5"]]})
    stubs = pd.DataFrame({"qkey": ["G1_instruction:1", "G1_instruction:2"], "run": [0, 0], "stub_idx": [0, 0],
                          "name": ["weather", "hotel"], "reasoning": ["", ""], "fell_back": [False, False]})
    scale, div = rv.bm25_scale_study(registry, texts, queries, stubs, [10, None], [0, 1], k=3)
    assert set(scale["size"]) == {10, 40} and (scale["retriever"] == "bm25").all()
    assert len(scale) == 2 * 2 + 2 and len(div) == 3  # two seeds at 10 APIs, one draw of the whole registry
    # the whole registry equals a bm25s index's search of every text
    full = bm25s_hits(texts, np.arange(len(texts)), ["weather travel", "hotel news"], 3)
    want = np.mean([len({f"t/{r}" for r in h.rows} & g) / len(g)
                    for h, g in zip(full, [{"t/0", "t/16"}, {"t/5"}], strict=True)])
    got = scale[(scale["size"] == 40) & (scale["method"] == "rtp")]["recall"].iloc[0]
    assert got == pytest.approx(want)
    gap = rv.scale_gap(scale)
    assert set(gap.columns) >= {"rtp", "ptr", "ptr_minus_rtp"} and len(gap) == 2


def test_trec_export_writes_every_family_and_ranx_reads_it_back(tmp_path):
    from ranx import Qrels, Run, evaluate

    from toolbench_lib.eval.export import export_trec

    study = _study()
    export_trec(study, tmp_path, gts=["candidates"])
    names = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert "G1.rtp@bm25.run0.trec" in names and "G2.ptr@bm25.run1.trec" in names
    qrels = Qrels.from_file(str(tmp_path / "qrels" / "G2.candidates.qrels"), kind="trec")
    run = Run.from_file(str(tmp_path / "runs" / "G2.ptr@bm25.run0.trec"), kind="trec")
    assert evaluate(qrels, run, "recall@2") == pytest.approx(1.0)  # PtR with BM25 finds all of G2 (by hand)


def test_cached_tables_are_read_back_and_a_damaged_copy_is_made_again(tmp_path):
    calls = []

    def make():
        calls.append(1)
        return {"a": pd.DataFrame({"x": [1.5, 2.5]}), "b": pd.DataFrame({"text": ["one"]})}

    first = rv.cached_tables(tmp_path, "k5", make)
    again = rv.cached_tables(tmp_path, "k5", make)
    assert len(calls) == 1 and again["a"]["x"].tolist() == [1.5, 2.5]
    assert again["b"]["text"].tolist() == ["one"]
    victim = next(tmp_path.glob("tables-k5-*/a.parquet"))
    victim.write_bytes(victim.read_bytes()[:-8])
    rv.cached_tables(tmp_path, "k5", make)
    assert len(calls) == 2  # the damaged copy was detected and not used
    rv.cached_tables(tmp_path, "k10", make)
    assert len(calls) == 3 and set(first) == {"a", "b"}
