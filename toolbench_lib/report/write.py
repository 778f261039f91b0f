"""The written report: ``outputs/<run>/report.md`` from the scorecard (:mod:`.scorecard`), the saved
tables and figures, and the teaching material."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path

import pandas as pd

from ..analysis.endpoint import PRIMARY
from ..analysis.fusion_board import GOAL_TABLE, goal_sentence, goal_summary
from ..analysis.ltr_study import summary_tables
from ..analysis.numbers import fmt_ci, fmt_count, fmt_number, fmt_signed
from ..analysis.references import REFERENCES_FILE, load_references, paper_text_collapsed
from ..data.markdown import anchor, md_code, md_compact, md_table
from ..explorer.data import SHORT_NAMES, explorer_url
from ..retrieval.methods import load_methods
from ..study.experiment import ExperimentConfig, stored_study_dir
from .against import QUOTES, paper_against_itself
from .appendix import (
    APPENDIX_A,
    APPENDIX_BEYOND,
    APPENDIX_RUN,
    APPENDIX_TABLES,
    APPENDIX_TABLES_HEADING,
    APPENDIX_WORKED,
    FUSION_TABLES,
    table_section,
)
from .checks import check_report
from .figures import figures_markdown, number_figures
from .front import (
    CROSSOVER_TABLES,
    G2_INSTRUCTION_TABLE,
    RELEVANT_TABLE,
    TERMS,
    Ledger,
    answer_sentence,
    beside_g2,
    crossover_beyond,
    crossover_limits,
    crossover_test,
    endpoint_rows,
    endpoint_table_markdown,
    fare_line,
    fit_sentence,
    g2_gain_line,
    robustness_sentence,
    runs_test_table,
    two_questions,
    weak_lead_lines,
)
from .locate import TableCache
from .primer import plain_words, verdict
from .rows import margin_lines, right_and_wrong, scorecard_lines, section_sentence, shown, two_sample_lines
from .scorecard import SCORECARD_TABLE, compare_entries
from .session import SESSION_HEADING, session_lines
from .setup_table import limits, setup_box
from .teaching import TITLES, teaching_material
from .verdicts import robustness_lines, section_verdicts


def run_provenance(cfg: ExperimentConfig) -> list[dict]:
    """Provenance of the studies stored for this run; the configuration's own study first."""
    files = sorted((cfg.out_dir / "runs").glob("*/provenance.json"))
    own = cfg.out_dir / "runs" / cfg.study_key() / "provenance.json"
    files.sort(key=lambda p: p != own)
    return [{**json.loads(path.read_text()), "study_folder": str(path.parent.relative_to(cfg.out_dir))}
            for path in files]


def provenance_markdown(prov: Mapping) -> str:
    """A study's model, backend, data and parameters as a Markdown list."""
    s = prov.get("settings", {})
    requested = prov.get("model_requested")
    embedder = prov.get("model") if requested in (None, prov.get("model")) else \
        f"{prov.get('model')} (requested {requested})"
    lines = [
        f"- embedder: {embedder}",
        f"- backend: {prov.get('backend')} (model {prov.get('llm_model')}); pass rate: "
        f"{prov.get('pass_rate_kind', 'n/a')}",
        f"- data: fingerprint {prov.get('data_fingerprint')}, registry "
        f"{fmt_count(prov.get('registry_size'))} of {fmt_count(prov.get('registry_full_size'))} APIs"
        + (f" (sub-registry seed {seed})" if (seed := prov.get("sub_registry_seed")) is not None
           else " (the full registry)"),
        f"- parameters: k={s.get('k')}, depth={s.get('depth')}, runs={s.get('runs')}, "
        f"plan_limit={s.get('plan_limit')}, temperature={s.get('temperature')}, "
        f"run_temperature={s.get('run_temperature')}, queries={prov.get('n_queries')} "
        f"({prov.get('n_planned_queries')} planned)",
        f"- prompts: {', '.join(prov.get('prompt_versions', [])) or 'n/a'}",
        f"- stored in: `{prov.get('study_folder')}`",
    ]
    return "\n".join(lines)


