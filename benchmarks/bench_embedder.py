"""Embedding throughput, fp32 vs int8 MiniLM-L6: 32 texts of ~180 tokens (a typical ingest group)
in model calls of 32 or of 4 texts (the default `embed_batch_size`), and in the same group what
ingest's last stage adds for the evaluator's passage readings: a second model pass per text
for a segment scorer, a copy of the embeddings for the shipped query tower.

Run: `pytest benchmarks/bench_embedder.py --benchmark-group-by=group`. Both precisions share one
group, so pytest-benchmark prints their ratio. The ONNX graphs are converted once per module.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from benchmarks.evaluators import reading_alone, shipped_evaluator
from benchmarks.texts import PASSAGE
from crag_edge.models.embedder import OnnxEmbedder

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
@pytest.mark.parametrize("reading", ["alone", "copied"])
def test_evaluator_readings_of_the_same_texts(
    benchmark: BenchmarkFixture, minilm_int8_onnx: Path, minilm_dir: Path, reading: str
) -> None:
    """Ingest's passage stage (`ingest.passages`): a segment scorer reads each text alone;
    the shipped query tower copies the vectors the embedder already made."""
    embedder = OnnxEmbedder(minilm_int8_onnx, minilm_dir / "tokenizer.json", "all-minilm-l6-v2")
    evaluator = shipped_evaluator(embedder, THREADS)
    texts = _texts(embedder)
    if reading == "alone":
        alone = reading_alone(evaluator, THREADS)
        readings = benchmark.pedantic(
            alone.encode_passages, args=(texts,), rounds=5, warmup_rounds=1
        )
    else:
        vectors = embedder.embed(texts)
        readings = benchmark.pedantic(
            evaluator.readings_of, args=(texts, vectors), rounds=5, warmup_rounds=1
        )
    assert len(readings) == BATCH and not any(r.truncated for r in readings)
