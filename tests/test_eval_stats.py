"""The statistics module, the study's accessors and the ablation tables on the hand-made study (no data)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats
from statsmodels.stats.multitest import multipletests

from toolbench_lib.analysis.ablations import (
    brand_words,
    coverage,
    decomposition_ablation,
    decomposition_verdict,
    query_coupling,
    remove_words,
    stub_counts,
    stub_text_variants,
)
from toolbench_lib.analysis.main_results import paired_tests
from toolbench_lib.analysis.summary import summary_table
from toolbench_lib.eval.stats import grouped_bootstrap_ci, holm, paired, runs_test

from .hand_tables import with_tables
from .test_analysis_tables import key, study  # noqa: F401 (fixture)


def test_paired_matches_scipy():
    a = np.array([0.0, 0.5, 1.0, 0.2, 0.0, 0.3])
    b = np.array([0.5, 0.5, 0.0, 0.6, 0.4, 0.9])
    r = paired(a, b)
    t = stats.ttest_rel(b, a)
    w = stats.wilcoxon(b - a, zero_method="pratt")
    assert (r["t"], r["p"]) == pytest.approx((t.statistic, t.pvalue))
    assert r["p_wilcoxon"] == pytest.approx(w.pvalue)
    assert (r["losses"], r["wins"], r["ties"]) == (1, 4, 1) and r["testable"]
    assert r["ci_low"] < r["diff"] < r["ci_high"]
    assert r["diff"] == pytest.approx((b - a).mean())


def test_paired_says_when_it_cannot_decide():
    same = paired([0.2, 0.4], [0.2, 0.4])
    assert np.isnan(same["p"]) and not same["testable"] and "no variance" in same["note"]
    one = paired([0.1], [0.6])
    assert np.isnan(one["p"]) and np.isnan(one["ci_low"]) and "1 query" in one["note"]
    with pytest.raises(ValueError, match="equal lengths"):
        paired([1.0], [1.0, 2.0])


def test_bootstrap_and_holm():
    d = np.array([0.1, 0.2, 0.3, 0.4])
    lo, hi, n = grouped_bootstrap_ci(d, None, 5000, seed=0)
    assert 0.1 <= lo < d.mean() < hi <= 0.4 and n == 4
    assert grouped_bootstrap_ci(np.array([0.3, 0.3]), None, 100) == (0.3, 0.3, 2)
    p = [0.01, 0.04, 0.03]
    assert holm(p).tolist() == pytest.approx([0.03, 0.06, 0.06])
    rng = np.random.default_rng(0)  # statsmodels' Holm is the oracle, bit for bit: ties, ones, any size
    for n in (1, 2, 3, 9, 40):
        ps = np.round(rng.uniform(0, 0.6, n), 2)
        assert holm(ps).tolist() == multipletests(ps, method="holm")[1].tolist()
    with_nan = holm([0.02, np.nan, 0.01])
    assert np.isnan(with_nan[1]) and with_nan[[0, 2]].tolist() == [0.02, 0.02]  # NaN: not in the family
    assert holm([]).tolist() == [] and np.isnan(holm([np.nan])).all()


def test_runs_test_by_hand():
    # One-sample t of B's run means (0.3, 0.5) against A's 0.2: mean 0.4, sd sqrt(0.02), t = 0.2 / 0.1 = 2
    # on 1 degree of freedom, two-sided p = 1 - 2 atan(2) / pi.
    r = runs_test([0.2], [0.3, 0.5], a_deterministic=True)
    assert (r["test"], r["n_a"], r["n_b"]) == ("one_sample_t", 1, 2)
    assert r["statistic"] == pytest.approx(2.0)
    assert r["p_value"] == pytest.approx(1 - 2 * math.atan(2) / math.pi)
    w = runs_test([0.2, 0.2], [0.3, 0.5], a_deterministic=False)
    assert w["test"] == "welch_t" and w["statistic"] == pytest.approx(2.0)  # A's variance is 0
    assert np.isnan(runs_test([0.2], [0.4], a_deterministic=True)["p_value"])  # one run: not testable


def test_paired_tests_on_the_hand_study(study):  # noqa: F811
    t = paired_tests(study, gts=["candidates"])
    g1 = t[(t["subset"] == "G1") & (t["metric"] == "recall")].iloc[0]
    # Per query, mean over runs at k = 2: q1 RtP 0.5, PtR (0.5 + 1) / 2; q2 RtP 0, PtR (1 + 1) / 2.
    assert (g1["rtp_mean"], g1["ptr_mean"]) == pytest.approx((0.25, 0.875))
    assert (g1["rtp_wins"], g1["ptr_wins"], g1["ties"]) == (0, 2, 0)
    tested = t[t["testable"]]
    assert (tested["p_holm"] >= tested["p"] - 1e-12).all()
    assert t.loc[~t["testable"], "p"].isna().all() and (t.loc[~t["testable"], "note"] != "").all()


def test_study_accessors_decode_the_tables(study):  # noqa: F811
    assert study.ranking("rtp", 1, k=3)[key("q1")] == ["a", "x", "b"]  # RtP's one ranking, in every run
    assert study.ranking("ptr", 1, k=2)[key("q2")] == ["y", "c"]
    assert [list(r) for r in study.scored_text_rankings("ptr", 0)[key("q1")]] == [["x", "a"], ["a"]]
    r = study.rankings
    assert study.deterministic == ["rtp"] and study.retrieved("ptr", 1).final.equals(
        r[(r["method"] == "ptr") & (r["run"] == 1)].drop(columns="run"))
    with pytest.raises(KeyError, match="run 5"):
        study.ranking("ptr", 5)
    with pytest.raises(KeyError, match="no rankings of method"):
        study.ranking("fused")


def test_summary_table_single_run_has_ci_not_std(study):  # noqa: F811
    one_run = with_tables(study, stubs=study.stubs[study.stubs["run"] == 0],
                          rankings=study.rankings[study.rankings["run"] == 0],
                          text_rankings=study.text_rankings[study.text_rankings["run"] == 0],
                          plans=study.plans[study.plans["run"] == 0],
                          calls=study.calls[study.calls["run"] == 0],
                          provenance={**study.provenance,
                                      "settings": {**study.provenance["settings"], "runs": 1}})
    t = summary_table(one_run, 2, ["candidates"])
    assert t["recall_std"].isna().all() and (t["n_runs"] == 1).all()
    assert (t["recall_ci_low"] <= t["recall_mean"]).all() and (t["recall_mean"] <= t["recall_ci_high"]).all()


def test_decomposition_ablation_by_hand(study):  # noqa: F811
    n = stub_counts(study, 0)
    assert n[key("q1")] == 2 and n[key("q4")] == 0  # q4 fell back to the raw query
    cov = coverage(study, k=1, gt="candidates", run=0)
    # q1's stubs find x and a at rank 1: a of {a, b}; q3's stubs find x, y: none of {d, e, f, g}.
    assert cov[key("q1")] == 0.5 and cov[key("q3")] == 0.0 and cov[key("q2")] == 1.0
    table, by_stubs, verdict = decomposition_ablation(study, study, k=2)
    assert set(table["decomposer"]) == {"llm", "rules"} and len(table) == 4
    g1 = table[(table["subset"] == "G1") & (table["decomposer"] == "llm")].iloc[0]
    assert (g1["ptr_recall"], g1["rtp_recall"]) == pytest.approx((0.75, 0.25))
    for c in ("ptr_recall", "rtp_recall"):  # each level with its own bootstrap CI, drawn in its figure
        assert g1[f"{c}_ci_low"] <= g1[c] <= g1[f"{c}_ci_high"]
    # the verdict follows the paired CI: ahead only when it lies above 0, else no separation
    lead = ("G1: PtR beats RtP (0.250)" if g1["ci_low"] > 0 else
            "G1: no decomposer separates PtR from RtP (0.250")
    assert verdict.startswith("Run 0, each comparison a paired t-test, unadjusted.") and lead in verdict
    wide = table.assign(ci_low=0.01, ci_high=0.2)
    assert "G1: PtR beats RtP (0.250) with the llm and rules decomposers" in decomposition_verdict(wide)
    assert "RtP (0.250) beats PtR with the llm decomposer" in decomposition_verdict(
        table.assign(ci_low=-0.2, ci_high=np.where(table["decomposer"] == "llm", -0.01, 0.1)))
    assert by_stubs["n_queries"].sum() == 2 * 4


def test_brand_words_and_stub_variants():
    q = "I need YouTube videos about Paris. Also check the Web3 price on Binance."
    assert brand_words(q) == {"youtube", "paris", "web3", "binance"}
    assert remove_words("YouTube Search: find videos", {"youtube"}) == "Search: find videos"
    assert remove_words("YouTube", {"youtube"}) == "YouTube"
    queries = pd.DataFrame({"qkey": ["a", "b"], "query": [q, "plain"]})
    stubs = pd.DataFrame({"qkey": ["a"], "run": [0], "stub_idx": [0], "name": ["YouTube Search"],
                          "reasoning": ["find YouTube videos"], "fell_back": [False]})
    v = stub_text_variants(queries, stubs)
    assert v["name"] == [["YouTube Search"], ["plain"]] and v["reasoning"][0] == ["find YouTube videos"]
    assert "youtube" not in v["name+reasoning-brand"][0][0].lower()
    assert v["query"] == [[q], ["plain"]]
    assert v["query-brand"] == [["I need videos about Also check the price on"], ["plain"]]


def test_query_coupling_pairs_the_gap_with_and_without_brand_words():
    """Four G1 queries, each its own API sample: PtR − RtP as run -0.5, 0, -0.5, 0 (mean -0.25); without
    brand words 0, 0, 0, -0.5 (mean -0.125); the change +0.5, 0, +0.5, -0.5 (mean +0.125)."""
    q = pd.DataFrame({"qkey": list("abcd"), "subset": ["G1_instruction"] * 4,
                      "query": ["Use YouTube now", "plain words", "Ask Binance", "plain too"],
                      "candidates": [("x",), ("y",), ("z",), ("w",)]})
    recall = {"query": [1.0, 0.5, 1.0, 0.5], "name+reasoning": [0.5, 0.5, 0.5, 0.5],
              "query-brand": [0.5, 0.5, 0.5, 1.0], "name+reasoning-brand": [0.5, 0.5, 0.5, 0.5]}
    t = query_coupling(q, {v: pd.DataFrame({"recall": r}) for v, r in recall.items()}).iloc[0]
    assert t["subset"] == "G1" and t["n_queries"] == 4 and t["brand_share"] == 0.5
    assert (t["rtp"], t["rtp_nobrand"], t["ptr"], t["ptr_nobrand"]) == (0.75, 0.625, 0.5, 0.5)
    assert t["diff"] == -0.25 and t["diff_nobrand"] == -0.125 and t["change"] == 0.125
    assert t["change_lo"] < 0 < t["change_hi"] and 0 < t["p_change"] < 1


def test_summary_carries_judged_and_objective_pass_rates(study):  # noqa: F811
    """By hand from the study's plans (relevant ground truth: q1 {a}, q3 {d, e}; one plan per run):
    G1 RtP names [a] and [a, x]: both pass; verdicts Solved, Unsolved. G1 PtR [a], [a, b]: both pass, both
    Solved. G2 RtP [d, e] passes, [d] does not; both Solved. G2 PtR refuses (Unsolved), then names [x]
    (not judged): neither passes. Kappa needs two plans per run, so it is undefined everywhere."""
    t = summary_table(study, 2, ["candidates"]).set_index(["subset", "method"])
    want = {("G1", "rtp"): (1.0, 0.5, math.sqrt(0.5)), ("G1", "ptr"): (1.0, 1.0, 0.0),
            ("G2", "rtp"): (0.5, 1.0, 0.0), ("G2", "ptr"): (0.0, 0.0, float("nan"))}
    for (subset, method), (objective, judged, judged_std) in want.items():
        row = t.loc[(subset, method)]
        assert row["objective_pass_rate"] == objective, (subset, method)
        assert row["judged_pass_rate_mean"] == judged, (subset, method)
        assert row["judged_pass_rate_std"] == pytest.approx(judged_std, nan_ok=True), (subset, method)
        assert np.isnan(row["judge_kappa"]) and row["n_planned"] == 1


def test_kappa_by_hand():
    """Solved/objective pairs (1,1) (0,1) (1,1) (1,0): observed agreement 1/2, chance 3/4 * 3/4 + 1/4 * 1/4
    = 5/8, kappa (1/2 - 5/8) / (1 - 5/8) = -1/3."""
    from toolbench_lib.eval.pass_rates import kappa

    verdicts = pd.Series(["Solved", "Unsolved", "Solved", "Solved", None])
    objective = pd.Series([True, True, True, False, True])  # the unjudged plan is left out
    assert kappa(verdicts, objective) == pytest.approx(-1 / 3)


def test_echo_divergence_by_hand(study):  # noqa: F811
    from toolbench_lib.analysis.ablations import echo_divergence

    # k = 1, run 0: RtP tops a, y, d, x; PtR tops x, c, x, h: every query's lists are disjoint.
    cos = [0.5, 0.6, 0.7, 0.8]
    keys = [key(q) for q in ("q1", "q2", "q3", "q4")]
    echo = pd.DataFrame({"subset": ["G1", "G1", "G2", "G2"], "qkey": keys,
                         "mean_cos": cos, "max_cos": cos, "n_stubs": [2, 1, 2, 1]})
    table, verdict = echo_divergence(echo, study, k=1)
    a = table.set_index("subset").loc["all"]
    assert a["disjoint_share"] == 1.0 and a["n_queries"] == 4
    assert np.isnan(a["rho_disjoint_vs_echo"])  # no variation: no rho
    assert a["low_minus_high_ci_low"] == a["low_minus_high_ci_high"] == 0  # all disjoint: no difference
    assert "nan" not in verdict and "API samples resampled" in verdict
    table2, verdict2 = echo_divergence(echo, study, k=3)
    assert table2.set_index("subset").loc["all", "disjoint_share"] < 1.0


def test_figure2_draws_four_panels_with_the_paper(study):  # noqa: F811
    import matplotlib

    matplotlib.use("Agg")
    from toolbench_lib.analysis.main_results import figure2, main_results, wins

    fig = figure2(main_results(study, gts=["candidates"]), wins(study, gts=["candidates"]),
                  {("G1", "rtp", "recall"): 0.372, ("G1", "ptr", "wins"): 33})
    assert len(fig.axes) == 4
    diamonds = [line for ax in fig.axes for line in ax.lines if line.get_marker() == "D"]
    assert [tuple(d.get_ydata()) for d in diamonds] == [(0.372,), (33 / 200,)]  # wins as the paper's share
    w = wins(study, gts=["candidates"]).set_index("subset")
    g1 = w.loc["G1"]
    bars = [p.get_height() for p in fig.axes[3].patches]
    assert bars[0] == pytest.approx(g1["rtp_wins"] / g1["n_queries"])  # this run's share, not its count
    # recall is drawn up to its highest bar, CI or diamond (+15%), not to 1: small differences stay visible
    ax = fig.axes[0]
    top = max([p.get_height() for p in ax.patches] + [0.372]
              + [y for c in ax.collections for seg in c.get_segments() for _, y in seg])
    assert ax.get_ylim()[1] == pytest.approx(min(1.0, 1.15 * top))
    assert fig.axes[3].get_ylim() == (0.0, 1.0)
    assert [t.get_text() for t in fig.legends[0].get_texts()][0] == "paper"  # below the panels


def test_figure2_draws_a_judged_rate_only_where_the_judge_is_valid(study):  # noqa: F811
    import matplotlib
    import pandas as pd

    matplotlib.use("Agg")
    from toolbench_lib.analysis.main_results import figure2, main_results, wins

    table = main_results(study, gts=["candidates"])
    subsets = list(dict.fromkeys(table["subset"]))
    validity = pd.DataFrame([{"subset": s, "method": m, "objective_pass_rate": 0.1, "judged_pass_rate": 0.7,
                              "kappa": 0.6 if (i, m) == (0, "rtp") else 0.1}
                             for i, s in enumerate(subsets) for m in ("rtp", "ptr")])
    fig = figure2(table, wins(study, gts=["candidates"]), None, validity=validity.assign(ceiling=0.3))
    outlined = [p for ax in fig.axes for p in ax.patches if not p.get_fill()]
    assert [round(p.get_height(), 3) for p in outlined] == [0.7]  # the one valid judge
    assert "judged: outline, not where kappa < 0.4" in fig.axes[2].get_title()
    assert [seg[0][1] for c in fig.axes[2].collections for seg in c.get_segments()] == [0.3] * len(validity)
    # The paper's (judged) pass rates sit beside a judged bar only: none over an objective bar alone.
    paper = {(s, m, "pass_rate"): 0.88 for s in subsets for m in ("rtp", "ptr")}
    fig = figure2(table, wins(study, gts=["candidates"]), paper, validity=validity)
    assert [tuple(d.get_ydata()) for d in fig.axes[2].lines if d.get_marker() == "D"] == [(0.88,)]
    fig = figure2(table, wins(study, gts=["candidates"]), paper, validity=validity.assign(kappa=0.1))
    assert not [d for d in fig.axes[2].lines if d.get_marker() == "D"]
    assert "(judged rate and the paper's hidden: kappa < 0.4)" in fig.axes[2].get_title()


def test_figure4_draws_five_dimensions(study):  # noqa: F811
    import matplotlib

    matplotlib.use("Agg")
    from toolbench_lib.analysis.trajectory import figure4, trajectory

    traj = trajectory(study)
    fig = figure4(traj, {("G1", "rtp", "jaccard_rtp_ptr"): 0.4, ("all", None, "fidelity"): 0.96})
    assert len(fig.axes) == 5
    jaccard = next(ax for ax in fig.axes if "accard" in ax.get_title())
    n_sets = traj["subset"].nunique()
    assert len(jaccard.patches) == n_sets  # one bar per set: the pair's overlap, drawn once
    assert [tuple(ln.get_ydata()) for ln in jaccard.lines if ln.get_marker() == "D"] == [(0.4,)]
    assert [t.get_text() for t in (ax.title for ax in fig.axes)][0] == "fidelity"


def test_embedder_ablation_with_one_or_two_embedders(study):  # noqa: F811
    from toolbench_lib.analysis.ablations import embedder_ablation

    one, verdict = embedder_ablation({"all-MiniLM-L6-v2": study}, k=2)
    assert set(one["embedder"]) == {"all-MiniLM-L6-v2"} and "no comparison" in verdict
    two, verdict = embedder_ablation({"a": study, "b": study}, k=2)
    assert len(two) == 2 * len(one) and "same winner by point estimates across embedders" in verdict


def test_the_bootstrap_of_single_values_is_the_percentile_bootstrap_by_fancy_indexing():
    """Without groups each value is resampled alone: the percentile bootstrap of the mean by fancy indexing
    with the same draws (the resampling matrix only counts them); a constant column keeps its value."""
    from toolbench_lib.eval.stats import resample_counts

    rng = np.random.default_rng(7)
    idx = np.random.default_rng(3).integers(0, 120, size=(3000, 120))
    for col in (rng.normal(size=120).round(2), rng.integers(0, 2, 120)):
        means = col[idx].mean(axis=1)
        got = grouped_bootstrap_ci(col, None, 3000, seed=3)
        assert got == pytest.approx((np.quantile(means, 0.025), np.quantile(means, 0.975), 120), abs=1e-12)
    assert grouped_bootstrap_ci(np.full(120, 0.25), None, 3000, seed=3) == (0.25, 0.25, 120)
    counts = resample_counts(120, 50, seed=3)
    assert counts.shape == (50, 120) and (counts.sum(axis=1) == 120).all()


def test_the_grouped_bootstrap_resamples_whole_clusters():
    from toolbench_lib.eval.stats import wilson_ci

    rng = np.random.default_rng(5)
    q = np.repeat(np.arange(100), 8)  # 100 queries, 8 stubs each (2 stubs x 4 runs)
    hit = rng.random(800) < np.repeat(rng.random(100), 8)  # a query's stubs hit alike
    low, high, n = grouped_bootstrap_ci(hit, q)
    assert low < hit.mean() < high and n == 100 and grouped_bootstrap_ci(hit, q) == (low, high, n)
    w_low, w_high = wilson_ci(hit.sum(), hit.size)  # stubs as if independent: too narrow
    assert high - low > 1.5 * (w_high - w_low)
    assert grouped_bootstrap_ci(hit, np.zeros(800))[2] == 1  # one cluster: nothing to resample


def test_the_test_over_runs_from_a_printed_summary_equals_the_one_from_the_runs():
    import numpy as np
    from scipy.stats import ttest_1samp

    from toolbench_lib.eval.stats import runs_test, runs_test_summary

    runs = [0.20, 0.21, 0.195, 0.211]
    summary = runs_test_summary(float(np.mean(runs)), float(np.std(runs, ddof=1)), 4, 0.167)
    assert summary == pytest.approx(ttest_1samp(runs, 0.167).pvalue)
    assert summary == pytest.approx(runs_test([0.167], runs, a_deterministic=True)["p_value"])


def test_the_embedder_figure_draws_each_method_in_its_colour_with_the_second_embedders_change():
    import matplotlib

    from toolbench_lib.analysis.ablations import embedder_figure
    from toolbench_lib.analysis.style import METHOD_COLORS

    cols = ["subset", "embedder", "method", "recall", "recall_diff", "diff_lo", "diff_hi"]
    rows = [dict(zip(cols, row, strict=True)) for row in (
                ("G1", "a", "rtp", 0.6, None, None, None), ("G1", "a", "ptr", 0.5, None, None, None),
                ("G1", "b", "rtp", 0.7, 0.1, 0.05, 0.2), ("G1", "b", "ptr", 0.4, -0.1, -0.3, 0.0))]
    fig = embedder_figure(pd.DataFrame(rows), k=5)
    ax = fig.axes[0]
    bars = ax.patches
    assert [round(b.get_height(), 3) for b in bars] == [0.6, 0.7, 0.5, 0.4]  # rtp a, rtp b, ptr a, ptr b
    assert [matplotlib.colors.to_hex(b.get_facecolor()) for b in bars] == [
        METHOD_COLORS["rtp"]] * 2 + [METHOD_COLORS["ptr"]] * 2
    assert [bool(b.get_hatch()) for b in bars] == [False, True, False, True]
    # the error bars of embedder b: its change's CI around its recall (0.65..0.8 for RtP, 0.2..0.5 for PtR)
    segments = [seg for c in ax.collections for seg in c.get_segments()]
    assert sorted((round(s[0][1], 3), round(s[1][1], 3)) for s in segments) == [(0.2, 0.5), (0.65, 0.8)]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["RtP · a", "RtP · b", "PtR · a", "PtR · b"]
    matplotlib.pyplot.close(fig)


def test_ratio_change_by_hand_and_its_interval():
    from toolbench_lib.eval.stats import ratio_change

    a1, b1 = [1.0, 1.0, 2.0], [0.5, 1.0, 1.5]  # B's share of A's mean: 3/4
    a2, b2 = [2.0, 2.0, 4.0], [1.0, 2.0, 3.0]  # doubled: still 3/4
    value, low, high = ratio_change(a1, b1, a2, b2, 2000)
    assert value == pytest.approx(0.0) and low == pytest.approx(0.0) and high == pytest.approx(0.0)
    value, low, high = ratio_change(a1, b1, a2, [2.0, 2.0, 4.0], 2000)  # B catches A: 1 - 3/4
    assert value == pytest.approx(0.25) and 0 <= low <= 0.25 <= high <= 0.5
    assert ratio_change([1.0], [1.0], [1.0], [2.0]) == (1.0, 1.0, 1.0)  # one item: no interval to draw


def test_the_auroc_ci_resamples_clusters_whole():
    """Each query copied five times into one cluster: the clustered CI is the CI of the queries themselves
    (same clusters, same draws), while treating the copies as independent narrows it."""
    from toolbench_lib.eval.stats import auroc_ci

    rng = np.random.default_rng(3)
    scores, labels = rng.normal(size=40), rng.random(40) < 0.4
    once = auroc_ci(scores, labels, groups=np.arange(40))
    five = auroc_ci(np.repeat(scores, 5), np.repeat(labels, 5), groups=np.repeat(np.arange(40), 5))
    assert once == pytest.approx(five)
    apart = auroc_ci(np.repeat(scores, 5), np.repeat(labels, 5))
    assert apart[1] - apart[0] < 0.6 * (five[1] - five[0])


def test_differences_cancelling_within_every_cluster_are_not_testable():
    """Differences that vary but whose clusters all have the overall mean leave a cluster-robust SE of 0: the
    test says not testable (no t of ±inf, no zero-width CI); a NaN difference is no tie."""
    from toolbench_lib.eval.stats import mean_se, paired

    d = [0.0, 0.0, 0.0, 0.2, -0.2]
    assert mean_se(d, [1, 2, 3, 4, 4])[1] == 0.0
    res = paired(np.zeros(5), d, groups=[1, 2, 3, 4, 4])
    assert not res["testable"] and "cancel within every cluster" in res["note"]
    assert np.isnan(res["p"]) and np.isnan(res["ci_low"]) and np.isnan(res["ci_high"])
    assert (res["wins"], res["ties"], res["losses"]) == (1, 3, 1)
    nan = paired([0, np.nan, 0, 0], [1, 1, 0, -1])
    assert (nan["wins"], nan["ties"], nan["losses"], nan["testable"]) == (1, 1, 1, False)


def test_two_clusters_a_side_give_a_two_sample_test():
    """Two clusters a side have df 1 (up to rounding): the two-sample test is computed, with unequal sizes."""
    from toolbench_lib.eval.stats import mean_se, two_sample

    first, second = [0.1, 0.5, 0.2, 0.9], [0.7, 0.4, 0.8, 0.6]
    groups_a, groups_b = ["a", "b", "b", "b"], ["c", "d", "d", "d"]
    assert mean_se(first, groups_a)[2] == pytest.approx(1.0)
    res = two_sample(first, second, groups_a, groups_b)
    assert np.isfinite(res["p"]) and res["ci_low"] < res["diff"] < res["ci_high"]
