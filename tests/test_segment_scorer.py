"""The segment scorer's stored passage readings: the same scores as the pair graph, stored at
ingest, reused by every query, resumable, and never stale or kept from a read-only corpus."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from crag_edge.config import Settings, SettingsError
from crag_edge.engine import Engine
from crag_edge.grading import Grader
from crag_edge.groups import CorpusView
from crag_edge.ingest.passages import encode_missing_passages
from crag_edge.models.bert_onnx import convert_bert
from crag_edge.models.cross_encoder import OnnxCrossEncoder
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.models.registry import load_cross_encoder
from crag_edge.models.segment_scorer import (
    OnnxSegmentScorer,
    PassageReaderError,
    open_cross_encoder,
    segment_head,
)
from crag_edge.training.vocab import segment_pair_template
from crag_edge.types import (
    EmbeddingReader,
    EncodedPassage,
    PassageEncoder,
    PassageIndex,
    ScoredBatch,
    Vector,
)
from tests.test_score_cache import THROUGH_THE_CROSS_ENCODER
from tests.tiny_bert import MINILM_VOCAB, tiny_checkpoint, tiny_classifier

EVERYTHING = CorpusView.everything()  # the owner's view: every document

QUESTION = "How do plants turn sunlight into chemical energy?"
PASSAGES = [
    "Plants capture sunlight with chlorophyll and store its energy as sugar.",
    "Cells break sugar down with oxygen to release energy.",
    "The moon's gravity raises the oceans into two bulges.",
    "ok",
]
DOCS = {
    f"doc{i}.md": f"# Note {i}\n\n{text}\n" for i, text in enumerate(PASSAGES[:3] * 2)
}  # six one-chunk documents (three texts, each twice)


@pytest.fixture(scope="module")
def segment_dir(minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random segment scorer with MiniLM's vocabulary and the segment pair template
    ([CLS] query [SEP] [CLS] passage [SEP]), converted to fp32 ONNX."""
    folder = tiny_checkpoint(
        tmp_path_factory.mktemp("segment"),
        segment=True,
        vocab_size=MINILM_VOCAB,
        max_position_embeddings=512,
    )
    doc = json.loads((minilm_dir / "tokenizer.json").read_text(encoding="utf-8"))
    (folder / "tokenizer.json").write_text(json.dumps(segment_pair_template(doc)))
    convert_bert(folder, folder / "model.onnx", "classification")
    return folder


@pytest.fixture(scope="module")
def segment(segment_dir: Path) -> OnnxSegmentScorer:
    scorer = open_cross_encoder(
        segment_dir / "model.onnx", segment_dir / "tokenizer.json", "tiny-seg"
    )
    assert isinstance(scorer, OnnxSegmentScorer)
    return scorer


class CountingEncoder:
    """A real segment scorer that counts the passages it had to read."""

    def __init__(self, inner: OnnxSegmentScorer) -> None:
        self.inner = inner
        self.encoded = 0

    @property
    def name(self) -> str:
        return self.inner.name

    def score(self, query: str, passages: Sequence[str]) -> ScoredBatch:
        return self.score_encoded(query, self.encode_passages(passages))

    def encode_passages(self, passages: Sequence[str]) -> list[EncodedPassage]:
        self.encoded += len(passages)
        return self.inner.encode_passages(passages)

    def score_encoded(self, query: str, passages: Sequence[EncodedPassage]) -> ScoredBatch:
        return self.inner.score_encoded(query, passages)


def test_stored_readings_score_exactly_as_the_pair_graph(
    segment: OnnxSegmentScorer, segment_dir: Path
) -> None:
    pair = OnnxCrossEncoder(segment_dir / "model.onnx", segment_dir / "tokenizer.json", "pair")
    want = pair.score(QUESTION, PASSAGES).scores
    readings = segment.encode_passages(PASSAGES)
    assert segment.score_encoded(QUESTION, readings).scores == pytest.approx(want, abs=1e-5)
    assert segment.score(QUESTION, PASSAGES).scores == pytest.approx(want, abs=1e-5)
    # A reading depends on its passage alone, not on the passages read with it.
    alone = segment.encode_passages(PASSAGES[2:3])[0]
    np.testing.assert_array_equal(alone.vector, readings[2].vector)
    assert isinstance(segment, PassageEncoder) and not isinstance(pair, PassageEncoder)


