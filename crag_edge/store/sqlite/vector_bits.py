"""The binary pre-filter of dense search: one sign bit per dimension, hamming scan, exact rescoring.

sqlite-vec (pinned at 0.1.9) has no ANN index: its KNN reads every stored vector, 1.5 kB per
384-d chunk, seconds per query at a million chunks. `chunk_bits` keeps each chunk's
vector as sign bits (48 bytes at 384-d, 32 times less). A search takes the
`RESCORE_FACTOR * limit` chunks nearest by hamming distance and ranks them by the cosine
distance sqlite-vec computes from their full vectors, so every score is the one exact search
gives; only a chunk the bits place too far away is missed.

The rescoring reads the candidates' vectors straight from sqlite-vec's storage (its
`chunks_vec_rowids` map and `chunks_vec_vector_chunks00` blobs, one reused blob handle), not
through `vec_distance_cosine(...) WHERE rowid = ?`: each such point query opens a blob anew,
several times slower a row than reading directly (docs/measurements.md). That layout is sqlite-vec
0.1.9's, the pinned version; tests/test_prefilter.py checks every score and the vectors read
against sqlite-vec's own, so a changed layout fails there, not in a user's search.

The hamming scan runs in a Numba kernel (`kernels.hamming`) over an in-memory copy of the
bits, not in sqlite-vec: its `bit[N]` KNN keeps its top k by insertion, slow for a large k at
a million rows (docs/measurements.md, "A million chunks"). The copy follows the table by
chunk id: ids only grow (the chunks table is AUTOINCREMENT), so new chunks are appended, and a
candidate whose vector is gone (its document was deleted or replaced) makes the copy reload
once. The first search of a process loads the copy (seconds at a million chunks).

The access-group filter masks the scan to the chunks the caller may see before any candidate
is taken, as the `rowid IN (...)` constraint does in exact search.
"""

from __future__ import annotations

import json
import threading
from itertools import islice
from typing import cast

import apsw
import numpy as np

from crag_edge.kernels.hamming import hamming_nearest
from crag_edge.types import Vector

# Hamming candidates rescored per wanted hit (docs/measurements.md, "A million chunks").
RESCORE_FACTOR = 10
# Rescoring reads scattered vectors inside sqlite-vec's 1.5 MB chunk blobs, each reached by
# walking its overflow pages: memory-mapped, that walk is several times cheaper than through
# read() calls (docs/measurements.md). Set only on connections that pre-filter: large corpora.
_MMAP_BYTES = 1 << 40
_WORD_BYTES = 8
_ALL_VISIBLE = np.empty(0, dtype=np.bool_)  # `hamming_nearest`'s "no mask"


def quantize(vectors: Vector) -> np.ndarray:
    """Sign bits (1 where a value is > 0) packed as sqlite-vec's `vec_quantize_binary` packs
    them (dimension i is bit i % 8 of byte i // 8), one row of bytes per vector."""
    return np.packbits(np.asarray(vectors) > 0, axis=-1, bitorder="little")


def insert_bits(conn: apsw.Connection, chunk_id: int, vector: Vector) -> None:
    """Store one chunk's sign bits (call inside the transaction that stores its vector)."""
    conn.execute(
        "INSERT INTO chunk_bits (chunk_id, bits) VALUES (?, ?)",
        (chunk_id, quantize(vector).tobytes()),
    )


def fill_bits(conn: apsw.Connection, dim: int) -> None:
    """Quantize every stored vector into `chunk_bits`: the upgrade step of an older corpus,
    run inside its migration's transaction (a failure leaves the file as it was)."""
    rows = conn.execute("SELECT rowid, embedding FROM chunks_vec")
    while batch := list(islice(rows, 10_000)):
        matrix = np.frombuffer(b"".join(cast(bytes, blob) for _, blob in batch), np.float32)
        bits = quantize(matrix.reshape(len(batch), dim))
        conn.executemany(
            "INSERT INTO chunk_bits (chunk_id, bits) VALUES (?, ?)",
            [(rowid, row.tobytes()) for (rowid, _), row in zip(batch, bits, strict=True)],
        )