STATUS_LEGEND = ["| status | when |", "| :--- | :--- |", *(f"| {a} | {b} |" for a, b in (
    ("consistent", "the paper's value, ± half its last decimal (its rounding), meets the CI: this run cannot "
                   "tell the two apart, which does not confirm it"),
    ("inconclusive", "an ordering or bound whose CI holds the bound (an ordering at every k: judged at each "
                     "k, none wholly beyond it), or an equivalence whose CI crosses its margin"),
    ("differs; explained", "a tested cause's predicted value has a CI that covers the paper's and moves at "
                           "least half the gap"),
    ("differs; fits another reading", "the same, where the cause is another reading of the paper's "
                                      "definition"),
    ("differs; partly explained", "a tested cause closes part of the gap (the share stated)"),
    ("differs; indicative, by a proxy", "a cause tested through a stand-in moves toward the paper's value "
                                        "(how far; beside an untested cause, the share of the gap its "
                                        "linear reading moves: a direction, not an estimate)"),
    ("differs; cause untested", "a setup difference, not tested"),
    ("differs; by construction", "this run's own data or definitions make it differ"),
    ("differs; unexplained", "no listed cause does"))), ""]

# One section per claim of the paper: (key, heading, scorecard prefixes, the claim in short, the paper's own
# words it rests on, each verbatim in its text).
SECTIONS = (
    ("setup", "Setup and data (§3)", ("§3",),
     "The paper searches the whole ToolBench registry with its G1, G2 and G3 query sets (its counts are the "
     "rows below, quoted from its text).",
     ("All experiments use the full 46,984-API registry unless otherwise noted.",)),
    ("main", "Which architecture finds more tools (§4.1, Figure 2)", ("§4.1 Main",),
     "RtP finds more of a single-tool query's APIs (G1); PtR finds more for multi-tool queries (G2, G3).",
     ("RtP leads all G1 metrics", "The pattern reverses on multi-tool queries")),
    ("budget", "A larger retrieval budget (§4.1 Table 1, §4.2)", ("§4.1 Table 1", "§4.2 Budget"),
     "The crossover holds at every k: PtR's G2 gain grows with k, RtP's G1 lead stays stable, and RtP at "
     "k = 10 nearly matches PtR at k = 5 on G2.",
     ("RtP’s G1 advantage is stable across k.", "RtP G2 recall reaches 0.186, nearly identical to PtR")),
    ("scale", "Registry scale (§4.2, Figure 3)", ("§4.2 Registry",),
     "The two architectures' top-k lists drift apart as the registry grows, while the recall gap between "
     "them stays stable.",
     ("the RtP–PtR gap is stable across scales",
      "the architecture choice is a structural property that becomes more consequential at scale")),
    ("trajectory", "Trajectories (§4.3, Figure 4)", ("§4.3",),
     "Plans stay inside the retrieved set, and RtP and PtR plans name increasingly different APIs from G1 "
     "to G3.",
     ("the planner almost always selects from the retrieved set",
      "the architectures produce increasingly different tool call sequences")),
    ("stubs", "Stubs and Intent-Registry Coupling (§4.4, Table 4, §5)", ("§4.4", "§5 Discussion (Intent"),
     "Stubs are invented names, not the registry's own, and stub cosines do not tell a right match from a "
     "wrong one; PtR still wins G3 because several stubs cover different sub-needs. On G1 the query often "
     "names its API itself (high Intent-Registry Coupling), which favours RtP.",
     ("the LLM is hallucinating tool names from scratch rather than recalling real API names",
      "multi-stub coverage compensates for individual stub mismatches",
      "the raw query often contains the API’s name or brand directly, giving RtP a direct embedding match")),
    ("cost", "Cost and routing (§5)", ("§5 Discussion (cost", "§5 Discussion (routing"),
     "PtR costs an extra LLM call; routing by set (RtP for G1, PtR for G2 and G3) saves tokens without "
     "losing recall. Routing on RtP's top-1 cosine is proposed, and left untested, by the paper.",
     ("Complexity-adaptive routing (using RtP for G1, PtR for G2/G3)",
      "RtP’s own top-1 cosine similarity is a zero-cost routing signal",
      "We leave empirical validation of such classifiers to future work")),
)


