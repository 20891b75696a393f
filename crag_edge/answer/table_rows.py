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
from dataclasses import dataclass

from crag_edge.grading.keywords import tokenize
from crag_edge.grading.rows import names, names_whole, record_columns, writes
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


def other_row(sentence: str, question: str, passage: str) -> str | None:
    """The subject of a row of `passage`'s tables that `sentence` speaks of when the
    question asks about other rows of them: asked how many bytes a bigint takes, "A smallint
    takes 2 bytes" is the table's own words and answers nothing asked. None when the
    question names no row whole, or the sentence names one it names (or none)."""
    subjects = [cells[0] for line in passage.split("\n") if (cells := record_cells(line))]
    asked = {subject for subject in subjects if names_whole(question, subject)}
    said = [subject for subject in subjects if names_whole(sentence, subject)]
    if not asked or not said or asked.intersection(said):
        return None
    return said[0]


def _naming_cells(cells: list[str]) -> list[str]:
    """The cells that can say which row a sentence is about: its subject, and any cell that
    is a name rather than a quantity (no digit: "Baltic Steel" names its row, "8 bytes" is
    a value many rows may share)."""
    return [cells[0], *(cell for cell in cells[1:] if not any(ch.isdigit() for ch in cell))]


# What the support check reads in a text (`answer.support`): its facts, and its facts with
# its words.
Reading = Callable[[str], set[str]]


@dataclass(frozen=True)
class _Claim:
    """A sentence as a row is compared with it: its content terms, and what it holds
    (`held`: facts and words), read as the support check reads them."""

    terms: set[str]
    held: set[str]
    facts: Reading
    holds: Reading

    def names_column(self, name: str) -> bool:
        """Whether the sentence names a column by every term of its name."""
        return _column_named(name, self.terms)

    def says(self, cell: str) -> bool:
        """Whether the sentence states a cell: its every fact, and one of its terms."""
        terms = set(tokenize(cell))
        return self.facts(cell) <= self.held and (not terms or bool(terms & self.terms))


def misplaced(
    claim: str, answered: Collection[str], passage: str, facts: Reading, held: Reading
) -> bool:
    """Whether `passage` holds one of the claim's answer facts (`answered`) only in table
    rows where the claim does not put it: a row other than the ones it names by their
    subject, or, in a row where it names a column but not that column's value, a column it
    does not name ("abbrev() returns 192.168.0.0/24 for the cidr input 192.168/24" of a row
    whose `cidr Output` is 192.168.0.0/24 and whose `abbrev(cidr)` is 192.168.0/24). A value
    is stated of its row, and of a column the sentence names without its own value; "it
    takes 8 bytes" names no column, and "serial ranges from 1 to 2147483647 and takes 4
    bytes" names the range with its value. `facts(text)`, `held(text)`: a text's facts,
    and its facts with its words, as the support check reads them."""
    read = _Claim(set(tokenize(claim)), held(claim), facts, held)
    rows = [columns for line in passage.split("\n") if (columns := record_columns(line))]
    prose = [line for line in passage.split("\n") if not record_columns(line)]
    named_rows = [columns for columns in rows if names(claim, columns[0][1])]
    for fact in set(answered) - _in_prose("\n".join(prose), facts, held):
        holding = [columns for columns in rows if any(fact in held(v) for _, v in columns)]
        if holding and not any(_placed(fact, c, read) for c in named_rows or rows):
            return True
    return False


def _in_prose(prose: str, facts: Reading, held: Reading) -> set[str]:
    """What the passage's prose holds of a sentence's facts: its words, and its numbers
    whole, so that a caption's "Table 8.2" or a heading's "8.1." is not a row's 8 bytes."""
    return {word for word in held(prose) if not word.isdigit()} | facts(prose)


def _placed(fact: str, columns: list[tuple[str, str]], claim: _Claim) -> bool:
    """Whether a row holds `fact` where the claim puts it: under a column it names, or
    anywhere when every column it names holds a value it states. A column's name is not
    named by words of a cell the claim states ("large-range integer", the description,
    does not name the Range column)."""
    cells = [fact in claim.holds(value) for _, value in columns]
    stated = {term for _, value in columns if claim.says(value) for term in tokenize(value)}
    naming = _Claim(claim.terms - stated, claim.held, claim.facts, claim.holds)
    named = [naming.names_column(name) for name, _ in columns]
    if any(n and c for n, c in zip(named, cells, strict=True)):
        return True
    unsaid = any(n and not claim.says(v) for n, (_, v) in zip(named, columns, strict=True))
    return any(cells) and not unsaid


def restates_row(claim: str, question: str, passage: str, facts: Reading, held: Reading) -> bool:
    """Whether `claim` restates one of `passage`'s table rows with its column names: it
    names the row by its subject, states a cell the question does not give (its every term
    and fact) under that cell's column, which it names, and every term and fact it adds to
    the question's is the row's ("The byte order selected by the struct format prefix ! is
    network (= big-endian)" of `Character: !; Byte order: network (= big-endian); …`, asked
    which byte order `!` selects). `facts(text)`, `held(text)`: a text's facts, and its
    facts with its words, as the support check reads them."""
    terms, asked = set(tokenize(claim)), set(tokenize(question))
    said, added = held(claim), facts(claim) - facts(question)
    for line in passage.split("\n"):
        columns = record_columns(line)
        if not columns or not names(claim, columns[0][1]):
            continue
        if not terms - asked <= set(tokenize(line)) or not added <= held(line):
            continue
        if any(_states_cell(name, value, terms, asked) for name, value in columns[1:]) and all(
            facts(value) <= said for _, value in columns[1:] if set(tokenize(value)) <= terms
        ):
            return True
    return False


