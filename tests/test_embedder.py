"""OnnxEmbedder on the real all-MiniLM-L6-v2 graph."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.models.onnx_session import create_session
from crag_edge.types import Embedder

TEXTS = [
    "A man is playing a guitar on stage.",
    "ok",
    "The quarterly report shows revenue growth in every region except Europe, "
    "where currency effects and a weak housing market offset strong product sales.",
    "Photosynthesis happens in chloroplasts.",
    "How tall is the Eiffel Tower?",
    "Dogs are loyal.",
    "SQLite is a small, fast, self-contained, high-reliability, full-featured SQL database engine "
    "that is the most used database engine in the world.",
]


@pytest.fixture(scope="module")
def tokenizer_path(minilm_dir: Path) -> Path:
    return minilm_dir / "tokenizer.json"


@pytest.fixture(scope="module")
def embedder(minilm_onnx: Path, tokenizer_path: Path) -> OnnxEmbedder:
    return OnnxEmbedder(minilm_onnx, tokenizer_path, "all-minilm-l6-v2", batch_size=3)


def test_satisfies_protocol(embedder: OnnxEmbedder) -> None:
    protocol: Embedder = embedder
    assert protocol.model_id == "all-minilm-l6-v2"
    assert protocol.dim == 384


def test_output_is_normalised_float32(embedder: OnnxEmbedder) -> None:
    vectors = embedder.embed(TEXTS)
    assert vectors.shape == (len(TEXTS), 384)
    assert vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)


def test_order_is_restored_across_length_sorted_batches(embedder: OnnxEmbedder) -> None:
    # batch_size=3 and mixed lengths: sorting moves texts between batches.
    together = embedder.embed(TEXTS)
    alone = np.vstack([embedder.embed([text]) for text in TEXTS])
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_batch_size_does_not_change_vectors(minilm_onnx: Path, tokenizer_path: Path) -> None:
    texts = TEXTS * 5
    one = OnnxEmbedder(minilm_onnx, tokenizer_path, "m", batch_size=1).embed(texts)
    many = OnnxEmbedder(minilm_onnx, tokenizer_path, "m", batch_size=32).embed(texts)
    assert float(np.abs(one - many).max()) < 1e-5


def test_empty_input(embedder: OnnxEmbedder) -> None:
    vectors = embedder.embed([])
    assert vectors.shape == (0, 384)
    assert vectors.dtype == np.float32


def test_long_text_is_truncated(embedder: OnnxEmbedder) -> None:
    words = ("the quick brown fox jumps over the lazy dog " * 100).split()
    assert len(embedder.tokenizer.encode(" ".join(words)).ids) > 900
    # 254 one-token words + [CLS] + [SEP] = the 256 tokens kept from the long text.
    np.testing.assert_allclose(
        embedder.embed([" ".join(words)]), embedder.embed([" ".join(words[:254])]), atol=1e-5
    )


def test_tokenizer_is_untruncated_and_unpadded(embedder: OnnxEmbedder) -> None:
    # MiniLM's tokenizer.json itself truncates and pads to 128; chunkers need raw counts.
    assert len(embedder.tokenizer.encode("word " * 300).ids) == 302
    assert embedder.tokenizer.encode("hello").ids == [101, 7592, 102]


def test_paraphrase_is_closer_than_unrelated(embedder: OnnxEmbedder) -> None:
    anchor, paraphrase, unrelated = embedder.embed(
        [
            "The cat is sleeping on the sofa.",
            "A kitten naps on the couch.",
            "Interest rates were raised by the central bank.",
        ]
    )
    assert anchor @ paraphrase > anchor @ unrelated + 0.3


def test_missing_model_file(tmp_path: Path, tokenizer_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="crag-edge models pull"):
        OnnxEmbedder(tmp_path / "absent.onnx", tokenizer_path, "m")


def test_missing_tokenizer(minilm_onnx: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="crag-edge models pull"):
        OnnxEmbedder(minilm_onnx, tmp_path / "tokenizer.json", "m")


def test_corrupt_model_file(tmp_path: Path, minilm_onnx: Path) -> None:
    corrupt = tmp_path / "model.onnx"
    corrupt.write_bytes(b"\x00not an onnx graph" * 100)
    with pytest.raises(ValueError, match=r"corrupt.*crag-edge models pull"):
        create_session(corrupt)
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(minilm_onnx.read_bytes()[:100_000])
    with pytest.raises(ValueError, match="crag-edge models pull"):
        create_session(truncated)


def test_graph_without_embedding_output(tmp_path: Path, tokenizer_path: Path) -> None:
    x = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "s"])
    y = helper.make_tensor_value_info("logits", TensorProto.INT64, ["b", "s"])
    node = helper.make_node("Identity", ["input_ids"], ["logits"])
    graph = helper.make_graph([node], "not_an_embedder", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    path = tmp_path / "other.onnx"
    onnx.save_model(model, str(path))
    with pytest.raises(ValueError, match="sentence_embedding"):
        OnnxEmbedder(path, tokenizer_path, "m")