def paper_quotes(quotes) -> str:
    """The paper's own words, each as *“...”* (the form the report checks look for)."""
    return "The paper's words: " + "; ".join(f"*“{q}”*" for q in quotes) + "."


PRIMARY_ROWS = re.compile(r"^(g[123])_(?:(rtp|ptr)_recall|ptr_minus_rtp_recall)$")


def same_quantities(report: pd.DataFrame, ledger: Ledger, k: int) -> None:
    """The scorecard's rows of the primary comparison recorded under the front's names (one value each)."""
    for r in report.itertuples():
        if not (m := PRIMARY_ROWS.match(str(r.id))) or pd.isna(r.this_run):
            continue
        name = f"dense {m.group(1).upper()}"
        if m.group(2):
            ledger.put(f"{name} {SHORT_NAMES[m.group(2)]} recall@{k}", fmt_number(r.this_run))
        else:
            ledger.put(f"{name} PtR − RtP", fmt_signed(r.this_run))
            if pd.notna(r.ci_low):
                ledger.put(f"{name} PtR − RtP CI, unadjusted", fmt_ci(r.ci_low, r.ci_high))


def goal_lines(cfg: ExperimentConfig, ledger: Ledger) -> list[str]:
    """"Beyond the paper": which fused or learned methods meet the goal on the design and unseen sets
    (notebook 12), then notebook 10's result against the main study's dense architectures."""
    cache = TableCache(cfg.tables_dir)
    design, main, learned = cache.get(GOAL_TABLE), cache.get("beyond_goal"), cache.get(LTR_TABLE)
    unseen = cache.get(UNSEEN_GOAL_TABLE)
    if design is not None and unseen is not None and not unseen.empty:  # one rule: every set, seen or not
        design = pd.concat([design, unseen], ignore_index=True)
    if design is not None and learned is not None and not learned.empty:  # the learned rankers beside them
        rows = learned[(learned["gt"] == "candidates") & (learned["against"] == "best single")]
        design = pd.concat([design, rows.rename(columns={"ci_low": "diff_lo", "ci_high": "diff_hi"})],
                           ignore_index=True)
    lines = [goal_sentence(design, ledger) if design is not None and not design.empty else
             "The fused and learned methods over every retriever family were not run (notebook 12 scores "
             "them)."]
    if main is not None and not main.empty and "baselines" in main:
        lines.append("On the main study (the dense family only, every fused method of notebook 10, not only "
                     "the ones chosen above): " + goal_summary(main))
    saved = [f"`tables/{t}.csv`" for t in FUSION_TABLES if cache.get(t) is not None]
    if saved:  # the leaderboards behind the goal: each fused method's recall and paired test per set
        lines.append(f"Each fused method's recall and paired comparison per set, with its unadjusted p: "
                     f"{' and '.join(saved)} (notebook 12).")
    return [*lines, *unseen_lines(cache.get(UNSEEN_TABLE), ledger), ""]


def ltr_lines(cfg: ExperimentConfig) -> list[str]:
    """The learned ranker's ablations and costs from ``ltr_study`` (nothing when it was not run; how to
    measure them again when they were measured with other code)."""
    try:
        folder = stored_study_dir(f"{cfg.run_name}-retrievers", outputs_dir=cfg.out_dir.with_name(
            f"{cfg.run_name}-retrievers")) / "ltr"
    except FileNotFoundError:
        return []
    tables = summary_tables(folder)
    if not tables:  # not measured, or measured with other code: say so rather than show them
        done = "were measured with other code than this" if tables is None else "are not measured in this run"
        return [f"The learned ranker's ablations and costs {done}: `make ablations` measures them "
                "(`python -m toolbench_lib.analysis.ltr_study`, about 5 minutes).", ""]
    lines = []
    for name, table in tables.items():  # beside the other tables the report reads
        table.to_csv(cfg.tables_dir / f"ltr_{name}.csv", index=False)
    if "ablations" in tables:
        cells = tables["ablations"].shape[0] * (tables["ablations"].shape[1] - 1)  # variants × sets
        lines += ["**The learned ranker's ablations** (`ltr_study`, run 0's stubs, `candidates`; "
                  f"`tables/ltr_ablations.csv`): recall@{cfg.k} of each variant minus the full `ltr`'s; * "
                  f"where the paired 95% CI excludes 0, unadjusted over {fmt_count(cells)} cells (about "
                  f"{fmt_count(round(cells / 20))} by chance).", "",
                  md_table(tables["ablations"], numparse=False), "",
                  *tool_feature_lines(tables["ablations"])]
    if "costs" in tables:
        lines += ["**Their costs** beside `fuse4` (`tables/ltr_costs.csv`):", "", md_table(tables["costs"]),
                  ""]
    return lines


