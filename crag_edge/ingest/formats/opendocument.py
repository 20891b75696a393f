"""OpenDocument text and presentations (.odt, .odp), as LibreOffice writes them.

Text documents: headings by outline level, paragraphs, list items, each table row a record
titled by the table's caption and numbered for citations (`DocumentText.table`), notes
after the body; tracked changes read as accepted (deletions are kept apart in
`text:tracked-changes`, insertions are inline). Presentations: each slide (`draw:page`) a
page numbered in order, titled by its title frame, with its speaker notes. A password-
protected file (its parts encrypted, named in the manifest) is refused as such.
"""

from __future__ import annotations

from pathlib import Path
from xml.etree.ElementTree import Element

from crag_edge.ingest.formats.archive import BYTES_PER_ELEMENT, Package
from crag_edge.ingest.formats.builder import DocumentText, rows_as_records
from crag_edge.ingest.loaders import LoadedDocument, LoadError

TEXT = "{urn:oasis:names:tc:opendocument:xmlns:text:1.0}"
TABLE = "{urn:oasis:names:tc:opendocument:xmlns:table:1.0}"
OFFICE = "{urn:oasis:names:tc:opendocument:xmlns:office:1.0}"
_DRAW = "{urn:oasis:names:tc:opendocument:xmlns:drawing:1.0}"
_PRESENTATION = "{urn:oasis:names:tc:opendocument:xmlns:presentation:1.0}"
_DC = "{http://purl.org/dc/elements/1.1/}"
_MANIFEST = "{urn:oasis:names:tc:opendocument:xmlns:manifest:1.0}"
# Not part of the text where they stand: deleted text, notes (read apart), annotations.
# Frames that are no slide's text: the notes page's picture of its slide, page numbers, ...
_FURNITURE = frozenset({"page", "page-number", "header", "footer", "date-time"})
_APART = frozenset({f"{TEXT}tracked-changes", f"{TEXT}note", f"{OFFICE}annotation"})


def open_package(
    path: Path, raw: bytes, max_bytes: int, bytes_per_element: int = BYTES_PER_ELEMENT
) -> Package:
    """The container, refused when its parts are encrypted (a password-protected file)."""
    package = Package(str(path), raw, max_bytes, bytes_per_element)
    manifest = "META-INF/manifest.xml"
    if manifest in package.names and any(
        True for _ in package.xml(manifest).iter(f"{_MANIFEST}encryption-data")
    ):
        raise LoadError(str(path), "password-protected; save a copy without a password")
    return package


def load_odt(path: Path, raw: bytes, max_bytes: int) -> LoadedDocument:
    """The body read as it streams, block by block, each dropped once written."""
    package = open_package(path, raw, max_bytes)
    text = DocumentText(str(path), max_bytes)
    headings: list[str] = []
    notes: list[str] = []
    for element in package.children("content.xml", f"{OFFICE}text"):
        _text_block(element, text, headings)
        notes += [_note(n, text) for n in element.iter(f"{TEXT}note")]
    if any(notes):
        text.heading(1, "Notes")
        text.blocks(notes)
    return text.document(_meta_title(package) or next(iter(headings), path.stem))


def _text_block(element: Element, text: DocumentText, headings: list[str]) -> None:
    tag = element.tag
    if tag == f"{TEXT}h":
        line = inline_text(element, text)
        level = int(element.get(f"{TEXT}outline-level", "1") or 1)
        headings.append(line)
        text.heading(max(1, min(level, 9)), line)
    elif tag == f"{TEXT}p":
        text.block(inline_text(element, text))
    elif tag == f"{TEXT}list":
        for item in element.iter(f"{TEXT}list-item"):
            first = item.find(f"{TEXT}p")
            first = item.find(f"{TEXT}h") if first is None else first
            if first is not None:
                text.block(f"- {inline_text(first, text)}")
    elif tag == f"{TABLE}table":
        text.table(table_rows(element, text))
    elif tag in (f"{TEXT}section", f"{TABLE}table-row-group"):
        for child in element:
            _text_block(child, text, headings)


def inline_text(element: Element, text: DocumentText) -> str:
    """A paragraph's text: spaces (`text:s`, a run charged to `text` before it is made),
    tabs and line breaks, without notes or deleted text."""
    parts: list[str] = [element.text or ""]
    for child in element:
        tag = child.tag
        if tag == f"{TEXT}s":
            parts.append(" " * text.expand(_count(child.get(f"{TEXT}c"))))
        elif tag == f"{TEXT}tab":
            parts.append("\t")
        elif tag == f"{TEXT}line-break":
            parts.append("\n")
        elif tag == f"{TEXT}note":
            citation = child.find(f"{TEXT}note-citation")
            parts.append(f"[{citation.text if citation is not None else ''}]")
        elif tag not in _APART:
            parts.append(inline_text(child, text))
        parts.append(child.tail or "")
    return "".join(parts)


def _count(value: str | None) -> int:
    """A repeat count as written (`text:c`); 1 when absent or not a number."""
    return int(value) if value and value.isdigit() else 1


def table_rows(table: Element, text: DocumentText) -> list[list[str]]:
    """A small table's cells (a text document's or a slide's; sheets stream instead)."""
    return [
        [" ".join(inline_text(p, text) for p in cell.iter(f"{TEXT}p")) for cell in row]
        for row in table.iter(f"{TABLE}table-row")
    ]


def _note(note: Element, text: DocumentText) -> str:
    citation = note.find(f"{TEXT}note-citation")
    body = note.find(f"{TEXT}note-body")
    words = "" if body is None else " ".join(inline_text(p, text) for p in body.iter(f"{TEXT}p"))
    return f"[{citation.text if citation is not None else ''}] {words.strip()}"


def load_odp(path: Path, raw: bytes, max_bytes: int) -> LoadedDocument:
    package = open_package(path, raw, max_bytes)
    text = DocumentText(str(path), max_bytes)
    first_title, number = "", 0
    for page in package.children("content.xml", f"{OFFICE}presentation"):
        if page.tag != f"{_DRAW}page":
            continue
        number += 1
        notes = page.find(f"{_PRESENTATION}notes")
        title, blocks = _frames(page, text)
        first_title = first_title or title
        text.page(number)
        text.heading(1, title)
        text.blocks(blocks)
        if notes is not None and (said := "\n".join(_frames(notes, text)[1])):
            text.block(f"Speaker notes: {said}")
    return text.document(_meta_title(package) or first_title or path.stem, {"slide_count": number})


def _frames(page: Element, text: DocumentText) -> tuple[str, list[str]]:
    """(title, other text blocks) of a slide or its notes page."""
    title, blocks = "", []
    for frame in page.findall(f"{_DRAW}frame"):
        role = frame.get(f"{_PRESENTATION}class")
        if role in _FURNITURE:
            continue
        table = frame.find(f"{TABLE}table")
        if table is not None:
            blocks.extend(rows_as_records(table_rows(table, text)))
            continue
        paragraphs = (p for p in frame.iter() if p.tag in (f"{TEXT}p", f"{TEXT}h"))
        body = "\n".join(inline_text(p, text) for p in paragraphs)
        if role == "title" and not title:
            title = " ".join(body.split())
        else:
            blocks.append(body)
    return title, blocks


def _meta_title(package: Package) -> str:
    if "meta.xml" not in package.names:
        return ""
    found = package.xml("meta.xml").find(f"{OFFICE}meta/{_DC}title")
    return (found.text or "").strip() if found is not None else ""
