"""One corpus in a PostgreSQL database with pgvector: what `store.sqlite.corpus.Corpus` is for a
SQLite file, for several processes or machines sharing one corpus (docs/scale-out.md).

Writes are atomic per document, as in SQLite, and may come from several processes at once:
`replace_document` takes a transaction-scoped advisory lock on the document's source, so two
ingests of one document run one after the other (the last one wins, whole) while ingests of
different documents proceed side by side; readers never wait (MVCC) and see each document old
or new. A `transaction()` groups writes into one commit on one pooled connection;
`run_transaction` does so too and runs the group again when the server aborts it to break a
deadlock (two ingests locking the same documents in opposite orders) or a serialization
conflict.

The dense search uses the HNSW index (approximate, `hnsw.ef_search` raised to the depth
asked for); a caller limited to some access groups gets an exact scan instead, since an HNSW
scan filters after choosing its candidates (`store.document_groups`).
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any, TypeVar

import numpy as np
import psycopg
from psycopg_pool import ConnectionPool

from crag_edge.config import RetrievalSettings
from crag_edge.groups import CorpusView
from crag_edge.store.base import SqlCorpus
from crag_edge.store.dialect import POSTGRES
from crag_edge.store.document_groups import write_groups
from crag_edge.store.errors import (
    CorpusError,
    CorpusExistsError,
    CorpusNotFoundError,
    ReadOnlyCorpusError,
    SchemaTooNewError,
    StorageError,
)
from crag_edge.store.jobs import JobTable
from crag_edge.store.postgres.caches import PostgresPassageVectors, PostgresScoreCache
from crag_edge.store.postgres.connection import (
    connect,
    database_faults,
    first_line,
    open_pool,
    redacted,
)
from crag_edge.store.postgres.lexical import (
    chunk_terms,
    read_totals,
    search_bm25,
    write_postings,
)
from crag_edge.store.postgres.schema import (
    MIGRATION_LOCK,
    SCHEMA,
    SCHEMA_VERSION,
    migrate,
    schema_version,
)
from crag_edge.store.records import ChunkRecord, DocumentRecord, first_meta, stored_dim
from crag_edge.store.view_stats import TotalsCache
from crag_edge.types import Vector

MAX_DIM = 16000  # pgvector's limit for a vector column (an HNSW index takes up to 2000)
MAX_EF_SEARCH = 1000  # pgvector's limit
WRITE_ATTEMPTS = 5
RETRY_PAUSE_S = 0.05  # doubled each attempt, times a random 0.5-1 so two victims part ways
# Aborts after which the same transaction, run again, can succeed.
RETRYABLE = (psycopg.errors.DeadlockDetected, psycopg.errors.SerializationFailure)
T = TypeVar("T")
# The privileges the store's writes take, table by table (an upsert takes UPDATE too).
WRITES = {
    "meta": ("INSERT", "UPDATE", "DELETE"),
    "documents": ("INSERT", "UPDATE", "DELETE"),
    "chunks": ("INSERT", "DELETE"),
    "chunk_terms": ("INSERT", "DELETE"),
    "document_groups": ("INSERT", "DELETE"),
    "score_cache": ("INSERT", "UPDATE", "DELETE"),
    "passage_vectors": ("INSERT", "UPDATE", "DELETE"),
    "jobs": ("INSERT", "UPDATE", "DELETE"),
}


class PostgresCorpus(SqlCorpus):
    """A crag-edge corpus in a PostgreSQL database; build one with `create`, `open` or
    `open_or_create` and a `postgresql://` URL."""

    _dialect = POSTGRES
    _fresh_store = "another database"

    def __init__(self, pool: ConnectionPool[psycopg.Connection[Any]], url: str, *, readonly: bool):
        self._pool = pool
        self._url = url
        self._shown = redacted(url)
        self._readonly = readonly
        self._pinned = threading.local()
        self._totals = TotalsCache()  # bm25's statistics of each view, read when stale
        self._meta = self.meta()

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def create(cls, url: str, embedder_id: str, dim: int) -> PostgresCorpus:
        """Create the corpus tables (and the `vector` extension when missing) in the database
        at `url`; CorpusExistsError when it already holds a corpus."""
        meta = first_meta(embedder_id, dim, MAX_DIM)
        with connect(url) as conn, database_faults(redacted(url)):
            _ensure_vector_extension(conn, url)
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                if schema_version(conn) > 0:
                    raise CorpusExistsError(redacted(url), "already holds a crag-edge corpus")
                migrate(conn, dim)
                with conn.cursor() as cur:
                    cur.executemany(f"INSERT INTO {SCHEMA}.meta (key, value) VALUES (%s, %s)", meta)
        return cls.open(url)

    @classmethod
    def open(cls, url: str, *, readonly: bool = False) -> PostgresCorpus:
        """Open the corpus in the database at `url`, upgrading its schema first unless
        `readonly`. A role that may not write every table (or a read-only server, such as a
        standby) opens it read-only, as a file without write access does: `readonly` then
        reads True, an ingest is refused before any work and the caches are not written."""
        shown = redacted(url)
        with connect(url) as conn, database_faults(shown):
            version = schema_version(conn)
            if version == 0:
                raise CorpusNotFoundError(shown, "holds no crag-edge corpus (ingest creates one)")
            if version > SCHEMA_VERSION:
                raise SchemaTooNewError(
                    shown,
                    f"schema version {version} is newer than this crag-edge supports "
                    f"({SCHEMA_VERSION}); upgrade crag-edge",
                )
            readonly = readonly or not _may_write(conn)
            if version < SCHEMA_VERSION and not readonly:
                with conn.transaction():
                    conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
                    migrate(conn, _dim(conn, shown))
            _dim(conn, shown)
        with database_faults(shown):
            try:
                pool = open_pool(url, readonly=readonly)
            except psycopg.Error as exc:
                raise CorpusError(shown, f"cannot connect: {first_line(exc)}") from None
        return cls(pool, url, readonly=readonly)

    @classmethod
    def open_or_create(cls, url: str, embedder_id: str, dim: int) -> PostgresCorpus:
        """Open the corpus at `url` if it was built with this embedder, else create it."""
        try:
            corpus = cls.open(url)
        except CorpusNotFoundError:
            try:
                return cls.create(url, embedder_id, dim)
            except CorpusExistsError:
                corpus = cls.open(url)  # another process created it meanwhile: use theirs
        return corpus.built_with(embedder_id, dim)

    def close(self) -> None:
        """Close every pooled connection."""
        self._pool.close()

    @contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """The connection of the current `transaction()`, else one from the pool (committed
        when the block ends, rolled back when it raises)."""
        pinned: psycopg.Connection[Any] | None = getattr(self._pinned, "conn", None)
        if pinned is not None:
            yield pinned
            return
        with database_faults(self._shown), self._pool.connection() as conn:
            yield conn

    def ping(self, timeout_s: float) -> None:
        """Answer a trivial query within `timeout_s` (a readiness probe's); StorageError when
        the server cannot be reached or does not answer in time."""
        with database_faults(self._shown), self._pool.connection(timeout=timeout_s) as conn:
            conn.execute(f"SET LOCAL statement_timeout = {int(timeout_s * 1000)}")
            conn.execute("SELECT 1").fetchall()

    def check(self) -> dict[str, Any]:
        """That every chunk has its vector and, unless it has no terms at all, its postings
        (the database checks its own pages)."""
        with self._connection() as conn:
            row = conn.execute(
                "SELECT count(*), count(embedding), count(*) FILTER (WHERE term_count > 0), "
                "(SELECT count(DISTINCT chunk_id) FROM chunk_terms) FROM chunks"
            ).fetchone()
        chunks, vectors, worded, posted = row if row is not None else (0, 0, 0, 0)
        if not (chunks == vectors and worded == posted):
            raise CorpusError(
                self._shown,
                f"index check: {chunks} chunks, {vectors} vectors, "
                f"{posted} of {worded} chunks with words have their terms",
            )
        return {"path": self._shown, "quick_check": "ok", "chunks": int(chunks)}

    def checkpoint(self) -> bool:
        """Nothing to merge: PostgreSQL checkpoints on its own."""
        return False

    # -- meta ----------------------------------------------------------------------------

    @property
    def path(self) -> str:
        """No file: the database's URL with its password masked (for messages)."""
        return self._shown

    @property
    def location(self) -> str:
        return self._url

    def _reading(self) -> AbstractContextManager[psycopg.Connection[Any]]:
        return self._connection()

    @contextmanager
    def _writing(self) -> Iterator[psycopg.Connection[Any]]:
        with self._connection() as conn, conn.transaction():
            yield conn

    def _size_and_version(self) -> tuple[int, int]:
        with self._connection() as conn:
            size = conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class AS c "
                "JOIN pg_namespace AS n ON n.oid = c.relnamespace "
                "WHERE n.nspname = %s AND c.relkind = 'r'",
                (SCHEMA,),
            ).fetchone()
            return int(size[0]) if size is not None else 0, schema_version(conn)

    def _vectors(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        with self._connection() as conn:
            rows = conn.execute(
                "SELECT id, embedding FROM chunks WHERE id = ANY(%s)", (list(ids),)
            ).fetchall()
        return {int(chunk_id): embedding.to_numpy() for chunk_id, embedding in rows}

    # -- documents -----------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group several writes into one commit; nested writes become savepoints."""
        if getattr(self._pinned, "conn", None) is not None:
            with self._pinned.conn.transaction():
                yield
            return
        with self._connection() as conn, self._pinned_to(conn):
            yield

    def run_transaction(self, work: Callable[[], T]) -> T:
        """Run `work` (writes through this corpus) in one transaction. When the server aborts
        it to break a deadlock (SQLSTATE 40P01: two writers locking the same documents in
        opposite orders) or a serialization conflict (40001), it is rolled back whole and run
        again from the start after a short random pause, up to `WRITE_ATTEMPTS` times; the
        other writer meanwhile goes on. Inside another transaction it runs once, as a
        savepoint: the outermost one retries."""
        if getattr(self._pinned, "conn", None) is not None:
            with self.transaction():
                return work()
        with database_faults(self._shown):
            attempt = 0
            while True:
                attempt += 1
                try:
                    with self._pool.connection() as conn, self._pinned_to(conn):
                        return work()
                except RETRYABLE as exc:
                    if attempt == WRITE_ATTEMPTS:
                        raise StorageError(
                            self._shown, f"gave up after {attempt} attempts: {first_line(exc)}"
                        ) from None
                time.sleep(random.uniform(0.5, 1.0) * RETRY_PAUSE_S * 2**attempt)

    @contextmanager
    def _pinned_to(self, conn: psycopg.Connection[Any]) -> Iterator[None]:
        """One transaction on `conn`, which every write of this thread uses until it ends."""
        with conn.transaction():
            self._pinned.conn = conn
            try:
                yield
            finally:
                self._pinned.conn = None

    def list_sources(self) -> list[str]:
        """Every document source, sorted (byte order, as SQLite sorts)."""
        with self._connection() as conn:
            rows = conn.execute('SELECT source FROM documents ORDER BY source COLLATE "C"')
            return [str(row[0]) for row in rows.fetchall()]

    def _write_document(
        self, doc: DocumentRecord, chunks: Sequence[ChunkRecord], matrix: np.ndarray
    ) -> int:
        """Under the source's advisory lock (see the module docstring)."""
        with self._connection() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (doc.source,))
            doc_id = self._store_document(conn, doc, _text(doc.text))
            counted = chunk_terms(doc.title, [chunk.text for chunk in chunks])
            _insert_chunks(conn, doc_id, chunks, [sum(t.values()) for t in counted], matrix)
            write_postings(conn, doc_id, counted)
        return doc_id

    def set_groups(self, source: str, groups: frozenset[str]) -> bool:
        """Retag a stored document without touching its chunks; False if it was not stored."""
        self.require_writable()
        with self._connection() as conn, conn.transaction():
            row = conn.execute(
                "SELECT id FROM documents WHERE source = %s FOR UPDATE", (source,)
            ).fetchone()
            if row is not None:
                write_groups(conn, POSTGRES, int(row[0]), groups)
        return row is not None

    def delete_document(self, source: str) -> bool:
        """Delete a document with its chunks and index rows; False if it was not stored."""
        self.require_writable()
        with self._connection() as conn, conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (source,))
            return conn.execute("DELETE FROM documents WHERE source = %s", (source,)).rowcount > 0

    # -- search --------------------------------------------------------------------------

    def search_terms(
        self, terms: Sequence[str], limit: int, *, view: CorpusView
    ) -> list[tuple[int, float]]:
        """(chunk id, bm25) of the chunks holding any of `terms`, best first, scored as
        FTS5 scores them (`store.postgres.lexical`); only visible chunks, by their statistics."""
        if limit <= 0 or not terms:
            return []
        with self._connection() as conn:
            totals = self._totals.get(
                view, lambda: read_totals(conn, self._visible_chunks("id", view))
            )
            return search_bm25(conn, terms, limit, self._visible_chunks("p.chunk_id", view), totals)

    def use_settings(self, retrieval: RetrievalSettings) -> None:
        """None applies: pgvector's HNSW index serves dense search at every size."""

    def search_vec(
        self, vector: Vector, limit: int, *, view: CorpusView
    ) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the nearest visible chunks, best first."""
        query = self._query_vector(vector)
        if limit <= 0:
            return []
        visible, params = self._visible_chunks("id", view)
        with self._connection() as conn, conn.transaction():
            conn.execute(f"SET LOCAL hnsw.ef_search = {min(max(limit, 40), MAX_EF_SEARCH)}")
            if view.limited:
                conn.execute("SET LOCAL enable_indexscan = off")  # exact: filter before top-k
            rows = conn.execute(
                f"SELECT id, 1 - (embedding <=> %s) FROM chunks WHERE true{visible} "
                "ORDER BY embedding <=> %s LIMIT %s",
                (query, *params, query, limit),
            ).fetchall()
        return [(int(chunk_id), float(similarity)) for chunk_id, similarity in rows]

    def score_cache(self) -> PostgresScoreCache:
        """The evaluation cache (reads only when the corpus is read-only)."""
        return PostgresScoreCache(self._connection, writable=not self._readonly)

    def passage_vectors(self) -> PostgresPassageVectors:
        """The evaluator's stored passage readings (reads only when read-only)."""
        return PostgresPassageVectors(self._connection, writable=not self._readonly)

    def jobs(self) -> JobTable:
        """The service's ingest job records, shared by every replica (reads only when
        read-only)."""
        return JobTable(self._connection, POSTGRES, writable=not self._readonly)

    def require_writable(self) -> None:
        if self._readonly:
            raise ReadOnlyCorpusError(
                self._shown,
                "read-only (opened so, or the role may not write every table of the corpus, "
                "or the server only reads)",
            )


