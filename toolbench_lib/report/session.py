"""A 90-minute reading-group session on a run's report, the opening of ``teaching.md``: the plan and
discussion questions with this run's numbers (a table the run did not save is named, never replaced)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from ..analysis.endpoint import run_temperatures
from ..analysis.numbers import fmt_count
from ..analysis.references import REFERENCES_FILE, load_references, paper_text_collapsed
from ..data.markdown import anchor, md_text
from ..study.experiment import ExperimentConfig
from .answers import block_answer
from .checks import CAPTION, IMAGE, sections
from .checks import words as count_words
from .locate import TableCache
from .primer import PLAIN_HEADING, SUBSTITUTIONS_HEADING, plain_words, session_answer, substitution_lines
from .questions import questions, run_numbers

REPORT_FILE = "report.md"
SESSION_HEADING = "A 90-minute reading-group session"
QUESTIONS_HEADING = "Discussion questions"
NOTES_HEADING = "Facilitator notes"
# The plan: (the starts of the report.md headings a block walks through, minutes, what to look for, the
# question its presenter takes to the room, the scorecard rows its presenter walks through); then the
# discussion questions.
PLAN = (
    (("The question and the answer",), 5, "pre-read: what the answer tests and what it leaves untested",
     "which half of the paper's claim can this run test, and which not?", ()),
    (("Setup and data",), 10, "the paper first: one member presents its method (RtP; PtR and its stubs; "
                             "Intent-Registry Coupling) and its claims, with this section's query sets, "
                             "registry and two pipelines",
     "which difference from the paper's setup could change who wins?", ("registry_size", "g1_query_count")),
    (("Which architecture finds more tools",), 10,
     "the main claim: recall per set (Figure R4; pass rates and precision are for later)",
     "is G2's result a failed replication or an untested one?", ("g1_ptr_recall", "g2_ptr_recall",
                                                                  "g2_instruction_ptr_recall")),
    (("A larger retrieval budget",), 7, "the paper's answer to \"PtR only searches more\": RtP at k = 10 "
                                         "against PtR at k = 5 (Figure R6; the curves over k for later)",
     "does a larger k for RtP buy as much as PtR's stubs?", ("g2_budget_rtp10_vs_ptr5",)),
    (("Stubs and Intent-Registry Coupling",), 10, "its explanation: stubs, a [worked query](#worked-queries),"
                                                 " a [Table 2 example](#the-papers-table-2-examples)",
     "would you have written the worked query's stubs, and where stubs already name the paper's tools yet "
     "miss, what is left to explain the miss?", ("g1_stub_hit_share", "g1_stub_hit_share_topk",
                                                 "g1_gt_size")),
    (("Registry scale",), 6, "divergence as the registry grows and which reading fits the paper",
     "which definition of divergence gives the paper's 88% and 98%?",
     ("divergence_smallest_disjoint_g1g2", "divergence_smallest_non_identical_g1g2")),
    (("Trajectories", "Cost and routing"), 10,
     "what the planners do with what they retrieved (fidelity and misses); then what PtR's extra call costs, "
     "and whether routing by set or on RtP's top-1 cosine saves it",
     "what does a planner do when retrieval missed, and is PtR worth its extra call?",
     ("trajectory_fidelity", "wrong_tool_on_miss", "router_overhead_saved", "g1_top1_cosine_routing_auroc")),
    (("Where the paper disagrees with itself",), 7, "three of its items: its definitions of ground truth and "
                                                    "of divergence, its pass rates above its recall (the "
                                                    "rest, and its p-values, for after the session)",
     "which of these would you ask the authors first?", ()),
)
ROLES = ("Roles: one member chairs and keeps time; each block's presenter prepares its figures, walks "
         "through its section and ends on the question after *Ask* (model answers in the [facilitator notes]"
         "(#{notes}), for the chair). Which way each substitution of this run pushes the answer is "
         "[below](#{anchor}).")
# What each member reads before the session, besides the paper (the rest is walked through in it).
PRE_READING = ("The question and the answer", "Where the paper disagrees with itself")
OPTIONAL = ("Retriever families",)  # beyond the paper: outside the plan, named after it for the curious
IN_SESSION = 4  # the discussion questions the session takes, about five minutes each; the others for later
DISCUSSION_MINUTES = 20
WRAP_UP = (5, "what do we believe now: each member says in one sentence which of the paper's claims this run "
              "supports, and the group compares it with the report's one-line answer")
READING_WPM = 100  # a pace for technical text dense with tables (prose alone reads at about 200)
PAPER_FIGURE = re.compile(r"\bFigure (\d+)\b")
STATUS_WORD = re.compile(r" [(](?!below|above).*")  # a status without its reason: "differs (below)" stays


def _status_word(status: str) -> str:
    """A row's status up to its first reason, its bracket closed: "differs (above; ..." reads "differs
    (above)"; a reason other than a direction is left out ("differs (below)" stays)."""
    said = STATUS_WORD.sub("", status.split(";")[0])
    return said + ")" * (said.count("(") - said.count(")"))


