"""Embedding throughput, fp32 vs int8 MiniLM-L6: 32 texts of ~180 tokens (a typical ingest group)
in model calls of 32 or of 4 texts (the default `embed_batch_size`), and in the same group what
ingest's last stage adds: the shipped evaluator's passage readings.

Run: `pytest benchmarks/bench_embedder.py --benchmark-group-by=group`. Both precisions share one
group, so pytest-benchmark prints their ratio. The ONNX graphs are converted once per module.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from benchmarks.texts import PASSAGE
from crag_edge.config import Settings
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.models.registry import load_cross_encoder
from crag_edge.types import PassageEncoder

BATCH, TOKENS, THREADS = 32, 180, 2


@pytest.fixture(scope="module")
def graphs(minilm_onnx: Path, minilm_int8_onnx: Path) -> dict[str, Path]:
    return {"fp32": minilm_onnx, "int8": minilm_int8_onnx}


def _texts(embedder: OnnxEmbedder) -> list[str]:
    """32 different windows of ~TOKENS tokens over the passage (distinct texts, equal lengths)."""
    ids = embedder.tokenizer.encode(PASSAGE * 4, add_special_tokens=False).ids
    return [embedder.tokenizer.decode(ids[i * 9 : i * 9 + TOKENS - 2]) for i in range(BATCH)]


@pytest.mark.benchmark(group=f"embed {BATCH} texts x {TOKENS} tokens, {THREADS} threads")
@pytest.mark.parametrize(("precision", "batch_size"), [("fp32", 32), ("int8", 32), ("int8", 4)])
def test_embed_throughput(
    benchmark: BenchmarkFixture,
    graphs: dict[str, Path],
    minilm_dir: Path,
    precision: str,
    batch_size: int,
) -> None:
    embedder = OnnxEmbedder(
        graphs[precision],
        minilm_dir / "tokenizer.json",
        "all-minilm-l6-v2",
        threads=THREADS,
        batch_size=batch_size,
    )
    texts = _texts(embedder)
    lengths = [len(embedder.tokenizer.encode(t).ids) for t in texts]
    assert all(TOKENS - 10 <= n <= TOKENS + 10 for n in lengths), lengths
    vectors = benchmark.pedantic(embedder.embed, args=(texts,), rounds=5, warmup_rounds=1)
    assert vectors.shape == (BATCH, embedder.dim)


@pytest.mark.benchmark(group=f"embed {BATCH} texts x {TOKENS} tokens, {THREADS} threads")
def test_evaluator_readings_of_the_same_texts(
    benchmark: BenchmarkFixture, minilm_int8_onnx: Path, minilm_dir: Path
) -> None:
    """Ingest's passage stage (`ingest.passages`): the evaluator reads each text alone."""
    evaluator = load_cross_encoder(Settings.load(onnx_threads=THREADS).models)
    if not isinstance(evaluator, PassageEncoder):
        pytest.skip("the installed evaluator does not store passage readings")
    embedder = OnnxEmbedder(minilm_int8_onnx, minilm_dir / "tokenizer.json", "all-minilm-l6-v2")
    texts = _texts(embedder)
    readings = benchmark.pedantic(
        evaluator.encode_passages, args=(texts,), rounds=5, warmup_rounds=1
    )
    assert len(readings) == BATCH and not any(r.truncated for r in readings)