def tool_feature_lines(ablations: pd.DataFrame) -> list[str]:
    """What dropping the tool-level features does to ``ltr`` on G1, and why `candidates` favours them."""
    tool = ablations.set_index(ablations.columns[0]).filter(like="tool-level", axis=0)
    if not len(tool) or "G1" not in tool:
        return []
    return [f"Without tool-level features `ltr` changes by {tool['G1'].iloc[0]} on G1: `candidates` credits "
            "every endpoint of a query's tools, so features that group a tool's endpoints are rewarded by "
            "that definition, not only by finding what a query needs.", ""]


UNSEEN_TABLE = "retriever_unseen_queries"  # notebook 12: the validation sets' queries, seen and kept
UNSEEN_GOAL_TABLE = "retriever_fusion_unseen"  # notebook 12: the fused methods, unchanged, on unseen sets


def unseen_lines(counts: pd.DataFrame | None, ledger: Ledger) -> list[str]:
    """How many validation queries repeat a design query's text (left out of the unseen sets)."""
    if counts is None or counts.empty:
        return []
    n, seen = int(counts["n"].sum()), int(counts["seen"].sum())
    dropped = [str(s) for s in counts.loc[~counts["kept"].astype(bool), "subset"]]
    return ["", f"Of the validation sets' {fmt_count(n)} queries, "
            f"{ledger.put('validation_queries_repeating_a_design_text', fmt_count(seen))} repeat a design "
            "query's text (case and spacing aside) and are left out, so no fused or learned method is scored "
            "on a text it was fitted on"
            + (f"; {', '.join(dropped)} kept too few to be scored" if dropped else "") + ". The learned "
            "rankers are cross-fitted over the design and unseen sets together, so an unseen query is scored "
            "by a model trained on the other queries of its set, where a fused method comes unchanged from "
            "the design sets; the learned ranker's ablations measure `ltr` trained on G1–G3 alone."]


METHOD_TERM = re.compile(r"^- ((?:\*\*`[^`]+`\*\*(?:, )?)+):")  # one method's bullet, or several's


def glossary_section(material, body: str | None = None) -> list[str]:
    """The glossary: every term, and the method names ``body`` uses (all without a body)."""
    terms = re.sub(r" \*\(`[^`]*`\)\*", "", material.glossary)  # where the toolkit computes it: notebook 09
    if body is not None:
        kept = []
        for line in terms.split("\n"):
            m = METHOD_TERM.match(line)
            used = [n for n in re.findall(r"`([^`]+)`", m.group(1)) if re.search(
                rf"(?<![\w@-]){re.escape(n)}(?![\w@-])", body)] if m else []
            kept += [line.replace(m.group(1), ", ".join(f"**`{n}`**" for n in used))] if used else \
                [] if m else [line]
        terms = "\n".join(kept)
    return ["## Glossary", "", terms, ""]


