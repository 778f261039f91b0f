"""Cached similarities and the scale study: top-k on column subsets, sampling, divergence, exactness."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from toolbench_lib.analysis.scale import (
    draw_subregistry,
    no_overlap,
    plot_divergence,
    plot_scale_recall,
    recall_precision,
    scale_study,
    scale_summary,
)
from toolbench_lib.analysis.similarity import (
    SimilarityCache,
    max_over_groups,
    query_similarities,
    topk_columns,
)
from toolbench_lib.eval.evaluation import per_query_runs, score_rankings
from toolbench_lib.llm.rules import RulesBackend
from toolbench_lib.study.result import StudySettings, run_study

# -- top-k on column subsets ------------------------------------------------------------------------


def test_topk_columns_on_a_column_subset():
    m = np.array([[0.1, 0.9, 0.5, 0.7, 0.3],
                  [0.8, 0.2, 0.6, 0.6, 0.9]], dtype=np.float32)
    pos, scores = topk_columns(m, np.array([0, 2, 3, 4]), 2)
    assert pos.tolist() == [[3, 2], [4, 0]]  # column 1 (the best of row 0) is not in the subset
    np.testing.assert_allclose(scores, [[0.7, 0.5], [0.9, 0.8]])
    pos, _ = topk_columns(m, np.array([0, 2, 3]), 3)
    assert pos[1].tolist() == [0, 2, 3]  # the tie 0.6/0.6 goes to the lower column
    pos, _ = topk_columns(m, np.array([1, 4]), 10)  # k capped at the subset size
    assert pos.tolist() == [[1, 4], [4, 1]]


def test_max_over_groups_matches_a_direct_max_across_blocks():
    rng = np.random.default_rng(0)
    texts = rng.normal(size=(11, 4)).astype(np.float32)
    apis = rng.normal(size=(6, 4)).astype(np.float32)
    sizes = [1, 3, 5, 2]
    full = texts @ apis.T
    starts = np.cumsum([0, *sizes])
    expected = np.stack([full[a:b].max(axis=0) for a, b in zip(starts[:-1], starts[1:], strict=True)])
    for block in (1, 2, 4, 100):  # a group larger than the block still comes out whole
        np.testing.assert_allclose(max_over_groups(texts, sizes, apis, block), expected, rtol=1e-6)
    with pytest.raises(ValueError):
        max_over_groups(texts, [0, 11], apis)


# -- metrics and divergence ---------------------------------------------------------------------------


def test_recall_precision_and_no_overlap():
    top = np.array([[1, 2, 3], [4, 5, 6]])
    recall, precision = recall_precision(top, [{1, 9}, set()], 3)
    np.testing.assert_allclose(recall, [0.5, 0.0])
    np.testing.assert_allclose(precision, [1 / 3, 0.0])
    other = np.array([[7, 8, 3], [7, 8, 9]])
    assert no_overlap(top, other).tolist() == [False, True]


@pytest.mark.parametrize("k", [1, 5])
def test_recall_precision_equals_evals_scorer(k):
    """The scale study's count on column positions gives eval's ranx scores (score_rankings) on the same
    lists as API ids, ground truth outside the index (negative placeholders) included."""
    rng = np.random.default_rng(k)
    top = np.array([rng.choice(50, size=k, replace=False) for _ in range(40)])
    gt_sets = [set(rng.choice(50, size=int(rng.integers(0, 6)), replace=False).tolist())
               | ({-1} if i % 3 == 0 else set()) for i in range(40)]
    recall, precision = recall_precision(top, gt_sets, k)
    queries = pd.DataFrame({"qkey": [f"q{i}" for i in range(40)],
                            "candidates": [[f"c{c}" for c in sorted(g)] for g in gt_sets]})
    want = score_rankings({f"q{i}": [f"c{c}" for c in row] for i, row in enumerate(top)}, queries,
                          "candidates", k)
    np.testing.assert_allclose(recall, want["recall"], atol=1e-12)
    np.testing.assert_allclose(precision, want["precision"], atol=1e-12)
    assert any(not g for g in gt_sets) and recall.max() > 0  # both cases occur


# -- sampling -------------------------------------------------------------------------------------------


def _registry(n: int = 60) -> pd.DataFrame:
    cats = ["A"] * (n // 2) + ["B"] * (n // 3) + ["C"] * (n - n // 2 - n // 3)
    return pd.DataFrame({"api_id": [f"api{i}" for i in range(n)], "category": cats})


def test_draw_subregistry_keeps_ground_truth_and_raises_size_when_needed():
    reg = _registry()
    keep = {"api1", "api50", "api59"}
    sub = draw_subregistry(reg, 10, seed=3, keep_ids=keep)
    assert len(sub.cols) == 10 and sub.note == ""
    assert keep <= set(reg["api_id"].iloc[sub.cols])
    assert sub.cols.tolist() != draw_subregistry(reg, 10, seed=4, keep_ids=keep).cols.tolist()
    small = draw_subregistry(reg, 2, seed=0, keep_ids=keep)
    assert len(small.cols) == 3 and "raised" in small.note and small.target_size == 2
    assert set(reg["api_id"].iloc[small.cols]) == keep
    full = draw_subregistry(reg, None, seed=0, keep_ids=keep)
    assert len(full.cols) == 60 and full.target_size == 60


# -- the scale study on hand-made matrices --------------------------------------------------------------


def _hand_cache() -> tuple[SimilarityCache, pd.DataFrame, pd.DataFrame]:
    """Two queries over six APIs; RtP and PtR agree on nothing at k=2 over the full registry."""
    reg = _registry(8)
    rows = np.arange(2, 8)  # the index holds registry rows 2..7 only
    api_ids = reg["api_id"].to_numpy()[rows]
    rtp = np.array([[0.9, 0.8, 0.1, 0.1, 0.1, 0.1],
                    [0.1, 0.1, 0.9, 0.8, 0.2, 0.2]], dtype=np.float32)
    ptr = np.array([[0.1, 0.1, 0.9, 0.8, 0.2, 0.2],
                    [0.1, 0.1, 0.2, 0.9, 0.8, 0.1]], dtype=np.float32)
    queries = pd.DataFrame({"qkey": ["S:1", "S:2"], "subset": ["S", "S"],
                            "candidates": [[api_ids[0], api_ids[2]], [api_ids[4], "not-in-index"]],
                            "relevant": [[api_ids[0]], [api_ids[4]]]})
    return SimilarityCache(["S:1", "S:2"], rows, api_ids, rtp, {0: ptr}), queries, reg


def test_scale_study_full_size_on_hand_matrices():
    cache, queries, reg = _hand_cache()
    scale, div, per_query = scale_study(cache, queries, reg, [None], seeds=[0, 1], k=2, progress=False)
    assert len(scale) == 2 and set(scale["seed"]) == {0}  # the whole index is evaluated once
    rtp = scale[scale["method"] == "rtp"].iloc[0]
    ptr = scale[scale["method"] == "ptr"].iloc[0]
    # RtP: q1 finds api2 (1 of 2), q2 nothing (0 of 2, one GT id is not in the index).
    assert rtp["recall"] == pytest.approx((0.5 + 0.0) / 2)
    # PtR: q1 finds api4 (1 of 2), q2 finds api6 (1 of 2).
    assert ptr["recall"] == pytest.approx(0.5)
    assert ptr["precision"] == pytest.approx(0.5)
    assert rtp["size"] == 6 and rtp["subset"] == "S"
    # q1: RtP {0,1} vs PtR {2,3}: disjoint; q2: RtP {2,3} vs PtR {3,4}: overlap.
    assert div["no_overlap_share"].tolist() == [0.5]
    # each query's readings, kept for intervals that pool sets: q1 disjoint, q2 overlapping, neither identical
    assert per_query["disjoint_share"].tolist() == [1.0, 0.0]
    assert per_query["non_identical_share"].tolist() == [1.0, 1.0] and per_query["cluster"].nunique() == 2


def test_scale_study_sub_registries_keep_gt_and_come_from_the_index():
    cache, queries, reg = _hand_cache()
    scale, div, _ = scale_study(cache, queries, reg, [3, None], seeds=[0, 1, 2], k=2, gt="relevant",
                             keep_gt="relevant", progress=False)
    small = scale[scale["target_size"] == 3]
    assert sorted(small["seed"].unique()) == [0, 1, 2] and (small["size"] == 3).all()
    # Every relevant API is kept and lies in the index, so recall@2 over 3 APIs can only improve.
    full = scale[scale["target_size"] == 6].set_index("method")["recall"]
    small_mean = small.groupby("method")["recall"].mean()
    assert (small_mean >= full.reindex(small_mean.index) - 1e-12).all()
    with pytest.raises(ValueError):
        scale_study(cache, queries, reg, [3], seeds=[0], keep_gt="everything", progress=False)
    summary = scale_summary(scale)
    assert set(summary["n_seeds"]) == {1, 3}
    # The figures draw these numbers: one panel for the one set, a line per method through the mean over
    # seeds at each size (RtP 1.0 at 3 APIs, 0.5 over all 6; PtR 0.5 at both), and the divergence line
    # (0 at 3 APIs, 1/2 over all 6: q1's lists are disjoint there) with the paper's two stars.
    fig = plot_scale_recall(scale, 2)
    (ax,) = fig.axes
    drawn = [(list(ln.get_xdata()), list(ln.get_ydata())) for ln in ax.lines if len(ln.get_xdata())]
    assert drawn == [([3, 6], [1.0, 0.5]), ([3, 6], [0.5, 0.5])]
    assert ax.get_title() == "S" and ax.get_ylabel() == "recall@2"
    assert [t.get_text() for t in fig.legends[0].get_texts()] == ["RtP (retrieve, then plan)",
                                                                   "PtR (plan, then retrieve)"]
    # with scale_claim, a second row draws PtR − RtP per size with its CI as error bars
    claim = pd.DataFrame({"subset": "S", "size": [3, 6], "diff": [-0.5, 0.0], "ci_low": [-0.8, -0.2],
                          "ci_high": [-0.2, 0.2]})
    top, gap = plot_scale_recall(scale, 2, claim).axes
    drawn = [(list(ln.get_xdata()), list(ln.get_ydata())) for ln in gap.lines if len(ln.get_xdata()) == 2]
    assert ([3, 6], [-0.5, 0.0]) in drawn and gap.get_ylabel() == "PtR − RtP (95% CI)"
    bars = [seg for c in gap.collections for seg in c.get_segments()]
    ends = sorted(round(float(y), 6) for seg in bars for y in (seg[0][1], seg[1][1]))
    assert ends == [-0.8, -0.2, -0.2, 0.2]
    (ax,) = plot_divergence(div, 2, {"smallest": 0.88, "full": 0.98}).axes
    lines = [ln for ln in ax.lines if len(ln.get_xdata())]
    # both readings: disjoint (solid) and non-identical (dashed), each a mean over the seeds
    assert [(list(ln.get_xdata()), list(ln.get_ydata())) for ln in lines] == [
        ([3, 6], [0.0, 0.5]), ([3, 6], [0.5, 1.0]), ([3, 6], [0.88, 0.98])]
    assert lines[0].get_linestyle() != lines[1].get_linestyle()
    # the paper's two values: one legend entry, not two identical stars
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert lines[2].get_label() == "paper (smallest and full registry)" and labels.count(labels[-1]) == 1


def test_divergence_ablation_full_design_on_hand_matrices():
    """The whole index (design ``full``): recalls and disjointness worked out by hand as above."""
    from toolbench_lib.analysis.ablations import divergence_ablation

    cache, queries, _ = _hand_cache()
    table, _ = divergence_ablation(cache, queries, size=3, seeds=[0], k=2)
    full = table[table["design"] == "full"].iloc[0]
    assert (full["rtp_recall"], full["ptr_recall"], full["no_overlap_share"]) == (0.25, 0.5, 0.5)
    assert full["size"] == 6 and full["n_queries"] == 2
    # own_gt over three APIs: q1 keeps its two candidates (columns 0, 2), q2 its one in the index (column 4),
    # so the ground-truth share is (2/3 + 1/3) / 2; RtP ranks column 0 first for q1 in every draw.
    own = table[table["design"] == "own_gt"].iloc[0]
    assert own["gt_share"] == pytest.approx(0.5) and own["rtp_recall"] >= 0.25


# -- exactness against the stored study on the registry slice ------------------------------------------


@pytest.fixture(scope="module")
def slice_study(slice_setup):
    return run_study(slice_setup, RulesBackend(), StudySettings(runs=2, plan_limit=0), progress=False)


@pytest.fixture(scope="module")
def slice_cache(slice_setup, slice_study):
    return query_similarities(slice_setup, slice_study)


@pytest.mark.parametrize(("method", "run"), [("rtp", 0), ("rtp", 1), ("ptr", 0), ("ptr", 1)])
def test_cached_topk_equals_the_stored_merged_rankings(slice_cache, slice_study, method, run):
    depth = int(slice_study.provenance["settings"]["depth"])
    matrix = slice_cache.rtp if method == "rtp" else slice_cache.ptr[run]
    pos, scores = topk_columns(matrix, np.arange(slice_cache.n_columns), depth)
    rows = slice_cache.rows[pos]
    h = slice_study.rankings
    stored = h[(h["method"] == method) & (h["run"] == run)].sort_values("rank")
    by_q = {q: g for q, g in stored.groupby("qkey")}
    assert len(by_q) == len(slice_cache.qkeys)
    for i, q in enumerate(slice_cache.qkeys):
        assert set(by_q[q]["row"]) == set(rows[i].tolist()), q
        np.testing.assert_allclose(by_q[q]["score"].to_numpy(), scores[i], atol=1e-4)


def test_full_index_scale_row_equals_the_study_metrics(slice_cache, slice_study, slice_setup):
    scale, *_ = scale_study(slice_cache, slice_study.queries, slice_setup.ds.registry, [None], [0], k=5,
                           progress=False)
    pq = per_query_runs(slice_study, 5).groupby(["subset", "method"])["recall"].mean()
    for _, row in scale.iterrows():
        canonical = {"G1": "G1_instruction", "G2": "G2_category_original", "G3": "G3_instruction_original"}
        assert row["recall"] == pytest.approx(pq[(canonical[row["subset"]], row["method"])], abs=1e-9)
        assert row["size"] == len(slice_setup.index)


def test_slice_sub_registries_are_drawn_from_the_index_rows(slice_cache, slice_study, slice_setup):
    from toolbench_lib.analysis.scale import gt_column_sets

    scale, div, _ = scale_study(slice_cache, slice_study.queries, slice_setup.ds.registry, [600], [0, 1], k=5,
                             progress=False)
    assert (scale["size"] == 600).all() and len(div) == 3 * 2
    # The sampled columns are index columns, and each set's ground truth sits in its sub-registry:
    # a sub-registry that keeps every ground-truth API can only raise RtP's recall over the full index.
    full, *_ = scale_study(slice_cache, slice_study.queries, slice_setup.ds.registry, [None], [0], k=20,
                          progress=False)
    small, *_ = scale_study(slice_cache, slice_study.queries, slice_setup.ds.registry, [600], [0], k=20,
                           progress=False)
    for method in ("rtp", "ptr"):
        a = full[full["method"] == method].set_index("subset")["recall"]
        b = small[small["method"] == method].set_index("subset")["recall"]
        assert (b >= a.reindex(b.index) - 1e-12).all()
    gt = gt_column_sets(slice_cache, slice_study.queries, "candidates")
    assert all(min(g) >= 0 for g in gt)  # the slice holds every candidate API of its queries


def test_similarity_matrices_are_stored_and_read_back(slice_setup, slice_study, slice_cache, tmp_path):
    first = query_similarities(slice_setup, slice_study, cache_dir=tmp_path)
    assert len(list(tmp_path.glob("*.npy"))) == 3  # RtP and two PtR runs
    np.testing.assert_array_equal(first.rtp, slice_cache.rtp)

    class NoEncoding:
        """The setup with an encoder that must not be called: everything comes from disk."""

        ds, index, embedder = slice_setup.ds, slice_setup.index, slice_setup.embedder

        def encode(self, texts):
            raise AssertionError("re-encoded despite the stored matrices")

    again = query_similarities(NoEncoding(), slice_study, cache_dir=tmp_path)
    np.testing.assert_array_equal(again.ptr[1], slice_cache.ptr[1])
    assert again.rtp.dtype == np.float32
    assert again.rtp.shape == (len(slice_study.queries), len(slice_setup.index))
