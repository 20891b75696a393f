"""One corpus = one SQLite file: documents, their chunks, an FTS5 index and a sqlite-vec index.

Opening never writes before the file has been checked read-only (header, application id,
schema version, meta), so a foreign or damaged file is reported and left byte-for-byte intact.
A new corpus is built under a temporary name and linked into place when complete, so no
crash or full disk leaves a half-made file behind, and two creators cannot both win.
"""

from __future__ import annotations

import errno
import json
import os
import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path
from typing import Any, TypeVar, cast

import apsw
import numpy as np

from crag_edge.config import BINARY_PREFILTER_CHUNKS, RetrievalSettings
from crag_edge.groups import CorpusView
from crag_edge.store.base import SqlCorpus
from crag_edge.store.dialect import SQLITE
from crag_edge.store.document_groups import visible_chunk_ids, write_groups
from crag_edge.store.errors import (
    REPLACED,
    CorpusError,
    CorpusExistsError,
    CorpusNotFoundError,
    CorpusReplacedError,
    CorruptCorpusError,
    NotACorpusError,
    ReadOnlyCorpusError,
    SchemaTooNewError,
    reports_storage_faults,
    storage_faults,
)
from crag_edge.store.jobs import JobTable
from crag_edge.store.records import ChunkRecord, DocumentRecord, first_meta, stored_dim
from crag_edge.store.sqlite import lexical_view
from crag_edge.store.sqlite.connection import connect, has_pending_journal, write_transaction
from crag_edge.store.sqlite.passage_vectors import PassageVectors
from crag_edge.store.sqlite.schema import (
    APPLICATION_ID,
    BITS_VERSION,
    GROUPS_VERSION,
    JOBS_VERSION,
    PASSAGE_VECTORS_VERSION,
    PLACES_VERSION,
    REACHED_VERSION,
    SCHEMA_VERSION,
    SCORE_CACHE_VERSION,
    migrate,
    user_version,
)
from crag_edge.store.sqlite.score_cache import ScoreCache
from crag_edge.store.sqlite.vector_bits import BitIndex, insert_bits
from crag_edge.store.view_stats import TotalsCache
from crag_edge.text_boundary import is_valid, printable_path
from crag_edge.types import Vector

MAX_DIM = 8192  # sqlite-vec's limit for a vec0 column
# Later versions only added the evaluation cache, stored passage readings, chunk places and
# access groups:
# read-only, an older file is searched as is (without them) rather than refused, so `eval`
# commands work on it unchanged.
MIN_READABLE_VERSION = 1
MAX_KNN = 4096  # sqlite-vec's limit for k in one KNN query

SQLITE_HEADER = b"SQLite format 3\x00"
_T = TypeVar("_T")


