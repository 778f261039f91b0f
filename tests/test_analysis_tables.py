"""Analysis tables on a hand-made study whose every number is worked out by hand below.

The study: k = 2 (the planner sees the top 2), rankings stored to depth 10, two runs, plans for the
first query of each subset. ``G1`` holds q1 (candidates a, b; relevant a) and q2 (c; c); ``G2`` holds
q3 (d, e, f, g; d, e) and q4 (h; h). Rankings (then padded with non-ground-truth ids to depth 10):

    RtP:        q1 a x b   q2 y z c   q3 d e x   q4 x y z
    PtR run 0:  q1 x a y   q2 c y z   q3 x y d   q4 h x y
    PtR run 1:  q1 a b x   q2 y c z   q3 x y d   q4 h x y
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from toolbench_lib.analysis.data_stats import (
    apis_by_source,
    apis_per_category,
    doc_length_stats,
    gt_resolution,
    gt_sizes,
)
from toolbench_lib.analysis.k_ablation import budget_check, k_ablation
from toolbench_lib.analysis.main_results import (
    MAIN_COLUMNS,
    TTEST_COLUMNS,
    WINS_COLUMNS,
    main_results,
    ttests,
    wins,
)
from toolbench_lib.analysis.stub_analysis import (
    OVERHEAD_COLUMNS,
    STUB_COLUMNS,
    stub_examples,
    stub_stats,
    token_overhead,
)
from toolbench_lib.analysis.trajectory import (
    MISS_COLUMNS,
    TRAJECTORY_COLUMNS,
    jaccard,
    miss_behaviour,
    trajectory,
)
from toolbench_lib.data.dataset import Dataset
from toolbench_lib.study.stored import StudyResult

from .hand_tables import HIT_COLUMNS, study_of_hits

G1, G2 = "G1_instruction", "G2_category_original"
DEPTH = 10
RANKINGS = {
    ("rtp", -1): {"q1": "a x b", "q2": "y z c", "q3": "d e x", "q4": "x y z"},
    ("ptr", 0): {"q1": "x a y", "q2": "c y z", "q3": "x y d", "q4": "h x y"},
    ("ptr", 1): {"q1": "a b x", "q2": "y c z", "q3": "x y d", "q4": "h x y"},
}
# (run, qkey) -> [(stub name, top-1 api, cosine)]; q4 in run 0 fell back to the raw query.
STUBS = {
    (0, "q1"): [("Get A", "x", 0.9), ("Find B", "a", 0.5)],
    (0, "q2"): [("Get A", "c", 0.8)],
    (0, "q3"): [("Get D", "x", 0.6), ("GET D", "y", 0.55)],
    (0, "q4"): [("the fourth query", "h", 0.3)],
    (1, "q1"): [("Get A", "a", 0.7)],
    (1, "q2"): [("Get C", "y", 0.4)],
    (1, "q3"): [("Get D", "x", 0.65)],
    (1, "q4"): [("Get H", "h", 0.75)],
}
# (method, run, qkey): refusal, named ids, unresolved, steps, fidelity, verdict
PLANS = [
    ("rtp", 0, "q1", False, ["a"], 0, 1, 1.0, "Solved"),
    ("rtp", 1, "q1", False, ["a", "x"], 0, 2, 1.0, "Unsolved"),
    ("ptr", 0, "q1", False, ["a"], 1, 2, 0.5, "Solved"),
    ("ptr", 1, "q1", False, ["a", "b"], 0, 2, 1.0, "Solved"),
    ("rtp", 0, "q3", False, ["d", "e"], 0, 2, 1.0, "Solved"),
    ("rtp", 1, "q3", False, ["d"], 0, 1, 1.0, "Solved"),
    ("ptr", 0, "q3", True, [], 0, 0, np.nan, "Unsolved"),
    ("ptr", 1, "q3", False, ["x"], 0, 1, 1.0, None),
]
# (method, run, qkey, stage): tokens_in, tokens_out, latency_s
CALLS = {
    ("ptr", 0, "q1", "stubs"): (100, 20, 1.0), ("ptr", 1, "q1", "stubs"): (100, 30, 1.0),
    ("ptr", 0, "q2", "stubs"): (999, 999, 9.0), ("ptr", 1, "q2", "stubs"): (999, 999, 9.0),
    ("ptr", 0, "q3", "stubs"): (120, 40, 2.0), ("ptr", 1, "q3", "stubs"): (120, 20, 2.0),
    ("ptr", 0, "q4", "stubs"): (999, 999, 9.0), ("ptr", 1, "q4", "stubs"): (999, 999, 9.0),
    ("rtp", 0, "q1", "plan"): (300, 50, 2.0), ("rtp", 1, "q1", "plan"): (300, 70, 2.0),
    ("ptr", 0, "q1", "plan"): (250, 50, 1.5), ("ptr", 1, "q1", "plan"): (250, 30, 1.5),
    ("rtp", 0, "q3", "plan"): (400, 100, 3.0), ("rtp", 1, "q3", "plan"): (400, 100, 3.0),
    ("ptr", 0, "q3", "plan"): (350, 50, 2.0), ("ptr", 1, "q3", "plan"): (350, 50, 2.0),
    ("rtp", 0, "q1", "judge"): (5000, 5, 9.0), ("ptr", 0, "q3", "judge"): (5000, 5, 9.0),
}


def key(q: str) -> str:
    return f"{G1 if q in ('q1', 'q2') else G2}:{q[1:]}"


def _queries() -> pd.DataFrame:
    rows = [("q1", G1, ["a", "b"], ["a"]), ("q2", G1, ["c"], ["c"]),
            ("q3", G2, ["d", "e", "f", "g"], ["d", "e"]), ("q4", G2, ["h"], ["h"])]
    return pd.DataFrame([{"qkey": key(q), "subset": s, "query_id": q[1:], "query": f"the query {q}",
                          "candidates": c, "relevant": r} for q, s, c, r in rows])


def _hits() -> pd.DataFrame:
    rows = []
    for (method, run), by_q in RANKINGS.items():
        for q, ranking in by_q.items():
            ids = ranking.split() + [f"pad{i}" for i in range(DEPTH - 3)]
            for rank, api in enumerate(ids, 1):
                rows.append((key(q), method, run, -1, rank, rank, api, 1.0 - rank / 100))
            if method == "rtp":
                rows.append((key(q), method, run, 0, 1, 1, ids[0], 0.99))
    for (run, q), stubs in STUBS.items():
        for i, (_, api, score) in enumerate(stubs):
            rows.append((key(q), "ptr", run, i, 1, 1, api, score))
            rows.append((key(q), "ptr", run, i, 2, 2, "a", score - 0.01))  # rank 2: only in a stub's top k
    return pd.DataFrame(rows, columns=HIT_COLUMNS)


def _stubs() -> pd.DataFrame:
    return pd.DataFrame([{"qkey": key(q), "run": run, "stub_idx": i, "name": name, "reasoning": "",
                          "fell_back": (run, q) == (0, "q4")}
                         for (run, q), stubs in STUBS.items() for i, (name, _, _) in enumerate(stubs)])


def _plans() -> pd.DataFrame:
    cols = ["method", "run", "qkey", "refusal", "named_ids", "n_named_unresolved", "n_steps", "fidelity",
            "verdict"]
    p = pd.DataFrame([dict(zip(cols, row, strict=True)) for row in PLANS])
    return p.assign(qkey=p["qkey"].map(key), parse_ok=True)


def _calls() -> pd.DataFrame:
    return pd.DataFrame([{"qkey": key(q), "method": m, "run": run, "stage": stage, "tokens_in": ti,
                          "tokens_out": to, "latency_s": lat, "cached": False, "backend": "hand",
                          "model": "hand"} for (m, run, q, stage), (ti, to, lat) in CALLS.items()])


@pytest.fixture(scope="module")
def study() -> StudyResult:
    prov = {"settings": {"k": 2, "depth": DEPTH, "runs": 2, "plan_limit": 1, "methods": ["rtp", "ptr"]}}
    return study_of_hits(_queries(), _stubs(), _hits(), _plans(), _calls(), prov)


def row(df: pd.DataFrame, **where) -> pd.Series:
    mask = np.ones(len(df), dtype=bool)
    for col, value in where.items():
        mask &= (df[col] == value).to_numpy()
    assert mask.sum() == 1, f"{mask.sum()} rows match {where}"
    return df[mask].iloc[0]


# --------------------------------------------------------------------------- main results


def test_main_results_by_hand(study):
    t = main_results(study)
    assert list(t.columns[: len(MAIN_COLUMNS)]) == MAIN_COLUMNS
    assert len(t) == 2 * 2 * 2  # subsets x methods x ground truths
    r = row(t, subset="G1", method="rtp", gt="candidates")
    assert (r["recall_mean"], r["recall_std"], r["precision_mean"]) == pytest.approx((0.25, 0.0, 0.25))
    assert r["n_queries"] == 2 and r["n_runs"] == 2 and r["n_planned"] == 1
    assert r["judged_pass_rate_mean"] == pytest.approx(0.5)
    assert r["judged_pass_rate_std"] == pytest.approx(math.sqrt(0.5))
    p = row(t, subset="G1", method="ptr", gt="candidates")
    assert p["recall_mean"] == pytest.approx(0.875) and p["recall_std"] == pytest.approx(0.25 / math.sqrt(2))
    assert p["precision_mean"] == pytest.approx(0.625)
    assert (p["judged_pass_rate_mean"], p["judged_pass_rate_std"]) == pytest.approx((1.0, 0.0))
    g2 = row(t, subset="G2", method="ptr", gt="candidates")
    assert (g2["recall_mean"], g2["recall_std"], g2["precision_mean"]) == pytest.approx((0.5, 0.0, 0.25))
    assert g2["judged_pass_rate_mean"] == 0.0 and np.isnan(g2["judged_pass_rate_std"])  # run 1 was not judged
    rel = row(t, subset="G1", method="rtp", gt="relevant")
    assert (rel["recall_mean"], rel["precision_mean"]) == pytest.approx((0.5, 0.25))
    assert row(t, subset="G1", method="ptr", gt="relevant")["recall_mean"] == pytest.approx(1.0)


def test_ttests_by_hand(study):
    t = ttests(study, gts=["candidates"])
    assert list(t.columns) == TTEST_COLUMNS
    r = row(t, subset="G1", metric="recall")
    # PtR run means 0.75 and 1.0 against RtP's 0.25: t = 0.625 / (0.1768 / sqrt 2) = 5, df 1 (Cauchy).
    assert r["test"] == "one_sample_t" and r["statistic"] == pytest.approx(5.0)
    assert r["p_runs_robustness"] == pytest.approx(1 - 2 * math.atan(5.0) / math.pi)
    assert (r["rtp_value"], r["ptr_mean"]) == pytest.approx((0.25, 0.875)) and r["note"] == ""
    for metric in ("recall", "precision"):
        z = row(t, subset="G2", metric=metric)
        # PtR's run means are all 0.5 against RtP's 0.25, a difference with no variance: not testable.
        assert np.isnan(z["p_runs_robustness"]) and "no variance" in z["note"]
    pr = row(t, subset="G1", metric="pass_rate")
    # Welch: PtR [1, 1] against RtP [1, 0] -> t = 0.5 / sqrt(0.5 / 2) = -1 with 1 degree of freedom.
    assert pr["test"] == "welch_t" and pr["statistic"] == pytest.approx(1.0)  # PtR minus RtP
    assert pr["p_runs_robustness"] == pytest.approx(0.5)
    g2 = row(t, subset="G2", metric="pass_rate")
    assert np.isnan(g2["p_runs_robustness"]) and "1 of B" in g2["note"]


def test_runs_table_by_hand(study):
    from toolbench_lib.analysis.main_results import RUNS_COLUMNS, runs_figure, runs_table

    t = runs_table(study, gts=["candidates"])
    assert list(t.columns) == RUNS_COLUMNS and len(t) == 2 * 2  # subsets x metrics
    r = row(t, subset="G1", metric="recall")
    # PtR's run means, run 0 first: 0.75 (q1 0.5, q2 1) and 1.0; RtP 0.25; t = 5 with 1 degree of freedom.
    assert r["ptr_runs"] == [0.75, 1.0] and r["n_runs"] == 2 and r["n_queries"] == 2
    assert (r["rtp"], r["ptr_mean"], r["ptr_minus_rtp"]) == pytest.approx((0.25, 0.875, 0.625))
    assert r["t"] == pytest.approx(5.0) and r["ptr_std"] == pytest.approx(0.25 / math.sqrt(2))
    p = 1 - 2 * math.atan(5.0) / math.pi
    assert r["p_runs_robustness"] == pytest.approx(p)  # a robustness column: no Holm, no leader
    g2 = row(t, subset="G2", metric="recall")  # PtR's runs agree exactly: not testable, never p = 0
    assert g2["ptr_runs"] == [0.5, 0.5] and math.isnan(g2["p_runs_robustness"])
    fig = runs_figure(t, paper={("G1", "rtp"): 0.372})
    ax = fig.axes[0]
    assert [tk.get_text() for tk in ax.get_xticklabels()] == ["G1\n(n=2)", "G2\n(n=2)"]
    assert len(ax.patches) == 4  # RtP and PtR bars per set


def test_main_findings_carry_the_test_over_runs(study):
    from toolbench_lib.analysis.findings import main_findings
    from toolbench_lib.analysis.main_results import paired_tests, runs_table

    main, paired = main_results(study), paired_tests(study)
    plain = main_findings(main, paired, {"G1": {"rtp": 0.372, "ptr": 0.289}})
    assert "Over 2 runs" not in plain and plain.count("\n- ") == 1  # one bullet per set
    text = main_findings(main, paired, {}, runs=runs_table(study, gts=["candidates"]))
    g1, g2 = text.split("\n")
    p = 1 - 2 * math.atan(5.0) / math.pi  # one-sample t = 5 on 1 degree of freedom
    said = "Over 2 runs: PtR 0.875 ± 0.177 against RtP 0.250; the paper's test over runs (robustness only)"
    assert f"{said} p = {p:.3f}." in g1
    assert "PtR 0.500 ± 0.000 against RtP 0.250" in g2 and "ahead" not in g2.split("Over 2 runs")[1]


def test_a_verdict_names_its_p_as_holm_corrected_only_in_a_family_of_several():
    from toolbench_lib.analysis.findings import recall_verdict

    paper = {"rtp": 0.1, "ptr": 0.2}
    holm = recall_verdict(0.1, 0.2, 0.3, "Holm over G1, G2", paper)["verdict"]
    assert holm == "same direction, not significant (Holm-corrected paired t p = 0.300)"
    one = recall_verdict(0.1, 0.2, 0.3, "one comparison (no adjustment)", paper)["verdict"]
    assert one == "same direction, not significant (unadjusted paired t p = 0.300)"


def test_method_calls_are_the_methods_own_calls(study):
    from toolbench_lib.analysis.summary import CALL_COLUMNS, method_calls

    c = method_calls(study)
    assert list(c.columns) == CALL_COLUMNS
    assert len(c) == len(CALLS) - 2 and set(c["stage"]) == {"stubs", "plan"}  # the 2 judge calls left out
    r = row(c, qkey=key("q1"), method="rtp", run=1, stage="plan")
    assert (r["tokens"], r["subset"]) == (370, G1)  # 300 in + 70 out


def test_tests_refuse_what_they_cannot_compute():
    from toolbench_lib.eval.stats import runs_test

    assert "1 run(s) of A and 1 of B" in runs_test([0.3], [0.4], a_deterministic=True)["note"]
    flat = runs_test([0.3], [0.4, 0.4, 0.4], a_deterministic=True)
    assert np.isnan(flat["p_value"]) and "no variance" in flat["note"]
    r = runs_test([0.3], [0.4, 0.6], a_deterministic=True)
    assert r["statistic"] == pytest.approx(2.0) and r["note"] == "" and r["test"] == "one_sample_t"
    both = runs_test([0.5, 0.5], [0.2, 0.2], a_deterministic=False)
    assert np.isnan(both["p_value"]) and "no variance" in both["note"]
    w = runs_test([0.2, 0.2], [0.5, 0.7], a_deterministic=False)
    assert w["note"] == "" and w["test"] == "welch_t" and w["statistic"] > 0


def test_wins_by_hand(study):
    w = wins(study, gts=["candidates"], basis="run0")
    assert list(w.columns) == WINS_COLUMNS
    g1, g2 = row(w, subset="G1"), row(w, subset="G2")
    assert (g1["rtp_wins"], g1["ptr_wins"], g1["ties"]) == (0, 1, 1)
    assert (g2["rtp_wins"], g2["ptr_wins"], g2["ties"]) == (1, 1, 0)
    m = wins(study, gts=["candidates"])  # the default: each query's mean over runs, the endpoint's basis
    g1m = row(m, subset="G1")
    assert (g1m["rtp_wins"], g1m["ptr_wins"], g1m["ties"], g1m["basis"]) == (0, 2, 0, "mean")
    with pytest.raises(ValueError, match="basis"):
        wins(study, basis="best")


# --------------------------------------------------------------------------- k ablation


def test_k_ablation_by_hand(study):
    t = k_ablation(study, ks=[1, 2, 3], gts=["candidates"])
    assert list(t.columns[:6]) == ["subset", "method", "gt", "k", "recall", "precision"]
    assert len(t) == 2 * 2 * 3
    def at(method: str, k: int) -> tuple[float, float]:
        return tuple(row(t, subset="G1", method=method, k=k)[["recall", "precision"]])

    assert at("rtp", 1) == pytest.approx((0.25, 0.5)) and at("rtp", 3) == pytest.approx((1.0, 0.5))
    assert at("ptr", 3) == pytest.approx((0.875, 5 / 12))
    main = main_results(study, gts=["candidates"])
    k2 = t[t["k"] == 2].merge(main, on=["subset", "method", "gt"])
    assert np.allclose(k2["recall"], k2["recall_mean"]) and np.allclose(k2["precision"], k2["precision_mean"])
    # The gain is PtR minus RtP on the same queries, on both rows, inside its paired bootstrap CI; each
    # value lies inside its own CI (over queries).
    gain = row(t, subset="G1", method="ptr", k=3)["recall_gain"]
    assert gain == pytest.approx(0.875 - 1.0)
    assert row(t, subset="G1", method="rtp", k=3)["recall_gain"] == gain
    # How far the gain moved from k = 1: the gain at k minus the gain at 1 (0 at k = 1), NaN without k = 1.
    g1 = row(t, subset="G1", method="ptr", k=1)["recall_gain"]
    assert row(t, subset="G1", method="ptr", k=3)["recall_gain_vs_k1"] == pytest.approx(gain - g1)
    assert (t.loc[t["k"] == 1, "recall_gain_vs_k1"] == 0).all()
    assert k_ablation(study, ks=[2, 3], gts=["candidates"])["recall_gain_vs_k1"].isna().all()
    # the change's p is the clustered paired test's against 0; Holm over the sets of one gt, method and k
    from toolbench_lib.eval.evaluation import evaluate
    from toolbench_lib.eval.stats import holm, paired, t_ci

    at3 = t[(t["k"] == 3) & (t["method"] == "ptr")]
    assert at3["recall_gain_vs_k1_p_holm"].tolist() == pytest.approx(
        holm(at3["recall_gain_vs_k1_p"]).tolist(), nan_ok=True)
    assert t.loc[t["k"] == 1, "recall_gain_vs_k1_p"].isna().all()  # no change at k = 1: not testable
    ev = evaluate(study)
    mask = ev.subsets == "G1_instruction"

    def gain(k: int) -> np.ndarray:  # PtR − RtP per query, mean over runs
        v = ev.values("recall", k, "candidates")[:, :, mask].mean(axis=1)
        return v[ev.methods.index("ptr")] - v[ev.methods.index("rtp")]

    groups = ev.groups[mask] if ev.groups is not None else None
    want = paired(np.zeros(int(mask.sum())), gain(3) - gain(1), groups=groups)["p"]
    assert mask.any() and not np.isnan(want)  # a test that ran
    # the gain's CI is the paired test's (clustered t), not a bootstrap of the gain
    got = row(t, subset="G1", method="ptr", k=3)[["recall_gain_ci_low", "recall_gain_ci_high"]]
    assert tuple(got) == pytest.approx(t_ci(gain(3), groups=groups))
    assert row(t, subset="G1", method="ptr", k=3)["recall_gain_vs_k1_p"] == pytest.approx(want)
    for metric in ("recall", "precision", "recall_gain", "recall_gain_vs_k1"):
        assert (t[f"{metric}_ci_low"] <= t[metric] + 1e-12).all()
        assert (t[metric] <= t[f"{metric}_ci_high"] + 1e-12).all()
    assert (t["recall_ci_high"] > t["recall_ci_low"]).any()
    with pytest.raises(ValueError, match="stored depth"):
        k_ablation(study, ks=[DEPTH + 1])


def test_budget_check_by_hand(study):
    b = budget_check(study, gts=["candidates"])
    assert list(b.columns[:4]) == ["subset", "gt", "rtp_k10_recall", "ptr_k5_recall"]
    assert tuple(row(b, subset="G1")[["rtp_k10_recall", "ptr_k5_recall"]]) == pytest.approx((1.0, 0.875))
    assert tuple(row(b, subset="G2")[["rtp_k10_recall", "ptr_k5_recall"]]) == pytest.approx((0.25, 0.625))
    g1 = row(b, subset="G1")
    assert g1["ptr_k5_recall_ci_low"] <= 0.875 <= g1["ptr_k5_recall_ci_high"]
    # every G1 query has RtP recall@10 = 1.0: no spread
    assert g1["rtp_k10_recall_ci_low"] == g1["rtp_k10_recall_ci_high"] == pytest.approx(1.0)
    # the two compared query by query: the mean of the differences, inside the paired test's CI
    for s in ("G1", "G2"):
        r = row(b, subset=s)
        assert r["rtp10_minus_ptr5"] == pytest.approx(r["rtp_k10_recall"] - r["ptr_k5_recall"])
        assert r["rtp10_minus_ptr5_ci_low"] <= r["rtp10_minus_ptr5"] <= r["rtp10_minus_ptr5_ci_high"]


# --------------------------------------------------------------------------- trajectories


def test_jaccard():
    assert jaccard({"a"}, {"a", "b", "c"}) == pytest.approx(1 / 3)
    assert jaccard({"a"}, set()) == 0.0 and math.isnan(jaccard(set(), set()))


def test_trajectory_by_hand(study):
    t = trajectory(study)
    assert list(t.columns[: len(TRAJECTORY_COLUMNS)]) == TRAJECTORY_COLUMNS
    r = row(t, subset="G1", method="rtp")
    assert tuple(r[["fidelity", "used_share", "mean_steps", "mean_apis_named", "refusal_rate"]]) == \
        pytest.approx((1.0, 0.75, 1.5, 1.5, 0.0))
    assert r["jaccard_rtp_ptr"] == pytest.approx(2 / 3) and r["n_plans"] == 2
    p = row(t, subset="G1", method="ptr")
    assert (p["fidelity"], p["used_share"], p["jaccard_rtp_ptr"]) == pytest.approx((0.75, 0.75, 2 / 3))
    assert p["mean_unresolved_named"] == pytest.approx(0.5)
    g2 = row(t, subset="G2", method="ptr")
    assert tuple(g2[["fidelity", "used_share", "mean_steps", "mean_apis_named", "refusal_rate"]]) == \
        pytest.approx((1.0, 0.25, 0.5, 0.5, 0.5))
    assert g2["jaccard_rtp_ptr"] == 0.0
    # PtR's minus RtP's APIs named, per query planned by both, the same on both rows, inside its paired CI
    for subset in ("G1", "G2"):
        a, b = row(t, subset=subset, method="ptr"), row(t, subset=subset, method="rtp")
        assert a["apis_named_ptr_minus_rtp"] == b["apis_named_ptr_minus_rtp"]
        lo, hi = a["apis_named_ptr_minus_rtp_ci_low"], a["apis_named_ptr_minus_rtp_ci_high"]
        assert np.isnan(lo) and np.isnan(hi)  # one query planned by both: no paired CI (a t-interval needs 2)
    assert p["apis_named_ptr_minus_rtp"] == pytest.approx(p["mean_apis_named"] - r["mean_apis_named"])
    # the same pairing for the share of the shown top-k a plan uses, and its steps
    assert p["used_share_ptr_minus_rtp"] == pytest.approx(p["used_share"] - r["used_share"])
    assert p["steps_ptr_minus_rtp"] == pytest.approx(p["mean_steps"] - r["mean_steps"])


def test_miss_behaviour_by_hand(study):
    m = miss_behaviour(study)
    assert list(m.columns[: len(MISS_COLUMNS)]) == MISS_COLUMNS
    p = row(m, subset="G2", method="ptr")
    assert p["n_complete_miss"] == 2 and p["n_miss_queries"] == 1
    assert (p["refusal_rate_on_miss"], p["wrong_tool_rate_on_miss"]) == pytest.approx((0.5, 0.5))
    r = row(m, subset="G1", method="rtp")
    assert r["n_complete_miss"] == 0 and np.isnan(r["refusal_rate_on_miss"])
    pooled = row(m, subset="all", method="both")  # every set and method, the CI resampling API samples
    per = m[m["subset"] != "all"]
    assert pooled["n_wrong_tool_on_miss"] == per["n_wrong_tool_on_miss"].sum()
    assert pooled["wrong_tool_rate_on_miss"] == pytest.approx(
        per["n_wrong_tool_on_miss"].sum() / per["n_complete_miss"].sum())


# --------------------------------------------------------------------------- stubs and cost


def test_stub_stats_by_hand(study):
    t = stub_stats(study)
    assert list(t.columns[: len(STUB_COLUMNS)]) == STUB_COLUMNS
    g1 = row(t, subset="G1", gt="candidates")
    assert set(t["gt"]) == {"candidates", "relevant"}  # the paper's "relevant API" read both ways
    assert row(t, subset="G1", gt="relevant")["stub_hit_share"] <= g1["stub_hit_share"]
    assert g1["stubs_per_query"] == pytest.approx(1.25)
    assert g1["unique_name_share"] == pytest.approx(5 / 6)  # run 0: 2 of 3 names, run 1: 2 of 2
    assert g1["unique_name_share_per_query"] == pytest.approx(1.0)
    assert (g1["stub_hit_share"], g1["cos_correct"], g1["cos_incorrect"]) == pytest.approx((0.6, 2 / 3, 0.65))
    # "match a relevant API at all": any of a stub's own top k; q1's first stub in run 0 finds "a" second
    assert g1["stub_hit_share_topk"] == pytest.approx(0.8)
    assert g1["stub_hit_share_topk_ci_low"] <= 0.8 <= g1["stub_hit_share_topk_ci_high"]
    assert g1["fallback_share"] == 0.0
    g2 = row(t, subset="G2", gt="candidates")
    assert g2["unique_name_share_per_query"] == pytest.approx(0.875)  # "Get D" and "GET D" are one name
    assert (g2["stub_hit_share"], g2["cos_correct"], g2["cos_incorrect"]) == pytest.approx((0.4, 0.525, 0.6))
    assert g2["stub_hit_share_topk"] == pytest.approx(0.4)  # "a" is no G2 query's
    assert g2["fallback_share"] == pytest.approx(0.25)


def test_stub_examples_are_the_most_confident_and_skip_fallbacks(study):
    e = stub_examples(study, n=1)
    got = list(zip(e["subset"], e["correct"], e["qkey"], e["stub_name"], e["top1_api_id"], strict=True))
    assert got == [("G1", True, key("q2"), "Get A", "c"), ("G1", False, key("q1"), "Get A", "x"),
                   ("G2", False, key("q3"), "Get D", "x")]


def test_token_overhead_by_hand(study):
    t = token_overhead(study)
    assert list(t.columns[: len(OVERHEAD_COLUMNS)]) == OVERHEAD_COLUMNS
    g1 = row(t, subset="G1")
    assert (g1["rtp_tokens"], g1["ptr_tokens"]) == pytest.approx((360.0, 415.0))
    assert g1["overhead_pct"] == pytest.approx(100 * 55 / 360)
    assert (g1["rtp_latency_s"], g1["ptr_latency_s"]) == pytest.approx((2.0, 2.5))
    assert g1["n_queries"] == 1 and g1["n_query_runs"] == 2
    g2 = row(t, subset="G2")
    assert (g2["rtp_tokens"], g2["ptr_tokens"], g2["overhead_pct"]) == pytest.approx((500.0, 550.0, 10.0))


# --------------------------------------------------------------------------- dataset statistics


@pytest.fixture()
def tiny_ds(tmp_path) -> Dataset:
    reg = pd.DataFrame({
        "api_id": ["S/t1/a", "S/t1/b", "S/t2/c", "D/t3/d", "W/t4/e"],
        "category": ["Sports", "Sports", "Sports", "Data", "Weather"],
        "tool_key": ["t1", "t1", "t2", "t3", "t4"],
        "source": ["toolenv", "toolenv", "toolenv", "toolenv_2023", "retrieval_corpus"],
        "doc_text": ["x" * 10, "x" * 20, "x" * 30, "x" * 1200, "x" * 40],
    })
    q = pd.DataFrame({
        "subset": [G1, G1, G2],
        "candidates": [["S/t1/a", "S/t1/b"], ["S/t2/c"], ["S/t1/a", "D/t3/d", "W/t4/e"]],
        "relevant": [["S/t1/a"], ["S/t2/c"], ["D/t3/d"]],
        "n_candidate_pairs": [2, 2, 3], "n_relevant_pairs": [1, 1, 1],
        "unresolved_candidates": [0, 1, 0], "unresolved_relevant": [0, 0, 0],
    })
    return Dataset(tmp_path, "fp", reg, q)


def test_dataset_statistics_by_hand(tiny_ds):
    cats = apis_per_category(tiny_ds)
    assert cats["category"].tolist() == ["Sports", "Data", "Weather"]
    assert cats["n_apis"].tolist() == [3, 1, 1] and cats["n_tools"].tolist() == [2, 1, 1]
    assert cats["share"].iloc[0] == pytest.approx(0.6)
    src = apis_by_source(tiny_ds)
    assert dict(zip(src["source"], src["n_apis"], strict=True)) == {"toolenv": 3, "toolenv_2023": 1,
                                                                    "retrieval_corpus": 1}
    sizes = gt_sizes(tiny_ds, ["G1", "G2"])
    g1 = row(sizes, subset="G1", gt="candidates")
    assert (g1["mean"], g1["median"], g1["max"], g1["n_queries"]) == (1.5, 1.5, 2, 2)
    assert row(sizes, subset="G2", gt="relevant")["max"] == 1
    at1 = row(gt_sizes(tiny_ds, ["G1"], k=1), subset="G1", gt="candidates")
    assert (at1["share_over_k"], at1["recall_ceiling"]) == (0.5, 0.75)  # sizes 2 and 1: min(1, 1/2), 1
    res = gt_resolution(tiny_ds, ["G1", "G2"])
    r = row(res, subset="G1", gt="candidates")
    assert (r["n_pairs"], r["resolved"], r["unresolved"]) == (4, 3, 1)
    assert row(res, subset="G2", gt="candidates")["unresolved"] == 0
    lengths = doc_length_stats(tiny_ds)
    everything = row(lengths, source="all")
    assert (everything["n_apis"], everything["median"], everything["max"], everything["n_capped"]) == \
        (5, 30.0, 1200, 1)
    assert row(lengths, source="toolenv")["mean"] == pytest.approx(20.0)
