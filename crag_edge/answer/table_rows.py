"""A value read from a table row is stated only of that row's subject.

A table row read alone is a record: "Properties: Type specifier: unsigned long long int;
… Width in bits by data model LLP64: 64". Its cells are facts about its first cell, the
row's subject. A sentence that takes cells from such a row and names neither that subject
(nor another cell that names the row, such as a supplier) nor lets the question name it
("The width in bits by data model LLP64 is 64 bits [1]", asked about `char8_t`) borrows a
value from one row for whatever the question asked: each of its words is in the passage,
and the judge, asked whether the passage states it, says yes. The sentence is read out of
its row, and is not shown.
"""

from __future__ import annotations

import re
import unicodedata

from crag_edge.grading.keywords import tokenize
from crag_edge.ingest.formats.builder import record_cells


def unnamed_row(sentence: str, question: str, passage: str) -> bool:
    """Whether `sentence` takes a value only `passage`'s table rows hold, while neither it
    nor the `question` names any of those rows (`_naming_cells`)."""
    rows: list[list[str]] = []
    records: list[str] = []
    prose: list[str] = []
    for line in passage.split("\n"):
        cells = record_cells(line)
        if cells:
            rows.append(cells)
            records.append(line)
        elif " | " not in line:  # a table's header line ("file | content") is no prose
            prose.append(line)
    if not rows:
        return False
    in_rows = set(tokenize("\n".join(records)))  # the column names with the cells
    from_rows = set(tokenize(sentence)) & in_rows - set(tokenize("\n".join(prose)))
    if not from_rows:
        return False
    asked = f"{sentence}\n{question}"
    return not any(names(asked, cell) for cells in rows for cell in _naming_cells(cells))


def _naming_cells(cells: list[str]) -> list[str]:
    """The cells that can say which row a sentence is about: its subject, and any cell that
    is a name rather than a quantity (no digit: "Baltic Steel" names its row, "8 bytes" is
    a value many rows may share)."""
    return [cells[0], *(cell for cell in cells[1:] if not any(ch.isdigit() for ch in cell))]


def names(text: str, subject: str) -> bool:
    """Whether `text` names `subject`: its head term (`interval [ fields ] [ (p) ]` is named
    by "interval", the syntax after it aside), or, for a subject of no terms (a format
    character `q`, a prefix `!`), the subject itself as a word of its own."""
    terms = tokenize(subject)
    if terms:
        return terms[0] in set(tokenize(text))
    bare = _folded(subject).strip(" `'\"")
    if not bare:
        return True
    return re.search(rf"(?<!\w){re.escape(bare)}(?!\w)", _folded(text)) is not None


def _folded(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()
