"""Dense retrieval: sqlite-vec KNN over normalised embeddings (cosine similarity)."""

from __future__ import annotations

from crag_edge.groups import Groups
from crag_edge.store import Corpus
from crag_edge.types import Vector


def search_dense(
    corpus: Corpus, vector: Vector, limit: int, groups: Groups = None
) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) for an embedded query, best first (only chunks a
    caller with `groups` may see)."""
    return corpus.search_vec(vector, limit, groups=groups)
