"""Leaderboard metrics through ranx against hand-computed values, CIs, paired tests, goal and costs."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from tests.test_fusion import synthetic_study
from toolbench_lib.analysis import beyond, fusion_board
from toolbench_lib.eval.evaluation import score_rankings
from toolbench_lib.report.appendix import APPENDIX_BEYOND
from toolbench_lib.retrieval import fused


def _value(df: pd.DataFrame, key: str, metric: str, k: int) -> float:
    return float(df[(df["qkey"] == key) & (df["metric"] == metric) & (df["k"] == k)]["value"].iloc[0])


def test_ranx_metrics_match_hand_computed_values() -> None:
    lists = {"a": ["x", "g1", "y", "g2"], "b": ["g3"], "c": [], "d": ["z"]}
    qrels = {"a": {"g1", "g2"}, "b": {"g3", "g4", "g5"}, "c": {"g6"}, "d": set()}
    df = beyond.per_query_metrics(lists, qrels, [1, 2, 4])
    assert _value(df, "a", "recall", 2) == 0.5 and _value(df, "a", "recall", 4) == 1.0
    assert _value(df, "a", "precision", 4) == 0.5 and _value(df, "a", "precision", 1) == 0.0
    assert _value(df, "a", "mrr", 4) == 0.5 and _value(df, "a", "mrr", 1) == 0.0
    ideal = 1 + 1 / math.log2(3)
    assert _value(df, "a", "ndcg", 4) == pytest.approx((1 / math.log2(3) + 1 / math.log2(5)) / ideal)
    assert _value(df, "a", "comp", 4) == 1.0 and _value(df, "a", "comp", 2) == 0.0
    assert _value(df, "b", "recall", 1) == pytest.approx(1 / 3) and _value(df, "b", "comp", 4) == 0.0
    for key in ("c", "d"):  # nothing retrieved, or no ground truth: zero everywhere
        assert (df[df["qkey"] == key]["value"] == 0).all()


def test_ranx_recall_precision_equal_the_project_metrics() -> None:
    """beyond's leaderboard scores equal eval's one scorer (eval.evaluation.score_rankings)."""
    rng = np.random.default_rng(3)
    docs = [f"d{i}" for i in range(40)]
    lists = {f"q{i}": list(rng.choice(docs, 12, replace=False)) for i in range(30)}
    qrels = {f"q{i}": set(rng.choice(docs, int(rng.integers(1, 6)), replace=False)) for i in range(30)}
    df = beyond.per_query_metrics(lists, qrels, [5])
    queries = pd.DataFrame({"qkey": list(qrels), "candidates": [sorted(r) for r in qrels.values()]})
    ours = score_rankings(lists, queries, "candidates", 5).set_index("qkey")
    for metric in ("recall", "precision"):
        got = df[df["metric"] == metric].set_index("qkey")["value"]
        assert np.allclose(got.loc[ours.index].to_numpy(), ours[metric].to_numpy())


def test_versus_is_eval_stats_paired_method_minus_reference() -> None:
    """The leaderboard's comparison is eval.stats' one paired test, read as method minus reference."""
    from toolbench_lib.eval.stats import paired

    v = np.array([0.0, 1.0] * 50)
    same = fusion_board.versus(v, v)
    assert np.isnan(same["p_value"]) and "not testable" in same["note"]
    assert same["ties"] == 100 and same["diff"] == 0.0
    better = fusion_board.versus(v + 0.2, v)
    assert better["diff"] == pytest.approx(0.2) and better["wins"] == 100 and better["losses"] == 0
    rng = np.random.default_rng(4)
    a, b = rng.random(40), rng.random(40)
    got, want = fusion_board.versus(a, b), paired(b, a)
    assert (got["diff"], got["diff_lo"], got["diff_hi"], got["p_value"]) == (
        want["diff"], want["ci_low"], want["ci_high"], want["p"])
    assert got["diff_lo"] < got["diff"] < got["diff_hi"]


@pytest.fixture(scope="module")
def scored():
    res = synthetic_study()
    scores, decisions = beyond.method_scores(res, ["rtp", "ptr", "rrf", "route-cv"], ks=[1, 5], folds=3)
    return res, scores, decisions


def test_leaderboard_compares_with_the_better_architecture(scored) -> None:
    _, scores, _ = scored
    board = fusion_board.leaderboard(scores, 5)
    rec = board[board["metric"] == "recall"].set_index(["subset", "method"])
    assert rec.loc[("S1", "rrf"), "reference"] == "rtp" and rec.loc[("S2", "rrf"), "reference"] == "ptr"
    assert rec.loc[("S1", "rtp"), "mean"] == 1.0 and rec.loc[("S1", "ptr"), "mean"] == 0.0
    assert rec.loc[("S2", "rrf"), "diff"] == 0.0 and rec.loc[("S1", "ptr"), "diff"] == -1.0
    wide = fusion_board.leaderboard_wide(board)
    assert {"recall", "precision", "ndcg", "comp", "recall_p_value"} <= set(wide.columns)
    assert wide.iloc[0]["method"] == "rtp"


def test_goal_table_and_costs(scored) -> None:
    res, scores, decisions = scored
    goal = fusion_board.goal_table(scores, 5).set_index("method")
    lows = goal.filter(like="margin_lo_")
    # the goal: every set's CI lower bound above 0, against the best single architecture (never itself)
    testable = goal["goal_note"].eq("")
    assert ((lows > 0).all(axis=1) & testable & ~goal.index.isin(["rtp", "ptr"])).equals(goal["meets_goal"])
    assert not goal.loc["rtp", "meets_goal"] and goal.loc["ptr", "min_margin"] == -1.0
    assert not goal.loc["rrf", "meets_goal"]  # equal to the better architecture on S2 is no gain
    assert goal["baselines"].eq("rtp, ptr").all()
    cand = goal[~goal.index.isin(["rtp", "ptr"])]
    assert fusion_board.goal_summary(goal.reset_index()).startswith(
        f"{int(cand['meets_goal'].sum())} of {len(cand)} fused or learned methods meet the goal against "
        "rtp, ptr")
    costs = beyond.cost_table(res, decisions).set_index(["subset", "method"])
    assert costs.loc[("S1", "rtp"), "stub_tokens_per_query"] == 0.0
    assert costs.loc[("S2", "rrf"), "stub_tokens_per_query"] == 140.0
    assert costs.loc[("S1", "route-cv"), "stub_calls_per_query"] == 0.0  # confident RtP: no stub call
    assert costs.loc[("S2", "route-cv"), "llm_calls_per_query"] == 2.0
    ev = beyond.query_evidence(scores, res.queries, "ptr", 5, n=2)
    assert len(ev) == 4 and (ev[ev["subset"] == "S1"]["diff"] == -1.0).all()


def _goal_scores(n: int, gain: float) -> pd.DataFrame:
    """recall@5 of ``n`` queries per set: rtp and ptr alternate 0/1, ``fused`` adds ``gain`` on half."""
    rows = []
    for subset in ("S1", "S2"):
        for i in range(n):
            base = float(i % 2)
            fused = min(1.0, base + gain * (i % 4 < 2))
            for method, value in (("rtp", base), ("ptr", 1 - base), ("fused", fused)):
                rows.append({"qkey": f"{subset}:{i}", "subset": subset, "method": method, "metric": "recall",
                             "k": 5, "value": value})
    return pd.DataFrame(rows)


def test_the_goal_is_met_only_with_enough_queries_and_a_ci() -> None:
    met = fusion_board.goal_table(_goal_scores(40, 1.0), 5).set_index("method")
    assert met.loc["fused", "meets_goal"] and not met.loc[["rtp", "ptr"], "meets_goal"].any()
    few = fusion_board.goal_table(_goal_scores(8, 1.0), 5).set_index("method")
    assert not few["meets_goal"].any() and "8 queries" in few.loc["fused", "goal_note"]
    flat = fusion_board.goal_table(_goal_scores(40, 0.0), 5).set_index("method")
    assert not flat.loc["fused", "meets_goal"]  # no margin: a CI at 0 is not above it


def test_report_states_notebook_10s_goal_result(tmp_path, scored) -> None:
    from toolbench_lib.report.write import write_report
    from toolbench_lib.study.experiment import ExperimentConfig, save_table

    cfg = ExperimentConfig(run_name="beyond_test", outputs_dir=str(tmp_path / "out"))
    assert "On the main study (notebook 10" not in write_report(cfg).read_text()
    _, scores, _ = scored
    goal = fusion_board.goal_table(scores, 5)
    save_table(goal, "beyond_goal", cfg, "provenance line")
    text = write_report(cfg).read_text()
    section = text.split(f"## {APPENDIX_BEYOND}")[1].split("\n## ")[0]
    assert "On the main study (the dense family only, every fused method of notebook 10, not only the ones " \
           "chosen above): " + fusion_board.goal_summary(goal) in section
    assert text.index("## Appendix A") < text.index(f"## {APPENDIX_BEYOND}") < text.index("## Appendix D")


def test_unseen_queries_drop_repeated_sets() -> None:
    design = pd.DataFrame({"qkey": ["D:1", "D:2"], "query": ["alpha", "beta"], "subset": "D"})
    val = pd.DataFrame({"qkey": [f"V:{i}" for i in range(12)] + ["W:0", "W:1"],
                        "query": [f"new {i}" for i in range(11)] + ["alpha", "beta", "gamma"],
                        "subset": ["V"] * 12 + ["W"] * 2})
    keys, counts = fusion_board.unseen_queries(val, design, min_queries=10)
    assert keys == {f"V:{i}" for i in range(11)}  # V keeps its 11 unseen; W has 1 unseen: dropped
    c = counts.set_index("subset")
    assert c.loc["V", "seen"] == 1 and c.loc["W", "unseen"] == 1 and not c.loc["W", "kept"]


def test_transfer_table_shows_a_threshold_that_does_not_carry_over(scored) -> None:
    """Fitted on S1 alone (RtP always right, top-1 cosine 0.8) the router keeps RtP everywhere, which
    fails on S2; with both sets in the training folds it is right on both."""
    res, _, _ = scored
    t = beyond.transfer_table(res, 5).set_index(["method", "subset"])
    assert t.loc[("route-cv", "S2"), "recall_other_sets"] == 0.0
    assert t.loc[("route-cv", "S2"), "recall_5fold"] == 1.0
    assert t.loc[("route-cv", "S1"), "recall_5fold"] == 1.0
    assert set(t.index.get_level_values("method")) == set(fused.CV)


def test_pooled_margin_uses_each_set_reference(scored) -> None:
    _, scores, _ = scored
    pooled = fusion_board.pooled_margin(scores, 5).set_index("method")
    assert pooled.loc["rrf", "diff"] == 0.0 and pooled.loc["rrf", "reference_mean"] == 1.0
    assert pooled.loc["rtp", "diff"] == -0.5 and pooled.loc["rtp", "losses"] == 12
    assert pooled.loc["rtp", "diff_hi"] < 0 and pooled.loc["rtp", "n_queries"] == 24


def test_a_study_without_ptr_is_one_clear_error() -> None:
    res = synthetic_study(3)
    res.rankings = res.rankings[res.rankings["method"] == "rtp"]
    with pytest.raises(ValueError, match="no PtR rankings"):
        beyond.method_scores(res, ["rtp", "rrf"], ks=[5])


def test_loss_breakdown_by_hand() -> None:
    rows = []
    # Set A: RtP is better (mean 0.75 vs 0.25). m loses q1 (1 -> 0.5, PtR 0) and q2 (1 -> 0.5, PtR 0.5),
    # wins q3 (0 -> 1), ties q4.
    recall = {"rtp": [1, 1, 0, 1], "ptr": [0, 0.5, 1, 0], "m": [0.5, 0.5, 1, 1]}
    for method, vals in recall.items():
        for i, v in enumerate(vals):
            for k, value in ((5, v), (1, 0)):  # k = 1 rows must not count
                rows.append({"qkey": f"A:{i}", "subset": "A", "method": method, "metric": "recall", "k": k,
                             "value": value})
    b = beyond.loss_breakdown(pd.DataFrame(rows), "m", 5)
    assert list(b.columns) == beyond.LOSS_COLUMNS and len(b) == 1
    r = b.iloc[0]
    assert (r["reference"], r["wins"], r["losses"], r["ties"], r["n_queries"]) == ("rtp", 1, 2, 1, 4)
    assert (r["gained"], r["lost"], r["diff"]) == pytest.approx((0.25, 0.25, 0.0))
    assert r["losses_ptr_zero"] == 1 and r["lost_ptr_zero"] == pytest.approx(0.5)
    (line,) = beyond.loss_sentences(b)
    assert line.startswith("A: `m` against RtP") and "wins 1 and loses 2 of 4" in line and "(50% of" in line
    (none,) = beyond.loss_sentences(b.assign(losses_ptr_zero=0, lost_ptr_zero=0.0))
    assert none.endswith("None of the losses is on a query where PtR's own list holds no ground-truth API.")


def test_cached_method_scores_reads_back_and_never_uses_a_corrupted_file(tmp_path, monkeypatch) -> None:
    res = synthetic_study()
    res.provenance["study_key"] = "abc123"
    first = beyond.cached_method_scores(res, ["rtp", "ptr", "rrf"], tmp_path, ks=[1, 5], folds=3)
    (folder,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert {"decisions.parquet", "decisions.parquet.sha256", "scores.parquet", "scores.parquet.sha256"} <= {
        p.name for p in folder.iterdir()}
    calls = []
    real = beyond.method_scores
    monkeypatch.setattr(beyond, "method_scores", lambda *a, **kw: calls.append(1) or real(*a, **kw))
    again = beyond.cached_method_scores(res, ["rtp", "ptr", "rrf"], tmp_path, ks=[1, 5], folds=3)
    assert calls == []  # read back
    pd.testing.assert_frame_equal(first[0], again[0])
    pd.testing.assert_frame_equal(first[1], again[1])
    beyond.cached_method_scores(res, ["rtp", "ptr", "rrf"], tmp_path, ks=[1, 5], folds=4)
    assert calls == [1]  # other arguments: computed
    (folder / "scores.parquet").write_bytes(b"not parquet")
    fixed = beyond.cached_method_scores(res, ["rtp", "ptr", "rrf"], tmp_path, ks=[1, 5], folds=3)
    assert calls == [1, 1]  # the corrupted file is detected and computed again
    pd.testing.assert_frame_equal(first[0], fixed[0])


def test_cost_frontier_stacks_the_names_at_one_cost() -> None:
    board = pd.DataFrame({"subset": ["G1"] * 3, "metric": ["recall"] * 3, "method": ["rtp", "ptr", "rrf"],
                          "mean": [0.40, 0.30, 0.42], "ci_lo": [0.35, 0.25, 0.37],
                          "ci_hi": [0.45, 0.35, 0.47]})
    costs = pd.DataFrame({"subset": ["G1"] * 3, "method": ["rtp", "ptr", "rrf"],
                          "tokens_per_query": [0.0, 120.0, 120.0], "plan_tokens_mean": [float("nan")] * 3})
    fig = beyond.cost_frontier(board, costs)
    offsets = {t.get_text(): t.xyann for t in fig.axes[0].texts}
    assert set(offsets) == {"rtp", "ptr", "rrf"}  # the baselines and the best at each cost
    assert offsets["ptr"][1] != offsets["rrf"][1]  # two names at 120 tokens do not overlap
    more = beyond.cost_frontier(pd.concat([board, board.iloc[[2]].assign(method="wsum", mean=0.39)]),
                                pd.concat([costs, costs.iloc[[2]].assign(method="wsum")]))
    ax = more.axes[0]
    assert {t.get_text() for t in ax.texts} == {"rtp", "ptr", "rrf"}  # wsum is neither base nor best
    dots = [ln for ln in ax.lines if ln.get_marker() == "." and list(ln.get_ydata()) == [0.39]]
    assert len(dots) == 1 and len(ax.containers) == 3  # a grey dot without a CI; three with one
