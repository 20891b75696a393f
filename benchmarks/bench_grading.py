"""Grading cost: 20 hits through rules + signals, and through the default cheap tiers (the
evaluator on every hit, or on the signals' uncertain band only), against the fast path and
plain retrieval in the same run, and the LLM tier's cost per item. The evaluator reads the
passage readings ingest stored (`store.PassageVectors`) unless the case says `unstored`.

Targets on 2 cores: grading 20 hits (rules + signals + cross-encoder) < 300 ms;
fast path end to end < 70 ms. These are compared as ratios here, never asserted.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.grading.llm_judge import LlmJudge
from crag_edge.groups import CorpusView
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.models.llm import load_llm
from crag_edge.observability import AuditLog

EVERYTHING = CorpusView.everything()  # the owner's view: every document

SAMPLE = Path(__file__).parent.parent / "sample_corpus"
MINI = Path(__file__).parent.parent / "tests" / "data" / "scifact_mini" / "corpus.jsonl"
QUESTION = "How does the waggle dance tell other bees the distance to food?"


@pytest.fixture(scope="module")
def engines(
    tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder
) -> Iterator[dict[str, Engine]]:
    db = tmp_path_factory.mktemp("bench-grading") / "sample.db"
    with Engine.open(db, Settings.load(), create=True, embedder=embedder) as engine:
        engine.ingest([SAMPLE])
        engine.ingest([MINI], fmt="beir")  # 40 abstracts more: 20 hits are 20 real chunks
    # No evaluation cache: a repeated question would be served the cross-encoder's scores.
    evaluator = Settings.load(
        grading_tiers=["signals", "cross_encoder"],
        fast_path_rules=[],
        top_k=20,
        max_iterations=1,
        score_cache=False,
    )
    opened = {
        "cheap": Engine.open(db, evaluator.replace(grading_tiers=["signals"]), embedder=embedder),
        "fast": Engine.open(db, Settings.load(top_k=2), embedder=embedder),
        "evaluator": Engine.open(db, evaluator, embedder=embedder),
        "banded": Engine.open(db, evaluator.replace(confidence_margin=0.0), embedder=embedder),
    }
    for engine in opened.values():
        engine.query(QUESTION)  # warm up: JIT-compiled kernels load from cache, ONNX sessions
    yield opened
    for engine in opened.values():
        engine.close()


@pytest.mark.benchmark(group="grading-20-hits")
def test_grade_20_hits_rules_and_signals(benchmark, engines: dict[str, Engine]) -> None:  # type: ignore[no-untyped-def]
    engine = engines["cheap"]
    vector = engine.retriever.embed_query(QUESTION)
    hits = engine.retriever.search(QUESTION, top_k=20, query_vector=vector, view=EVERYTHING)
    evidence = engine.loop.stages.evidence(hits, vector)
    grading = benchmark(engine.grader.grade, QUESTION, evidence, AuditLog())
    assert len(grading.items) == len(hits)


@pytest.mark.benchmark(group="grading-20-hits")
@pytest.mark.parametrize(
    ("engine_name", "stored"),
    [("evaluator", True), ("evaluator", False), ("banded", True)],
    ids=["evaluator", "evaluator-unstored", "banded"],
)
def test_grade_20_hits_with_the_evaluator(
    benchmark, engines: dict[str, Engine], engine_name: str, stored: bool
) -> None:  # type: ignore[no-untyped-def]
    """The default cheap tiers: the evaluator on every hit (`evaluator`, margin 0.3), or on
    the signals' uncertain band and their two best (`banded`, margin 0.0); with the passage
    readings ingest stored, or read afresh (`unstored`: a corpus ingested without them)."""
    engine = engines[engine_name]
    if engine.grader.cross_encoder is None:
        pytest.skip("no cross-encoder installed (crag-edge models pull)")
    vector = engine.retriever.embed_query(QUESTION)
    hits = engine.retriever.search(QUESTION, top_k=20, query_vector=vector, view=EVERYTHING)
    evidence = engine.loop.stages.evidence(hits, vector)
    index = engine.grader.passage_index()
    assert index is not None, "the shipped evaluator reads passages alone"
    passages = engine.corpus.passage_vectors() if stored else None
    assert passages is None or passages.missing(index.scorer_key) == [], "ingest stored them"
    grading = benchmark(engine.grader.grade, QUESTION, evidence, AuditLog(), passages=passages)
    assert len(hits) == 20
    everything = engine_name == "evaluator"
    assert (grading.tier_items["cross_encoder"] == len(hits)) == everything


@pytest.mark.benchmark(group="end-to-end")
def test_plain_top_k_retrieval(benchmark, engines: dict[str, Engine]) -> None:  # type: ignore[no-untyped-def]
    hits = benchmark(engines["cheap"].search, QUESTION, top_k=20)
    assert hits


@pytest.mark.benchmark(group="end-to-end")
def test_fast_path_end_to_end(benchmark, engines: dict[str, Engine]) -> None:  # type: ignore[no-untyped-def]
    result = benchmark(engines["fast"].query, QUESTION)
    assert result.rule == "few_context"


@pytest.mark.benchmark(group="end-to-end")
def test_graded_and_refined_k20_end_to_end(benchmark, engines: dict[str, Engine]) -> None:  # type: ignore[no-untyped-def]
    result = benchmark(engines["cheap"].query, QUESTION)
    assert result.rounds


@pytest.mark.benchmark(group="llm-tier-per-item")
def test_llm_judge_cost_per_item(benchmark) -> None:  # type: ignore[no-untyped-def]
    """The small LLM (tests' model); Qwen-1.5B's cost: benchmarks/measure_llm_judge.py."""
    judge = LlmJudge(load_llm(Settings.load(llm_threads=1).models))
    passage = "The duration of the waggle run encodes the distance to the food source."
    batch = benchmark(judge.score, QUESTION, [passage])
    assert len(batch.scores) == 1
