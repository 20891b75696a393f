"""Which table rows a text names.

A table row read alone is a record ("Table 8.21. Network Address Types — Name: macaddr8;
Storage Size: 8 bytes; …"; `ingest.formats.builder.record`): its cells are facts about its
first cell, the row's subject. A question names a row by that subject ("How many bytes does
the macaddr8 type use?"), and an answer's sentence states a row's value only of the row it
names (`answer.table_rows`). The grading's cheaper tiers read a run of cells as noise, so a
passage holding a row the question names is read by the judge (`grading.cascade`).
"""

from __future__ import annotations

import re
import unicodedata

from crag_edge.grading.keywords import tokenize
from crag_edge.ingest.formats.builder import record_cells

# A table's caption before its first column's name in a record ("Table 8.22. cidr Type Input
# Examples — cidr Input: 192.168/24"; `rows_as_records`).
CAPTION_DASH = " \u2014 "


def names_a_row(text: str, passage: str) -> bool:
    """Whether `text` names the subject of one of `passage`'s table rows."""
    return any(
        names(text, cells[0]) for line in passage.split("\n") if (cells := record_cells(line))
    )


def names_a_row_by_identifier(text: str, passage: str) -> bool:
    """Whether `text` names, whole, the subject of one of `passage`'s table rows that is an
    identifier (`identifier`): "How deep is the water at berth B7?" of `Berth: B7; Length:
    18 m; Depth: 4.4 m`."""
    return any(
        identifier(cells[0]) and names_whole(text, cells[0])
        for line in passage.split("\n")
        if (cells := record_cells(line))
    )


def identifier(subject: str) -> bool:
    """Whether a row's subject is an identifier rather than a word: it holds a digit, a `%`
    or an `_`, or no letter at all (B7, macaddr8, cp862, %z, !). A word ("poisson",
    "Slipway haul-out") names many things a question may ask about; an identifier names
    its row."""
    return any(c.isdigit() or c in "%_" for c in subject) or not any(c.isalpha() for c in subject)


def names_whole(text: str, subject: str) -> bool:
    """Whether `text` names a row's subject by every term of it, or, for a subject of no
    terms (a symbol), as a word of its own."""
    terms = set(tokenize(subject))
    return terms <= set(tokenize(text)) if terms else names(text, subject)


def names(text: str, subject: str) -> bool:
    """Whether `text` names `subject`: its head term (`interval [ fields ] [ (p) ]` is named
    by "interval", the syntax after it aside), or, for a subject of no terms (a format
    character `q`, a prefix `!`), the subject itself as a word of its own."""
    terms = tokenize(subject)
    if terms:
        return terms[0] in set(tokenize(text))
    bare = subject.strip(" `'\"")
    return not bare or writes(text, bare)


def writes(text: str, word: str) -> bool:
    """Whether `text` writes `word` whole, as a word of its own (case and Unicode forms
    aside): "zstd" in "zstd(1), zstdcat(1)", not "192.168/24" in "192.168.0/24"."""
    bare = _folded(word).strip()
    return re.search(rf"(?<!\w){re.escape(bare)}(?!\w)", _folded(text)) is not None


def _folded(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def record_columns(line: str) -> list[tuple[str, str]]:
    """A record's (column name, value) pairs in order, [] when `line` is no record
    (`record_cells`); the first column's name without the table's caption before it."""
    cells = record_cells(line)
    if not cells:
        return []
    fields = line.split("; ")
    first = fields[0].rpartition(": ")[0]
    first = first.rpartition(": ")[2].rpartition(CAPTION_DASH)[2]
    headers = [first, *(field.partition(": ")[0] for field in fields[1:])]
    return list(zip(headers, cells, strict=True))
