"""BERT → ONNX conversion and int8 quantization, checked against a NumPy reference forward pass."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest
from safetensors.numpy import load_file, save_file
from tokenizers import Tokenizer

from crag_edge.models.bert_onnx import INPUT_NAMES, SEGMENT_VECTOR_OUTPUTS, convert_bert
from crag_edge.models.embedder import OnnxEmbedder
from tests.bert_reference import ReferenceBert
from tests.tiny_bert import NUM_LABELS, TINY_CONFIG, tiny_checkpoint

SENTENCES = [
    "The cat sat on the mat.",
    "A feline was resting on the rug.",
    "Quarterly revenue grew by five percent compared with last year.",
    "How do I reset my router to factory settings?",
    "Photosynthesis converts light energy into chemical energy in plants.",
    "The Treaty of Westphalia ended the Thirty Years' War in 1648.",
    "Mix the flour, sugar and eggs, then bake for twenty minutes at 180 degrees.",
    "SQLite stores an entire database in a single cross-platform file.",
    "She scored the winning goal in the final minute of extra time.",
    "Insulin regulates the amount of glucose in the blood.",
    "Der schnelle braune Fuchs springt über den faulen Hund.",
    "Error 404: the requested page could not be found on this server.",
    "def add(a, b): return a + b",
    "Mount Everest is the highest mountain above sea level.",
    "The central bank raised interest rates to curb inflation.",
    "Wash your hands before handling food.",
    "Neural networks approximate functions by composing simple nonlinear layers.",
    "The train to Edinburgh departs from platform four at 9:15.",
    "Vitamin C deficiency causes scurvy.",
    "ok",
]


def _run(onnx_path: Path, feeds: dict[str, np.ndarray]) -> np.ndarray:
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, feeds)[0])


def _minilm_feeds(minilm_dir: Path) -> dict[str, np.ndarray]:
    tokenizer = Tokenizer.from_file(str(minilm_dir / "tokenizer.json"))
    tokenizer.no_truncation()
    tokenizer.enable_padding()  # pad to the longest: most rows carry padding
    encodings = tokenizer.encode_batch(SENTENCES[:6])
    return {
        "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
    }


def _random_feeds(rng: np.random.Generator, batch: int = 4, seq: int = 12) -> dict[str, np.ndarray]:
    lengths = rng.integers(3, seq + 1, size=batch)
    lengths[0] = seq
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int64)
    return {
        "input_ids": rng.integers(1, TINY_CONFIG["vocab_size"], size=(batch, seq)) * mask,
        "attention_mask": mask,
        "token_type_ids": (np.arange(seq)[None, :] >= lengths[:, None] // 2) * mask,
    }


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_checkpoint(tmp_path_factory.mktemp("tiny_bert"))


def test_minilm_embedding_matches_reference(minilm_dir: Path, minilm_onnx: Path) -> None:
    feeds = _minilm_feeds(minilm_dir)
    assert feeds["attention_mask"].min() == 0, "the check must cover padded rows"
    got = _run(minilm_onnx, feeds)
    assert got.shape == (6, 384)
    assert got.dtype == np.float32
    want = ReferenceBert(minilm_dir).sentence_embedding(**feeds)
    diff = float(np.abs(got - want).max())
    # Measured: 9.4e-8 (fp32 graph vs float64 reference).
    assert diff < 1e-4, f"max abs diff {diff:.2e}"


def test_tiny_classifier_matches_reference(tiny_dir: Path, tmp_path: Path) -> None:
    out = convert_bert(tiny_dir, tmp_path / "tiny.onnx", "classification")
    feeds = _random_feeds(np.random.default_rng(1))
    got = _run(out, feeds)
    assert got.shape == (4, NUM_LABELS)
    want = ReferenceBert(tiny_dir).logits(**feeds)
    diff = float(np.abs(got - want).max())
    # Measured: 4.9e-7 (fp32 graph vs float64 reference).
    assert diff < 1e-4, f"max abs diff {diff:.2e}"


def _segment_reference(
    checkpoint: Path, feeds: dict[str, np.ndarray]
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The segment scorer by its definition: each text embedded alone by the reference
    BERT (u, v), then Σ w·u·v + b; returns the logits, u and v."""
    bert = ReferenceBert(checkpoint)
    out, us, vs = [], [], []
    for ids, mask, types in zip(*(feeds[k] for k in INPUT_NAMES), strict=True):
        halves = []
        for part in (0, 1):
            tokens = ids[(mask == 1) & (types == part)][None]
            ones = np.ones_like(tokens)
            halves.append(bert.sentence_embedding(tokens, ones, np.zeros_like(tokens))[0])
        u, v = halves
        out.append([(u * v * bert.w["head.weight"]).sum() + bert.w["head.bias"][0]])
        us.append(u)
        vs.append(v)
    return np.asarray(out), np.asarray(us), np.asarray(vs)


