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
# # 05 · What the planner does with what it retrieved
#
# Retrieval decides what the planner is shown; this notebook looks at what the planner then does. It reports,
# per set and method:
#
# - **fidelity**: the share of APIs a plan names that were among those it was shown (the paper finds at least
#   96%: planners rarely invent tools);
# - **Jaccard overlap** between the APIs RtP's and PtR's plans name for the same query (the paper: 0.40 on G1,
#   falling to 0.28 on G3, so the two architectures lead to different plans);
# - **used share**: the share of the shown top-k APIs that the plan used;
# - plan size (steps and APIs named) and the **refusal rate**;
# - and what plans do when retrieval **missed completely** (none of the shown APIs is correct): refuse, or name
#   a wrong tool anyway.
#
# Plans exist only for the first `plan_limit` queries of each set, in the first `plan_runs` runs; the counts are
# printed below.

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

from toolbench_lib.analysis import trajectory as tr
from toolbench_lib.analysis.style import use_style
from toolbench_lib.data.queries import subset_alias
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

# %%
per_set = result.queries.groupby("subset", sort=False)["qkey"].nunique()
if result.plans.empty:
    planned = per_set * 0
else:
    with_subset = result.plans.merge(result.queries[["qkey", "subset"]], on="qkey")
    planned = with_subset.groupby("subset")["qkey"].nunique()
for subset, n in per_set.items():
    print(f"{subset_alias(subset)}: plans for {int(planned.get(subset, 0))} of {n} queries")
print(f"each over {result.plans['run'].nunique() if len(result.plans) else 0} run(s) with plans (of "
      f"{result.provenance['settings'].get('runs')}) and both methods; "
      f"the planner saw the top {result.provenance['settings'].get('k')} APIs")

# %% [markdown]
# ## Plan statistics
#
# `fidelity` averages over plans that named at least one API. `jaccard_rtp_ptr` compares, for the same query
# and run, the sets of APIs the two methods' plans name, then averages over queries and runs (pairs where
# neither plan names an API are left out; `n_jaccard_pairs` counts the rest); it is one number per set, shown
# on both rows. `used_share` is the share of the shown APIs the plan named, `mean_steps` and
# `mean_apis_named` the plan's size (APIs named that matched no shown API are counted apart in
# `mean_unresolved_named`), `refusal_rate` the share of plans that declined to plan.

# %%
traj = tr.trajectory(result)
save_table(traj, "trajectory", cfg, prov)
if traj.empty:
    print("no plans in this study (plan_limit = 0)")
display(traj.round(3))

# %% [markdown]
# The paper's Figure 4: fidelity, Jaccard overlap of the two plans' APIs, share of retrieved APIs used, plan
# steps and APIs named, per set and method; the paper's values (from `references/paper.yaml`) are drawn where
# it gives them (diamonds for one set, dashed lines for ranges or values over all sets).

# %%
from toolbench_lib.analysis.references import paper_value  # noqa: E402
from toolbench_lib.study.experiment import save_figure  # noqa: E402

PAPER_FIG4 = {("G1", "rtp", "jaccard_rtp_ptr"): paper_value("g1_plan_jaccard"),
              ("G3", "rtp", "jaccard_rtp_ptr"): paper_value("g3_plan_jaccard"),
              ("G3", "rtp", "mean_steps"): paper_value("g3_rtp_steps"),
              ("G3", "ptr", "mean_steps"): paper_value("g3_ptr_steps"),
              ("G3", "rtp", "mean_apis_named"): paper_value("g3_rtp_apis_named"),
              ("G3", "ptr", "mean_apis_named"): paper_value("g3_ptr_apis_named"),
              ("all", None, "fidelity"): paper_value("trajectory_fidelity", "min")}
if not traj.empty:
    fig = tr.figure4(traj, {k_: v_ for k_, v_ in PAPER_FIG4.items() if v_ is not None})
    print(f"saved {save_figure(fig, 'figure4', cfg)}")

# %%
if not traj.empty:
    print(f"lowest fidelity over sets and methods: {traj['fidelity'].min():.3f} (paper: at least 0.96)")
    jac = traj.drop_duplicates("subset").set_index("subset")["jaccard_rtp_ptr"]
    print("RtP-PtR Jaccard of named APIs: " + ", ".join(f"{s} {v:.2f}" for s, v in jac.items())
          + " (paper: 0.40 on G1 falling to 0.28 on G3)")

# %% [markdown]
# ## When retrieval misses completely
#
# A complete miss is a plan whose shown top-k holds no ground-truth API (candidates definition). Such a plan
# cannot be right; the honest reaction is to refuse. `refusal_rate_on_miss` is the share of those plans that
# refused, `wrong_tool_rate_on_miss` the share that named some API anyway (necessarily a wrong one) and
# `no_api_rate_on_miss` the rest (no refusal, no API named). Counts are over plans, that is queries times
# the runs with plans (`n_miss_queries` counts distinct queries). The second table repeats the analysis under the relevant
# ground truth, where misses are more frequent.

# %%
miss = tr.miss_behaviour(result)
save_table(miss, "miss_behaviour", cfg, prov)
display(miss.round(3))
display(tr.miss_behaviour(result, gt="relevant").round(3))

# %%
if not miss.empty:
    total = miss.groupby("method")[["n_complete_miss", "n_plans"]].sum()
    for method, r in total.iterrows():
        print(f"{method}: {int(r['n_complete_miss'])} of {int(r['n_plans'])} plans saw no correct API")

# %% [markdown]
# ## Retrieval divergence on the full registry, read two ways
#
# Before the planner: do RtP and PtR retrieve the same top-k? Per set and pooled (G1+G2, G1–G3), the share
# of queries whose two top-k sets are *disjoint* (share no API: the paper's "entirely non-overlapping") and
# *non-identical* (differ in at least one API), each query's share averaged over PtR's runs, with 95%
# intervals resampling whole API samples (`divergence_full`); `divergence_full_verdict` says which reading the paper's
# 98% on the full registry fits.

# %%
from IPython.display import Markdown  # noqa: E402

from toolbench_lib.analysis import sensitivity as se  # noqa: E402

div = se.full_divergence_tables(result, cfg.run_name, cfg.k)
save_table(div["divergence_full"], "divergence_full", cfg, prov)
save_table(div["divergence_full_verdict"], "divergence_full_verdict", cfg, prov)
display(div["divergence_full"].pivot_table(index=["retriever", "group"], columns="reading", values="share",
                                          sort=False).round(3))
display(Markdown(div["divergence_full_verdict"]["text"].dropna().iloc[-1]))

# %% [markdown]
# ## What this run found

# %%
from toolbench_lib.analysis.findings import trajectory_findings  # noqa: E402

display(Markdown(trajectory_findings(traj, miss)))
