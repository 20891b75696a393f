"""A second crag-edge corpus as the fallback: the air-gapped default, no network at all.

The corpus is opened read-only on first use, so a fallback that is never needed costs
nothing, and a missing or broken file fails that query's fallback, with the reason recorded,
instead of the engine's start. It must have been built with the engine's embedder, whose
instance is shared rather than loaded twice.
"""

from __future__ import annotations

import threading
from dataclasses import replace
from pathlib import Path

import apsw

from crag_edge.config import RetrievalSettings
from crag_edge.correction.fallback.base import ENV_DB, ENV_TIMEOUT, FallbackError, fallback_id
from crag_edge.groups import CorpusView
from crag_edge.locations import absolute_location, parse_location, shown_location
from crag_edge.retrieval import Retriever
from crag_edge.store import (
    CorpusError,
    CorpusNotFoundError,
    CorruptCorpusError,
    EmbedderMismatchError,
    NotACorpusError,
    SchemaTooNewError,
)
from crag_edge.store.factory import open_corpus
from crag_edge.types import Chunk, Embedder, Hit


class LocalCorpusProvider:
    """Hybrid (or `mode`) retrieval in another corpus (a file or a `postgresql://` database),
    relabelled as fallback evidence.

    A search takes milliseconds and cannot be interrupted, so `timeout_s` bounds the wait
    for the corpus (an earlier search abandoned at its deadline may still hold it); the
    caller's deadline (`run_fallbacks`) bounds the rest.
    """

    name = "local"

    def __init__(
        self,
        db: Path | str,
        embedder: Embedder,
        *,
        timeout_s: float = 5.0,
        max_results: int = 5,
        retrieval: RetrievalSettings | None = None,
    ) -> None:
        self.location = absolute_location(parse_location(db))
        self.db = shown_location(self.location)  # what hits and messages name: no password
        self.embedder = embedder
        self.timeout_s = timeout_s
        self.max_results = max_results
        self.retrieval = retrieval or RetrievalSettings.defaults()  # mode, depth, tuning
        self._retriever: Retriever | None = None
        # One lock for open, search and close: apsw refuses to close a connection that
        # another thread (a search abandoned at its deadline) is still using.
        self._lock = threading.Lock()

    def search(self, query: str, limit: int, view: CorpusView) -> list[Hit]:
        """The best hits `view` sees in the fallback corpus, whose documents carry access
        groups of their own (`crag_edge.groups`)."""
        count = min(limit, self.max_results)
        if count <= 0 or not query.strip():
            return []
        if not self._lock.acquire(timeout=self.timeout_s):
            raise FallbackError(
                self.name,
                f"{self.db} still busy with an earlier search after {self.timeout_s:g} s",
                f"check the disk holding it, or raise {ENV_TIMEOUT}",
            )
        try:
            retriever = self._open()
            hits = retriever.search(
                query, top_k=count, mode=self.retrieval.retrieval_mode, view=view
            )
        except (CorpusError, apsw.Error) as exc:
            raise FallbackError(
                self.name,
                f"search in {self.db} failed: {exc}",
                f"rebuild the fallback corpus with `crag-edge ingest --db {self.db} DOCS`",
            ) from None
        finally:
            self._lock.release()
        return [self._relabel(hit) for hit in hits]

    def close(self) -> None:
        with self._lock:
            if self._retriever is not None:
                self._retriever.corpus.close()
                self._retriever = None

    def _open(self) -> Retriever:
        """The retriever, opening the corpus on first use (not cached on failure, so a
        corpus built later is picked up without a restart)."""
        if self._retriever is None:
            try:
                corpus = open_corpus(self.location, readonly=True)
            except CorpusError as exc:
                raise _open_error(self.db, exc) from None
            try:
                corpus.check_embedder(self.embedder.model_id, self.embedder.dim)
            except EmbedderMismatchError as exc:
                corpus.close()
                raise _open_error(self.db, exc) from None
            corpus.use_settings(self.retrieval)
            self._retriever = Retriever(
                corpus,
                self.embedder,
                candidates=self.retrieval.candidates,
                rrf_k=self.retrieval.rrf_k,
            )
        return self._retriever

    def _relabel(self, hit: Hit) -> Hit:
        """The hit as outside evidence: ids that cannot collide with the queried corpus,
        the source prefixed by this corpus's path, the original ids kept in metadata."""
        c = hit.chunk
        source = f"{self.db}#{c.source}"
        origin = {
            "provider": self.name,
            "corpus": str(self.db),
            "chunk_id": c.chunk_id,
            "doc_id": c.doc_id,
            "source": c.source,
            "provider_score": hit.score,
        }
        chunk = Chunk(
            chunk_id=fallback_id(source, str(c.chunk_id), c.text),
            doc_id=fallback_id(source),
            ordinal=c.ordinal,
            text=c.text,
            start=c.start,
            end=c.end,
            source=source,
            title=c.title,
            metadata=c.metadata | {"fallback": origin},
            token_count=c.token_count,
            pages=c.pages,
            section=c.section,
            places=c.places,
        )
        return replace(hit, chunk=chunk, origin=f"fallback:{self.name}")


def _open_error(db: str, exc: CorpusError) -> FallbackError:
    """What to do about a fallback corpus that cannot be used."""
    ingest = f"`crag-edge ingest --db {db} DOCS`"
    if isinstance(exc, CorpusNotFoundError):
        return FallbackError(
            "local", f"no fallback corpus at {db}", f"build it with {ingest} or fix {ENV_DB}"
        )
    if isinstance(exc, EmbedderMismatchError):
        return FallbackError(
            "local",
            f"fallback corpus {exc.reason}",
            f"rebuild it with {ingest} using the same embedder",
        )
    if isinstance(exc, NotACorpusError):
        return FallbackError(
            "local", f"{db}: {exc.reason}", f"point {ENV_DB} at a crag-edge corpus"
        )
    if isinstance(exc, CorruptCorpusError):
        return FallbackError("local", f"{db}: {exc.reason}", f"rebuild it with {ingest}")
    if isinstance(exc, SchemaTooNewError):
        return FallbackError("local", f"{db}: {exc.reason}", "upgrade crag-edge")
    return FallbackError("local", f"{db}: {exc.reason}", f"check {ENV_DB}")
