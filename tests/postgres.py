"""A real PostgreSQL with pgvector for the tests: `pgserver` (the `postgres` extra) ships
PostgreSQL 16 and pgvector as a wheel, so `make test` needs nothing beyond PyPI.

One server per test session, on a temporary folder, reached by a Unix socket only (no TCP
port to collide with); each test module gets its own fresh database, and `postgres_url`
empties it (drops the corpus schema) before each test. PostgreSQL refuses to run as root:
pgserver then runs it as a system user `pgserver` that it creates (`useradd`) and lets read
the server's files, so CI as root needs no manual step.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from crag_edge.store.postgres.schema import SCHEMA

with warnings.catch_warnings():  # no XDG_RUNTIME_DIR in CI: pgserver falls back to /tmp
    warnings.simplefilter("ignore")
    import pgserver

_DATABASES = itertools.count()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[Any]:
    """The session's PostgreSQL server, stopped and its folder deleted at the end. Not under
    pytest's temporary folder: pytest keeps that to root alone (0700), where the server's user
    could not reach its files to stop."""
    folder = Path(tempfile.mkdtemp(prefix="crag-edge-postgres-"))
    server = pgserver.get_server(folder / "data", cleanup_mode="delete")
    try:
        yield server
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def create_database(server: Any) -> str:
    """A new, empty database on `server` (pgvector available, no corpus yet); returns its URL."""
    name = f"crag_test_{next(_DATABASES)}"
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return str(server.get_uri(name))


@pytest.fixture(scope="module")
def postgres_database(postgres_server: Any) -> str:
    """A fresh database for one test module; returns its URL."""
    return create_database(postgres_server)


@pytest.fixture
def postgres_url(postgres_database: str) -> str:
    """The module's database with no corpus in it (each test creates its own)."""
    with psycopg.connect(postgres_database, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
    return postgres_database


@pytest.fixture(params=["sqlite", "postgres"])
def corpus_location(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Where a test's corpus lives, once per backend: a new SQLite file, or an empty
    PostgreSQL database."""
    if request.param == "sqlite":
        return tmp_path / "corpus.db"
    return str(request.getfixturevalue("postgres_url"))
