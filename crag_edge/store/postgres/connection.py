"""Connections to a PostgreSQL corpus: one psycopg pool per opened corpus, and the messages
that name the database without its password.

Every connection searches the `crag_edge` schema first, knows the pgvector type, and (for a
read-only corpus) refuses writes in the server itself. Failing to reach the server is a
`CorpusError` naming the URL with its password masked, so it reads like a missing file.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool, PoolTimeout

from crag_edge.locations import redacted
from crag_edge.store.errors import CorpusError, ReadOnlyCorpusError, StorageError
from crag_edge.store.postgres.schema import SCHEMA

CONNECT_TIMEOUT_S = 10
POOL_MAX_SIZE = 8  # a service's workers and its ingest thread; PostgreSQL's default allows 100


def first_line(exc: BaseException) -> str:
    """The server's or libpq's message, first line only (the rest is a hint or context)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def connect(url: str) -> psycopg.Connection[Any]:
    """One connection for setting up (creating the extension and schema); the pool's come later,
    once the `vector` type exists."""
    try:
        return psycopg.connect(url, connect_timeout=CONNECT_TIMEOUT_S)
    except psycopg.Error as exc:
        raise CorpusError(redacted(url), f"cannot connect: {first_line(exc)}") from None


def open_pool(url: str, *, readonly: bool) -> ConnectionPool[psycopg.Connection[Any]]:
    """A pool whose connections are ready to use (see the module docstring)."""

    def configure(conn: psycopg.Connection[Any]) -> None:
        conn.execute(f"SET search_path = {SCHEMA}, public")
        if readonly:
            conn.execute("SET default_transaction_read_only = on")
        conn.commit()
        register_vector(conn)

    pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
        url,
        min_size=1,
        max_size=POOL_MAX_SIZE,
        kwargs={"connect_timeout": CONNECT_TIMEOUT_S},
        configure=configure,
        open=False,
    )
    pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
    return pool


@contextmanager
def database_faults(location: str) -> Iterator[None]:
    """The server gone, a full disk, a lost connection, a read-only server or a privilege the
    role lacks become store errors naming the database (a failed write has rolled back:
    committed data is intact)."""
    try:
        yield
    except PoolTimeout as exc:
        raise StorageError(location, f"no database connection: {first_line(exc)}") from None
    except (psycopg.OperationalError, psycopg.errors.DiskFull) as exc:
        raise StorageError(location, f"database error: {first_line(exc)}") from None
    except psycopg.errors.ReadOnlySqlTransaction as exc:
        raise ReadOnlyCorpusError(location, f"read-only: {first_line(exc)}") from None
    except psycopg.errors.InsufficientPrivilege as exc:
        raise CorpusError(location, f"not permitted: {first_line(exc)}") from None
