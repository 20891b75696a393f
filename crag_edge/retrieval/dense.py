"""Dense retrieval: nearest chunks by cosine similarity of normalised embeddings."""

from __future__ import annotations

from crag_edge.groups import Groups
from crag_edge.store import CorpusBackend
from crag_edge.types import Vector


def search_dense(
    corpus: CorpusBackend, vector: Vector, limit: int, groups: Groups = None
) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) for an embedded query, best first (only chunks a
    caller with `groups` may see; the backend's own index, tuned by `use_settings`)."""
    return corpus.search_vec(vector, limit, groups=groups)
