"""The path ingest reached a document by, when not its own, in a PostgreSQL corpus: the
same rows as `store.reached_paths`, as SQL for psycopg."""

from __future__ import annotations

from typing import Any

import psycopg


def write_reached(conn: psycopg.Connection[Any], doc_id: int, path: str | None) -> None:
    """Replace a document's reached path (None: its own; inside the caller's transaction)."""
    conn.execute("DELETE FROM reached_paths WHERE doc_id = %s", (doc_id,))
    if path is not None:
        conn.execute("INSERT INTO reached_paths (doc_id, path) VALUES (%s, %s)", (doc_id, path))


def read_reached(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """Each document's source -> the path it was reached by, for those reached by another."""
    rows = conn.execute(
        "SELECT d.source, r.path FROM reached_paths AS r JOIN documents AS d ON d.id = r.doc_id"
    )
    return {str(source): str(path) for source, path in rows.fetchall()}
