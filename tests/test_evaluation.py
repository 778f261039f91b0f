"""The one evaluation: the count of hits, every metric at every cut-off from it (ranx as the oracle), the
stored evaluation of a study, and the one comparison."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd
import pytest
import statsmodels.api as sm
from ranx import Qrels, Run
from ranx import evaluate as ranx_evaluate
from scipy import stats

from toolbench_lib.data.queries import ground_truth_groups
from toolbench_lib.eval.compare import compare, holm_ci, interactions
from toolbench_lib.eval.evaluation import (
    EVAL_DIR,
    K_MAX,
    METRICS,
    evaluate,
    metric_values,
    per_query_runs,
    relevance,
    score_rankings,
)
from toolbench_lib.eval.stats import holm, mean_se, paired, runs_test, t_ci, two_sample
from toolbench_lib.study.stored import StudyResult

from .hand_tables import study_of_hits

RANX = {"recall": "recall", "precision": "precision", "ndcg": "ndcg", "mrr": "mrr"}


def _random(seed: int, n: int = 40) -> tuple[dict[str, list[str]], pd.DataFrame]:
    rng = np.random.default_rng(seed)
    docs = [f"d{i}" for i in range(50)]
    rel = [rng.choice(docs, size=rng.integers(1, 9), replace=False).tolist() for _ in range(n)]
    runs = {f"q{i}": rng.permutation(docs)[: rng.integers(1, 30)].tolist() for i in range(n)}
    q = pd.DataFrame({"qkey": list(runs), "subset": "S", "candidates": rel, "relevant": [r[:1] for r in rel]})
    return runs, q



def p_value_conflicts(tables: Mapping[str, pd.DataFrame], digits: int = 3) -> list[str]:
    """One line per comparison whose Holm-adjusted p (to ``digits`` digits) differs between ``tables``."""
    seen: dict[str, dict[str, set]] = {}
    for name, table in tables.items():
        if "comparison" not in table or "p_holm" not in table:
            continue
        for key, p in zip(table["comparison"], table["p_holm"], strict=True):
            value = "not testable" if pd.isna(p) else f"{float(p):.{digits}g}"
            seen.setdefault(str(key), {}).setdefault(value, set()).add(name)
    out = []
    for key, values in seen.items():
        if len(values) > 1:
            shown = " / ".join(f"{v} ({', '.join(sorted(t))})" for v, t in values.items())
            out.append(f"{key}: p {shown}")
    return out


def test_relevance_counts_distinct_ids_of_the_first_ranks() -> None:
    flags = relevance([["a", "a", "x", "b"], [3, 7, 3, 9], ["x"]], [{"a", "b"}, {9, -1}, set()], 4)
    assert flags.tolist() == [[True, False, True, False], [False, False, True, False], [False] * 4]


def test_recall_and_precision_by_hand() -> None:
    """recall@k: share of the ground truth in the top k; precision@k: share of the k slots (a short list
    is padded); a query the ranking misses retrieved nothing; no ground truth scores 0."""
    q = pd.DataFrame({"qkey": ["q1", "q2", "q3", "q4"], "subset": "S",
                      "candidates": [["a", "b", "c"], ["a"], ["b"], []]})
    rankings = {"q1": ["a", "x", "b", "y", "z", "c"], "q2": ["a"], "q4": ["a"]}
    at5 = score_rankings(rankings, q, "candidates", 5, ("recall", "precision", "comp")).set_index("qkey")
    assert at5["recall"].tolist() == pytest.approx([2 / 3, 1.0, 0.0, 0.0])
    assert at5["precision"].tolist() == pytest.approx([2 / 5, 1 / 5, 0.0, 0.0])
    assert at5["comp"].tolist() == [0.0, 1.0, 0.0, 0.0]
    assert at5["n_gt"].tolist() == [3, 1, 1, 0]
    at1 = score_rankings(rankings, q, "candidates", 1).set_index("qkey")
    assert at1["recall"].tolist() == pytest.approx([1 / 3, 1.0, 0.0, 0.0])


@pytest.mark.parametrize("k", [1, 3, 5, 10, 20])
def test_every_metric_equals_ranx_on_random_runs(k: int) -> None:
    runs, q = _random(k)
    ours = score_rankings(runs, q, "candidates", k, METRICS).set_index("qkey")
    qrels = Qrels({key: {a: 1 for a in rel} for key, rel in zip(q["qkey"], q["candidates"], strict=True)})
    run = Run({key: {a: float(len(ids) - i) for i, a in enumerate(ids)} for key, ids in runs.items()})
    names = [f"{RANX[m]}@{k}" for m in RANX]
    ranx_evaluate(qrels, run, names, return_mean=False)
    for m in RANX:
        want = [run.scores[f"{RANX[m]}@{k}"][key] for key in q["qkey"]]
        assert ours[m].tolist() == pytest.approx(want, abs=1e-9), m
    comp = [float(set(r) <= set(runs[key][:k])) for key, r in zip(q["qkey"], q["candidates"], strict=True)]
    assert ours["comp"].tolist() == comp


def test_metric_values_broadcast_over_leading_axes() -> None:
    flags = np.zeros((2, 3, K_MAX), dtype=bool)
    flags[1, 2, 0] = True
    out = metric_values(flags, np.array([1, 2, 0]), "recall", 5)
    assert out.tolist() == [[0, 0, 0], [0, 0, 0]]  # no ground truth: 0 even when marked
    flags[1, 1, 3] = True
    assert metric_values(flags, np.array([1, 2, 0]), "mrr", 5)[1, 1] == 0.25


def _study(seed: int = 0, runs: int = 3, depth: int = K_MAX, n_sets: int = 2, families: tuple = ("",)
           ) -> StudyResult:
    """A study of two methods over ``n_sets`` sets: ``rtp`` written once for every run (run -1), ``ptr`` per
    run; with each of ``families``' suffixes (``"@bm25"``) too."""
    rng = np.random.default_rng(seed)
    rows, queries = [], []
    for i in range(30):
        qk, subset = f"q{i}", f"G{1 + i * n_sets // 30}_instruction"
        gt = [f"d{j}" for j in rng.choice(max(30, depth), size=3, replace=False)]
        queries.append({"qkey": qk, "subset": subset, "candidates": gt, "relevant": gt[:1]})
        arms = (("rtp", [-1]), ("ptr", range(runs)))
        for method, stored in [(a + f, r) for f in families for a, r in arms]:
            for run in stored:
                for rank, d in enumerate(rng.permutation(max(30, depth))[:depth], 1):
                    rows.append({"qkey": qk, "method": method, "run": run, "text_idx": -1, "rank": rank,
                                 "row": int(d), "api_id": f"d{d}", "score": 1.0 - rank / 100})
    prov = {"settings": {"runs": runs, "methods": [a + f for f in families for a in ("rtp", "ptr")]}}
    return study_of_hits(pd.DataFrame(queries), pd.DataFrame(), pd.DataFrame(rows), pd.DataFrame(),
                         pd.DataFrame(), prov)


