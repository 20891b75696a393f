"""A document's structure map: where its PDF pages start and where its headings stand.

Loaders return an `Outline` beside the text; ingest turns it into places (`outline_places`)
and keeps with each chunk the places it spans, which is what lets a citation say
`report.pdf p. 12` or `guide.md § Install` (`crag_edge.citations`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from crag_edge.citations import SECTION_SEPARATOR
from crag_edge.types import Place

# A title is a label: longer ones are cut after a whole word (`short_title`).
MAX_TITLE_CHARS = 300


@dataclass(frozen=True)
class Heading:
    """A heading of `level` (1 = top) whose line starts at `offset` in the document text
    (where a chunk that opens with the heading starts too)."""

    offset: int
    level: int
    title: str


@dataclass(frozen=True)
class Outline:
    """Offsets of each page's first character (PDF) and the headings (HTML, Markdown).
    A page is whatever a reader turns to by number: a PDF page, a slide, a spreadsheet row.
    Pages are numbered 1, 2, ... in order, or by `page_numbers` (one per start) when the
    numbers skip (a sheet's empty rows) or restart (each sheet's rows, each table's); a
    None number ends the page before it (the text after a table's rows is on none)."""

    page_starts: tuple[int, ...] = ()
    headings: tuple[Heading, ...] = ()
    page_numbers: tuple[int | None, ...] = ()


def outline_places(outline: Outline) -> list[Place]:
    """One place per offset where the page or the heading path changes, in text order; a
    heading closes every open heading of its level or deeper."""
    numbers = outline.page_numbers or range(1, len(outline.page_starts) + 1)
    events = sorted(
        [(offset, 0, page, None) for page, offset in zip(numbers, outline.page_starts, strict=True)]
        + [(h.offset, 1, 0, h) for h in outline.headings],
        key=lambda event: (event[0], event[1]),
    )
    places: list[Place] = []
    page: int | None = None
    open_headings: list[Heading] = []
    for offset, _, number, heading in events:
        if heading is None:
            page = number
        else:
            while open_headings and open_headings[-1].level >= heading.level:
                open_headings.pop()
            open_headings.append(heading)
        path = SECTION_SEPARATOR.join(h.title for h in open_headings) or None
        if places and places[-1].offset == offset:
            places.pop()
        places.append(Place(offset, page, path))
    return places


def markdown_headings(text: str) -> tuple[Heading, ...]:
    """ATX (`## Title`) and setext (a line underlined with === or ---) headings, outside
    fenced code (a `# comment` in a shell example is not a heading). `text` has no front
    matter (`split_front_matter`)."""
    headings: list[Heading] = []
    fence: str | None = None
    previous: tuple[int, str] | None = None  # the last paragraph line: a setext candidate
    offset = 0
    for line in text.splitlines(keepends=True):
        start, stripped = offset, line.rstrip("\n")
        offset += len(line)
        if fence is not None:
            fence = None if _closes(stripped, fence) else fence
            continue
        if opening := _FENCE.match(stripped):
            fence, previous = opening.group(1), None
        elif atx := _ATX.match(stripped):
            title = _inline_text(_without_closing_hashes(atx.group(2)))
            if title:
                headings.append(Heading(start + atx.start(1), len(atx.group(1)), title))
            previous = None
        elif previous is not None and (underline := _SETEXT.match(stripped)):
            level = 1 if underline.group(1).startswith("=") else 2
            headings.append(Heading(previous[0], level, _inline_text(previous[1])))
            previous = None
        else:
            previous = _paragraph_line(start, stripped)
    return tuple(headings)


# Each pattern is tried from every start on a line of any length (a minified paragraph, a
# hostile file), so none may scan past where the next attempt would start: `(.*)` takes the
# rest of the line at once, and a link's text and target stop at the next bracket.
_ATX = re.compile(r" {0,3}(#{1,6})[ \t]+(.*)")
_SETEXT = re.compile(r" {0,3}(=+|-{2,})[ \t]*$")
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")
_NOT_PARAGRAPH = re.compile(r" {0,3}(?:[-*+>|]|\d+[.)])(?:\s|$)| {4}|\t")
_LINK = re.compile(r"!?\[([^\[\]]*)\]\([^()]*\)")
_MARKUP = re.compile(r"`|\*\*|__")


def split_front_matter(text: str) -> tuple[str, str]:
    """(front matter, the rest) of a Markdown text: the leading `---` YAML block of a site
    generator (Jekyll, Hugo, MkDocs) holds its settings (`layout: post`, tags, dates), not
    the page's text, so it is neither indexed nor shown as evidence. ("", text) without one."""
    if not text.startswith("---\n"):
        return "", text
    end = re.search(r"^(?:---|\.\.\.)[ \t]*$", text[4:], re.MULTILINE)
    if end is None:
        return "", text
    cut = min(len(text), 4 + end.end() + 1)
    return text[:cut], text[cut:]


def front_matter_title(front_matter: str) -> str | None:
    """The page's `title:` in its front matter (quotes removed), if it has one."""
    found = _FRONT_MATTER_TITLE.search(front_matter)
    title = _inline_text(found.group(1).strip().strip("\"'")) if found else ""
    return title or None


_FRONT_MATTER_TITLE = re.compile(r"^title:[ \t]*(.*)$", re.MULTILINE)


def _closes(line: str, fence: str) -> bool:
    closing = line.strip()
    return closing.startswith(fence) and set(closing) == {fence[0]}


def _paragraph_line(start: int, line: str) -> tuple[int, str] | None:
    """(offset of its text, text) for a line a setext underline can turn into a heading."""
    if not line.strip() or _NOT_PARAGRAPH.match(line):
        return None
    return start + len(line) - len(line.lstrip()), line.strip()


def _without_closing_hashes(title: str) -> str:
    """An ATX heading's text without its optional closing `#`s (`## Install ##`), which
    close it only after a blank or alone (`# C#` keeps its `#`)."""
    title = title.rstrip(" \t")
    bare = title.rstrip("#")
    return bare if not bare or bare[-1] in " \t" else title


def _inline_text(title: str) -> str:
    """A heading's words without link targets, code ticks or bold markers, as a short title."""
    return short_title(" ".join(_MARKUP.sub("", _LINK.sub(r"\1", title)).split()))


def short_title(title: str) -> str:
    """`title` up to its last whole word within `MAX_TITLE_CHARS`, marked as cut with "…".
    A title is a label: a document's is embedded with each of its chunks, a heading's stored
    with each chunk of its section, so a paragraph taken for one (a long line above `---`,
    a page-long <title>) would be copied thousands of times and crowd out the chunk's text."""
    if len(title) <= MAX_TITLE_CHARS:
        return title
    cut = title.rfind(" ", 0, MAX_TITLE_CHARS)
    return title[: cut if cut > 0 else MAX_TITLE_CHARS].rstrip() + "\u2026"