def test_truncated_passages_are_flagged_and_reported(segment_dir: Path) -> None:
    head = segment_head(segment_dir / "model.onnx")
    assert head is not None
    short = OnnxSegmentScorer(
        segment_dir / "model.onnx", segment_dir / "tokenizer.json", "tiny-seg", head, max_length=8
    )
    readings = short.encode_passages(PASSAGES)
    assert [r.truncated for r in readings] == [True, True, True, False]
    batch = short.score_encoded(QUESTION, readings)
    assert batch.warnings == [
        "3 of 4 passages were truncated to 8 tokens; their scores judge only the start of "
        "the passage"
    ]
    assert short.score_encoded(QUESTION, []).scores == []


def test_other_graphs_get_the_pair_runtime_and_its_errors(minilm_dir: Path, tmp_path: Path) -> None:
    folder = tiny_classifier(tmp_path / "ce", minilm_dir / "tokenizer.json")
    scorer = open_cross_encoder(folder / "model.onnx", folder / "tokenizer.json", "tiny-ce")
    assert type(scorer) is OnnxCrossEncoder
    with pytest.raises(FileNotFoundError, match="models pull"):
        open_cross_encoder(tmp_path / "missing.onnx", folder / "tokenizer.json", "x")
    garbage = tmp_path / "garbage.onnx"
    garbage.write_bytes(b"\x08\x07 not a protobuf graph" * 10)
    with pytest.raises(ValueError, match="corrupt or unreadable"):
        open_cross_encoder(garbage, folder / "tokenizer.json", "x")


def test_the_shipped_evaluator_reads_passages_with_the_embedder(embedder: OnnxEmbedder) -> None:
    """The default evaluator is a query tower: its reading of a passage is the embedder's
    vector of it, so a corpus's stored embeddings are its readings; it ranks the answer first."""
    scorer = load_cross_encoder(Settings.load().models, embedder)
    assert isinstance(scorer, OnnxSegmentScorer) and isinstance(scorer, EmbeddingReader)
    assert scorer.passage_reader == embedder.model_id
    vectors = embedder.embed(PASSAGES)
    readings = scorer.encode_passages(PASSAGES)
    np.testing.assert_array_equal(np.stack([r.vector for r in readings]), vectors)
    copied = scorer.readings_of(PASSAGES, vectors)
    got = scorer.score_encoded(QUESTION, copied).scores
    assert got == scorer.score(QUESTION, PASSAGES).scores
    assert int(np.argmax(got)) == 0 and got[0] > got[2] + 0.2


