"""The one way to open a SQLite connection: apsw (the stdlib build here cannot load extensions).

apsw bundles its own SQLite with FTS5, so every platform gets the same engine and the same
extension-loading path for sqlite-vec.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import apsw
import sqlite_vec

BUSY_TIMEOUT_MS = 5000
# Best-effort writes from a query (cached scores, passage readings) never wait long for an
# ingest's write lock: the value is simply not kept.
BEST_EFFORT_TIMEOUT_MS = 50


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
    `inspect_only` opens read-only and, when no journal is pending, `immutable`, so that
    looking at a file we do not own creates no -wal/-shm files beside it.
    """
    if inspect_only:
        flags = apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
        name = path.resolve().as_uri() + "?mode=ro"
        if not has_pending_journal(path):
            name += "&immutable=1"
    else:
        flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
        if create and not readonly:
            flags |= apsw.SQLITE_OPEN_CREATE
        name = str(path)
    conn = apsw.Connection(name, flags=flags)
    try:
        conn.enable_load_extension(True)
        conn.load_extension(sqlite_vec.loadable_path())
        conn.enable_load_extension(False)
        conn.set_busy_timeout(busy_timeout_ms)
        conn.execute("PRAGMA foreign_keys = ON")
        if not (readonly or inspect_only):
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
    except BaseException:
        conn.close()
        raise
    return conn


def has_pending_journal(path: Path) -> bool:
    """A -wal or -journal file may hold committed pages an immutable read would not see."""
    return any(Path(f"{path}{suffix}").exists() for suffix in ("-wal", "-journal"))


@contextmanager
def busy_timeout(conn: apsw.Connection, ms: int) -> Iterator[None]:
    """Use another busy timeout inside the block, then restore the connection's own."""
    previous = cast(int, conn.execute("PRAGMA busy_timeout").fetchall()[0][0])
    conn.set_busy_timeout(ms)
    try:
        yield
    finally:
        conn.set_busy_timeout(previous)
