"""Adaptive routing: AUROC, thresholds, folds, the feature model, token costs and the CV routers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from scipy.stats import mannwhitneyu

from toolbench_lib.analysis.routing import (
    POLICIES,
    auroc,
    best_threshold,
    cv_threshold_routes,
    fit_logistic,
    plot_routing_curves,
    query_features,
    query_tokens,
    routing_analysis,
    routing_signal_table,
    routing_table,
    threshold_curve,
)
from toolbench_lib.data.folds import query_folds
from toolbench_lib.eval.evaluation import per_query_runs
from toolbench_lib.llm.rules import RulesBackend
from toolbench_lib.study.result import StudySettings, run_study
from toolbench_lib.study.stored import StudyResult

from .hand_tables import HIT_COLUMNS, study_of_hits

# -- AUROC ------------------------------------------------------------------------------------------------


def test_auroc_by_hand():
    # Pairs (pos, neg): (0.35 vs 0.1) win, (0.35 vs 0.4) loss, (0.8 vs both) wins: 3 of 4.
    assert auroc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == pytest.approx(0.75)
    assert auroc([0.5, 0.5], [0, 1]) == pytest.approx(0.5)  # a tie counts one half
    assert auroc([1, 2, 3], [0, 0, 1]) == 1.0 and auroc([3, 2, 1], [0, 0, 1]) == 0.0
    assert np.isnan(auroc([1, 2], [1, 1]))


def test_auroc_equals_mann_whitney_u_over_pairs():
    rng = np.random.default_rng(1)
    scores = np.round(rng.normal(size=80), 1)  # rounded: many ties
    labels = rng.random(80) < 0.4
    u = mannwhitneyu(scores[labels], scores[~labels]).statistic
    assert auroc(scores, labels) == pytest.approx(u / (labels.sum() * (~labels).sum()))


# -- thresholds, folds, the logistic model ----------------------------------------------------------------


def test_best_threshold_maximises_gain_and_prefers_fewer_ptr_routes():
    signal = np.array([0.9, 0.7, 0.5, 0.3])
    assert best_threshold(signal, np.array([1.0, 0.5, -1.0, 0.0])) == pytest.approx(0.6)
    assert best_threshold(signal, np.array([-1.0, 0.0, 0.0, 0.0])) == np.inf  # route nothing
    assert best_threshold(signal, np.array([0.0, 0.0, 0.0, 1.0])) == -np.inf  # route everything
    # Equal signals cannot be separated: the cut must fall between distinct values.
    assert best_threshold(np.array([0.5, 0.5, 0.1]), np.array([1.0, -0.2, -1.0])) == pytest.approx(0.3)


def test_query_folds_are_seeded_balanced_stratified_and_keep_related_queries_together():
    strata = np.array(["a"] * 10 + ["b"] * 7)
    texts, samples = [f"query {i}" for i in range(17)], list(range(17))
    f = query_folds(strata, texts, samples, 5, seed=0)
    assert (f == query_folds(strata, texts, samples, 5, seed=0)).all()
    assert not (f == query_folds(strata, texts, samples, 5, seed=1)).all()
    assert sorted(np.bincount(f[:10])) == [2] * 5  # every fold holds two of stratum a
    assert np.bincount(f).max() - np.bincount(f).min() <= 1
    texts[3], samples[12] = "Query  0", 5  # a repeated text (case and spacing aside), a shared API sample
    f = query_folds(strata, texts, samples, 5, seed=0)
    assert f[3] == f[0] and f[12] == f[5]


def test_cv_routes_use_other_folds_only():
    signal = np.array([0.0, 1.0, 0.0, 1.0])
    gain = np.array([1.0, -1.0, -1.0, 1.0])  # folds disagree completely on what the signal means
    routes, thresholds = cv_threshold_routes(signal, gain, np.array([0, 0, 1, 1]))
    # Fold 0 learnt from fold 1 that a high signal favours PtR; fold 1 learnt from fold 0 that it does
    # not (and routes nothing), although its own items would have said the opposite.
    assert routes.tolist() == [False, True, False, False]
    assert thresholds.tolist() == [0.5, 0.5, np.inf, np.inf]


def test_fit_logistic_matches_statsmodels_without_penalty():
    rng = np.random.default_rng(2)
    x = rng.normal(size=(300, 2))
    y = (rng.random(300) < 1 / (1 + np.exp(-(0.5 + 1.5 * x[:, 0] - x[:, 1])))).astype(float)
    ours = fit_logistic(x, y, l2=1e-9)
    ref = sm.Logit(y, sm.add_constant(x)).fit(disp=0).params
    np.testing.assert_allclose(ours, ref, atol=1e-4)
    sep = fit_logistic(np.array([[0.0], [1.0], [2.0], [3.0]]), np.array([0, 0, 1, 1]), l2=1.0)
    assert np.isfinite(sep).all() and sep[1] > 0  # stays finite under perfect separation


def test_query_features_by_hand():
    f = query_features(["Get weather.", "Find flights and hotels, also car rentals? Can you please help me?"])
    assert f.loc[0].tolist() == [2, 1, 0, 0]
    assert f.loc[1, "n_words"] == 12
    # "find flights and hotels" / "also car rentals" / "can you please help me"
    assert f.loc[1, "n_clauses"] == 3
    assert f.loc[1, "n_conjunctions"] == 2  # and, also
    assert f.loc[1, "n_requests"] == 2 + 3  # two "?" plus "can you", "please", "help me"


# -- a hand-made study with a perfectly separating signal ---------------------------------------------------


def _study(n_per_set: int = 20, runs: int = 2, planned: int = 10) -> StudyResult:
    """Odd queries: RtP misses (low top-1 cosine, long multi-part text), PtR finds the API; even: the
    reverse. Plans (and plan tokens) exist for the first ``planned`` queries of each set."""
    queries, hits, calls = [], [], []
    for subset in ("G1_instruction", "G2_category_original"):
        for i in range(n_per_set):
            key, gt, ptr_better = f"{subset}:{i}", f"api{i}", i % 2 == 1
            text = (f"Find item {i} and its price, also the reviews? Can you also list sellers and stock?"
                    if ptr_better else f"Find item {i}.")
            queries.append({"qkey": key, "subset": subset, "query": text, "candidates": [gt],
                            "relevant": [gt]})
            top1 = 0.30 + 0.001 * i if ptr_better else 0.80 + 0.001 * i
            others = [f"other{j}" for j in range(5)]
            rtp_ids = others if ptr_better else [gt, *others[:4]]
            for rank, a in enumerate(rtp_ids, 1):
                hits.append((key, "rtp", -1, -1, rank, 0, a, top1 - 0.01 * rank))
            for run in range(runs):
                ptr_ids = [gt] + [f"x{j}" for j in range(4)] if ptr_better else [f"x{j}" for j in range(5)]
                for rank, a in enumerate(ptr_ids, 1):
                    hits.append((key, "ptr", run, -1, rank, 0, a, 0.5 - 0.01 * rank))
                calls.append((key, "ptr", run, "stubs", 100 + i, 20))
                if i < planned:
                    calls.append((key, "rtp", run, "plan", 300 + i, 50))
                    calls.append((key, "ptr", run, "plan", 400 + i, 50))
                    calls.append((key, "rtp", run, "judge", 999, 9))
    hits_df = pd.DataFrame(hits, columns=HIT_COLUMNS)
    calls_df = pd.DataFrame(calls, columns=["qkey", "method", "run", "stage", "tokens_in", "tokens_out"])
    prov = {"settings": {"runs": runs, "methods": ["rtp", "ptr"], "k": 5}}
    return study_of_hits(pd.DataFrame(queries), pd.DataFrame(), hits_df, pd.DataFrame(), calls_df, prov)


def test_query_tokens_impute_missing_plans_from_the_set_mean():
    t = query_tokens(_study()).set_index("qkey")
    first, late = t.loc["G1_instruction:3"], t.loc["G1_instruction:15"]
    assert first["rtp_tokens"] == 300 + 3 + 50 and first["ptr_tokens"] == (100 + 3 + 20) + (400 + 3 + 50)
    assert not first["plan_tokens_imputed"] and late["plan_tokens_imputed"]
    assert late["rtp_tokens"] == pytest.approx(300 + 4.5 + 50)  # mean over planned queries 0..9
    assert late["ptr_tokens"] == pytest.approx((100 + 15 + 20) + (400 + 4.5 + 50))


def test_routers_match_the_oracle_on_a_separating_signal():
    table, signal, routed = routing_analysis(_study(), k=5, folds=5, seed=0)
    assert list(table["policy"].unique()) == list(POLICIES)
    by = table.set_index(["subset", "policy"])
    for subset in ("G1", "G2"):
        assert by.loc[(subset, "always_rtp"), "recall"] == pytest.approx(0.5)
        assert by.loc[(subset, "always_ptr"), "recall"] == pytest.approx(0.5)
        assert by.loc[(subset, "oracle"), "recall"] == pytest.approx(1.0)
        for router in ("router_top1_cosine", "router_features"):
            assert by.loc[(subset, router), "recall"] == pytest.approx(1.0)
            assert by.loc[(subset, router), "share_routed_ptr"] == pytest.approx(0.5)
        assert by.loc[(subset, "always_ptr"), "share_routed_ptr"] == 1.0
        # The paper's routing by subset: RtP for G1, PtR for the multi-tool sets.
        assert by.loc[(subset, "by_subset"), "share_routed_ptr"] == (0.0 if subset == "G1" else 1.0)
        saved = by.loc[(subset, "router_top1_cosine"), "tokens_saved_vs_ptr_pct"]
        assert 0 < saved < 100 and by.loc[(subset, "always_ptr"), "tokens_saved_vs_ptr_pct"] == 0
    auc = signal.set_index(["subset", "signal"])["auroc"]
    assert auc[("G1", "rtp_top1_cosine_low")] == 1.0 and auc[("G2", "router_features")] == 1.0
    assert auc[("G1", "n_conjunctions")] == 1.0
    assert (routed["route_router_top1_cosine"] == routed["ptr_wins"]).all()
    assert routing_table(routed, by_subset=False)["subset"].eq("all").all()
    assert set(routing_signal_table(routed, by_subset=False)["subset"]) == {"all"}
    # the paper's own reading, last: the cosine for "a multi-tool query" over every query
    kind = signal[signal["subset"] == "G1 vs G2, G3"].iloc[0]
    y = ~routed["subset"].astype(str).isin(["G1"])
    assert kind["auroc"] == pytest.approx(auroc(routed["rtp_top1_cosine_low"], y))
    assert kind["n_queries"] == len(routed) and signal.index[-1] == kind.name


def test_threshold_curve_spans_always_rtp_to_always_ptr():
    _, _, routed = routing_analysis(_study(), k=5)
    curve = threshold_curve(routed, "rtp_top1_cosine_low")
    g1 = curve[curve["subset"] == "G1"]
    assert g1["share_routed_ptr"].iloc[0] == 0 and g1["share_routed_ptr"].iloc[-1] == 1
    assert g1["recall"].iloc[0] == pytest.approx(0.5) and g1["recall"].max() == pytest.approx(1.0)


# -- a real study on the registry slice ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def slice_study(slice_setup):
    return run_study(slice_setup, RulesBackend(), StudySettings(runs=2, plan_limit=3), progress=False)


def test_routing_on_the_slice_study(slice_study):
    table, signal, routed = routing_analysis(slice_study, k=5, folds=5, seed=0)
    pq = per_query_runs(slice_study, 5)
    by = table.set_index(["subset", "policy"])
    rtp_mean = pq[(pq["method"] == "rtp") & (pq["subset"] == "G1_instruction")]["recall"].mean()
    ptr_mean = pq[(pq["method"] == "ptr") & (pq["subset"] == "G1_instruction")]["recall"].mean()
    assert by.loc[("G1", "always_rtp"), "recall"] == pytest.approx(rtp_mean)
    assert by.loc[("G1", "always_ptr"), "recall"] == pytest.approx(ptr_mean)
    for subset in ("G1", "G2", "G3"):
        oracle = by.loc[(subset, "oracle"), "recall"]
        assert all(by.loc[(subset, p), "recall"] <= oracle + 1e-12 for p in POLICIES)
        assert by.loc[(subset, "always_ptr"), "tokens_per_query"] > by.loc[(subset, "always_rtp"),
                                                                             "tokens_per_query"]
    assert signal["auroc"].dropna().between(0, 1).all()
    assert routed["fold"].nunique() == 5
    fig = plot_routing_curves(routed, table, 5)
    assert [ax.get_title() for ax in fig.axes] == ["G1", "G2", "G3"]
    for ax in fig.axes:  # two threshold curves and one point per policy, at the table's values
        assert len(ax.lines) == 2
        t = table[table["subset"] == ax.get_title()]
        points = np.array([c.get_offsets()[0] for c in ax.collections], dtype=float)
        np.testing.assert_allclose(points, t[["share_routed_ptr", "recall"]].to_numpy(dtype=float))
        assert [c.get_label() for c in ax.collections] == t["policy"].tolist()
