"""Dense retrieval: sqlite-vec KNN over normalised embeddings (cosine similarity)."""

from __future__ import annotations

from crag_edge.groups import Groups
from crag_edge.store import CorpusBackend
from crag_edge.types import Vector


def search_dense(
    corpus: CorpusBackend,
    vector: Vector,
    limit: int,
    groups: Groups = None,
    *,
    prefilter_from: int | None = None,
) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) for an embedded query, best first (only chunks a
    caller with `groups` may see); from `prefilter_from` chunks on through the binary
    pre-filter (`Corpus.search_vec`)."""
    return corpus.search_vec(vector, limit, groups=groups, prefilter_from=prefilter_from)