def report_markdown(cfg: ExperimentConfig, report: pd.DataFrame, references: dict,
                    provenance: list[dict], material, ledger: Ledger) -> str:
    """The whole ``report.md``: the front, one section per paper claim with its rows and figures, the
    glossary, then the appendix (scorecard, wide tables, worked queries, provenance)."""
    rows, crossings = endpoint_rows(cfg), endpoint_rows(cfg, CROSSOVER_TABLES)
    cache, prov = TableCache(cfg.tables_dir), provenance[0] if provenance else {}
    g2i = cache.get(G2_INSTRUCTION_TABLE)  # the set the paper's G2 numbers fit
    g2i = g2i if g2i is not None and len(rows) else pd.DataFrame()
    beyond, rel, dense_test, shift = "", None, [], ""
    if len(rows):
        rel = cache.get(RELEVANT_TABLE)
        rel = rel[rel["comparison"].str.contains(f"@{cfg.k} ", regex=False)] if rel is not None else None
        limits_of = crossover_limits(rows, {"`relevant`": rel, "G2_instruction": g2i})
        shift = crossover_test(crossings, ledger).removeprefix("- ")
        dense_test = [x.removeprefix("- ") for x in (g2_gain_line(cache, references),) if x]
        beyond = answer_sentence(rows, crossover_beyond(crossings, ledger), limits_of)
    parts = [f"# Plan or Retrieve First? Reproduction report for run `{cfg.run_name}`", "",
             "## The question and the answer", "",
             "**The question.** Does searching with the raw query (RtP) or with stubs the planner writes "
             "first (PtR) find more ground-truth APIs, and does the winner flip between single-tool (G1) and "
             "multi-tool (G2, G3) queries?", "",
             f"**In plain words.** {plain_words(cache, '', intro=False)}", "",
             verdict(cache, prov.get("llm_model", "")), "",
             TERMS, "",
             *([beyond, ""] if beyond.startswith("**The answer") else []),
             PRIMARY.at(cfg.k).text(robustness=False, temperatures=prov.get("settings", {})), ""]
    same_quantities(report, ledger, cfg.k)
    families = []  # the other families' verdict and table: in their own section
    if len(rows):
        table = beside_g2(rows, g2i)
        dense = table["retriever"] == "dense"
        parts += [endpoint_table_markdown(table[dense], ledger, rel), ""] if dense.any() else []
        parts += [shift, ""] if shift else []
        if (~dense).any():  # the other families, beyond the paper: in their own section
            families = [*([beyond, ""] if beyond.startswith("**Beyond") else []),
                        "The primary endpoint per family:", "",
                        endpoint_table_markdown(table[~dense], ledger, rel, False), ""]
    else:
        parts += ["No answer: this run saved no primary-endpoint table (notebooks 02 and 12 save it).", ""]
    plan = f"{TEACHING_FILE}#{anchor(SESSION_HEADING)}"
    parts += [f"Reading groups: [a session plan and questions]({plan}).", "",
              *limits(rows, report, cfg.tables_dir)]
    against = []  # after the paper's sections, whose numbers it reads
    for title, lines in paper_against_itself(references, cache.get("divergence_readings"),
                                             cache.get("data_gt_sizes"), material.examples_table):
        against += [f"**{title}:**", "", *[f"- {t}" for t in lines], ""]
    after = {"setup": setup_box(cfg, provenance, references, rows),  # the session's first block reads it
             "stubs": ["### The paper's Table 2 examples in this run", "", *examples_lines(material, cfg.k)]}
    for key, heading, prefixes, claim, quotes in SECTIONS:
        sec = report[report["section"].astype(str).str.startswith(tuple(prefixes))]
        verdicts = section_verdicts(cfg, key, sec)
        if key == "main":  # the file the paper's G2 fits, read in full; the later runs' temperature
            fit = fit_sentence(report)
            verdicts[1:1] = [fit + "."] * bool(fit) + dense_test + weak_lead_lines(rows)
            verdicts += robustness_lines(cfg, prov.get("settings", {}))
        parts += [f"## {heading}", "", f"**The paper's claim, in short.** {claim} {paper_quotes(quotes)}", "",
                  f"**Here.** {section_sentence(sec)}" if len(sec) else "", "",
                  *([*(f"- {v}" for v in verdicts), ""] if verdicts else []),
                  md_table(shown(sec)) if len(sec) else "No reference number here.", "", *margin_lines(sec),
                  *figures_markdown(cfg, key), *after.get(key, [])]
    runs_test = ([f"The primary test beside Holm over every comparison at once, the paper's "
                  f"*“{QUOTES['one_sample']}”* and Wilcoxon's signed-rank test over queries (Pratt's: zero "
                  "differences ranked; robustness: "
                  "they give no verdict; neither clusters the queries):", "",
                  runs_test_table(rows, ledger), "", robustness_sentence(rows), "",
                  two_questions(rows, ledger, prov.get("settings", {}).get("run_temperature")), ""]
                 if len(rows) and "p_runs_robustness" in rows else [])
    parts += [*(["## Where the paper disagrees with itself", "", *against] if against else []),
              "## Retriever families", "",
              "The figures show recall per set, retriever family and architecture. The fused and learned "
              f"methods built on these families are in [{APPENDIX_BEYOND.split(':')[0]}]"
              f"(#{anchor(APPENDIX_BEYOND)}).", "", *families, *runs_test,
              *figures_markdown(cfg, "retriever"),
              "## Ablations behind the named causes", "", *figures_markdown(cfg, "ablations")]
    if other := figures_markdown(cfg, "other"):
        parts += ["## Other figures", "", *other]
    glossary_at = len(parts)  # the glossary goes here, once the whole report says which methods it names
    parts += [f"## {APPENDIX_A}", "", *([fare_line(report), ""] if len(report) else []),
              *right_and_wrong(report),
              f"Reference numbers: the paper's text, each number quoted from it (`references/paper.yaml`, "
              f"version {references['version']}).", "",
              "`status` sets the paper's value against this run's 95% CI (bootstrap over queries, paired t "
              "for a difference; for a share, resampling API samples where its table saves a CI, else "
              "Wilson); a number without sampling is compared at the paper's last decimal, or within a "
              "tolerance this project chose for the paper's “~” (in `tables/scorecard.csv`; beside a CI such "
              "a tolerance decides nothing: the paper's value must lie in the CI). `claim:` marks a claim "
              "the paper makes in words, read as a bound or an equivalence (`claim: 0 ± m`, a margin this "
              "project derived). A row that differs names its cause "
              "(`references/causes.yaml`).", "", *STATUS_LEGEND, *two_sample_lines(report),
              f"Below, all {len(report)} rows by status (the paragraph above counts the paper's numbers, the"
              " rows read again and its claims in words apart), those that differ by an untested setup "
              "difference (*cause untested*) or by construction, by cause; then each other row that "
              "differs, what it measures and its cause. The second readings (another G2 file, ground truth,"
              " divergence or hit definition) were added after seeing which one fits the paper's number: "
              "one that fits is a hypothesis about the paper's method, not a test of it.", "",
              *(scorecard_lines(report) if len(report) else ["No reference number."]), ""]
    parts += [f"## {APPENDIX_BEYOND}", "", *goal_lines(cfg, ledger), *ltr_lines(cfg),
              *figures_markdown(cfg, "beyond"),
              *table_section(cfg, APPENDIX_TABLES_HEADING, APPENDIX_TABLES),
              f"## {APPENDIX_WORKED}", "",
              f"Every worked query and Table 2 example with its ground truth, PtR's stubs and both "
              f"top-{cfg.k} lists side by side is in [`{TEACHING_FILE}`]({TEACHING_FILE}), written beside "
              "this report; each link below opens the explorer while `make explore` serves it.", "",
              *worked_links(material, cfg.k, cfg.run_name), f"## {APPENDIX_RUN}", ""]
    if provenance:
        parts.append(provenance_markdown(prov))
        siblings = sorted(f"`{d.name}`" for d in cfg.out_dir.parent.glob(f"{cfg.run_name}-*") if d.is_dir())
        if siblings:
            parts += ["", "The retriever, validation and G2_instruction studies (notebooks 10–12) are stored "
                          f"beside this folder: {', '.join(siblings)}."]
        if len(provenance) > 1:
            others = ", ".join(f"`{p['study_folder']}`" for p in provenance[1:])
            parts += ["", "Older studies kept in `runs/` (earlier code or settings; no table here reads "
                          f"them): {others}."]
    else:
        parts.append(f"No stored study found under `{cfg.out_dir / 'runs'}`.")
    parts[glossary_at:glossary_at] = glossary_section(material, "\n".join(parts))
    parts[1:1] = ["", contents_line("\n".join(parts))]
    return md_compact(number_figures("\n".join(parts).rstrip())) + "\n"


