"""Fused discovery methods on a synthetic stored study (no data, no model): exact lists, CV honesty."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from toolbench_lib.data.folds import query_folds
from toolbench_lib.data.queries import clusters
from toolbench_lib.retrieval import fused
from toolbench_lib.retrieval.fuse import combine
from toolbench_lib.retrieval.fusion_specs import FusionSpec, Ranked, RoundRobin, Run, round_robin
from toolbench_lib.retrieval.tuning import Tuned
from toolbench_lib.study.stored import StudyResult

from .conftest import SLICE_APIS, SLICE_QUERIES
from .hand_tables import study_of_hits


def _hits(key: str, method: str, run: int, text_idx: int, ranking: list[tuple[str, float]]) -> list[dict]:
    return [{"qkey": key, "method": method, "run": run, "text_idx": text_idx, "rank": i, "row": 0,
             "api_id": a, "score": s} for i, (a, s) in enumerate(ranking, 1)]


def synthetic_study(n_per_set: int = 12, seed: int = 0) -> StudyResult:
    """Two sets: in "S1" the query's ranking finds the ground truth, in "S2" the stubs do.

    Each query has two ground-truth APIs; RtP's top-1 cosine is high in S1 and low in S2.
    """
    rng = np.random.default_rng(seed)
    queries, hits = [], []
    for subset in ("S1", "S2"):
        for i in range(n_per_set):
            key = f"{subset}:{i}"
            gt = [f"{key}/gt0", f"{key}/gt1"]
            noise = [f"{key}/n{j}" for j in range(30)]
            good = subset == "S1"
            top = 0.8 if good else 0.4
            q_rank = ([(gt[0], top), (gt[1], top - 0.01)] if good else []) + \
                [(n, top - 0.02 - 0.01 * j) for j, n in enumerate(noise[:8])]
            s0 = ([(gt[0], 0.7)] if not good else []) + \
                [(n, 0.6 - 0.01 * j) for j, n in enumerate(noise[8:14])]
            s1 = ([(gt[1], 0.69)] if not good else []) + \
                [(n, 0.55 - 0.01 * j) for j, n in enumerate(noise[14:20])]
            best: dict[str, float] = {}
            for a, s in s0 + s1:
                best[a] = max(best.get(a, -1), s)
            merged = sorted(best.items(), key=lambda x: -x[1])[:8]
            hits += _hits(key, "rtp", -1, 0, q_rank) + _hits(key, "rtp", -1, -1, q_rank)
            hits += _hits(key, "ptr", 0, 0, s0) + _hits(key, "ptr", 0, 1, s1)
            hits += _hits(key, "ptr", 0, -1, merged)
            queries.append({"qkey": key, "subset": subset, "query": f"query {key} {rng.integers(1000)}",
                            "candidates": gt, "relevant": gt[:1]})
    q = pd.DataFrame(queries)
    stubs = pd.DataFrame([{"qkey": k, "run": 0, "stub_idx": j, "name": f"s{j}", "reasoning": "r",
                           "fell_back": False} for k in q["qkey"] for j in range(2)])
    calls = pd.DataFrame([{"qkey": k, "method": "ptr", "run": 0, "stage": "stubs", "tokens_in": 100,
                           "tokens_out": 40, "latency_s": 1.0, "cached": True, "backend": "x", "model": "m"}
                          for k in q["qkey"]])
    prov = {"model": "synthetic", "settings": {"runs": 1, "methods": ["rtp", "ptr"], "k": 5}}
    return study_of_hits(q, stubs, pd.DataFrame(hits), pd.DataFrame(), calls, prov)


def _recall(run: Run, result: StudyResult, subset: str, k: int = 5) -> float:
    q = result.queries[result.queries["subset"] == subset]
    return float(np.mean([len(set(list(run[key])[:k]) & set(gt)) / len(gt)
                          for key, gt in zip(q["qkey"], q["candidates"], strict=True)]))


def _ordered(run: Run) -> dict[str, list[tuple[str, float]]]:
    """A run with its order made part of equality (dict equality ignores it)."""
    return {key: list(scored.items()) for key, scored in run.items()}


def test_round_robin_dedupes_and_cuts() -> None:
    got = round_robin([["a", "b", "c"], ["b", "d"], ["e"]], 4)
    assert list(got) == ["a", "b", "e", "d"]
    assert got == {"a": 1.0, "b": 1.0, "e": 1.0, "d": 0.5}  # 1 / best rank in any list
    assert round_robin([["a"], []], 5) == {"a": 1.0}
    assert round_robin([], 3) == {}


def test_baselines_reproduce_stored_rankings() -> None:
    res = synthetic_study()
    runs = fused.fused_runs(res, ["rtp", "ptr"], 5)
    h = res.rankings
    for method in ("rtp", "ptr"):
        final = h[(h["method"] == method) & (h["run"] == 0) & (h["rank"] <= 5)]
        expected = final.sort_values(["qkey", "rank"]).groupby("qkey")["api_id"].apply(list).to_dict()
        assert {key: list(scored) for key, scored in runs[method].items()} == expected
        scores = final.sort_values(["qkey", "rank"]).groupby("qkey")["score"].apply(list).to_dict()
        assert {key: list(scored.values()) for key, scored in runs[method].items()} == scores


def test_rtp_and_ptr_each_win_one_set_and_fusion_wins_both() -> None:
    res = synthetic_study()
    runs = fused.fused_runs(res, ["rtp", "ptr", "rr", "rrf", "maxsim", "combmax"], 5)
    assert _recall(runs["rtp"], res, "S1") == 1.0 and _recall(runs["rtp"], res, "S2") == 0.0
    assert _recall(runs["ptr"], res, "S1") == 0.0 and _recall(runs["ptr"], res, "S2") == 1.0
    for name in ("rr", "rrf", "maxsim"):
        assert _recall(runs[name], res, "S1") == 1.0, name
        assert _recall(runs[name], res, "S2") == 1.0, name
    assert _ordered(runs["maxsim"]) == _ordered(runs["combmax"])  # CombMAX on raw cosines is max-sim
    assert all(len(v) == 5 and len(set(v)) == 5 for v in runs["rrf"].values())


def test_maxsim_keeps_best_score_order() -> None:
    res = synthetic_study()
    key = "S2:0"
    scored = fused.fused_runs(res, ["maxsim"], 3)["maxsim"][key]
    assert list(scored.items()) == [(f"{key}/gt0", 0.7), (f"{key}/gt1", 0.69), (f"{key}/n8", 0.6)]


def test_every_method_scores_its_list_with_its_own_score() -> None:
    """Each method's run carries the method's own scores, non-increasing along its list: the fused score,
    the component's score, the chosen candidate's (a tuned method, a route); round-robin's is the
    reciprocal of the API's best rank in any component ranking, and no other is the reciprocal rank."""
    res = synthetic_study()
    inp = fused.study_inputs(res)
    names = [n for n in fused.METHODS if n != "meanemb"]  # meanemb needs an index: test_fused_registry
    runs, chosen = fused.method_runs(inp, names, 10)
    for name in names:
        spec = fused.spec_of(name)
        for key, scored in runs[name].items():
            s = list(scored.values())
            assert len(s) > 1 and all(a >= b for a, b in zip(s, s[1:], strict=False)), (name, key)
            if isinstance(spec, RoundRobin):
                best: dict[str, int] = {}
                for r in (r for c in spec.components for r in inp.texts(c, key)):
                    for rank, (a, _) in enumerate(r, 1):
                        best[a] = min(best.get(a, rank), rank)
                assert scored == {a: 1.0 / best[a] for a in scored}, (name, key)
                continue
            assert not np.allclose(s, 1.0 / np.arange(1, len(s) + 1)), (name, key)
            if isinstance(spec, FusionSpec):
                assert scored == {a: spec.scores(inp, key)[a] for a in scored}, (name, key)
            elif isinstance(spec, Ranked):
                assert list(scored.items()) == inp.texts(spec.component, key)[0][:10], (name, key)
            elif isinstance(spec, Tuned):
                own = spec.with_param(inp, chosen[name][key]).ranked(inp, 10)[key]
                assert list(scored.items()) == list(own.items()), (name, key)
    route = fused.FUSED["route-cv"].with_param(inp, 0.6)  # RtP's list above 0.6 (S1), else RRF's (S2)
    routed = route.ranked(inp, 10)
    rtp, rrf = fused.BASELINES["rtp"].ranked(inp, 10), fused.RRF.ranked(inp, 10)
    assert all(_ordered(routed)[key] == _ordered(rtp if key.startswith("S1") else rrf)[key]
               for key in inp.keys)


