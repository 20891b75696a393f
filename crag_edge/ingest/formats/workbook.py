"""Excel workbooks (.xlsx) read as they stream: sheet names, shared strings, cell values.

Read from the package's XML as it streams (`archive.Package.stream`), row by row, each row
cleared once read, so a sheet's size costs nothing beyond its text budget (openpyxl's
read-only mode first scans a whole sheet that does not state its dimensions: 80 s for a
million rows). Values read as Excel shows them where it matters for finding them: shared
and inline strings, numbers (whole ones without `.0`), booleans, and dates for cells whose
number format is a date's.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator
from xml.etree.ElementTree import Element

from crag_edge.ingest.formats.archive import Package
from crag_edge.ingest.loaders import LoadError, too_large

S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
# Built-in number formats that show dates (ECMA-376 18.8.30).
_DATE_FORMATS = frozenset({14, 15, 16, 17, 18, 19, 20, 21, 22, 45, 46, 47})
# A custom format shows a date when it holds day, month or year letters outside quotes.
_DATE_CODE = re.compile(r"[dmy]", re.IGNORECASE)
_QUOTED = re.compile(r'"[^"]*"|\[[^\]]*\]|\\.')
_EPOCH = datetime.datetime(1899, 12, 30)
_COLUMN = re.compile(r"[A-Z]+")


def sheets(package: Package) -> list[tuple[str, str]]:
    """(name, member) of each sheet, in the workbook's order."""
    relations = package.relations("xl/workbook.xml")
    found = package.xml("xl/workbook.xml").iter(f"{S}sheet")
    return [
        (sheet.get("name", ""), relations[sheet.get(f"{_R}id", "")])
        for sheet in found
        if sheet.get(f"{_R}id") in relations
    ]


def shared_strings(package: Package) -> list[str]:
    """The shared-string table, refused once it holds more text than a document may: cells
    name its strings by number, so a small sheet could repeat a large table's text."""
    if "xl/sharedStrings.xml" not in package.names:
        return []
    strings, size = [], 0
    for item in package.stream("xl/sharedStrings.xml", f"{S}si"):
        strings.append(_string(item))
        size += len(strings[-1])
        if size > package.max_bytes:
            reason = "its shared strings hold over " + too_large(size, package.max_bytes)
            raise LoadError(package.source, reason)
    return strings


def date_styles(package: Package) -> frozenset[int]:
    """Indexes of the cell styles whose number format shows a date."""
    if "xl/styles.xml" not in package.names:
        return frozenset()
    styles = package.xml("xl/styles.xml")
    custom = {
        int(f.get("numFmtId", "0")): _QUOTED.sub("", f.get("formatCode", ""))
        for f in styles.iter(f"{S}numFmt")
    }
    dated = set()
    xfs = styles.find(f"{S}cellXfs")
    for index, xf in enumerate([] if xfs is None else xfs.findall(f"{S}xf")):
        number = int(xf.get("numFmtId", "0") or 0)
        if number in _DATE_FORMATS or _DATE_CODE.search(custom.get(number, "")):
            dated.add(index)
    return frozenset(dated)


def rows(
    package: Package, member: str, strings: list[str], dates: frozenset[int]
) -> Iterator[tuple[int, list[str]]]:
    """(row number, cell texts by column) of a sheet, streamed."""
    number = 0
    for row in package.stream(member, f"{S}row"):
        number = int(row.get("r", number + 1) or number + 1)
        yield number, _cells(package, row, strings, dates)


def _cells(package: Package, row: Element, strings: list[str], dates: frozenset[int]) -> list[str]:
    """A row's cell texts, charged as they are named: a row naming one long shared string in
    every column is refused before it is joined into text."""
    cells: list[str] = []
    size = 0
    for cell in row.iter(f"{S}c"):
        column = _column(cell.get("r", ""), len(cells))
        cells.extend([""] * (column - len(cells)))
        cells.append(_value(cell, strings, dates))
        size += len(cells[-1])
        if size > package.max_bytes:
            reason = "a row of its text has over " + too_large(size, package.max_bytes)
            raise LoadError(package.source, reason)
    return cells


def _column(reference: str, default: int) -> int:
    """The 0-based column of a cell reference (`C7` -> 2), capped at Excel's last one."""
    letters = _COLUMN.match(reference)
    if letters is None:
        return default
    index = 0
    for letter in letters.group(0)[:3]:
        index = index * 26 + ord(letter) - ord("A") + 1
    return min(index - 1, 16383)


def _value(cell: Element, strings: list[str], dates: frozenset[int]) -> str:
    kind, value = cell.get("t", "n"), cell.findtext(f"{S}v") or ""
    if kind == "s":
        index = int(value) if value.isdigit() else -1
        return strings[index] if 0 <= index < len(strings) else ""
    if kind == "inlineStr":
        inline = cell.find(f"{S}is")
        return "" if inline is None else _string(inline)
    if kind == "b":
        return "TRUE" if value == "1" else "FALSE"
    if kind in ("str", "e") or not value:
        return value
    return _number(value, int(cell.get("s", "0") or 0) in dates)


def _number(value: str, is_date: bool) -> str:
    try:
        number = float(value)
    except ValueError:
        return value
    if is_date and 0 <= number < 2958466:  # up to 9999-12-31
        moment = _EPOCH + datetime.timedelta(days=number)
        return moment.date().isoformat() if moment.time() == datetime.time() else str(moment)
    return str(int(number)) if number.is_integer() and abs(number) < 1e15 else value


def _string(item: Element) -> str:
    """A string item's text: plain, or its rich-text runs, without phonetic hints."""
    return "".join(
        (child.text or "") if child.tag == f"{S}t" else (child.findtext(f"{S}t") or "")
        for child in item
        if child.tag in (f"{S}t", f"{S}r")
    )
