# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 12 · Plan or retrieve first — with which retriever?
#
# The paper compares the two architectures with one retriever: a dense embedder over a FAISS flat index.
# Retrieval benchmarks (BEIR, MTEB, ToolRet) report lexical BM25 beside dense models because lexical matching
# is strong where queries name things, and ToolBench queries often name tools and brands. This notebook
# makes the retriever a factor of the study: RtP searches the query and PtR searches each stub with
#
# - **dense**: cosine over the embedder's vectors (the paper's retriever, the rest of this toolkit's default);
# - **bm25**: BM25 (bm25s; Lucene scoring, English stopwords, Snowball stemmer) over exactly the API texts the
#   dense index embeds;
# - **hybrid**: both, fused per searched text by a min-max normalised weighted sum (0.5 / 0.5).
#
# Every query of G1, G2 and G3 recorded in every run is used, over the study's independent runs of the stub
# writer (the same stubs for every family). PtR merges its stubs' rankings per API by the best score, as the
# paper defines it. Then fused methods over (family × searched text) rankings are chosen on G1–G3 and applied,
# unchanged, to query sets the design never saw.

# %% tags=["parameters"]
from toolbench_lib import config  # the defaults: `make run`'s

run_name = "default"
smoke = False
data_dir = None
subsets = list(config.SUBSETS)
backend = "replay"
cassette = None
embedder = config.EMBEDDER
k = config.K
runs = config.RUNS
plan_limit = config.PLAN_LIMIT
max_apis = None
limit = None
seed = config.SEED
scale_seeds = config.SCALE_SEEDS
gt = "candidates"
retriever_runs = 4
retrievers = ["dense", "bm25", "hybrid"]
validation_sets = ["G1_category", "G1_tool", "G2_instruction"]

# %%
from dataclasses import replace

import pandas as pd
from IPython.display import Image, Markdown, display

from toolbench_lib.analysis import fusion_board
from toolbench_lib.analysis import retrievers as rv
from toolbench_lib.analysis.display import format_numbers
from toolbench_lib.analysis.style import use_style
from toolbench_lib.study.experiment import (
    ExperimentConfig,
    get_g2_instruction_study,
    get_retrievers_study,
    get_study,
    provenance_line,
    save_figure,
    save_tables,
)

# %matplotlib inline
params = dict(run_name=run_name, smoke=smoke, data_dir=data_dir, subsets=subsets, backend=backend,
              cassette=cassette, embedder=embedder, k=k, runs=runs, plan_limit=plan_limit, max_apis=max_apis,
              limit=limit, seed=seed, scale_seeds=scale_seeds, retrievers=retrievers)
cfg = ExperimentConfig.from_params(**params, gt=gt)
use_style()
setup, result = get_study(cfg)
rcfg, rsetup, study = get_retrievers_study(cfg, retriever_runs, setup.ds.queries)
prov = provenance_line(study) + f", retrievers {', '.join(rv.families_of(study))}, gt={gt}"
print(prov)
display(Markdown(rv.provenance_markdown(study)))

# %% [markdown]
# ## The primary endpoint with every retriever
# The same comparison as notebook 02's primary endpoint (`analysis.endpoint.PRIMARY`), per retriever family:
# PtR − RtP recall@k per set with the paired t-test's 95% CI, the test Holm-corrected over the three sets of
# the family, and the paper's test over runs. The report's front states one conclusion per family from it.
# The shift towards PtR (the crossover as one test) per family: how PtR − RtP changes from G1 to G2 and G3
# (as in notebook 02).

# %%
from toolbench_lib.analysis.endpoint import PRIMARY, endpoint_table, interaction_table  # noqa: E402
from toolbench_lib.analysis.references import paper_value  # noqa: E402

paper_recall = {s: {m: v for m in ("rtp", "ptr") if (v := paper_value(f"{s.lower()}_{m}_recall")) is not None}
                for s in ("G1", "G2", "G3")}
