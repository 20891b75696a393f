"""The evaluation cache: model scores reused for repeat queries, invalidated with their chunks,
never written from a read-only corpus and never kept when the model failed."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from typer.testing import CliRunner

from crag_edge.cli import app
from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.grading import Grader
from crag_edge.groups import CorpusView
from crag_edge.models.cross_encoder import OnnxCrossEncoder
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.models.manifest import load_manifest
from crag_edge.models.provision import pull_model
from crag_edge.result import CragResult
from crag_edge.types import PairScorer, ScoredBatch
from tests.tiny_bert import register_local, tiny_classifier

EVERYTHING = CorpusView.everything()  # the owner's view: every document

# Every item reaches the cross-encoder: no fast path, and a margin no signal score can clear.
THROUGH_THE_CROSS_ENCODER: dict[str, object] = {
    "grading_tiers": ["signals", "cross_encoder"],
    "fast_path_rules": [],
    "confidence_margin": 0.5,
    "top_k": 4,
    "max_iterations": 1,
}
QUESTION = "How do plants turn sunlight into chemical energy?"
DOCS = {
    "photosynthesis.md": "# Photosynthesis\n\nPlants capture sunlight with chlorophyll and "
    "store its energy as sugar. Oxygen is released as a by-product.\n",
    "respiration.md": "# Respiration\n\nCells break sugar down with oxygen to release energy, "
    "giving off carbon dioxide and water.\n",
    "tides.md": "# Tides\n\nThe moon's gravity raises the oceans into two bulges, giving most "
    "coasts two high tides a day.\n",
}


CHUNK_TEXTS = {text.strip() for text in DOCS.values()} | {
    DOCS["photosynthesis.md"].strip() + "\n\nIt happens in chloroplasts."
}


class CountingScorer:
    """A real cross-encoder that remembers which whole chunks it was asked to grade
    (refinement's strips, which it also scores, are not cached and not counted)."""

    def __init__(self, inner: OnnxCrossEncoder) -> None:
        self.inner = inner
        self.scored: list[str] = []

    @property
    def name(self) -> str:
        return self.inner.name

    def score(self, query: str, passages: Sequence[str]) -> ScoredBatch:
        self.scored.extend(p for p in passages if p in CHUNK_TEXTS)
        return self.inner.score(query, passages)


@pytest.fixture(scope="module")
def cross_encoder(minilm_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> OnnxCrossEncoder:
    folder = tiny_classifier(tmp_path_factory.mktemp("ce"), minilm_dir / "tokenizer.json")
    return OnnxCrossEncoder(folder / "model.onnx", folder / "tokenizer.json", "tiny-ce")


@pytest.fixture
def corpus_dir(tmp_path: Path, embedder: OnnxEmbedder) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir()
    for name, text in DOCS.items():
        (docs / name).write_text(text, encoding="utf-8")
    with Engine.open(tmp_path / "c.db", Settings.load(), create=True, embedder=embedder) as e:
        e.ingest([docs])
    return tmp_path


def _engine(
    db: Path, embedder: OnnxEmbedder, scorer: PairScorer, version: str = "v1", **kwargs: bool
) -> Engine:
    settings = Settings.load(**THROUGH_THE_CROSS_ENCODER)  # type: ignore[arg-type]
    engine = Engine.open(db, settings, embedder=embedder, **kwargs)
    grader = Grader(settings.grading, cross_encoder=scorer, versions={"cross_encoder": version})
    return Engine(engine.corpus, embedder, settings, grader=grader)


def _scores(result: CragResult) -> dict[int, float]:
    return {grade.chunk_id: grade.tiers["cross_encoder_raw"] for _, grade in result.hits}


def test_a_repeated_question_is_graded_from_the_cache(
    corpus_dir: Path, embedder: OnnxEmbedder, cross_encoder: OnnxCrossEncoder
) -> None:
    scorer = CountingScorer(cross_encoder)
    with _engine(corpus_dir / "c.db", embedder, scorer) as engine:
        first = engine.query(QUESTION)
        scored = len(scorer.scored)
        assert scored == len(first.hits) > 0 and first.cache_hits == {}
        assert len(engine.corpus.score_cache()) == scored
        second = engine.query(QUESTION)
    assert len(scorer.scored) == scored, "the second run must not call the model"
    assert second.cache_hits == {"cross_encoder": scored}
    assert _scores(second) == pytest.approx(_scores(first))
    assert second.decision == first.decision
    assert second.to_dict()["cache_hits"] == {"cross_encoder": scored}


def test_other_questions_and_other_model_versions_miss(
    corpus_dir: Path, embedder: OnnxEmbedder, cross_encoder: OnnxCrossEncoder
) -> None:
    scorer = CountingScorer(cross_encoder)
    with _engine(corpus_dir / "c.db", embedder, scorer) as engine:
        engine.query(QUESTION)
        other = engine.query("Why are there two high tides a day?")
    assert other.cache_hits == {}
    scorer = CountingScorer(cross_encoder)
    with _engine(corpus_dir / "c.db", embedder, scorer, version="v2") as engine:
        retrained = engine.query(QUESTION)
    assert retrained.cache_hits == {} and scorer.scored


def test_changing_a_document_invalidates_only_its_chunks(
    corpus_dir: Path, embedder: OnnxEmbedder, cross_encoder: OnnxCrossEncoder
) -> None:
    scorer = CountingScorer(cross_encoder)
    with _engine(corpus_dir / "c.db", embedder, scorer) as engine:
        first = engine.query(QUESTION)
        before = len(engine.corpus.score_cache())
        changed = corpus_dir / "docs" / "photosynthesis.md"
        changed.write_text(DOCS["photosynthesis.md"] + "\nIt happens in chloroplasts.\n")
        engine.ingest([corpus_dir / "docs"])
        assert len(engine.corpus.score_cache()) == before - 1  # one chunk per document here
        scorer.scored.clear()
        again = engine.query(QUESTION)
    assert again.cache_hits == {"cross_encoder": len(first.hits) - 1}
    assert (
        scorer.scored == [text for text in scorer.scored if "chloroplasts" in text]
        and len(scorer.scored) == 1
    )


def test_deleting_documents_and_clearing_empty_the_cache(
    corpus_dir: Path, embedder: OnnxEmbedder, cross_encoder: OnnxCrossEncoder
) -> None:
    with _engine(corpus_dir / "c.db", embedder, CountingScorer(cross_encoder)) as engine:
        engine.query(QUESTION)
        cache = engine.corpus.score_cache()
        assert engine.corpus.stats(view=EVERYTHING).cached_scores == len(cache) > 0
        for source in engine.corpus.list_sources():
            engine.corpus.delete_document(source)
        assert len(cache) == 0
        engine.ingest([corpus_dir / "docs"])
        engine.query(QUESTION)
        assert cache.clear() > 0 and len(cache) == 0


def test_a_read_only_corpus_reads_the_cache_but_never_writes(
    corpus_dir: Path, embedder: OnnxEmbedder, cross_encoder: OnnxCrossEncoder
) -> None:
    db = corpus_dir / "c.db"
    with _engine(db, embedder, CountingScorer(cross_encoder), readonly=True) as engine:
        assert engine.query(QUESTION).cache_hits == {}
        assert len(engine.corpus.score_cache()) == 0
    with _engine(db, embedder, CountingScorer(cross_encoder)) as engine:
        engine.query(QUESTION)
    with _engine(db, embedder, CountingScorer(cross_encoder), readonly=True) as engine:
        assert engine.query(QUESTION).cache_hits


def test_the_cache_can_be_switched_off(
    corpus_dir: Path, embedder: OnnxEmbedder, cross_encoder: OnnxCrossEncoder
) -> None:
    settings = Settings.load(score_cache=False, **THROUGH_THE_CROSS_ENCODER)  # type: ignore[arg-type]
    scorer = CountingScorer(cross_encoder)
    grader = Grader(settings.grading, cross_encoder=scorer, versions={"cross_encoder": "v1"})
    with Engine.open(corpus_dir / "c.db", settings, embedder=embedder) as opened:
        engine = Engine(opened.corpus, embedder, settings, grader=grader)
        engine.query(QUESTION)
        assert engine.query(QUESTION).cache_hits == {}
        assert len(engine.corpus.score_cache()) == 0


class FailingScorer:
    """Scores like the LLM judge after a timeout: the last passage got a stand-in 0.5."""

    name = "failing"

    def score(self, query: str, passages: Sequence[str]) -> ScoredBatch:
        n = len(passages)
        return ScoredBatch([0.9] * (n - 1) + [0.5], ["timed out"], [n - 1])


def test_stand_in_scores_of_a_failed_model_are_not_cached(
    corpus_dir: Path, embedder: OnnxEmbedder
) -> None:
    with _engine(corpus_dir / "c.db", embedder, FailingScorer()) as engine:
        result = engine.query(QUESTION)
        assert len(engine.corpus.score_cache()) == len(result.hits) - 1
        assert engine.query(QUESTION).cache_hits == {"cross_encoder": len(result.hits) - 1}


def test_query_command_reports_cache_hits_through_the_factory(
    corpus_dir: Path, minilm_dir: Path
) -> None:
    """The installed cross-encoder gets its version from the manifest (file hashes), so the
    second identical question is graded from the cache."""
    source = tiny_classifier(corpus_dir / "usb", minilm_dir / "tokenizer.json")
    model_dir = corpus_dir / "models"
    register_local(model_dir, source, "tiny-ce")
    (model_dir / "all-minilm-l6-v2").symlink_to(minilm_dir)
    assert pull_model(load_manifest(model_dir).get("tiny-ce"), model_dir).ok
    env = {
        "CRAG_EDGE_MODEL_DIR": str(model_dir),
        "CRAG_EDGE_GRADING_TIERS": '["signals", "cross_encoder"]',
        "CRAG_EDGE_FAST_PATH_RULES": "[]",
        "CRAG_EDGE_CONFIDENCE_MARGIN": "0.5",
        "CRAG_EDGE_MAX_ITERATIONS": "1",
    }
    args = ["query", "--db", str(corpus_dir / "c.db"), QUESTION]
    runner = CliRunner()
    first = runner.invoke(app, [*args, "--json"], env=env, catch_exceptions=False)
    assert first.exit_code == 0 and json.loads(first.stdout)["cache_hits"] == {}
    second = runner.invoke(app, args, env=env, catch_exceptions=False)
    assert "scores from the evaluation cache: cross_encoder" in second.stdout
