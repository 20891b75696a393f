"""RRF fusion and FTS5 query sanitising, against a real FTS5 table."""

from __future__ import annotations

from collections.abc import Iterator

import apsw
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crag_edge.retrieval import query_terms, rrf
from crag_edge.store.sqlite.lexical_view import match_expression

HOSTILE = [
    "NEAR(a b)",
    "a AND OR NOT b",
    '"unbalanced',
    "col:value",
    "*",
    "a*",
    "^start",
    "(((",
    ")",
    "-minus",
    "+plus",
    "'; DROP TABLE chunks; --",
    "\x00nul",
    "é ß 漢字 🙂",
    "AND",
    "OR",
    "NOT",
    "NEAR",
    '""',
    "{a b}",
    "a:b:c",
    "text:*",
    "\\",
    "\u200b",
]


@pytest.fixture(scope="module")
def fts() -> Iterator[apsw.Connection]:
    conn = apsw.Connection(":memory:")
    conn.execute(
        "CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61 remove_diacritics 2')"
    )
    conn.execute(
        "INSERT INTO t(body) VALUES ('the cat sat near the mat'), "
        "('NOT a keyword here'), ('plus minus unicode 漢字 straße')"
    )
    yield conn
    conn.close()


def run(conn: apsw.Connection, text: str) -> list[int]:
    terms = query_terms(text)
    if not terms:
        return []
    expr = match_expression(terms)
    return [
        row[0]
        for row in conn.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t)", (expr,))
    ]


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_input_is_always_a_valid_query(fts: apsw.Connection, text: str) -> None:
    run(fts, text)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_is_a_valid_query(text: str) -> None:
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(body, tokenize='porter unicode61')")
    conn.execute("INSERT INTO t(body) VALUES ('something')")
    run(conn, text)


def test_keywords_are_searched_as_words(fts: apsw.Connection) -> None:
    assert run(fts, "NOT") == [2]
    assert run(fts, "near cats") == [1]  # porter stemming applies to quoted terms too
    assert run(fts, "strasse") == [3] or run(fts, "straße") == [3]


def test_stopwords_dropped_unless_nothing_else_remains() -> None:
    assert query_terms("what is the cat") == ["cat"]
    assert query_terms("the and of") == ["the", "and", "of"]
    assert query_terms("?!  ...") == []
    assert query_terms("Cat cat CAT") == ["cat"]
    assert match_expression(['say "hi"', "or"]) == '"say ""hi""" OR "or"'


def test_rrf_scores_and_ranks() -> None:
    fused = rrf({"bm25": [(1, 9.0), (2, 5.0)], "dense": [(2, 0.9), (3, 0.8)]}, k=60)
    assert [f.item_id for f in fused] == [2, 1, 3]
    top = fused[0]
    assert top.score == pytest.approx(1 / 62 + 1 / 61)
    assert top.ranks == {"bm25": 2, "dense": 1} and top.scores == {"bm25": 5.0, "dense": 0.9}
    assert fused[1].ranks == {"bm25": 1} and "dense" not in fused[1].scores


def test_rrf_ties_break_by_best_single_rank_then_id() -> None:
    fused = rrf({"a": [(5, 1.0), (4, 0.5)], "b": [(4, 1.0), (5, 0.5)], "c": [(9, 1.0)]})
    assert [f.item_id for f in fused] == [4, 5, 9]


def test_rrf_edge_cases() -> None:
    assert rrf({}) == [] and rrf({"a": []}) == []
    dup = rrf({"a": [(1, 3.0), (1, 1.0)]})
    assert len(dup) == 1 and dup[0].ranks == {"a": 1}
    with pytest.raises(ValueError):
        rrf({"a": [(1, 1.0)]}, k=0)


@given(st.lists(st.lists(st.integers(0, 30), unique=True, max_size=15), max_size=4))
def test_rrf_properties(lists: list[list[int]]) -> None:
    ranked = {f"r{i}": [(x, 0.0) for x in items] for i, items in enumerate(lists)}
    fused = rrf(ranked)
    assert {f.item_id for f in fused} == {x for items in lists for x in items}
    scores = [f.score for f in fused]
    assert scores == sorted(scores, reverse=True)
    for f in fused:
        assert f.score == pytest.approx(sum(1 / (60 + r) for r in f.ranks.values()))