def test_study_evaluation_equals_scoring_each_run(tmp_path) -> None:
    study = _study()
    for k in (1, 5, 20):
        got = per_query_runs(study, k, "relevant", METRICS)
        for method in study.methods:
            for run in range(study.n_runs):
                want = score_rankings(study.ranking(method, run), study.queries, "relevant", k, METRICS)
                mine = got[(got["method"] == method) & (got["run"] == run)].reset_index(drop=True)
                pd.testing.assert_frame_equal(mine[["qkey", *METRICS, "n_gt"]], want, check_dtype=False)
    assert set(got.columns) >= {"hits", "subset"}


def test_rankings_deeper_than_20_are_evaluated_to_their_depth() -> None:
    study = _study(depth=40)
    assert evaluate(study).depth == 40
    got = per_query_runs(study, 35, "candidates", ("recall",))
    want = score_rankings(study.ranking("ptr", 1), study.queries, "candidates", 35, ("recall",))
    mine = got[(got["method"] == "ptr") & (got["run"] == 1)].reset_index(drop=True)
    assert mine["recall"].tolist() == pytest.approx(want["recall"].tolist())
    with pytest.raises(ValueError, match="between 1 and 40"):
        per_query_runs(study, 41)


def test_a_stored_study_keeps_its_evaluation_and_refuses_a_damaged_one(tmp_path, caplog) -> None:
    study = _study()
    study.save(tmp_path / "s")
    first = evaluate(study)
    path = tmp_path / "s" / EVAL_DIR / "evaluation.npz"
    assert path.exists()
    again = evaluate(StudyResult.load(tmp_path / "s"))
    assert again.key == first.key and (again.flags == first.flags).all()
    path.write_bytes(path.read_bytes()[:-10] + b"0123456789")  # damaged: never used
    loaded = StudyResult.load(tmp_path / "s")
    redone = evaluate(loaded)
    assert "does not match its checksum" in caplog.text and (redone.flags == first.flags).all()


