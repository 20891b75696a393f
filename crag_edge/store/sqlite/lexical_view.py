"""Full-text search in a SQLite corpus: the FTS5 query of a search's terms, and bm25 over a
caller's view (`store.view_stats` says why).

Each term becomes a quoted FTS5 string, the strings joined by OR, so FTS5 syntax in a term
(quotes, `NEAR`, `AND`, `*`, `column:`, parentheses) is a plain word and never an error.
FTS5's built-in `bm25()` reads its statistics from the whole table, so the per-view score is
an auxiliary function of our own, registered on every connection: `crag_view_bm25` takes the
view's size, mean length and each phrase's frequency among the visible chunks, and reads the
rest (each phrase's occurrences in the row, the row's length in tokens) from FTS5 as its
`bm25()` does. `crag_fts_length` gives a row's length, for the view's mean.

The visible filter is written `+rowid IN (...)`: with a plain `rowid IN`, SQLite drives the
query from the visible ids and runs the full-text match once per id, which made a filtered
search hundreds of times slower than an unfiltered one on SciFact's 5,183 abstracts.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import cast

import apsw

from crag_edge.store.document_groups import Filter
from crag_edge.store.view_stats import Totals, idf, term_score


def match_expression(terms: Sequence[str]) -> str:
    """The FTS5 MATCH expression for chunks holding any of `terms`, each a quoted string."""
    return " OR ".join(_quoted(term) for term in terms)


def register(conn: apsw.Connection) -> None:
    conn.register_fts5_function("crag_view_bm25", _view_bm25)
    conn.register_fts5_function("crag_fts_length", _length)


def _length(api: apsw.FTS5ExtensionApi, *_args: apsw.SQLiteValue) -> int:
    return cast(int, api.column_size(-1))


def _view_bm25(api: apsw.FTS5ExtensionApi, *args: apsw.SQLiteValue) -> float:
    """This row's bm25 from the view's statistics: its size and mean length, and how many of
    its chunks hold each phrase (a JSON list)."""
    chunks, mean_length, holding = cast(tuple[float, float, str], args)
    frequencies = json.loads(holding)
    if len(frequencies) != api.phrase_count:
        raise ValueError("the phrases of the query do not match its frequencies")
    length = api.column_size(-1)
    score = 0.0
    for phrase, df in enumerate(frequencies):
        tf = sum(len(offsets) for offsets in api.phrase_locations(phrase))
        if tf:
            score += term_score(idf(chunks, df), tf, length, mean_length)
    return score


def read_totals(conn: apsw.Connection, visible: Filter) -> Totals:
    """The number of visible chunks and their mean length in tokens, as FTS5 counts them."""
    sql, params = visible
    rows = conn.execute(
        # LIMIT -1 keeps the subquery from being flattened into the aggregate, where FTS5
        # cannot run an auxiliary function.
        "SELECT count(*), coalesce(sum(length), 0) FROM (SELECT crag_fts_length(chunks_fts) "
        f"AS length FROM chunks_fts WHERE 1{sql} LIMIT -1)",
        params,
    ).fetchall()
    chunks, tokens = cast(tuple[int, int], rows[0])
    return Totals(float(chunks), tokens / chunks if tokens else 1.0, time.monotonic())


def search_view(
    conn: apsw.Connection, terms: Sequence[str], limit: int, visible: Filter, totals: Totals
) -> list[tuple[int, float]]:
    """(chunk id, bm25 over the view), best first, of the visible chunks matching."""
    sql, params = visible
    frequencies = [
        cast(
            int,
            conn.execute(
                f"SELECT count(*) FROM chunks_fts WHERE chunks_fts MATCH ?{sql}",
                (_quoted(phrase), *params),
            ).fetchall()[0][0],
        )
        for phrase in terms
    ]
    rows = conn.execute(
        "SELECT rowid, crag_view_bm25(chunks_fts, ?, ?, ?) AS score FROM chunks_fts "
        f"WHERE chunks_fts MATCH ?{sql} ORDER BY score DESC, rowid LIMIT ?",
        (
            totals.chunks,
            totals.mean_length,
            json.dumps(frequencies),
            match_expression(terms),
            *params,
            limit,
        ),
    ).fetchall()
    return [(cast(int, rowid), cast(float, score)) for rowid, score in rows]


def _quoted(phrase: str) -> str:
    return '"' + phrase.replace('"', '""') + '"'
