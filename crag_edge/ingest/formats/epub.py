"""EPUB books (.epub): chapters in reading order, each chapter's headings kept.

The package document (`META-INF/container.xml` names it) lists the chapters in its spine;
each is XHTML, read like an HTML page (`formats.html`: its navigation left out, its tables
row by row), so a citation names the book's own headings: `book.epub § Section`, the whole
path `Chapter 3 > Section` where there is room, and a table's row: `book.epub § Table 8.1.
Boolean Data Type row 1`. A chapter without headings is titled by its <title> (an untitled
one closes the last). A chapter the spine lists more than once is read once and written,
and charged to the text budget, each time.
"""

from __future__ import annotations

import posixpath
from pathlib import Path
from urllib.parse import unquote
from xml.etree.ElementTree import Element

from crag_edge.ingest.formats.archive import XML_BOMB, Package, member_path
from crag_edge.ingest.formats.builder import DocumentText
from crag_edge.ingest.formats.html import HtmlPage, read_html
from crag_edge.ingest.loaders import LoadedDocument, LoadError, decode_text
from crag_edge.ingest.outline import Heading

_CONTAINER = "{urn:oasis:names:tc:opendocument:xmlns:container}"
_OPF = "{http://www.idpf.org/2007/opf}"
_DC = "{http://purl.org/dc/elements/1.1/}"
_CHAPTER_TYPES = frozenset({"application/xhtml+xml", "text/html"})


def load_epub(path: Path, raw: bytes, max_bytes: int) -> LoadedDocument:
    package = Package(str(path), raw, max_bytes)
    rootfile = package.xml("META-INF/container.xml").find(f".//{_CONTAINER}rootfile")
    if rootfile is None or not rootfile.get("full-path"):
        raise LoadError(str(path), "damaged EPUB: its container names no package document")
    opf_path = rootfile.get("full-path", "")
    opf = package.xml(opf_path)
    text = DocumentText(str(path), max_bytes)
    chapters = _spine(opf, posixpath.dirname(opf_path))
    read: dict[str, HtmlPage] = {}
    for member in chapters:
        if member not in package.names:
            continue
        if member not in read:  # a chapter listed again is read once, and charged each time
            data = package.read(member)
            if b"<!ENTITY" in data:  # read as HTML it would not expand, but it is an attack
                raise LoadError(str(path), XML_BOMB)
            read[member] = read_html(decode_text(data, f"{path}:{member}"))
        _chapter(text, read[member])
    title = opf.find(f"{_OPF}metadata/{_DC}title")
    book_title = (title.text or "").strip() if title is not None else ""
    return text.document(book_title or path.stem, {"chapter_count": len(chapters)})


def _spine(opf: Element, folder: str) -> list[str]:
    """The chapters' member names in reading order."""
    items = {
        item.get("id"): item
        for item in opf.iter(f"{_OPF}item")
        if item.get("media-type") in _CHAPTER_TYPES
    }
    return [
        member_path(folder, unquote(items[ref.get("idref")].get("href", "")))
        for ref in opf.iter(f"{_OPF}itemref")
        if ref.get("idref") in items
    ]


def _chapter(text: DocumentText, page: HtmlPage) -> None:
    """A chapter's text, cut at its headings and table rows so each is a place of its own;
    a chapter of links (the book's own contents page) adds nothing the chapters lack."""
    if page.navigation:
        return
    outline, body = page.outline, page.text
    if not outline.headings or outline.headings[0].offset > 0:
        text.section(1, page.title)
    marks: dict[int, list[Heading | int | None]] = {}
    for heading in outline.headings:
        marks.setdefault(heading.offset, []).append(heading)
    for start, number in zip(outline.page_starts, outline.page_numbers, strict=True):
        marks.setdefault(start, []).append(number)
    cuts = sorted({0, *marks})
    for start, end in zip(cuts, [*cuts[1:], len(body)], strict=True):
        for mark in marks.get(start, []):
            if isinstance(mark, Heading):
                text.section(mark.level, mark.title)
            else:
                text.page(mark)
        text.block(body[start:end])
