"""Lexical retrieval: FTS5 bm25 over chunk text, with any user text turned into a safe query."""

from __future__ import annotations

import re

from crag_edge.groups import Groups
from crag_edge.store import CorpusBackend

MAX_QUERY_TERMS = 64
_WORD = re.compile(r"\w+", re.UNICODE)
# Terms so common that OR-ing them in makes every chunk a candidate while adding almost no
# ranking signal (bm25's idf is near zero for them).
STOPWORDS = frozenset(
    """
    a an and are as at be but by for from has have he her his i if in into is it its of on
    or she so such that the their then there these they this to was we were what when where
    which who will with you your do does did can could would should not no
    """.split()  # noqa: SIM905 - a word list reads better as words
)


def fts_query(text: str) -> str | None:
    """Turn arbitrary user text into an FTS5 MATCH expression, or None when nothing is left.

    Every term is double-quoted, so FTS5 syntax in the input (quotes, `NEAR`, `AND`, `*`,
    `column:`, parentheses) is treated as plain words and can never raise a syntax error.
    Terms are OR-ed, as in classic bm25 retrieval; stopwords are dropped unless nothing else
    remains; duplicates are removed and the count is bounded to keep the query cheap.
    """
    terms = [t.lower() for t in _WORD.findall(text)]
    if not terms:
        return None
    content = [t for t in terms if t not in STOPWORDS] or terms
    unique = list(dict.fromkeys(content))[:MAX_QUERY_TERMS]
    return " OR ".join(f'"{term}"' for term in unique)


def mentions(corpus: CorpusBackend, word: str, groups: Groups = None) -> bool:
    """Whether a chunk a caller with `groups` may see holds `word`, one plain word (case
    folded, as the index holds it). A compound such as `--ignore-whitespace` is not one
    word: the index keeps only its parts, which a corpus may hold apart."""
    if _WORD.fullmatch(word) is None:
        return False
    return bool(corpus.search_fts(f'"{word.lower()}"', 1, groups=groups))


def search_bm25(
    corpus: CorpusBackend, text: str, limit: int, groups: Groups = None
) -> list[tuple[int, float]]:
    """(chunk id, bm25 score with higher = better), best first (only chunks a caller with
    `groups` may see)."""
    expression = fts_query(text)
    if expression is None:
        return []
    return corpus.search_fts(expression, limit, groups=groups)
