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
# Every number the paper reports is listed, with its source, in `references/paper.yaml`. This notebook looks each one up in the tables the earlier notebooks saved under `outputs/<run>/tables/` and sets this run's value beside the paper's. It also writes `outputs/<run>/report.md` (with the run's provenance and links to every saved figure) and the scorecard to `tables/scorecard.csv`.

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
import json

import matplotlib.pyplot as plt
import pandas as pd
from IPython.display import Markdown, display

from toolbench_lib.analysis.display import format_numbers
from toolbench_lib.analysis.style import use_style
from toolbench_lib.report.checks import check_report, front_text
from toolbench_lib.report.scorecard import build_report, status_counts
from toolbench_lib.report.teaching import pipeline_figure, teaching_material
from toolbench_lib.report.write import QUANTITIES_FILE, provenance_markdown, run_provenance, write_report
from toolbench_lib.retrieval.methods import load_methods
from toolbench_lib.study.experiment import ExperimentConfig, save_figure

# %%
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
# ## The two pipelines
#
# The toolkit's drawing of the paper's Figure 1: RtP searches with the query itself; PtR has the planner write stubs first, with no tool in sight, searches with each stub and keeps the APIs most similar to any of them. Both show the planner the same number of APIs from the same index; the retriever family (dense, BM25 or hybrid) is where a searched text meets that index.

# %%
study = provenance[0] if provenance else {}
fig = pipeline_figure(cfg.k, study.get("registry_size"), study.get("model"))
save_figure(fig, "pipeline", cfg)
plt.show()

# %% [markdown]
# ## Glossary

# %%
material = teaching_material(cfg)
display(Markdown(material.glossary))

# %% [markdown]
# ## Worked queries
#
# Three queries of this run's study, picked by rule rather than by hand: PtR's largest win on recall@k, RtP's largest win, and a query where both miss every ground-truth API. Each shows the query, PtR's stubs, both top-k lists with the hits marked, and the ground truth.

# %%
format_numbers(material.picks)

# %%
display(Markdown("\n".join(material.worked)))

# %% [markdown]
# ## The paper's Table 2 examples
#
# The paper illustrates both failure modes with examples (its Table 2). Those whose query is in this run are shown as above, beside the paper's own account; the others are listed with the reason they are missing.

# %%
display(Markdown("\n".join(material.examples)))

# %% [markdown]
# ## How to read the table
#
# - `paper` is the paper's number: a value, a range (`min–max`, e.g. stubs per query 2.4–2.5 across the three sets) or a bound (`≥ 0.96` for plan fidelity). Each entry of `references/paper.yaml` carries the sentence of the paper it comes from (`quote`), checked against the paper's text by a test.
# - `this run` is the value this run saved, found through the entry's locator (the `source` column says which table, rows and column), with its 95% CI where the table has one (over queries, clustered by API sample).
# - `status` rests on evidence: *consistent* when the paper's value lies in this run's 95% CI, or (without a CI) within the entry's stated tolerance, inside the paper's range, or equal at the paper's last decimal; win counts are compared as shares of their set (Wilson 95% interval). *differs* otherwise, with the direction of this run against the paper. A judged pass rate is *not scored* when the judge's kappa is below 0.4; the objective pass rate stands beside it. When a number could not be found the status says why (*missing table*, *missing column*, *no matching rows*).
# - `cause` and `cause_status`: for a row that differs, the cause of `references/causes.yaml` that names this row's metric and k, with the value it predicts and that value's CI: *explained* when that CI covers the paper's value, *partly explained (x of y)* when it closes part of the gap, *setup difference* for a difference of setup (registry version, query set, prompt format; not a tested cause), *not tested* when its ablation did not run, *unexplained* otherwise.
#
# Expect differences. The paper used `thenlper/gte-base` and Gemini; a run on another embedder, another LLM backend or the smoke slice (2,500 APIs, 15 queries per set, a rules-based stand-in for the LLM) measures the same quantities under other conditions. Counts such as per-query wins scale with the number of queries, so they are compared as shares of their set.

# %%
report = build_report(cfg)
pd.set_option("display.max_colwidth", 80)
format_numbers(report)

# %%
counts = status_counts(report)
print("status counts: " + ", ".join(f"{n} {s}" for s, n in counts.items()))
found = report["this_run"].notna()
print(f"{int(found.sum())} of {len(report)} reference numbers found in this run's tables")

# %% [markdown]
# ## The written report
#
# The same table, the run's provenance and the figures go to `report.md` in the run folder; the table also goes to `tables/scorecard.csv`.

# %%
path = write_report(cfg, material=material)
print(f"report written to {path} and {path.with_suffix('.csv')}")

# %% [markdown]
# ## The report's front
#
# What a reader sees first: the question, the answer per retriever with its one test, the setup differences, what the paper gets right and wrong, the limits and a conclusion per retriever. Below it, the checks every written report must pass (`analysis.report_checks`); an empty list means it passes them all.

# %%
text = path.read_text(encoding="utf-8")
display(Markdown(front_text(text)))
print("report checks:", check_report(text, json.loads((cfg.out_dir / QUANTITIES_FILE).read_text()),
                                      report.to_dict("records"), list(load_methods())))