def plan_lines(report_md: str, cache: TableCache | None = None) -> tuple[list[str], list[str]]:
    """The plan: each report section linked with its figures and minutes, which file each figure is and
    which paper figure it redraws; second, the blocks' model answers for the facilitator's notes."""
    found = {h[3:].strip(): text for h, text in sections(report_md).items() if h}
    figures_of: dict[str, list[str]] = {}
    figure_rows = []  # every figure of the report, whichever section holds it
    for heading, text in found.items():
        paper, file = PAPER_FIGURE.search(heading), "n/a"
        for line in text.splitlines():
            if m := IMAGE.match(line):
                file = m.group(1)
            elif m := CAPTION.match(line):
                figures_of.setdefault(heading, []).append(f"R{m.group(1)}")
                figure_rows.append((int(m.group(1)), f"| R{m.group(1)} | `{file}` | "
                                    f"{f'Figure {paper.group(1)}' if paper else '-'} |"))
                file = "n/a"
    lines, answers = [], []
    words = sum(count_words(text) for h, text in found.items() if h.startswith(PRE_READING))
    for i, (starts, minutes, what, ask, cover) in enumerate(PLAN, 1):
        headings = [h for start in starts for h in found if h.startswith(start)]
        if not headings:
            lines.append(f"{i}. **{minutes} min**: {' and '.join(starts)} (not in this run's report): "
                         f"{what}.")
            continue
        figures = [f for h in headings for f in figures_of.get(h, [])]
        shown = f", figure{'s' * (len(figures) > 1)} {', '.join(figures)}" if figures else ""
        text = "\n".join(found[h] for h in headings)
        cells = {r: m.group(1).split(" | ") for r in cover
                 if (m := re.search(rf"^\| {re.escape(r)} \| (.+) \|$", text, re.M))}
        rows = [f"`{r}`" for r in cells]
        here = "; ".join(f"`{r}` {c[2]}{'' if c[3].startswith('no CI') else ' ' + c[3].replace(chr(92), '')}"
                         f" against the paper's {c[1]}: {_status_word(c[4])}"
                         for r, c in cells.items() if len(c) >= 5 and not c[2].startswith("n/a"))
        links = " and ".join(f"[{md_text(h, False)}]({REPORT_FILE}#{anchor(h)})" for h in headings)
        if said := "; ".join(a for start in starts if (a := block_answer(start, cells, report_md, cache))):
            answers.append(f"- **Block {i}.** *{ask[0].upper()}{ask[1:]}* {said[0].upper()}{said[1:]}.")
        lines.append(f"{i}. **{minutes} min**: {links}{shown}: {what}" + (f"; rows {', '.join(rows)}" if rows
                                                                          else "") + f". *Ask*: {ask}"
                     + (f" *Here*: {here}." if here else ""))
    total = sum(p[1] for p in PLAN) + DISCUSSION_MINUTES + WRAP_UP[0]
    reading = fmt_count(round(words / READING_WPM))
    pre = ", ".join(f"[{md_text(h, False)}]({REPORT_FILE}#{anchor(h)})" for h in found
                    if h.startswith(PRE_READING))
    paper = paper_text_collapsed()
    paper_words = (f"; the paper adds about {fmt_count(round(len(paper.split()), -2))} words, about "
                   f"{fmt_count(round(len(paper.split()) / READING_WPM))} minutes more") if paper else ""
    before = (f"Before the session, each member reads the answer in plain words above, the paper and {pre} "
              f"({fmt_count(words)} words with their tables, markup left out, about {reading} minutes at "
              f"{READING_WPM} words a minute, a pace for text dense with tables{paper_words}); in the "
              "session, each block is one member's walk-through of its section.")
    rest = [f"[{md_text(h, False)}]({REPORT_FILE}#{anchor(h)})" for o in OPTIONAL for h in found
            if h.startswith(o)]
    more = ["", f"Outside the plan, for members who want more: {', '.join(rest)}."] if rest else []
    figure_map = ["", "The report numbers its figures R1, R2, ... in order; a plain “Figure N” is the "
                      "paper's:", "",
                  "| report figure | file | the paper's figure its section reproduces |",
                  "| ---: | :--- | :--- |", *(row for _, row in sorted(figure_rows))]
    figure_map = figure_map if figure_rows else []  # by number: the plan's order is not the report's
    return [before, "", *lines, f"{len(PLAN) + 1}. **{DISCUSSION_MINUTES} min**: the [discussion questions]"
            f"(#{anchor(QUESTIONS_HEADING)}) below, 1 to {IN_SESSION}, about "
            f"{fmt_count(DISCUSSION_MINUTES // IN_SESSION)} minutes each (the others for after the session).",
            f"{len(PLAN) + 2}. **{WRAP_UP[0]} min**: {WRAP_UP[1]}.",
            "", f"Total: {total} minutes.", *more, *figure_map], answers