families_endpoint = endpoint_table(study, PRIMARY.at(cfg.k), paper=paper_recall)
families_crossover = interaction_table(study, PRIMARY.at(cfg.k), paper=paper_recall)
save_tables({"primary_endpoint_families": families_endpoint, "primary_crossover_families": families_crossover},
            cfg, prov)
display(families_endpoint.drop(columns=["p_family"]).round(4))
display(families_crossover.round(4))

# %% [markdown]
# ## Recall per retriever family and architecture
#
# Recall@k is the mean over runs of each set's mean over queries, with a 95% bootstrap CI over queries. RtP
# calls no LLM before planning; PtR calls it once for its stubs.

# %%
# Kept (checksummed) beside the stored study, so a warm run reads them instead of computing them again.
tables = rv.cached_tables(rcfg.study_dir, f"k{cfg.k}-{gt}", lambda: rv.study_tables(study, cfg.k, gt))
save_tables(tables, cfg, prov)
display(format_numbers(tables["retriever_main"], 3))
display(Image(filename=str(save_figure(rv.family_figure(tables["retriever_main"], cfg.k), "retriever_recall",
                                       cfg))))

# %% [markdown]
# ## Does PtR beat RtP, with each retriever?
#
# Per set and family: PtR − RtP recall@k per query (mean over runs), the paired t-test and its CI,
# Holm-adjusted over the sets of one family: the rows of `eval.compare`, the same test and family as the
# report's answer. Wilcoxon's test and the paper's test over runs are robustness columns only.

# %%
display(format_numbers(tables["retriever_tests"], 3))
display(Markdown(rv.crossover_sentence(tables["retriever_crossover"])))

# %% [markdown]
# ## The k-ablation, divergence and routing by subset, per family
#
# Recall against k (1 to 20, from the stored depth-20 rankings); the share of queries whose RtP and PtR top-k
# lists share no API; and the paper's routing policy (RtP for G1, PtR for G2/G3) against always one
# architecture and the better one per set.

# %%
display(Image(filename=str(save_figure(rv.family_k_figure(tables["retriever_k"]), "retriever_k", cfg))))
display(format_numbers(tables["retriever_divergence"], 3))
display(format_numbers(tables["retriever_routing"], 3))

# %% [markdown]
# ## The scale study with BM25
#
# The paper's scale study (notebook 04 with the dense retriever) with BM25: sub-registries of the same sizes and
# seeds, sampled in proportion to category sizes and keeping each set's ground truth, each a BM25 index of its
# own (BM25's term statistics are the sub-registry's). PtR uses run 0's stubs. The last column of the table is
# the share of queries whose RtP and PtR top-k lists share no API.

# %%
bm25_scale, gap = rv.cached_bm25_scale(rcfg.study_dir, rsetup, study, cfg.scale_sizes, cfg.scale_seeds,
                                       cfg.k, gt)
save_tables({"retriever_scale": bm25_scale, "retriever_scale_gap": gap}, cfg, prov)
display(format_numbers(gap, 3))
display(Image(filename=str(save_figure(rv.scale_figure(gap, cfg.k), "retriever_scale", cfg))))

# %% [markdown]
# ## Fused methods: chosen on G1–G3, applied unchanged to unseen sets
#
# Two fused methods over the runs the study already holds: one over the query's and the stubs' rankings of
# both families (one stub call), one over the query's two rankings only (no LLM call). Each is chosen among
# RRF and min-max weighted sums on a weight grid, by recall@k averaged within each design set then over sets;
# the table gives the out-of-fold (5-fold) recall of that choice on the design sets. A fixed a-priori fusion
# (`fuse4`: weights 1, 1, 0.5, 0.5) stands beside them. The unseen sets are the validation sets' queries whose
# text appears in no design set (run 0's stubs, recorded for them).

# %%
vcfg = ExperimentConfig.build(**{**params, "run_name": f"{cfg.run_name}-validation",
                                 "subsets": list(validation_sets)})
