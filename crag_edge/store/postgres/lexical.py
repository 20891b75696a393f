"""Full-text search in PostgreSQL ranked by bm25 exactly as SQLite's FTS5 ranks it.

Both backends cut text into terms with one tokenizer (`store.fts_terms`: FTS5's Porter stems of
unicode61 words without diacritics). Here each chunk's terms are postings (term, chunk, number
of occurrences in its title and text) and the chunk keeps its length in terms, as FTS5 counts
its row; a search sums bm25 (k1 = 1.2, b = 0.75, FTS5's idf with its floor: `store.view_stats`)
over the postings of the query's terms, so a term's rarity, a chunk's frequencies and its
length are FTS5's own. Each term's document frequency is counted at query time from the
postings; the number of chunks and their mean length (a scan of every chunk) are read at most
every `TOTALS_TTL_S` seconds, since bm25 barely moves with a few more chunks. Nothing is
summed at ingest, so concurrent ingests share no statistic to lock. For a caller with groups,
every statistic is of the chunks it may see (`store.view_stats`).

FTS5 reads a query term that its tokenizer cuts in several (`snake_case`) as a phrase, its
parts side by side; postings hold no positions, so here each part counts as a term of its own.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import psycopg

from crag_edge.store.document_groups import Filter
from crag_edge.store.fts_terms import frequencies, terms
from crag_edge.store.view_stats import K1, B, Totals

_BM25 = """
WITH wanted AS (
    SELECT * FROM unnest(%(terms)s::text[], %(weights)s::float8[]) AS w(term, weight)
),
hits AS (
    SELECT p.term, p.chunk_id, p.tf FROM chunk_terms AS p
    WHERE p.term = ANY(%(terms)s){visible}
),
rarity AS (
    SELECT term, greatest(
        ln((greatest(%(n)s, count(*)) - count(*) + 0.5) / (count(*) + 0.5)), 1e-6
    ) AS idf
    FROM hits GROUP BY term
)
SELECT h.chunk_id, sum(
    w.weight * r.idf * h.tf * (%(k1)s + 1)
    / (h.tf + %(k1)s * (1 - %(b)s + %(b)s * c.term_count / %(mean_length)s))
) AS score
FROM hits AS h
JOIN rarity AS r USING (term)
JOIN wanted AS w USING (term)
JOIN chunks AS c ON c.id = h.chunk_id
GROUP BY h.chunk_id
ORDER BY score DESC, h.chunk_id
LIMIT %(limit)s
"""


def chunk_terms(title: str, texts: Sequence[str]) -> list[Counter[str]]:
    """Each chunk's terms with their frequencies; the title counts in every chunk, as it
    does in FTS5's row. A chunk's length is the sum of its frequencies."""
    title_terms = frequencies(title)
    return [title_terms + frequencies(text) for text in texts]


def write_postings(
    conn: psycopg.Connection[Any], doc_id: int, counted: Sequence[Counter[str]]
) -> None:
    """The postings of a document's chunks (`counted`, by ordinal), whose rows are stored."""
    rows = [
        (ordinal, term, tf) for ordinal, terms in enumerate(counted) for term, tf in terms.items()
    ]
    conn.execute(
        "INSERT INTO chunk_terms (term, chunk_id, tf) "
        "SELECT t.term, c.id, t.tf FROM unnest(%s::int[], %s::text[], %s::int[]) "
        "AS t(ordinal, term, tf) JOIN chunks AS c ON c.doc_id = %s AND c.ordinal = t.ordinal",
        ([row[0] for row in rows], [row[1] for row in rows], [row[2] for row in rows], doc_id),
    )


def read_totals(conn: psycopg.Connection[Any], visible: Filter) -> Totals:
    """The number of visible chunks and their mean length in terms (at least 1)."""
    condition, params = visible
    row = conn.execute(
        f"SELECT count(*), greatest(coalesce(avg(term_count), 1), 1) FROM chunks "
        f"WHERE true{condition}",
        params,
    ).fetchone()
    assert row is not None  # an aggregate always returns one row
    return Totals(float(row[0]), float(row[1]), time.monotonic())


def search_bm25(
    conn: psycopg.Connection[Any],
    words: Sequence[str],
    limit: int,
    visible: Filter,
    totals: Totals,
) -> list[tuple[int, float]]:
    """(chunk id, bm25) of the best `limit` chunks holding any of the terms of `words`;
    a term that two words give (`cats`, `cat`) counts twice, as two FTS5 phrases do."""
    weights = Counter(term for word in words for term in dict.fromkeys(terms(word)))
    if not weights:
        return []
    condition, params = visible
    sql = _BM25.replace("{visible}", condition.replace("%s", "%(groups)s"))
    named: dict[str, Any] = {
        "terms": list(weights),
        "weights": [float(weight) for weight in weights.values()],
        "limit": limit,
        "n": totals.chunks,
        "mean_length": totals.mean_length,
        "k1": K1,
        "b": B,
    }
    if params:
        named["groups"] = params[0]
    found = conn.execute(sql.encode(), named).fetchall()
    return [(int(chunk_id), float(score)) for chunk_id, score in found]
