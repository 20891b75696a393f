"""Lexical retrieval: bm25 over chunk text, from the plain terms of any user text."""

from __future__ import annotations

import re

from crag_edge.groups import CorpusView
from crag_edge.store import CorpusBackend

MAX_QUERY_TERMS = 64
_WORD = re.compile(r"\w+", re.UNICODE)
_LETTERS_AND_DIGITS = re.compile(r"[^\W_]+")
# Terms so common that OR-ing them in makes every chunk a candidate while adding almost no
# ranking signal (bm25's idf is near zero for them).
STOPWORDS = frozenset(
    """
    a an and are as at be but by for from has have he her his i if in into is it its of on
    or she so such that the their then there these they this to was we were what when where
    which who will with you your do does did can could would should not no
    """.split()  # noqa: SIM905 - a word list reads better as words
)


def query_terms(text: str) -> list[str]:
    """The words of arbitrary user text that a lexical search looks for, in order.

    Lower-cased words, stopwords dropped unless nothing else remains, duplicates removed and
    the count bounded to keep the query cheap. They are plain words: each backend turns them
    into its own query (`CorpusBackend.search_terms`), so no search syntax can reach it.
    """
    terms = [t.lower() for t in _WORD.findall(text)]
    content = [t for t in terms if t not in STOPWORDS] or terms
    return list(dict.fromkeys(content))[:MAX_QUERY_TERMS]


def mentions(corpus: CorpusBackend, word: str, view: CorpusView) -> bool:
    """Whether a chunk `view` sees holds `word`, one plain word (case
    folded, as the index holds it). A compound such as `--ignore-whitespace` is not one
    word (nor is `snake_case`): the index keeps only its parts, which a corpus may hold
    apart."""
    if _LETTERS_AND_DIGITS.fullmatch(word) is None:
        return False
    return bool(corpus.search_terms([word.lower()], 1, view=view))


def search_bm25(
    corpus: CorpusBackend, text: str, limit: int, view: CorpusView
) -> list[tuple[int, float]]:
    """(chunk id, bm25 score with higher = better), best first (only chunks `view` sees)."""
    terms = query_terms(text)
    if not terms:
        return []
    return corpus.search_terms(terms, limit, view=view)