def test_segment_scorer_is_weighted_cosine_of_separate_embeddings(tmp_path: Path) -> None:
    checkpoint = tiny_checkpoint(tmp_path / "segment", segment=True)
    out = convert_bert(checkpoint, tmp_path / "segment.onnx", "classification")
    feeds = _random_feeds(np.random.default_rng(4))
    assert feeds["attention_mask"].min() == 0, "the check must cover padded rows"
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    got = session.run(["logits", *SEGMENT_VECTOR_OUTPUTS], feeds)
    assert got[0].shape == (4, 1)
    for output, want in zip(got, _segment_reference(checkpoint, feeds), strict=True):
        diff = float(np.abs(output - want).max())
        assert diff < 1e-4, f"max abs diff {diff:.2e}"
    with pytest.raises(ValueError, match="only the classification head"):
        convert_bert(checkpoint, tmp_path / "embedding.onnx", "embedding")


def test_unprefixed_legacy_names_give_same_graph(tmp_path: Path, tiny_dir: Path) -> None:
    legacy = tiny_checkpoint(tmp_path / "legacy", prefix="", legacy_ln=True)
    feeds = _random_feeds(np.random.default_rng(2))
    modern = _run(convert_bert(tiny_dir, tmp_path / "modern.onnx", "embedding"), feeds)
    old = _run(convert_bert(legacy, tmp_path / "legacy.onnx", "embedding"), feeds)
    np.testing.assert_array_equal(modern, old)
    want = ReferenceBert(legacy).sentence_embedding(**feeds)
    assert float(np.abs(old - want).max()) < 1e-4
    np.testing.assert_allclose(np.linalg.norm(old, axis=1), 1.0, atol=1e-6)


def test_padding_does_not_change_the_result(tiny_dir: Path, tmp_path: Path) -> None:
    out = convert_bert(tiny_dir, tmp_path / "tiny.onnx", "classification")
    feeds = _random_feeds(np.random.default_rng(3), batch=1, seq=7)
    padded = {k: np.pad(v, ((0, 0), (0, 5))) for k, v in feeds.items()}
    np.testing.assert_allclose(_run(out, padded), _run(out, feeds), atol=1e-6)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"hidden_act": "relu"}, "hidden_act 'relu'"),
        ({"position_embedding_type": "relative_key"}, "position_embedding_type 'relative_key'"),
        ({"model_type": "roberta"}, "model_type 'roberta'"),
        ({"num_attention_heads": 5}, "multiple of num_attention_heads"),
    ],
)
def test_unsupported_config_is_rejected(
    tmp_path: Path, config: dict[str, Any], message: str
) -> None:
    checkpoint = tiny_checkpoint(tmp_path / "ckpt", **config)
    with pytest.raises(ValueError, match=message):
        convert_bert(checkpoint, tmp_path / "out.onnx", "embedding")


def test_missing_tensor_is_named(tmp_path: Path) -> None:
    checkpoint = tiny_checkpoint(tmp_path / "ckpt")
    tensors = load_file(str(checkpoint / "model.safetensors"))
    del tensors["bert.encoder.layer.1.attention.self.key.weight"]
    save_file(tensors, str(checkpoint / "model.safetensors"))
    missing = r"missing tensor 'bert\.encoder\.layer\.1\.attention\.self\.key\.weight'"
    with pytest.raises(ValueError, match=missing):
        convert_bert(checkpoint, tmp_path / "out.onnx", "embedding")
    assert not (tmp_path / "out.onnx").exists()


def test_classification_needs_a_classifier(minilm_dir: Path, tmp_path: Path) -> None:
    # all-MiniLM-L6-v2 is a bare BertModel: no classifier layer to convert.
    with pytest.raises(ValueError, match=r"missing tensor 'classifier\.bias'"):
        convert_bert(minilm_dir, tmp_path / "out.onnx", "classification")


def test_unknown_head_is_rejected(tiny_dir: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown head"):
        convert_bert(tiny_dir, tmp_path / "out.onnx", "pooler")  # type: ignore[arg-type]


def test_write_is_atomic_and_overwrites(tiny_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "nested" / "tiny.onnx"
    out.parent.mkdir()
    out.write_bytes(b"stale")
    convert_bert(tiny_dir, out, "classification")
    assert out.stat().st_size > 1000
    assert [p.name for p in out.parent.iterdir()] == ["tiny.onnx"]


def test_int8_close_to_fp32(minilm_dir: Path, minilm_onnx: Path, minilm_int8_onnx: Path) -> None:
    tokenizer = minilm_dir / "tokenizer.json"
    fp32 = OnnxEmbedder(minilm_onnx, tokenizer, "minilm").embed(SENTENCES)
    int8 = OnnxEmbedder(minilm_int8_onnx, tokenizer, "minilm").embed(SENTENCES)
    cosines = (fp32 * int8).sum(axis=1)
    # Measured: mean 0.991, min 0.965 on these 20 sentences.
    assert cosines.mean() >= 0.98, f"mean cosine {cosines.mean():.4f}, min {cosines.min():.4f}"
    assert minilm_int8_onnx.stat().st_size < minilm_onnx.stat().st_size / 3


def test_quantize_is_atomic(minilm_int8_onnx: Path) -> None:
    leftovers = [p.name for p in minilm_int8_onnx.parent.iterdir() if "tmp" in p.name]
    assert leftovers == []