def _ensure_vector_extension(conn: psycopg.Connection[Any], url: str) -> None:
    """Create pgvector's extension unless it is there (creating it takes a superuser)."""
    row = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
    if row is not None:
        return
    try:
        with conn.transaction():
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.errors.InsufficientPrivilege:
        raise CorpusError(
            redacted(url),
            "the pgvector extension is missing and this user may not create it; "
            "a superuser runs `CREATE EXTENSION vector` in this database once",
        ) from None
    except psycopg.errors.UndefinedFile:
        raise CorpusError(
            redacted(url), "the server has no pgvector extension installed; install pgvector"
        ) from None


def _may_write(conn: psycopg.Connection[Any]) -> bool:
    """Whether this role on this server may make every write of the store (a table an older
    schema lacks yet is left out: its upgrade needs the role's write access anyway)."""
    needed = [(f"{SCHEMA}.{table}", kind) for table, kinds in WRITES.items() for kind in kinds]
    row = conn.execute(
        "SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off' "
        "AND bool_and(CASE WHEN to_regclass(name) IS NULL THEN true "
        "ELSE has_table_privilege(name, kind) END) "
        "FROM unnest(%s::text[], %s::text[]) AS needed (name, kind)",
        ([name for name, _ in needed], [kind for _, kind in needed]),
    ).fetchone()
    return row is not None and bool(row[0])


