"""A document's text assembled from its parts (paragraphs, table rows, slides, messages), with
where its pages and headings stand, within the document's text budget.

Every format loader writes through `DocumentText`, so each gets the same paragraph breaks
(which the chunker cuts at first), the same outline for citations, and the same cap: text
past `max_document_bytes` stops the reading there, whatever the file's own size (a sheet of
a million rows, a mailbox of 100,000 messages), instead of after it was all held in memory.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from crag_edge.ingest.loaders import LoadedDocument, LoadError, clean_text, too_large
from crag_edge.ingest.outline import Heading, Outline, short_title

# A block this short just before a table titles it (a caption, a heading, "Table 2. Sizes"):
# each of the table's rows is written with it. A longer one is prose that leads into it.
CAPTION_MAX_CHARS = 120
# The longest column name a record's field is read by (`record_values`): a longer one is prose
# that happens to hold "; " and ": ".
COLUMN_NAME_MAX_CHARS = 60


class DocumentText:
    """The text of one document being read, block by block (a block ends in a blank line)."""

    def __init__(self, source: str, max_bytes: int) -> None:
        self.source = source
        self.max_bytes = max_bytes
        self.warnings: list[str] = []
        self._parts: list[str] = []
        self._length = 0  # characters written
        self._bytes = 0  # their UTF-8 size, for the budget
        self._expanding = 0  # repeated runs charged for the block being read (`expand`)
        self._page_starts: list[int] = []
        self._page_numbers: list[int | None] = []
        self._headings: list[Heading] = []
        self._last_block = ""  # the text of the block just written; "" after a table

    def block(self, text: str) -> None:
        """A paragraph (a row, a list item); blank text writes nothing."""
        self._expanding = 0
        text = clean_text(text).strip()
        if not text:
            return
        self._bytes += len(text.encode("utf-8")) + 2
        self._check(self._bytes)
        self._parts.append(text + "\n\n")
        self._length += len(text) + 2
        self._last_block = text

    def expand(self, count: int) -> int:
        """`count`: the length of a repeated run (a run of spaces, a repeated cell) of the
        block being read, charged before the run is built, so a markup's repeat count is
        refused by what it expands to, not after it is held."""
        self._expanding += count
        self._check(self._bytes + self._expanding)
        return count

    def _check(self, size: int) -> None:
        if size > self.max_bytes:
            raise LoadError(self.source, "its text has over " + too_large(size, self.max_bytes))

    def blocks(self, texts: Iterable[str]) -> None:
        for text in texts:
            self.block(text)

    def heading(self, level: int, title: str) -> None:
        """A heading written as its own block; it closes the headings of its level and deeper
        (an empty title only closes them: a slide without a title)."""
        self.section(level, title)
        self.block(title)

    def section(self, level: int, title: str) -> None:
        """A heading that is not written into the text (a sheet's name, a note on the page)."""
        title = short_title(" ".join(clean_text(title).split()))
        self._headings.append(Heading(self._length, level, title))

    def page(self, number: int | None) -> None:
        """The text from here on is on page (slide, row) `number`; None: on no numbered
        place (the text after a table's rows in a document without pages)."""
        self._page_starts.append(self._length)
        self._page_numbers.append(number)

    def table(self, rows: list[list[str]], caption: str | None = None) -> None:
        """A table of a document without pages (Word, OpenDocument text): titled by its
        `caption`, else by the block just before it when that is short enough to be one
        (`caption_of`); its header line, then each row a record on its own place numbered
        from 1 under the header, so a row found alone says which table and columns it is
        from and is cited by its number: `sizes.docx row 3 § Numeric Types`."""
        records = rows_as_records(rows, caption or caption_of(self._last_block))
        self.blocks(records[:1])
        for number, line in enumerate(records[1:], start=1):
            self.page(number)
            self.block(line)
        if len(records) > 1:
            self.page(None)
        self._last_block = ""

    @property
    def empty(self) -> bool:
        return not self._parts

    def document(self, title: str, metadata: dict[str, Any] | None = None) -> LoadedDocument:
        """The finished document, titled `title` (cut to a label's length)."""
        outline = Outline(
            tuple(self._page_starts), tuple(self._headings), tuple(self._page_numbers)
        )
        text = "".join(self._parts).rstrip("\n")
        short = short_title(" ".join(clean_text(title).split()))
        return LoadedDocument(
            self.source, short, text, metadata or {}, outline, tuple(self.warnings)
        )


def record(header: list[str], values: list[str]) -> str:
    """A table row as a sentence-like record, each value named by its column's header
    (`Region: North; Revenue: 1200`), so a row found alone still says what it holds; a
    column without a header is named by its letter."""
    fields = [
        f"{header[i] if i < len(header) and header[i] else column_letter(i)}: {value}"
        for i, value in enumerate(values)
        if value
    ]
    return "; ".join(fields)


def record_values(text: str) -> str:
    """`text` with each line written by `record` (after its table's title, if any) as its
    values alone, in order (`Name: boolean; Storage Size: 1 byte` → `boolean 1 byte`): the
    row as the table shows it, so a sentence that restates a row's cells quotes the row.
    Other lines are kept as they are."""
    return "\n".join(_values(line) or line for line in text.split("\n"))


def _values(line: str) -> str:
    """A record's values joined, "" when `line` is no record."""
    return " ".join(record_cells(line))


def record_cells(line: str) -> list[str]:
    """A record's cell values in order, the row's subject (its first cell) first; [] when
    `line` is no record: two fields at least, each after the first named by a column name
    of at most `COLUMN_NAME_MAX_CHARS`."""
    fields = line.split("; ")
    named = [field.partition(": ") for field in fields[1:]]
    if not named or any(not sep or len(name) > COLUMN_NAME_MAX_CHARS for name, sep, _ in named):
        return []
    first = fields[0].rpartition(": ")
    if not first[1]:
        return []
    return [first[2], *(value for _, _, value in named)]


def column_letter(index: int) -> str:
    """A spreadsheet's name of the 0-based column `index`: A, B, ... Z, AA, AB, ..."""
    name = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        name = chr(ord("A") + rest) + name
    return name


def rows_as_records(rows: list[list[str]], caption: str = "") -> list[str]:
    """A small table (a Word, slide or PDF table) as its header line, then one record per row;
    each opens with the table's `caption` when it has one (`Numeric Types — Name: bigint;
    Storage Size: 8 bytes`), so a row retrieved alone still says which table it is from."""
    rows = [[" ".join(cell.split()) for cell in row] for row in rows if any(row)]
    if not rows:
        return []
    header = rows[0]
    lead = f"{caption} — " if caption else ""
    return [lead + " | ".join(header)] + [lead + record(header, row) for row in rows[1:]]


def caption_of(block: str) -> str:
    """`block` as the title of the table after it, on one line; "" when it is too long to be
    one (`CAPTION_MAX_CHARS`)."""
    line = " ".join(block.split())
    return line if len(line) <= CAPTION_MAX_CHARS else ""
