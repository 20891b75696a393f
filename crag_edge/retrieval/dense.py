"""Dense retrieval: nearest chunks by cosine similarity of normalised embeddings."""

from __future__ import annotations

from crag_edge.groups import CorpusView
from crag_edge.store import CorpusBackend
from crag_edge.types import Vector


def search_dense(
    corpus: CorpusBackend, vector: Vector, limit: int, view: CorpusView
) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) for an embedded query, best first (only chunks `view`
    sees; the backend's own index, tuned by `use_settings`)."""
    return corpus.search_vec(vector, limit, view=view)
