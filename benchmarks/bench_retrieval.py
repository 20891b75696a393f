"""Query latency at 10k and 100k chunks: dense KNN, bm25 and full hybrid retrieval.

Vectors are synthetic (random unit vectors) and texts are Zipf-distributed pseudo-words, so
the corpora build in seconds; the measured work (sqlite-vec scans, FTS5 bm25, RRF) is the
real one. Groups compare 10k against 100k in the same run, so the numbers are ratios.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from crag_edge.models.embedder import OnnxEmbedder
from crag_edge.retrieval import Retriever
from crag_edge.retrieval.lexical import search_bm25
from crag_edge.store import ChunkRecord, Corpus, DocumentRecord

DIM = 384
CHUNKS_PER_DOC = 100
VOCABULARY = [f"w{i}" for i in range(20_000)]
SIZES = {"10k": 10_000, "100k": 100_000}


def build_corpus(path: Path, chunks: int, seed: int = 0) -> Corpus:
    rng = np.random.default_rng(seed)
    corpus = Corpus.create(path, "synthetic", DIM)
    weights = 1.0 / np.arange(1, len(VOCABULARY) + 1)
    weights /= weights.sum()
    for doc in range(chunks // CHUNKS_PER_DOC):
        texts = [
            " ".join(rng.choice(VOCABULARY, size=60, p=weights)) for _ in range(CHUNKS_PER_DOC)
        ]
        records, offset = [], 0
        for text in texts:
            records.append(ChunkRecord(text, offset, offset + len(text), 60))
            offset += len(text) + 1
        vectors = rng.standard_normal((CHUNKS_PER_DOC, DIM)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        corpus.replace_document(
            DocumentRecord(f"doc{doc}", "", " ".join(texts), f"h{doc}"), records, vectors
        )
    return corpus


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
    hits = benchmark(corpus.search_vec, query_vector(), 10)
    assert len(hits) == 10


@pytest.mark.benchmark(group="bm25-k100")
def test_bm25(benchmark, sized_corpus: tuple[str, Corpus]) -> None:  # type: ignore[no-untyped-def]
    name, corpus = sized_corpus
    benchmark.extra_info["chunks"] = name
    hits = benchmark(search_bm25, corpus, "w17 w230 w4000 w12000 w99", 100)
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
    hits = benchmark(retriever.search, "w17 w230 w4000 and some words", 10, "hybrid")
    assert len(hits) == 10
