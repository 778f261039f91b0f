"""RtP end to end with the real offline model and FAISS on a 2,500-API registry slice."""

import numpy as np
import pandas as pd
import pytest

from toolbench_lib.analysis.summary import summary_json
from toolbench_lib.data.dataset import load_dataset
from toolbench_lib.retrieval.embedding import embed_cached
from toolbench_lib.retrieval.index import registry_vectors
from toolbench_lib.study.result import StudySettings, run_study

from .conftest import SLICE_APIS, SLICE_QUERIES


def test_slice_keeps_ground_truth(slice_setup):
    s = slice_setup
    assert len(s.index) == SLICE_APIS
    in_index = {s.api_ids[r] for r in s.index.rows}
    gt = {a for ids in s.queries["candidates"] for a in ids}
    assert gt <= in_index
    assert len(s.queries) == 3 * SLICE_QUERIES


def rtp_study(setup, depth: int):
    """Retrieval-only RtP: the study pipeline without an LLM and without plans."""
    return run_study(setup, None, StudySettings(k=depth, depth=depth, runs=1, plan_limit=0, methods=("rtp",)),
                     progress=False)


def test_rtp_on_slice(slice_setup):
    study = rtp_study(slice_setup, 5)
    ranking = study.ranking("rtp")
    assert all(len(v) == 5 for v in ranking.values()) and len(ranking) == len(slice_setup.queries)
    scores = study.scored_ranking("rtp")
    assert all(list(s.values()) == sorted(s.values(), reverse=True) for s in scores.values())
    res = summary_json(study, ["G1", "G2", "G3"], 5, "candidates")
    assert res["model"] == "all-MiniLM-L6-v2" and res["registry_size"] == SLICE_APIS
    for name in ("G1", "G2", "G3"):
        assert res["subsets"][name]["n_queries"] == SLICE_QUERIES
    # Semantic retrieval on a slice that holds the ground truth must beat chance by far:
    # chance recall@5 is about 5 / 2500.
    assert res["subsets"]["G1"]["recall"] > 0.2
    strict = summary_json(study, ["G1"], 5, "relevant")
    assert strict["gt"] == "relevant"
    assert strict["subsets"]["G1"]["recall"] != res["subsets"]["G1"]["recall"]
    # ranx's scores equal the plain set definitions (counted here: hits in the top 5 over |gt| and over 5).
    for gt in ("candidates", "relevant"):
        hits = {key: (len(set(ranking.get(key, [])[:5]) & set(rel)), len(rel))
                for key, rel in study.qrels(gt).items()}
        oracle = pd.DataFrame([{"qkey": key, "recall": h / n if n else 0.0, "precision": h / 5}
                               for key, (h, n) in hits.items()])
        q = study.queries
        for name in ("G1", "G2", "G3"):
            keys = set(q.loc[q["subset"] == {"G1": "G1_instruction", "G2": "G2_category_original",
                                             "G3": "G3_instruction_original"}[name], "qkey"])
            want = oracle[oracle["qkey"].isin(keys)][["recall", "precision"]].mean()
            got = summary_json(study, [name], 5, gt)["subsets"][name]
            assert got["recall"] == pytest.approx(want["recall"], abs=1e-12)
            assert got["precision"] == pytest.approx(want["precision"], abs=1e-12)


def test_query_scores_are_cosines(slice_setup):
    final = rtp_study(slice_setup, 3).rankings
    top = final[final["rank"] == 1].iloc[0]
    query = slice_setup.queries.set_index("qkey").loc[top["qkey"], "query"]
    qv = slice_setup.embedder.encode([query])[0]
    dv = slice_setup.embedder.encode([slice_setup.ds.texts[top["row"]]])[0]
    assert float(qv @ dv) == pytest.approx(top["score"], abs=1e-3)


def test_sub_registry_reuses_cached_vectors(mini_toolbench, tmp_path, embedder):
    """With the full registry embedded, a sub-registry takes its rows and embeds nothing."""
    from .test_embedding import Counting

    ds = load_dataset(mini_toolbench, processed_dir=tmp_path / "processed")
    counting = Counting(embedder)
    full = embed_cached(counting, ds.texts, "registry", tmp_path / "emb", progress=False)
    assert counting.encoded == len(ds.texts)
    rows = np.array([1, 3, 4])
    sub = registry_vectors(ds, counting, rows, cache_dir=tmp_path / "emb")
    assert counting.encoded == len(ds.texts)
    assert np.array_equal(sub, full[rows])


def test_processed_cache_is_rebuilt_when_sources_change(mini_toolbench, tmp_path):
    a = load_dataset(mini_toolbench, processed_dir=tmp_path)
    assert a.stats["malformed_files"] == 2
    b = load_dataset(mini_toolbench, processed_dir=tmp_path)
    assert b.fingerprint == a.fingerprint and len(b.registry) == len(a.registry)
    (mini_toolbench / "toolenv/tools/Finance/broken.json").write_text(
        '{"tool_name": "Fixed", "api_list": [{"name": "Now Valid"}]}')
    c = load_dataset(mini_toolbench, processed_dir=tmp_path)
    assert c.fingerprint != a.fingerprint
    assert len(c.registry) == len(a.registry) + 1 and c.stats["malformed_files"] == 1
