"""The report's glossary: its terms and every method's name, each with where the toolkit computes it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..config import K
from ..retrieval.methods import CHOSEN_FUSIONS, describe_method, load_methods
from .scorecard import load_causes, not_run

MIN_KAPPA = 0.4  # below it a judged pass rate is not scored (references/paper.yaml, validity.min_kappa)


@dataclass(frozen=True)
class Term:
    """One glossary entry: the term, its definition (``{k}`` and ``{min_kappa}`` filled in) and where the
    toolkit computes it."""

    term: str
    definition: str
    where: str


GLOSSARY: tuple[Term, ...] = (
    Term("RtP (retrieve, then plan)",
         "The raw query itself is searched in the registry (embedded, with the dense retriever) and the k "
         "APIs most similar to it are shown to the planner, which writes the plan. No LLM call happens "
         "before retrieval.",
         "retrieval.retrievers"),
    Term("PtR (plan, then retrieve)",
         "The planner first writes stubs for the query without seeing any tool; each stub is searched in "
         "the registry, the hits of all stubs are merged by each API's best similarity, and the top k are "
         "shown to the planner.",
         "retrieval.retrievers, retrieval.rankings.merge_max"),
    Term("stub",
         "A tool the planner imagines before seeing any: a JSON object with a hypothesised tool name and a"
         " reasoning. The text searched for a stub is `name: reasoning`. A reply without usable stubs "
         "falls back to the raw query (`fell_back`).",
         "llm.parsing.parse_stubs, llm.parsing.stub_text"),
    Term("recall@k",
         "Of a query's ground-truth APIs, the share found among the top k retrieved (here k = {k}); then "
         "the mean over queries. A query whose ground truth holds more than k APIs cannot reach 1.",
         "eval.evaluation.relevance, eval.evaluation.metric_values"),
    Term("precision@k",
         "Of the top k retrieved APIs (here k = {k}), the share that are in the query's ground truth; then"
         " the mean over queries.",
         "eval.evaluation.relevance, eval.evaluation.metric_values"),
    Term("ground truth: candidates",
         "The query's whole `api_list` in ToolBench: every API of the tools sampled when the query was "
         "written. The default here: its mean size fits the paper's numbers (a hypothesis; its text says "
         "otherwise).",
         "data.queries"),
    Term("ground truth: relevant",
         "ToolBench's `relevant APIs`: the APIs the query was written to need, a strict subset of the "
         "candidates. Fewer APIs to find, so recall is usually higher and precision lower.",
         "data.queries"),
    Term("fidelity",
         "Of the APIs a plan names (one per step), the share that were in the retrieved set shown to the "
         "planner: 1 means the planner never reaches outside what retrieval gave it.",
         "llm.plan_names.fidelity, analysis.trajectory"),
    Term("divergence",
         "How differently the two architectures choose tools: the share of queries whose RtP and PtR top-k"
         " lists share no API (retrieval divergence), and the Jaccard index of the APIs their plans name "
         "(trajectory divergence).",
         "analysis.scale.no_overlap, analysis.trajectory.jaccard"),
    Term("bootstrap CI",
         "A 95% CI of a mean over queries (a recall, a share of queries won) from resampling ToolBench's API "
         "samples (the clustered test's clusters) with replacement: the 2.5th and 97.5th percentiles of the "
         "resampled means. A paired difference (PtR − RtP) gets the clustered paired t-test's own interval, "
         "which excludes 0 exactly when its unadjusted p is below 0.05. Divergence (`divergence_readings`) "
         "resamples the samples alike.",
         "eval.stats.grouped_bootstrap_ci, eval.stats.t_ci"),
    Term("clustered paired t-test",
         "ToolBench wrote several queries from one sample of APIs, so they are not independent. The paired "
         "t-test takes each sample (queries with the same `candidates`) as one cluster: its standard error "
         "is the CR2 cluster-robust one and its t has Bell and McCaffrey's degrees of freedom (a "
         "Satterthwaite approximation: G − 1 for G clusters of one size, fewer where a few clusters hold "
         "most queries; `df` in `primary_endpoint`). With every query its own sample it is the ordinary "
         "paired t-test.",
         "eval.stats.mean_se, eval.compare"),
    Term("shift towards PtR",
         "How PtR − RtP changes from G1 to a later set, as one test: the sets hold different queries, so "
         "their clustered standard errors add (Welch–Satterthwaite df). The paper's crossover is the per-set "
         "pattern instead: RtP ahead on G1, PtR on G2 and G3.",
         "eval.compare.interactions, analysis.endpoint.interaction_table"),
    Term("Holm correction",
         "Several tests at once inflate false alarms; Holm's step-down method raises each p-value so that "
         "the chance of any false alarm among them stays at or below the test level (5%). A CI shown "
         "beside a Holm p is widened alike (level 1 − 0.05 · p / p_Holm), so it excludes 0 exactly when "
         "p_Holm < 0.05: it agrees with Holm's decisions but is not a simultaneous interval (the family's "
         "CIs together may cover less than 95%).",
         "eval.stats.holm (statsmodels), eval.compare.holm_ci"),
    Term("status of a scorecard row",
         "Each row sets one of the paper's numbers beside this run's and its 95% CI: *consistent* when the "
         "CI holds it (not a confirmation), else *differs*, then its cause; *inconclusive* where the CI "
         "holds a claimed bound or crosses a margin (Appendix A's legend has each rule). A *claim in words* "
         "is a sentence of the paper scored as a bound or an ordering; a *second reading* measures a number "
         "another way (another G2 file, ground truth or definition), chosen after seeing the paper's.",
         "report.locate.compare, report.scorecard"),
    Term("equivalence margin",
         "The paper's \"stable\" and \"no signal\" claims, read as \"the difference lies within ± a "
         "margin\" (`claim: 0 ± m` in the scorecard; each margin's reason is in `tables/scorecard.csv`'s "
         "basis): consistent when the 95% CI lies inside it (two one-sided tests at 2.5% each, stricter "
         "than the usual 90% CI), differs when outside, inconclusive when it crosses a bound.",
         "report.locate.compare"),
    Term("pass rate (judged and objective)",
         "Judged: the share of plans an LLM judge calls \"Solved\". Objective: the share of plans that are "
         "not a refusal and name every ground-truth API (or an equivalent), which anyone can recount by "
         "hand.",
         "analysis.judge"),
    Term("judge kappa",
         "Cohen's kappa between the judge's \"Solved\" and the objective pass: 1 is full agreement, 0 is "
         "chance. Below {min_kappa} the judged pass rate is not scored against the paper (the judged one is "
         "only in the appendix). Where objective passes are rare, kappa cannot reach {min_kappa} (its most, "
         "*kappa max*, is low), so the judge is refused on other evidence: `solved rate none`, its "
         "\"Solved\" share of plans that name no ground-truth API (Appendix C; `kappa any` sets it against "
         "naming any).",
         "analysis.judge.kappa (scikit-learn)"),
    Term("retriever family",
         "How a searched text (query or stub) is matched to API documents: dense (cosine of embeddings in "
         "a FAISS flat index, the paper's), BM25 (word matching, bm25s) or hybrid (dense and BM25 rankings"
         " fused by min-max CombSUM, or by reciprocal-rank fusion in hybrid-rrf). Either architecture runs"
         " on any family (e.g. `ptr@bm25`).",
         "retrieval.families, retrieval.bm25"),
)


TERMS_MORE: tuple[Term, ...] = (
    Term("G1, G2, G3",
         "ToolBench's query groups: G1 single-tool queries (`G1_instruction`), G2 intra-category multi-tool "
         "queries (`G2_category_original` here, the one G2 file near the paper's 200 queries, with 199; "
         "`G2_instruction`, 106 solvable queries the paper's G2 numbers fit, beside it), G3 cross-category "
         "multi-tool queries (`G3_instruction_original`).",
         "data.queries"),
    Term("Intent-Registry Coupling",
         "The paper's explanation of the crossover: how directly a query's own words name its API. High on "
         "G1, where *“the raw query often contains the API’s name or brand directly, giving RtP a direct "
         "embedding match”*; low on G2 and G3, where *“a single embedding cannot capture multi-faceted "
         "intent”*. High coupling favours RtP. The brand-word ablation removes the query's brand names from "
         "the stubs, and from the query too: the coupling tested on G1 without an LLM call.",
         "analysis.ablations"),
    Term("design and unseen sets",
         "Design sets (G1-G3) are the queries on which fused methods were chosen and tuned; unseen sets "
         "(G1_category, G1_tool, G2_instruction) share no query text with them and score the chosen methods "
         "unchanged. The learned rankers (`ltr`) are cross-fitted over every set instead: each unseen query "
         "is scored by a model that never saw it but was trained on the other queries of its set.",
         "analysis.fusion_board.unseen_keys"),
    Term("primary endpoint",
         "The one measure the study's answer rests on: recall@{k} (candidates), each query's score the mean "
         "over the recorded runs, PtR minus RtP per set by the clustered paired t-test, Holm over the three "
         "sets.",
         "analysis.endpoint.PRIMARY"),
    Term("the goal (beyond the paper)",
         "A fused or learned method meets the goal when, on every set (the design sets and the unseen sets "
         "alike), the paired 95% CI of its recall margin over the best single architecture of any family "
         "lies above 0.",
         "analysis.fusion_board.GOAL"),
    Term("used share",
         "Of the top-k APIs shown to the planner, the share its plan names: how much of what retrieval gave "
         "it a plan uses.",
         "analysis.trajectory.plan_table"),
    Term("coverage",
         "Of a query's ground-truth APIs, the share that at least one of its stubs finds in that stub's own "
         "top k (before the stubs' hits are merged).",
         "analysis.ablations.coverage"),
    Term("AUROC",
         "The chance that a query of one kind (here: one PtR wins) scores higher on a signal than a query of "
         "the other kind: 0.5 is chance, 1 a perfect signal. Its 95% CI resamples API samples whole.",
         "eval.stats.auroc (scikit-learn), eval.stats.auroc_ci"),
    Term("two-sample reading",
         "This run's 95% CI widened by √2 about its estimate, as if the paper's number were an estimate as "
         "uncertain as this run's. The paper gives only a spread over runs, so this is an assumption, read "
         "beside the scored status, never in its place.",
         "report.locate.two_sample"),
    Term("Wilson interval, kappa max",
         "Wilson: a 95% CI of a share from its count and total, used where a table saves no resampled CI. "
         "kappa max: the largest kappa two pass rates allow (when they differ, kappa cannot reach 1).",
         "eval.stats.wilson_ci, analysis.judge"),
    Term("nDCG, MRR, COMP@k",
         "nDCG@k rewards ground-truth APIs ranked higher; MRR is the mean of 1 / rank of the first hit; "
         "COMP@k is 1 when every ground-truth API is in the top k.",
         "eval.evaluation.metric_values"),
)
NOTATION = ("In a fused method, `q` is the ranking of the query itself, `s` the merged ranking of its stubs "
            "and `s*` each stub's own ranking; `.dense` and `.bm25` name the retriever family. A name in a "
            "figure reads by its parts: `rr` round-robin, `rrf` reciprocal-rank fusion, `comb`max/sum/mnz "
            "CombMAX/SUM/MNZ, `-mm` min-max scaling of each ranking's scores to 0..1 first, `2` fusing `q` "
            "and `s` (otherwise `q` and `s*`), `-cv` tuned by cross-validation, `route-` fusing only below a "
            "tuned top-1 cosine of RtP, `fuse4`/`fuse2` dense with BM25.")


def glossary(k: int = K, min_kappa: float = MIN_KAPPA) -> pd.DataFrame:
    """``term, definition, where``: :data:`GLOSSARY` with this run's ``k`` and the kappa threshold."""
    return pd.DataFrame([{"term": t.term, "definition": t.definition.format(k=k, min_kappa=min_kappa),
                          "where": t.where} for t in (*GLOSSARY, *TERMS_MORE)])


