"""Access groups in a PostgreSQL corpus: the same rule as `store.document_groups` (untagged
documents are visible to all, tagged ones to callers sharing a group), as SQL for psycopg.

Both searches apply the filter before their top-k: the full-text search in its WHERE clause,
the vector search by scanning exactly (`store.postgres.corpus`), since an HNSW scan filters
after it has picked its nearest candidates and could return fewer than asked.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import psycopg

from crag_edge.groups import Groups
from crag_edge.store.document_groups import NO_FILTER, Filter

_VISIBLE_DOCUMENTS = (
    "SELECT d.id FROM documents AS d "
    "WHERE NOT EXISTS (SELECT 1 FROM document_groups AS g WHERE g.doc_id = d.id) "
    "OR EXISTS (SELECT 1 FROM document_groups AS g WHERE g.doc_id = d.id "
    "AND g.name = ANY(%s))"
)
_VISIBLE_CHUNKS = f"SELECT c.id FROM chunks AS c WHERE c.doc_id IN ({_VISIBLE_DOCUMENTS})"


def visible_chunks(column: str, groups: Groups) -> Filter:
    """`AND <column> IN (chunks the caller may see)`, or no filter for the owner."""
    if groups is None:
        return NO_FILTER
    return f" AND {column} IN ({_VISIBLE_CHUNKS})", (sorted(groups),)


def visible_documents(column: str, groups: Groups) -> Filter:
    """`AND <column> IN (documents the caller may see)`; as `visible_chunks`."""
    if groups is None:
        return NO_FILTER
    return f" AND {column} IN ({_VISIBLE_DOCUMENTS})", (sorted(groups),)


def read_groups(conn: psycopg.Connection[Any], doc_id: int) -> frozenset[str]:
    """A stored document's groups (empty: untagged)."""
    rows = conn.execute("SELECT name FROM document_groups WHERE doc_id = %s", (doc_id,))
    return frozenset(str(row[0]) for row in rows)


def write_groups(conn: psycopg.Connection[Any], doc_id: int, groups: Iterable[str]) -> None:
    """Replace a document's groups (inside the caller's transaction)."""
    conn.execute("DELETE FROM document_groups WHERE doc_id = %s", (doc_id,))
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO document_groups (doc_id, name) VALUES (%s, %s)",
            [(doc_id, name) for name in sorted(groups)],
        )


def count_rows(conn: psycopg.Connection[Any], table: str, condition: Filter) -> int:
    """Rows of `table` passing `condition` (a `visible_*` filter)."""
    sql, params = condition
    row = conn.execute(f"SELECT count(*) FROM {table} WHERE true{sql}", params).fetchone()
    return int(row[0]) if row is not None else 0
