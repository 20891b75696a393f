"""The PostgreSQL corpus schema and its migrations.

Every table lives in the `crag_edge` schema, so a corpus can share a database with other
applications' tables. The tables mirror the SQLite file's (`store.sqlite.schema`): documents, chunks
with their vector (`vector(dim)`, HNSW index, cosine) and full-text postings (`chunk_terms`),
the evaluation cache, the evaluator's passage readings and access groups, each row
dying with its chunk or document. `schema_version` holds the version; `migrate` applies every
newer migration in one transaction under an advisory lock, so processes opening one database
at the same time upgrade it once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from crag_edge.store.postgres.lexical import chunk_terms, write_postings

SCHEMA = "crag_edge"
# Taken (transaction-scoped) by whoever creates or upgrades the schema.
MIGRATION_LOCK = 0x43524147

# (version, SQL, data steps that SQL cannot express, run after it in its transaction)
Migration = tuple[int, str] | tuple[int, str, Callable[[psycopg.Connection[Any]], None]]

_V1 = """
CREATE TABLE IF NOT EXISTS schema_version (version integer NOT NULL);
CREATE TABLE meta (key text PRIMARY KEY, value text NOT NULL);

CREATE TABLE documents (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    source       text NOT NULL UNIQUE,
    title        text NOT NULL DEFAULT '',
    content_hash text NOT NULL,
    text         text NOT NULL,
    metadata     jsonb NOT NULL DEFAULT '{}',
    size         bigint,
    mtime        double precision,
    ingested_at  double precision NOT NULL
);

CREATE TABLE chunks (
    id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    doc_id      bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal     integer NOT NULL,
    text        text NOT NULL,
    start_char  integer NOT NULL CHECK (start_char >= 0),
    end_char    integer NOT NULL CHECK (end_char >= start_char),
    token_count integer NOT NULL CHECK (token_count >= 0),
    metadata    jsonb NOT NULL DEFAULT '{}',
    places      jsonb NOT NULL DEFAULT '[]',
    terms       tsvector NOT NULL,
    term_count  integer NOT NULL,
    embedding   vector({dim}) NOT NULL,
    UNIQUE (doc_id, ordinal)
);
CREATE INDEX chunks_terms ON chunks USING gin (terms);
CREATE INDEX chunks_embedding ON chunks USING hnsw (embedding vector_cosine_ops);

CREATE TABLE document_groups (
    doc_id bigint NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    name   text NOT NULL CHECK (name <> ''),
    PRIMARY KEY (doc_id, name)
);
CREATE INDEX document_groups_name ON document_groups (name, doc_id);

CREATE TABLE score_cache (
    scorer     text NOT NULL,
    query_key  bytea NOT NULL,
    chunk_id   bigint NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    score      double precision NOT NULL,
    created_at double precision NOT NULL,
    PRIMARY KEY (scorer, query_key, chunk_id)
);
CREATE INDEX score_cache_chunk ON score_cache (chunk_id);

CREATE TABLE passage_vectors (
    scorer    text NOT NULL,
    chunk_id  bigint NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    vector    bytea NOT NULL,
    truncated boolean NOT NULL DEFAULT false,
    PRIMARY KEY (scorer, chunk_id)
);
CREATE INDEX passage_vectors_chunk ON passage_vectors (chunk_id);
"""

# v2: ingest job records (`store.jobs`), shared by every service replica on the corpus.
_V2 = """
CREATE TABLE jobs (
    id           text PRIMARY KEY,
    owner        text,
    replica      text NOT NULL,
    state        text NOT NULL,
    paths        text NOT NULL,
    done         integer NOT NULL DEFAULT 0,
    total        integer NOT NULL DEFAULT 0,
    current      text,
    report       text,
    error        text,
    created_at   double precision NOT NULL,
    started_at   double precision,
    finished_at  double precision,
    heartbeat_at double precision NOT NULL
);
CREATE INDEX jobs_created ON jobs (created_at);
"""

# v3: full-text terms as postings cut by FTS5's tokenizer (`store.postgres.lexical`), in place
# of a `tsvector` cut by PostgreSQL's English configuration; lengths counted as FTS5 counts.
_V3 = """
CREATE TABLE chunk_terms (
    term     text NOT NULL,
    chunk_id bigint NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    tf       integer NOT NULL CHECK (tf > 0),
    PRIMARY KEY (term, chunk_id)
);
CREATE INDEX chunk_terms_chunk ON chunk_terms (chunk_id);
DROP INDEX chunks_terms;
ALTER TABLE chunks DROP COLUMN terms;
"""


def fill_terms(conn: psycopg.Connection[Any]) -> None:
    """The postings and lengths of every stored chunk, document by document."""
    documents = conn.execute("SELECT id, title FROM documents ORDER BY id").fetchall()
    for doc_id, title in documents:
        rows = conn.execute(
            "SELECT text FROM chunks WHERE doc_id = %s ORDER BY ordinal", (doc_id,)
        ).fetchall()
        counted = chunk_terms(str(title), [str(row[0]) for row in rows])
        write_postings(conn, int(doc_id), counted)
        conn.execute(
            "UPDATE chunks AS c SET term_count = t.length "
            "FROM unnest(%s::int[]) WITH ORDINALITY AS t(length, ordinal) "
            "WHERE c.doc_id = %s AND c.ordinal = t.ordinal - 1",
            ([sum(terms.values()) for terms in counted], doc_id),
        )


# v4: the path ingest reached a document by, when not its own (`store.base.SqlCorpus.reached_by`).
_V4 = """
CREATE TABLE reached_paths (
    doc_id bigint PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
    path   text NOT NULL
);
"""

MIGRATIONS: tuple[Migration, ...] = ((1, _V1), (2, _V2), (3, _V3, fill_terms), (4, _V4))
SCHEMA_VERSION = MIGRATIONS[-1][0]


def schema_version(conn: psycopg.Connection[Any]) -> int:
    """The corpus schema's version in this database (0: no corpus yet)."""
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL", (f"{SCHEMA}.schema_version",)
    ).fetchone()
    if row is None or not row[0]:
        return 0
    version = conn.execute(f"SELECT max(version) FROM {SCHEMA}.schema_version").fetchone()
    return int(version[0]) if version is not None and version[0] is not None else 0


def migrate(
    conn: psycopg.Connection[Any], dim: int, migrations: Sequence[Migration] = MIGRATIONS
) -> int:
    """Apply every migration newer than the database's version, all or nothing; return the
    version. The caller holds `MIGRATION_LOCK` in the same transaction."""
    current = schema_version(conn)
    for version, sql, *fill in migrations:
        if version > current:
            conn.execute(f"CREATE SCHEMA IF NOT EXISTS {SCHEMA}")
            conn.execute(f"SET LOCAL search_path = {SCHEMA}, public")
            conn.execute(sql.replace("{dim}", str(int(dim))).encode())
            for step in fill:
                step(conn)
            conn.execute(f"DELETE FROM {SCHEMA}.schema_version")
            conn.execute(f"INSERT INTO {SCHEMA}.schema_version VALUES ({int(version)})")
            current = version
    return current