def test_the_key_follows_the_rankings() -> None:
    study = _study()
    before = evaluate(study).key
    study.rankings = study.rankings.assign(api_id=study.rankings["api_id"].where(study.rankings["rank"] != 1,
                                                                                 "zz"))
    assert evaluate(study).key != before


def test_compare_is_the_paired_t_with_holm_over_the_declared_family() -> None:
    study = _study(1)
    ev = evaluate(study)
    sets = ["G1_instruction", "G2_instruction"]
    table = compare(ev, "rtp", "ptr", sets, "candidates", 5)
    per = per_query_runs(study, 5, "candidates", ("recall",))
    mean = per.groupby(["subset", "qkey", "method"])["recall"].mean().unstack()
    ps = []
    for row in table.itertuples():
        m = mean.loc[row.subset]
        t = stats.ttest_rel(m["ptr"], m["rtp"])
        assert (row.t, row.p) == pytest.approx((t.statistic, t.pvalue))
        assert row.diff == pytest.approx((m["ptr"] - m["rtp"]).mean())
        assert row.wins + row.ties + row.losses == row.n == 15
        ps.append(t.pvalue)
    assert table["p_holm"].tolist() == pytest.approx(list(holm(ps)))
    excludes_0 = (table["ci_low_holm"] > 0) | (table["ci_high_holm"] < 0)
    assert excludes_0.tolist() == (table["p_holm"] < 0.05).tolist()
    one = compare(ev, "rtp", "ptr", ["G1_instruction"], "candidates", 5, family=sets)
    assert one["p_holm"].iloc[0] == table["p_holm"].iloc[0]  # the shown rows do not change the family
    with pytest.raises(ValueError, match="two different methods"):
        compare(ev, "rtp", "rtp")


@pytest.mark.parametrize(("a", "b", "reason"), [
    ([0.2], [0.5], "1 query"),
    ([0.0, 0.5], [0.5, 1.0], "no variance"),
    ([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], "no variance"),
    ([0.1, float("nan"), 0.3], [0.2, 0.3, 0.4], "NaN"),
])
def test_a_test_that_cannot_decide_says_so(a, b, reason) -> None:
    r = paired(a, b)
    assert not r["testable"] and reason in r["note"] and np.isnan(r["p"])
    assert np.isnan(holm([r["p"], 0.01])[0]) and holm([r["p"], 0.01])[1] == 0.01


@pytest.mark.parametrize(("p", "p_holm"), [(0.02, 0.06), (0.01, 0.03), (0.0004, 0.2), (0.3, 0.3)])
def test_the_holm_ci_excludes_0_exactly_when_the_holm_p_is_below_005(p, p_holm) -> None:
    d = np.random.default_rng(3).normal(0.05, 0.2, 40)
    lo, hi = holm_ci(d, p, p_holm, t_ci(d))
    assert (lo > 0 or hi < 0) == (stats.ttest_1samp(d, 0).pvalue * p_holm / p < 0.05)
    assert lo <= t_ci(d)[0] and t_ci(d)[1] <= hi  # never narrower than the unadjusted CI
    assert holm_ci(d, float("nan"), float("nan"), (1.0, 2.0)) == (1.0, 2.0)


