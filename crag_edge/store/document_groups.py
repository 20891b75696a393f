"""Access groups in a corpus (`crag_edge.groups`), for both backends: each document's tags,
and the SQL that keeps a caller's searches and counts to the documents it may see.

A document's groups are rows of `document_groups` (none: untagged, visible to everyone); they
die with their document. A caller's view is one SQL set of chunk ids, ANDed into a query as
`<column> IN (...)` before its top-k: in SQLite, FTS5 evaluates it before `ORDER BY rank
LIMIT`, and the vector search relies on sqlite-vec (pinned at 0.1.9) applying a `rowid IN`
constraint during its KNN scan, so `k` counts visible chunks only (its metadata columns hold
one scalar per row and cannot express "untagged or sharing one of these groups"); PostgreSQL
scans exactly for such a caller (`store.postgres.corpus`), since an HNSW scan filters after
choosing its candidates. For the owner (`CorpusView.everything()`) no constraint is added:
the queries are exactly the unfiltered ones. Anything but a `CorpusView` is a TypeError
here, where every search, count and listing of both backends derives its filter.

A read-only SQLite file older than the table has no tags (`present=False`): all of its
documents are untagged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from crag_edge.groups import CorpusView, checked_view
from crag_edge.store.dialect import Dialect, Executes

_VISIBLE_DOCUMENTS = (
    "SELECT d.id FROM documents AS d "
    "WHERE NOT EXISTS (SELECT 1 FROM document_groups AS g WHERE g.doc_id = d.id) "
    "OR EXISTS (SELECT 1 FROM document_groups AS g WHERE g.doc_id = d.id AND g.name ANY_OF)"
)
_VISIBLE_CHUNKS = f"SELECT c.id FROM chunks AS c WHERE c.doc_id IN ({_VISIBLE_DOCUMENTS})"

# A condition to AND into a query, with its parameters ("" and none: no filter).
Filter = tuple[str, tuple[Any, ...]]
NO_FILTER: Filter = ("", ())


def visible_chunks(
    dialect: Dialect, column: str, view: CorpusView, *, present: bool = True
) -> Filter:
    """`AND <column> IN (chunks the caller may see)`, or no filter for the owner (or a file
    without tags, where every document is untagged)."""
    return _visible(dialect, column, _VISIBLE_CHUNKS, view, present)


def visible_documents(
    dialect: Dialect, column: str, view: CorpusView, *, present: bool = True
) -> Filter:
    """`AND <column> IN (documents the caller may see)`; as `visible_chunks`."""
    return _visible(dialect, column, _VISIBLE_DOCUMENTS, view, present)


def _visible(
    dialect: Dialect, column: str, visible: str, view: CorpusView, present: bool
) -> Filter:
    groups = checked_view(view).groups
    if groups is None or not present:
        return NO_FILTER
    return dialect.sql(f" AND {column} IN ({visible})"), (dialect.as_list(sorted(groups)),)


def read_groups(conn: Executes, dialect: Dialect, doc_id: int) -> frozenset[str]:
    """A stored document's groups (empty: untagged)."""
    rows = conn.execute(
        dialect.sql("SELECT name FROM document_groups WHERE doc_id = ?"), (doc_id,)
    ).fetchall()
    return frozenset(str(row[0]) for row in rows)


def write_groups(conn: Executes, dialect: Dialect, doc_id: int, groups: Iterable[str]) -> None:
    """Replace a document's groups (call inside the caller's transaction)."""
    conn.execute(dialect.sql("DELETE FROM document_groups WHERE doc_id = ?"), (doc_id,))
    for name in sorted(groups):
        conn.execute(
            dialect.sql("INSERT INTO document_groups (doc_id, name) VALUES (?, ?)"),
            (doc_id, name),
        )


def count_rows(conn: Executes, table: str, condition: Filter) -> int:
    """Rows of `table` passing `condition` (a `visible_*` filter)."""
    sql, params = condition
    rows = conn.execute(f"SELECT count(*) FROM {table} WHERE true{sql}", params).fetchall()
    return int(rows[0][0])


def visible_chunk_ids(
    conn: Executes, dialect: Dialect, view: CorpusView, *, present: bool = True
) -> list[int] | None:
    """The ids of the chunks a caller may see, or None when every chunk is visible."""
    sql, params = visible_chunks(dialect, "id", view, present=present)
    if not sql:
        return None
    rows = conn.execute(f"SELECT id FROM chunks WHERE true{sql}", params).fetchall()
    return [int(row[0]) for row in rows]
