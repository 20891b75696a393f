"""ZIP containers (Office Open XML, OpenDocument, EPUB) opened from bytes, bounded before
anything is decompressed, and their XML parsed without entities.

A zip bomb (a kilobyte that unpacks to gigabytes, or a million members) is refused from the
central directory's sizes, and no member is ever read past its recorded size (`zipfile`
stops there and checks its CRC). XML is parsed with `defusedxml`: a document type that
declares entities (billion laughs, quadratic blow-up) or reaches outside (external entities)
is refused, never expanded or fetched.
"""

from __future__ import annotations

import io
import posixpath
import zipfile
import zlib
from collections.abc import Callable, Iterator
from typing import IO, TypeVar
from xml.etree.ElementTree import Element, ParseError

import defusedxml
import defusedxml.ElementTree as SafeXml

from crag_edge.ingest.loaders import LoadError

# At most this many members: real documents hold tens to a few thousand (an EPUB's images).
MAX_MEMBERS = 10_000
# Unpacked, a container may hold this many times `max_document_bytes` (XML is verbose: a
# sheet's XML is ~10x its text); more is refused as a zip bomb.
EXPANSION = 20
_RELS = "{http://schemas.openxmlformats.org/package/2006/relationships}"
_FALLBACK = "{http://schemas.openxmlformats.org/markup-compatibility/2006}Fallback"
# Elements nested deeper than this are refused: documents nest a few tens of levels (a table
# in a table adds four), and the readers of their parts recurse once per level.
MAX_XML_DEPTH = 256
# A container's parts may hold one XML element per this many bytes of `max_document_bytes`
# (at least `MIN_ELEMENTS`): markup that carries no text (a million empty paragraphs) costs
# time and memory all the same (docs/formats.md, "Files that amplify"). Office documents hold
# about one per 10 to 20 characters of text, and a few thousand of styles and themes.
BYTES_PER_ELEMENT = 8
# A sheet of numbers holds one element per ~3 bytes of its records' text.
SHEET_BYTES_PER_ELEMENT = 2
MIN_ELEMENTS = 100_000
T = TypeVar("T")
XML_BOMB = "its XML declares entities or external references; refused (an XML bomb or XXE)"


class Package:
    """A ZIP container whose members are read by name; every failure is a `LoadError`."""

    def __init__(
        self, source: str, raw: bytes, max_bytes: int, bytes_per_element: int = BYTES_PER_ELEMENT
    ) -> None:
        self.source = source
        try:
            self._zip = zipfile.ZipFile(io.BytesIO(raw))
            members = self._zip.infolist()
        except (zipfile.BadZipFile, EOFError, ValueError, OSError) as exc:
            raise LoadError(source, f"damaged or truncated ZIP container ({exc})") from None
        if len(members) > MAX_MEMBERS:
            raise LoadError(
                source,
                f"{len(members):,} files inside, over {MAX_MEMBERS:,}; refused (a zip bomb?)",
            )
        unpacked, limit = sum(m.file_size for m in members), EXPANSION * max_bytes
        if unpacked > limit:
            raise LoadError(
                source,
                f"unpacks to {unpacked:,} bytes, over {limit:,} ({EXPANSION} x "
                "max_document_bytes); refused (a zip bomb?)",
            )
        self.names = frozenset(m.filename for m in members)
        self.max_bytes = max_bytes
        self.budget = ElementBudget(source, max_bytes, bytes_per_element)

    def read(self, name: str) -> bytes:
        with self.open(name) as member:
            return self._guarded(member.read)

    def open(self, name: str) -> IO[bytes]:
        """A member to stream (a large sheet); reading it may raise `LoadError` too."""
        if name not in self.names:
            raise LoadError(self.source, f"damaged document: {name} is missing")
        return self._guarded(lambda: self._zip.open(name))

    def xml(self, name: str) -> Element:
        """A member's XML without `mc:Fallback` copies: Office writes a shape or text box
        twice (for newer and older readers), and only the first is the document's."""
        return _without_fallbacks(parse_xml(self.source, self.read(name), name, self.budget))

    def events(self, name: str, events: tuple[str, ...]) -> Iterator[tuple[str, Element]]:
        """(event, element) of a member, read as it streams (a large sheet)."""
        with self.open(name) as stream:
            yield from iterparse(self.source, stream, events, name, self.budget)

    def stream(self, name: str, tag: str) -> Iterator[Element]:
        """Each `tag` element of a member once it is whole; it is then dropped from the tree
        with its siblings before it (so a million rows are never held at once)."""
        for element, parent in self._closing(name):
            if element.tag == tag:
                yield element
                if parent is not None:
                    parent.clear()

    def children(self, name: str, parent: str) -> Iterator[Element]:
        """Each child of the `parent` elements of a member, in order, once it is whole; it is
        then dropped from the tree (a document's body, paragraph by paragraph)."""
        for element, holder in self._closing(name):
            if holder is not None and holder.tag == parent:
                yield _without_fallbacks(element)
                holder.remove(element)

    def _closing(self, name: str) -> Iterator[tuple[Element, Element | None]]:
        """Each element of a member as it closes, with the element holding it (None: the
        root)."""
        open_elements: list[Element] = []
        for event, element in self.events(name, ("start", "end")):
            if event == "start":
                open_elements.append(element)
                continue
            open_elements.pop()
            yield element, open_elements[-1] if open_elements else None

    def relations(self, part: str) -> dict[str, str]:
        """Relationship id -> member name of an Office part (`ppt/slides/slide1.xml`)."""
        folder, name = posixpath.split(part)
        rels = posixpath.join(folder, "_rels", name + ".rels")
        if rels not in self.names:
            return {}
        return {
            rel.get("Id", ""): member_path(folder, rel.get("Target", ""))
            for rel in self.xml(rels).iter(f"{_RELS}Relationship")
        }

    def _guarded(self, read: Callable[[], T]) -> T:
        try:
            return read()
        except RuntimeError as exc:  # zipfile: "File is encrypted, password required"
            raise LoadError(self.source, f"password-protected ({exc})") from None
        except (zipfile.BadZipFile, zlib.error, EOFError, OSError) as exc:
            raise LoadError(self.source, f"damaged or truncated ZIP container ({exc})") from None