def contents_line(markdown: str) -> str:
    """The report's sections in one line of links, its table of contents (the page has its own)."""
    heads = re.findall(r"(?m)^## (.+)$", markdown)
    return "**Contents.** " + " · ".join(f"[{h.split(' (§')[0]}](#{anchor(h)})" for h in heads)


QUANTITIES_FILE = "report_quantities.json"
LTR_TABLE = "ltr_comparison"  # notebook 12: the learned rankers against the best single architecture
TEACHING_FILE = "teaching.md"


def worked_links(material, k: int, run_name: str) -> list[str]:
    """One line per worked query: its role and a link that opens it in the explorer (``make explore``)."""
    rows = [f"- {TITLES[p.role]}: query {md_code(p.qkey)} "
            f"([open]({explorer_url(run_name, p.qkey, ('rtp', 'ptr'), k)}))"
            for p in material.picks.itertuples() if isinstance(p.qkey, str)]
    return [*rows, ""] if rows else []


def examples_lines(material, k: int) -> list[str]:
    """The paper's Table 2 examples as one compact table (the full blocks go to :data:`TEACHING_FILE`)."""
    t = material.examples_table
    if t is None or t.empty:
        return [material.examples[0] if material.examples else "No example of the paper's Table 2 is here.",
                ""]
    shown = t.drop(columns="query")  # the query's key: in the full blocks of TEACHING_FILE
    for col in shown.columns[1:5]:
        shown[col] = shown[col].map(fmt_number)
    agree = t["paper's leader"] == t["leader here"]
    exact = t.get("match", pd.Series("same task", index=t.index)) == "same task"
    loose = (f"; {int(agree[exact].sum())} of the {int(exact.sum())} whose task is the paper's own (the "
             "others share its APIs in another request)") if not exact.all() else ""
    return [f"{int(agree.sum())} of the {len(t)} examples in this study have the paper's leader (recall@{k}, "
            f"PtR's run 0){loose}. The last column: which ground truth could give both of the paper's "
            f"recalls (its ground truth, below). Each is shown in full in [`{TEACHING_FILE}`]"
            f"({TEACHING_FILE}), with those another study of the run holds, and a link to the explorer.", "",
            md_table(shown), ""]


