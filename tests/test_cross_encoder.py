"""Cross-encoder runtime and its registry entry, on tiny random classifiers with MiniLM's tokenizer.

Random weights say nothing about relevance; what is checked is the plumbing: pair encoding,
batching, order, truncation, and logits → probability against a NumPy reference.
"""

from __future__ import annotations

import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
from tokenizers import Tokenizer

from crag_edge.config import Settings
from crag_edge.models.bert_onnx import convert_bert
from crag_edge.models.cross_encoder import OnnxCrossEncoder
from crag_edge.models.manifest import ManifestError, load_manifest
from crag_edge.models.onnx_session import relevance
from crag_edge.models.provision import pull_model
from crag_edge.models.registry import ModelNotInstalledError, load_cross_encoder
from crag_edge.types import ScoredBatch
from tests.bert_reference import ReferenceBert
from tests.tiny_bert import MINILM_VOCAB, register_local, tiny_checkpoint, tiny_classifier

QUERY = "How does insulin regulate blood sugar?"
PASSAGES = [
    "Insulin, produced by the pancreas, lowers the concentration of glucose in the blood.",
    "ok",
    "The Treaty of Westphalia, signed in 1648, ended the Thirty Years' War and reshaped the "
    "map of Europe; its principles of sovereignty still shape international law today.",
    "",
    "Mix the flour, sugar and eggs, then bake for twenty minutes at 180 degrees.",
    "Vitamin C deficiency causes scurvy.",
    "Glucose enters cells through transporters; insulin moves GLUT4 to the cell membrane, "
    "so muscle and fat cells take up more sugar after a meal.",
]
LONG_PASSAGE = " ".join(["insulin glucose pancreas liver muscle"] * 400)  # ~2000 tokens


