"""Teaching material on a hand-made study whose picks are worked out by hand below.

k = 2; rankings of RtP (stored once) and PtR (runs 0 and 1), recall@2 against the candidates:

    query      ground truth   RtP       PtR run 0   PtR run 1   recall RtP / PtR0 / PtR1
    G1:a       a1 a2          x y       a1 a2       x y         0   / 1   / 0
    G1:b       b1             x y       b1 x        b1 x        0   / 1   / 1
    G1:c       c1 c2          c1 x      x y         x y         0.5 / 0   / 0
    G1:d       d1             d1 x      x y         x y         1   / 0   / 0
    G2:e       e1 e2 e3       x y       x y         x y         0   / 0   / 0
    G1:f       f1 f2 f3       x y       x y         x y         0   / 0   / 0
    G1:0       (none)         x y       x y         x y         no ground truth: never picked
    G1:h       h1             x h1      h1 x        h1 x        1   / 1   / 1

Run 0: PtR's largest win is a tie of a and b at +1, a has the larger ground truth -> a. RtP's largest
win is d (-1 beats c's -0.5). Both miss: e and f (0 and 0 with 3 APIs each), tie broken by the first key:
``G1_instruction:f`` < ``G2_category_original:e`` -> f, although e comes first in the table. Run 1: a ties,
so PtR's largest win is b.
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from toolbench_lib.report.glossary import GLOSSARY, TERMS_MORE, glossary  # noqa: E402
from toolbench_lib.report.teaching import (  # noqa: E402
    FAMILY_LINES,
    HIT,
    paper_examples_markdown,
    pick_worked_queries,
    pipeline_figure,
    teaching_material,
    worked_examples,  # noqa: E402
    worked_query,
    worked_query_markdown,
)
from toolbench_lib.report.write import TEACHING_FILE, write_report  # noqa: E402
from toolbench_lib.study.experiment import ExperimentConfig  # noqa: E402
from toolbench_lib.study.stored import StudyResult  # noqa: E402

from .hand_tables import HIT_COLUMNS, study_of_hits  # noqa: E402

G1, G2 = "G1_instruction", "G2_category_original"
K = 2
# qkey suffix: (subset, ground truth, RtP, PtR run 0, PtR run 1)
QUERIES = {
    "e": (G2, "e1 e2 e3", "x y", "x y", "x y"),
    "a": (G1, "a1 a2", "x y", "a1 a2", "x y"),
    "b": (G1, "b1", "x y", "b1 x", "b1 x"),
    "c": (G1, "c1 c2", "c1 x", "x y", "x y"),
    "d": (G1, "d1", "d1 x", "x y", "x y"),
    "f": (G1, "f1 f2 f3", "x y", "x y", "x y"),
    "0": (G1, "", "x y", "x y", "x y"),
    "h": (G1, "h1", "x h1", "h1 x", "h1 x"),
}
STUBS = {"a": [("Get A One", "first need"), ("Get A Two", "")]}


def qkey(q: str) -> str:
    return f"{QUERIES[q][0]}:{q}"


def make_study(order: list[str] | None = None) -> StudyResult:
    order = order or list(QUERIES)
    queries = pd.DataFrame([{"qkey": qkey(q), "subset": QUERIES[q][0], "query_id": q,
                             "query": f"the query | {q}", "candidates": QUERIES[q][1].split(),
                             "relevant": QUERIES[q][1].split()[:1]} for q in order])
    hits = []
    for q in order:
        _, _, rtp, ptr0, ptr1 = QUERIES[q]
        for method, run, ranking in (("rtp", -1, rtp), ("ptr", 0, ptr0), ("ptr", 1, ptr1)):
            ids = ranking.split() + ["pad1", "pad2"]
            hits += [(qkey(q), method, run, -1, r, r, a, 1 - r / 10) for r, a in enumerate(ids, 1)]
    hits = pd.DataFrame(hits, columns=HIT_COLUMNS)
    stubs = pd.DataFrame([{"qkey": qkey(q), "run": run, "stub_idx": i, "name": n, "reasoning": r,
                           "fell_back": False}
                          for q, rows in STUBS.items() for run in (0, 1) for i, (n, r) in enumerate(rows)])
    prov = {"settings": {"k": K, "runs": 2, "methods": ["rtp", "ptr"]}}
    return study_of_hits(queries, stubs, hits, pd.DataFrame(), pd.DataFrame(), prov)


# --------------------------------------------------------------------------- the picks


def test_picks_follow_the_rules_and_tie_breaks():
    picks = pick_worked_queries(make_study(), k=K).set_index("role")
    assert list(picks.index) == ["ptr_win", "rtp_win", "both_miss"]
    assert picks.loc["ptr_win", "qkey"] == qkey("a")  # ties with b at +1; two APIs against one
    assert picks.loc["rtp_win", "qkey"] == qkey("d")
    assert picks.loc["both_miss", "qkey"] == qkey("f")  # ties with e (3 APIs each); the first key
    assert picks.loc["ptr_win", ["rtp_recall", "ptr_recall", "gap"]].tolist() == pytest.approx([0, 1, 1])
    assert picks.loc["rtp_win", ["rtp_recall", "ptr_recall", "gap"]].tolist() == pytest.approx([1, 0, -1])
    assert picks.loc["both_miss", "n_gt"] == 3 and picks.loc["ptr_win", "n_gt"] == 2
    assert "largest recall@2 gain" in picks.loc["ptr_win", "rule"]


def test_picks_do_not_depend_on_the_table_order_and_follow_the_run():
    shuffled = make_study(["h", "0", "f", "d", "c", "b", "a", "e"])
    assert pick_worked_queries(shuffled, k=K)["qkey"].tolist() == [qkey("a"), qkey("d"), qkey("f")]
    assert pick_worked_queries(make_study(), k=K, run=1)["qkey"].tolist() == [qkey("b"), qkey("d"), qkey("f")]


def test_a_role_no_query_fills_says_so():
    study = make_study(["c", "d", "h"])  # RtP wins or ties everywhere; nobody misses everything
    picks = pick_worked_queries(study, k=K).set_index("role")
    assert picks.loc["ptr_win", "qkey"] is None and picks.loc["both_miss", "qkey"] is None
    assert picks.loc["rtp_win", "qkey"] == qkey("d")
    from toolbench_lib.report.teaching import worked_queries_markdown

    text = "\n".join(worked_queries_markdown(study, k=K))
    assert "No query here is the query with PtR's largest recall@2 gain over RtP." in text
    assert "No query here is a query where neither method finds" in text


# --------------------------------------------------------------------------- one worked query


def test_worked_query_shows_query_stubs_rankings_and_ground_truth():
    wq = worked_query(make_study(), qkey("a"), k=K)
    assert wq.rtp == ["x", "y"] and wq.ptr == ["a1", "a2"] and wq.ground_truth == ["a1", "a2"]
    assert (wq.recall("rtp"), wq.recall("ptr")) == (0.0, 1.0)
    assert wq.stubs == [("Get A One", "first need"), ("Get A Two", "")]
    lines = worked_query_markdown(wq, {"a1": "Tool A / one (Cat)"})
    text = "\n".join(lines)
    assert "> the query \\| a" in text  # a pipe in the text cannot break the Markdown
    assert "1. `Get A One`: first need" in text and "2. `Get A Two`" in text
    assert "| rank | RtP (recall@2 0.000) | PtR (recall@2 1.000) |" in text
    rows = [line for line in lines if line.startswith("| 1 ") or line.startswith("| 2 ")]
    assert rows == [f"| 1 | `x` | {HIT} Tool A / one (Cat) |", f"| 2 | `y` | {HIT} `a2` |"]
    # The ground truth names the id beside its label, and who found each API.
    assert "- Tool A / one (Cat) `a1`: found by PtR" in lines and "- `a2`: found by PtR" in lines
    assert "RtP finds 0 and PtR 2 of the 2." in text
    # Hits are marked only where the ground truth is: one mark per found API, none on RtP's side.
    assert sum(line.count(HIT) for line in rows) == 2
    with pytest.raises(KeyError, match="not in this study"):
        worked_query(make_study(), "G1_instruction:zz", k=K)


def test_paper_examples_present_shown_the_others_explained():
    examples = [
        {"id": "ex_present", "quote": "“a query” \\to stub recall 1.0", "winner": "rtp", "ptr_recall": 0.0,
         "rtp_recall": 0.5, "qkey": qkey("d"), "description": "the d query"},
        {"id": "ex_elsewhere", "quote": "q", "winner": "ptr", "ptr_recall": 1.0, "rtp_recall": 0.0,
         "qkey": "G2_instruction:99"},
        {"id": "ex_absent", "quote": "q", "winner": "ptr", "ptr_recall": 1.0, "rtp_recall": 0.0, "qkey": None,
         "absent": "no such query in the data"},
    ]
    text = "\n".join(paper_examples_markdown(make_study(), k=K, examples=examples)[0])
    assert text.startswith("Of the paper's 3 Table 2 examples, 1 is among this run's queries as the same "
                           "task and APIs")
    assert "### `ex_present`" in text and "“a query” → stub recall 1.0" in text
    assert ("*This run:* RtP 1.000, PtR 0.000 (paper: RtP 0.5, PtR 0); leader here: RtP, the same "
            "leader") in text
    assert f"| 1 | {HIT} `d1` | `x` |" in text and "- `d1`: found by RtP" in text
    assert "- `ex_elsewhere`: `G2_instruction:99` is not in this study's sets (" in text
    assert "- `ex_absent`: not in the data: no such query in the data." in text
    named = "\n".join(paper_examples_markdown(make_study(), k=K, examples=examples,
                                               elsewhere={"G2_instruction:99": "x-validation"})[0])
    assert "G1_instruction); the study `x-validation` holds it.\n- `ex_absent`" in named


# --------------------------------------------------------------------------- the glossary


def test_glossary_holds_the_terms_the_report_uses():
    g = glossary(k=7, min_kappa=0.4)
    assert len(g) == len(GLOSSARY) + len(TERMS_MORE) and g["term"].is_unique
    text = " ".join(g["term"]).lower()
    for term in ("recall@k", "precision@k", "candidates", "relevant", "stub", "fidelity", "divergence",
                 "holm", "bootstrap", "pass rate", "kappa", "retriever family", "g1, g2, g3",
                 "intent-registry coupling", "design and unseen sets", "primary endpoint", "the goal"):
        assert term in text, term
    joined = " ".join(g["definition"])
    assert "k = 7" in joined and "Below 0.4" in joined and "{" not in joined
    # every cause label the scorecard can print is defined, with its kind
    from toolbench_lib.report.glossary import glossary_markdown
    from toolbench_lib.report.scorecard import load_causes

    shown = glossary_markdown(7, 0.4)
    for cid, cause in load_causes().items():  # a stand-in and a reading are named beside the kind
        assert f"- **`{cid}`** ({cause['kind']}" in shown, cid
        assert not cause.get("proxy") or f"({cause['kind']}, by a proxy: {cause['proxy']})" in shown, cid
    assert "(tested, a reading): the definition" in shown
    # Each "where" names modules that exist in the package.
    import importlib

    for where in g["where"]:
        for part in where.split(","):
            module = part.split("(")[0].strip()
            path = module.split(".")
            for cut in range(len(path), 0, -1):  # a module, or a module's attribute
                try:
                    mod = importlib.import_module("toolbench_lib." + ".".join(path[:cut]))
                except ModuleNotFoundError:
                    continue
                for attr in path[cut:]:
                    mod = getattr(mod, attr)
                break
            else:
                pytest.fail(f"{module} is not in the package")


# --------------------------------------------------------------------------- the diagram


def _extent(artist, renderer):
    return artist.get_window_extent(renderer)


def test_pipeline_diagram_boxes_texts_and_layout():
    fig = pipeline_figure(k=5, registry_size=46984, embedder="all-MiniLM-L6-v2")
    try:
        ax = fig.axes[0]
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        boxes = {p.get_gid(): p for p in ax.patches if isinstance(p, FancyBboxPatch)}
        arrows = {p.get_gid(): p for p in ax.patches if isinstance(p, FancyArrowPatch)}
        texts = [t for t in fig.findobj(Text) if t.get_text().strip() and t.get_visible()]
        by_gid = {t.get_gid(): t for t in texts if t.get_gid()}
        rtp = ["rtp:query", "rtp:embed", "rtp:topk", "rtp:planner", "rtp:plan"]
        ptr = ["ptr:query", "ptr:stubs", "ptr:stub0", "ptr:stub1", "ptr:stub2", "ptr:search", "ptr:topk",
               "ptr:planner", "ptr:plan"]
        assert set(rtp + ptr + ["index"]) <= set(boxes)
        # Each column flows top-down, RtP on the left, PtR on the right, the index between them.
        def y(g):
            return boxes[g].get_y()

        def x(g):
            return boxes[g].get_x() + boxes[g].get_width() / 2

        assert [y(g) for g in rtp] == sorted((y(g) for g in rtp), reverse=True)
        assert y("ptr:stubs") > y("ptr:stub0") > y("ptr:search") > y("ptr:topk") > y("ptr:planner")
        assert x("rtp:query") < x("index") < x("ptr:query")
        words = {g: by_gid[f"{g}:text"].get_text() for g in boxes}
        assert "no tools shown" in words["ptr:stubs"] and "top-5" in words["ptr:topk"]
        assert "max" in words["ptr:topk"] and "best similarity" in words["ptr:topk"]
        assert "top-5" in words["rtp:topk"] and "all-MiniLM-L6-v2" in words["rtp:embed"]
        assert "46,984 APIs" in words["index"] and all(line in words["index"] for line in FAMILY_LINES)
        assert by_gid["rtp:title"].get_text().startswith("RtP") and by_gid["ptr:title"].get_text().startswith(
            "PtR")
        # The retriever family plugs into both searches; stubs fan out and join again.
        assert {"index:rtp", "index:ptr", "ptr:fan0", "ptr:join2", "rtp:arrow3", "ptr:arrow3"} <= set(arrows)
        # Readable: every text inside its own box, no two texts overlap, and at a 1,000 px width every
        # letter is at least 10 px tall.
        for g, box in boxes.items():
            outer, inner = _extent(box, renderer), _extent(by_gid[f"{g}:text"], renderer)
            assert outer.x0 <= inner.x0 <= inner.x1 <= outer.x1, g
            assert outer.y0 <= inner.y0 <= inner.y1 <= outer.y1, g
        for a, b in combinations(texts, 2):
            assert not _extent(a, renderer).overlaps(_extent(b, renderer)), (a.get_text(), b.get_text())
        free = [t for t in texts if not str(t.get_gid()).endswith(":text")]  # titles, notes, arrow labels
        assert {"rtp:note", "index:ptr:label", "shared:note"} <= {t.get_gid() for t in free}
        for t, (g, box) in ((t, item) for t in free for item in boxes.items()):
            assert not _extent(t, renderer).overlaps(_extent(box, renderer)), (t.get_text(), g)
        width_px = fig.get_figwidth() * 120  # save_figure's dpi
        smallest = min(t.get_fontsize() for t in texts) * 120 / 72 * 1000 / width_px
        assert smallest >= 10, smallest
    finally:
        plt.close(fig)


# --------------------------------------------------------------------------- the written report


@pytest.fixture()
def cfg(tmp_path: Path) -> ExperimentConfig:
    cfg = ExperimentConfig(run_name="teaching_test", outputs_dir=str(tmp_path / "run"), k=K)
    cfg._fingerprint = "hand-made"  # the study key without a data folder (as get_study sets it)
    return cfg


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def test_report_has_the_glossary_after_the_claims_and_says_why_no_worked_query(cfg):
    text = write_report(cfg).read_text()
    assert text.index("## The question and the answer") < text.index("## Setup and data") \
        < text.index("## Glossary") < text.index("## Appendix A")
    glossary_text = _section(text, "## Glossary")
    for term in (*GLOSSARY, *TERMS_MORE):
        assert f"**{term.term}**" in glossary_text, term.term
    assert f"k = {K}" in glossary_text
    assert "**`ptr@bm25`**" not in glossary_text  # no table names it, so the glossary leaves it out
    teaching = (cfg.out_dir / TEACHING_FILE).read_text()
    assert "No worked queries: no stored study under `runs/` of this run." in teaching
    assert f"[`{TEACHING_FILE}`]({TEACHING_FILE})" in _section(text, "## Appendix D")


def test_report_shows_the_worked_queries_and_every_table2_example(cfg):
    make_study().save(cfg.study_dir)
    text = write_report(cfg).read_text()
    teaching = (cfg.out_dir / TEACHING_FILE).read_text()
    worked = _section(teaching, "## Worked queries")
    for title, q in (("### PtR's largest win", "a"), ("### RtP's largest win", "d"),
                     ("### Both miss everything", "f")):
        assert f"`{qkey(q)}`" in worked.split(title)[1].split("### ")[0], title
    assert "1. `Get A One`: first need" in worked and "- `f1`: missed by both" in worked
    examples = _section(teaching, "## The paper's Table 2 examples")
    everything = worked_examples(present_only=False)
    assert examples.count("\n- `") == len(everything)  # none is in the hand-made study: each says why
    for example in everything:
        assert f"- `{example['id']}`:" in examples
    stubs = _section(text, "## Stubs")
    assert "### The paper's Table 2 examples in this run" in stubs
    assert f"Of the paper's {len(everything)} Table 2 examples, 0 are among" in stubs
    assert "nan" not in (worked + examples).lower()


def test_an_example_another_study_of_the_run_holds_is_shown_from_it(cfg, tmp_path):
    """The paper's Greece example is a G2_instruction query: not in this study, shown in full from the study
    of the run's family that holds it (RtP finds 1 of its 2 APIs at k = 2, PtR none, as in the paper)."""
    make_study().save(cfg.study_dir)
    key = next(x["qkey"] for x in worked_examples(present_only=False) if x["id"] == "greece_energy_news")
    queries = pd.DataFrame([{"qkey": key, "subset": "G2_instruction", "query_id": "75279",
                             "query": "Greek news", "candidates": ["g1", "g2"], "relevant": ["g1"]}])
    hits = pd.DataFrame([(key, m, run, -1, r, r, a, 1 - r / 10) for m, run, ids in (
        ("rtp", -1, "g1 x"), ("ptr", 0, "x y"), ("ptr", 1, "x y")) for r, a in enumerate(ids.split(), 1)],
        columns=HIT_COLUMNS)
    prov = {"settings": {"k": K, "runs": 2, "methods": ["rtp", "ptr"]}}
    no_stubs = pd.DataFrame(columns=["qkey", "run", "stub_idx", "name", "reasoning", "fell_back"])
    study_of_hits(queries, no_stubs, hits, pd.DataFrame(), pd.DataFrame(), prov).save(
        tmp_path / f"{cfg.run_name}-g2-instruction-retrievers" / "runs" / "other")
    examples = "\n".join(teaching_material(cfg).examples)
    assert f"the study `{cfg.run_name}-g2-instruction-retrievers` holds it." in examples
    assert "are among this run's queries as the same task and APIs; 1 more from another study of the run, " \
           "below (recall@" in examples  # counted where the examples are counted
    shown = examples.split(f"From the study `{cfg.run_name}-g2-instruction-retrievers`:")[1]
    assert shown.lstrip().startswith("### `greece_energy_news`")
    assert "*This run:* RtP 0.500, PtR 0.000 (paper: RtP 0.5, PtR 0); leader here: RtP, the same" in shown