def write_report(cfg: ExperimentConfig, references: Path = REFERENCES_FILE, material=None) -> Path:
    """Write ``report.md``, ``teaching.md``, ``report_quantities.json`` and ``tables/scorecard.csv`` into the
    run folder; returns the Markdown path."""
    refs = load_references(references)
    report = compare_entries(refs["entries"], cfg.tables_dir)
    cfg.tables_dir.mkdir(parents=True, exist_ok=True)
    report.to_csv(cfg.tables_dir / f"{SCORECARD_TABLE}.csv", index=False)  # beside the tables it reads
    (cfg.out_dir / "report.csv").unlink(missing_ok=True)  # where an older version wrote the scorecard
    ledger = Ledger()
    path = cfg.out_dir / "report.md"
    material = teaching_material(cfg) if material is None else material
    provenance = run_provenance(cfg)
    text = report_markdown(cfg, report, refs, provenance, material, ledger)
    own = provenance[0] if provenance else {}
    path.write_text(text, encoding="utf-8")
    (cfg.out_dir / TEACHING_FILE).write_text(
        "\n".join([f"# A reading-group session, worked queries and the paper's Table 2 examples: run "
                   f"`{cfg.run_name}`", "", *session_lines(cfg, text, references, own),
                   "## Worked queries", "", *material.worked, "## The paper's Table 2 examples", "",
                   *material.examples]).rstrip() + "\n", encoding="utf-8")
    (cfg.out_dir / QUANTITIES_FILE).write_text(json.dumps(ledger.as_dict(), indent=1, ensure_ascii=False),
                                               encoding="utf-8")
    return path


def report_problems(cfg: ExperimentConfig, references: Path = REFERENCES_FILE) -> list[str]:
    """The failed checks (:func:`.checks.check_report`) of the report in ``cfg``'s run folder, one line
    each; empty when it passes them all."""
    try:
        text = (cfg.out_dir / "report.md").read_text(encoding="utf-8")
        quantities = json.loads((cfg.out_dir / QUANTITIES_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [f"the report cannot be checked: {' '.join(str(exc).split())}"]
    rows = compare_entries(load_references(references)["entries"], cfg.tables_dir).to_dict("records")
    return check_report(text, quantities, rows, list(load_methods()), paper_text_collapsed())