def glossary_markdown(k: int = K, min_kappa: float = MIN_KAPPA, tables_dir: Path | None = None) -> str:
    """The glossary as a Markdown definition list (one bullet per term); a tested cause whose ablation is not
    in ``tables_dir`` is said to be untested in this run."""
    terms = "\n".join(f"- **{r.term}**: {r.definition} *(`{r.where}`)*"
                      for r in glossary(k, min_kappa).itertuples())
    names = [*load_methods(), *CHOSEN_FUSIONS]
    plain = [n for n in names if n.split("@")[0] in ("rtp", "ptr")
             and describe_method(n).endswith("retrieval.")]  # one line: an architecture with a family
    both = [f"- {', '.join(f'**`{n}`**' for n in plain)}: RtP or PtR with the retriever family after `@`, "
            "dense without one."] if plain else []
    methods = "\n".join(both + [f"- **`{n}`**: {describe_method(n)}" for n in names if n not in plain])
    causes = "\n".join(f"- **`{cid}`** ({c['kind']}{', by a proxy: ' + c['proxy'] if c.get('proxy') else ''}"
                       f"{', a reading' if c.get('reading') else ''}"
                       f"{'; its ablation did not run here: untested' if not_run(c, tables_dir) else ''}): "
                       f"{' '.join(c['title'].split())}"
                       for cid, c in load_causes().items())
    return (f"{terms}\n\n**Method names.** {NOTATION}\n\n{methods}\n\n**Cause labels** "
            "(`references/causes.yaml`; *tested* by an ablation (*by a proxy*: through a stand-in, so "
            "*indicative*, never *explained*), *setup* untested, *construction* by this run's data or "
            f"definitions):\n\n{causes}")
