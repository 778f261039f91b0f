"""Every analysis table on a real study: the rules backend on the 2,500-API slice, and the full dataset."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure

from toolbench_lib.analysis import data_stats, k_ablation, main_results, stub_analysis, trajectory
from toolbench_lib.analysis.style import METHOD_LABELS
from toolbench_lib.analysis.summary import summary_json
from toolbench_lib.llm.rules import RulesBackend
from toolbench_lib.study.result import StudySettings, run_study

SUBSETS = ["G1", "G2", "G3"]
PLAN_LIMIT = 3


@pytest.fixture(scope="module")
def study(slice_setup):
    settings = StudySettings(runs=2, plan_limit=PLAN_LIMIT)
    return run_study(slice_setup, RulesBackend(), settings, progress=False)


def in_unit(values: pd.Series) -> bool:
    v = values.dropna()
    return len(v) > 0 and bool(((v >= 0) & (v <= 1)).all())


def test_main_results_agree_with_the_study_summary(study):
    t = main_results.main_results(study)
    assert set(t["subset"]) == set(SUBSETS) and set(t["gt"]) == {"candidates", "relevant"}
    for col in ("recall_mean", "precision_mean", "judged_pass_rate_mean"):
        assert in_unit(t[col])
    assert (t["n_planned"] == PLAN_LIMIT).all() and (t["n_runs"] == 2).all()
    s = summary_json(study, SUBSETS, 5)
    for alias in SUBSETS:
        for method in ("rtp", "ptr"):
            r = t[(t["subset"] == alias) & (t["method"] == method) & (t["gt"] == "candidates")].iloc[0]
            ref = s["subsets"][alias]["methods"][method]
            assert r["recall_mean"] == pytest.approx(ref["recall"])
            assert r["judged_pass_rate_mean"] == pytest.approx(ref["judged_pass_rate"])
    assert (t[t["method"] == "rtp"]["recall_std"] == 0).all()


def test_ttests_and_wins(study):
    tt = main_results.ttests(study)
    assert len(tt) == len(SUBSETS) * 2 * 3
    assert (tt["statistic"].notna() | (tt["note"] != "")).all()  # every NaN says why
    w = main_results.wins(study)
    n = study.queries.groupby("subset").size().to_numpy()
    cand = w[w["gt"] == "candidates"]
    assert ((cand["rtp_wins"] + cand["ptr_wins"] + cand["ties"]).to_numpy() == n).all()


def test_k_ablation_matches_main_results_at_the_study_k(study):
    ab = k_ablation.k_ablation(study)
    assert sorted(set(ab["k"])) == list(range(1, 21))
    assert in_unit(ab["recall"]) and in_unit(ab["precision"])
    rec = ab.groupby(["subset", "method", "gt"])["recall"].apply(lambda s: s.is_monotonic_increasing)
    assert rec.all()  # recall never drops as k grows
    main = main_results.main_results(study)
    at5 = ab[ab["k"] == 5].merge(main, on=["subset", "method", "gt"])
    assert len(at5) == len(main) and np.allclose(at5["recall"], at5["recall_mean"])
    b = k_ablation.budget_check(study)
    assert len(b) == len(SUBSETS) * 2 and (b["rtp_k10_recall"] >= b["rtp_k5_recall"]).all()
    fig = k_ablation.k_ablation_figure(ab)
    assert isinstance(fig, Figure) and len(fig.axes) == 3 * len(SUBSETS)
    # top row: one recall line per method against k = 1..20, the table's candidates recall
    top = fig.axes[0]
    cand = ab[(ab["gt"] == "candidates") & (ab["subset"] == top.get_title())]
    drawn = {ln.get_label(): (list(ln.get_xdata()), list(ln.get_ydata())) for ln in top.lines}
    for method in ("rtp", "ptr"):
        m = cand[cand["method"] == method]
        assert drawn[METHOD_LABELS[method]] == (m["k"].tolist(), m["recall"].tolist())


def test_trajectory_tables(study):
    t = trajectory.trajectory(study)
    assert len(t) == len(SUBSETS) * 2 and (t["n_plans"] == 2 * PLAN_LIMIT).all()
    for col in ("fidelity", "jaccard_rtp_ptr", "used_share", "refusal_rate"):
        assert in_unit(t[col]), col
    m = trajectory.miss_behaviour(study)
    assert len(m) == len(SUBSETS) * 2 + 1 and (m["n_complete_miss"] <= m["n_plans"]).all()
    pooled = m[m["subset"] == "all"].iloc[0]  # both methods over every set, one row
    assert pooled["n_complete_miss"] == m["n_complete_miss"].sum() - pooled["n_complete_miss"]
    rates = m[m["n_complete_miss"] > 0]
    total = rates["refusal_rate_on_miss"] + rates["wrong_tool_rate_on_miss"] + rates["no_api_rate_on_miss"]
    assert np.allclose(total, 1.0)


def test_stub_tables(study):
    s = stub_analysis.stub_stats(study)
    assert len(s) == 2 * len(SUBSETS) and (s["stubs_per_query"] >= 1).all()  # both ground truths
    for col in ("unique_name_share", "stub_hit_share", "cos_correct", "fallback_share"):
        assert in_unit(s[col]), col
    e = stub_analysis.stub_examples(study)
    assert len(e) > 0 and set(e["correct"]) == {True, False}
    o = stub_analysis.token_overhead(study)
    assert len(o) == len(SUBSETS) and (o["overhead_pct"] > 0).all()  # PtR pays for the stub call
    assert (o["n_queries"] == PLAN_LIMIT).all()


def test_dataset_tables_on_the_full_registry(ds):
    cats = data_stats.apis_per_category(ds)
    assert cats["n_apis"].sum() == len(ds.registry) and cats["share"].sum() == pytest.approx(1.0)
    assert cats["n_apis"].is_monotonic_decreasing
    src = data_stats.apis_by_source(ds)
    assert src["n_apis"].sum() == len(ds.registry)
    res = data_stats.gt_resolution(ds, SUBSETS)
    assert len(res) == 6 and (res["unresolved"] == 0).all() and (res["n_pairs"] > 0).all()
    sizes = data_stats.gt_sizes(ds, SUBSETS)
    wide = sizes.pivot(index="subset", columns="gt", values="mean")
    assert (wide["relevant"] <= wide["candidates"]).all()  # relevant is a subset of candidates
    lengths = data_stats.doc_length_stats(ds)
    assert lengths[lengths["source"] == "all"]["max"].iloc[0] <= 1200
    (ax,) = data_stats.category_figure(cats).axes
    bars = ax.patches  # the 15 largest categories, largest at the top
    assert len(bars) == 15 and [b.get_width() for b in bars] == cats["n_apis"].head(15).tolist()[::-1]
    assert [t.get_text() for t in ax.get_yticklabels()] == cats["category"].head(15).tolist()[::-1]
