"""What full-text search indexes and looks for: the terms of a text, cut by one tokenizer for
every backend.

The SQLite file's FTS5 index tokenizes with `TOKENIZE` (unicode61 words without diacritics,
Porter stems). The PostgreSQL corpus stores and queries the terms that same tokenizer gives,
run through apsw outside any corpus, so both backends see the same terms in a text and bm25
counts the same frequencies and lengths on either (`store.postgres.lexical`).
"""

from __future__ import annotations

import threading
from collections import Counter
from functools import cache
from typing import cast

import apsw

TOKENIZE = "porter unicode61 remove_diacritics 2"  # FTS5's `tokenize` option
_LOCK = threading.Lock()  # one tokenizer, on one in-memory connection, used by one thread at a time


def terms(text: str) -> list[str]:
    """The terms of `text` in order, as FTS5 indexes them (`Cats` and `cats` → `cat`)."""
    return [term for _, _, term in _tokens(text.encode("utf-8"))]


def term_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, term) of every term of `text`, offsets in characters: where each word a
    search matched stands, to mark it in a snippet."""
    encoded = text.encode("utf-8")
    tokens = _tokens(encoded)
    if len(encoded) == len(text):  # ASCII: bytes are characters
        return tokens
    chars = _char_offsets(text)
    return [(chars[start], chars[end], term) for start, end, term in tokens]


def _tokens(encoded: bytes) -> list[tuple[int, int, str]]:
    """(start, end, term) of every term, offsets in bytes."""
    if not encoded:
        return []
    with _LOCK:
        found = _tokenizer()(encoded, apsw.FTS5_TOKENIZE_DOCUMENT, None)
    return [cast(tuple[int, int, str], token) for token in found]


def _char_offsets(text: str) -> list[int]:
    """The character offset of every byte offset of `text` in UTF-8 (and of its end)."""
    offsets: list[int] = []
    for index, char in enumerate(text):
        offsets.extend([index] * len(char.encode("utf-8")))
    offsets.append(len(text))
    return offsets


def frequencies(*texts: str) -> Counter[str]:
    """Each term's number of occurrences over `texts` (the columns of one indexed row)."""
    counted: Counter[str] = Counter()
    for text in texts:
        counted.update(terms(text))
    return counted


@cache
def _tokenizer() -> apsw.FTS5Tokenizer:
    name, *arguments = TOKENIZE.split()
    return apsw.Connection(":memory:").fts5_tokenizer(name, arguments)