def test_route_threshold_is_cross_validated_and_routes_by_top1() -> None:
    res = synthetic_study()
    inp = fused.study_inputs(res)
    lists, chosen = replace(fused.FUSED["route-cv"], folds=3, seed=1).tune(inp, 5)
    # Every fold's threshold separates the two sets' top-1 cosines (0.8 against 0.4).
    assert all(0.4 < t <= 0.8 for t in chosen.values())
    assert _recall(lists, res, "S1") == 1.0 and _recall(lists, res, "S2") == 1.0
    needs = fused.stub_calls("route-cv", inp, chosen)
    assert not any(needs[k] for k in inp.keys if k.startswith("S1"))
    assert all(needs[k] for k in inp.keys if k.startswith("S2"))


def test_cv_never_uses_the_query_own_ground_truth() -> None:
    """Corrupting one fold's ground truth cannot change that fold's chosen parameters."""
    res = synthetic_study()
    inp = fused.study_inputs(res)
    tuned = replace(fused.FUSED["wsum-cv"], folds=3, seed=0)
    _, chosen = tuned.tune(inp, 5)
    keys = inp.keys
    texts = inp.queries.set_index("qkey")["query"].reindex(keys)
    fold = query_folds([inp.subsets[k] for k in keys], texts, clusters(inp.queries, keys), 3, 0)
    test = np.flatnonzero(fold == 0)  # the folds tune() makes
    for j in test:
        inp.qrels[keys[j]] = {"nothing"}
    _, chosen2 = tuned.tune(inp, 5)
    assert all(chosen[keys[j]] == chosen2[keys[j]] for j in test)