def _dim(conn: psycopg.Connection[Any], shown: str) -> int:
    """The corpus's vector dimension from its meta (NotACorpusError when meta is broken)."""
    rows = conn.execute(f"SELECT key, value FROM {SCHEMA}.meta").fetchall()
    return stored_dim({str(key): str(value) for key, value in rows}, shown)


def _insert_chunks(
    conn: psycopg.Connection[Any],
    doc_id: int,
    chunks: Sequence[ChunkRecord],
    lengths: Sequence[int],
    matrix: np.ndarray,
) -> None:
    """The chunk rows of one document with their lengths in terms and their vectors (their
    postings follow)."""
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO chunks (doc_id, ordinal, text, start_char, end_char, token_count, "
            "metadata, places, term_count, embedding) VALUES "
            "(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [
                (
                    doc_id,
                    ordinal,
                    _text(chunk.text),
                    chunk.start,
                    chunk.end,
                    chunk.token_count,
                    json.dumps(chunk.metadata, sort_keys=True),
                    json.dumps([[p.offset, p.page, p.section] for p in chunk.places]),
                    length,
                    vector,
                )
                for ordinal, (chunk, length, vector) in enumerate(
                    zip(chunks, lengths, matrix, strict=True)
                )
            ],
        )


def _text(value: str) -> str:
    """PostgreSQL text holds no NUL character (SQLite does): it becomes U+FFFD, one character
    for one, so chunk offsets still index the document's text."""
    return value.replace("\x00", "\ufffd")
