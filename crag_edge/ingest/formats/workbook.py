"""Excel workbooks (.xlsx) read as they stream: sheet names, shared strings, cell values.

Read from the package's XML as it streams (`archive.Package.stream`), row by row, each row
cleared once read, so a sheet's size costs nothing beyond its text budget (openpyxl's
read-only mode first scans a whole sheet that does not state its dimensions: docs/formats.md,
"Choosing the libraries"). Values read as Excel shows them: shared and inline strings, booleans, and
numbers by their cell's number format (`numbers.shown`: dates, times, percentages,
currency), else whole ones without `.0`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from xml.etree.ElementTree import Element

from crag_edge.ingest.formats import numbers
from crag_edge.ingest.formats.archive import Package
from crag_edge.ingest.loaders import LoadError, too_large

S = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"
_R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
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


def number_formats(package: Package) -> dict[int, str]:
    """The format code of each cell style that has one other than General, by the style's
    index (a cell's `s`): built-in formats by number, the workbook's own by their code."""
    if "xl/styles.xml" not in package.names:
        return {}
    styles = package.xml("xl/styles.xml")
    custom = {
        int(f.get("numFmtId", "0")): f.get("formatCode", "") for f in styles.iter(f"{S}numFmt")
    }
    codes = {}
    xfs = styles.find(f"{S}cellXfs")
    for index, xf in enumerate([] if xfs is None else xfs.findall(f"{S}xf")):
        number = int(xf.get("numFmtId", "0") or 0)
        code = custom.get(number) or numbers.BUILTIN.get(number)
        if code and code.lower() != "general":
            codes[index] = code
    return codes


def rows(
    package: Package, member: str, strings: list[str], formats: dict[int, str]
) -> Iterator[tuple[int, list[str]]]:
    """(row number, cell texts by column) of a sheet, streamed."""
    number = 0
    for row in package.stream(member, f"{S}row"):
        number = int(row.get("r", number + 1) or number + 1)
        yield number, _cells(package, row, strings, formats)


def _cells(
    package: Package, row: Element, strings: list[str], formats: dict[int, str]
) -> list[str]:
    """A row's cell texts, charged as they are named: a row naming one long shared string in
    every column is refused before it is joined into text."""
    cells: list[str] = []
    size = 0
    for cell in row.iter(f"{S}c"):
        column = _column(cell.get("r", ""), len(cells))
        cells.extend([""] * (column - len(cells)))
        cells.append(_value(cell, strings, formats))
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


def _value(cell: Element, strings: list[str], formats: dict[int, str]) -> str:
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
    return _number(value, formats.get(int(cell.get("s", "0") or 0)))


def _number(value: str, code: str | None) -> str:
    """A number cell as its format shows it (`numbers.shown`), else as written, whole numbers
    without `.0`."""
    try:
        number = float(value)
    except ValueError:
        return value
    if code is not None and (text := numbers.shown(number, code)) is not None:
        return text
    return str(int(number)) if number.is_integer() and abs(number) < 1e15 else value


def _string(item: Element) -> str:
    """A string item's text: plain, or its rich-text runs, without phonetic hints."""
    return "".join(
        (child.text or "") if child.tag == f"{S}t" else (child.findtext(f"{S}t") or "")
        for child in item
        if child.tag in (f"{S}t", f"{S}r")
    )
