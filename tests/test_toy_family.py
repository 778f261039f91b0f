"""A retriever family added from outside the package (this file is the only one it touches): one
``register_family`` call, and RtP and PtR with it run through the study, the evaluation and a fused spec on
the real slice, its own scores kept."""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np
import pytest

from toolbench_lib.eval.evaluation import evaluate, recall_at
from toolbench_lib.llm.rules import RulesBackend
from toolbench_lib.retrieval import families, retrievers
from toolbench_lib.retrieval.fusion_specs import FusionSpec, rankings_inputs
from toolbench_lib.retrieval.rankings import TextHits
from toolbench_lib.retrieval.retrievers import register_family
from toolbench_lib.study.result import StudySettings, run_study


def _words(text: str) -> set[str]:
    return set(re.findall(r"[a-z]{3,}", text.lower()))


class WordOverlap:
    """The toy: an API's score is the number of the text's words (three letters or more) in its doc."""

    def __init__(self, setup) -> None:
        self.rows = np.asarray(setup.index.rows, dtype=np.int64)
        self.docs = [_words(setup.ds.texts[int(r)]) for r in self.rows]

    def search_texts(self, texts: Sequence[str], k: int) -> list[TextHits]:
        out = []
        for text in texts:
            words = _words(text)
            scores = np.array([len(words & d) for d in self.docs], dtype=np.float32)
            top = np.lexsort((self.rows, -scores))[:k]
            out.append(TextHits(self.rows[top], scores[top]))
        return out


@pytest.fixture()
def toy():
    """The family registered for one test, and the tables it changed restored afterwards."""
    saved = dict(families.FAMILIES), dict(retrievers.RETRIEVERS)
    yield register_family(families.Family("toy", WordOverlap, lambda s: "word overlap with the API's doc"))
    for table, before in zip((families.FAMILIES, retrievers.RETRIEVERS), saved, strict=True):
        table.clear()
        table.update(before)


def test_a_toy_family_runs_through_study_evaluation_and_fusion(toy, slice_setup) -> None:
    settings = StudySettings(runs=1, plan_limit=0, methods=("rtp@toy", "ptr@toy", "rtp"))
    result = run_study(slice_setup, RulesBackend(), settings, progress=False)
    assert result.provenance["retrievers"]["toy"] == "word overlap with the API's doc"
    final = result.rankings[result.rankings["method"] == "rtp@toy"]
    # its own scores, best first, are what the study stores
    query = result.queries.iloc[0]
    mine = final[final["qkey"] == query["qkey"]].sort_values("rank")
    words = _words(query["query"])
    expected = [len(words & _words(slice_setup.ds.texts[int(r)])) for r in mine["row"]]
    assert mine["score"].tolist() == pytest.approx(expected) and expected == sorted(expected, reverse=True)
    assert expected[0] > 0
    # the one evaluation scores it as a recount of its lists does
    ev = evaluate(result)
    lists = [mine_q.sort_values("rank")["api_id"].tolist() for _, mine_q in final.groupby("qkey", sort=False)]
    order = list(final.drop_duplicates("qkey")["qkey"])
    gt = [set(g) for g in result.queries.set_index("qkey").loc[order, "candidates"]]
    scores = ev.scores(5, "candidates", ["recall"])
    got = scores[scores["method"] == "rtp@toy"].set_index("qkey").loc[order, "recall"].to_numpy()
    assert got == pytest.approx(recall_at(lists, gt, 5))
    assert set(scores["method"]) == {"rtp@toy", "ptr@toy", "rtp"}
    # a fused spec reads it as a component, like any family
    inputs = rankings_inputs({m: result.retrieved(m) for m in ("rtp@toy", "rtp")}, result.queries,
                             components=("q.toy", "q.dense"))
    fused = FusionSpec(("q.toy", "q.dense"), "rrf", None).ranked(inputs, 5)
    assert len(fused) == len(result.queries) and all(len(r) == 5 for r in fused.values())


def test_a_family_that_is_not_registered_is_refused(slice_setup) -> None:
    with pytest.raises(ValueError, match="unknown retriever 'toy'"):
        slice_setup.searcher("toy")
