"""Which G2, divergence read two ways, the scale claim and the routing claim: on hand-built studies whose
answers are worked out by hand, and the notebooks' calls on the registry slice's study."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from toolbench_lib.analysis import sensitivity as se
from toolbench_lib.analysis.similarity import SimilarityCache
from toolbench_lib.eval.stats import grouped_bootstrap_ci
from toolbench_lib.study.stored import StudyResult

from .hand_tables import HIT_COLUMNS, study_of_hits

# Ground truth per query; G2 is G2_category_original, G2_instruction is the other G2.
GT = {"G1_instruction:1": ["a"], "G1_instruction:2": ["b"], "G2_category_original:3": ["c", "d"],
      "G2_category_original:4": ["e", "f"], "G2_instruction:5": ["g", "h", "i"],
      "G2_instruction:6": ["j", "w"], "G3_instruction_original:7": ["m"]}
RTP = {1: ["a", "x"], 2: ["b", "x"], 3: ["c", "x"], 4: ["x", "y"], 5: ["g", "h"], 6: ["j", "x"],
       7: ["m", "x"]}
PTR = [{1: ["a", "x"], 2: ["y", "z"], 3: ["c", "d"], 4: ["e", "y"], 5: ["g", "x"], 6: ["x", "j"],
        7: ["x", "y"]},
       {1: ["b", "z"], 2: ["z", "y"], 3: ["c", "y"], 4: ["e", "f"], 5: ["x", "y"], 6: ["j", "x"],
        7: ["y", "x"]}]


def _study(keys: list[int] | None = None) -> StudyResult:
    """Two runs of PtR, one stored RtP ranking, depth 2, over the queries ``keys`` (default: all)."""
    qkeys = [q for q in GT if keys is None or int(q.split(":")[1]) in keys]
    queries = pd.DataFrame({"qkey": qkeys, "subset": [q.split(":")[0] for q in qkeys], "query": qkeys,
                            "candidates": [GT[q] for q in qkeys], "relevant": [GT[q] for q in qkeys]})
    rows = []
    for method, run, lists in [("rtp", -1, RTP), ("ptr", 0, PTR[0]), ("ptr", 1, PTR[1])]:
        for q in qkeys:
            for rank, api in enumerate(lists[int(q.split(":")[1])], 1):
                rows.append((q, method, run, -1, rank, 0, api, 1.0 / rank))
    hits = pd.DataFrame(rows, columns=HIT_COLUMNS)
    prov = {"settings": {"runs": 2, "k": 2, "depth": 2, "methods": ["rtp", "ptr"]}}
    return study_of_hits(queries, pd.DataFrame(), hits, pd.DataFrame(), pd.DataFrame(), prov)


SOURCES = [("main", _study(), "G2_category_original"), ("validation", _study(), "G2_instruction")]


def test_g2_sensitivity_recall_and_paired_difference_by_hand():
    sens = se.g2_sensitivity(SOURCES, ks=[1, 2], n_resamples=500).set_index(["subset", "k"])
    cat = sens.loc[("G2_category_original", 2)]
    # RtP: q3 1/2, q4 0; PtR (mean of two runs): q3 (1 + 1/2)/2, q4 (1/2 + 1)/2.
    assert (cat["rtp"], cat["ptr"], cat["diff"]) == pytest.approx((0.25, 0.75, 0.5))
    # per-query differences .25 and .75: mean .5, standard error .25, t(0.975, 1 df) = 12.706
    assert (cat["diff_lo"], cat["diff_hi"]) == pytest.approx((0.5 - 3.17655, 0.5 + 3.17655), abs=1e-4)
    assert cat["n_queries"] == 2 and cat["basis"] == "main: mean of 2 runs" and cat["retriever"] == "dense"
    assert sens.loc[("G2_category_original", 1), "diff"] == pytest.approx(0.25)  # q3 0, q4 +.5 at k = 1
    ins = sens.loc[("G2_instruction", 2)]
    # RtP: q5 2/3, q6 1/2; PtR: q5 (1/3 + 0)/2, q6 1/2.
    assert (ins["rtp"], ins["ptr"], ins["diff"]) == pytest.approx((7 / 12, 1 / 3, -0.25))
    assert ins["rtp_lo"] <= ins["rtp"] <= ins["rtp_hi"] and ins["rtp_wins"] == 1 and ins["ptr_wins"] == 0


def test_g2_sets_and_verdict_from_the_numbers():
    sets = se.g2_sets(SOURCES, paper_gt=2.5, example_qkey="G2_instruction:5", n_resamples=200)
    by = sets.set_index("subset")
    assert by.loc["G2_category_original", "gt_size"] == 2.0 and by.loc["G2_instruction", "gt_size"] == 2.5
    assert by["example_in_set"].tolist() == [False, True]
    sens = se.g2_sensitivity(SOURCES, ks=[2], n_resamples=500)
    verdict = se.g2_verdict(sets, sens, {2: 0.5}).set_index("subset")
    assert verdict.loc["G2_category_original", "paper_diffs_in_ci"] == 1  # 0.5 in [-2.677, 3.677]
    assert verdict.loc["G2_instruction", "paper_diffs_in_ci"] == 1  # two queries: a wide t-interval too
    far = se.g2_verdict(sets, sens, {2: 3.5}).set_index("subset")  # inside the first CI only
    assert far["paper_diffs_in_ci"].iloc[:2].tolist() == [1, 0]
    assert verdict.loc["verdict", "fits"] == "G2_instruction"
    assert verdict.loc["verdict", "text"] == (
        "The paper's G2 numbers fit G2_instruction, a hypothesis about its data: its mean ground-truth size "
        "rounds to the paper's; it holds the worked example.")
    named = se.g2_verdict(sets, sens, {2: 0.5}, example=se.worked_example_name("greece_energy_news"))
    assert named.iloc[-1]["text"].endswith(
        "it holds the paper's Table 2 example “trip to Greece, explore energy market news” "
        "(G2_instruction:75279, loosely: the same APIs in another request, so weak evidence).")
    assert se.worked_example_name("no such example") == "the worked example"
    none = se.g2_verdict(se.g2_sets(SOURCES, paper_gt=9.0, example_qkey=None), sens, {2: 0.5})
    assert none.iloc[-1]["fits"] == "" and none.iloc[-1]["text"].startswith("Neither")


def test_divergence_both_readings_per_set_and_pooled():
    per_query = se.study_divergence(_study(), k=2)
    read = se.divergence_readings(per_query, by=["retriever"]).set_index(["group", "reading"])
    # q1: identical in run 0, disjoint in run 1; q2 disjoint twice; q3 overlaps (never identical) twice;
    # q4 overlaps, then disjoint; q6's lists hold the same two APIs in another order: identical.
    share = read["share"]
    assert (share[("G1", "disjoint")], share[("G1", "non_identical")]) == (0.75, 0.75)
    assert (share[("G2", "disjoint")], share[("G2", "non_identical")]) == (0.25, 1.0)
    assert (share[("G2_instruction", "disjoint")], share[("G2_instruction", "non_identical")]) == (0.25, 0.5)
    pooled = read.loc[("G1+G2", "disjoint")]
    assert (pooled["share"], pooled["n_queries"], pooled["sets"]) == (0.5, 4, "G1, G2")
    # the interval resamples whole API samples, as every paired test: here each query is its own sample
    x = per_query[per_query["subset"].isin(["G1", "G2"])]
    lo, hi, _ = grouped_bootstrap_ci(x["disjoint_share"].to_numpy(), x["cluster"].to_numpy(), 2000)
    assert (pooled["ci_low"], pooled["ci_high"]) == pytest.approx((lo, hi))
    assert read.loc[("G1+G2", "non_identical"), "share"] == pytest.approx(0.875)
    assert read.loc[("G1–G3", "disjoint"), "share"] == pytest.approx(0.4)  # G3's q7 overlaps in both runs
    one = per_query.assign(cluster="one sample")  # one cluster: nothing to resample, the CI is the point
    joined = se.divergence_readings(one, by=["retriever"]).set_index(["group", "reading"])
    assert joined.loc[("G1+G2", "disjoint"), ["ci_low", "ci_high"]].tolist() == pytest.approx([0.5, 0.5])


def test_divergence_readings_by_size_average_seeds_and_the_verdict():
    rows = [(1000, s, "G1", f"G1:{i}", d, 1.0) for s, d in ((0, 0.8), (1, 0.6)) for i in range(10)] + \
        [(1000, s, "G2", f"G2:{i}", 1.0 if i % 2 else 0.8, 1.0) for s in (0, 1) for i in range(30)] + \
        [(5000, 0, "G1", f"G1:{i}", 0.1, 0.9) for i in range(10)] + \
        [(5000, 0, "G2", f"G2:{i}", 0.3, 1.0) for i in range(30)]
    table = pd.DataFrame(rows, columns=["size", "seed", "subset", "qkey", "disjoint_share",
                                        "non_identical_share"]).assign(cluster=lambda t: t["qkey"])
    read = se.divergence_readings(table, by=["size"]).set_index(["size", "group", "reading"])
    assert read.loc[(1000, "G1", "disjoint"), "share"] == pytest.approx(0.7)  # the mean over seeds
    assert read.loc[(1000, "G1+G2", "disjoint"), "share"] == pytest.approx((0.7 * 10 + 0.9 * 30) / 40)
    assert read.loc[(5000, "G1+G2", "non_identical"), "share"] == pytest.approx((9 + 30) / 40)
    assert read.loc[(1000, "G1+G2", "disjoint"), "n_queries"] == 40  # queries, not query-seed pairs
    verdict = se.divergence_verdict(read.reset_index(), {"smallest": 0.88, "full": 0.98}).set_index("reading")
    assert bool(verdict.loc["disjoint", "fits_smallest"]) and not verdict.loc["disjoint", "fits_full"]
    assert verdict.loc["non_identical", "fits_full"] and not verdict.loc["non_identical", "fits_smallest"]
    assert verdict.loc["verdict", "text"].startswith("The paper's 88% and 98% fit neither reading at both")
    assert "full-registry figure fits the non-identical reading" in verdict.loc["verdict", "text"]


def _cache(subset: str) -> tuple[SimilarityCache, pd.DataFrame, pd.DataFrame]:
    """Two queries over six APIs (registry rows 2..7 of eight, three categories); worked out in the test."""
    reg = pd.DataFrame({"api_id": [f"api{i}" for i in range(8)], "category": list("AAAABBCC")})
    rows = np.arange(2, 8)
    ids = reg["api_id"].to_numpy()[rows]
    rtp = np.array([[0.9, 0.8, 0.1, 0.1, 0.1, 0.1], [0.1, 0.1, 0.9, 0.8, 0.2, 0.2]], dtype=np.float32)
    ptr = np.array([[0.1, 0.1, 0.9, 0.8, 0.2, 0.2], [0.1, 0.1, 0.2, 0.9, 0.8, 0.1]], dtype=np.float32)
    queries = pd.DataFrame({"qkey": [f"{subset}:1", f"{subset}:2"], "subset": subset,
                            "candidates": [[ids[0], ids[2]], [ids[4], "not-in-index"]],
                            "relevant": [[ids[0]], [ids[4]]]})
    return SimilarityCache(queries["qkey"].tolist(), rows, ids, rtp, {0: ptr}), queries, reg


def test_scale_claim_by_hand_with_the_ground_truth_share():
    cache, queries, reg = _cache("G2_category_original")
    claim = se.scale_claim(cache, queries, reg, [3, 4, None], seeds=[0, 1], k=2)
    by = claim.set_index("size")
    # Three APIs = exactly the three kept candidates (columns 0, 2, 4): RtP q1 1, q2 1/2; PtR 1/2 and 1/2.
    assert (by.loc[3, "rtp"], by.loc[3, "ptr"], by.loc[3, "diff"]) == pytest.approx((0.75, 0.5, -0.25))
    # The whole index: RtP q1 1/2, q2 0; PtR 1/2, 1/2 (the fourth candidate is not in the index).
    assert (by.loc[6, "rtp"], by.loc[6, "ptr"], by.loc[6, "diff"]) == pytest.approx((0.25, 0.5, 0.25))
    assert by["gt_share"].tolist() == pytest.approx([1.0, 0.75, 0.5]) and by["keeps_all_gt"].all()
    assert by.loc[4, "n_seeds"] == 2 and by.loc[6, "n_seeds"] == 1 and (by["expected"] == "PtR").all()
    # PtR − RtP per query: -1/2 and 0 at 3 APIs, 0 and +1/2 on the whole index: each changes by +1/2
    assert by.loc[3, "change"] == 0 and by.loc[6, "change"] == pytest.approx(0.5)
    assert np.isnan(by.loc[3, "change_p"])  # no change at the smallest size: not testable, not p = 1
    assert by["change_p_holm"].tolist() == pytest.approx(by["change_p"].tolist(), nan_ok=True)  # one set
    verdict = se.scale_claim_verdict(claim).iloc[0]
    assert (verdict["subset"], verdict["n_sizes"], bool(verdict["holds"])) == ("G2", 3, False)
    assert verdict["smallest_gt_share"] == 1.0 and bool(verdict["paper_claims"])  # Figure 3 shows G2
    assert verdict["gap_std"] == pytest.approx(claim.sort_values("size")["diff"].std())  # the scored std
    # not significantly ahead or behind at any size, each CI holding 0: inconclusive, not failed
    assert "is inconclusive at every size (the CI holding 0)" in verdict["text"]
    assert ("+0.250 at 6 (change +0.500 [+0.500, +0.500], paired over queries, clustered by API sample, "
            "given the sub-registries drawn)") in verdict["text"]
    behind = claim.assign(ci_high=claim["ci_high"].where(claim["size"] != 3, -0.1))  # the CI excludes 0 at 3
    text = se.scale_claim_verdict(behind).iloc[0]["text"]
    # two queries at 3 APIs, differences -.5 and 0: mean -.25, standard error .25, t(0.975, 1 df) = 12.706
    assert "fails at 3 (-0.250 [-3.427, -0.100]) (the CI excludes 0); inconclusive at 4 (+0.000" in text
    ahead = claim.assign(diff=0.1, ci_low=0.05, ci_high=0.15)
    assert "keeps its advantage at every size holds, significantly at every size" in \
        se.scale_claim_verdict(ahead).iloc[0]["text"]
    loose = se.scale_claim_verdict(ahead.assign(ci_low=ahead["ci_low"].where(ahead["size"] != 6, -0.01)))
    assert "holds at the point estimates, not significantly at 6 (+0.100 [-0.010, +0.150])" in \
        loose.iloc[0]["text"]
    level = claim.assign(diff=-0.01, ci_low=-0.1, ci_high=0.1)  # behind at all three sizes: their names only
    level_text = se.scale_claim_verdict(level).iloc[0]["text"]
    assert "is inconclusive at every size (the CI holding 0)" in level_text
    # a lead that shows as +0.000 at 3 decimals is a tie, not a size where PtR is ahead
    tiny = claim.assign(diff=claim["diff"].where(claim["size"] != 6, 0.000006))
    assert se.scale_claim_verdict(tiny).iloc[0]["sizes_ahead"] == 0
    tied = se.scale_claim_verdict(tiny).iloc[0]["text"]  # 4 and 6 APIs: the rule is stated
    assert "(0 significantly; 2 tied, differing by under 0.0005)" in tied
    assert se.scale_claim_verdict(claim).iloc[0]["sizes_ahead"] == 1
    other, q, r = _cache("S")
    assert se.scale_claim_verdict(se.scale_claim(other, q, r, [None], [0], k=2)).empty  # no paper leader


def test_routing_claim_by_hand():
    table = se.routing_claim(_study([1, 2, 3, 4, 7]), "hand", k=2).set_index("against")
    # Per query: routed 1, 1, .75, .75, 0 (PtR on G3); the better architecture per set is RtP on G3.
    best = table.loc["best_per_subset"]
    assert (best["routed"], best["other"], best["diff"]) == pytest.approx((0.7, 0.9, -0.2))
    assert best["choice"] == "G1 rtp, G2 ptr, G3 rtp" and best["loss"] == "not significant"
    assert best["ci_low"] < -0.2 and best["text"].endswith(  # how large a loss the CI still allows
        f"no significant loss, though the CI allows one up to {-best['ci_low']:.3f}.")
    assert table.loc["always_ptr", "diff"] == pytest.approx(0.3) and best["basis"] == "hand: mean of 2 runs"
    # Against always-PtR the routed policy gains .5 and 1 on q1 and q2 and ties on the other three: mean .3,
    # standard error .2, t(0.975, 4 df) = 2.776, so the CI reaches below 0: no significant gain.
    assert table.loc["always_ptr", "loss"] == "not significant"
    assert table.loc["always_ptr", "ci_low"] == pytest.approx(0.3 - 0.2 * 2.7764, abs=1e-3)
    same = se.routing_claim(_study([1, 2, 3, 4, 5]), "hand", k=2).set_index("against")
    assert same.loc["best_per_subset", "loss"] == "none" and same.loc["best_per_subset", "n_queries"] == 4


# -- the notebooks' calls on the registry slice's study ---------------------------------------------------


@pytest.fixture(scope="module")
def slice_study(slice_setup):
    from toolbench_lib.llm.rules import RulesBackend
    from toolbench_lib.study.result import StudySettings, run_study

    return run_study(slice_setup, RulesBackend(), StudySettings(runs=2, plan_limit=0), progress=False)


def test_notebook_calls_on_the_slice_study(slice_setup, slice_study):
    """The calls of notebooks 03, 04, 05 and 07 on a real study: their numbers agree with the study's own
    summary and with the scale study they sit beside."""
    from toolbench_lib.analysis.scale import scale_study
    from toolbench_lib.analysis.similarity import query_similarities
    from toolbench_lib.analysis.summary import summary_table

    main = summary_table(slice_study, 5, ["candidates"], n_resamples=0).set_index(["subset", "method"])
    g2 = se.g2_tables([("slice", slice_study, "G2_category_original"), ("none", None, "G2_instruction")],
                      [1, 5])
    sens = g2["g2_sensitivity"].set_index("k")
    assert sens.loc[5, "rtp"] == pytest.approx(main.loc[("G2", "rtp"), "recall_mean"])
    assert sens.loc[5, "ptr"] == pytest.approx(main.loc[("G2", "ptr"), "recall_mean"])
    assert g2["g2_sets"]["subset"].tolist() == ["G2_category_original"]  # no G2_instruction study here
    assert g2["g2_verdict"].iloc[-1]["subset"] == "verdict"
    cache = query_similarities(slice_setup, slice_study)
    scale, div, per_query = scale_study(cache, slice_study.queries, slice_setup.ds.registry, [600, None],
                                        [0, 1], k=5, progress=False)
    claims = se.scale_tables(cache, slice_study.queries, slice_setup.ds.registry, per_query, [600, None],
                             [0, 1], k=5)
    claim = claims["scale_claim"]
    full = scale[scale["size"] == scale["size"].max()].set_index(["subset", "method"])["recall"]
    for _, r in claim[claim["size"] == claim["size"].max()].iterrows():
        assert (r["rtp"], r["ptr"]) == pytest.approx((full[(r["subset"], "rtp")], full[(r["subset"], "ptr")]))
    assert claim["keeps_all_gt"].all() and (claim.groupby("subset")["gt_share"].first() > 0).all()
    assert set(claims["scale_claim_verdict"]["subset"]) == {"G1", "G2", "G3"}
    assert claims["divergence_verdict"].iloc[-1]["text"].startswith("The paper's 88% and 98%")
    assert (claim["basis"] == "this run: mean of 2 runs, 2 seeds below the full registry").all()
    read = claims["divergence_readings"].set_index(["size", "group", "reading"])
    small = per_query[(per_query["target_size"] == 600) & per_query["subset"].isin(["G1", "G2"])]
    by_query = small.groupby(["qkey", "cluster"])["disjoint_share"].mean().reset_index()  # seeds averaged
    lo, hi, _ = grouped_bootstrap_ci(by_query["disjoint_share"].to_numpy(), by_query["cluster"].to_numpy(),
                                     2000)
    assert read.loc[(600, "G1+G2", "disjoint"), ["share", "ci_low", "ci_high"]].tolist() == pytest.approx(
        [by_query["disjoint_share"].mean(), lo, hi])
    # The study's own top-5 lists give the scale study's full-registry divergence, both readings.
    mine = se.full_divergence_tables(slice_study, "slice")
    assert (mine["divergence_full"]["basis"] == "slice: mean of 2 runs").all()
    per_set = mine["divergence_full"].query("reading == 'disjoint'").set_index("group")["share"]
    theirs = div[div["size"] == div["size"].max()].set_index("subset")
    assert per_set[["G1", "G2", "G3"]].to_dict() == pytest.approx(theirs["no_overlap_share"].to_dict())
    nonid = mine["divergence_full"].query("reading == 'non_identical'").set_index("group")["share"]
    assert nonid[["G1", "G2", "G3"]].to_dict() == pytest.approx(theirs["non_identical_share"].to_dict())
    assert mine["divergence_full_verdict"].iloc[-1]["text"].startswith("The paper's 98%")
    routing = se.routing_claim(slice_study, "slice", k=5).set_index("against")
    rtp = main.xs("rtp", level="method").loc[["G1", "G2", "G3"]]
    assert routing.loc["always_rtp", "other"] == pytest.approx(
        (rtp["recall_mean"] * rtp["n_queries"]).sum() / rtp["n_queries"].sum())


def test_paper_numbers_come_from_the_reference_file():
    from toolbench_lib.analysis.references import load_references, paper_value

    examples = {e["id"]: e.get("qkey") for e in load_references()["worked_examples"]}
    assert se.worked_example_qkey("greece_energy_news") == examples["greece_energy_news"]
    assert se.worked_example_qkey("no_such_example") is None
    diffs = se.paper_g2_diffs()
    assert sorted(diffs) == [1, 5, 20]
    assert diffs[1] == paper_value("g2_ptr_gain_k1") and diffs[20] == paper_value("g2_ptr_gain_k20")
    assert diffs[5] == pytest.approx(paper_value("g2_ptr_recall") - paper_value("g2_rtp_recall"))
