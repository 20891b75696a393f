"""Dense retrieval: sqlite-vec KNN over normalised embeddings (cosine similarity)."""

from __future__ import annotations

from crag_edge.store import Corpus
from crag_edge.types import Embedder


def search_dense(
    corpus: Corpus,
    embedder: Embedder,
    text: str,
    limit: int,
) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity), best first."""
    if not text.strip():
        return []
    vector = embedder.embed([text])[0]
    return corpus.search_vec(vector, limit)
