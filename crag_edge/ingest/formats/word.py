"""Word documents (.docx): headings, lists, tables as rows, footnotes, tracked changes.

Read from the package's XML directly (`archive.Package`), the body as it streams:
paragraphs in body order, each heading by its style's outline level (so a heading style
renamed or localised still counts), list items marked, each table row a record named by the
header row, titled by the table's caption and numbered for citations (`DocumentText.table`),
footnotes and endnotes after the body. Tracked changes read as accepted: insertions are text,
deletions and moved-away text are not.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path
from xml.etree.ElementTree import Element

from crag_edge.ingest.formats.archive import Package
from crag_edge.ingest.formats.builder import DocumentText
from crag_edge.ingest.loaders import LoadedDocument

W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_DC = "{http://purl.org/dc/elements/1.1/}"
# Tracked deletions and the old place of moved text: not part of the accepted document.
_REJECTED = frozenset({f"{W}del", f"{W}moveFrom", f"{W}delText", f"{W}instrText"})
_NOTES = (("word/footnotes.xml", "footnote"), ("word/endnotes.xml", "endnote"))


def load_docx(path: Path, raw: bytes, max_bytes: int) -> LoadedDocument:
    package = Package(str(path), raw, max_bytes)
    levels = _heading_levels(package)
    text = DocumentText(str(path), max_bytes)
    first_heading = ""
    for element in _blocks(package.children("word/document.xml", f"{W}body")):
        if not len(element):  # an empty paragraph: nothing to read, and a body may hold millions
            continue
        if element.tag == f"{W}tbl":
            text.table(_table_rows(element), _val(element.find(f"{W}tblPr/{W}tblCaption")))
            continue
        level, line = _paragraph_level(element, levels), paragraph_text(element)
        if level and line.strip():
            first_heading = first_heading or line
            text.heading(level, line)
        else:
            text.block(f"- {line}" if _is_list_item(element) else line)
    notes = [note for part, tag in _NOTES for note in _notes(package, part, tag)]
    if notes:
        text.heading(1, "Notes")
        text.blocks(notes)
    return text.document(_core_title(package) or first_heading or path.stem)


def _blocks(children: Iterable[Element]) -> Iterator[Element]:
    """Paragraphs and tables in reading order, looking inside content controls; the body's
    children stream (`Package.children`), so a body is never held whole."""
    for child in children:
        if child.tag in (f"{W}p", f"{W}tbl"):
            yield child
        elif child.tag in (f"{W}sdt", f"{W}sdtContent", f"{W}customXml", f"{W}ins"):
            yield from _blocks(child)


def paragraph_text(paragraph: Element) -> str:
    """The accepted text of a paragraph: text runs, tabs, breaks and footnote marks."""
    parts: list[str] = []

    def walk(element: Element) -> None:
        for child in element:
            tag = child.tag
            if tag in _REJECTED:
                continue
            if tag == f"{W}t":
                parts.append(child.text or "")
            elif tag == f"{W}tab":
                parts.append("\t")
            elif tag in (f"{W}br", f"{W}cr"):
                parts.append("\n")
            elif tag in (f"{W}footnoteReference", f"{W}endnoteReference"):
                parts.append(f"[{child.get(f'{W}id')}]")
            else:
                walk(child)

    walk(paragraph)
    return "".join(parts)


def _table_rows(table: Element) -> list[list[str]]:
    return [
        [
            " ".join(paragraph_text(p) for p in cell.iter(f"{W}p")).strip()
            for cell in row.findall(f"{W}tc")
        ]
        for row in table.findall(f"{W}tr")
    ]


def _heading_levels(package: Package) -> dict[str, int]:
    """Paragraph style id -> heading level (1 = top), from each style's name or outline."""
    if "word/styles.xml" not in package.names:
        return {}
    levels = {}
    for style in package.xml("word/styles.xml").iter(f"{W}style"):
        name = (_val(style.find(f"{W}name")) or "").lower()
        outline = style.find(f"{W}pPr/{W}outlineLvl")
        if name == "title":
            levels[style.get(f"{W}styleId", "")] = 1
        elif name.startswith("heading ") and name[8:].isdigit():
            levels[style.get(f"{W}styleId", "")] = int(name[8:])
        elif outline is not None and (_val(outline) or "").isdigit():
            levels[style.get(f"{W}styleId", "")] = int(_val(outline) or 0) + 1
    return levels


def _paragraph_level(paragraph: Element, levels: dict[str, int]) -> int:
    outline = _property(paragraph, "outlineLvl")
    if outline is not None and (_val(outline) or "").isdigit() and int(_val(outline) or 9) < 9:
        return int(_val(outline) or 0) + 1
    return levels.get(_val(_property(paragraph, "pStyle")) or "", 0)


def _is_list_item(paragraph: Element) -> bool:
    return _property(paragraph, "numPr") is not None


def _property(paragraph: Element, name: str) -> Element | None:
    """A paragraph property (`w:pPr/w:<name>`), found one tag at a time: a path holding '/'
    is matched in Python, ten times slower, and a body may hold millions of paragraphs."""
    properties = paragraph.find(f"{W}pPr")
    return None if properties is None else properties.find(f"{W}{name}")


def _notes(package: Package, part: str, tag: str) -> list[str]:
    """`[id] text` of each footnote (endnote); ids 0 and -1 are Word's separators."""
    if part not in package.names:
        return []
    notes = []
    for note in package.xml(part).iter(f"{W}{tag}"):
        number = note.get(f"{W}id", "")
        body = " ".join(paragraph_text(p) for p in note.iter(f"{W}p")).strip()
        if body and number.isdigit() and int(number) > 0:
            notes.append(f"[{number}] {body}")
    return notes


def _core_title(package: Package) -> str:
    """The title in the document's properties (File > Properties), if set."""
    if "docProps/core.xml" not in package.names:
        return ""
    found = package.xml("docProps/core.xml").find(f"{_DC}title")
    return (found.text or "").strip() if found is not None else ""


def _val(element: Element | None) -> str | None:
    return None if element is None else element.get(f"{W}val")