def test_runs_test_never_decides_without_variance() -> None:
    assert "no variance" in runs_test([0.3], [0.4, 0.4, 0.4], a_deterministic=True)["note"]
    assert np.isnan(runs_test([0.3], [0.4], a_deterministic=True)["p_value"])
    r = runs_test([0.3], [0.4, 0.5, 0.45], a_deterministic=True)
    assert r["p_value"] == pytest.approx(stats.ttest_1samp([0.4, 0.5, 0.45], 0.3).pvalue)


def test_one_p_value_per_comparison_across_tables() -> None:
    study = _study(2)
    sets = ["G1_instruction", "G2_instruction"]
    front = compare(study, "rtp", "ptr", sets, "candidates", 5)
    again = compare(study, "rtp", "ptr", ["G2_instruction"], "candidates", 5, family=sets)
    assert p_value_conflicts({"front": front, "tests": again}) == []
    other = compare(study, "rtp", "ptr", ["G2_instruction"], "candidates", 5)  # another family: another p
    found = p_value_conflicts({"front": front, "other": other})
    assert len(found) == 1 and found[0].startswith("ptr − rtp · recall@5 · candidates · G2_instruction: p ")


def test_queries_with_the_same_ground_truth_form_one_group() -> None:
    q = pd.DataFrame({"qkey": ["a", "b", "c", "d", "e"], "subset": ["S", "S", "S", "S", "T"],
                      "candidates": [["x", "y"], ["y", "x"], ["x"], ["w"], ["x", "y"]]})
    groups = ground_truth_groups(q, "candidates")
    assert groups["a"] == groups["b"] == "a"  # the same set, in another order
    assert len({groups["a"], groups["c"], groups["d"], groups["e"]}) == 4  # e: the same set in another subset
    # one sample of APIs (the candidates) by default, whatever ground truth a comparison scores
    assert ground_truth_groups(q.assign(relevant=[["x"], ["y"], ["x"], ["w"], ["x"]])) == groups


def test_the_clustered_paired_test_is_scipys_over_single_queries_and_statsmodels_cr_over_clusters() -> None:
    rng = np.random.default_rng(3)
    a = rng.random(60)
    b = a + rng.normal(0.05, 0.2, 60)
    single = paired(a, b)
    assert single["p"] == pytest.approx(stats.ttest_rel(b, a).pvalue, rel=1e-10)
    ci = stats.ttest_1samp(b - a, 0).confidence_interval()
    assert (single["ci_low"], single["ci_high"]) == pytest.approx((ci.low, ci.high), rel=1e-10)
    clusters = np.repeat(np.arange(12), 5)  # equal sizes: CR2 is statsmodels' CR1, t on G − 1 df
    fit = sm.OLS(b - a, np.ones(60)).fit(cov_type="cluster", cov_kwds={"groups": clusters}, use_t=True)
    grouped = paired(a, b, groups=clusters)
    assert grouped["p"] == pytest.approx(fit.pvalues[0], rel=1e-10) and grouped["n_groups"] == 12
    assert (grouped["ci_low"], grouped["ci_high"]) == pytest.approx(tuple(fit.conf_int()[0]), rel=1e-10)
    copies = paired(np.repeat(a[:30], 2), np.repeat(b[:30], 2), groups=np.repeat(np.arange(30), 2))
    naive = paired(np.repeat(a[:30], 2), np.repeat(b[:30], 2))  # every query twice: 30 clusters, not 60
    assert copies["ci_high"] - copies["ci_low"] > 1.3 * (naive["ci_high"] - naive["ci_low"])
    assert "in 1 group(s)" in paired(a[:4], b[:4], groups=[0, 0, 0, 0])["note"]
    study = _study(1)
    ev = evaluate(study)
    row = compare(ev, "rtp", "ptr", ["G1_instruction"], "candidates", 5).iloc[0]
    groups = ground_truth_groups(study.queries, "candidates")
    mine = study.queries[study.queries["subset"] == "G1_instruction"]["qkey"]
    assert row.n_groups == len({groups[q] for q in mine}) <= row.n


