"""The store's shared records and the logic every backend shares: what ingest hands a
store (`DocumentRecord`, `ChunkRecord`), what a store hands back (`StoredDocument`,
`CorpusStats`), the `meta` keys every corpus holds, the embedder identity read from them,
and the check of a document's chunks and vectors before any backend writes them.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from crag_edge.citations import locate
from crag_edge.store.errors import EmbedderMismatchError, NotACorpusError
from crag_edge.types import Chunk, Place, Vector

META_EMBEDDER = "embedder_id"
META_DIM = "dim"
META_CREATED = "created_at"
META_LAST_INGEST = "last_ingest_at"
META_CHUNK_TOKENS = "chunk_tokens"
META_CHUNK_OVERLAP = "chunk_overlap"
_T = TypeVar("_T")
FIXED_META = frozenset({META_EMBEDDER, META_DIM})  # set when a corpus is created, never after


@dataclass(frozen=True)
class DocumentRecord:
    """A document as ingest hands it to the store; `size`/`mtime` describe its source file,
    `groups` who may see it (`crag_edge.groups`; empty: everyone), `reached` the path ingest
    reached it by when not its own (`SqlCorpus.reached_by`)."""

    source: str
    title: str
    text: str
    content_hash: str
    metadata: dict[str, Any] = field(default_factory=dict)
    size: int | None = None
    mtime: float | None = None
    groups: frozenset[str] = frozenset()
    reached: str | None = None


@dataclass(frozen=True)
class ChunkRecord:
    """A chunk to store: `text == document.text[start:end]`; `places` locate it for
    citations (`citations.places_within`). Not a `types.Chunk` nor a `types.Span`: it has no
    id, document or source yet (the store gives them when it writes the document)."""

    text: str
    start: int
    end: int
    token_count: int
    metadata: dict[str, Any] = field(default_factory=dict)
    places: tuple[Place, ...] = ()


@dataclass(frozen=True)
class StoredDocument:
    """A document row without its text (fetch that with `Corpus.document_text`)."""

    id: int
    source: str
    title: str
    content_hash: str
    metadata: dict[str, Any]
    size: int | None
    mtime: float | None
    ingested_at: float
    groups: frozenset[str] = frozenset()


@dataclass(frozen=True)
class DocumentEntry:
    """One line of a corpus's listing (`crag-edge documents`): a document without its text;
    `ingested_at` in unix seconds, `size` of its file in bytes (None: not read from a file)."""

    source: str
    title: str
    chunks: int
    groups: frozenset[str]
    size: int | None
    ingested_at: float


@dataclass(frozen=True)
class CorpusStats:
    """What `crag-edge` shows about a corpus; times are unix seconds. `path`: the file, or
    the database's URL with its password masked."""

    path: Path | str
    documents: int
    chunks: int
    db_bytes: int
    embedder_id: str
    dim: int
    schema_version: int
    created_at: float
    last_ingest_at: float | None
    chunk_tokens: int | None
    chunk_overlap: int | None
    cached_scores: int = 0
    stored_passages: int = 0

    @classmethod
    def from_meta(
        cls,
        meta: Mapping[str, str],
        *,
        path: Path | str,
        documents: int,
        chunks: int,
        db_bytes: int,
        schema_version: int,
        cached_scores: int,
        stored_passages: int,
    ) -> CorpusStats:
        """The stats of a corpus whose `meta` table holds `meta`, with what its backend
        counted and measured."""
        return cls(
            path=path,
            documents=documents,
            chunks=chunks,
            db_bytes=db_bytes,
            embedder_id=meta[META_EMBEDDER],
            dim=int(meta[META_DIM]),
            schema_version=schema_version,
            created_at=float(meta[META_CREATED]),
            last_ingest_at=_optional(float, meta.get(META_LAST_INGEST)),
            chunk_tokens=_optional(int, meta.get(META_CHUNK_TOKENS)),
            chunk_overlap=_optional(int, meta.get(META_CHUNK_OVERLAP)),
            cached_scores=cached_scores,
            stored_passages=stored_passages,
        )


