"""The one way to open a SQLite connection: apsw (the stdlib build here cannot load extensions).

apsw bundles its own SQLite with FTS5, so every platform gets the same engine and the same
extension-loading path for sqlite-vec.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import apsw
import sqlite_vec

from crag_edge.store.errors import ReadOnlyCorpusError

BUSY_TIMEOUT_MS = 5000
# Best-effort writes from a query (cached scores, passage readings) never wait long for an
# ingest's write lock: the value is simply not kept.
BEST_EFFORT_TIMEOUT_MS = 50
# What a best-effort write gives up on: a writer holding the lock, a read-only file, a chunk
# deleted meanwhile, or a full disk; the value is recomputed next time.
BEST_EFFORT_FAILURES = (
    apsw.BusyError,
    apsw.ReadOnlyError,
    apsw.ConstraintError,
    apsw.FullError,
    apsw.IOError,
)


def connect(
    path: Path,
    *,
    readonly: bool = False,
    create: bool = False,
    inspect_only: bool = False,
    busy_timeout_ms: int = BUSY_TIMEOUT_MS,
) -> apsw.Connection:
    """Open `path` with sqlite-vec loaded, foreign keys on and a busy timeout.

    Writable connections switch the file to WAL (readers never block the writer) with
    synchronous=NORMAL: each commit stays atomic, a power cut may lose only the last ones.
    A file we may not write (or in a folder we may not write, where WAL cannot keep its -shm
    file) comes back read-only: check `conn.readonly("main")`. `inspect_only` opens
    read-only and, when no journal is pending, `immutable`, so that looking at a file we do
    not own creates no -wal/-shm files beside it.
    """
    if inspect_only or readonly:
        conn = _open_for_reading(path, immutable=inspect_only)
    else:
        flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if create else 0)
        try:
            conn = _configure(apsw.Connection(str(path), flags=flags), busy_timeout_ms, write=True)
        except (apsw.ReadOnlyError, apsw.CantOpenError):
            if create:
                raise
            return _open_for_reading(path, immutable=False)
        if conn.readonly("main"):
            conn.close()
            return _open_for_reading(path, immutable=False)
    conn.set_busy_timeout(busy_timeout_ms)
    return conn


def _open_for_reading(path: Path, *, immutable: bool) -> apsw.Connection:
    """A read-only connection; in a read-only folder, where a WAL file cannot get its -shm
    index, the file is read as `immutable` (safe: nobody can be writing a WAL there)."""
    if immutable and not has_pending_journal(path):
        return _configure(_uri_connection(path, "&immutable=1"), BUSY_TIMEOUT_MS, write=False)
    conn = _configure(_uri_connection(path, ""), BUSY_TIMEOUT_MS, write=False)
    try:
        conn.execute("SELECT count(*) FROM sqlite_schema").fetchall()
    except (apsw.ReadOnlyError, apsw.CantOpenError):
        conn.close()
        if has_pending_journal(path):
            raise ReadOnlyCorpusError(
                path,
                "read-only folder and the file has unmerged writes (-wal); its owner merges "
                "them by opening it read-write once (e.g. `crag-edge query`)",
            ) from None
        return _configure(_uri_connection(path, "&immutable=1"), BUSY_TIMEOUT_MS, write=False)
    return conn


def _uri_connection(path: Path, options: str) -> apsw.Connection:
    name = path.resolve().as_uri() + "?mode=ro" + options
    return apsw.Connection(name, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)


def _configure(conn: apsw.Connection, busy_timeout_ms: int, *, write: bool) -> apsw.Connection:
    """Load sqlite-vec and set the pragmas; a connection SQLite opened read-only skips WAL."""
    try:
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        conn.enable_load_extension(False)
        conn.set_busy_timeout(busy_timeout_ms)
        conn.execute("PRAGMA foreign_keys = ON")
        if write and not conn.readonly("main"):
            _use_wal(conn, busy_timeout_ms)
            conn.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn


def _use_wal(conn: apsw.Connection, timeout_ms: int) -> None:
    """Switch the file to WAL, retrying while another connection holds it. Two connections
    opening a new (rollback-journal) file at once both hold a shared lock and both need an
    exclusive one to switch: SQLite answers one of them BUSY at once, without the busy
    handler (waiting could deadlock), and that one succeeds once the other has switched."""
    deadline = time.monotonic() + timeout_ms / 1000
    while True:
        try:
            conn.execute("PRAGMA journal_mode = WAL")
            return
        except apsw.BusyError:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.01)


def has_pending_journal(path: Path) -> bool:
    """A non-empty -wal or -journal file may hold committed pages an immutable read would
    not see."""
    for suffix in ("-wal", "-journal"):
        try:
            if Path(f"{path}{suffix}").stat().st_size > 0:
                return True
        except FileNotFoundError:  # absent, or removed meanwhile by the last writer closing
            continue
    return False


@contextmanager
def write_transaction(conn: apsw.Connection) -> Iterator[None]:
    """A transaction that takes the write lock as it begins (`BEGIN IMMEDIATE`), waiting for
    another writer under the busy timeout. A deferred one that reads before it writes reads
    a snapshot: when another process commits meanwhile, its first write fails at once with
    SQLITE_BUSY, which no waiting can cure (two processes upgrading one file both read the
    old version). Inside an open transaction it is a savepoint of that one."""
    previous = conn.transaction_mode
    conn.transaction_mode = "IMMEDIATE"
    try:
        with conn:
            conn.transaction_mode = previous
            yield
    finally:
        conn.transaction_mode = previous


@contextmanager
def busy_timeout(conn: apsw.Connection, ms: int) -> Iterator[None]:
    """Use another busy timeout inside the block, then restore the connection's own."""
    previous = cast(int, conn.execute("PRAGMA busy_timeout").fetchall()[0][0])
    conn.set_busy_timeout(ms)
    try:
        yield
    finally:
        conn.set_busy_timeout(previous)
