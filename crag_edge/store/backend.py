"""What the rest of crag-edge asks of a corpus, whichever database holds it.

Ingest, retrieval, grading caches, stats, the engine, the service and the TUI call only what
these protocols name, so a corpus may live in one SQLite file (`store.sqlite.Corpus`, the
default) or in PostgreSQL with pgvector (`store.postgres.PostgresCorpus`, for several
processes or machines sharing one corpus). `store.factory.open_corpus` picks the backend from the
location: a `postgresql://` (or `postgres://`) URL is PostgreSQL, anything else a file path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import Any, Protocol, TypeVar

from crag_edge.config import RetrievalSettings
from crag_edge.groups import CorpusView
from crag_edge.store.document_groups import NO_FILTER, Filter
from crag_edge.store.jobs import JobTable
from crag_edge.store.records import (
    ChunkRecord,
    CorpusStats,
    DocumentEntry,
    DocumentRecord,
    StoredDocument,
)
from crag_edge.types import Chunk, EncodedPassage, Vector

T = TypeVar("T")


class ScoreCacheBackend(Protocol):
    """The evaluation cache (`store.sqlite.score_cache` describes its rules)."""

    def get(self, scorer: str, query: str, chunk_ids: Sequence[int]) -> dict[int, float]: ...

    def put(self, scorer: str, query: str, scores: Mapping[int, float]) -> bool: ...

    def clear(self) -> int: ...

    def count(self, condition: Filter = NO_FILTER) -> int: ...

    def __len__(self) -> int: ...


class PassageVectorsBackend(Protocol):
    """The evaluator's stored passage readings (`store.sqlite.passage_vectors` describes them)."""

    def get(self, scorer: str, chunk_ids: Sequence[int]) -> dict[int, EncodedPassage]: ...

    def put(
        self, scorer: str, passages: Mapping[int, EncodedPassage], *, wait: bool = False
    ) -> bool: ...

    def missing(self, scorer: str) -> list[int]: ...

    def drop_others(self, scorer: str) -> int: ...

    def count(self, condition: Filter = NO_FILTER) -> int: ...

    def __len__(self) -> int: ...


class CorpusBackend(Protocol):
    """One corpus: documents, chunks, both search indexes, meta and the grading caches."""

    @property
    def path(self) -> Path | str:
        """What messages name: the file, or the database URL with its password masked."""
        ...

    @property
    def location(self) -> str:
        """What `open_corpus` takes to open this corpus again (a path or a database URL)."""
        ...

    @property
    def readonly(self) -> bool: ...

    def require_writable(self) -> None:
        """Raise `ReadOnlyCorpusError` saying why (the backend knows: a file's permissions,
        a database role's privileges) when this corpus cannot be written."""
        ...

    @property
    def embedder_id(self) -> str: ...

    @property
    def dim(self) -> int: ...

    def close(self) -> None: ...

    def __enter__(self) -> CorpusBackend: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...

    def check(self) -> dict[str, Any]: ...

    def checkpoint(self) -> bool: ...

    def ping(self, timeout_s: float) -> None: ...

    def check_embedder(self, embedder_id: str, dim: int) -> None: ...

    def meta(self) -> dict[str, str]: ...

    def set_meta(self, values: Mapping[str, str]) -> None: ...

    def delete_meta(self, key: str) -> bool: ...

    def stats(self, *, view: CorpusView) -> CorpusStats: ...

    def transaction(self) -> AbstractContextManager[None]: ...

    def run_transaction(self, work: Callable[[], T]) -> T: ...

    def document(self, source: str) -> StoredDocument | None: ...

    def document_text(self, doc_id: int) -> str: ...

    def list_sources(self) -> list[str]: ...

    def list_documents(self, *, view: CorpusView) -> list[DocumentEntry]:
        """Every document `view` sees, by source, without its text."""
        ...

    def reached_by(self) -> dict[str, str]:
        """Source -> the path ingest reached it by, for documents reached by a path not
        their own (`store.base.SqlCorpus.reached_by`)."""
        ...

    def replace_document(
        self, doc: DocumentRecord, chunks: Sequence[ChunkRecord], vectors: Vector
    ) -> int: ...

    def update_file_stat(self, source: str, size: int, mtime: float) -> None: ...

    def set_groups(self, source: str, groups: frozenset[str]) -> bool: ...

    def delete_document(self, source: str) -> bool: ...

    def search_terms(
        self, terms: Sequence[str], limit: int, *, view: CorpusView
    ) -> list[tuple[int, float]]:
        """(chunk id, bm25 with higher = better) of the chunks holding any of `terms`, best
        first. Terms are plain words (`retrieval.lexical.query_terms`), cut into index terms
        by `store.fts_terms` and never read as query syntax; bm25 is FTS5's (k1 1.2, b 0.75),
        over the chunks `view` sees (`crag_edge.groups.CorpusView`)."""
        ...

    def use_settings(self, retrieval: RetrievalSettings) -> None:
        """Take the retrieval settings that tune this backend's own indexes (a SQLite file:
        the sign-bit pre-filter of dense search; PostgreSQL: none)."""
        ...

    def search_vec(
        self, vector: Vector, limit: int, *, view: CorpusView
    ) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the nearest chunks `view` sees, best first."""
        ...

    def get_vectors(self, ids: Sequence[int]) -> Vector: ...

    def get_chunks(self, ids: Iterable[int]) -> dict[int, Chunk]: ...

    def chunk_ids(self) -> list[int]: ...

    def score_cache(self) -> ScoreCacheBackend: ...

    def passage_vectors(self) -> PassageVectorsBackend: ...

    def jobs(self) -> JobTable: ...
