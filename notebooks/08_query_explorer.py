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
from toolbench_lib import config  # the defaults: `make run`'s

run_name = "default"
study = None
k = config.K
gt = "candidates"

# %%
import os

from toolbench_lib.explorer.widget import QueryExplorer

run_name = os.environ.get("TOOLBENCH_EXPLORE_RUN") or run_name
explorer = QueryExplorer.for_page(run_name, study=study, k=k, gt=gt)
explorer

# %% [markdown]
# ## How to use it
#
# The explorer opens the study a run stored (by default what `make run` stored under `outputs/default/`) from its tables alone: no embedder, no index, nothing computed or written. Changing k only cuts the stored rankings (depth 20); it never retrieves again. `make explore` serves this notebook as an app (Voilà); the `TOOLBENCH_EXPLORE_RUN` environment variable, when set, names the run to open.
#
# - **Study** picks one stored study of the run's family: the main study (`default`), the retriever study (`default-retrievers`: RtP and PtR with dense, BM25 and hybrid retrieval) and the validation study (`default-validation-retrievers`), each named with its query sets, methods and runs.
# - **Subset** picks G1, G2, G3 (or the validation sets) or all of them.
# - **Method A**, **Method B** and **More methods** pick any number of the study's methods: every architecture × retriever family, and every fused method computed from the stored rankings (`rrf`, `combsum-mm`, `fuse4`, …).
# - **Filter** keeps, at the chosen k and run: *A higher recall* or *B higher recall*; *both recall 0* or *both recall > 0*; *A found a ground-truth API B missed* (an API-level comparison: A may find one API and B another with the same recall); *only A found a ground-truth API* (none of the other selected methods found that API); *every selected method missed* (no ground-truth API in any selected method's top k). The line beside the search states the active filter and how many queries the view holds without it.
# - **Run** opens on the mean of every run (each query's recall averaged over the runs, and wins counted on those means: the report's basis, so the counts match its tables); one independent LLM run is a choice (RtP's ranking is the same in every run: it involves no LLM call before retrieval). Under the mean, a method *found* an API when any run's top k holds it, and a query shows run 0's rankings, stubs and plans; **k** cuts the rankings (1 to 20); **Ground truth** switches between the query's whole `api_list` (*candidates*, whose sizes fit the paper's numbers) and ToolBench's *relevant* APIs. Every method's per-query scores at every k, ground truth and run are computed once beside the stored study (`views/`, checked by checksums and computed again when stale), so a change only looks them up.
# - **Search** (Enter) finds queries in every subset by their text, their id, or an API id in their ground truth or in the shown methods' top k. A query that is in another study of the family (the paper's Greece example `G2_instruction:75279` is in the validation study) is named with a button that opens it there.
# - The **summary** above the table says what the view's queries share, per selected method: the share of their ground-truth APIs in its top k, at ranks k+1–20 or beyond, found only through a stub (not in RtP's top k), and the share of its wrong APIs that are siblings (same tool) of a ground-truth API; their most frequent categories and tools; ★ marks the set's best single architecture (RtP or PtR of any family), also in its column. A learned ranker's column says in words why its top API came first, its feature names behind a toggle.
# - The **table** lists the view's queries with both recalls, the gap (A − B) and the winner. A header sorts by its column (again: the other way; the gap header cycles through the largest gap either way, A ahead first, B ahead first); a query's button shows it. A filter opens on its largest gap.
# - **link to this view** holds the whole view (study, run, subset, filter, methods, k, ground truth, search, sort, query): open it, or share it, to see the same view. Served by `make explore`, the page's address follows the view as well. The report's worked queries and Table 2 examples link to their view here.
#
# Retrieved APIs that are in the ground truth carry a check mark. Under PtR, each stub is listed with its own top-k hits, which shows which stub found what, and each hit is marked *kept in the final top k* or *dropped by the merge*. Plans (steps, refusal and the judge's verdict) appear for the queries that were planned; the others say that no plan was recorded.
#
# The line under the explorer names the stored study it shows (embedder, registry, data, backend and parameters). A saved or exported copy of this notebook (such as the run's `report.html`) has no live kernel: it shows the summary, the first rows of the table and the query the explorer showed when it ran, as static HTML.
