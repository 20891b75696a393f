"""Shared fixtures (loaded for tests/ and benchmarks/ by the root conftest.py): real models."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from crag_edge.config import Settings
from crag_edge.models.bert_onnx import convert_bert
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.models.manifest import load_manifest
from crag_edge.models.quantize import quantize_int8
from crag_edge.models.registry import ModelNotInstalledError, installed_file

MINILM = "all-minilm-l6-v2"
SMOLLM = "smollm2-135m-instruct"


@pytest.fixture(scope="session")
def model_dir() -> Path:
    """The model folder `make test` fills (`crag-edge models pull`); never a hub at test time."""
    return Settings.load().models.model_dir


@pytest.fixture(scope="session")
def smollm_path(model_dir: Path) -> Path:
    """The SmolLM2-135M GGUF file: the real small LLM of the tests."""
    settings = Settings.load().models
    spec = load_manifest(model_dir).get(SMOLLM)
    try:
        return installed_file(settings, SMOLLM, spec.files[0].name)
    except ModelNotInstalledError as exc:
        pytest.fail(f"{exc}; run `make test-models`")


@pytest.fixture(scope="session")
def minilm_dir(model_dir: Path) -> Path:
    """all-MiniLM-L6-v2 checkpoint folder (config.json, model.safetensors, tokenizer.json)."""
    path = Path(os.environ.get("CRAG_EDGE_TEST_MINILM", model_dir / MINILM))
    if not (path / "model.safetensors").is_file():
        pytest.fail(
            f"MiniLM checkpoint not found in {path}: run `make test-models` "
            f"(or `crag-edge models pull {MINILM}`)"
        )
    return path


@pytest.fixture(scope="session")
def minilm_onnx(minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """MiniLM converted here, in this run (the conversion itself is under test)."""
    return convert_bert(minilm_dir, tmp_path_factory.mktemp("onnx") / "model.onnx", "embedding")


@pytest.fixture(scope="session")
def minilm_int8_onnx(minilm_onnx: Path) -> Path:
    """The int8 dynamically quantized form of `minilm_onnx`."""
    return quantize_int8(minilm_onnx, minilm_onnx.with_name("model.int8.onnx"))


@pytest.fixture(scope="session")
def embedder(minilm_dir: Path, minilm_onnx: Path) -> OnnxEmbedder:
    """The real MiniLM embedder, as ingest and retrieval use it."""
    return OnnxEmbedder(minilm_onnx, minilm_dir / "tokenizer.json", MINILM, threads=2)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Settings from defaults only: no CRAG_EDGE_/KB_AGENT_ variables from the caller, and
    the working directory a fresh folder (no `.env` but the test's own)."""
    for name in list(os.environ):
        if name.startswith(("CRAG_EDGE_", "KB_AGENT_")):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)