def _without_fallbacks(root: Element) -> Element:
    """`root` without the `mc:Fallback` copies of what it holds (`Package.xml`)."""
    if not len(root):  # an empty paragraph: a body may hold millions
        return root
    for parent in root.iter():
        for child in [c for c in parent if c.tag == _FALLBACK]:
            parent.remove(child)
    return root


def member_path(folder: str, target: str) -> str:
    """A relationship's target as a member name: relative to `folder`, or from the root."""
    if target.startswith("/"):
        return target.lstrip("/")
    return posixpath.normpath(posixpath.join(folder, target))


class ElementBudget:
    """How many more XML elements the parts of one container may hold (`BYTES_PER_ELEMENT`)."""

    def __init__(self, source: str, max_bytes: int, bytes_per_element: int) -> None:
        self.source = source
        self.per = bytes_per_element
        self.limit = max(MIN_ELEMENTS, max_bytes // bytes_per_element)
        self.left = self.limit

    def spend(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise LoadError(
                self.source,
                f"its XML holds over {self.limit:,} elements (one per {self.per} bytes of "
                "max_document_bytes); refused (markup that amplifies)",
            )


def parse_xml(source: str, data: bytes, name: str, budget: ElementBudget | None = None) -> Element:
    """`data` parsed with no entity expansion, no external references, no nesting past
    `MAX_XML_DEPTH` and no more elements than `budget` allows."""
    events = iterparse(source, io.BytesIO(data), ("start",), name, budget)
    _, root = next(events)
    for _ in events:
        pass
    return root


def iterparse(
    source: str,
    stream: IO[bytes],
    events: tuple[str, ...],
    name: str,
    budget: ElementBudget | None = None,
) -> Iterator[tuple[str, Element]]:
    """(event, element) of an XML member (`name`), read as it streams; elements nested past
    `MAX_XML_DEPTH` are refused before anything recurses into them, and elements past the
    `budget` before they are held."""
    where = f" in {name}" if name else ""
    depth = 0
    try:
        for event, element in SafeXml.iterparse(stream, events=("start", "end"), forbid_dtd=False):
            if event == "start":
                depth += 1
                if budget is not None:
                    budget.spend()
            else:
                depth -= 1
            if depth > MAX_XML_DEPTH:
                deep = f"its XML nests over {MAX_XML_DEPTH} levels deep{where}"
                raise LoadError(source, deep + "; refused (a parser bomb?)")
            if event in events:
                yield event, element
    except defusedxml.DefusedXmlException:
        raise LoadError(source, XML_BOMB) from None
    except ParseError as exc:
        raise LoadError(source, f"damaged XML{where} ({exc})") from None
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise LoadError(source, f"damaged or truncated ZIP container ({exc})") from None
