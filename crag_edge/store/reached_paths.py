"""The path ingest reached a document by, when it is not the document's own (a file named
through a link, or found under a folder named through one), in a SQLite corpus.

A document is stored under its real path; the path that led ingest to it is kept beside it,
one row of `reached_paths` that dies with its document, so that pruning the folder that
path lies in removes the document once the path no longer leads to it (`ingest.pipeline`):
otherwise no prune would ever look where it is stored. Most documents are reached by their
own path and have no row. A read-only file older than the table has none.
"""

from __future__ import annotations

from typing import cast

import apsw


def write_reached(conn: apsw.Connection, doc_id: int, path: str | None) -> None:
    """Replace a document's reached path (None: its own; call inside the caller's
    transaction)."""
    conn.execute("DELETE FROM reached_paths WHERE doc_id = ?", (doc_id,))
    if path is not None:
        conn.execute("INSERT INTO reached_paths (doc_id, path) VALUES (?, ?)", (doc_id, path))


def read_reached(conn: apsw.Connection, *, present: bool) -> dict[str, str]:
    """Each document's source -> the path it was reached by, for those reached by another."""
    if not present:
        return {}
    rows = conn.execute(
        "SELECT d.source, r.path FROM reached_paths AS r JOIN documents AS d ON d.id = r.doc_id"
    )
    return {cast(str, source): cast(str, path) for source, path in rows}
