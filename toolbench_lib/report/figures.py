"""The report's figures: each saved figure's section and caption, and the captions numbered in reading
order (no file stem in a caption)."""

from __future__ import annotations

import re

from ..analysis.numbers import fmt_count
from ..study.experiment import ExperimentConfig
from .locate import TableCache

# Figures by name: (section key, caption). A caption says what to see; a figure appears once.
FIGURES = {
    "pipeline": ("setup", "The two pipelines: RtP searches the registry with the query itself, while PtR has "
                          "the planner write stubs first, searches with each stub and keeps each API's best "
                          "similarity."),
    "data_categories": ("setup", "APIs per category in this run's registry, largest first: how unevenly the "
                                 "APIs spread, so how crowded a query's neighbourhood can be."),
    "data_doc_lengths": ("setup", "Length of the embedded API documents in characters, with the cap and the "
                                  "median marked: most are short, so an API's name carries much of what the "
                                  "embedder sees."),
    "figure2": ("main", "Recall and precision (bootstrap 95% CIs), objective pass rate and the share of "
                        "queries each architecture wins on recall (95% CI resampling API samples) per set; "
                        "diamonds are the paper's values (its judged pass rates only beside judged bars; "
                        "each objective bar has a line at the most it can be: the share of plans shown every "
                        "ground-truth API)."),
    "runs_recall": ("main", "PtR's recall in each run (dots) against RtP's single value per set: the spread "
                            "of the dots is the run-to-run noise the paper's test over runs measures."),
    "k_ablation": ("budget", "Recall (top), precision (middle) and PtR − RtP recall (bars) against the "
                             "retrieval budget k per set (candidates), with 95% CIs: a bar whose CI excludes "
                             "0 marks a k where one architecture is ahead (each k unadjusted)."),
    "k_ablation_relevant": ("budget", "The same curves on the narrower relevant-API ground truth, the one "
                                      "the paper's words name: whether the two architectures' ordering over "
                                      "k holds under both definitions."),
    "scale_recall": ("scale", "Recall on sub-registries of growing size, mean over seeds, and PtR − RtP "
                              "with its 95% CI: both architectures lose recall as distractors are added, and "
                              "the gap between them is what matters."),
    "scale_divergence": ("scale", "Share of queries whose RtP and PtR top-k lists share no API (solid) or "
                                  "differ at all (dashed), by registry size: the paper's 88% and 98% are "
                                  "the stars; which reading they fit is its definition question."),
    "figure4": ("trajectory", "Plan fidelity, overlap of the two plans' APIs, used share, steps and APIs "
                              "named per set (95% CIs), with the paper's values as markers beside this run's "
                              "bars (its used-share ranges are in the table above)."),
    "retriever_recall": (
        "retriever",
        "RtP and PtR with each retriever family (dense, BM25, hybrid), recall@k with each bar's own 95% CI "
        "per set: the levels; whether PtR beats RtP is the paired test of the front's table (bars whose "
        "CIs overlap can still differ significantly)."),
    "retriever_k": (
        "retriever",
        "Recall against k for each family, colour for the architecture and line style for the family: "
        "whether a family's ordering of RtP and PtR holds at every budget."),
    "retriever_scale": (
        "retriever",
        "BM25 alone on sub-registries of growing size, each with an index of its own (±1 std over seeds):"
        " whether the lexical family's gap keeps its sign as the registry grows."),
    "ablation_decomposition": (
        "ablations",
        "PtR with the LLM's stubs and with rule-based stubs (more, narrower stubs) beside RtP, each bar "
        "with its own 95% CI (run 0): what the breadth of the stubs alone changes (the bars share their "
        "queries: overlapping CIs can still differ)."),
    "ablation_divergence": (
        "ablations",
        "Disjoint top-k lists on 1,000-API sub-registries drawn three ways (the set's ground truth, the "
        "query's own, none) and the full registry: how much of the small-registry divergence the draw "
        "makes."),
    "ablation_stub_text": (
        "ablations",
        "PtR's recall when a stub is searched by its name, its reasoning, both, or with brand words "
        "removed, and RtP's with and without the query's brand words, each bar with its own 95% CI (run 0): "
        "which part of a stub finds the APIs (the bars share their queries: overlapping CIs can still "
        "differ)."),
    "ablation_embedder": (
        "ablations",
        "RtP's and PtR's recall with two embedders (all-MiniLM-L6-v2, all-mpnet-base-v2, a stronger one "
        "standing in for the paper's GTE-base, which is not installable offline) on one sub-registry, the "
        "same stubs (hatched: the second embedder, with the 95% CI of its change): "
        "whether the embedder changes which architecture leads a set."),
    "beyond_recall_vs_k": (
        "beyond",
        "Recall against k for RtP, PtR (solid) and the fused methods closest to the goal (dashed), per "
        "set."),
    "beyond_ndcg_vs_k": (
        "beyond",
        "nDCG against k for the same methods: whether a fused method also ranks the found APIs higher."),
    "beyond_comp_vs_k": (
        "beyond",
        "Completeness (every ground-truth API of the query found) against k for the same methods: the "
        "strictest reading of a multi-tool query."),
    "beyond_cost_frontier": (
        "beyond",
        "Recall@k against tokens per query: RtP, PtR and the best method at each cost with 95% CIs, every "
        "other method a grey dot; a method is worth its cost when no cheaper one has higher recall."),
    "beyond_router_regions": (
        "beyond",
        "Each query by RtP's top-1 cosine (x) and what the fused list gains over RtP's (y): "
        "route-then-fuse, which makes the stub call only below a cosine threshold, keeps RtP's list right "
        "of the dashed threshold, so a good threshold leaves the gains on its left."),
    "routing_recall_vs_share": ("cost", "Recall@5 against the share of queries routed to PtR per set: a "
                                        "marker per policy (star: the per-query oracle, a bound), a curve "
                                        "per signal over every threshold; a policy helps above both "
                                        "always-RtP and always-PtR."),
}
FIGURE_PREFIXES = {
    "retriever_": ("retriever", "Retriever families, {name}: compare the families' bars "
                                "within a set; a family whose PtR bar clears its RtP bar reproduces the "
                                "paper there."),
    "ablation_": ("ablations", "Ablation behind a named cause, {name}: the cause explains a "
                               "row only when this effect is large enough to cover the gap to the paper."),
    "beyond_": ("beyond", "Fused and learned methods, {name}: a method beats the paper's "
                          "architectures only where it clears the best single architecture of any family."),
    "ltr_": ("beyond", "The learned ranker, {name}: its gain over the best single architecture of any "
                       "family, per set, with its paired 95% CI."),
}


