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
# # 06 · PtR's stubs: what they find, where they fail, what they cost
#
# Plan-then-Retrieve asks the LLM to describe the tools it would need before seeing any, as *stubs* (a short
# API-style name and a reason), and searches the registry with each. This notebook looks at the stubs
# themselves: how many a query gets (the paper: 2.4 to 2.5), how varied their names are (the paper: 79 to 99%
# distinct), how often a stub's own best match is a correct API, and how confident correct and incorrect
# matches are. Examples of successes and failures follow, then the price: PtR's extra LLM call costs tokens
# and time (the paper: 75 to 104% more tokens than RtP).

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
import pandas as pd
from IPython.display import display

from toolbench_lib.analysis import stub_analysis as sa
from toolbench_lib.analysis.style import use_style
from toolbench_lib.study.experiment import ExperimentConfig, get_study, provenance_line, save_table

# %matplotlib inline
cfg = ExperimentConfig.from_params(run_name=run_name, smoke=smoke, data_dir=data_dir, subsets=subsets,
                                   backend=backend, cassette=cassette, embedder=embedder, k=k, runs=runs,
                                   plan_limit=plan_limit, max_apis=max_apis, limit=limit, seed=seed,
                                   scale_seeds=scale_seeds)
use_style()
setup, result = get_study(cfg)
prov = provenance_line(result)
print(prov)

# %% [markdown]
# ## Stub statistics
#
# - `stubs_per_query`: stubs per query and run (a fallback counts as one stub).
# - `unique_name_share`: distinct lower-cased stub names divided by the number of stubs, over all stubs of the
#   set in one run (then averaged over runs). It measures how specific the names are across queries: generic
#   names such as "Get Weather" repeat from query to query. The same share computed within each query and
#   averaged is `unique_name_share_per_query`; the stub parser already drops repeated names within one reply,
#   so that one is close to 1 by construction.
# - `stub_hit_share`: share of stubs whose own top-1 API (the first hit of that stub's search, before merging)
#   is a ground-truth API, under each definition (the `gt` column: the paper says "a relevant API").
# - `cos_correct` / `cos_incorrect`: mean cosine similarity of those top-1 matches that are / are not correct.
#   A gap between them means the similarity itself carries a signal of success.
# - `fallback_share`: share of (query, run) pairs where the reply held no usable stub and the raw query
#   stood in.

# %%
stubs = sa.stub_stats(result)
save_table(stubs, "stub_stats", cfg, prov)
display(stubs.round(3))
for _, r in stubs[stubs["gt"] == "candidates"].iterrows():
    print(f"{r['subset']}: {r['stubs_per_query']:.2f} stubs per query (paper 2.4-2.5), "
          f"{100 * r['unique_name_share']:.0f}% distinct names (paper 79-99%), "
          f"cosine {r['cos_correct']:.3f} when correct vs {r['cos_incorrect']:.3f} when not")

# %% [markdown]
# ## Successes and failures
#
# For each set, the three most confident correct matches and the three most confident incorrect ones from
# run 0 (highest top-1 cosine first; fallback stubs left out). Confident failures are the instructive ones: a
# plausible-sounding stub that lands on an API from the wrong tool or the wrong domain.

# %%
examples = sa.stub_examples(result, n=3)
save_table(examples, "stub_examples", cfg, prov)
with pd.option_context("display.max_colwidth", 70):
    display(examples.round(3))

# %% [markdown]
# ## Token overhead and latency
#
# Tokens are input plus output tokens of a method's own calls: RtP's plan call; PtR's stub call and plan call.
# The judge's call is evaluation, not method cost, and is left out. RtP makes its call only for planned
# queries, so both methods are compared over the same planned queries (first `plan_limit` of each set, in
# the runs with plans): `rtp_tokens` and `ptr_tokens` are means per (query, run), and
# `overhead_pct` = 100 × (PtR − RtP) / RtP. Latencies are seconds per query of the same calls; calls replayed
# from a cassette carry the latency recorded when they were made, and the rules backend's are near zero.

# %%
overhead = sa.token_overhead(result)
save_table(overhead, "token_overhead", cfg, prov)
display(overhead.round(3))
cached = float(result.calls["cached"].mean()) if len(result.calls) else float("nan")
print(f"share of calls served from a cache or cassette: {cached:.2f}")
for _, r in overhead.dropna(subset=["overhead_pct"]).iterrows():
    print(f"{r['subset']}: PtR uses {r['overhead_pct']:.0f}% more tokens than RtP (paper: 75-104%), "
          f"{r['ptr_stub_tokens']:.0f} of them in the stub call")

# %% [markdown]
# ## What this run found

# %%
from IPython.display import Markdown  # noqa: E402

from toolbench_lib.analysis.findings import stub_findings  # noqa: E402

display(Markdown(stub_findings(stubs, overhead)))
