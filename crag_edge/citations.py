"""Where a piece of evidence sits in its document, as a reader opens it: page or section.

Ingest records a document's places (each PDF page start, each heading with its path) and
keeps with every chunk the places it spans; evidence cut from chunks is located from them
(`locate`). Every output that names a source (cited answers, the TUI, JSON, the chat API,
MCP) writes it with `locator`: `report.pdf p. 12`, `report.pdf pp. 12-13` (an en dash),
`sql-createindex.html § Index Storage Parameters`, or just the file name when the document
has no pages or headings (plain text, BEIR records, web results), and for chunks a schema
version 3 corpus file holds (they keep none until their document is re-indexed).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from crag_edge.attached import shown_name
from crag_edge.types import Chunk, Place

SECTION_SEPARATOR = " \u203a "  # "A > B" with a single angle quotation mark
# The section of a page read by OCR: a note on how its text was got, shown after the page.
RECOGNISED = "(OCR)"
# What a document's numbered places are, by file suffix (pages otherwise): (one, several).
_UNITS = {
    ".pptx": ("slide", "slides"),
    ".odp": ("slide", "slides"),
    ".xlsx": ("row", "rows"),
    ".ods": ("row", "rows"),
    ".csv": ("row", "rows"),
    ".docx": ("row", "rows"),  # documents without pages: their tables' rows
    ".docm": ("row", "rows"),
    ".odt": ("row", "rows"),
    ".html": ("row", "rows"),
    ".htm": ("row", "rows"),
    ".epub": ("row", "rows"),
}
# Where the numbered places are rows of a table that the section names (an HTML table under
# its caption), numbered within it: the section comes first, `§ Numeric Types row 3`.
_ROWS_IN_SECTION = frozenset({".html", ".htm", ".epub"})


class Locatable(Protocol):
    """Anything cited: a chunk or a context item."""

    @property
    def source(self) -> str: ...

    @property
    def pages(self) -> tuple[int, int] | None: ...

    @property
    def section(self) -> str | None: ...


@dataclass(frozen=True)
class Location:
    """A span's pages (first, last) and heading path; None where the document has none."""

    pages: tuple[int, int] | None = None
    section: str | None = None


def places_within(places: Sequence[Place], start: int, end: int) -> tuple[Place, ...]:
    """The places a span [start, end) needs to be located, and any span inside it: the one
    in effect at `start`, then every one that begins inside the span. `places` are sorted
    by offset."""
    first = max(bisect.bisect_right(places, start, key=_offset) - 1, 0)
    following = (places[i] for i in range(first, len(places)))
    return tuple(itertools.takewhile(lambda place: place.offset < end, following))


def _offset(place: Place) -> int:
    return place.offset


def locate(places: Sequence[Place], start: int, end: int) -> Location:
    """The pages [start, end) spans and the section most of its text comes from: a piece
    that opens with its headings (`## Camp` `### Water` then the text) is cited by the one
    that holds the text, a chunk that crosses into the next section by the one it mostly
    covers. Text before the first heading has no section. `places` are sorted by offset."""
    inside = places_within(places, start, end)
    pages_seen = [p.page for p in inside if p.page is not None]
    pages = (min(pages_seen), max(pages_seen)) if pages_seen else None
    share: dict[str | None, int] = {}
    bounds = [max(p.offset, start) for p in inside] + [end]
    if not inside or inside[0].offset > start:  # text before the first place
        share[None] = (inside[0].offset if inside else end) - start
    for place, (lo, hi) in zip(inside, itertools.pairwise(bounds), strict=True):
        share[place.section] = share.get(place.section, 0) + hi - lo
    section = max(share, key=share.__getitem__) if share else None
    return Location(pages, section)


def document_places(chunks: Iterable[Chunk]) -> tuple[Place, ...]:
    """The places of several chunks of one document in one sorted list, to locate a piece
    of evidence that joins text of neighbouring chunks."""
    by_offset = {place.offset: place for chunk in chunks for place in chunk.places}
    return tuple(by_offset[offset] for offset in sorted(by_offset))


def place_label(item: Locatable, *, whole_path: bool = False) -> str:
    """`p. 12`, `pp. 12-13` (en dash; `slide 7`, `rows 40-42` in decks and sheets) or
    `§ <deepest heading>`, or both (an HTML table's row after its section: `§ Numeric
    Types row 3`): what a reader searches for in the opened page (`whole_path` gives
    every heading, for a view with room for it); empty when the item has neither."""
    parts = []
    suffix = Path(item.source).suffix.lower()
    if item.pages is not None:
        first, last = item.pages
        one, several = _UNITS.get(suffix, ("p.", "pp."))
        parts.append(f"{one} {first}" if first == last else f"{several} {first}\u2013{last}")
    if item.section == RECOGNISED:
        parts.append(RECOGNISED)
    elif item.section:
        heading = item.section if whole_path else item.section.rsplit(SECTION_SEPARATOR, 1)[-1]
        parts.insert(0 if suffix in _ROWS_IN_SECTION else len(parts), f"§ {heading}")
    return " ".join(parts)


def locator(item: Locatable) -> str:
    """The source as a reader finds it: the file name (a URL or other identifier whole; an
    e-mail attachment by its message: `attached.shown_name`), then its page or section:
    `report.pdf p. 12`, `guide.md § Install`."""
    name = item.source if "://" in item.source else shown_name(item.source)
    label = place_label(item)
    return f"{name} {label}" if label else name


def location_fields(item: Locatable) -> dict[str, Any]:
    """The JSON fields every structured output adds to a cited item."""
    return {
        "pages": None if item.pages is None else list(item.pages),
        "section": item.section,
        "locator": locator(item),
    }