def test_fit_then_apply_matches_grid() -> None:
    res = synthetic_study()
    inp = fused.study_inputs(res)
    params = fused.fit_params(inp, ["wsum-cv", "wrrf-cv", "route-cv"], 5)
    assert set(params) == {"wsum-cv", "wrrf-cv", "route-cv"}
    for name, p in params.items():
        lists = fused.method_runs(inp, [name], 5, params={name: p})[0][name]
        assert _recall(lists, res, "S1") == 1.0 and _recall(lists, res, "S2") == 1.0, name
    with pytest.raises(ValueError, match="not in its grid"):
        fused.method_runs(inp, ["wsum-cv"], 5, params={"wsum-cv": 0.123})


def test_unknown_method_and_missing_setup_are_clear() -> None:
    res = synthetic_study(4)
    with pytest.raises(ValueError, match="unknown method"):
        fused.fused_runs(res, ["nope"], 5)
    with pytest.raises(ValueError, match="meanemb needs"):
        fused.fused_runs(res, ["meanemb"], 5)
    with pytest.raises(ValueError, match="no rankings of rtp for run 3"):
        fused.fused_runs(res, ["rr"], 5, run=3)


@pytest.mark.parametrize(("method", "norm", "params"), [
    ("rrf", None, {}), ("max", None, {}), ("sum", None, {}), ("mnz", None, {}), ("max", "min-max", {}),
    ("sum", "min-max", {}), ("mnz", "min-max", {}), ("wsum", "min-max", {"weights": [0.3, 0.7, 0.2]}),
    ("wsum", None, {"weights": [1.0, 0.25, 0.5]})])
