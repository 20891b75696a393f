"""Versioned schema: ordered migrations, `PRAGMA user_version` as the version, an application id.

Migration SQL may use `{dim}`, replaced by the corpus's embedding dimension (the vec0 column
type needs it literally); a migration may add a data step that SQL cannot express. Pending
migrations run in one transaction with the version bump, so a failed upgrade leaves the file
exactly as it was; it holds the write lock from the start, so a second process opening the
file meanwhile waits and then finds it upgraded.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import cast

import apsw

from crag_edge.store.sqlite.connection import write_transaction
from crag_edge.store.sqlite.vector_bits import fill_bits

# "CRAG" in ASCII: lets us tell our files from any other SQLite database without guessing.
APPLICATION_ID = 0x43524147

# A migration's data step (after its SQL, in the same transaction), given the vector dimension.
Backfill = Callable[[apsw.Connection, int], None]
Migration = tuple[int, str] | tuple[int, str, Backfill]

_V1 = """
CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) WITHOUT ROWID;

CREATE TABLE documents (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    source       TEXT NOT NULL UNIQUE,
    title        TEXT NOT NULL DEFAULT '',
    content_hash TEXT NOT NULL,
    text         TEXT NOT NULL,
    metadata     TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
    size         INTEGER,
    mtime        REAL,
    ingested_at  REAL NOT NULL
);

CREATE TABLE chunks (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    doc_id      INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal     INTEGER NOT NULL,
    text        TEXT NOT NULL,
    start_char  INTEGER NOT NULL CHECK (start_char >= 0),
    end_char    INTEGER NOT NULL CHECK (end_char >= start_char),
    token_count INTEGER NOT NULL CHECK (token_count >= 0),
    metadata    TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(metadata)),
    UNIQUE (doc_id, ordinal)
);

CREATE VIRTUAL TABLE chunks_fts USING fts5(
    title, text,
    content = '', contentless_delete = 1,
    tokenize = 'porter unicode61 remove_diacritics 2'
);

CREATE VIRTUAL TABLE chunks_vec USING vec0(embedding float[{dim}] distance_metric=cosine);

CREATE TRIGGER chunks_fts_insert AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_fts (rowid, title, text)
    VALUES (new.id, (SELECT title FROM documents WHERE id = new.doc_id), new.text);
END;

CREATE TRIGGER chunks_index_delete AFTER DELETE ON chunks BEGIN
    DELETE FROM chunks_fts WHERE rowid = old.id;
    DELETE FROM chunks_vec WHERE rowid = old.id;
END;
"""

# v2: the evaluation cache (`store.sqlite.score_cache`). A row belongs to a chunk and dies with it,
# so a changed or deleted document can never serve a stale score.
_V2 = """
CREATE TABLE score_cache (
    scorer     TEXT NOT NULL,
    query_key  BLOB NOT NULL,
    chunk_id   INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    score      REAL NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (scorer, query_key, chunk_id)
) WITHOUT ROWID;

CREATE INDEX score_cache_chunk ON score_cache (chunk_id);
"""

# v3: stored passage readings of a segment-scorer evaluator (`store.sqlite.passage_vectors`), one
# per (evaluator version, chunk); they die with their chunk, as cached scores do.
_V3 = """
CREATE TABLE passage_vectors (
    scorer    TEXT NOT NULL,
    chunk_id  INTEGER NOT NULL REFERENCES chunks(id) ON DELETE CASCADE,
    vector    BLOB NOT NULL,
    truncated INTEGER NOT NULL DEFAULT 0 CHECK (truncated IN (0, 1)),
    PRIMARY KEY (scorer, chunk_id)
) WITHOUT ROWID;

