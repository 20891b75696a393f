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

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install -e '.[llm,dev,train,postgres,office,ocr]'
	touch $@

install: $(STAMP)

models: install
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
