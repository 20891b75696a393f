"""Query latency at 10k and 100k chunks: dense KNN, bm25 and full hybrid retrieval.

Vectors are synthetic (random unit vectors) and texts are Zipf-distributed pseudo-words, so
the corpora build in seconds; the measured work (sqlite-vec scans, FTS5 bm25, RRF) is the
real one. Groups compare 10k against 100k in the same run, so the numbers are ratios.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from crag_edge.groups import CorpusView
from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.retrieval import Retriever
from crag_edge.retrieval.lexical import search_bm25
from crag_edge.store import ChunkRecord, Corpus, CorpusBackend, DocumentRecord

EVERYTHING = CorpusView.everything()  # the owner's view: every document

DIM = 384
CHUNKS_PER_DOC = 100
VOCABULARY = [f"w{i}" for i in range(20_000)]
SIZES = {"10k": 10_000, "100k": 100_000}
# (generator, how many) -> that many vectors, one per row
VectorMaker = Callable[[np.random.Generator, int], np.ndarray]


def random_unit_vectors(rng: np.random.Generator, count: int) -> np.ndarray:
    """Directions spread evenly over the sphere: the scan cost without any structure."""
    return rng.standard_normal((count, DIM)).astype(np.float32)


def build_corpus(
    path: Path, chunks: int, seed: int = 0, make_vectors: VectorMaker = random_unit_vectors
) -> Corpus:
    corpus = Corpus.create(path, "synthetic", DIM)
    fill_corpus(corpus, chunks, seed, make_vectors)
    return corpus


def fill_corpus(
    corpus: CorpusBackend,
    chunks: int,
    seed: int = 0,
    make_vectors: VectorMaker = random_unit_vectors,
) -> None:
    """Write `chunks` synthetic chunks into an empty corpus of either backend: the same
    `seed` gives the same texts and vectors, so two backends can be compared on one corpus."""
    rng = np.random.default_rng(seed)
    weights = 1.0 / np.arange(1, len(VOCABULARY) + 1)
    weights /= weights.sum()
    for doc in range(chunks // CHUNKS_PER_DOC):
        words = rng.choice(np.array(VOCABULARY), size=(CHUNKS_PER_DOC, 60), p=weights)
        texts = [" ".join(row) for row in words]
        records, offset = [], 0
        for text in texts:
            records.append(ChunkRecord(text, offset, offset + len(text), 60))
            offset += len(text) + 1
        vectors = make_vectors(rng, CHUNKS_PER_DOC)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        corpus.replace_document(
            DocumentRecord(f"doc{doc}", "", " ".join(texts), f"h{doc}"), records, vectors
        )


@pytest.fixture(scope="module", params=list(SIZES))
def sized_corpus(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Corpus]]:
    name = request.param
    corpus = build_corpus(tmp_path_factory.mktemp(name) / "bench.db", SIZES[name])
    yield name, corpus
    corpus.close()


def query_vector(seed: int = 1) -> np.ndarray:
    vector = np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return vector / np.linalg.norm(vector)


@pytest.mark.benchmark(group="dense-knn-k10")
def test_dense_knn(benchmark, sized_corpus: tuple[str, Corpus]) -> None:  # type: ignore[no-untyped-def]
    name, corpus = sized_corpus
    benchmark.extra_info["chunks"] = name
    hits = benchmark(corpus.search_vec, query_vector(), 10, view=EVERYTHING)
    assert len(hits) == 10


@pytest.mark.benchmark(group="bm25-k100")
def test_bm25(benchmark, sized_corpus: tuple[str, Corpus]) -> None:  # type: ignore[no-untyped-def]
    name, corpus = sized_corpus
    benchmark.extra_info["chunks"] = name
    hits = benchmark(search_bm25, corpus, "w17 w230 w4000 w12000 w99", 100, EVERYTHING)
    assert hits


@pytest.mark.benchmark(group="hybrid-search-top10")
def test_hybrid_search(
    benchmark,
    sized_corpus: tuple[str, Corpus],  # type: ignore[no-untyped-def]
    embedder: OnnxEmbedder,
) -> None:
    name, corpus = sized_corpus
    benchmark.extra_info["chunks"] = name
    retriever = Retriever(corpus, embedder)
    hits = benchmark(
        retriever.search, "w17 w230 w4000 and some words", 10, "hybrid", view=EVERYTHING
    )
    assert len(hits) == 10
