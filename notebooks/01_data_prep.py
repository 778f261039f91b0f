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
# # 01 · The data: registry, documents and ground truth
#
# Before comparing the two architectures it helps to know what they search and how they are scored. This
# notebook describes the processed ToolBench data: how the roughly 47,000 RapidAPI endpoints spread over
# categories and over the sources they were merged from, how long the texts are that get embedded for each
# API, and how many ground-truth APIs a query has under the two definitions used throughout:
# *candidates* (the query's whole `api_list`, the default: its sizes fit the paper's numbers, a hypothesis,
# since the paper's text names the APIs its reference solution executed) and *relevant*
# (ToolBench's `relevant APIs`, the APIs the query was written to need, a subset of the candidates).
#
# It also checks that every ground-truth pair of every query set was found in the registry: a pair that
# resolved to no registry id would silently lower every recall.
#
# This notebook reads the dataset only, never a study run; in smoke mode it still describes the full registry
# (a quick computation), since the smoke slice only shrinks the study.

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

# %%
from IPython.display import display

from toolbench_lib.analysis import data_stats
from toolbench_lib.analysis.style import use_style
from toolbench_lib.data.dataset import load_dataset
from toolbench_lib.data.queries import resolve_subset, subset_alias
from toolbench_lib.study.experiment import ExperimentConfig, save_figure, save_table

# %matplotlib inline
cfg = ExperimentConfig.from_params(run_name=run_name, smoke=smoke, data_dir=data_dir, subsets=subsets,
                                   backend=backend, cassette=cassette, embedder=embedder, k=k, runs=runs,
                                   plan_limit=plan_limit, max_apis=max_apis, limit=limit, seed=seed,
                                   scale_seeds=scale_seeds)
use_style()
ds = load_dataset(cfg.data_dir)
prov = data_stats.dataset_provenance(ds)
print(prov)
study_sets = [subset_alias(resolve_subset(s)) for s in cfg.subsets]
print(f"query sets of the study: {', '.join(study_sets)}")

# %% [markdown]
# ## APIs per category
#
# The paper describes a long-tailed registry led by Sports (4,455 APIs) and Data (3,583). The table lists every
# category of this registry, largest first, with its number of tools; the figure shows the largest fifteen.
# Counts here can be higher than the paper's: this registry merges every source ToolBench ships (the tool
# files, the queries' own API documentation, the 2023 tool files and the retrieval corpus) and keeps tools
# that share a display name apart, so the comparison below is about shape more than about exact counts.

# %%
categories = data_stats.apis_per_category(ds)
save_table(categories, "data_categories", cfg, prov)
print(f"{len(ds.registry):,} APIs in {len(categories)} categories")
display(categories.head(15).round(4))

# %%
by_cat = categories.set_index("category")["n_apis"]
from toolbench_lib.analysis.references import paper_value  # noqa: E402

for name, paper in (("Sports", paper_value("sports_apis")), ("Data", paper_value("data_apis"))):
    here = int(by_cat.get(name, 0))
    rank = categories["category"].tolist().index(name) + 1 if name in by_cat else None
    print(f"{name}: {here:,} APIs here (rank {rank}), paper {paper:,.0f} ({here / paper:.2f}x)")
fig = data_stats.category_figure(categories, top=15)
print(f"saved {save_figure(fig, 'data_categories', cfg)}")

# %% [markdown]
# ## Where the APIs come from
#
# The registry is merged from several sources in a fixed order, keeping the first API of each normalised
# (category, tool, API) key. Most APIs come from the tool files; the others fill in APIs that queries
# reference but the tool files lack.

# %%
sources = data_stats.apis_by_source(ds)
save_table(sources, "data_sources", cfg, prov)
display(sources.round(4))

# %% [markdown]
# ## Ground truth per query
#
# Recall@k divides by the number of ground-truth APIs, so its size matters: a query with ten candidate APIs
# can reach recall 0.5 at k = 5 at best. The table gives the mean, median, smallest and largest
# ground-truth size per query set under both definitions (`n_empty` counts queries without any, which
# would score 0), the share of queries with more ground-truth APIs than k (`share_over_k`) and the best mean
# recall@k a perfect ranking could reach (`recall_ceiling`). Every query set in the data is listed; the study
# uses the ones printed above.

# %%
sizes = data_stats.gt_sizes(ds, k=cfg.k)
save_table(sizes, "data_gt_sizes", cfg, prov)
display(sizes.round(3))
for _, r in sizes[sizes["subset"].isin(study_sets)].iterrows():
    print(f"{r['subset']} ({r['gt']}): {r['mean']:.2f} APIs per query on average; "
          f"{100 * r['share_over_k']:.0f}% of queries have more than {cfg.k}, "
          f"so mean recall@{cfg.k} cannot exceed {r['recall_ceiling']:.3f}")

# %% [markdown]
# ## Every ground-truth pair resolves
#
# A pair is one (tool, API) entry of a query's `api_list` (candidates) or `relevant APIs` (relevant). It
# resolves when it matches a registry id through normalised names (same category preferred). `unresolved`
# must be 0 everywhere; a non-zero count names the set and definition to look at.

# %%
resolution = data_stats.gt_resolution(ds)
save_table(resolution, "data_gt_resolution", cfg, prov)
display(resolution)
print(f"unresolved pairs: {int(resolution['unresolved'].sum())} of {int(resolution['n_pairs'].sum()):,} "
      f"over {resolution['subset'].nunique()} query sets and both definitions")

# %% [markdown]
# ## Document length
#
# Each API is embedded as one text: tool name and category, tool description, API name and description, and
# parameter names, capped at 1,200 characters. The table gives the length distribution per source (and over
# all, last row) with the number of texts cut at the cap; the histogram shows all of them.

# %%
lengths = data_stats.doc_length_stats(ds)
save_table(lengths, "data_doc_lengths", cfg, prov)
display(lengths.round(1))
fig = data_stats.doc_length_figure(data_stats.doc_lengths(ds))
print(f"saved {save_figure(fig, 'data_doc_lengths', cfg)}")

# %% [markdown]
# ## What this run found

# %%
from IPython.display import Markdown  # noqa: E402

from toolbench_lib.analysis.findings import data_findings  # noqa: E402
from toolbench_lib.analysis.references import paper_value  # noqa: E402

display(Markdown(data_findings(sources, sizes, paper_value("registry_size"))))
