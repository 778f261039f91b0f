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
# # 11 · Ablations: what causes the gaps to the paper
#
# The report scores every paper number against this run. A gap needs a cause, and a cause needs an
# experiment that changes one thing. Each section below holds one ablation, a table, a figure and a verdict
# written from the numbers; `references/causes.yaml` turns these tables into the named causes the report
# prints (a cause is claimed for a row only when its check holds in this run).
#
# 1. **Decomposition vs architecture**: PtR with the LLM's stubs against PtR with a rule-based sub-goal
#    splitter, same embedder, registry and queries.
# 2. **Stub text**: which part of a stub retrieves: its name, its reasoning, both, both without the
#    query's brand words.
# 3. **Divergence**: why RtP and PtR agree so often here (the paper: 88% to 98% disjoint top-5 lists).
# 4. **Embedder**: all-MiniLM-L6-v2 against all-mpnet-base-v2 on one sub-registry, same stubs.

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
ablation_apis = 2000
ablation_queries = 50
ablations = False  # the embedder ablation's second model: `make ablations` sets it

# %%
from dataclasses import replace

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from toolbench_lib.analysis import ablations as ab
from toolbench_lib.analysis.references import paper_query_counts
from toolbench_lib.analysis.similarity import query_similarities, similarity_dir
from toolbench_lib.analysis.style import LEGEND_SIZE, METHOD_COLORS, use_style
from toolbench_lib.study.experiment import (
    ExperimentConfig,
    get_study,
    provenance_line,
    save_figure,
    save_table,
)

# %matplotlib inline
cfg = ExperimentConfig.from_params(run_name=run_name, smoke=smoke, data_dir=data_dir, subsets=subsets,
                                   backend=backend, cassette=cassette, embedder=embedder, k=k, runs=runs,
                                   plan_limit=plan_limit, max_apis=max_apis, limit=limit, seed=seed,
                                   scale_seeds=scale_seeds)
use_style()
setup, result = get_study(cfg)
prov = provenance_line(result)
print(prov)
save_table(paper_query_counts(), "paper_query_counts", cfg, prov)
verdicts = {}

# %% [markdown]
# ## 1 · Decomposition vs architecture
#
# The same PtR pipeline (stubs searched one by one, merged by best cosine) with two decomposers: the run's
# LLM stubs and the rule-based splitter of the `rules` backend (clauses, conjunctions, enumerations named by
# their key words; no LLM). `coverage` is the share of a query's ground-truth APIs that at least one stub finds
# in its own top k; `stubs_per_query` counts a fallback to the raw query as 0 stubs.

# %%
# The rules study is stored in a run of its own (retrieval only, one run), so a warm run reads it.
rules_cfg = replace(cfg, run_name=f"{cfg.run_name}-rules", backend="rules", cassette=None, llm_model=None,
                    runs=1, plan_limit=0, base_run=None, extra={}).redirected()
_, rules = get_study(rules_cfg, setup, progress=False)
decomp, by_stubs, verdicts["decomposition"] = ab.decomposition_ablation(result, rules, k=cfg.k)
save_table(decomp, "ablation_decomposition", cfg, prov)
save_table(by_stubs, "ablation_decomposition_by_stubs", cfg, prov)
display(decomp.round(3))
display(by_stubs.round(3))

fig, ax = plt.subplots(figsize=(7, 3.5))
names = {"llm": "PtR, LLM stubs", "rules": "PtR, rules stubs"}
wide = {end: decomp.pivot(index="subset", columns="decomposer", values=f"ptr_recall{end}")
        .rename(columns=names).assign(RtP=decomp.groupby("subset", sort=False)[f"rtp_recall{end}"].first())
        [["RtP", *names.values()]] for end in ("", "_ci_low", "_ci_high")}  # each bar with its own 95% CI
ab.bars_with_ci(ax, *wide.values(), colors=[METHOD_COLORS["rtp"], METHOD_COLORS["ptr"], "#f4a6a6"])
ax.set_ylabel(f"recall@{cfg.k}")
ax.set_title("Same architecture, two decomposers")
save_figure(fig, "ablation_decomposition", cfg)
plt.show()
print(verdicts["decomposition"])

# %% [markdown]
# ## 2 · Stub text
#
# Each variant searches per query the texts listed, merged by best cosine: `query` is RtP; `name` and
# `reasoning` are one field of each stub; `name+reasoning` is PtR as run; `name+reasoning-brand` drops the
# query's proper names (capitalised words, words with digits or inner capitals) from every stub. If removing
# them costs recall, PtR's hits come from echoing the query's brand words rather than from the decomposition.
# `query-brand` is RtP on the query without those words: the paper explains RtP's G1 lead by the query naming
# its API (Intent-Registry Coupling), so with the brand words gone from query and stubs alike that lead
# should shrink. The second table pairs PtR − RtP as run with PtR − RtP without them (`change`).

# %%
text_table, coupling, verdicts["stub_text"] = ab.stub_text_ablation(setup, result, k=cfg.k, depth=cfg.depth)
save_table(text_table, "ablation_stub_text", cfg, prov)
save_table(coupling, "ablation_query_coupling", cfg, prov)
display(text_table.pivot(index="variant", columns="subset", values="recall").round(3))
display(coupling.round(3))
fig, ax = plt.subplots(figsize=(7, 4.2))
ab.bars_with_ci(ax, *(text_table.pivot(index="subset", columns="variant", values=f"recall{end}")[
    list(ab.STUB_TEXT_VARIANTS)] for end in ("", "_ci_low", "_ci_high")),  # each bar with its own 95% CI
    colors=list(ab.STUB_TEXT_COLORS.values()))
