"""The reading-group session that opens teaching.md: a plan of 90 minutes over the report's sections, and
discussion questions whose numbers come from the run's saved tables (hand-written below) and the paper's
reference numbers; a table the run did not save is said in one line, never replaced by a number."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from toolbench_lib.analysis.references import paper_text_collapsed, paper_value
from toolbench_lib.data.markdown import anchor
from toolbench_lib.report.questions import QUOTE_BRAND, QUOTE_G2, QUOTE_GT, QUOTE_RETRIEVER
from toolbench_lib.report.session import (
    NOTES_HEADING,
    QUESTIONS_HEADING,
    SESSION_HEADING,
    plan_lines,
    session_lines,
)
from toolbench_lib.report.write import TEACHING_FILE, write_report
from toolbench_lib.study.experiment import ExperimentConfig

PAPER_TEXT = Path(__file__).resolve().parents[1] / ".." / "shared" / "paper" / "plan-or-retrieve-first.txt"
MINUTES = re.compile(r"(?m)^\d+\. \*\*(\d+) min\*\*")


def _recall_rows() -> list[dict]:
    values = {("G1", "rtp"): (0.351, 0.512), ("G1", "ptr"): (0.264, 0.433), ("G2", "rtp"): (0.131, 0.221),
              ("G2", "ptr"): (0.177, 0.259), ("G3", "rtp"): (0.161, 0.245), ("G3", "ptr"): (0.173, 0.268)}
    return [{"subset": s, "method": m, "gt": gt, "recall_mean": v[i]}
            for (s, m), v in values.items() for i, gt in enumerate(("candidates", "relevant"))] + \
        [{"subset": "G1", "method": "ptr@bm25", "gt": "candidates", "recall_mean": 0.901}]  # not RtP or PtR


def _endpoint(retriever: str, numbers: dict) -> list[dict]:
    return [{"retriever": retriever, "subset": s, "rtp": r, "ptr": p, "n_runs": 4, "n_queries": n,
             "n_groups": round(0.23 * n),
             "p_holm": ph, "p": ph / 2, "p_runs_robustness": pr, "diff": p - r, "ci_low": p - r - 0.02,
             "ci_high": p - r + 0.02, "significant": ph < 0.05} for s, (r, p, n, ph, pr) in numbers.items()]


def hand_tables() -> dict[str, pd.DataFrame]:
    """The tables the questions read, each value written once so that a question shows where it came from."""
    bm25 = {"G1_instruction": (0.455, 0.391, 200, 0.0312, 0.0004),
            "G2_category_original": (0.201, 0.236, 200, 0.0815, 0.0123)}
    dense = {"G1_instruction": (0.352, 0.265, 200, 0.002, 0.01),
             "G2_category_original": (0.132, 0.178, 200, 0.04, 0.02),
             "G3_instruction_original": (0.161, 0.173, 100, 0.5, 0.2)}
    return {
        "main_results": pd.DataFrame(_recall_rows()),
        "paired_tests": pd.DataFrame([
            {"subset": "G1", "gt": "candidates", "metric": "recall", "diff": -0.061, "ci_low": -0.102,
             "ci_high": -0.024},
            {"subset": "G1", "gt": "relevant", "metric": "recall", "diff": -0.555, "ci_low": -0.6,
             "ci_high": -0.5}]),
        "judge_validity": pd.DataFrame([
            {"subset": s, "method": m, "objective_pass_rate": v, "plans": "all"}
            for (s, m), v in {("G1", "rtp"): 0.412, ("G1", "ptr"): 0.455, ("G2", "rtp"): 0.531,
                              ("G2", "ptr"): 0.655, ("G3", "rtp"): 0.498, ("G3", "ptr"): 0.507}.items()]
            + [{"subset": "G1", "method": "rtp", "objective_pass_rate": 0.999, "plans": "same"}]),
        "primary_endpoint": pd.DataFrame(_endpoint("dense", dense)),
        "primary_endpoint_g2_instruction": pd.DataFrame(_endpoint("dense", {
            "G2_instruction": (0.174, 0.184, 106, 0.5, 0.3)})),
        "g2_sets": pd.DataFrame([{"subset": s, "n_queries": n, "gt_size": x, "gt_size_lo": x - 0.3,
                                  "gt_size_hi": x + 0.3} for s, n, x in (("G2_category_original", 199, 5.99),
                                                                          ("G2_instruction", 106, 6.51))]),
        "primary_endpoint_families": pd.DataFrame(_endpoint("bm25", bm25) + _endpoint("dense", {
            "G1_instruction": (0.777, 0.778, 200, 0.5, 0.5)})),  # the main study's dense rows come first
        "stub_stats": pd.DataFrame([
            {"subset": "G1", "gt": "candidates", "stub_hit_share": 0.287, "stub_hit_share_topk": 0.455},
            {"subset": "G1", "gt": "relevant", "stub_hit_share": 0.812, "stub_hit_share_topk": 0.9},
            {"subset": "G3", "gt": "candidates", "stub_hit_share": 0.193, "stub_hit_share_topk": 0.301}]),
        "ablation_decomposition": pd.DataFrame([
            {"subset": "G1", "decomposer": "llm", "ptr_recall": 0.264, "rtp_recall": 0.351},
            {"subset": "G1", "decomposer": "rules", "ptr_recall": 0.219, "rtp_recall": 0.351}]),
        "ablation_stub_text": pd.DataFrame([
            {"subset": g, "variant": v, "recall": x} for g, v, x in (
                ("G1", "query", 0.35), ("G1", "name+reasoning", 0.28), ("G1", "name+reasoning-brand", 0.14),
                ("G1", "name", 0.2), ("G3", "query", 0.17), ("G3", "name+reasoning", 0.2),
                ("G3", "name+reasoning-brand", 0.05), ("G1", "query-brand", 0.22),
                ("G3", "query-brand", 0.06))]),
        "ablation_query_coupling": pd.DataFrame([{"subset": "G1", "diff": -0.072, "diff_nobrand": -0.062,
                                                  "diff_nobrand_lo": -0.107, "diff_nobrand_hi": -0.018}]),
    }


@pytest.fixture()
def cfg(tmp_path: Path) -> ExperimentConfig:
    cfg = ExperimentConfig(run_name="session_test", outputs_dir=str(tmp_path / "run"), k=5)
    cfg._fingerprint = "hand-made"  # the study key without a data folder (as get_study sets it)
    return cfg


def save(cfg: ExperimentConfig, tables: dict[str, pd.DataFrame]) -> None:
    cfg.tables_dir.mkdir(parents=True, exist_ok=True)
    for name, table in tables.items():
        table.to_csv(cfg.tables_dir / f"{name}.csv", index=False)


def questions(cfg: ExperimentConfig) -> dict[str, str]:
    """``{title: text}`` of every discussion question, for a report of the plan's headings."""
    text = "\n".join(session_lines(cfg, "## The question and the answer\n"))
    blocks = text.split(f"## {QUESTIONS_HEADING}")[1].split(f"## {NOTES_HEADING}")[0].split("\n### ")[1:]
    return {b.split("\n")[0].split(". ", 1)[1]: b for b in blocks}


