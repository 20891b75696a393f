"""Bm25, dense or hybrid (RRF) retrieval returning `Hit`s with every retriever's score and rank.

Chunks marked as navigation (a page of links: a table of contents, an index, a language
picker; `types.NAVIGATION`) come after every chunk of content that was found, so they are
still found by their titles when nothing else matches but never crowd passages out of an
answer's context.
"""

from __future__ import annotations

from crag_edge.config import RETRIEVAL_MODES as MODES
from crag_edge.config import RetrievalMode as Mode
from crag_edge.groups import CorpusView
from crag_edge.retrieval.dense import search_dense
from crag_edge.retrieval.fusion import Fused, rrf
from crag_edge.retrieval.lexical import search_bm25
from crag_edge.store import CorpusBackend
from crag_edge.types import NAVIGATION, Chunk, Embedder, Hit, Vector


class Retriever:
    """Searches one corpus; `candidates` hits per retriever feed the fusion."""

    def __init__(
        self,
        corpus: CorpusBackend,
        embedder: Embedder,
        *,
        candidates: int = 100,
        rrf_k: int = 60,
    ) -> None:
        self.corpus = corpus
        self.embedder = embedder
        self.candidates = candidates
        self.rrf_k = rrf_k

    def embed_query(self, query: str) -> Vector:
        """The query's embedding (callers that grade reuse it for similarities)."""
        return self.embedder.embed([query])[0]

    def search(
        self,
        query: str,
        top_k: int,
        mode: Mode = "hybrid",
        query_vector: Vector | None = None,
        *,
        view: CorpusView,
    ) -> list[Hit]:
        """The best `top_k` chunks for `query`, best first (`query_vector`: already embedded),
        among those `view` sees (`crag_edge.groups.CorpusView`): both retrievers
        filter before their own top-k, so the fusion never sees another's documents."""
        if mode not in MODES:
            raise ValueError(f"unknown retrieval mode {mode!r}; use one of {', '.join(MODES)}")
        depth = max(self.candidates, top_k)
        ranked: dict[str, list[tuple[int, float]]] = {}
        if mode in ("bm25", "hybrid"):
            ranked["bm25"] = search_bm25(self.corpus, query, depth, view)
        if mode in ("dense", "hybrid") and query.strip():
            vector = self.embed_query(query) if query_vector is None else query_vector
            ranked["dense"] = search_dense(self.corpus, vector, depth, view)
        found = self._content_first(rrf(ranked, self.rrf_k), top_k)
        return [
            Hit(
                chunk=chunk,
                rank=rank,
                score=f.score,
                dense_score=f.scores.get("dense"),
                dense_rank=f.ranks.get("dense"),
                bm25_score=f.scores.get("bm25"),
                bm25_rank=f.ranks.get("bm25"),
            )
            for rank, (f, chunk) in enumerate(found, start=1)
        ]

    def _content_first(self, fused: list[Fused], top_k: int) -> list[tuple[Fused, Chunk]]:
        """The best `top_k` of `fused` with their chunks, navigation after content: read
        `top_k` at a time, so a search whose best hits hold no navigation reads no more
        chunks than it returns."""
        content: list[tuple[Fused, Chunk]] = []
        navigation: list[tuple[Fused, Chunk]] = []
        step = max(top_k, 1)
        for start in range(0, len(fused), step):
            window = fused[start : start + step]
            chunks = self.corpus.get_chunks([f.item_id for f in window])
            for f in window:
                if (chunk := chunks.get(f.item_id)) is not None:
                    wanted = navigation if chunk.metadata.get(NAVIGATION) else content
                    wanted.append((f, chunk))
            if len(content) >= top_k:
                break
        return (content + navigation)[:top_k]