class EmbedderIdentity:
    """What every backend knows from its `meta` table once opened: whether it is read-only
    and which embedder built it, with the check that refuses vectors of another model."""

    _readonly: bool
    _meta: dict[str, str]
    _fresh_store = "a new corpus file"  # what the mismatch error suggests instead

    @property
    def path(self) -> Path | str:
        """What messages name: the file, or the database URL with its password masked; the
        embedder check's error names it too."""
        raise NotImplementedError

    @property
    def readonly(self) -> bool:
        return self._readonly

    @property
    def embedder_id(self) -> str:
        return self._meta[META_EMBEDDER]

    @property
    def dim(self) -> int:
        return int(self._meta[META_DIM])

    def check_embedder(self, embedder_id: str, dim: int) -> None:
        """Refuse to mix vectors from different models: their similarities mean nothing."""
        if (embedder_id, dim) != (self.embedder_id, self.dim):
            raise EmbedderMismatchError(
                self.path,
                f"built with embedder {self.embedder_id!r} (dim {self.dim}), "
                f"not {embedder_id!r} (dim {dim}); use that embedder or {self._fresh_store}",
            )


def checked_chunks(
    doc: DocumentRecord, chunks: Sequence[ChunkRecord], vectors: Vector, dim: int
) -> np.ndarray:
    """The vectors as a float32 matrix, once every chunk matches its slice of the text and
    there is one `dim`-sized vector per chunk (ValueError naming the document otherwise)."""
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    if len(chunks) == 0 and matrix.size == 0:
        matrix = matrix.reshape(0, dim)
    if matrix.shape != (len(chunks), dim):
        raise ValueError(
            f"{doc.source}: expected vectors of shape ({len(chunks)}, {dim}), got {matrix.shape}"
        )
    for chunk in chunks:
        if not 0 <= chunk.start <= chunk.end <= len(doc.text) or (
            doc.text[chunk.start : chunk.end] != chunk.text
        ):
            raise ValueError(
                f"{doc.source}: chunk [{chunk.start}:{chunk.end}] does not match the text"
            )
    return matrix


def first_meta(embedder_id: str, dim: int, max_dim: int) -> list[tuple[str, str]]:
    """The meta rows a new corpus starts with, once its embedder is named and its dimension is
    one the backend's vectors can hold (ValueError else)."""
    if not embedder_id:
        raise ValueError("embedder_id must not be empty")
    if not 1 <= dim <= max_dim:
        raise ValueError(f"embedding dim must be between 1 and {max_dim}, got {dim}")
    return [(META_EMBEDDER, embedder_id), (META_DIM, str(dim)), (META_CREATED, repr(time.time()))]


def stored_dim(meta: Mapping[str, str], where: Path | str) -> int:
    """The vector dimension in a corpus's meta; NotACorpusError naming `where` when the meta
    lacks a key every corpus starts with."""
    missing = sorted({META_EMBEDDER, META_DIM, META_CREATED} - meta.keys())
    if missing:
        raise NotACorpusError(where, f"meta table lacks {', '.join(missing)}")
    return int(meta[META_DIM])


def check_changeable(keys: Iterable[str]) -> None:
    """Meta entries may be set or removed, except the embedder and dim: vectors already
    stored were made by that model."""
    fixed = FIXED_META & set(keys)
    if fixed:
        raise ValueError(f"meta keys {sorted(fixed)} are fixed when a corpus is created")


def chunk_from_row(row: Sequence[Any], decode: Callable[[Any], Any] = lambda value: value) -> Chunk:
    """A chunk from a row of (id, doc_id, ordinal, text, start, end, metadata, source, title,
    token_count, places), located for citations; `decode` reads the metadata and the places
    as the backend stores them (JSON text in SQLite; PostgreSQL's JSONB arrives decoded)."""
    chunk_id, doc_id, ordinal, text, start, end, metadata, source, title, tokens, stored = row
    places = tuple(Place(*place) for place in decode(stored))  # [offset, page, section]
    where = locate(places, start, end)
    return Chunk(
        chunk_id=int(chunk_id),
        doc_id=int(doc_id),
        ordinal=ordinal,
        text=text,
        start=start,
        end=end,
        source=source,
        title=title,
        metadata=decode(metadata),
        token_count=tokens,
        pages=where.pages,
        section=where.section,
        places=places,
    )


def _optional(convert: Callable[[str], _T], value: str | None) -> _T | None:
    return None if value is None else convert(value)
