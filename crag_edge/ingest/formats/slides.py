"""PowerPoint decks (.pptx): each slide, numbered as the deck shows it, with its title,
text boxes, tables (rows as records) and speaker notes.

Slides are read in the deck's order (`ppt/presentation.xml`), not the order of their files;
each starts a page numbered by its position, so a citation reads `deck.pptx slide 7`, and
its title is the section (a slide without one closes the previous slide's). A slide the
deck lists more than once is read once and written, and charged to the text budget, each
time.
"""

from __future__ import annotations

from pathlib import Path
from xml.etree.ElementTree import Element

from crag_edge.ingest.formats.archive import Package
from crag_edge.ingest.formats.builder import DocumentText, rows_as_records
from crag_edge.ingest.loaders import LoadedDocument

P = "{http://schemas.openxmlformats.org/presentationml/2006/main}"
A = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
R = "{http://schemas.openxmlformats.org/officeDocument/2006/relationships}"
_NOTES_SLIDE = "notesSlide"
_TITLES = frozenset({"title", "ctrTitle"})


def load_pptx(path: Path, raw: bytes, max_bytes: int) -> LoadedDocument:
    package = Package(str(path), raw, max_bytes)
    relations = package.relations("ppt/presentation.xml")
    order = package.xml("ppt/presentation.xml").iter(f"{P}sldId")
    slides = [relations[s.get(f"{R}id", "")] for s in order if s.get(f"{R}id") in relations]
    text = DocumentText(str(path), max_bytes)
    first_title = ""
    read: dict[str, tuple[str, list[str], str]] = {}
    for number, part in enumerate(slides, start=1):
        if part not in read:  # a slide listed again is read once, and charged each time
            read[part] = (*_shapes(package.xml(part)), _notes(package, part))
        title, blocks, notes = read[part]
        first_title = first_title or title
        text.page(number)
        text.heading(1, title)
        text.blocks(blocks)
        if notes:
            text.block(f"Speaker notes: {notes}")
    return text.document(first_title or path.stem, {"slide_count": len(slides)})


def _shapes(slide: Element) -> tuple[str, list[str]]:
    """(title, other text blocks) of a slide, shapes in the order they were placed."""
    title, blocks = "", []
    tree = slide.find(f"{P}cSld/{P}spTree")
    for shape in [] if tree is None else tree.iter():
        if shape.tag == f"{P}sp":
            body = "\n".join(shape_paragraphs(shape))
            if _placeholder(shape) in _TITLES and not title:
                title = " ".join(body.split())
            else:
                blocks.append(body)
        elif shape.tag == f"{A}tbl":
            rows = [
                [" ".join(shape_paragraphs(cell)) for cell in row.findall(f"{A}tc")]
                for row in shape.findall(f"{A}tr")
            ]
            blocks.extend(rows_as_records(rows))
    return title, blocks


def shape_paragraphs(shape: Element) -> list[str]:
    """The text of each paragraph in a shape or table cell (line breaks kept)."""
    paragraphs = []
    for paragraph in shape.iter(f"{A}p"):
        parts = [
            (node.text or "") if node.tag == f"{A}t" else "\n"
            for node in paragraph.iter()
            if node.tag in (f"{A}t", f"{A}br")
        ]
        if line := "".join(parts).strip():
            paragraphs.append(line)
    return paragraphs


def _placeholder(shape: Element) -> str | None:
    found = shape.find(f"{P}nvSpPr/{P}nvPr/{P}ph")
    return None if found is None else found.get("type", "body")


def _notes(package: Package, slide: str) -> str:
    """The speaker notes of a slide: its notes page's body placeholder."""
    part = next((p for p in package.relations(slide).values() if _NOTES_SLIDE in p), None)
    if part is None or part not in package.names:
        return ""
    shapes = package.xml(part).iter(f"{P}sp")
    return "\n".join(
        line for s in shapes if _placeholder(s) == "body" for line in shape_paragraphs(s)
    )
