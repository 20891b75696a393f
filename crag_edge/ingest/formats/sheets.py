"""Spreadsheets (.xlsx, .ods, .csv): each sheet's rows as records named by the header row.

A row reads `Region: North; Quarter: Q3; Revenue: 1200`, so a row retrieved alone says what
each value is. Each row is a page numbered as the spreadsheet numbers it (the header is row
1), each sheet a section: a citation reads `budget.xlsx row 42 § Q3`. Rows stream from the
file and stop at the document's text budget (`DocumentText`), so a sheet of a million rows
is refused after reading about `max_document_bytes` of it, in bounded memory.
"""

from __future__ import annotations

import csv
import datetime
import io
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from crag_edge.ingest.formats import workbook
from crag_edge.ingest.formats.archive import SHEET_BYTES_PER_ELEMENT, Package
from crag_edge.ingest.formats.builder import DocumentText, record
from crag_edge.ingest.formats.opendocument import OFFICE, TABLE, TEXT, inline_text, open_package
from crag_edge.ingest.loaders import LoadedDocument, LoadError, decode_text

Row = tuple[int, list[str]]  # (row number, cell texts)
# An OpenDocument row or cell repeated more than this is an empty filler (LibreOffice pads
# sheets to their full size this way); its copies carry nothing to index.
_MAX_REPEAT = 1000


def load_csv(path: Path, raw: bytes, max_bytes: int) -> LoadedDocument:
    text = decode_text(raw, str(path))
    try:
        dialect: Any = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|")
    except csv.Error:  # one column, or no delimiter it can tell: the default
        dialect = csv.excel
    reader = csv.reader(io.StringIO(text), dialect)
    try:
        rows = ((number, row) for number, row in enumerate(reader, start=1))
        document = DocumentText(str(path), max_bytes)
        write_sheet(document, "", rows)
    except csv.Error as exc:
        raise LoadError(str(path), f"malformed CSV at line {reader.line_num} ({exc})") from None
    return document.document(path.stem)


def write_sheet(text: DocumentText, name: str, rows: Iterable[Row]) -> None:
    """A sheet: its name as the section, its first non-empty row as the header, then each
    row as a record on its own page."""
    text.section(1, name)
    header: list[str] | None = None
    for number, cells in rows:
        cells = [" ".join(cell.split()) for cell in cells]
        if not any(cells):
            continue
        text.page(number)
        if header is None:
            header = cells
            text.block(" | ".join(cell for cell in cells if cell))
        else:
            text.block(record(header, cells))


def load_xlsx(path: Path, raw: bytes, max_bytes: int) -> LoadedDocument:
    package = Package(str(path), raw, max_bytes, SHEET_BYTES_PER_ELEMENT)
    strings, formats = workbook.shared_strings(package), workbook.number_formats(package)
    text = DocumentText(str(path), max_bytes)
    found = workbook.sheets(package)
    for name, member in found:
        write_sheet(text, name, workbook.rows(package, member, strings, formats))
    return text.document(path.stem, {"sheet_count": len(found)})


def cell_text(value: object) -> str:
    """A cell's value as a reader sees it: whole numbers without `.0`, dates without a
    midnight time."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, datetime.datetime) and value.time() == datetime.time():
        return value.date().isoformat()
    if isinstance(value, datetime.date | datetime.time):
        return value.isoformat()
    return str(value)


def load_ods(path: Path, raw: bytes, max_bytes: int) -> LoadedDocument:
    package = open_package(path, raw, max_bytes, SHEET_BYTES_PER_ELEMENT)
    text = DocumentText(str(path), max_bytes)
    sheets = 0
    events = package.events("content.xml", ("start", "end"))
    for event, element in events:
        if event == "start" and element.tag == f"{TABLE}table":
            sheets += 1
            rows = _ods_rows(events, element, text)
            write_sheet(text, element.get(f"{TABLE}name", ""), rows)
    return text.document(path.stem, {"sheet_count": sheets})


def _ods_rows(events: Iterator[tuple[str, Any]], table: Any, text: DocumentText) -> Iterator[Row]:
    """The rows of the sheet `table` just opened, each dropped once read (bounded memory)."""
    number = 1
    for event, element in events:
        if event != "end":
            continue
        if element.tag == f"{TABLE}table":
            return
        if element.tag != f"{TABLE}table-row":
            continue
        cells = _ods_cells(element, text)
        repeat = int(element.get(f"{TABLE}number-rows-repeated", "1") or 1)
        for copy in range(min(repeat, _MAX_REPEAT) if any(cells) else 0):
            yield number + copy, cells
        number += repeat
        table.clear()  # the rows read so far (the sheet's name was read at its start)


def _ods_cells(row: Any, text: DocumentText) -> list[str]:
    """A row's cells, a repeated cell's copies charged before they are made."""
    cells: list[str] = []
    for cell in row:
        value = _ods_value(cell, text)
        repeat = int(cell.get(f"{TABLE}number-columns-repeated", "1") or 1)
        copies = min(repeat, _MAX_REPEAT) if value else min(repeat, 1)
        text.expand(len(value) * copies)
        cells.extend([value] * copies)
    while cells and not cells[-1]:
        cells.pop()
    return cells


def _ods_value(cell: Any, text: DocumentText) -> str:
    """A cell as LibreOffice shows it: the text it wrote for the cell (its number format
    applied: `12.5%`, `$1,234.50`, `14:30`), dates in ISO form (`2026-03-01`) whatever the
    display's order of day and month; the plain value where no text was written."""
    kind = cell.get(f"{OFFICE}value-type")
    written = "\n".join(inline_text(p, text) for p in cell.iter(f"{TEXT}p"))
    if kind == "date" and (moment := cell.get(f"{OFFICE}date-value")):
        return moment.removesuffix("T00:00:00").replace("T", " ")
    if kind in ("float", "percentage", "currency") and not written.strip():
        return cell_text(float(cell.get(f"{OFFICE}value", "0") or 0))
    return written