ax.set_ylabel(f"recall@{cfg.k}")
ax.set_title("What part of a stub retrieves")
ax.legend(ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.14), fontsize=LEGEND_SIZE)  # below the bars
save_figure(fig, "ablation_stub_text", cfg)
plt.show()
print(verdicts["stub_text"])

# %% [markdown]
# ## 3 · Divergence
#
# The paper finds RtP's and PtR's top-5 lists disjoint for 88% of queries on a ~1k sub-registry and 98% on the
# full one. Two things make lists agree: a small sub-registry that is mostly ground truth (keeping every
# ground-truth API of the set fills much of 1,000 slots), and stubs that restate the query. The designs:
# `set_gt` keeps the ground truth of the whole set (the scale study's design), `own_gt` keeps only the scored
# query's own ground truth (one draw per query), `no_gt` keeps none; `full` is the whole index. The second
# table asks whether stubs that restate their query (high cosine between the best stub and the query) are
# what makes the two lists agree.

# %%
cache = query_similarities(setup, result, cache_dir=similarity_dir(cfg), runs=[0])
div_size = 1000 if cache.n_columns > 1000 else max(cache.n_columns // 2, 10)
div, verdicts["divergence"] = ab.divergence_ablation(cache, result.queries, size=div_size,
                                                     seeds=range(min(cfg.scale_seeds, 3)), k=cfg.k)
echo = ab.stub_echo(setup, result)
echo_table, verdicts["stub_echo"] = ab.echo_divergence(echo, result, k=cfg.k)
save_table(div, "ablation_divergence", cfg, prov)
save_table(echo_table, "ablation_stub_echo", cfg, prov)
display(div.round(3))
display(echo_table.round(3))
fig, ax = plt.subplots(figsize=(7, 3.5))
div.pivot(index="subset", columns="design", values="no_overlap_share").plot.bar(ax=ax, rot=0)
for value, label in ((0.88, "paper, ~1k"), (0.98, "paper, full")):
    ax.axhline(value, ls="--", lw=1, color="grey")
    ax.text(-0.45, value + 0.01, label, fontsize="small", color="grey")
ax.set_ylim(0, 1.05)
ax.set_ylabel(f"queries with disjoint top-{cfg.k}")
ax.set_title(f"RtP and PtR top-{cfg.k} disjointness, {div_size}-API sub-registries and the full index")
save_figure(fig, "ablation_divergence", cfg)
plt.show()
print(verdicts["divergence"])
print(verdicts["stub_echo"])

# %% [markdown]
# ## 4 · Embedder
#
# The paper used `thenlper/gte-base`; this run uses the offline embedder. Here the same queries and the same
# recorded stubs are searched on one sub-registry (the candidate ground truth of the scored queries, or of
# the first `ablation_queries` of each set, plus a proportional sample: `ablation_apis` APIs in all) with all-MiniLM-L6-v2 and all-mpnet-base-v2 (shipped as PyPI
# packages, assembled locally). If the winner per set does not change with the embedder, the embedder is not
# the cause of a crossover that fails to appear. `recall_diff` is mpnet's recall minus MiniLM's on the same
# queries, with its paired t 95% CI (`diff_lo`, `diff_hi`). The second model is run only when asked
# (`make ablations`); the result is kept beside the stored study and read by every later run.

# %%
emb, note = ab.embedder_ablation_tables(cfg, ablation_apis, ["all-MiniLM-L6-v2", "all-mpnet-base-v2"],
                                     ablation_queries, run=ablations)
if emb is not None:
    emb_table, verdicts["embedder"] = emb["ablation_embedder"], emb["verdict"]["verdict"].iloc[0]
    save_table(emb_table, "ablation_embedder", cfg, prov)
    display(emb_table.pivot_table(index=["subset", "method"], columns="embedder", values="recall").round(3))
    display(emb_table.dropna(subset=["recall_diff"])[["subset", "method", "n_queries", "recall_diff", "diff_lo",
                                                      "diff_hi"]].round(3))
    fig = ab.embedder_figure(emb_table, cfg.k)
    save_figure(fig, "ablation_embedder", cfg)
    plt.show()
else:
    verdicts["embedder"] = note
print(note)
print(verdicts["embedder"])

# %% [markdown]
# ## The paper's worked examples
#
# The queries of the paper's Table 2 that are in this run, as the explorer shows them: the query, its ground
# truth, both methods' top-k with hits marked, PtR's stubs and both plans.

# %%
from IPython.display import HTML  # noqa: E402

from toolbench_lib.explorer.widget import QueryExplorer  # noqa: E402
from toolbench_lib.report.teaching import worked_examples  # noqa: E402

explorer = QueryExplorer(setup, result, k=cfg.k)
for example in worked_examples():
    if example["qkey"] not in set(result.queries["qkey"]):
        print(f"{example['id']} (Table {example['table']}): {example['qkey']} is not among this run's queries")
        continue
    explorer.select(example["qkey"])
    display(Markdown(f"**{example['id']}** (paper Table {example['table']}): {example['description']}"))
    display(HTML(explorer.render()))

# %% [markdown]
# ## What this run found

# %%
found = pd.DataFrame({"ablation": list(verdicts), "verdict": list(verdicts.values())})
save_table(found, "ablation_verdicts", cfg, prov)
display(Markdown("\n".join(f"- **{a}**: {v}" for a, v in verdicts.items())))
