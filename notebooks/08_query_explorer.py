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
# # 08 · Query explorer
#
# Averages hide the individual queries. This notebook opens the stored study one query at a time: what the user asked, which APIs count as correct, what Retrieve-then-Plan (RtP) and Plan-then-Retrieve (PtR) each put in their top k, which stubs PtR wrote and what each stub found on its own, and the plans both methods wrote from what they retrieved.
#
# It opens the study a run stored (by default what `make run` stored under `outputs/default/`) from its tables alone: no embedder, no index, nothing computed or written. Changing k only cuts the stored rankings (depth 20); it never retrieves again. `make explore` serves this notebook as an app (Voilà); the `TOOLBENCH_EXPLORE_RUN` environment variable, when set, names the run to open.

# %% tags=["parameters"]
run_name = "default"
study = None
k = 5
gt = "candidates"

# %%
import os

from toolbench_lib.analysis.explorer import QueryExplorer

run_name = os.environ.get("TOOLBENCH_EXPLORE_RUN") or run_name
explorer = QueryExplorer.from_run(run_name, study=study, k=k, gt=gt)
explorer

# %% [markdown]
# ## How to use it
#
# - **Subset** picks G1, G2 or G3.
# - **Filter** keeps the queries where, at the chosen k and run, RtP's recall beats PtR's (*RtP wins*), the reverse (*PtR wins*), neither method finds any correct API (*both missed*) or both find at least one (*both hit*). The paper counts RtP ahead on 63 G1 queries and PtR ahead on 69 G2 queries; the filters let you read those queries one by one.
# - **Run** picks the independent LLM run (RtP's ranking is the same in every run: it involves no LLM call before retrieval).
# - **k** cuts both rankings (1 to 20).
# - **Ground truth** switches between the query's whole `api_list` (*candidates*, the paper's definition) and ToolBench's *relevant* APIs; the ground-truth list marks which definition each API belongs to.
# - **Method** shows both methods side by side or one of them.
#
# Retrieved APIs that are in the ground truth carry a check mark. Under PtR, each stub is listed with its own top-k hits, which shows which stub found what. Plans (steps, refusal and the judge's verdict) appear for the queries that were planned; the others say that no plan was recorded.
#
# The line under the explorer names the stored study it shows (embedder, registry, data, backend and parameters). A saved or exported copy of this notebook (such as the run's `report.html`) has no live kernel: it shows the query the explorer showed when it ran, as static HTML.