def run_line(question: str) -> str:
    return next(line for line in question.splitlines() if line.startswith("**This run.**"))


def test_the_plan_takes_90_minutes_and_links_the_reports_headings(cfg):
    report = write_report(cfg).read_text(encoding="utf-8")
    teaching = (cfg.out_dir / TEACHING_FILE).read_text(encoding="utf-8")
    plan = teaching.split(f"## {SESSION_HEADING}")[1].split(f"## {QUESTIONS_HEADING}")[0]
    assert sum(map(int, MINUTES.findall(plan))) == 90
    assert "below, 1 to 4, about 5 minutes each (the others for after the session)." in plan
    assert "10. **5 min**: what do we believe now" in plan  # a wrap-up closes the session
    assert "1. **5 min**: [The question and the answer" in plan  # the pre-read opens the session
    assert "2. **10 min**: [Setup and data" in plan and "5. **10 min**: [Stubs and Intent-Registry" in plan
    block = lambda n: next(line for line in plan.splitlines() if line.startswith(f"{n}. "))  # noqa: E731
    # seven presenter blocks, two of them taking two neighbouring sections each
    assert block(3).startswith("3. **10 min**: [Which architecture") and block(4).startswith(
        "4. **7 min**: [A larger retrieval")  # one question each
    assert block(7).startswith("7. **10 min**: [Trajectories") and "and [Cost and routing" in block(7)
    assert "6. **6 min**: [Registry scale" in plan and "8. **7 min**: [Where the paper disagrees" in plan
    # the model answers are the chair's: in the facilitator notes, not beside the questions members read
    assert "model answer" not in block(3).lower()
    notes = teaching.split(f"## {NOTES_HEADING}")[1]
    assert "The plan's questions, block by block:" in notes
    assert re.search(r"(?m)^- \*\*Block 1\.\*\* \*Which half of the paper's claim can this run test, and "
                     r"which not\?\* \S",
                     notes) and "model answer" not in block(1).lower()
    assert "Outside the plan, for members who want more: [Retriever families" in plan
    assert "Total: 90 minutes." in plan
    targets = re.findall(r"\]\(report\.md#([^)]+)\)", plan)
    headings = {anchor(h) for h in re.findall(r"(?m)^## (.+)$", report)}
    assert len(targets) >= 8 and set(targets) <= headings
    own = {anchor(h) for h in re.findall(r"(?m)^##+ (.+)$", teaching)}
    assert set(re.findall(r"\]\(#([^)]+)\)", plan)) <= own  # the questions, worked queries and examples
    assert teaching.index(SESSION_HEADING) < teaching.index(QUESTIONS_HEADING) \
        < teaching.index("## Worked queries") < teaching.index("## The paper's Table 2 examples")
    front = report.split("## Setup and data")[0]
    assert f"]({TEACHING_FILE}#{anchor(SESSION_HEADING)})" in front