def test_combine_equals_ranx_fuse(method: str, norm: str | None, params: dict) -> None:
    """ranx is the oracle: every fused score equals ``ranx.fuse``'s on random rankings."""
    from ranx import Run, fuse

    rng = np.random.default_rng(7)
    docs = [f"d{i}" for i in range(25)]
    texts = {f"q{i}": [[(d, float(s)) for d, s in zip(rng.choice(docs, 8, replace=False),
                                                        np.sort(rng.uniform(0.1, 0.9, 8))[::-1], strict=True)]
                       for _ in range(3)] for i in range(6)}
    runs = [Run.from_dict({q: dict(ts[j]) for q, ts in texts.items()}) for j in range(3)]
    expected = fuse(runs, norm=norm, method=method, params=params)
    for q, ts in texts.items():
        got = combine(ts, method, norm, params.get("weights"))
        want = dict(expected[q])
        assert set(got) == set(want)
        assert all(got[d] == pytest.approx(want[d], rel=1e-6, abs=1e-9) for d in want), (method, norm, q)


def test_tuning_depth_is_separate_from_list_length() -> None:
    inp = fused.study_inputs(synthetic_study())
    short, chosen_short = replace(fused.FUSED["wsum-cv"], folds=3).tune(inp, 5)
    long, chosen_long = replace(fused.FUSED["wsum-cv"], folds=3, tune_k=5).tune(inp, 12)
    assert chosen_short == chosen_long
    assert all(_ordered(long)[key][:5] == _ordered(short)[key] and len(long[key]) == 12 for key in inp.keys)


def test_fused_retriever_in_the_study_pipeline() -> None:
    """As a retriever (``--method rtp,ptr,rrf``) a fused method gives the lists of :func:`fused_runs`."""
    from types import SimpleNamespace

    from toolbench_lib.retrieval.retrievers import RETRIEVERS, RunContext

    assert {"rrf", "combsum2-mm", "route-cv"} <= set(RETRIEVERS)
    res = synthetic_study()
    ids = sorted(set(res.rankings["api_id"]) | set(res.text_rankings["api_id"]))
    setup = SimpleNamespace(api_ids=ids)
    ctx = RunContext(setup, res.queries, 0, 5, res.stubs, {m: res.retrieved(m, 0) for m in ("rtp", "ptr")})
    for name in ("rrf", "combsum2-mm", "rr"):
        got_back = RETRIEVERS[name].retrieve(ctx)
        out = got_back.final
        assert got_back.texts.empty and (out["method"] == name).all()
        out = out.sort_values(["qkey", "rank"])
        got = {key: list(zip(g["api_id"], g["score"], strict=True)) for key, g in out.groupby("qkey")}
        assert got == _ordered(fused.fused_runs(res, [name], 5)[name])  # the method's own scores, stored
        assert all(ids[r] == a for r, a in zip(out["row"], out["api_id"], strict=True))


def test_evaluate_prints_fused_methods_with_extra_metrics(ds, embedder, capsys) -> None:
    """``evaluate --method rtp,ptr,combsum2-mm`` on a slice: three methods, nDCG/MRR/COMP beside recall."""
    import json

    from toolbench_lib.cli import main

    code = main(["evaluate", "--method", "rtp,ptr,combsum2-mm", "--backend", "rules", "--runs", "1",
                 "--plan-limit", "0", "--max-apis", str(SLICE_APIS), "--limit", str(SLICE_QUERIES),
                 "--model", "all-MiniLM-L6-v2",
                 "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    for name in ("G1", "G2", "G3"):
        methods = out["subsets"][name]["methods"]
        assert list(methods) == ["rtp", "ptr", "combsum2-mm"]
        for v in methods.values():
            assert all(0.0 <= v[m] <= 1.0 for m in ("recall", "precision", "ndcg", "mrr", "comp"))


def test_linked_groups_join_items_sharing_any_key_and_folds_keep_a_group_together():
    from toolbench_lib.data.folds import grouped_fold_ids, linked_groups

    texts = ["a", "b", "a", "c", "d", "e"]
    gts = ["x", "y", "z", "y", "w", "v"]  # 0-2 by text, 1-3 by ground truth; 4, 5 alone
    g = linked_groups(texts, gts)
    assert g[0] == g[2] and g[1] == g[3] and len(set(g.tolist())) == 4
    ids = grouped_fold_ids(["G1"] * 6, g, folds=5, seed=0)  # 4 groups: at most 4 folds
    assert ids[0] == ids[2] and ids[1] == ids[3] and len(set(ids.tolist())) <= 4
    assert linked_groups().size == 0