def test_the_clustered_test_takes_bell_and_mccaffreys_df_built_from_its_definition() -> None:
    rng = np.random.default_rng(11)
    sizes = [23, 9, 6, 4, 3, 2, 2, 1, 1, 1]  # unbalanced, as G3's API samples are
    groups = np.repeat(np.arange(len(sizes)), sizes)
    n = groups.size
    x, hat = np.ones((n, 1)), np.full((n, n), 1 / n)
    # CR2's V = Σ_g (p_g'u)², p_g' = M X_g' A_g (I − H)_g·, A_g = (I_g − H_gg)^(-1/2);
    # df = (Σ p_g'p_g)² / Σ (p_g'p_h)²
    p = []
    for g in range(len(sizes)):
        rows = groups == g
        vals, vecs = np.linalg.eigh(np.eye(rows.sum()) - hat[np.ix_(rows, rows)])
        a_g = vecs @ np.diag(vals ** -0.5) @ vecs.T
        p.append((x[rows].T @ a_g @ (np.eye(n) - hat)[rows]).ravel() / n)
    gram = np.array(p) @ np.array(p).T
    _, _, df = mean_se(rng.normal(size=n), groups)
    assert df == pytest.approx(np.trace(gram) ** 2 / np.sum(gram**2), rel=1e-9) and df < len(sizes) - 1
    assert mean_se(rng.normal(size=12), np.repeat(np.arange(4), 3))[2] == pytest.approx(3)  # one size: G − 1


def test_every_interval_over_queries_resamples_their_clusters():
    from toolbench_lib.analysis.intervals import paired_columns, with_ci
    from toolbench_lib.data.queries import clusters

    q = pd.DataFrame({"qkey": ["a", "b", "c"], "subset": ["S"] * 3, "candidates": [["x"], ["x"], ["y"]]})
    assert clusters(q) == ["a", "a", "c"] and clusters(q, ["c", "z"]) == ["c", "z"]
    assert clusters(q.drop(columns="qkey")) == [0, 0, 2]  # no key: the row's own index names it
    d = np.random.default_rng(5).normal(0.05, 0.2, 30)
    copies, groups = np.repeat(d, 2), np.repeat(np.arange(30), 2)  # every query twice: 30 clusters
    alone, together = with_ci({}, "m", copies), with_ci({}, "m", copies, groups)
    assert together["m_ci_high"] - together["m_ci_low"] > 1.3 * (alone["m_ci_high"] - alone["m_ci_low"])
    res = paired(np.zeros(60), copies, groups=groups)
    names = {"diff": "diff", "ci_low": "lo", "ci_high": "hi"}
    assert paired_columns(np.zeros(60), copies, names, groups) == {
        "diff": res["diff"], "lo": res["ci_low"], "hi": res["ci_high"]}


def test_the_change_between_two_sets_is_welchs_t_and_widens_with_clusters() -> None:
    rng = np.random.default_rng(5)
    first, second = rng.normal(-0.06, 0.2, 40), rng.normal(0.02, 0.3, 55)
    mine, welch = two_sample(first, second), stats.ttest_ind(second, first, equal_var=False)
    assert (mine["t"], mine["p"], mine["df"]) == pytest.approx((welch.statistic, welch.pvalue, welch.df))
    ci = welch.confidence_interval()
    assert (mine["ci_low"], mine["ci_high"]) == pytest.approx((ci.low, ci.high))
    assert two_sample(first, second, np.arange(40), np.arange(55))["p"] == pytest.approx(mine["p"])
    twice = two_sample(np.repeat(first, 2), np.repeat(second, 2), np.repeat(np.arange(40), 2),
                       np.repeat(np.arange(55), 2))
    assert twice["ci_high"] - twice["ci_low"] == pytest.approx(mine["ci_high"] - mine["ci_low"], rel=0.02)
    assert np.isnan(two_sample(first[:1], second)["p"])