def test_the_plan_names_each_sections_figures_and_says_when_a_section_is_missing():
    report = ("## The question and the answer\n\n*Figure R1.* a\n\n## Setup and data (§3)\n\n*Figure R2.* b"
              "\n*Figure R3.* c\n")
    plan = "\n".join(plan_lines(report)[0])
    assert "[The question and the answer](report.md#the-question-and-the-answer), figure R1:" in plan
    assert "[Setup and data (§3)](report.md#setup-and-data-3), figures R2, R3:" in plan
    assert "Registry scale (not in this run's report)" in plan
    assert sum(map(int, MINUTES.findall(plan))) == 90
    assert "below, 1 to 4, about 5 minutes each (the others for after the session)." in plan
    assert "Outside the plan" not in plan  # none of its sections is in this report
    more = "\n".join(plan_lines(report + "\n## Retriever families\n\nwords\n")[0])
    assert ("Outside the plan, for members who want more: [Retriever families]"
            "(report.md#retriever-families).") in more
    # the figure map: each figure's file and the paper's figure its section's heading names, whether or
    # not the plan takes its section
    mapped = plan_lines(report + "\n## Which architecture finds more tools (§4.1, Figure 2)\n\n"
                                 "![Recall](figures/figure2.png)\n\n*Figure R4.* d e f\n"
                                 "## Trajectories (§4.3, Figure 4)\n\n![Plans](figures/figure4.png)\n\n"
                                 "*Figure R5.* g\n")[0]
    assert "| R4 | `figures/figure2.png` | Figure 2 |" in mapped and "| R2 | `n/a` | - |" in mapped
    assert "| R5 | `figures/figure4.png` | Figure 4 |" in mapped
    later = plan_lines(report + "\n## A larger retrieval budget (§4.1 Table 1, §4.2)\n\n*Figure R4.* g\n"
                                "## Retriever families\n\n*Figure R5.* h\n")[0]
    # the map goes by figure number, whichever block of the plan takes its section
    assert later.index("| R4 | `n/a` | - |") < later.index("| R5 | `n/a` | - |")
    # the pre-reading: the words of the answer, the main claim and the paper's disagreements (here the
    # answer's caption of three words)
    assert plan.startswith("Before the session, each member reads the answer in plain words above, the "
                           "paper and [The question and the answer](report.md#the-question-and-the-answer) "
                           "(3 words with their tables, markup left out, about 0 minutes at 100 words a "
                           "minute, a pace for text dense with tables"
                           + ("; the paper adds about " if paper_text_collapsed() else ")"))
    # the scorecard rows a presenter walks through: those of the block's list its section shows
    rows = plan_lines(report + "\n## Which architecture finds more tools (§4.1, Figure 2)\n\n"
                               "| g2_ptr_recall | G2 | 0.188 |\n| g2_budget_rtp10_vs_ptr5 | G2 | 0 |\n")[0]
    block = next(line for line in rows if line.startswith("3. "))
    assert "(Figure R4; pass rates and precision are for later); rows `g2_ptr_recall`. *Ask*" in block
    assert "g1_ptr_recall" not in block  # named by the plan, not in this section
    full = plan_lines(report + "\n## Which architecture finds more tools (§4.1, Figure 2)\n\n"
                               "| g2_ptr_recall | G2 | 0.188 | 0.121 | \\[0.099, 0.143\\] | differs (below) "
                               "|\n"
                               "| g2_instruction_ptr_recall | G2 | 0.188 | 0.173 | no CI: x | consistent "
                               "|\n")[0]
    block = next(line for line in full if line.startswith("3. "))
    assert block.endswith("*Here*: `g2_ptr_recall` 0.121 [0.099, 0.143] against the paper's 0.188: differs "
                          "(below); `g2_instruction_ptr_recall` 0.173 against the paper's 0.188: consistent.")
    long = report + "\n## Where the paper disagrees with itself\n\n" + "\n".join(["word " * 100] * 10)
    plan = "\n".join(plan_lines(long)[0])
    assert "(1,003 words with their tables, markup left out, about 10 minutes" in plan


