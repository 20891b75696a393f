"""The evaluation cache and the evaluator's passage readings in a PostgreSQL corpus.

Same keys, lifetimes and best-effort rule as the SQLite tables (`store.sqlite.score_cache`,
`store.sqlite.passage_vectors`): rows die with their chunk, and a query's write gives up after
`BEST_EFFORT_LOCK_MS` of waiting for a lock (an ingest replacing that chunk) or when the chunk
was deleted meanwhile, which costs only a later recomputation.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, ClassVar

import numpy as np
import psycopg

from crag_edge.store.cache_key import query_key
from crag_edge.store.document_groups import NO_FILTER, Filter, count_rows
from crag_edge.types import EncodedPassage

Connect = Callable[[], AbstractContextManager[psycopg.Connection[Any]]]
BEST_EFFORT_LOCK_MS = 50
# What a best-effort write gives up on: a lock held by a writer, a read-only corpus, a chunk
# deleted meanwhile, a concurrent writer of the same row.
BEST_EFFORT_FAILURES = (
    psycopg.errors.LockNotAvailable,
    psycopg.errors.ReadOnlySqlTransaction,
    psycopg.errors.ForeignKeyViolation,
    psycopg.errors.SerializationFailure,
    psycopg.errors.DeadlockDetected,
)


def _best_effort(
    connect: Connect, sql: str, rows: Sequence[tuple[Any, ...]], *, wait: bool = False
) -> bool:
    """Run `sql` for every row in one transaction; False when it gave up (see above)."""
    try:
        with connect() as conn, conn.transaction():
            if not wait:
                conn.execute(f"SET LOCAL lock_timeout = '{BEST_EFFORT_LOCK_MS}ms'")
            with conn.cursor() as cur:
                cur.executemany(sql, rows)
    except BEST_EFFORT_FAILURES:
        if wait:
            raise
        return False
    return True


class PostgresChunkRows:
    """A table of rows that die with their chunk, written best effort: what the evaluation
    cache and the passage readings share, as `store.sqlite.score_cache.ChunkRows` on SQLite."""

    table: ClassVar[str]

    def __init__(self, connect: Connect, *, writable: bool) -> None:
        self._connect = connect
        self._writable = writable

    def count(self, condition: Filter = NO_FILTER) -> int:
        with self._connect() as conn:
            return count_rows(conn, self.table, condition)

    def _read(self, sql: str, params: tuple[Any, ...]) -> list[Any]:
        """The rows of one query, on a connection of its own for just that long."""
        with self._connect() as conn:
            return conn.execute(sql, params).fetchall()

    def __len__(self) -> int:
        return self.count()


class PostgresScoreCache(PostgresChunkRows):
    """Get and put raw model scores (`store.sqlite.score_cache` describes the rules)."""

    table = "score_cache"

    def get(self, scorer: str, query: str, chunk_ids: Sequence[int]) -> dict[int, float]:
        if not chunk_ids:
            return {}
        rows = self._read(
            "SELECT chunk_id, score FROM score_cache WHERE scorer = %s AND query_key = %s "
            "AND chunk_id = ANY(%s)",
            (scorer, query_key(query), [int(i) for i in chunk_ids]),
        )
        return {int(chunk_id): float(score) for chunk_id, score in rows}

    def put(self, scorer: str, query: str, scores: Mapping[int, float]) -> bool:
        if not self._writable or not scores:
            return False
        key, now = query_key(query), time.time()
        return _best_effort(
            self._connect,
            "INSERT INTO score_cache (scorer, query_key, chunk_id, score, created_at) "
            "SELECT %s, %s, %s, %s, %s WHERE EXISTS (SELECT 1 FROM chunks WHERE id = %s) "
            "ON CONFLICT (scorer, query_key, chunk_id) DO UPDATE SET score = excluded.score, "
            "created_at = excluded.created_at",
            [(scorer, key, int(i), float(s), now, int(i)) for i, s in scores.items()],
        )

    def clear(self) -> int:
        with self._connect() as conn:
            return conn.execute("DELETE FROM score_cache").rowcount


class PostgresPassageVectors(PostgresChunkRows):
    """Get and put encoded passages (`store.sqlite.passage_vectors` describes the rules)."""

    table = "passage_vectors"

    def get(self, scorer: str, chunk_ids: Sequence[int]) -> dict[int, EncodedPassage]:
        if not chunk_ids:
            return {}
        rows = self._read(
            "SELECT chunk_id, vector, truncated FROM passage_vectors "
            "WHERE scorer = %s AND chunk_id = ANY(%s)",
            (scorer, [int(i) for i in chunk_ids]),
        )
        return {
            int(chunk_id): EncodedPassage(np.frombuffer(bytes(blob), dtype=np.float32), truncated)
            for chunk_id, blob, truncated in rows
        }

    def put(
        self, scorer: str, passages: Mapping[int, EncodedPassage], *, wait: bool = False
    ) -> bool:
        if not self._writable or not passages:
            return False
        rows = [
            (scorer, int(i), np.asarray(p.vector, dtype=np.float32).tobytes(), p.truncated, int(i))
            for i, p in passages.items()
        ]
        return _best_effort(
            self._connect,
            "INSERT INTO passage_vectors (scorer, chunk_id, vector, truncated) "
            "SELECT %s, %s, %s, %s WHERE EXISTS (SELECT 1 FROM chunks WHERE id = %s) "
            "ON CONFLICT (scorer, chunk_id) DO UPDATE SET vector = excluded.vector, "
            "truncated = excluded.truncated",
            rows,
            wait=wait,
        )

    def missing(self, scorer: str) -> list[int]:
        rows = self._read(
            "SELECT id FROM chunks AS c WHERE NOT EXISTS (SELECT 1 FROM passage_vectors AS p "
            "WHERE p.scorer = %s AND p.chunk_id = c.id) ORDER BY id",
            (scorer,),
        )
        return [int(row[0]) for row in rows]

    def drop_others(self, scorer: str) -> int:
        if not self._writable:
            return 0
        with self._connect() as conn:
            return conn.execute(
                "DELETE FROM passage_vectors WHERE scorer <> %s", (scorer,)
            ).rowcount
