"""Access groups in the corpus file (`crag_edge.groups`): each document's tags, and the SQL
that keeps a caller's searches and counts to the documents it may see.

A document's groups are rows of `document_groups` (none: untagged, visible to everyone); they
die with their document. A caller's view is one SQL set of chunk ids, used as `rowid IN (...)`
by both searches. The vector search relies on sqlite-vec (pinned at 0.1.9) applying a `rowid
IN` constraint during its KNN scan, so `k` counts visible chunks only; its metadata columns
hold one scalar per row and cannot express "untagged or sharing one of these groups". FTS5
evaluates the constraint before `ORDER BY rank LIMIT`, as SQL requires. For the owner
(`groups=None`) no constraint is added: the queries are exactly the unfiltered ones.

A read-only file older than the table has no tags: all of its documents are untagged.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, cast

import apsw

from crag_edge.groups import Groups

_VISIBLE_DOCUMENTS = (
    "SELECT d.id FROM documents AS d "
    "WHERE NOT EXISTS (SELECT 1 FROM document_groups AS g WHERE g.doc_id = d.id) "
    "OR EXISTS (SELECT 1 FROM document_groups AS g WHERE g.doc_id = d.id "
    "AND g.name IN (SELECT value FROM json_each(?)))"
)
_VISIBLE_CHUNKS = f"SELECT c.id FROM chunks AS c WHERE c.doc_id IN ({_VISIBLE_DOCUMENTS})"

# A condition to AND into a query, with its parameters ("" and none: no filter).
Filter = tuple[str, tuple[Any, ...]]
NO_FILTER: Filter = ("", ())


def visible_chunks(column: str, groups: Groups, *, present: bool) -> Filter:
    """`AND <column> IN (chunks the caller may see)`, or no filter for the owner (or a file
    without tags, where every document is untagged)."""
    if groups is None or not present:
        return NO_FILTER
    return f" AND {column} IN ({_VISIBLE_CHUNKS})", (_names(groups),)


def visible_documents(column: str, groups: Groups, *, present: bool) -> Filter:
    """`AND <column> IN (documents the caller may see)`; as `visible_chunks`."""
    if groups is None or not present:
        return NO_FILTER
    return f" AND {column} IN ({_VISIBLE_DOCUMENTS})", (_names(groups),)


def visible_chunk_ids(conn: apsw.Connection, groups: Groups, *, present: bool) -> list[int] | None:
    """The ids of the chunks a caller may see, or None when every chunk is visible."""
    sql, params = visible_chunks("id", groups, present=present)
    if not sql:
        return None
    rows = conn.execute(f"SELECT id FROM chunks WHERE 1{sql}", params)
    return [cast(int, row[0]) for row in rows]


def read_groups(conn: apsw.Connection, doc_id: int, *, present: bool) -> frozenset[str]:
    """A stored document's groups (empty: untagged)."""
    if not present:
        return frozenset()
    rows = conn.execute("SELECT name FROM document_groups WHERE doc_id = ?", (doc_id,))
    return frozenset(cast(str, row[0]) for row in rows)


def write_groups(conn: apsw.Connection, doc_id: int, groups: Iterable[str]) -> None:
    """Replace a document's groups (call inside the caller's transaction)."""
    conn.execute("DELETE FROM document_groups WHERE doc_id = ?", (doc_id,))
    conn.executemany(
        "INSERT INTO document_groups (doc_id, name) VALUES (?, ?)",
        [(doc_id, name) for name in sorted(groups)],
    )


def count_rows(conn: apsw.Connection, table: str, condition: Filter) -> int:
    """Rows of `table` passing `condition` (a `visible_*` filter)."""
    sql, params = condition
    rows = conn.execute(f"SELECT count(*) FROM {table} WHERE 1{sql}", params).fetchall()
    return cast(int, rows[0][0])


def _names(groups: frozenset[str]) -> str:
    return json.dumps(sorted(groups))