def test_each_question_states_this_runs_numbers_and_their_tables(cfg):
    save(cfg, hand_tables())
    q = questions(cfg)
    assert len(q) >= 6
    expected = {
        "The paper's G1 difference, twice": ["-0.072", "0.289 − 0.372 = -0.083",
                                             "-0.061, unadjusted 95% CI [-0.102, -0.024]", "`paired_tests`"],
        "Pass rate against recall": ["0.732–0.884", "at most 0.372", "Objective pass rate 0.412–0.655",
                                     "`judge_validity`",
                                     "Recall at most 0.512 on `relevant` and 0.351 on `candidates`",
                                     "`main_results`"],
        "Which ground truth?": ["RtP 0.160, PtR 0.172", "`candidates` RtP 0.161, PtR 0.173",
                                "`relevant` RtP 0.245, PtR 0.268", "`main_results`"],
        "The test over runs against the test over queries": [
            "over 4 runs p < 0.001", "over 200 queries clustered in 46 API samples p = 0.0156, both "
            "unadjusted (Holm over the sets: p = 0.0312)",
            "`primary_endpoint_families`", "G3's 100 queries come from 23 API samples"],
        "Is BM25's win a fair comparison?": ["G1 BM25 RtP 0.455, PtR 0.391, dense RtP 0.352, PtR 0.265",
                                             "G2 BM25 RtP 0.201, PtR 0.236, dense RtP 0.132, PtR 0.178",
                                             "`primary_endpoint`"],
        "What would a stronger stub writer change?": [
            "0.406 of G1 stubs and 0.248 of G3",
            "Stub hit share G1 0.287 (any of its top k: 0.455); G3 0.193 (any of its top k: 0.301)",
            "`stub_stats`",
            "G1 PtR 0.264 with the LLM's stubs, 0.219 with rule-based stubs, RtP 0.351",
            "`ablation_decomposition`"],
        "Which G2?": ["200 “intra-category multi-tool” queries", "a mean of 6.5 ground-truth APIs",
                      "G2_category_original 199 queries, 5.990 [5.690, 6.290] ground-truth APIs per query",
                      "G2_instruction 106 queries, 6.510 [6.210, 6.810]",
                      "Dense PtR − RtP +0.046 [0.026, 0.066] on G2_category_original (4 runs), +0.010 "
                      "[-0.010, 0.030] on G2_instruction (4 runs)", "`primary_endpoint_g2_instruction`"],
        "Does the query name its tool?": [
            "“the raw query often contains the API’s name or brand directly", "G1 PtR 0.280, 0.140 without "
            "brand words, RtP 0.350, 0.220 without; G3 PtR 0.200, 0.050 without brand words, RtP 0.170, "
            "0.060 without",
            "`ablation_stub_text`"],
    }
    assert set(expected) <= set(q)
    for title, numbers in expected.items():
        for number in numbers:
            assert number in q[title], (title, number)
        assert "not in this run" not in q[title].lower()
    # the paper's numbers are its reference entries', the G1 difference computed from two of them
    one = q["The paper's G1 difference, twice"]
    ptr, rtp = paper_value("g1_ptr_recall"), paper_value("g1_rtp_recall")
    assert f"{ptr:.3f} − {rtp:.3f} = {ptr - rtp:.3f}" in one
    assert f"{paper_value('g1_ptr_minus_rtp_recall'):.3f}" in one
    # rows the questions must pass over: another plan set, another method, another ground truth, the
    # families table's dense rows (the main study's come first)
    assert "0.999" not in q["Pass rate against recall"] and "0.901" not in q["Pass rate against recall"]
    assert "0.812" not in q["What would a stronger stub writer change?"]
    assert "0.777" not in "".join(q.values())


@pytest.mark.parametrize(("table", "row", "column", "new", "title", "old_text", "new_text"), [
    ("paired_tests", 0, "diff", -0.047, "The paper's G1 difference, twice", "-0.061", "-0.047"),
    ("judge_validity", 3, "objective_pass_rate", 0.701, "Pass rate against recall", "0.412–0.655",
     "0.412–0.701"),
    ("main_results", 0, "recall_mean", 0.366, "Pass rate against recall", "and 0.351 on", "and 0.366 on"),
    ("main_results", 11, "recall_mean", 0.281, "Which ground truth?", "PtR 0.268", "PtR 0.281"),
    ("primary_endpoint_families", 0, "p_holm", 0.000123, "The test over runs against the test over queries",
     "sets: p = 0.0312", "sets: p < 0.001"),
    ("primary_endpoint_families", 0, "p_runs_robustness", 0.2468, "The test over runs against the test over "
     "queries", "runs p < 0.001", "runs p = 0.247"),
    ("primary_endpoint", 1, "ptr", 0.199, "Is BM25's win a fair comparison?", "PtR 0.178", "PtR 0.199"),
    ("stub_stats", 2, "stub_hit_share", 0.222, "What would a stronger stub writer change?", "G3 0.193",
     "G3 0.222"),
    ("ablation_decomposition", 1, "ptr_recall", 0.305, "What would a stronger stub writer change?", "0.219",
     "0.305"),
])
def test_a_changed_table_value_changes_its_question(cfg, table, row, column, new, title, old_text, new_text):
    tables = hand_tables()
    save(cfg, tables)
    before = questions(cfg)[title]
    assert old_text in before and new_text not in before
    tables[table].loc[row, column] = new
    save(cfg, tables)
    after = run_line(questions(cfg)[title])
    assert new_text in after and old_text not in after