def test_interactions_are_the_change_of_compares_differences() -> None:
    study = _study(2)
    ev = evaluate(study)
    table = interactions(ev, "rtp", "ptr", "G1_instruction", ["G2_instruction"])
    per_set = compare(ev, "rtp", "ptr").set_index("subset")["diff"]
    row = table.iloc[0]
    assert row["diff_first"] == pytest.approx(per_set["G1_instruction"])
    assert row["diff"] == pytest.approx(per_set["G2_instruction"] - per_set["G1_instruction"])
    assert row["ci_low"] < row["diff"] < row["ci_high"] and row["p_holm"] == row["p"]
    assert (row["ci_low_holm"], row["ci_high_holm"]) == (row["ci_low"], row["ci_high"])
    two = interactions(evaluate(_study(2, n_sets=3)), "rtp", "ptr", "G1_instruction",
                       ["G2_instruction", "G3_instruction"])
    assert two["p_holm"].tolist() == pytest.approx(list(holm(two["p"])))
    held = two.iloc[int(two["p_holm"].to_numpy().argmax() == 0)]  # a row whose p Holm raised
    assert held["p_holm"] > held["p"]
    excludes_0 = held["ci_low_holm"] > 0 or held["ci_high_holm"] < 0
    assert held["ci_high_holm"] - held["ci_low_holm"] > held["ci_high"] - held["ci_low"]
    assert excludes_0 == (held["p_holm"] < 0.05)
    assert len(set(table["comparison"]) & set(compare(ev, "rtp", "ptr")["comparison"])) == 0
    with pytest.raises(KeyError, match="G3"):
        interactions(ev, "rtp", "ptr", "G1_instruction", ["G3_instruction"])


def test_the_interaction_table_adds_the_papers_change_per_family() -> None:
    """The dense family's rows are :func:`interactions`' own; ``paper_diff`` is the paper's PtR − RtP on the
    later set minus on G1 (its recalls by set alias), NaN where it reports no set; G1 alone, no rows."""
    from toolbench_lib.analysis.endpoint import interaction_table

    study = _study(2, n_sets=3)
    paper = {"G1": {"rtp": 0.372, "ptr": 0.289}, "G2_instruction": {"rtp": 0.143, "ptr": 0.188}}
    table = interaction_table(study, paper=paper)
    want = interactions(evaluate(study), "rtp", "ptr", "G1_instruction", ["G2_instruction", "G3_instruction"],
                        "candidates", 5, "recall")
    assert table["retriever"].tolist() == ["dense", "dense"]
    pd.testing.assert_frame_equal(table.drop(columns=["retriever", "paper_diff"]), want)
    assert table["paper_diff"].iloc[0] == pytest.approx((0.188 - 0.143) - (0.289 - 0.372))
    assert np.isnan(table["paper_diff"].iloc[1])  # the paper's G3 is not in ``paper``
    assert interaction_table(study, families=["bm25"]).empty
    assert interaction_table(_study(2, n_sets=1), paper=paper).empty  # G1 alone: no change to test


def test_the_endpoint_table_reads_each_comparison_again_with_coarser_clusters() -> None:
    """The robustness columns are compare's over clusters of queries linked by a shared tool (here every API
    id is a tool of its own, so queries sharing an API merge): never more clusters than the primary's."""
    from dataclasses import replace

    from toolbench_lib.analysis.endpoint import endpoint_table
    from toolbench_lib.data.queries import shared_tool_groups

    study = _study(4, depth=60, n_sets=2)  # 60 APIs, 3 per query: some queries share one, most not
    table = endpoint_table(study).set_index("subset")
    ev = evaluate(study)
    groups = shared_tool_groups(study.queries)
    coarse = replace(ev, groups=np.array([groups[q] for q in ev.qkeys]))
    want = compare(coarse, "rtp", "ptr").set_index("subset")
    assert (table["n_groups_tool_clusters_robustness"] <= table["n_groups"]).all()
    assert table["n_groups_tool_clusters_robustness"].tolist() == want["n_groups"].tolist()
    assert table["p_holm_tool_clusters_robustness"].tolist() == pytest.approx(want["p_holm"].tolist())
    assert table["n_groups_tool_clusters_robustness"].min() < table["n_groups"].min()  # the check can fail


