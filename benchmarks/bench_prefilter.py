"""Dense and hybrid search with the binary pre-filter against exact search, at 20k, 100k and
(opt-in) 1M chunks: latency of both paths in one run, and how much of exact search's hybrid
top-10 the pre-filter keeps.

Vectors lie around topic centres, one topic per 500 chunks (cosine ~0.5 between two chunks of
a topic, ~0 across topics), as sentence embeddings cluster by subject; each query is a new
point of one topic, so exact search's top 100 are chunks of its topic, not near-ties of
unrelated ones (where any order is as good as another).
Texts are the Zipf pseudo-words of `bench_retrieval`. The 1M corpus takes ~half an hour to
build: set CRAG_EDGE_BENCH_1M_DB to a file path to run it (built there once, then reused).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from benchmarks.bench_retrieval import DIM, VOCABULARY, build_corpus
from crag_edge.groups import CorpusView
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.retrieval import Retriever
from crag_edge.store import Corpus
from crag_edge.types import Hit

EVERYTHING = CorpusView.everything()  # the owner's view: every document

CHUNKS_PER_TOPIC = 500
QUERIES = 50
SIZES = {"20k": 20_000, "100k": 100_000}
ONE_MILLION_DB = os.environ.get("CRAG_EDGE_BENCH_1M_DB")
if ONE_MILLION_DB:
    SIZES["1m"] = 1_000_000


class TopicVectors:
    """Unit vectors around fixed topic centres: centre + isotropic noise of the same norm."""

    def __init__(self, topics: int, seed: int = 7) -> None:
        centres = np.random.default_rng(seed).standard_normal((topics, DIM))
        self.centres = (centres / np.linalg.norm(centres, axis=1, keepdims=True)).astype(np.float32)

    def __call__(self, rng: np.random.Generator, count: int) -> np.ndarray:
        topics = rng.integers(len(self.centres), size=count)
        noise = rng.standard_normal((count, DIM)).astype(np.float32) / np.sqrt(DIM)
        vectors = self.centres[topics] + noise
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def queries(corpus: Corpus, count: int = QUERIES) -> list[tuple[str, np.ndarray]]:
    """(text, vector) pairs: three pseudo-words and a point of one of the corpus's topics."""
    rng = np.random.default_rng(11)
    vectors = topic_vectors(len(corpus.chunk_ids()))(rng, count)
    words = rng.choice(VOCABULARY[:5_000], size=(count, 3))
    return [(" ".join(row), vector) for row, vector in zip(words, vectors, strict=True)]


def topic_vectors(chunks: int) -> TopicVectors:
    return TopicVectors(max(1, chunks // CHUNKS_PER_TOPIC))


def open_or_build(path: Path, chunks: int) -> Corpus:
    """The benchmark corpus at `path`, built there first if it is not yet complete."""
    if path.exists():
        corpus = Corpus.open(path)
        if corpus.stats(view=EVERYTHING).chunks == chunks:
            return corpus
        corpus.close()
        path.unlink()
    return build_corpus(path, chunks, make_vectors=topic_vectors(chunks))


@pytest.fixture(scope="module", params=list(SIZES))
def sized_corpus(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Corpus]]:
    name = request.param
    if name == "1m" and ONE_MILLION_DB:
        path = Path(ONE_MILLION_DB)
    else:
        path = tmp_path_factory.mktemp(name) / "prefilter.db"
    corpus = open_or_build(path, SIZES[name])
    yield name, corpus
    corpus.close()


def top_ids(retriever: Retriever, text: str, vector: np.ndarray) -> list[int]:
    return [
        hit.chunk.chunk_id for hit in retriever.search(text, 10, "hybrid", vector, view=EVERYTHING)
    ]


@pytest.mark.parametrize("path", ["exact", "prefilter"])
@pytest.mark.benchmark(group="dense-top100")
def test_dense_top100(benchmark, sized_corpus: tuple[str, Corpus], path: str) -> None:  # type: ignore[no-untyped-def]
    name, corpus = sized_corpus
    benchmark.extra_info.update(chunks=name, path=path)
    corpus.prefilter_from = 0 if path == "prefilter" else None
    corpus.search_vec(queries(corpus, 1)[0][1], 100, view=EVERYTHING)  # load the bits
    vectors = itertools.cycle(vector for _, vector in queries(corpus))
    hits = benchmark(lambda: corpus.search_vec(next(vectors), 100, view=EVERYTHING))
    assert len(hits) == 100


@pytest.mark.parametrize("path", ["exact", "prefilter"])
@pytest.mark.benchmark(group="hybrid-top10-given-query-vector")
def test_hybrid_top10(  # type: ignore[no-untyped-def]
    benchmark, sized_corpus: tuple[str, Corpus], embedder: OnnxEmbedder, path: str
) -> None:
    """Hybrid top-10 (bm25 + dense, 100 each, RRF) with the query already embedded; on the
    pre-filter path, also its overlap with exact search's top-10 over every query."""
    name, corpus = sized_corpus
    retriever = Retriever(corpus, embedder)

    def ranked(prefilter_from: int | None, text: str, vector: np.ndarray) -> set[int]:
        corpus.prefilter_from = prefilter_from
        return set(top_ids(retriever, text, vector))

    if path == "prefilter":
        overlap = np.mean(
            [len(ranked(0, *query) & ranked(None, *query)) / 10 for query in queries(corpus)]
        )
        benchmark.extra_info["overlap_with_exact_top10"] = round(float(overlap), 4)
        assert overlap >= 0.98
    benchmark.extra_info.update(chunks=name, path=path)
    corpus.prefilter_from = 0 if path == "prefilter" else None
    cycle = itertools.cycle(queries(corpus))

    def next_query() -> list[Hit]:
        text, vector = next(cycle)
        return retriever.search(text, 10, "hybrid", vector, view=EVERYTHING)

    assert len(benchmark(next_query)) == 10