def test_a_missing_table_is_said_in_one_line_and_never_a_number(cfg):
    q = questions(cfg)  # no table at all
    assert len(q) >= 6
    for title, text in q.items():
        line = run_line(text)
        assert line.startswith("**This run.** Not in this run: no `"), title
        assert not re.search(r"\d\.\d", line), (title, line)  # no number, only the table's name
    tables = hand_tables()
    del tables["stub_stats"]
    save(cfg, tables)
    line = run_line(questions(cfg)["What would a stronger stub writer change?"])
    assert "not in this run: no `stub_stats` table (notebook 06 saves it)" in line.lower()
    assert "0.264 with the LLM's stubs" in line  # the other table's numbers stay


def test_a_missing_row_is_said_too(cfg):
    tables = hand_tables()
    tables["primary_endpoint_families"] = tables["primary_endpoint_families"].query("retriever == 'dense'")
    save(cfg, tables)
    line = run_line(questions(cfg)["The test over runs against the test over queries"])
    assert line.startswith("**This run.** Not in this run: `primary_endpoint_families` has no n_runs")
    assert not re.search(r"\d\.\d", line)


@pytest.mark.skipif(not PAPER_TEXT.exists(), reason=f"the paper's text is not at {PAPER_TEXT}")
def test_the_quoted_words_are_the_papers():
    paper = " ".join(PAPER_TEXT.read_text(encoding="utf-8").split())
    for quote in (QUOTE_GT, QUOTE_RETRIEVER, QUOTE_BRAND, QUOTE_G2):  # the others: against.QUOTES
        assert quote in paper, quote


def test_the_facilitator_notes_answer_each_question_from_the_numbers(cfg):
    tables = hand_tables()
    tables["judge_validity"]["ceiling"] = [0.34, 0.19, 0.04, 0.05, 0.04, 0.05, 0.9]
    tables["paired_tests"] = pd.concat([tables["paired_tests"], pd.DataFrame([
        {"subset": "G3", "gt": gt, "metric": "recall", "diff": d, "ci_low_holm": lo, "ci_high_holm": hi}
        for gt, d, lo, hi in (("candidates", 0.006, -0.034, 0.044), ("relevant", 0.045, 0.006, 0.084))])])
    save(cfg, tables)
    text = "\n".join(session_lines(cfg, "## The question and the answer\n"))
    notes = text.split(f"## {NOTES_HEADING}")[1]
    assert len(re.findall(r"(?m)^- \*\*Question \d+\.\*\* ", notes)) == len(questions(cfg)) >= 6
    ptr, rtp = paper_value("g1_ptr_recall"), paper_value("g1_rtp_recall")
    inside = "inside" if -0.102 <= ptr - rtp <= -0.024 else "outside"
    assert (f"The stated {paper_value('g1_ptr_minus_rtp_recall'):.3f} lies inside this run's unadjusted CI "
            f"[-0.102, -0.024] and the computed {ptr - rtp:.3f} {inside}") in notes
    assert "for at most 0.340 of plans here" in notes  # the `same` plans' 0.9 is passed over
    assert ("Dense G3 PtR − RtP recall is +0.006 [-0.034, 0.044] on `candidates` and +0.045 [0.006, 0.084] "
            "on `relevant` (`paired_tests`, each CI adjusted as its Holm p): only on `relevant` does the CI "
            "exclude 0, so on G3 the definition decides whether this run supports a G3 difference.") in notes
    assert "Brand words in the stubs carry a share of PtR's recall (G1 50%; G3 75%)" in notes
    assert ("Removed from the query too, G1's PtR − RtP is -0.062 [-0.107, -0.018] against -0.072 as run "
            "(`ablation_query_coupling`)") in notes
    assert "The dense verdict changes with the set: which set is the paper's G2 decides the G2 answer" in (
        notes)
    # G1's dense lead (Holm p 0.002 on candidates) is not significant on relevant: the note says so
    pd.DataFrame([{"retriever": "dense", "subset": s, "p_holm": p, "diff": d} for s, p, d in (
        ("G1_instruction", 0.2, -0.060), ("G3_instruction_original", 0.0682, 0.045))]).to_csv(
        cfg.tables_dir / "primary_endpoint_relevant.csv", index=False)
    text = "\n".join(session_lines(cfg, "## The question and the answer\n"))
    from toolbench_lib.report.locate import TableCache
    from toolbench_lib.report.lookup import value

    g1 = value(TableCache(cfg.tables_dir), "primary_endpoint", "diff", retriever="dense", subset="G1")
    assert (f"the definition changes the dense verdict on G1 ({g1:+.3f}, Holm p = 0.00200, on `candidates`; "
            "-0.060, p = 0.200, on `relevant`") in text.split(f"## {NOTES_HEADING}")[1]
    (cfg.tables_dir / "primary_endpoint_relevant.csv").unlink()
    # 0.0004 over runs, 0.0156 over queries (both unadjusted): both printed, not their ratio
    assert ("On BM25 G1 the test over runs gives the smaller p (p < 0.001 against p = 0.0156, from two "
            "different tests): its 4 run means") in notes
    assert "for RtP on 2 and for PtR on 2 of 2 sets" in notes  # G1 0.455 > 0.352, 0.391 > 0.265; G2 too
    assert "change PtR's recall by G1 -0.045" in notes
    (cfg.tables_dir / "ablation_decomposition.csv").unlink()
    text = "\n".join(session_lines(cfg, "## The question and the answer\n"))
    # the stronger stub writer's note (question 3: after pass rates and the two tests)
    assert "- **Question 3.** Not in this run: no `ablation_decomposition` table" in text.split(
        f"## {NOTES_HEADING}")[1]


