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


class DocumentText:
    """The text of one document being read, block by block (a block ends in a blank line)."""

    def __init__(self, source: str, max_bytes: int) -> None:
        self.source = source
        self.max_bytes = max_bytes
        self.warnings: list[str] = []
        self._parts: list[str] = []
        self._length = 0  # characters written
        self._bytes = 0  # their UTF-8 size, for the budget
        self._page_starts: list[int] = []
        self._page_numbers: list[int | None] = []
        self._headings: list[Heading] = []

    def block(self, text: str) -> None:
        """A paragraph (a row, a list item); blank text writes nothing."""
        text = clean_text(text).strip()
        if not text:
            return
        self._bytes += len(text.encode("utf-8")) + 2
        if self._bytes > self.max_bytes:
            raise LoadError(
                self.source, "its text has over " + too_large(self._bytes, self.max_bytes)
            )
        self._parts.append(text + "\n\n")
        self._length += len(text) + 2

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
        """The text from here on is on page (slide, row) `number`; None: on no page (the
        text after an HTML table's rows)."""
        self._page_starts.append(self._length)
        self._page_numbers.append(number)

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


def column_letter(index: int) -> str:
    """A spreadsheet's name of the 0-based column `index`: A, B, ... Z, AA, AB, ..."""
    name = ""
    index += 1
    while index:
        index, rest = divmod(index - 1, 26)
        name = chr(ord("A") + rest) + name
    return name


def rows_as_records(rows: list[list[str]]) -> list[str]:
    """A small table (a Word, slide or PDF table) as its header line, then one record per row."""
    rows = [row for row in rows if any(row)]
    if not rows:
        return []
    header = rows[0]
    return [" | ".join(header)] + [record(header, row) for row in rows[1:]]
