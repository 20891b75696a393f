"""Dense (vector), lexical (bm25) and hybrid (RRF) retrieval."""

from crag_edge.retrieval.fusion import Fused, rrf
from crag_edge.retrieval.lexical import query_terms
from crag_edge.retrieval.retriever import MODES, Mode, Retriever

__all__ = ["MODES", "Fused", "Mode", "Retriever", "query_terms", "rrf"]