def figure_section(stem: str) -> tuple[str, str]:
    """``(section key, caption)`` of a saved figure; ``("other", ...)`` for a figure no section claims."""
    if stem in FIGURES:
        return FIGURES[stem]
    for prefix, (key, caption) in FIGURE_PREFIXES.items():
        if stem.startswith(prefix):
            return key, caption.format(name=stem[len(prefix):].replace("_", " "))
    return "other", (f"A figure of {stem.replace('_', ' ')}, saved by a notebook for no section of the "
                     "paper; the notebook that saved it explains how to read it.")


def alt_text(caption: str) -> str:
    """A figure's alt text: its caption's title, up to the first colon, sentence end, semicolon or ", with"
    (the caption follows the figure), without a parenthesis left open."""
    alt = re.split(r": |\. |; |, with ", caption, maxsplit=1)[0]
    return alt[:alt.rfind(" (")] if alt.count("(") > alt.count(")") else alt


# A figure drawn on a sample of its own: (table, its queries-per-set column, its registry-size column).
SCOPES = {"ablation_embedder": ("ablation_embedder", "n_queries", "registry_size")}


def scope_text(cfg: ExperimentConfig, stem: str) -> str:
    """The sample a figure of :data:`SCOPES` was drawn on, from its table (empty without it)."""
    table, queries, apis = SCOPES.get(stem, ("", "", ""))
    t = TableCache(cfg.tables_dir).get(table) if table else None
    if t is None or not {queries, apis} <= set(t):
        return ""
    lo, hi = fmt_count(t[queries].min()), fmt_count(t[queries].max())
    n = lo if lo == hi else f"{lo}–{hi}"
    return f" Its sample: {n} queries per set, a sub-registry of {fmt_count(t[apis].max())} APIs."


def figures_markdown(cfg: ExperimentConfig, key: str) -> list[str]:
    """The figures of one section in the order :data:`FIGURES` lists them, each with its caption (numbered by
    :func:`number_figures`)."""
    parts, order = [], list(FIGURES)  # the order FIGURES lists them; other figures after, by name
    folder = cfg.figures_dir
    files = [p for e in ("png", "svg", "jpg") for p in folder.glob(f"*.{e}")] if folder.is_dir() else []
    for p in sorted(files, key=lambda p: (order.index(p.stem) if p.stem in order else len(order), p.stem, p)):
        section, caption = figure_section(p.stem)
        if section == key:
            alt = alt_text(caption)
            path = p.relative_to(cfg.out_dir).as_posix()
            paper = f"(The paper's Figure {PAPER_FIGURES[p.stem]}.) " if p.stem in PAPER_FIGURES else ""
            parts += [f"![{alt}]({path})", "", f"{FIGURE_MARK} {paper}{caption}{scope_text(cfg, p.stem)}", ""]
    return parts


FIGURE_MARK = "*Figure.*"
PAPER_FIGURES = {"figure2": 2, "scale_recall": 3, "scale_divergence": 3, "figure4": 4}  # the paper's redrawn


def number_figures(markdown: str) -> str:
    """Each figure caption's mark (:data:`FIGURE_MARK`) as ``*Figure n.*``, numbered in reading order."""
    count = iter(range(1, 10_000))
    return re.sub(r"(?m)^" + re.escape(FIGURE_MARK), lambda _: f"*Figure R{next(count)}.*", markdown)