def test_a_query_tower_without_its_embedder_is_skipped_or_refused(
    embedder: OnnxEmbedder, minilm_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    models = Settings.load().models
    with caplog.at_level("WARNING"):
        assert load_cross_encoder(models) is None, "chosen by default: the tier is unavailable"
    assert "reads passages with the embedder 'all-minilm-l6-v2'" in caplog.text
    named = Settings.load(cross_encoder=scorer_id(embedder)).models
    with pytest.raises(SettingsError, match=r"cross_encoder: .* set embedder = 'all-minilm-l6-v2'"):
        load_cross_encoder(named)
    folder = models.model_dir / scorer_id(embedder)
    other = OnnxEmbedder(minilm_dir / "model.onnx", minilm_dir / "tokenizer.json", "other-embedder")
    with pytest.raises(PassageReaderError, match=r"\(configured: other-embedder\)"):
        open_cross_encoder(
            folder / "model.int8.onnx", folder / "tokenizer.json", "x", embedder=other
        )


def scorer_id(embedder: OnnxEmbedder) -> str:
    scorer = load_cross_encoder(Settings.load().models, embedder)
    assert scorer is not None
    return scorer.name


class CountingEmbedder:
    """The real embedder, counting the texts it reads."""

    def __init__(self, inner: OnnxEmbedder) -> None:
        self.inner = inner
        self.texts = 0
        self.model_id, self.dim, self.tokenizer = inner.model_id, inner.dim, inner.tokenizer
        self.max_tokens = inner.max_tokens

    def embed(self, texts: Sequence[str]) -> Vector:
        self.texts += len(texts)
        return self.inner.embed(texts)


def test_ingest_copies_a_query_towers_readings_from_the_embeddings(
    docs: Path, tmp_path: Path, embedder: OnnxEmbedder
) -> None:
    """Each chunk is read once, by the embedder; its stored vector is the evaluator's
    reading, and a reading computed afresh (a hit with none stored) is the same."""
    counting = CountingEmbedder(embedder)
    settings = Settings.load(**THROUGH_THE_CROSS_ENCODER)  # type: ignore[arg-type]
    with Engine.open(tmp_path / "c.db", settings, create=True, embedder=counting) as engine:
        index = engine.grader.passage_index()
        assert index is not None and isinstance(index.encoder, EmbeddingReader)
        report = engine.ingest([docs])
        ids = engine.corpus.chunk_ids()
        assert report.passages_encoded == len(ids) == counting.texts == len(DOCS)
        stored = engine.corpus.passage_vectors().get(index.scorer_key, ids)
        np.testing.assert_array_equal(
            np.stack([stored[i].vector for i in ids]), engine.corpus.get_vectors(ids)
        )
        kept = engine.query(QUESTION)
        engine.corpus.passage_vectors().drop_others("none")
        engine.corpus.score_cache().clear()
        fresh = engine.query(QUESTION)
    scores = [{g.chunk_id: g.tiers["cross_encoder_raw"] for _, g in r.hits} for r in (kept, fresh)]
    assert scores[0] == pytest.approx(scores[1], abs=1e-6) and scores[0]


def _engine(
    db: Path, embedder: OnnxEmbedder, scorer: PassageEncoder, version: str = "v1"
) -> Engine:
    settings = Settings.load(**THROUGH_THE_CROSS_ENCODER)  # type: ignore[arg-type]
    grader = Grader(settings.grading, cross_encoder=scorer, versions={"cross_encoder": version})
    opened = Engine.open(db, settings, create=True, embedder=embedder)
    return Engine(opened.corpus, embedder, settings, grader=grader)


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def test_ingest_stores_readings_and_queries_reuse_them(
    docs: Path, tmp_path: Path, embedder: OnnxEmbedder, segment: OnnxSegmentScorer
) -> None:
    counting = CountingEncoder(segment)
    with _engine(tmp_path / "c.db", embedder, counting) as engine:
        report = engine.ingest([docs])
        chunks = engine.corpus.stats(view=EVERYTHING).chunks
        assert report.passages_encoded == counting.encoded == chunks == len(DOCS)
        assert engine.corpus.stats(view=EVERYTHING).stored_passages == chunks
        assert engine.ingest([docs]).passages_encoded == 0, "nothing new to read"
        counting.encoded = 0
        result = engine.query(QUESTION)
        assert counting.encoded == 0, "every hit's reading was stored at ingest"
    graded = {grade.chunk_id: grade.tiers["cross_encoder_raw"] for _, grade in result.hits}
    fresh = segment.score(QUESTION, [hit.chunk.text for hit, _ in result.hits]).scores
    assert list(graded.values()) == pytest.approx(fresh, abs=1e-6)


def test_a_changed_document_is_read_again_and_other_versions_are_dropped(
    docs: Path, tmp_path: Path, embedder: OnnxEmbedder, segment: OnnxSegmentScorer
) -> None:
    counting = CountingEncoder(segment)
    with _engine(tmp_path / "c.db", embedder, counting) as engine:
        engine.ingest([docs])
        (docs / "doc0.md").write_text("# Note 0\n\nChlorophyll absorbs red light.\n")
        counting.encoded = 0
        assert engine.ingest([docs]).passages_encoded == counting.encoded == 1
    with _engine(tmp_path / "c.db", embedder, counting, version="v2") as engine:
        assert engine.ingest([docs]).passages_encoded == len(DOCS)
        assert engine.corpus.stats(view=EVERYTHING).stored_passages == len(DOCS), (
            "v1's readings are gone"
        )


def test_readings_missing_at_query_time_are_computed_and_stored(
    docs: Path, tmp_path: Path, embedder: OnnxEmbedder, segment: OnnxSegmentScorer
) -> None:
    """A corpus ingested without the evaluator (or before it was installed) is filled lazily."""
    settings = Settings.load(grading_tiers=["signals"])
    with Engine.open(tmp_path / "c.db", settings, create=True, embedder=embedder) as plain:
        assert plain.grader.passage_index() is None
        assert plain.ingest([docs]).passages_encoded == 0
    counting = CountingEncoder(segment)
    with _engine(tmp_path / "c.db", embedder, counting) as engine:
        first = engine.query(QUESTION)
        assert counting.encoded == len(first.hits) > 0
        assert len(engine.corpus.passage_vectors()) == len(first.hits)
        counting.encoded = 0
        engine.corpus.score_cache().clear()
        engine.query(QUESTION)
        assert counting.encoded == 0


def test_an_interrupted_reading_resumes_where_it_stopped(
    docs: Path, tmp_path: Path, embedder: OnnxEmbedder, segment: OnnxSegmentScorer
) -> None:
    settings = Settings.load(grading_tiers=["signals"])
    with Engine.open(tmp_path / "c.db", settings, create=True, embedder=embedder) as plain:
        plain.ingest([docs])
        corpus = plain.corpus
        counting = CountingEncoder(segment)
        index = PassageIndex("cross_encoder:v1", counting)

        def stop_after_two(done: int, total: int) -> None:
            if done == 2:
                raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            encode_missing_passages(corpus, index, stop_after_two, group=1)
        assert len(corpus.passage_vectors()) == 2, "each group is committed on its own"
        assert encode_missing_passages(corpus, index, group=4) == len(DOCS) - 2
        assert counting.encoded == len(DOCS)
        assert corpus.passage_vectors().missing("cross_encoder:v1") == []


def test_a_read_only_corpus_reads_stored_readings_but_never_writes(
    docs: Path, tmp_path: Path, embedder: OnnxEmbedder, segment: OnnxSegmentScorer
) -> None:
    db = tmp_path / "c.db"
    settings = Settings.load(grading_tiers=["signals"])
    with Engine.open(db, settings, create=True, embedder=embedder) as plain:
        plain.ingest([docs])
    counting = CountingEncoder(segment)
    read_only_settings = Settings.load(**THROUGH_THE_CROSS_ENCODER)  # type: ignore[arg-type]
    grader = Grader(
        read_only_settings.grading, cross_encoder=counting, versions={"cross_encoder": "v1"}
    )
    with Engine.open(db, read_only_settings, readonly=True, embedder=embedder) as opened:
        engine = Engine(opened.corpus, embedder, read_only_settings, grader=grader)
        hits = len(engine.query(QUESTION).hits)
        assert counting.encoded == hits and len(engine.corpus.passage_vectors()) == 0
    with _engine(db, embedder, counting) as engine:
        engine.ingest([docs])
    counting.encoded = 0
    with Engine.open(db, read_only_settings, readonly=True, embedder=embedder) as opened:
        engine = Engine(opened.corpus, embedder, read_only_settings, grader=grader)
        engine.query(QUESTION)
        assert counting.encoded == 0