def test_teaching_material_of_a_damaged_study_says_so(cfg):
    make_study().save(cfg.study_dir)
    (cfg.study_dir / "rankings.parquet").write_bytes(b"not parquet")
    material = teaching_material(cfg)
    assert material.note.startswith("stored study") and "checksum" in material.note
    assert material.picks.empty and material.worked[0].startswith("No worked queries: stored study")
    assert "**recall@k**" in material.glossary


def test_a_printed_recall_is_possible_only_with_a_ground_truth_that_can_give_it():
    from toolbench_lib.report.teaching import possible
    assert possible(0.25, 4) and possible(0.25, 8) and not possible(0.25, 2) and not possible(0.25, 3)
    assert possible(0.33, 3) and possible(0.0, 1) and possible(0.4, 5)
    assert possible(1.0, 5) and not possible(1.0, 6)  # at most k = 5 hits
    assert not possible(0.5, 0)


def test_the_table_2_recalls_say_which_ground_truth_they_could_come_from():
    from toolbench_lib.report.against import POSSIBLE, possible_line
    t = pd.DataFrame({POSSIBLE: ["both"] * 5 + ["candidates"],
                      "match": ["same task"] * 5 + ["loose"]})
    assert possible_line(t) == (
        "Its Table 2 recalls hardly tell the two apart: both of an example's recalls could come from this "
        "data's `candidates` in 6 and from `relevant` in 5 of its 6 examples here (only `candidates` fits 1, "
        "a loose match).")
    more = t.assign(**{POSSIBLE: ["candidates"] * 3 + ["relevant", "neither", "both"],
                       "match": "same task"})
    assert possible_line(more).startswith("Its Table 2 recalls fit `candidates` better: ")
    assert possible_line(more).endswith("(only `candidates` fits 3; only `relevant` fits 1).")
    assert possible_line(None) == "" == possible_line(t.drop(columns=POSSIBLE))
