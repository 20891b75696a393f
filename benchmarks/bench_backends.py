"""Hybrid top-10 query latency, SQLite against PostgreSQL + pgvector, on the same corpus.

Both backends get the same synthetic chunks and vectors (`bench_retrieval.fill_corpus`, one
seed); PostgreSQL is the `pgserver` test server of `tests/postgres.py` on this machine (Unix
socket). Each size is one benchmark group holding both backends, so the table's relative
column is the PostgreSQL / SQLite ratio. The query goes through `Retriever.search` as a user's
does, query embedding included (the same cost on both sides).

PostgreSQL is bulk-loaded as a large import should be: the HNSW index is dropped before the
load and built once after it (one insert at a time it grows slowly). 10k chunks run by
default; the 100k corpus takes minutes to build: set CRAG_EDGE_BENCH_BACKENDS_100K=1 to run
it too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from benchmarks.bench_retrieval import EVERYTHING, fill_corpus
from crag_edge.evaluation.metrics import percentile
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.retrieval import Retriever
from crag_edge.store import CorpusBackend
from crag_edge.store.factory import open_or_create_corpus
from crag_edge.store.postgres.schema import SCHEMA
from tests.postgres import create_database

DIM = 384
SIZES = {"10k": 10_000}
if os.environ.get("CRAG_EDGE_BENCH_BACKENDS_100K"):
    SIZES["100k"] = 100_000
QUESTION = "w17 w230 w4000 and some words"

Corpora = tuple[str, dict[str, CorpusBackend]]


@pytest.fixture(scope="module", params=list(SIZES))
def corpora(
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    postgres_server: Any,
) -> Iterator[Corpora]:
    """One size's corpus in both backends, built from the same seed."""
    name = request.param
    locations = {
        "sqlite": str(tmp_path_factory.mktemp(name) / "bench.db"),
        "postgres": create_database(postgres_server),
    }
    built = {}
    for backend, location in locations.items():
        built[backend] = open_or_create_corpus(location, "synthetic", DIM)
        if backend == "postgres":
            _bulk_load(built[backend], location, SIZES[name])
        else:
            fill_corpus(built[backend], SIZES[name])
    yield name, built
    for corpus in built.values():
        corpus.close()


def _bulk_load(corpus: CorpusBackend, url: str, chunks: int) -> None:
    """Fill a new PostgreSQL corpus without its HNSW index, then build the index once: the
    same index the schema creates, under the same name."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DROP INDEX {SCHEMA}.chunks_embedding")
    fill_corpus(corpus, chunks)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET maintenance_work_mem = '512MB'")
        conn.execute(
            f"CREATE INDEX chunks_embedding ON {SCHEMA}.chunks "
            "USING hnsw (embedding vector_cosine_ops)"
        )
        conn.execute(f"ANALYZE {SCHEMA}.chunks")


@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
def test_hybrid_top10(
    benchmark: Any, corpora: Corpora, backend: str, embedder: OnnxEmbedder
) -> None:
    name, by_backend = corpora
    benchmark.group = f"hybrid-top10-{name}"
    benchmark.extra_info["chunks"] = name
    retriever = Retriever(by_backend[backend], embedder)
    hits = benchmark(retriever.search, QUESTION, 10, "hybrid", view=EVERYTHING)
    assert len(hits) == 10
    if benchmark.stats is not None:  # measured (not --benchmark-disable): record the tail too
        rounds_ms = [seconds * 1000 for seconds in benchmark.stats.stats.data]
        benchmark.extra_info["p95_ms"] = round(percentile(rounds_ms, 95), 2)