def _states_cell(name: str, value: str, terms: set[str], asked: set[str]) -> bool:
    """Whether a sentence's `terms` state a cell's value under its column's name, the value
    not the question's own (`asked`)."""
    cell, column = set(tokenize(value)), set(tokenize(name))
    return bool(cell) and cell <= terms and not cell <= asked and bool(column) and column <= terms


@dataclass(frozen=True)
class RowCells:
    """Cells of one table row, as the row states them: its subject and (column, value)
    pairs."""

    subject: str
    cells: tuple[tuple[str, str], ...]

    @property
    def text(self) -> str:
        """The cells as a reader sees them: "Weibull \u2014 additional arguments: shape,
        scale"."""
        stated = "; ".join(f"{name}: {value}" for name, value in self.cells)
        return f"{self.subject} \u2014 {stated}"

    def list_part_said(self, text: str) -> bool:
        """Whether `text` says some items of a cell that lists several ("identity, log,
        sqrt") and not all: a list said in part."""
        said = set(tokenize(text))
        for _, value in self.cells:
            items = [set(tokenize(item)) for item in value.split(", ") if tokenize(item)]
            told = [item <= said for item in items]
            if len(items) > 1 and any(told) and not all(told):
                return True
        return False


# The measure an adjective asks about, as a table names its column ("How deep is berth B7?"
# of a `Depth` column; "4.4 meters deep"): stemmed as the terms are.
_MEASURES = {
    "deep": "depth", "long": "length", "wide": "width", "high": "height", "tall": "height",
    "heavy": "weight", "old": "age", "large": "size", "big": "size", "far": "distance",
}  # fmt: skip
MEASURE_TERMS = {tokenize(word)[0]: tokenize(measure)[0] for word, measure in _MEASURES.items()}


def with_measures(terms: set[str]) -> set[str]:
    """`terms` with the measure each adjective among them asks about (`MEASURE_TERMS`)."""
    return terms | {MEASURE_TERMS[term] for term in terms if term in MEASURE_TERMS}


def row_cells_asked(
    claim: str, question: str, passage: str, facts: Reading, held: Reading
) -> RowCells | None:
    """The cells of the table row of `passage` that both the question and a sentence of the
    answer speak of ("Weibull \u2014 additional arguments: shape, scale"); None when there is
    no such row.

    A small model asked for a row's value often writes the row with an item too many or a
    count of its own ("takes three additional arguments: shape, scale, and df" of a row
    whose cell is "shape, scale"), or one item of a list ("the poisson family can use the
    log link" of a row listing identity, log, sqrt): the row that answers was found, named by
    the question and read by the model, and it is what the page says. That row is the one
    the sentence names by its subject and the question names whole; its cells are the ones
    under the columns the sentence speaks of, by every term of their names (an adjective
    naming its measure: "deep" a `Depth` column) or by stating a value of their kind ("takes
    16 bytes" of "Storage Size: 4 bytes"), the question sharing a term with one of them
    (its name or its value). A cell writing the row's own subject
    ("command: zstd(1)" of zstd's row) is what the row is called, never an answer about it.
    Nothing is offered for a question stating a fact (a name, a number) the passage does not
    hold, such as another product's type of the same name, nor when two rows are named
    alike. `facts(text)`, `held(text)`: a text's facts, and its facts with its words, as
    the support check reads them."""
    if not facts(question) <= held(passage):
        return None
    said, asked = with_measures(set(tokenize(claim))), with_measures(set(tokenize(question)))
    found: dict[RowCells, int] = {}  # the cells offered, by how many terms name their row
    for line in passage.split("\n"):
        columns = record_columns(line)
        subject = columns[0][1] if columns else ""
        if not columns or not (names(claim, subject) and names_whole(question, subject)):
            continue
        cells = _cells_spoken_of(columns[1:], subject, said)
        if cells and any(set(tokenize(f"{name} {value}")) & asked for name, value in cells):
            found[RowCells(subject, cells)] = len(set(tokenize(subject)))
    best = [row for row, named in found.items() if named == max(found.values(), default=0)]
    return best[0] if len(best) == 1 else None


def _cells_spoken_of(
    columns: list[tuple[str, str]], subject: str, said: set[str]
) -> tuple[tuple[str, str], ...]:
    """The (column, value) pairs of a row a sentence's terms (`said`) speak of: the columns
    it names, else the ones whose kind of value it states; never a cell that writes the
    row's subject."""
    own = [(name, value) for name, value in columns if not writes(value, subject)]
    named = tuple((name, value) for name, value in own if _column_named(name, said))
    return named or tuple((name, value) for name, value in own if _kind_said(value, said))


def _kind_said(value: str, said: set[str]) -> bool:
    """Whether a sentence's terms (`said`) state a value of a cell's kind: the cell is a
    quantity ("4 bytes") whose words beyond its numbers ("bytes") the sentence says, as
    "the date type takes 16 bytes" speaks of the storage size it does not name."""
    terms = tokenize(value)
    words = {term for term in terms if not term.isdigit()}
    return len(words) < len(terms) and bool(words) and words <= said


def _column_named(name: str, said: set[str]) -> bool:
    """Whether a sentence's terms (`said`) name a column by every term of its name."""
    terms = set(tokenize(name))
    return bool(terms) and terms <= said
