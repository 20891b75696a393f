"""The binary pre-filter of dense search: one sign bit per dimension, hamming KNN, exact rescoring.

sqlite-vec (pinned at 0.1.9) has no ANN index: its KNN reads every stored vector, 1.5 kB per
384-d chunk, so past a few hundred thousand chunks a query costs hundreds of milliseconds.
`chunks_bits` keeps each chunk's vector as sign bits (48 bytes at 384-d, 32 times less to
read). A search takes the `RESCORE_FACTOR * limit` nearest chunks by hamming distance and
ranks them by their exact cosine similarity, computed by sqlite-vec from the full vectors, so
the scores are the ones exact search gives; only a chunk the bits rank too far away is missed.

The access-group filter is the same `rowid IN (...)` constraint as in exact search, applied
during the hamming scan: candidates, and so the hits, are only chunks the caller may see.
"""

from __future__ import annotations

import json
from typing import cast

import apsw
import numpy as np

from crag_edge.store.document_groups import Filter
from crag_edge.types import Vector

# Hamming candidates per wanted hit: at 10 the 1M-chunk benchmark keeps its exact top-10
# (docs/measurements.md, "A million chunks").
RESCORE_FACTOR = 10
MAX_KNN = 4096  # sqlite-vec's limit for k in one KNN query
_FILL_BATCH = 10_000

CREATE_TABLE = "CREATE VIRTUAL TABLE chunks_bits USING vec0(bits bit[{bits}])"


def bit_width(dim: int) -> int:
    """The `bit[N]` column size for `dim` dimensions: sqlite-vec wants a multiple of 8; the
    padding bits are 0 in every vector, so they never add to a hamming distance."""
    return -(-dim // 8) * 8


def quantize(vectors: Vector) -> np.ndarray:
    """Sign bits (1 where a value is > 0) packed as sqlite-vec's `vec_quantize_binary` packs
    them (dimension i is bit i % 8 of byte i // 8), one row of bytes per vector."""
    return np.packbits(np.asarray(vectors) > 0, axis=-1, bitorder="little")


def insert_bits(conn: apsw.Connection, chunk_id: int, vector: Vector) -> None:
    """Store one chunk's sign bits (call inside the transaction that stores its vector)."""
    conn.execute(
        "INSERT INTO chunks_bits (rowid, bits) VALUES (?, vec_bit(?))",
        (chunk_id, quantize(vector).tobytes()),
    )


def fill_bits(conn: apsw.Connection, dim: int) -> None:
    """Quantize every stored vector into `chunks_bits`: the upgrade step of an older corpus,
    run inside its migration's transaction (a failure leaves the file as it was)."""
    rows = conn.execute("SELECT rowid, embedding FROM chunks_vec")
    while batch := rows.fetchmany(_FILL_BATCH):
        ids = [cast(int, rowid) for rowid, _ in batch]
        matrix = np.frombuffer(b"".join(cast(bytes, blob) for _, blob in batch), np.float32)
        bits = quantize(matrix.reshape(len(ids), dim))
        conn.executemany(
            "INSERT INTO chunks_bits (rowid, bits) VALUES (?, vec_bit(?))",
            [(chunk_id, row.tobytes()) for chunk_id, row in zip(ids, bits, strict=True)],
        )


def search_prefiltered(
    conn: apsw.Connection, query: Vector, limit: int, visible: Filter
) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) of the best `limit` chunks among the hamming-nearest
    `RESCORE_FACTOR * limit` that pass `visible`, best first."""
    condition, params = visible
    candidates = [
        cast(int, row[0])
        for row in conn.execute(
            f"SELECT rowid FROM chunks_bits WHERE bits MATCH vec_bit(?) AND k = ?{condition}",
            (quantize(query).tobytes(), min(limit * RESCORE_FACTOR, MAX_KNN), *params),
        )
    ]
    rows = conn.execute(
        "SELECT rowid, vec_distance_cosine(embedding, ?) AS distance FROM chunks_vec "
        "WHERE rowid IN (SELECT value FROM json_each(?)) ORDER BY distance, rowid LIMIT ?",
        (np.ascontiguousarray(query).tobytes(), json.dumps(candidates), limit),
    ).fetchall()
    return [(cast(int, rowid), 1.0 - cast(float, distance)) for rowid, distance in rows]