def test_the_endpoint_table_reads_each_comparison_on_run_0_alone_and_without_its_dominant_cluster() -> None:
    """Run 0's columns are compare's on the first run alone; a set's dominant cluster (the one largest, with
    at least a fifth of its queries, written from one API sample) is named with its size and the set tested
    again without it; a set where none dominates (a tie) has no such reading."""
    from dataclasses import replace

    from toolbench_lib.analysis.endpoint import endpoint_table

    study = _study(4, depth=60, n_sets=2)
    shared = study.queries.loc[0, "candidates"]
    study.queries["candidates"] = [shared if i < 5 else c for i, c in enumerate(study.queries["candidates"])]
    table = endpoint_table(study).set_index("subset")
    ev = evaluate(study)
    first = compare(replace(ev, flags=ev.flags[:, :, :1], n_runs=1), "rtp", "ptr").set_index("subset")
    assert table["diff_run0_robustness"].tolist() == pytest.approx(first["diff"].tolist())
    assert table["p_holm_run0_robustness"].tolist() == pytest.approx(first["p_holm"].tolist())
    assert not np.allclose(table["diff_run0_robustness"], table["diff"])  # runs differ: the check can fail
    first_set, second_set = table.index  # the first holds 5 queries of one API sample, the second 15 apart
    names, counts = np.unique(ev.groups[ev.subsets == first_set], return_counts=True)
    r = table.loc[first_set]
    assert r.largest_cluster_n == counts.max() == 5 and r.largest_cluster == names[np.argmax(counts)]
    kept = (ev.subsets == first_set) & (ev.groups != r.largest_cluster)
    v = ev.values("recall", 5, "candidates")
    d = v[ev._method("ptr")][:, kept].mean(axis=0) - v[ev._method("rtp")][:, kept].mean(axis=0)
    assert r.n_no_largest_cluster_robustness == kept.sum() == r.n_queries - 5
    assert r.diff_no_largest_cluster_robustness == pytest.approx(d.mean())
    tied = table.loc[second_set]
    assert tied.largest_cluster_n == 1 and tied.largest_cluster == ""
    assert tied[["diff_no_largest_cluster_robustness", "p_holm_no_largest_cluster_robustness"]].isna().all()


def test_the_per_query_table_holds_what_the_primary_test_reads() -> None:
    """Each set's means of its per-query values are the endpoint table's; PtR's mean is over its runs."""
    from toolbench_lib.analysis.endpoint import endpoint_table, per_query_table

    study = _study(5, depth=60, n_sets=2)
    per_query = per_query_table(study)
    assert len(per_query) == len(study.queries) and {"cluster", "tool_cluster", "ptr_run2"} <= set(per_query)
    assert per_query["ptr"].tolist() == pytest.approx(per_query[["ptr_run0", "ptr_run1", "ptr_run2"]].mean(
        axis=1).tolist())
    means = per_query.groupby("subset")[["rtp", "ptr"]].mean()
    table = endpoint_table(study).set_index("subset")
    assert means["rtp"].tolist() == pytest.approx(table["rtp"].tolist())
    assert means["ptr"].tolist() == pytest.approx(table["ptr"].tolist())


def test_the_endpoint_table_saves_holm_over_every_familys_comparisons_once() -> None:
    """With two families, every row carries Holm over all of their comparisons at once (the report reads it,
    computing nothing); with one family there is none."""
    from toolbench_lib.analysis.endpoint import endpoint_table
    from toolbench_lib.eval.stats import holm

    study, two = _study(6, n_sets=3), _study(6, n_sets=3, families=("", "@bm25"))
    table = endpoint_table(two)
    assert set(table["retriever"]) == {"dense", "bm25"} and len(table) == 6
    assert table["p_holm_all_families_robustness"].tolist() == pytest.approx(holm(table["p"]).tolist())
    assert (table["p_holm_all_families_robustness"] >= table["p_holm"] - 1e-12).all()  # more tests, more Holm
    assert endpoint_table(study)["p_holm_all_families_robustness"].isna().all()


def test_the_endpoint_sentence_says_when_its_runs_mix_temperatures():
    from toolbench_lib.analysis.endpoint import PRIMARY

    mixed = PRIMARY.text(temperatures={"temperature": 0.0, "run_temperature": 0.3})
    assert "per-query mean over runs (run 0 at temperature 0, the later runs at 0.3); PtR − RtP" in mixed
    assert "temperature" not in PRIMARY.text(temperatures={"temperature": 0.0, "run_temperature": 0.0})