got = get_retrievers_study(vcfg, 1, setup.ds.queries) if validation_sets else None
vstudy = got[2] if got else None
unseen, kept = fusion_board.unseen_keys(vstudy, result) if vstudy is not None else (set(), None)
# The paper's G2 numbers fit G2_instruction: the primary comparison there too (Holm over one set), from a
# retriever study of its own with the main study's runs when the cassette holds their stubs for every query,
# else from the validation study's one run.
igot = get_g2_instruction_study(cfg, retriever_runs, setup.ds.queries, got)
istudy = igot[2] if igot else None
g2_instruction = (endpoint_table(istudy, PRIMARY.at(cfg.k), paper={"G2_instruction": paper_recall["G2"]},
                                 sets=["G2_instruction"]) if istudy is not None else None)
if g2_instruction is not None and len(g2_instruction):
    save_tables({"primary_endpoint_g2_instruction": g2_instruction}, cfg, prov)
    display(g2_instruction.drop(columns=["p_family"]).round(4))
# The same comparisons on ToolBench's `relevant` ground truth (the paper gives no value for it).
relevant = replace(PRIMARY.at(cfg.k), gt="relevant")
relevant_endpoint = pd.concat([endpoint_table(study, relevant)] + ([endpoint_table(
    istudy, relevant, sets=["G2_instruction"])] if istudy is not None else []), ignore_index=True)
save_tables({"primary_endpoint_relevant": relevant_endpoint}, cfg, prov)
display(relevant_endpoint.drop(columns=["p_family"]).round(4))
fkey = f"fusion-k{cfg.k}-{gt}-seed{cfg.seed}-{got[0].study_key() if got else 'none'}"
ftables = rv.cached_tables(rcfg.study_dir, fkey, lambda: fusion_board.fusion_and_costs(
    study, vstudy, unseen, rv.cached_search_ms(rcfg, rsetup, study), cfg.k, gt, cfg.seed))
save_tables({**ftables, **({"retriever_unseen_queries": kept} if kept is not None else {})}, cfg, prov)
display(format_numbers(ftables["retriever_fusion_choice"], 3))
display(format_numbers(ftables["retriever_fusion_design"], 3))
display(format_numbers(ftables.get("retriever_fusion_unseen", kept), 3))
display(Markdown("\n".join(f"- {line}" for line in ftables["retriever_fusion_verdicts"]["text"])))

# %% [markdown]
# ## The learned rankers
#
# `ltr` and `ltr-nollm` (LightGBM lambdarank over features of the query's and the stubs' dense and BM25
# rankings, cross-fitted over query folds; `ltr-nollm` without stubs, so without an LLM call) against the best
# single architecture of any family, per set, with the paired 95% CI of the recall difference: the report's
# one goal. The rankers are cross-fitted over the design and the unseen sets' queries at once, folds grouped
# by query text and by ground-truth set (queries written from one sample of APIs share a fold), so every
# query (an unseen one too) is scored by a model that never saw its text or its sample; each ground
# truth by the ranker trained on its own labels. Each run's stubs get a cross-fit of their own, and a query's
# recall is its mean over runs, as for the single architectures and the fused methods.
# `python -m toolbench_lib.analysis.ltr_study` adds `ltr-4runs` (every run's stubs at once), the ablations,
# the feature importance and the costs.

# %%
from toolbench_lib.analysis import ltr as learned  # noqa: E402

lkey = f"ltr-runs-k{cfg.k}-seed{cfg.seed}-{got[0].study_key() if got else 'none'}"
rankers = {name: learned.NAMED[name] for name in ("ltr", "ltr-nollm")}  # ltr-4runs: an ablation row
ltables = rv.cached_tables(rcfg.study_dir, lkey, lambda: {"ltr_comparison": learned.comparison(
    learned.ranker_scores(study, vstudy, unseen, rankers, k=cfg.k, seed=cfg.seed, fit_models=False)[0])})
save_tables(ltables, cfg, prov)
display(learned.issue_table(ltables["ltr_comparison"], "candidates"))

# %% [markdown]
# ## Cost per query
#
# LLM calls before planning, the stub call's tokens (prompt and output, as recorded) and the search time per
# query of each family on this machine (the queries and the stubs searched once, after a warm-up).

# %%
display(format_numbers(ftables["retriever_costs"], 3))
