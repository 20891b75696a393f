"""The evaluation cache: model scores of (query, chunk) pairs, kept in the corpus file.

A cross-encoder or LLM score depends only on the model, the query and the chunk's text, so
it is stored under (scorer version, query, chunk id). Chunk ids are never reused and a row
is deleted with its chunk (foreign key, ON DELETE CASCADE): re-ingesting a changed document
or deleting it invalidates exactly its entries, nothing else. The scorer version names the
model file's sha256 (`grading.factory`), so a retrained or replaced model misses the cache.

Writes are best effort: a read-only corpus or a writer holding the lock (an ingest) means
the score is simply not kept, never a failed query.

Access groups (`crag_edge.groups`) need no part in the key. A score is computed from the
query and the chunk's own text, and it is looked up only for chunk ids among the caller's
hits, which retrieval has already limited to the documents the caller may see: a cached
score can never be served for, nor tell anything about, a chunk hidden from the caller. What
callers do share is that a (query, visible chunk) pair was scored before (`cache_hits` in a
result), i.e. that someone asked the same question.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from typing import ClassVar, cast

import apsw

from crag_edge.store.cache_key import query_key
from crag_edge.store.document_groups import NO_FILTER, Filter, count_rows
from crag_edge.store.errors import reports_storage_faults
from crag_edge.store.sqlite.connection import (
    BEST_EFFORT_FAILURES,
    BEST_EFFORT_TIMEOUT_MS,
    busy_timeout,
)


class ChunkRows:
    """A table of rows that die with their chunk, written best effort: what the evaluation
    cache and the stored passage readings (`store.sqlite.passage_vectors`) share, written once."""

    table: ClassVar[str]

    def __init__(self, conn: apsw.Connection, *, writable: bool, present: bool = True) -> None:
        """`present=False`: a read-only file older than the table (always empty)."""
        self._conn = conn
        self._writable = writable and present
        self._present = present

    def count(self, condition: Filter = NO_FILTER) -> int:
        """How many are stored (of chunks passing `condition`, a caller's view in
        `store.document_groups`)."""
        return count_rows(self._conn, self.table, condition) if self._present else 0

    def __len__(self) -> int:
        return self.count()


@reports_storage_faults
class ScoreCache(ChunkRows):
    """Get and put raw model scores for one corpus; see the module docstring."""

    table = "score_cache"

    def get(self, scorer: str, query: str, chunk_ids: Sequence[int]) -> dict[int, float]:
        """The cached scores among `chunk_ids` (absent ids were never scored or changed)."""
        if not chunk_ids or not self._present:
            return {}
        rows = self._conn.execute(
            "SELECT chunk_id, score FROM score_cache WHERE scorer = ? AND query_key = ? "
            "AND chunk_id IN (SELECT value FROM json_each(?))",
            (scorer, query_key(query), json.dumps([int(i) for i in chunk_ids])),
        ).fetchall()
        return {cast(int, chunk_id): cast(float, score) for chunk_id, score in rows}

    def put(self, scorer: str, query: str, scores: Mapping[int, float]) -> bool:
        """Keep these scores; False when they could not be written (read-only, locked, or a
        chunk deleted meanwhile), which only costs a later recomputation."""
        if not self._writable or not scores:
            return False
        key, now = query_key(query), time.time()
        try:
            with busy_timeout(self._conn, BEST_EFFORT_TIMEOUT_MS), self._conn:
                self._conn.executemany(
                    "INSERT INTO score_cache (scorer, query_key, chunk_id, score, created_at) "
                    "SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM chunks WHERE id = ?) "
                    "ON CONFLICT DO UPDATE SET score = excluded.score, "
                    "created_at = excluded.created_at",
                    [(scorer, key, int(i), float(s), now, int(i)) for i, s in scores.items()],
                )
        except BEST_EFFORT_FAILURES:
            return False
        return True

    def clear(self) -> int:
        """Delete every cached score; returns how many there were."""
        if not self._present:
            return 0
        with self._conn:
            rows = self._conn.execute("DELETE FROM score_cache RETURNING 1").fetchall()
        return len(rows)
