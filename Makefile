# crag-edge: everything installs from nothing into .venv (Python 3.11 + package registries).
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
DEMO_DB ?= demo.db
DEMO_QUESTION ?= How does crag-edge decide whether retrieved evidence can be trusted?
TEST_MODELS := all-minilm-l6-v2 smollm2-135m-instruct crag-edge-evaluator-scifact
# llama-cpp-python builds from source once per venv (~5 min on 2 cores).
export CMAKE_BUILD_PARALLEL_LEVEL ?= $(shell nproc 2>/dev/null || echo 2)

.PHONY: install models test-models demo test lint bench clean-venv help
help:
	@echo "make demo   install, pull the default models, ingest and calibrate sample_corpus/, ask one question"
	@echo "make test   install, pull the small test models, run the test suite"
	@echo "make lint   ruff + mypy;  make bench   pytest-benchmark suite"
	@echo "make bundle the offline bundle in dist/ (docs/offline.md); make check-bundle installs it with no network"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e '.[llm,dev,train,postgres,office]'
	touch $@

install: $(STAMP)

models: user-install
	$(BIN)/crag-edge models pull

test-models: install
	$(BIN)/crag-edge models pull $(TEST_MODELS)

demo: models
	$(BIN)/crag-edge ingest --db $(DEMO_DB) sample_corpus
	$(BIN)/crag-edge calibrate --db $(DEMO_DB)
	$(BIN)/crag-edge answer --db $(DEMO_DB) "$(DEMO_QUESTION)"

test: test-models
	$(BIN)/python -m pytest

lint: install
	$(BIN)/ruff check crag_edge tests benchmarks scripts
	$(BIN)/ruff format --check crag_edge tests benchmarks scripts
	$(BIN)/mypy

bench: test-models
	$(BIN)/python -m pytest benchmarks --benchmark-only --benchmark-columns=min,mean,median,ops

clean-venv:
	rm -rf $(VENV)

# --- The user install: what `make demo` runs (USER_EXTRAS), no test or training tools. ---
USER_EXTRAS ?= llm,server,tui,office
USER_STAMP  := $(VENV)/.installed-user

.PHONY: user-install
$(USER_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e '.[$(USER_EXTRAS)]'
	touch $@

user-install: $(USER_STAMP)

# --- The offline bundle (docs/offline.md): built here, installed where there is no network. ---
# llama-cpp-python compiled for any x86-64 CPU: every CPU variant, the best chosen at run time.
# Built once into LLAMA_WHEELS (about an hour on 2 busy cores); --no-cache-dir: pip's cache would hand
# back the native build of `make install`, which runs only on CPUs like this one.
LLAMA_VERSION    := $(shell sed -n 's/.*"llama-cpp-python==\([0-9.]*\)".*/\1/p' pyproject.toml | head -1)
LLAMA_WHEELS     ?= build/llama-portable
LLAMA_CMAKE_ARGS := -DGGML_NATIVE=OFF -DGGML_BACKEND_DL=ON -DGGML_CPU_ALL_VARIANTS=ON \
	-DGGML_OPENMP=OFF -DLLAVA_BUILD=OFF \
	-DCMAKE_PROJECT_llama_cpp_INCLUDE=$(CURDIR)/packaging/bundle/llama-cpu-variants.cmake

.PHONY: llama-wheel bundle check-bundle
$(LLAMA_WHEELS)/.built: packaging/bundle/llama-cpu-variants.cmake | $(BIN)/python
	rm -rf $(LLAMA_WHEELS)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" $(BIN)/python -m pip wheel --no-deps --no-cache-dir \
		--no-binary llama-cpp-python --wheel-dir $(LLAMA_WHEELS) "llama-cpp-python==$(LLAMA_VERSION)"
	touch $@

llama-wheel: $(LLAMA_WHEELS)/.built

bundle: models llama-wheel
	$(BIN)/python scripts/build_bundle.py --llama-wheels $(LLAMA_WHEELS) --extras $(USER_EXTRAS)

check-bundle:
	scripts/check_offline_bundle.sh