def test_the_g2_note_says_when_both_sets_exclude_the_paper_s_difference(cfg):
    from toolbench_lib.report.locate import TableCache
    from toolbench_lib.report.questions import g2_note

    tables = hand_tables()
    paper = {"paper_rtp": 0.143, "paper_ptr": 0.188}  # the paper's +0.045
    dense = tables["primary_endpoint"].assign(significant=False, **paper)
    tables["primary_endpoint"] = dense
    tables["primary_endpoint_g2_instruction"] = tables["primary_endpoint_g2_instruction"].assign(**paper)
    save(cfg, tables)
    note = g2_note(TableCache(cfg.tables_dir))
    # G2 +0.046 [0.026, 0.066] holds +0.045; G2_instruction [-0.010, 0.030] does not: not said
    assert note == ("the dense verdict is the same on both sets (not significant): the choice of set moves "
                    "the estimate only")
    tables["primary_endpoint"] = dense.assign(ci_high=dense["ci_low"] + 0.01)  # [0.026, 0.036]: excludes it
    save(cfg, tables)
    # G2 [0.026, 0.036] about +0.046: its √2-widened CI reaches +0.045; G2_instruction's [-0.010, 0.030]
    # about +0.010 reaches 0.038 only
    assert g2_note(TableCache(cfg.tables_dir)).endswith(
        "; on both, the 95% CI excludes the paper's +0.045, which tests this run's stub writer and embedder, "
        "not the paper's; on G2_category_original not if the paper's number were as uncertain as this run's "
        "(a two-sample reading)")


