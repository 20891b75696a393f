"""What both backends do with the same SQL, written once: meta, counts, a document's row and
groups (read and replaced), chunks by id, stored vectors and the query vector's check.

`SqlCorpus` runs the shared statements (`store.dialect`) over two connections a backend
gives it: `_reading()` for a query, `_writing()` for writes committed together. Each backend
keeps only what is its own: opening and upgrading, transactions, a document's chunks with
their index rows, both searches, its caches, its size on disk.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Self, TypeVar

import numpy as np

from crag_edge.groups import CorpusView
from crag_edge.store.backend import PassageVectorsBackend, ScoreCacheBackend
from crag_edge.store.dialect import Dialect, Executes
from crag_edge.store.document_groups import (
    Filter,
    count_rows,
    read_groups,
    visible_chunks,
    visible_documents,
    write_groups,
)
from crag_edge.store.records import (
    ChunkRecord,
    CorpusStats,
    DocumentEntry,
    DocumentRecord,
    EmbedderIdentity,
    StoredDocument,
    check_changeable,
    checked_chunks,
    chunk_from_row,
)
from crag_edge.types import Chunk, Closing, Vector

_T = TypeVar("_T")
_UPSERT_META = (
    "INSERT INTO meta (key, value) VALUES (?, ?) "
    "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
)
_DOCUMENT = (
    "SELECT id, source, title, content_hash, metadata, size, mtime, ingested_at "
    "FROM documents WHERE source = ?"
)
# Every document with its number of chunks; `visible_documents` appends its condition.
_LISTING = (
    "SELECT d.id, d.source, d.title, d.size, d.ingested_at, "
    "(SELECT count(*) FROM chunks c WHERE c.doc_id = d.id) FROM documents d WHERE true"
)
_UPSERT_DOCUMENT = (
    "INSERT INTO documents (source, title, content_hash, text, metadata, size, mtime, "
    "ingested_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
    "ON CONFLICT (source) DO UPDATE SET title = excluded.title, "
    "content_hash = excluded.content_hash, text = excluded.text, "
    "metadata = excluded.metadata, size = excluded.size, "
    "mtime = excluded.mtime, ingested_at = excluded.ingested_at RETURNING id"
)
_CHUNKS = (
    "SELECT c.id, c.doc_id, c.ordinal, c.text, c.start_char, c.end_char, c.metadata, "
    "d.source, d.title, c.token_count, {places} "
    "FROM chunks AS c JOIN documents AS d ON d.id = c.doc_id WHERE c.id ANY_OF"
)


class SqlCorpus(EmbedderIdentity, Closing):
    """The shared half of a corpus backend (`store.backend.CorpusBackend`)."""

    _dialect: Dialect
    _groups_present = True  # False: a read-only file older than access groups
    _reached_present = True  # False: a read-only file older than reached paths
    _places_column = "c.places"  # "'[]'": a read-only file older than chunk places

    # -- what each backend gives -----------------------------------------------------------

    def _reading(self) -> AbstractContextManager[Executes]:
        """A connection to query."""
        raise NotImplementedError

    def _writing(self) -> AbstractContextManager[Executes]:
        """A connection whose writes commit together when the block ends."""
        raise NotImplementedError

    def _decode(self, stored: Any) -> Any:
        """A JSON column's value as stored (JSON text in SQLite; JSONB arrives decoded)."""
        return stored

    def _size_and_version(self) -> tuple[int, int]:
        """Bytes on disk and schema version."""
        raise NotImplementedError

    def _vectors(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        """The stored embeddings of those of `ids` that exist."""
        raise NotImplementedError

    def require_writable(self) -> None:
        raise NotImplementedError

    def run_transaction(self, work: Callable[[], _T]) -> _T:
        raise NotImplementedError

    def _write_document(
        self, doc: DocumentRecord, chunks: Sequence[ChunkRecord], matrix: np.ndarray
    ) -> int:
        """Replace the document's row and chunks (`_store_document`, then its chunks with
        their vectors and index rows), inside the transaction `replace_document` runs it in;
        returns its id."""
        raise NotImplementedError

    def score_cache(self) -> ScoreCacheBackend:
        raise NotImplementedError

    def passage_vectors(self) -> PassageVectorsBackend:
        raise NotImplementedError

    # -- shared ----------------------------------------------------------------------------

    def built_with(self, embedder_id: str, dim: int) -> Self:
        """This corpus, once `check_embedder` passes; closed when it does not."""
        try:
            self.check_embedder(embedder_id, dim)
        except BaseException:
            self.close()
            raise
        return self

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._reading() as conn:
            return list(conn.execute(self._dialect.sql(sql), tuple(params)).fetchall())

    def _visible_chunks(self, column: str, view: CorpusView) -> Filter:
        return visible_chunks(self._dialect, column, view, present=self._groups_present)

    def meta(self) -> dict[str, str]:
        """Every key/value in the `meta` table."""
        return {str(key): str(value) for key, value in self._rows("SELECT key, value FROM meta")}

    def set_meta(self, values: Mapping[str, str]) -> None:
        """Insert or overwrite meta entries (the embedder and dim cannot change)."""
        self.require_writable()
        check_changeable(values)
        with self._writing() as conn:
            for key, value in values.items():
                conn.execute(self._dialect.sql(_UPSERT_META), (key, value))
        self._meta = self.meta()

    def delete_meta(self, key: str) -> bool:
        """Remove one meta entry (not the fixed ones); False when it was not there."""
        self.require_writable()
        check_changeable([key])
        with self._writing() as conn:
            sql = self._dialect.sql("DELETE FROM meta WHERE key = ? RETURNING key")
            removed = bool(conn.execute(sql, (key,)).fetchall())
        self._meta = self.meta()
        return removed

    def stats(self, *, view: CorpusView) -> CorpusStats:
        """Counts, size and provenance of the corpus as `view` sees it: the documents,
        chunks, cached scores and stored readings count only what such a caller may see."""
        documents = visible_documents(self._dialect, "id", view, present=self._groups_present)
        with self._reading() as conn:
            document_count = count_rows(conn, "documents", documents)
            chunk_count = count_rows(conn, "chunks", self._visible_chunks("id", view))
        db_bytes, version = self._size_and_version()
        chunk_filter = self._visible_chunks("chunk_id", view)
        return CorpusStats.from_meta(
            self.meta(),
            path=self.path,
            documents=document_count,
            chunks=chunk_count,
            db_bytes=db_bytes,
            schema_version=version,
            cached_scores=self.score_cache().count(chunk_filter),
            stored_passages=self.passage_vectors().count(chunk_filter),
        )

    def list_documents(self, *, view: CorpusView) -> list[DocumentEntry]:
        """Every document `view` sees, by source, without its text."""
        condition, params = visible_documents(
            self._dialect, "d.id", view, present=self._groups_present
        )
        with self._reading() as conn:
            rows = conn.execute(self._dialect.sql(_LISTING) + condition, params).fetchall()
            tags: dict[int, set[str]] = {}
            if self._groups_present:
                named = conn.execute("SELECT doc_id, name FROM document_groups", ()).fetchall()
                for doc_id, name in named:
                    tags.setdefault(int(doc_id), set()).add(str(name))
        entries = [
            DocumentEntry(
                str(source),
                str(title),
                int(chunks),
                frozenset(tags.get(int(doc_id), ())),
                size,
                float(ingested_at),
            )
            for doc_id, source, title, size, ingested_at, chunks in rows
        ]
        return sorted(entries, key=lambda entry: entry.source)

    def document(self, source: str) -> StoredDocument | None:
        """The stored document for `source`, or None."""
        with self._reading() as conn:
            rows = conn.execute(self._dialect.sql(_DOCUMENT), (source,)).fetchall()
            if not rows:
                return None
            doc_id, src, title, content_hash, metadata, size, mtime, ingested_at = rows[0]
            present = self._groups_present
            groups = read_groups(conn, self._dialect, doc_id) if present else frozenset()
        return StoredDocument(
            int(doc_id),
            src,
            title,
            content_hash,
            self._decode(metadata),
            size,
            mtime,
            ingested_at,
            groups,
        )

    def document_text(self, doc_id: int) -> str:
        """The full extracted text of a document (chunk offsets index into it)."""
        rows = self._rows("SELECT text FROM documents WHERE id = ?", (doc_id,))
        if not rows:
            raise KeyError(f"no document with id {doc_id} in {self.path}")
        return str(rows[0][0])

    def update_file_stat(self, source: str, size: int, mtime: float) -> None:
        """Record a new size/mtime for an unchanged document so the next run can skip it."""
        self.require_writable()
        with self._writing() as conn:
            conn.execute(
                self._dialect.sql("UPDATE documents SET size = ?, mtime = ? WHERE source = ?"),
                (size, mtime, source),
            )

    def replace_document(
        self, doc: DocumentRecord, chunks: Sequence[ChunkRecord], vectors: Vector
    ) -> int:
        """Store `doc` with its chunks and their vectors, replacing any previous version.

        Everything happens in one transaction (`run_transaction`): a failure at any point
        leaves the previous version, chunks and index rows exactly as they were. Returns the
        document id, which stays the same across replacements.
        """
        self.require_writable()
        matrix = checked_chunks(doc, chunks, vectors, self.dim)
        return self.run_transaction(lambda: self._write_document(doc, chunks, matrix))

    def _store_document(self, conn: Executes, doc: DocumentRecord, text: str) -> int:
        """Drop the document's old chunks and write its row (`text` as the backend holds it)
        and groups; returns its id, kept across replacements."""
        conn.execute(
            self._dialect.sql(
                "DELETE FROM chunks WHERE doc_id = (SELECT id FROM documents WHERE source = ?)"
            ),
            (doc.source,),
        )
        metadata = json.dumps(doc.metadata, sort_keys=True)  # ASCII: stray surrogates escaped
        row = (doc.source, doc.title, doc.content_hash, text, metadata, doc.size, doc.mtime)
        found = conn.execute(self._dialect.sql(_UPSERT_DOCUMENT), (*row, time.time())).fetchall()
        doc_id = int(found[0][0])
        write_groups(conn, self._dialect, doc_id, doc.groups)
        conn.execute(self._dialect.sql("DELETE FROM reached_paths WHERE doc_id = ?"), (doc_id,))
        if doc.reached is not None:
            conn.execute(
                self._dialect.sql("INSERT INTO reached_paths (doc_id, path) VALUES (?, ?)"),
                (doc_id, doc.reached),
            )
        return doc_id

    def reached_by(self) -> dict[str, str]:
        """Source -> the path ingest reached the document by, for the documents reached by
        another path than their own: a file named through a link, or found under a folder
        named through one. The path dies with its document; pruning the folder it lies in
        removes the document once the path no longer leads to it (`ingest.pipeline`), since
        no prune would ever look where the document is stored. Most documents have none."""
        if not self._reached_present:
            return {}
        rows = self._rows(
            "SELECT d.source, r.path FROM reached_paths AS r JOIN documents AS d ON d.id = r.doc_id"
        )
        return {str(source): str(path) for source, path in rows}

    def get_vectors(self, ids: Sequence[int]) -> Vector:
        """The stored embeddings of these chunk ids, in order (a row of NaN for unknown ids)."""
        found = self._vectors([int(i) for i in ids])
        matrix = np.full((len(ids), self.dim), np.nan, dtype=np.float32)
        for row, chunk_id in enumerate(ids):
            if chunk_id in found:
                matrix[row] = found[chunk_id]
        return matrix

    def get_chunks(self, ids: Iterable[int]) -> dict[int, Chunk]:
        """The chunks with these ids (missing ids are absent), with their document's source."""
        wanted = self._dialect.as_list([int(i) for i in ids])
        rows = self._rows(_CHUNKS.replace("{places}", self._places_column), (wanted,))
        chunks = (chunk_from_row(row, self._decode) for row in rows)
        return {chunk.chunk_id: chunk for chunk in chunks}

    def chunk_ids(self) -> list[int]:
        """Every chunk id, ascending: for whole-corpus passes such as sampling training pairs."""
        return [int(row[0]) for row in self._rows("SELECT id FROM chunks ORDER BY id")]

    def _query_vector(self, vector: Vector) -> np.ndarray:
        """A query vector as one float32 row of the corpus's dimension (ValueError else)."""
        query = np.ascontiguousarray(vector, dtype=np.float32).reshape(-1)
        if query.size != self.dim:
            raise ValueError(f"query vector has {query.size} dimensions, corpus has {self.dim}")
        return query
