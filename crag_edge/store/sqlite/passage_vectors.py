"""Stored passage readings of the evaluator (`models.segment_scorer`), kept in the corpus file.

A segment scorer's reading of a chunk (a float32 vector) depends only on the model and the
chunk's text, so it is computed once, at ingest or when a chunk is first graded, and stored
under (scorer version, chunk id). As in the evaluation cache (`store.sqlite.score_cache`), a row
dies with its chunk and the scorer version names the model file's hash, so a changed
document or a replaced model can never serve a stale vector. Writes are best effort: a
read-only corpus or a busy writer only means the vector is computed again next time.
As for cached scores, access groups need no part in the key: a reading depends on the chunk
alone and is looked up only for the caller's hits, already limited to what it may see.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from typing import cast

import numpy as np

from crag_edge.store.errors import reports_storage_faults
from crag_edge.store.sqlite.connection import (
    BEST_EFFORT_FAILURES,
    BEST_EFFORT_TIMEOUT_MS,
    busy_timeout,
)
from crag_edge.store.sqlite.score_cache import ChunkRows
from crag_edge.types import EncodedPassage


@reports_storage_faults
class PassageVectors(ChunkRows):
    """Get and put encoded passages for one corpus; see the module docstring."""

    table = "passage_vectors"

    def get(self, scorer: str, chunk_ids: Sequence[int]) -> dict[int, EncodedPassage]:
        """The stored readings among `chunk_ids` (absent ids were never encoded)."""
        if not chunk_ids or not self._present:
            return {}
        rows = self._conn.execute(
            "SELECT chunk_id, vector, truncated FROM passage_vectors WHERE scorer = ? "
            "AND chunk_id IN (SELECT value FROM json_each(?))",
            (scorer, json.dumps([int(i) for i in chunk_ids])),
        ).fetchall()
        return {
            cast(int, chunk_id): EncodedPassage(
                np.frombuffer(cast(bytes, blob), dtype=np.float32), bool(truncated)
            )
            for chunk_id, blob, truncated in rows
        }

    def put(
        self, scorer: str, passages: Mapping[int, EncodedPassage], *, wait: bool = False
    ) -> bool:
        """Keep these readings; False when they could not be written (read-only, locked, or
        a chunk deleted meanwhile). `wait`: an ingest may wait for the lock like any write."""
        if not self._writable or not passages:
            return False
        rows = [
            (scorer, int(i), np.asarray(p.vector, dtype=np.float32).tobytes(), int(p.truncated))
            for i, p in passages.items()
        ]
        lock_wait = nullcontext() if wait else busy_timeout(self._conn, BEST_EFFORT_TIMEOUT_MS)
        try:
            with lock_wait, self._conn:
                self._conn.executemany(
                    "INSERT INTO passage_vectors (scorer, chunk_id, vector, truncated) "
                    "SELECT ?1, ?2, ?3, ?4 WHERE EXISTS (SELECT 1 FROM chunks WHERE id = ?2) "
                    "ON CONFLICT DO UPDATE SET vector = excluded.vector, "
                    "truncated = excluded.truncated",
                    rows,
                )
        except BEST_EFFORT_FAILURES:
            if wait:
                raise
            return False
        return True

    def missing(self, scorer: str) -> list[int]:
        """Chunk ids with no reading by `scorer`, ascending: what an ingest still has to encode."""
        if not self._present:
            return []
        rows = self._conn.execute(
            "SELECT id FROM chunks WHERE id NOT IN "
            "(SELECT chunk_id FROM passage_vectors WHERE scorer = ?) ORDER BY id",
            (scorer,),
        ).fetchall()
        return [cast(int, row[0]) for row in rows]

    def drop_others(self, scorer: str) -> int:
        """Delete the readings of every other scorer version (a replaced or retrained model);
        returns how many there were."""
        if not self._writable:
            return 0
        with self._conn:
            rows = self._conn.execute(
                "DELETE FROM passage_vectors WHERE scorer != ? RETURNING 1", (scorer,)
            ).fetchall()
        return len(rows)
