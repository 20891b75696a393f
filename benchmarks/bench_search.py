"""`search` against `query` on a 10k-chunk corpus, the embedder loaded: what a person who
only wants to find a page saves by skipping the corrective loop.

The corpus is `bench_retrieval`'s synthetic one (random unit vectors, Zipf pseudo-words, so
it builds in seconds; the scans are real), opened with the real embedder for the query. Both
run in one group, so pytest-benchmark prints the ratio; `query` grades with the cheap tiers
(signals and the shipped evaluator, no LLM), as the service's default without a judge. The
target, search under 100 ms p50, is recorded (`extra_info`), never asserted.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from benchmarks.bench_retrieval import build_corpus
from crag_edge.config import Settings
from crag_edge.engine import Engine
from crag_edge.models.embedder import OnnxEmbedder

CHUNKS = 10_000
QUESTION = "w12 w345 w1789 w2044"  # pseudo-words the corpus holds: bm25 and marks find them


@pytest.fixture(scope="module")
def engine(tmp_path_factory: pytest.TempPathFactory, embedder: OnnxEmbedder) -> Iterator[Engine]:
    corpus = build_corpus(tmp_path_factory.mktemp("bench-search") / "10k.db", CHUNKS)
    settings = Settings.load(
        grading_tiers=["signals", "cross_encoder"], rewrite_with_llm=False, score_cache=False
    )
    opened = Engine(corpus, embedder, settings)  # the synthetic corpus names no real embedder
    opened.search_passages(QUESTION)  # warm up: the ONNX session, the SQLite pages
    opened.query(QUESTION)
    yield opened
    opened.close()


def _median_ms(benchmark: Any) -> None:
    if benchmark.stats is not None:  # measured (not --benchmark-disable)
        benchmark.extra_info["p50_ms"] = round(benchmark.stats.stats.median * 1000, 2)


@pytest.mark.benchmark(group="search-vs-query-10k")
def test_search(benchmark: Any, engine: Engine) -> None:
    found = benchmark(engine.search_passages, QUESTION)
    assert any(passage.snippet.marks for passage in found)
    _median_ms(benchmark)


@pytest.mark.benchmark(group="search-vs-query-10k")
def test_query(benchmark: Any, engine: Engine) -> None:
    result = benchmark(engine.query, QUESTION)
    assert result.rounds
    _median_ms(benchmark)
