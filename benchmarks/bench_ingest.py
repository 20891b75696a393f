"""Ingest throughput: each chunk read twice (embedder, then evaluator) against read once, in
the same run. Each round ingests the same BEIR abstracts into a fresh corpus, the evaluator's
passage readings included (`ingest.passages`), so chunks/s is the whole wait of a user.

- `fp32-calls-of-32-sequential-read-twice`: the reference of the ingest speed target
  (docs/measurements.md): fp32 embedder in model calls of 32 texts, every group embedded on
  the calling thread, then the evaluator's graph reads every chunk again (a segment
  scorer's cost);
- `fp32-sequential-read-twice`: the same in calls of 4 texts (the current default);
- `int8-overlapped-read-twice`: the int8 embedder, the next group read and chunked while one
  embeds, then the second reading;
- `int8-overlapped` (the default): the same, and the shipped query tower's readings copied
  from the embeddings.

Run: `pytest benchmarks/bench_ingest.py --benchmark-group-by=group` (40 abstracts of
tests/data/scifact_mini, so CI's single untimed run stays short). For the figures in
docs/measurements.md, point `CRAG_EDGE_BENCH_INGEST_CORPUS` at a larger `corpus.jsonl`.
Each case's `chunks_per_second` is in the saved JSON's `extra_info`.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pytest_benchmark.fixture import BenchmarkFixture

from benchmarks.evaluators import reading_alone, shipped_evaluator
from crag_edge.config import Settings
from crag_edge.ingest import IngestReport, ingest
from crag_edge.models.registry import load_embedder
from crag_edge.store import Corpus
from crag_edge.types import Embedder, PassageIndex

MINI = Path(__file__).parent.parent / "tests" / "data" / "scifact_mini" / "corpus.jsonl"
CORPUS = Path(os.environ.get("CRAG_EDGE_BENCH_INGEST_CORPUS", MINI))
CASES = {  # embedder precision, texts per embedder call, overlap, evaluator reads each chunk again
    "fp32-calls-of-32-sequential-read-twice": ("fp32", 32, False, True),
    "fp32-sequential-read-twice": ("fp32", 4, False, True),
    "int8-overlapped-read-twice": ("int8", 4, True, True),
    "int8-overlapped": ("int8", 4, True, False),
}


def _passage_index(embedder: Embedder, read_again: bool) -> PassageIndex:
    evaluator = shipped_evaluator(embedder)
    encoder = reading_alone(evaluator) if read_again else evaluator
    return PassageIndex(f"cross_encoder:{evaluator.name}", encoder)


def _fresh_corpora(folder: Path, embedder_id: str, dim: int) -> Callable[[], Any]:
    """pedantic's `setup`: a new, empty corpus file for every round (an ingest into a filled
    one would find every document unchanged)."""
    numbers = itertools.count()

    def setup() -> tuple[tuple[Corpus], dict[str, Any]]:
        return (Corpus.create(folder / f"round{next(numbers)}.db", embedder_id, dim),), {}

    return setup


@pytest.mark.benchmark(group=f"ingest {CORPUS.parent.name} with passage readings")
@pytest.mark.parametrize("case", list(CASES))
def test_ingest_throughput(benchmark: BenchmarkFixture, tmp_path: Path, case: str) -> None:
    precision, batch_size, overlap, read_again = CASES[case]
    settings = Settings.load(embedder_precision=precision, embed_batch_size=batch_size)
    embedder = load_embedder(settings.models)
    embedder.embed(["warm up the session"])
    passage_index = _passage_index(embedder, read_again)
    reports: list[IngestReport] = []

    def run(corpus: Corpus) -> None:
        with corpus:
            reports.append(
                ingest(
                    corpus,
                    embedder,
                    embedder.tokenizer,
                    [CORPUS],
                    settings=settings.ingest,
                    fmt="beir",
                    passage_index=passage_index,
                    overlap=overlap,
                )
            )

    setup = _fresh_corpora(tmp_path, embedder.model_id, embedder.dim)
    benchmark.pedantic(run, setup=setup, rounds=2, warmup_rounds=0)
    report = reports[-1]
    assert report.chunks_written > 0 and report.passages_encoded == report.chunks_written
    assert not report.errors
    benchmark.extra_info["chunks"] = report.chunks_written
    benchmark.extra_info["chunks_per_second"] = max(r.chunks_per_second for r in reports)