def runs_made(prov: Mapping) -> str:
    """How this run's runs were made, from its study's provenance: the runs' temperatures against the paper's
    0, and whether the LLM's outputs were replayed from a recording; empty without the provenance."""
    settings = prov.get("settings") or {}
    (first, later), runs = run_temperatures(settings), settings.get("runs")
    if first is None or not runs:
        return ""
    temps = (f"run 0 at temperature {first:g} and the later {fmt_count(runs - 1)} at {later:g}"
             if later is not None and runs > 1 else f"all {fmt_count(runs)} at temperature {first:g}")
    replay = ", the LLM's outputs replayed from a recording of them" * (prov.get("backend") == "replay")
    return f"Its runs: {temps} (the paper's at 0){replay}."


def session_lines(cfg: ExperimentConfig, report_md: str, references: Path = REFERENCES_FILE,
                  prov: Mapping | None = None) -> list[str]:
    """The session plan for ``report_md`` (the written report), then the discussion questions with this
    run's numbers (``prov``: the study's provenance): the opening lines of ``teaching.md``."""
    refs = {e["id"]: e for e in load_references(references)["entries"]}
    cache = TableCache(cfg.tables_dir)
    notes: list[str] = []
    plan, answers = plan_lines(report_md, cache)
    lines = [f"## {SESSION_HEADING}", "",
             f"The sections of [the report]({REPORT_FILE}) in this order, then the questions below; each "
             "states this run's numbers and the table they come from. Besides the paper, the run folder's "
             "files are all a group needs (`report.md` or `report.html`, this file, `figures/`, `tables/`); "
             "the `open` links reach the explorer only while `make explore` serves it.", "",
             f"### {PLAIN_HEADING}", "", plain_words(cache), "",
             session_answer(report_md, REPORT_FILE), "",
             "### The plan", "",
             ROLES.format(anchor=anchor(SUBSTITUTIONS_HEADING), notes=anchor(NOTES_HEADING)), "", *plan, "",
             *substitution_lines(cache), f"## {QUESTIONS_HEADING}", ""]
    for i, (title, paper_text, makers, ask, note) in enumerate(questions(refs, runs_made(prov or {})), 1):
        lines += [f"### {i}. {title}", "", f"**The paper.** {paper_text}", "", run_numbers(cache, makers), "",
                  f"**Discuss.** {ask}", ""]
        notes.append(f"- **Question {i}.** {run_numbers(cache, (note,)).removeprefix('**This run.** ')}")
    lead = "The discussion questions: what this run's numbers answer, for whoever leads the discussion:"
    blocks = ["The plan's questions, block by block:", "", *answers, ""] if answers else []
    return [*lines, f"## {NOTES_HEADING}", "", *blocks, lead, "", *notes, ""]
