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
# # 09 · Report: the paper against this run
#
# Every number the paper reports is listed, with its source, in `references/paper.yaml`. This notebook looks each one up in the tables the earlier notebooks saved under `outputs/<run>/tables/` and sets this run's value beside the paper's. It also writes `outputs/<run>/report.md` (with the run's provenance and links to every saved figure) and `report.csv`.

# %% tags=["parameters"]
run_name = "default"
smoke = False
data_dir = None
subsets = ["G1", "G2", "G3"]
backend = "replay"
cassette = None
embedder = "all-MiniLM-L6-v2"
k = 5
runs = 1
plan_limit = 100
max_apis = None
limit = None
seed = 0
scale_seeds = 5

# %%
import pandas as pd
from IPython.display import Markdown, display

from toolbench_lib.analysis.display import format_numbers
from toolbench_lib.analysis.report import build_report, run_provenance, provenance_markdown, write_report
from toolbench_lib.analysis.style import use_style
from toolbench_lib.pipeline.experiment import ExperimentConfig

cfg = ExperimentConfig.from_params(run_name=run_name, smoke=smoke, data_dir=data_dir, subsets=subsets,
                                   backend=backend, cassette=cassette, embedder=embedder, k=k, runs=runs,
                                   plan_limit=plan_limit, max_apis=max_apis, limit=limit, seed=seed,
                                   scale_seeds=scale_seeds)
use_style()
provenance = run_provenance(cfg)
if provenance:
    display(Markdown(provenance_markdown(provenance[0])))
else:
    print(f"no stored study under {cfg.out_dir / 'runs'}: run notebooks 01-08 first")

# %% [markdown]
# ## How to read the table
#
# - `paper` is the paper's number: a value, a range (`min–max`, e.g. stubs per query 2.4–2.5 across the three sets) or a bound (`≥ 0.96` for plan fidelity).
# - `this_run` is the value this run saved, found through the entry's locator (the `source` column says which table, rows and column).
# - `difference` is this run minus the paper; for a range it is the distance outside the range (0 inside it).
# - `status` is *matches* (within half a unit of the paper's last decimal, or an entry's own tolerance), *within range*, *above* or *below*. When a number could not be found the status says why: *missing table* (the notebook that writes it was not run), *missing column*, *no matching rows* (e.g. a subset that was not evaluated). A missing number is reported, never an error.
#
# Expect differences. The paper used `thenlper/gte-base` and Gemini; a run on another embedder, another LLM backend or the smoke slice (2,500 APIs, 15 queries per set, a rules-based stand-in for the LLM) measures the same quantities under other conditions. Counts such as per-query wins scale with the number of queries (163 in G1, 199 in G2 in the paper).

# %%
report = build_report(cfg)
pd.set_option("display.max_colwidth", 80)
format_numbers(report)

# %%
counts = report["status"].value_counts()
print("status counts: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
found = report["this_run"].notna()
print(f"{int(found.sum())} of {len(report)} reference numbers found in this run's tables")

# %% [markdown]
# ## The written report
#
# The same table, the run's provenance and the figures go to `report.md` in the run folder; the table also goes to `report.csv`.

# %%
path = write_report(cfg)
print(f"report written to {path} and {path.with_suffix('.csv')}")