@reports_storage_faults
class Corpus(SqlCorpus):
    """A crag-edge corpus file. Build one with `create`, `open` or `open_or_create`."""

    _dialect = SQLITE

    def __init__(self, conn: apsw.Connection, path: Path, *, readonly: bool) -> None:
        self._conn = conn
        self._path = path
        self._readonly = readonly
        self._meta = self.meta()
        # A read-only file of an older schema has no places column: its chunks cite none.
        if user_version(conn) < PLACES_VERSION:
            self._places_column = "'[]'"
        # Nor any access groups: its documents are all untagged.
        self._groups_present = user_version(conn) >= GROUPS_VERSION
        # Nor the paths documents were reached by: none was reached through a link.
        self._reached_present = user_version(conn) >= REACHED_VERSION
        # Nor the sign bits of the pre-filter: its dense search stays exact.
        self._bits = BitIndex(conn, self.dim) if user_version(conn) >= BITS_VERSION else None
        self._jobs_lock = threading.Lock()
        self._view_totals = TotalsCache()
        self.prefilter_from: int | None = BINARY_PREFILTER_CHUNKS
        lexical_view.register(conn)
        self._replaced = _replacement_check(path)
        if not readonly:
            conn.set_commit_hook(self._replaced)  # True: the commit becomes a rollback

    # -- opening -------------------------------------------------------------------------

    @classmethod
    def create(cls, path: Path | str, embedder_id: str, dim: int) -> Corpus:
        """Create a new corpus whose vectors have `dim` dimensions from `embedder_id`.

        Raises CorpusExistsError when `path` holds a file (an empty one is replaced), also
        when another process created it while this one was building.
        """
        path = _checked_path(path)
        meta = first_meta(embedder_id, dim, MAX_DIM)
        if path.exists() and (not path.is_file() or path.stat().st_size > 0):
            raise CorpusExistsError(path, "already exists; open it instead of creating it")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CorpusError(path, f"cannot create its folder: {exc.strerror}") from None
        temp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:12]}.creating")
        try:
            with storage_faults(path):
                _build(temp, meta, dim)
            _publish(temp, path)
        except apsw.CantOpenError:
            raise CorpusError(path, "cannot create: no write access to its folder") from None
        finally:
            for leftover in (temp, *_journals(temp)):
                leftover.unlink(missing_ok=True)
        return cls.open(path)

    @classmethod
    def open(cls, path: Path | str, *, readonly: bool = False) -> Corpus:
        """Open an existing corpus, upgrading its schema first when opened read-write.

        A file we may not write (or in a read-only folder) opens read-only even when
        `readonly` is False: `readonly` then reads True and writes raise ReadOnlyCorpusError.
        """
        path = _checked_path(path)
        version, dim = _inspect(path)
        if readonly:
            _refuse_too_old(path, version)  # before connecting: a refused file stays untouched
        with storage_faults(path):
            conn = connect(path, readonly=readonly)
            readonly = readonly or conn.readonly("main")
            try:
                if readonly:
                    _refuse_too_old(path, version)
                elif version < SCHEMA_VERSION:
                    migrate(conn, dim)
                return cls(conn, path, readonly=readonly)
            except BaseException:
                conn.close()
                raise

    @classmethod
    def open_or_create(cls, path: Path | str, embedder_id: str, dim: int) -> Corpus:
        """Open `path` if it holds a corpus built with this embedder, else create it."""
        path = _checked_path(path)
        if not path.exists() or (path.is_file() and path.stat().st_size == 0):
            try:
                return cls.create(path, embedder_id, dim)
            except CorpusExistsError:
                pass  # another process created it meanwhile: use theirs
        corpus = cls.open(path)
        return corpus.built_with(embedder_id, dim)

    def close(self) -> None:
        """Close the connection; the last writer to close checkpoints and removes the WAL."""
        self._conn.close()

    def ping(self, timeout_s: float) -> None:
        """Answer a trivial query (a readiness probe's); StorageError when the file cannot be
        read, CorpusReplacedError when the path holds another file now. Reading takes no lock
        (WAL), so `timeout_s` never comes into play."""
        if self._replaced():
            raise CorpusReplacedError(self._path, REPLACED)
        with storage_faults(self._path):
            self._conn.execute("SELECT count(*) FROM meta").fetchall()

    def check(self) -> dict[str, Any]:
        """What is cheap to verify: SQLite's `quick_check` (every page and index, O(size)) and
        that each chunk has its row in every index search reads (the vectors, the full-text
        index, the vectors' sign bits): a lost row hides its chunk from one retriever with no
        error anywhere. CorruptCorpusError names the first problem."""
        problems = [cast(str, row[0]) for row in self._conn.execute("PRAGMA quick_check(5)")]
        if problems != ["ok"]:
            first = [line for line in problems[0].splitlines() if not line.startswith("***")]
            raise CorruptCorpusError(
                self._path,
                f"damaged database, quick_check: {(first or problems)[0]}; restore a backup "
                "or ingest the documents into a new corpus file",
            )
        chunks, *indexed = cast(
            tuple[int, int, int, int],
            self._conn.execute(
                "SELECT (SELECT count(*) FROM chunks), (SELECT count(*) FROM chunks_vec), "
                "(SELECT count(*) FROM chunks_fts), (SELECT count(*) FROM chunk_bits)"
            ).fetchall()[0],
        )
        for count, what in zip(
            indexed, ("vectors", "full-text rows", "sign-bit rows"), strict=True
        ):
            if count != chunks:
                raise CorruptCorpusError(
                    self._path,
                    f"index check: {chunks} chunks but {count} {what}; ingest the documents "
                    "into a new corpus file",
                )
        return {"path": str(self._path), "quick_check": "ok", "chunks": chunks}

    def checkpoint(self) -> bool:
        """Merge the WAL into the file and truncate it (best effort: after a failed write, a
        full disk may still refuse); False when it could not be done."""
        if self._readonly:
            return False
        try:
            busy, _, _ = self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0]
        except apsw.Error:
            return False
        return busy == 0

    # -- meta ----------------------------------------------------------------------------

    @property
    def path(self) -> Path:
        return self._path

    @property
    def location(self) -> str:
        """The file's path as text (what `store.factory.open_corpus` takes)."""
        return str(self._path)

    def _reading(self) -> AbstractContextManager[apsw.Connection]:
        return nullcontext(self._conn)  # WAL: a read takes no lock

    def _writing(self) -> AbstractContextManager[apsw.Connection]:
        return self._conn  # a transaction, or a savepoint inside `transaction()`

    def _decode(self, stored: Any) -> Any:
        return json.loads(stored)

    def _size_and_version(self) -> tuple[int, int]:
        pages, page_size = cast(
            tuple[int, int],
            self._conn.execute(
                "SELECT (SELECT page_count FROM pragma_page_count), "
                "(SELECT page_size FROM pragma_page_size)"
            ).fetchall()[0],
        )
        return pages * page_size, user_version(self._conn)

    def _vectors(self, ids: Sequence[int]) -> dict[int, np.ndarray]:
        rows = self._conn.execute(
            "SELECT rowid, embedding FROM chunks_vec "
            "WHERE rowid IN (SELECT value FROM json_each(?))",
            (json.dumps(list(ids)),),
        ).fetchall()
        return {
            cast(int, rowid): np.frombuffer(cast(bytes, blob), np.float32) for rowid, blob in rows
        }

    # -- documents -----------------------------------------------------------------------

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Group several writes into one commit; nested writes become savepoints."""
        with storage_faults(self._path), self._conn:
            yield

    def run_transaction(self, work: Callable[[], _T]) -> _T:
        """Run `work` (writes through this corpus) in one transaction. A SQLite file has one
        writer at a time, so no deadlock can abort it: it runs once."""
        with self.transaction():
            return work()

    def list_sources(self) -> list[str]:
        """Every document source, sorted."""
        rows = self._conn.execute("SELECT source FROM documents ORDER BY source").fetchall()
        return [cast(str, row[0]) for row in rows]

    def _write_document(
        self, doc: DocumentRecord, chunks: Sequence[ChunkRecord], matrix: np.ndarray
    ) -> int:
        doc_id = self._store_document(self._conn, doc, doc.text)
        for ordinal, (chunk, vector) in enumerate(zip(chunks, matrix, strict=True)):
            self._insert_chunk(doc_id, ordinal, chunk, vector)
        return doc_id

    def _insert_chunk(self, doc_id: int, ordinal: int, chunk: ChunkRecord, vector: Vector) -> None:
        """One chunk row (its FTS row follows by trigger), its vector and its sign bits."""
        chunk_id = self._conn.execute(
            "INSERT INTO chunks (doc_id, ordinal, text, start_char, end_char, "
            "token_count, metadata, places) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                doc_id,
                ordinal,
                chunk.text,
                chunk.start,
                chunk.end,
                chunk.token_count,
                _to_json(chunk.metadata),
                json.dumps([[p.offset, p.page, p.section] for p in chunk.places]),
            ),
        ).fetchall()[0][0]
        self._conn.execute(
            "INSERT INTO chunks_vec (rowid, embedding) VALUES (?, ?)", (chunk_id, vector.tobytes())
        )
        insert_bits(self._conn, cast(int, chunk_id), vector)

    def set_groups(self, source: str, groups: frozenset[str]) -> bool:
        """Retag a stored document (`crag_edge.groups`) without touching its chunks or
        vectors; False if it was not stored."""
        self.require_writable()
        with write_transaction(self._conn):  # it reads before it writes
            rows = self._conn.execute(
                "SELECT id FROM documents WHERE source = ?", (source,)
            ).fetchall()
            if rows:
                write_groups(self._conn, SQLITE, cast(int, rows[0][0]), groups)
        return bool(rows)

    def delete_document(self, source: str) -> bool:
        """Delete a document with its chunks and index rows; False if it was not stored."""
        self.require_writable()
        with self._conn:
            rows = self._conn.execute(
                "DELETE FROM documents WHERE source = ? RETURNING id", (source,)
            ).fetchall()
        return bool(rows)

    # -- search --------------------------------------------------------------------------

    def search_terms(
        self, terms: Sequence[str], limit: int, *, view: CorpusView
    ) -> list[tuple[int, float]]:
        """(chunk id, -bm25) of the chunks holding any of `terms`, best first (higher is
        better); only chunks `view` sees (`crag_edge.groups.CorpusView`), scored by
        the statistics of those chunks alone (`store.view_stats`)."""
        if limit <= 0 or not terms:
            return []
        visible = self._visible_chunks("+rowid", view)
        if visible[0]:
            totals = self._view_totals.get(
                view, lambda: lexical_view.read_totals(self._conn, visible)
            )
            return lexical_view.search_view(self._conn, terms, limit, visible, totals)
        rows = self._conn.execute(
            "SELECT rowid, rank FROM chunks_fts WHERE chunks_fts MATCH ? ORDER BY rank LIMIT ?",
            (lexical_view.match_expression(terms), limit),
        ).fetchall()
        return [(cast(int, rowid), -cast(float, rank)) for rowid, rank in rows]

    def use_settings(self, retrieval: RetrievalSettings) -> None:
        """Take `binary_prefilter_chunks`: from that many chunks on, dense search draws its
        candidates from the vectors' sign bits (`prefilter_from`)."""
        self.prefilter_from = retrieval.binary_prefilter_chunks

    def search_vec(
        self, vector: Vector, limit: int, *, view: CorpusView
    ) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the nearest chunks `view` sees
        (`crag_edge.groups.CorpusView`), best first.

        From `prefilter_from` chunks on (None: never) the candidates come from the binary
        pre-filter (`store.sqlite.vector_bits`), ranked by the same similarities; below, and in a
        read-only file older than its table, the search is exact. `limit` is capped at
        sqlite-vec's maximum k (4096).
        """
        query = self._query_vector(vector)
        if limit <= 0:
            return []
        limit = min(limit, MAX_KNN)
        bits = self._bits
        start = self.prefilter_from
        if bits is not None and start is not None and len(bits) >= start:
            visible_ids = visible_chunk_ids(self._conn, SQLITE, view, present=self._groups_present)
            return bits.search(query, limit, visible_ids)
        visible, params = self._visible_chunks("rowid", view)
        rows = self._conn.execute(
            f"SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ? AND k = ?{visible} "
            "ORDER BY distance",
            (query.tobytes(), limit, *params),
        ).fetchall()
        return [(cast(int, rowid), 1.0 - cast(float, distance)) for rowid, distance in rows]

    def score_cache(self) -> ScoreCache:
        """The evaluation cache in this file (reads only when the corpus is read-only)."""
        present = user_version(self._conn) >= SCORE_CACHE_VERSION
        return ScoreCache(self._conn, writable=not self._readonly, present=present)

    def passage_vectors(self) -> PassageVectors:
        """The evaluator's stored passage readings (reads only when the corpus is read-only)."""
        present = user_version(self._conn) >= PASSAGE_VECTORS_VERSION
        return PassageVectors(self._conn, writable=not self._readonly, present=present)

    def jobs(self) -> JobTable:
        """The service's ingest job records in this file (reads only when read-only)."""
        present = user_version(self._conn) >= JOBS_VERSION
        return JobTable(self._job_transaction, SQLITE, writable=not self._readonly, present=present)

    @contextmanager
    def _job_transaction(self) -> Iterator[apsw.Connection]:
        """One transaction at a time: the service's threads (requests, the ingest's progress,
        the heartbeat) share this connection, and interleaved savepoints would release each
        other's."""
        with self._jobs_lock, storage_faults(self._path), self._conn:
            yield self._conn

    def require_writable(self) -> None:
        if self._readonly:
            raise ReadOnlyCorpusError(
                self._path, "read-only (opened so, or no write access to the file or its folder)"
            )