@pytest.fixture(scope="module", params=[1, 2], ids=["1-label", "2-label"])
def ce_dir(
    request: pytest.FixtureRequest, minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    folder = tmp_path_factory.mktemp(f"ce{request.param}")
    return tiny_classifier(folder, minilm_dir / "tokenizer.json", request.param)


def _scorer(folder: Path, **kwargs: int) -> OnnxCrossEncoder:
    return OnnxCrossEncoder(folder / "model.onnx", folder / "tokenizer.json", "tiny-ce", **kwargs)


def _reference_probabilities(
    folder: Path, pairs: list[tuple[str, str]], max_length: int
) -> list[float]:
    """Tokenize independently, run the float64 reference, then sigmoid / softmax by hand."""
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    tokenizer.enable_truncation(max_length, strategy="longest_first")
    tokenizer.enable_padding()
    encodings = tokenizer.encode_batch(pairs)
    feeds = {
        "input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
        "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
        "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64),
    }
    assert feeds["token_type_ids"].max() == 1, "the passage must be marked as segment B"
    logits = ReferenceBert(folder).logits(**feeds)
    if logits.shape[1] == 1:
        return [float(x) for x in 1.0 / (1.0 + np.exp(-logits[:, 0]))]
    exp = np.exp(logits - logits.max(axis=1, keepdims=True))
    return [float(x) for x in exp[:, 1] / exp.sum(axis=1)]


def test_scores_are_probabilities_in_input_order(ce_dir: Path) -> None:
    one_by_one = _scorer(ce_dir, batch_size=1).score(QUERY, PASSAGES)
    batched = _scorer(ce_dir, batch_size=32).score(QUERY, PASSAGES)
    in_threes = _scorer(ce_dir, batch_size=3).score(QUERY, PASSAGES)
    assert len(batched.scores) == len(PASSAGES)
    assert all(isinstance(s, float) and 0.0 <= s <= 1.0 for s in batched.scores)
    assert batched.warnings == []
    np.testing.assert_allclose(one_by_one.scores, batched.scores, atol=1e-6)
    np.testing.assert_allclose(in_threes.scores, batched.scores, atol=1e-6)
    assert len(set(batched.scores)) > 1, "random weights still tell passages apart"


def test_probability_matches_reference(ce_dir: Path) -> None:
    got = _scorer(ce_dir).score(QUERY, PASSAGES).scores
    want = _reference_probabilities(ce_dir, [(QUERY, p) for p in PASSAGES], 256)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_query_and_passage_order_matters(ce_dir: Path) -> None:
    # Swapping the segments changes token_type_ids, so the pair encoding must be used.
    scorer = _scorer(ce_dir)
    forward = scorer.score(QUERY, [PASSAGES[0]]).scores[0]
    swapped = scorer.score(PASSAGES[0], [QUERY]).scores[0]
    assert abs(forward - swapped) > 1e-6


def test_long_passages_are_truncated_and_reported(ce_dir: Path) -> None:
    # 2000 tokens would overrun the 512 position embeddings if they reached the graph.
    scorer = _scorer(ce_dir, max_length=64)
    batch = scorer.score(QUERY, [LONG_PASSAGE, PASSAGES[1], LONG_PASSAGE + " more"])
    assert batch.warnings == [
        "2 of 3 query-passage pairs were truncated to 64 tokens; "
        "their scores judge only the start of the passage"
    ]
    pairs = [(QUERY, LONG_PASSAGE), (QUERY, PASSAGES[1]), (QUERY, LONG_PASSAGE + " more")]
    np.testing.assert_allclose(batch.scores, _reference_probabilities(ce_dir, pairs, 64), atol=1e-5)
    # Longest-first cuts the passage and keeps the short query whole.
    assert batch.scores[0] == pytest.approx(batch.scores[2], abs=1e-6)


def test_empty_passage_list(ce_dir: Path) -> None:
    assert _scorer(ce_dir).score(QUERY, []) == ScoredBatch(scores=[], warnings=[])


def test_relevance_of_known_logits() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning at extreme logits
        single = relevance(np.array([[0.0], [2.0], [-1000.0], [1000.0]], np.float32))
        pair = relevance(np.array([[0.0, 0.0], [1.0, 3.0], [1000.0, -1000.0]], np.float32))
    np.testing.assert_allclose(single, [0.5, 1 / (1 + np.exp(-2.0)), 0.0, 1.0], atol=1e-12)
    np.testing.assert_allclose(pair, [0.5, np.exp(3.0) / (np.exp(1.0) + np.exp(3.0)), 0.0])


def test_graphs_without_a_relevance_column_are_refused(tmp_path: Path, minilm_dir: Path) -> None:
    three = tiny_classifier(tmp_path / "three", minilm_dir / "tokenizer.json", 3)
    with pytest.raises(ValueError, match="no 'logits' output with 1 or 2 labels"):
        _scorer(three)
    embedding = convert_bert(three, tmp_path / "embedding.onnx", "embedding")
    with pytest.raises(ValueError, match="sequence-classification graph"):
        OnnxCrossEncoder(embedding, three / "tokenizer.json", "tiny-ce")


def test_bad_arguments_are_refused(ce_dir: Path) -> None:
    with pytest.raises(ValueError, match="batch_size >= 1"):
        _scorer(ce_dir, batch_size=0)
    with pytest.raises(ValueError, match="max_length >= 4"):
        _scorer(ce_dir, max_length=3)


# -- registry --------------------------------------------------------------------------------


def test_pulled_cross_encoder_is_loaded(tmp_path: Path, minilm_dir: Path) -> None:
    # 64 positions: the registry must cap max_length at the checkpoint's position table.
    source = tmp_path / "usb"
    tiny_checkpoint(source, num_labels=1, vocab_size=MINILM_VOCAB, max_position_embeddings=64)
    shutil.copy(minilm_dir / "tokenizer.json", source / "tokenizer.json")
    model_dir = tmp_path / "models"
    register_local(model_dir, source, "tiny-ce")
    report = pull_model(load_manifest(model_dir).get("tiny-ce"), model_dir)
    assert report.ok and report.converted == ["model.onnx", "model.int8.onnx"]

    scorer = load_cross_encoder(Settings.load(model_dir=model_dir).models)
    assert scorer is not None and scorer.name == "tiny-ce"
    batch = scorer.score(QUERY, [PASSAGES[0], LONG_PASSAGE])
    assert all(0.0 <= s <= 1.0 for s in batch.scores)
    assert batch.warnings and "truncated to 64 tokens" in batch.warnings[0]

    (model_dir / "tiny-ce" / "model.int8.onnx").unlink()  # the fp32 graph is the fallback
    explicit = load_cross_encoder(
        Settings.load(model_dir=model_dir, cross_encoder="tiny-ce").models
    )
    assert explicit is not None and len(explicit.score(QUERY, PASSAGES).scores) == len(PASSAGES)


def test_no_cross_encoder_installed_gives_none(tmp_path: Path, minilm_dir: Path) -> None:
    model_dir = tmp_path / "models"
    model_dir.mkdir()
    assert load_cross_encoder(Settings.load(model_dir=model_dir).models) is None
    # Registered and downloaded but never converted: still not usable.
    source = tiny_checkpoint(tmp_path / "usb", num_labels=1, vocab_size=MINILM_VOCAB)
    shutil.copy(minilm_dir / "tokenizer.json", source / "tokenizer.json")
    register_local(model_dir, source, "tiny-ce")
    pull_model(load_manifest(model_dir).get("tiny-ce"), model_dir, convert=False)
    assert load_cross_encoder(Settings.load(model_dir=model_dir).models) is None
    assert (
        load_cross_encoder(Settings.load(model_dir=model_dir, cross_encoder="tiny-ce").models)
        is None
    )


def test_misconfigured_cross_encoder_raises(tmp_path: Path) -> None:
    with pytest.raises(ModelNotInstalledError, match="of role 'embedder', not 'cross-encoder'"):
        load_cross_encoder(
            Settings.load(model_dir=tmp_path, cross_encoder="all-minilm-l6-v2").models
        )
    with pytest.raises(ManifestError, match="unknown model 'nope'"):
        load_cross_encoder(Settings.load(model_dir=tmp_path, cross_encoder="nope").models)
