"""Cross-encoder latency, fp32 vs int8, MiniLM-L6 shape: 20 pairs of ~180 tokens (one grading).

Run: `pytest benchmarks/bench_cross_encoder.py --benchmark-group-by=group`. Both precisions share
one group, so pytest-benchmark prints their ratio. No cross-encoder checkpoint is obtainable
offline, so the model is all-MiniLM-L6-v2's encoder and pooler under a random 1-label
classifier: the scores mean nothing, the shape (hence the latency) is that of
cross-encoder/ms-marco-MiniLM-L6-v2.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
from pytest_benchmark.fixture import BenchmarkFixture
from safetensors.numpy import load_file, save_file

from benchmarks.texts import PASSAGE
from crag_edge.models.bert_onnx import convert_bert
from crag_edge.models.cross_encoder import OnnxCrossEncoder
from crag_edge.models.onnx_session import plain_tokenizer
from crag_edge.models.quantize import quantize_int8

PAIRS, TOKENS, THREADS = 20, 180, 2
QUERY = "How does corrective retrieval decide whether retrieved evidence can be trusted?"


@pytest.fixture(scope="module")
def graphs(minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """MiniLM-L6 plus a random [1, 384] classifier, converted to fp32 and int8 graphs."""
    folder = tmp_path_factory.mktemp("bench_ce")
    tensors = load_file(str(minilm_dir / "model.safetensors"))
    rng = np.random.default_rng(0)
    hidden = tensors["pooler.dense.bias"].size
    tensors["classifier.weight"] = rng.normal(0.0, 0.02, size=(1, hidden)).astype(np.float32)
    tensors["classifier.bias"] = np.zeros(1, np.float32)
    save_file(tensors, str(folder / "model.safetensors"))
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(minilm_dir / name, folder / name)
    fp32 = convert_bert(folder, folder / "model.onnx", "classification")
    return {"fp32": fp32, "int8": quantize_int8(fp32, folder / "model.int8.onnx")}


def _passages(tokenizer_path: Path) -> list[str]:
    """20 different windows over the passage, each pair ([CLS] q [SEP] p [SEP]) ~TOKENS long."""
    tokenizer = plain_tokenizer(tokenizer_path)
    budget = TOKENS - len(tokenizer.encode(QUERY).ids) - 1  # the query's encoding has 2 specials
    ids = tokenizer.encode(PASSAGE * 4, add_special_tokens=False).ids
    return [tokenizer.decode(ids[i * 9 : i * 9 + budget]) for i in range(PAIRS)]


@pytest.mark.benchmark(group=f"cross-encoder {PAIRS} pairs x {TOKENS} tokens, {THREADS} threads")
@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_cross_encoder_latency(
    benchmark: BenchmarkFixture, graphs: dict[str, Path], precision: str
) -> None:
    tokenizer_path = graphs["fp32"].with_name("tokenizer.json")
    scorer = OnnxCrossEncoder(
        graphs[precision], tokenizer_path, "minilm-l6-classifier", threads=THREADS
    )
    passages = _passages(tokenizer_path)
    tokenizer = plain_tokenizer(tokenizer_path)
    lengths = [len(tokenizer.encode(QUERY, p).ids) for p in passages]
    assert all(TOKENS - 10 <= n <= TOKENS + 10 for n in lengths), lengths
    batch = benchmark.pedantic(scorer.score, args=(QUERY, passages), rounds=5, warmup_rounds=1)
    assert len(batch.scores) == PAIRS and batch.warnings == []
