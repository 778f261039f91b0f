"""The one source of defaults: what `make run`, the notebooks, the CLI, the study runner and bench use unless
told otherwise. Every module reads its defaults from here; the Makefile reads ``EMBEDDER`` from this file."""

from __future__ import annotations

EMBEDDER = "all-MiniLM-L6-v2"  # `make run`'s and `evaluate`'s; the replay cassette's plans were made with it
PAPER_EMBEDDER = "thenlper/gte-base"  # the paper's embedder, an opt-in (--model thenlper/gte-base)
K = 5  # the cut-off of the primary endpoint and of every table that names no other
PLAN_K = 5  # APIs the planner is shown
DEPTH = 20  # hits each searched text keeps
K_MAX = 20  # the deepest cut-off every evaluation holds (the k-ablation's 1..20)
RUNS = 4  # independent runs of stubs and retrieval
PLAN_RUNS = 1  # the first runs that get plans and verdicts (the cassette holds plans of run 0)
PLAN_LIMIT = 100  # queries per set that get plans
TEMPERATURE = 0.0  # run 0's, as in the paper
RUN_TEMPERATURE = 0.3  # later runs', seeded by the run index
SEED = 0  # sub-registry draws, resampling, folds and learned rankers
FOLDS = 5  # cross-validation folds (the learned ranker's grouped by query text and ground-truth set)
SUBSETS = ("G1", "G2", "G3")  # the design sets
GT_DEFINITIONS = ("candidates", "relevant")
DEFAULT_GT = "candidates"
DEFAULT_FAMILY = "dense"  # the paper's
STUDY_FAMILIES = ("dense", "bm25", "hybrid")  # the retriever study's (notebook 12)
SCALE_SIZES = (1000, 2000, 5000, 10000, 20000, None)  # registry sizes of the scale study (None: all)
SCALE_SEEDS = 5
