"""Full-text search in PostgreSQL ranked by bm25, as SQLite's FTS5 ranks it.

PostgreSQL's own rankings (`ts_rank`, `ts_rank_cd`) weigh a term by its frequency in the
chunk but not by its rarity in the corpus, so a query's common words would drown its rare
ones. Here the GIN index finds the chunks holding any query term and bm25 (k1 = 1.2,
b = 0.75, FTS5's idf with its floor) scores them from each chunk's stored term frequencies
(`tsvector` positions, only the query's lexemes unpacked) and length in words (`term_count`,
stopwords included, as FTS5 counts them). Each term's document frequency is read at query
time from the index; the corpus size and mean length (a scan of every chunk) are read at most
every `TOTALS_TTL_S` seconds, since bm25 barely moves with a few more chunks. Nothing is
maintained at ingest, so concurrent ingests share no statistic to lock. For a caller with
groups, every statistic is of the chunks it may see (`store.view_stats`).
"""

from __future__ import annotations

import re
import time
from typing import Any

import psycopg

from crag_edge.store.document_groups import Filter
from crag_edge.store.view_stats import Totals, phrases

TEXT_SEARCH_CONFIG = "english"  # Snowball stemming and stopwords, as FTS5's porter tokenizer
_WORD = re.compile(r"\w+", re.UNICODE)

_BM25 = """
WITH wanted AS (
    SELECT t.lexeme, quote_literal(t.lexeme)::tsquery AS query
    FROM unnest(%(lexemes)s::text[]) AS t(lexeme)
),
totals AS (SELECT %(n)s::float8 AS n, %(mean_length)s::float8 AS mean_length),
rarity AS (
    SELECT wanted.lexeme,
        greatest(ln((greatest(totals.n, df.n) - df.n + 0.5) / (df.n + 0.5)), 1e-6) AS idf
    FROM wanted CROSS JOIN totals
    CROSS JOIN LATERAL (
        SELECT count(*)::float8 AS n FROM chunks AS c WHERE c.terms @@ wanted.query{visible}
    ) AS df
),
matches AS (
    SELECT id, terms, term_count FROM chunks
    WHERE terms @@ (SELECT string_agg(quote_literal(lexeme), ' | ')::tsquery FROM wanted){visible}
)
SELECT m.id, sum(
    r.idf * f.tf * 2.2 / (f.tf + 1.2 * (0.25 + 0.75 * m.term_count / totals.mean_length))
) AS score
FROM matches AS m CROSS JOIN totals
CROSS JOIN LATERAL unnest(ts_filter(setweight(m.terms, 'A', %(lexemes)s), '{a}'))
    AS u(lexeme, positions, labels)
JOIN rarity AS r ON r.lexeme = u.lexeme
CROSS JOIN LATERAL (SELECT coalesce(array_length(u.positions, 1), 1)::float8 AS tf) AS f
GROUP BY m.id
ORDER BY score DESC, m.id
LIMIT %(limit)s
"""


def query_words(match_expr: str) -> str:
    """The words of an FTS5 expression as `retrieval.lexical.fts_query` writes it (quoted
    terms joined by OR); an unquoted expression gives its words, operators excepted."""
    return " ".join(phrases(match_expr))


def term_count(title: str, text: str) -> int:
    """A chunk's length in words as FTS5 counts it (title and text, stopwords included)."""
    return len(_WORD.findall(title)) + len(_WORD.findall(text))


def read_totals(conn: psycopg.Connection[Any], visible: Filter) -> Totals:
    """The number of visible chunks and their mean length in words (at least 1)."""
    condition, params = visible
    row = conn.execute(
        f"SELECT count(*), greatest(coalesce(avg(term_count), 1), 1) FROM chunks "
        f"WHERE true{condition}",
        params,
    ).fetchone()
    assert row is not None  # an aggregate always returns one row
    return Totals(float(row[0]), float(row[1]), time.monotonic())


def search_bm25(
    conn: psycopg.Connection[Any], match_expr: str, limit: int, visible: Filter, totals: Totals
) -> list[tuple[int, float]]:
    """(chunk id, bm25) of the best `limit` chunks holding any of the expression's terms."""
    rows = conn.execute(
        "SELECT DISTINCT lexeme FROM unnest(to_tsvector(%s::regconfig, %s))",
        (TEXT_SEARCH_CONFIG, query_words(match_expr)),
    ).fetchall()
    lexemes = sorted(str(row[0]) for row in rows)
    if not lexemes:
        return []
    condition, params = visible
    sql = _BM25.replace("{visible}", condition.replace("%s", "%(groups)s"))
    named: dict[str, Any] = {
        "lexemes": lexemes,
        "limit": limit,
        "n": totals.chunks,
        "mean_length": totals.mean_length,
    }
    if params:
        named["groups"] = params[0]
    found = conn.execute(sql.encode(), named).fetchall()
    return [(int(chunk_id), float(score)) for chunk_id, score in found]