def test_each_block_ends_on_a_model_answer_that_follows_its_rows(tmp_path):
    """Each answer reads the block's rows and the report's sentences; change a number's side and the answer
    changes; a block without its rows gets none."""
    from toolbench_lib.report.answers import block_answer
    from toolbench_lib.report.locate import TableCache
    from toolbench_lib.report.scorecard import BY_CONSTRUCTION, SCORECARD_TABLE, SETUP

    md = ("- **G2 (tools of one category):** the paper's lead for PtR does not appear: x.\n\n**What it rests "
          "on.** Had the paper's lead carried over, a lead of its size would have shown with 99% likelihood. "
          "All 15 measured without an LLM (RtP's retrieval) are consistent (9) or differ by construction "
          "(6).\n"
          "- Always RtP, which calls no LLM, is not shown to find less than routing by set (0.216 against "
          "0.212).")
    # whether a lead of the paper's size would likely have shown: the verdict's power (80% or more)
    endpoint = pd.DataFrame({"subset": ["G2_category_original"], "ci_low": [-0.02], "ci_high": [0.02],
                             "paper_rtp": [0.143], "paper_ptr": [0.188]})
    (tmp_path / "power").mkdir()
    endpoint.to_csv(tmp_path / "power" / "primary_endpoint.csv", index=False)
    assert block_answer("Which architecture finds more tools", {}, md, TableCache(tmp_path / "power")) == (
        "untested for the paper's setup, whose stubs come from a much larger model, "
        "matched by a larger embedder; not reproduced with this run's, whose stubs a small model writes: the "
        "paper's lead for PtR on G2 does not appear, though a lead of its size would likely have shown")
    endpoint.assign(ci_low=-0.06, ci_high=0.06).to_csv(tmp_path / "power" / "primary_endpoint.csv",
                                                       index=False)
    assert block_answer("Which architecture finds more tools", {}, md, TableCache(tmp_path / "power")
                        ).endswith("the paper's lead for PtR on G2 does not appear")  # 31% power: not said
    assert "a small model writes, fewer and closer to the request than the paper's:" in block_answer(
        "Which architecture finds more tools", {}, md + "\n- So this tests another PtR than the paper's.")
    # read from the saved scorecard: its rows measured without an LLM, whatever the report's sentences say
    scorecard = pd.DataFrame({"status": ["consistent"] * 9 + ["differs"] * 7,
                              "cause_status": [""] * 9 + [BY_CONSTRUCTION] * 6 + [SETUP],
                              "metric": ["recall"] * 9 + ["count"] * 6 + ["recall"],
                              "method": ["rtp"] * 9 + [""] * 6 + ["ptr"]})
    scorecard.to_csv(tmp_path / f"{SCORECARD_TABLE}.csv", index=False)
    tables = TableCache(tmp_path)
    assert block_answer("The question and the answer", {}, "", tables) == (
        "the half that needs no LLM: RtP's retrieval and the data's counts (15 numbers: 9 "
        "consistent, 6 differing by construction). Every comparison of the two architectures rests on PtR's "
        "stubs, which a much smaller LLM writes here, so it is tested for this run's setup only")
    scorecard.assign(cause_status=[""] * 9 + [SETUP] * 7).to_csv(tmp_path / f"{SCORECARD_TABLE}.csv",
                                                                    index=False)
    assert block_answer("The question and the answer", {}, md, TableCache(tmp_path)) == ""  # one is untested
    assert block_answer("The question and the answer", {}, md) == ""  # no tables
    stub = {"g1_stub_hit_share": ["G1", "0.406", "0.293", "x", "differs (below)"]}
    pd.DataFrame({"subset": ["G3", "G1"], "ptr": [0.2, 0.2743], "ptr_nobrand": [0.1, 0.1591]}).to_csv(
        tmp_path / "ablation_query_coupling.csv", index=False)
    assert ("a needed one less often here than in the paper (0.293 against 0.406); the request's brand words "
            "carry much of what they find (without them PtR's G1 recall falls from 0.274 to 0.159). Where a "
            "stub already names the paper's tool and still misses, what is left is the matching, untested "
            "here") in block_answer("Stubs and Intent-Registry Coupling", stub, md, tables)
    assert "brand words" not in block_answer("Stubs and Intent-Registry Coupling", stub, md)  # no table
    stub["g1_stub_hit_share_topk"] = ["G1", "0.406", "0.425", "\\[0.361, 0.490\\]", "consistent"]
    assert ("(0.293 against 0.406); counted as any of a stub's top five, 0.425 [0.361, 0.490], as in the "
            "paper; the request's") in block_answer("Stubs and Intent-Registry Coupling", stub, md, tables)
    miss = {"wrong_tool_on_miss": ["all", "0.70", "0.795", "\\[0.741, 0.853\\]", "differs (above; the CI "
                                   "excludes the paper's value, only its end reaching this project's ±0.05 "
                                   "reading of the paper's “~”)"]}
    assert block_answer("Trajectories", miss, md) == (
        "it mostly goes on with wrong tools: 0.795 [0.741, 0.853] of plans after a total "
        "miss, somewhat more often than the paper's “~” value, which the CI excludes (0.70)")
    budget = {"g2_budget_rtp10_vs_ptr5": ["G2", "claim: 0 ± 0.023", "0.041", "\\[0.019, 0.063\\]", "x"]}
    assert block_answer("A larger retrieval budget", budget, md) == (
        "on G2, RtP at k = 10 finds more than PtR at k = 5: 0.041 [0.019, 0.063], where "
        "the paper has them nearly identical")
    budget["g2_budget_rtp10_vs_ptr5"][4] = ("against the claim, its size undecided (the CI excludes 0, "
                                            "crosses the margin)")
    assert block_answer("A larger retrieval budget", budget, md).endswith(
        "nearly identical; whether by more than this project's margin (±0.023, half the paper's G2 lead at "
        "k = 5) is undecided")
    budget["g2_budget_rtp10_vs_ptr5"][3] = "\\[-0.019, 0.063\\]"
    assert "finds about as much as PtR" in block_answer("A larger retrieval budget", budget, md)
    auroc = {"router_overhead_saved": ["all", "36%", "35.4%", "no CI: this project's tolerance ±2",
                                       "consistent"],
             "g1_top1_cosine_routing_auroc": ["G1", "claim: ≥ 0.5", "0.499", "\\[0.395, 0.600\\]", "x"]}
    assert block_answer("Cost and routing", auroc, md) == (
        "not here: always RtP, which calls no LLM, is not shown to find less than routing by set (0.216 "
        "against 0.212); RtP's top-1 cosine is not shown to tell when (its CI holds chance, 0.5): AUROC "
        "0.499")
    auroc["g1_top1_cosine_routing_auroc"][3] = "\\[0.605, 0.700\\]"
    assert "cosine tells when" in block_answer("Cost and routing", auroc, md)
    cited = md.replace("(0.216 against 0.212)", "(0.216 against 0.212, pooled; the CI above)")
    claim = pd.DataFrame({"against": ["always_ptr", "always_rtp"], "diff": [0.022, -0.0037],
                          "ci_low": [0.005, -0.0212], "ci_high": [0.039, 0.0137]})
    claim.to_csv(tmp_path / "routing_claim.csv", index=False)
    assert "(0.216 against 0.212, pooled; routed − always RtP -0.004 [-0.021, +0.014])" in block_answer(
        "Cost and routing", auroc, cited, TableCache(tmp_path))  # the claim's CI, for a reader of the notes
    assert "the CI above" in block_answer("Cost and routing", auroc, cited)  # no table: the report's words
    div = {"divergence_smallest_disjoint_g1g2": ["G1, G2", "0.88", "0.093", "x", "differs (below)"],
           "divergence_smallest_non_identical_g1g2": ["G1, G2", "0.88", "0.894", "x", "consistent"]}
    assert block_answer("Registry scale", div, md) == (
        "the non-identical reading (disjoint 0.093; non-identical 0.894, the paper 0.88)")
    assert block_answer("Registry scale", {k: [*v[:4], "differs"] for k, v in div.items()}, md) == ""
    assert block_answer("Trajectories", {}, md) == "" == block_answer("Where the paper disagrees with itself",
                                                                      {}, md)
    pd.DataFrame({"subset": ["G1", "G1", "G2"], "gt": ["candidates", "relevant", "candidates"],
                  "mean": [5.2884, 2.2756, 6.1]}).to_csv(tmp_path / "data_gt_sizes.csv", index=False)
    assert block_answer("Where the paper disagrees with itself", {}, md, TableCache(tmp_path)) == (
        "its ground truth first: it defines it as *“all APIs executed in the reference solution”*, yet its "
        f"G1 mean of {paper_value('g1_gt_size'):g} APIs per query fits `candidates` (5.288 here) rather than "
        "that definition (`relevant`, 2.276); which one it scored decides what every recall and pass rate it "
        "reports means, and what a replication must match")
    missing = {"wrong_tool_on_miss": ["all", "0.70", "n/a", "x", "missing"]}
    assert block_answer("Trajectories", missing, md) == ""  # a row without this run's value: no answer
    assert block_answer("Cost and routing", auroc, "no routing sentence") == ""


