"""Ingest throughput: fp32 with embedding in line against int8 with embedding overlapped, in
the same run. Each round ingests the same BEIR abstracts into a fresh corpus, the evaluator's
passage readings included (`ingest.passages`), so chunks/s is the whole wait of a user.

- `fp32-sequential`: fp32 embedder, every group embedded on the calling thread;
- `int8-sequential`: the int8 embedder alone;
- `int8-overlapped`: int8 and the next group read and chunked while one embeds (the default).

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

from crag_edge.config import Settings
from crag_edge.ingest import IngestReport, ingest
from crag_edge.models.registry import load_cross_encoder, load_embedder
from crag_edge.store import Corpus
from crag_edge.types import PassageEncoder, PassageIndex

MINI = Path(__file__).parent.parent / "tests" / "data" / "scifact_mini" / "corpus.jsonl"
CORPUS = Path(os.environ.get("CRAG_EDGE_BENCH_INGEST_CORPUS", MINI))
CASES = {
    "fp32-sequential": ("fp32", False),
    "int8-sequential": ("int8", False),
    "int8-overlapped": ("int8", True),
}


@pytest.fixture(scope="module")
def passage_index() -> PassageIndex:
    evaluator = load_cross_encoder(Settings.load().models)
    if not isinstance(evaluator, PassageEncoder):
        pytest.skip("the installed evaluator does not store passage readings")
    return PassageIndex(f"cross_encoder:{evaluator.name}", evaluator)


def _fresh_corpora(folder: Path, embedder_id: str, dim: int) -> Callable[[], Any]:
    """pedantic's `setup`: a new, empty corpus file for every round (an ingest into a filled
    one would find every document unchanged)."""
    numbers = itertools.count()

    def setup() -> tuple[tuple[Corpus], dict[str, Any]]:
        return (Corpus.create(folder / f"round{next(numbers)}.db", embedder_id, dim),), {}

    return setup


@pytest.mark.benchmark(group=f"ingest {CORPUS.parent.name} with passage readings")
@pytest.mark.parametrize("case", list(CASES))
def test_ingest_throughput(
    benchmark: BenchmarkFixture, passage_index: PassageIndex, tmp_path: Path, case: str
) -> None:
    precision, overlap = CASES[case]
    settings = Settings.load(embedder_precision=precision)
    embedder = load_embedder(settings.models)
    embedder.embed(["warm up the session"])
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