def _replacement_check(path: Path) -> Callable[[], bool]:
    """A test of whether `path` still names the file opened now. SQLite finds the -wal file
    by name: a connection to a file moved or replaced meanwhile (`mv new.db corpus.db` while
    a service runs) would commit into the WAL that the new file's readers then apply to it,
    damaging it; its commits are refused instead."""

    def identity() -> tuple[int, int] | None:
        try:
            found = path.stat()
        except OSError:
            return None
        return found.st_dev, found.st_ino

    opened = identity()
    return lambda: identity() != opened


def _refuse_too_old(path: Path, version: int) -> None:
    """Read-only, a schema older than `MIN_READABLE_VERSION` cannot be read (nor upgraded)."""
    if version < MIN_READABLE_VERSION:
        raise CorpusError(
            path,
            f"schema version {version} is older than {SCHEMA_VERSION}; "
            "open it read-write once to upgrade it",
        )


def _checked_path(path: Path | str) -> Path:
    """The absolute path; SQLite takes file names as UTF-8 text, so others are refused here."""
    resolved = Path(path).expanduser().resolve()
    if not is_valid(str(resolved)):
        raise CorpusError(printable_path(resolved), "file name is not valid UTF-8; rename it")
    return resolved


def _build(path: Path, meta: list[tuple[str, str]], dim: int) -> None:
    """Write a complete new corpus at `path`, left in one file (not WAL) so it can be moved."""
    conn = connect(path, create=True)
    try:
        with conn:
            migrate(conn, dim)
            conn.executemany("INSERT INTO meta (key, value) VALUES (?, ?)", meta)
        conn.execute("PRAGMA journal_mode = DELETE")
    finally:
        conn.close()