def test_the_test_over_runs_question_says_how_the_runs_were_made(tmp_path):
    """The runs' temperatures and a replayed LLM come from the study's provenance; none, nothing said."""
    from toolbench_lib.report.session import runs_made

    assert runs_made({}) == ""
    prov = {"backend": "replay", "settings": {"temperature": 0.0, "run_temperature": 0.3, "runs": 4}}
    assert runs_made(prov) == ("Its runs: run 0 at temperature 0 and the later 3 at 0.3 (the paper's at 0), "
                               "the LLM's outputs replayed from a recording of them.")
    prov = {"backend": "gemini", "settings": {"temperature": 0.0, "runs": 4}}
    assert runs_made(prov) == "Its runs: all 4 at temperature 0 (the paper's at 0)."
    from toolbench_lib.analysis.references import load_references
    from toolbench_lib.report.locate import TableCache
    from toolbench_lib.report.questions import questions, run_numbers

    refs = {e["id"]: e for e in load_references()["entries"]}
    said = {t: run_numbers(TableCache(tmp_path), m) for t, _, m, _, _ in questions(refs, runs_made(prov))}
    last = ". Its runs: all 4 at temperature 0 (the paper's at 0)."  # its last clause, in that question alone
    assert [t for t, line in said.items() if line.endswith(last)] == [
        "The test over runs against the test over queries"]
