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

from collections.abc import Callable, Collection

from crag_edge.grading.keywords import tokenize
from crag_edge.grading.rows import names, record_columns
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


def misplaced(
    claim: str, answered: Collection[str], passage: str, held: Callable[[str], set[str]]
) -> bool:
    """Whether `passage` holds one of the claim's answer facts (`answered`) only in table
    rows where the claim does not put it: a row other than the ones it names by their
    subject, or a column other than the ones it names ("abbrev() returns 192.168.0.0/24 for
    the cidr input 192.168/24" of a row whose `cidr Output` is 192.168.0.0/24 and whose
    `abbrev(cidr)` is 192.168.0/24). A value is stated of its row and of the column it
    stands under; a sentence naming no column ("it takes 8 bytes") puts it under none.
    `held(text)`: the facts and words a text holds, as the support check reads them."""
    terms = set(tokenize(claim))
    rows = [columns for line in passage.split("\n") if (columns := record_columns(line))]
    prose = [line for line in passage.split("\n") if not record_columns(line)]
    named_rows = [columns for columns in rows if names(claim, columns[0][1])]
    in_prose = held("\n".join(prose))
    for fact in set(answered) - in_prose:
        holding = [columns for columns in rows if any(fact in held(v) for _, v in columns)]
        if holding and not any(_under_named(fact, c, terms, held) for c in named_rows or rows):
            return True
    return False


def _under_named(
    fact: str, columns: list[tuple[str, str]], terms: set[str], held: Callable[[str], set[str]]
) -> bool:
    """Whether a row holds `fact` under a column the claim (its `terms`) names by every term
    of the column's name, or holds it anywhere when the claim names none of its columns."""
    named = [bool(t := set(tokenize(name))) and t <= terms for name, _ in columns]
    cells = [fact in held(value) for _, value in columns]
    if not any(named):
        return any(cells)
    return any(n and c for n, c in zip(named, cells, strict=True))
