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
# The stored study one query at a time: find a query, sort the queries by the gap between two methods, and read what each method retrieved, which stubs PtR wrote and the plans (how to use it: below the explorer).

# %% tags=["parameters"]
run_name = "default"
study = None
k = 5
gt = "candidates"

# %%
import os

from toolbench_lib.analysis.explorer import QueryExplorer

run_name = os.environ.get("TOOLBENCH_EXPLORE_RUN") or run_name
explorer = QueryExplorer.for_page(run_name, study=study, k=k, gt=gt)
explorer

# %% [markdown]
# ## How to use it
#
# The explorer opens the study a run stored (by default what `make run` stored under `outputs/default/`) from its tables alone: no embedder, no index, nothing computed or written. Changing k only cuts the stored rankings (depth 20); it never retrieves again. `make explore` serves this notebook as an app (Voilà); the `TOOLBENCH_EXPLORE_RUN` environment variable, when set, names the run to open.
#
# - **Subset** picks G1, G2, G3 or all of them; **Filter** keeps the queries where, at the chosen k and run, method A's recall beats B's (*A wins*), the reverse (*B wins*), neither finds any correct API (*both missed*) or both find at least one (*both hit*). The paper counts RtP ahead on 63 G1 queries and PtR ahead on 69 G2 queries; the filters list those queries.
# - **Method A** and **Method B** pick any two methods of the stored study (RtP, PtR, fused methods, other retriever families); **Show** puts both side by side or one of them.
# - **Run** picks the independent LLM run (RtP's ranking is the same in every run: it involves no LLM call before retrieval); **k** cuts the rankings (1 to 20); **Ground truth** switches between the query's whole `api_list` (*candidates*, the paper's definition) and ToolBench's *relevant* APIs.
# - **Search** (Enter) finds queries in every subset by their text, their id, or an API id in their ground truth or in either method's top k.
# - The line beside the search counts the queries shown, their mean recall@k under both methods, and how often each method wins (ties between).
# - The **table** lists those queries with both recalls, the gap (A − B) and the winner. A header sorts by its column (again: the other way; the gap header cycles through the largest gap either way, A ahead first, B ahead first); a query's button shows it. A filter opens on its largest gap.
# - **link to this view** holds the whole view (run, subset, filter, methods, k, ground truth, search, sort, query): open it, or share it, to see the same view. Served by `make explore`, the page's address follows the view as well.
#
# Retrieved APIs that are in the ground truth carry a check mark. Under PtR, each stub is listed with its own top-k hits, which shows which stub found what. Plans (steps, refusal and the judge's verdict) appear for the queries that were planned; the others say that no plan was recorded.
#
# The line under the explorer names the stored study it shows (embedder, registry, data, backend and parameters). A saved or exported copy of this notebook (such as the run's `report.html`) has no live kernel: it shows the summary, the first rows of the table and the query the explorer showed when it ran, as static HTML.