class BitIndex:
    """An in-memory copy of `chunk_bits`, one 64-bit word array per 64 dimensions."""

    def __init__(self, conn: apsw.Connection, dim: int) -> None:
        self._conn = conn
        self._dim = dim
        self._words = -(-dim // (8 * _WORD_BYTES))
        self._ids = np.empty(0, dtype=np.int64)
        self._columns = np.empty((self._words, 0), dtype=np.uint64)
        self._mapped = False
        # A service searches one corpus from several threads: the copy changes under a lock.
        self._lock = threading.Lock()

    def __len__(self) -> int:
        """Chunks in the copy once it is current (the corpus size the pre-filter tests)."""
        with self._lock:
            self._append_new()
            return len(self._ids)

    def search(
        self, query: Vector, limit: int, visible: list[int] | None
    ) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the best `limit` among the hamming-nearest
        `RESCORE_FACTOR * limit` chunks of `visible` (None: all), best first."""
        with self._lock:
            if not self._mapped:
                self._conn.execute(f"PRAGMA mmap_size = {_MMAP_BYTES}")
                self._mapped = True
            self._append_new()
            candidates = self._nearest(query, limit * RESCORE_FACTOR, visible)
        found = self._rescore(query, candidates)
        if len(found) < len(candidates):  # some were deleted: reload the copy, scan again
            with self._lock:
                self._ids = self._ids[:0]
                self._columns = self._columns[:, :0]
                self._append_new()
                candidates = self._nearest(query, limit * RESCORE_FACTOR, visible)
            found = self._rescore(query, candidates)
        return sorted(found, key=lambda hit: (-hit[1], hit[0]))[:limit]

    def _append_new(self) -> None:
        """Load the rows added since the copy was made (all of them the first time)."""
        after = int(self._ids[-1]) if len(self._ids) else 0
        rows = self._conn.execute(
            "SELECT chunk_id, bits FROM chunk_bits WHERE chunk_id > ? ORDER BY chunk_id", (after,)
        ).fetchall()
        if not rows:
            return
        width = self._words * _WORD_BYTES
        packed = b"".join(cast(bytes, bits).ljust(width, b"\0") for _, bits in rows)
        columns = np.frombuffer(packed, dtype=np.uint64).reshape(len(rows), self._words).T
        self._ids = np.concatenate([self._ids, np.array([row[0] for row in rows], np.int64)])
        self._columns = np.ascontiguousarray(np.concatenate([self._columns, columns], axis=1))

    def _nearest(self, query: Vector, count: int, visible: list[int] | None) -> np.ndarray:
        """Ids of the `count` visible chunks nearest to `query` by hamming distance."""
        width = self._words * _WORD_BYTES
        words = np.frombuffer(quantize(query).tobytes().ljust(width, b"\0"), dtype=np.uint64)
        allowed = (
            np.isin(self._ids, np.asarray(visible, dtype=np.int64))
            if visible is not None
            else _ALL_VISIBLE
        )
        return cast(np.ndarray, self._ids[hamming_nearest(self._columns, words, allowed, count)])

    def _rescore(self, query: Vector, candidates: np.ndarray) -> list[tuple[int, float]]:
        """(id, exact cosine similarity) of each candidate that still has its vector, scored
        by sqlite-vec's own `vec_distance_cosine`, so every score is exact search's."""
        if not len(candidates):
            return []
        places = self._conn.execute(
            "SELECT rowid, chunk_id, chunk_offset FROM chunks_vec_rowids "
            "WHERE rowid IN (SELECT value FROM json_each(?)) ORDER BY chunk_id, chunk_offset",
            (json.dumps(candidates.tolist()),),
        ).fetchall()
        vectors = self._read_vectors([(cast(int, c), cast(int, o)) for _, c, o in places])
        blob = np.ascontiguousarray(query, dtype=np.float32).tobytes()
        distances = self._conn.executemany(
            "SELECT vec_distance_cosine(?, ?)", [(blob, vector) for vector in vectors]
        )
        return [
            (cast(int, rowid), 1.0 - cast(float, distance))
            for (rowid, _, _), (distance,) in zip(places, distances, strict=True)
        ]

    def _read_vectors(self, places: list[tuple[int, int]]) -> list[bytes]:
        """The stored vectors at these (vector chunk, offset) places, read with one blob handle
        that moves from chunk to chunk (places sorted by chunk, so each is opened once)."""
        size = self._dim * 4
        vectors = []
        blob: apsw.Blob | None = None
        opened = None
        try:
            for chunk, offset in places:
                if blob is None:
                    blob = self._conn.blob_open(
                        "main", "chunks_vec_vector_chunks00", "vectors", chunk, False
                    )
                elif chunk != opened:
                    blob.reopen(chunk)
                opened = chunk
                blob.seek(offset * size)
                vectors.append(blob.read(size))
        finally:
            if blob is not None:
                blob.close()
        return vectors