def _publish(temp: Path, path: Path) -> None:
    """Give the finished file its name without ever replacing another creator's corpus."""
    try:
        if path.is_file() and path.stat().st_size == 0:
            os.replace(temp, path)  # an empty placeholder, e.g. from `touch` or mktemp
        else:
            os.link(temp, path)  # fails when `path` appeared meanwhile: no clobbering
    except FileExistsError:
        raise CorpusExistsError(path, "was created meanwhile by another process") from None
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP):
            raise
        if path.exists():  # a file system without hard links (FAT, some network shares)
            raise CorpusExistsError(path, "was created meanwhile by another process") from None
        os.replace(temp, path)


def _journals(path: Path) -> list[Path]:
    return [Path(f"{path}{suffix}") for suffix in ("-wal", "-shm", "-journal")]


def _inspect(path: Path) -> tuple[int, int]:
    """Read-only checks before anything may write: return (schema version, vector dim)."""
    if not path.exists():
        raise CorpusNotFoundError(path, "no such corpus file")
    if not path.is_file():
        raise NotACorpusError(path, "not a regular file")
    _check_header(path)
    try:
        conn = connect(path, inspect_only=True)
    except apsw.Error as exc:
        raise CorpusError(path, f"cannot open: {exc}") from None
    try:
        app_id = cast(int, conn.execute("PRAGMA application_id").fetchall()[0][0])
        if app_id != APPLICATION_ID:
            raise NotACorpusError(
                path,
                f"a SQLite database with application_id {app_id:#x}, not a crag-edge corpus "
                f"({APPLICATION_ID:#x}); it was left untouched",
            )
        version = user_version(conn)
        if version > SCHEMA_VERSION:
            raise SchemaTooNewError(
                path,
                f"schema version {version} is newer than this crag-edge supports "
                f"({SCHEMA_VERSION}); upgrade crag-edge",
            )
        try:
            rows = conn.execute("SELECT key, value FROM meta").fetchall()
        except apsw.SQLError:
            raise NotACorpusError(path, "crag-edge application_id but no meta table") from None
    except (apsw.NotADBError, apsw.CorruptError) as exc:
        raise CorruptCorpusError(path, f"damaged database: {exc}") from None
    finally:
        conn.close()
    meta = {cast(str, key): cast(str, value) for key, value in rows}
    return version, stored_dim(meta, path)


def _check_header(path: Path) -> None:
    """Catch non-databases and truncated files from the 100-byte header alone."""
    size = path.stat().st_size
    if size == 0:
        raise NotACorpusError(path, "empty file, not a crag-edge corpus")
    with path.open("rb") as fh:
        header = fh.read(100)
    if not header.startswith(SQLITE_HEADER):
        raise CorruptCorpusError(path, "not a SQLite database (bad file header)")
    if len(header) < 100:
        raise CorruptCorpusError(path, f"truncated: only {size} bytes")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    pages = int.from_bytes(header[28:32], "big")
    # The in-header page count is only valid when the change counters agree; a pending WAL
    # or rollback journal may legitimately hold pages the main file does not have yet.
    expected = pages * page_size
    if header[24:28] == header[92:96] and expected > size and not has_pending_journal(path):
        raise CorruptCorpusError(path, f"truncated: header declares {expected} bytes, has {size}")


def _to_json(value: Mapping[str, Any]) -> str:
    """ASCII JSON: stray surrogates in metadata are escaped instead of failing to encode."""
    return json.dumps(value, sort_keys=True)