CREATE INDEX passage_vectors_chunk ON passage_vectors (chunk_id);
"""

# v4: where each chunk stands in its document, for citations (`crag_edge.citations`): the
# place (page, heading path) in effect at its start and every one that begins inside it, as
# JSON `[[offset, page, section], ...]`. Chunks of a v3 file get `[]`: they cite no place.
_V4 = """
ALTER TABLE chunks ADD COLUMN places TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(places));
"""

# v5: access groups (`crag_edge.groups`, `store.document_groups`): one row per document and
# group, dying with the document. Documents of a v4 file get none: untagged, visible to all.
_V5 = """
CREATE TABLE document_groups (
    doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    name   TEXT NOT NULL CHECK (name <> ''),
    PRIMARY KEY (doc_id, name)
) WITHOUT ROWID;

CREATE INDEX document_groups_name ON document_groups (name, doc_id);
"""

# v6: each chunk's vector as sign bits, the binary pre-filter of dense search on large corpora
# (`store.sqlite.vector_bits`); they die with their chunk. The upgrade of a v5 file quantizes every
# stored vector while it opens read-write, in the migration's transaction.
_V6 = """
CREATE TABLE chunk_bits (
    chunk_id INTEGER PRIMARY KEY REFERENCES chunks(id) ON DELETE CASCADE,
    bits     BLOB NOT NULL
);
"""

# v7: ingest job records (`store.jobs`), so that every service replica on a corpus sees every
# job and a job whose replica died reads as failed.
_V7 = """
CREATE TABLE jobs (
    id           TEXT PRIMARY KEY,
    owner        TEXT,
    replica      TEXT NOT NULL,
    state        TEXT NOT NULL,
    paths        TEXT NOT NULL CHECK (json_valid(paths)),
    done         INTEGER NOT NULL DEFAULT 0,
    total        INTEGER NOT NULL DEFAULT 0,
    current      TEXT,
    report       TEXT CHECK (report IS NULL OR json_valid(report)),
    error        TEXT,
    created_at   REAL NOT NULL,
    started_at   REAL,
    finished_at  REAL,
    heartbeat_at REAL NOT NULL
) WITHOUT ROWID;

CREATE INDEX jobs_created ON jobs (created_at);
"""

# v8: the path ingest reached a document by, when not its own (`SqlCorpus.reached_by`): a file
# named through a link, a folder named through one. Documents of a v7 file have none.
_V8 = """
CREATE TABLE reached_paths (
    doc_id INTEGER PRIMARY KEY REFERENCES documents(id) ON DELETE CASCADE,
    path   TEXT NOT NULL
);
"""

MIGRATIONS: tuple[Migration, ...] = (
    (1, _V1),
    (2, _V2),
    (3, _V3),
    (4, _V4),
    (5, _V5),
    (6, _V6, fill_bits),
    (7, _V7),
    (8, _V8),
)
SCORE_CACHE_VERSION = 2
PASSAGE_VECTORS_VERSION = 3
PLACES_VERSION = 4
GROUPS_VERSION = 5
BITS_VERSION = 6
JOBS_VERSION = 7
REACHED_VERSION = 8
SCHEMA_VERSION = MIGRATIONS[-1][0]


def user_version(conn: apsw.Connection) -> int:
    """The schema version recorded in the file header (0 for a new database)."""
    return cast(int, conn.execute("PRAGMA user_version").fetchall()[0][0])


def migrate(conn: apsw.Connection, dim: int, migrations: Sequence[Migration] = MIGRATIONS) -> int:
    """Apply every migration newer than the file's version, all or nothing; return the version."""
    versions = [migration[0] for migration in migrations]
    if versions != sorted(set(versions)):
        raise ValueError(f"migrations must have strictly increasing versions, got {versions}")
    with write_transaction(conn):
        current = user_version(conn)
        for version, sql, *backfill in migrations:
            if version > current:
                conn.execute(sql.replace("{dim}", str(int(dim))))
                for step in backfill:
                    step(conn, dim)
                conn.execute(f"PRAGMA user_version = {int(version)}")
                current = version
        conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    return current
