"""Dense (sqlite-vec), lexical (FTS5 bm25) and hybrid (RRF) retrieval."""

from crag_edge.retrieval.fusion import Fused, rrf
from crag_edge.retrieval.lexical import fts_query
from crag_edge.retrieval.retriever import MODES, Mode, Retriever

__all__ = ["MODES", "Fused", "Mode", "Retriever", "fts_query", "rrf"]
