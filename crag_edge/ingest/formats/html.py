"""HTML pages (.html, .htm), and the HTML of EPUB chapters and e-mail bodies, read as a
person reads them: the page's own text, its headings, its tables row by row.

The text is what a browser shows, blocks on lines of their own and paragraphs apart, code
blocks (`pre`) whole with their line breaks, list items one a line. Scripts, styles and the
site around the text (`html_chrome`: navigation bars, sidebars, page headers and footers,
tables of contents) are left out. A table with column names is written one record per row
under its caption (`html_tables`); each such row is a numbered place, as a spreadsheet row
is, within a section named by the caption, so a row is cited `datatype-numeric.html § Table
8.2. Numeric Types row 3`. A page made mostly of links, or mostly of a book's index, is
navigation: indexed by its title only and marked `navigation` in its metadata, which
retrieval ranks after content. An index is left out of a page it does not fill: a manual
written as one page (makeinfo --no-split) ends with its index and is content.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

from crag_edge.ingest.formats import html_chrome
from crag_edge.ingest.formats.builder import caption_of
from crag_edge.ingest.formats.html_tables import MAX_TABLE_DEPTH, Table, span
from crag_edge.ingest.loaders import LoadedDocument, decode_text
from crag_edge.ingest.outline import Heading, Outline, short_title
from crag_edge.types import NAVIGATION

_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)


@dataclass(frozen=True)
class HtmlPage:
    """A page as read: its title, visible text, outline (headings, and each table row as a
    numbered place: `Outline.page_numbers`, None where no row is), whether it is a page of
    links, and where its links within the site lead (a language picker is told by them)."""

    title: str
    text: str
    outline: Outline
    navigation: bool
    links: frozenset[str] = frozenset()


def load_html(path: Path, raw: bytes) -> LoadedDocument:
    """A page's main text; a page of links by its title only, marked as navigation."""
    declared = _CHARSET.search(raw[:4096])
    text = decode_text(raw, str(path), declared.group(1).decode("ascii") if declared else None)
    page = read_html(text)
    title = page.title or path.stem
    if page.navigation or html_chrome.is_language_picker(path.name, page.links):
        return LoadedDocument(str(path), title, title, {NAVIGATION: True})
    return LoadedDocument(str(path), title, page.text, outline=page.outline)


def read_html(text: str) -> HtmlPage:
    """The page `text` as read (an HTML file, an EPUB chapter, an e-mail body)."""
    parser = _HtmlText()
    parser.feed(text)
    parser.close()
    return parser.page()


class _Output:
    """The text written so far: its parts, length, trailing newlines, and the places
    (headings, rows) recorded in it."""

    def __init__(self) -> None:
        self.parts: list[str] = []
        self.length = 0
        self.newlines = 0
        self.headings: list[Heading] = []
        self.page_starts: list[int] = []
        self.page_numbers: list[int | None] = []

    def write(self, data: str) -> None:
        if data:
            self.parts.append(data)
            self.length += len(data)
            stripped = data.rstrip("\n")
            self.newlines = len(data) - len(stripped) if stripped else self.newlines + len(data)

    def brk(self, count: int, *, keep_spaces: bool = False) -> None:
        """At least `count` newlines here (none at the very start)."""
        if not self.parts:
            return
        if not keep_spaces:
            last = self.parts[-1]
            self.parts[-1] = last.rstrip(" ")
            self.length -= len(last) - len(self.parts[-1])
        if count > self.newlines:
            self.write("\n" * (count - self.newlines))

    def page(self, number: int | None) -> None:
        self.page_starts.append(self.length)
        self.page_numbers.append(number)

    def result(self) -> tuple[str, Outline]:
        """The text, stripped, and its outline with offsets counted in it."""
        joined = "".join(self.parts)
        text = joined.strip()
        lead = len(joined) - len(joined.lstrip())

        def at(offset: int) -> int:
            return min(max(offset - lead, 0), len(text))

        headings = tuple(Heading(at(h.offset), h.level, h.title) for h in self.headings)
        starts = tuple(at(offset) for offset in self.page_starts)
        return text, Outline(starts, headings, tuple(self.page_numbers))


@dataclass
class _OpenHeading:
    """A heading being read: its level, where its text starts in the output, its text."""

    level: int
    offset: int | None = None
    parts: list[str] = field(default_factory=list)


@dataclass
class _Chrome:
    """An element being left out as chrome: its tag and how many of that tag are open;
    `index` when it is a book's index, whose text is counted to tell a page of index alone."""

    tag: str
    depth: int = 1
    index: bool = False


@dataclass
class _TitleBlock:
    """An element of class `title` (DocBook's table and figure titles), or a paragraph that
    may be one (`bold_only`: pandoc writes DocBook's title as a paragraph all in bold, its
    class dropped): where it started, its text, and where it ended, to name a table that
    follows it at once. `plain`: text outside bold was read in it."""

    tag: str
    start: int
    bold_only: bool = False
    plain: bool = False
    parts: list[str] = field(default_factory=list)
    end: int | None = None


class _HtmlText(HTMLParser):
    """Collects the main text, the <title>, the headings and the tables of (possibly
    broken) HTML; a heading that never closes is not one (nothing says where it ends)."""

    _SKIP = frozenset({"script", "style", "noscript", "template", "svg"})
    _PARAGRAPH = frozenset(
        {"p", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "table", "ul", "ol",
         "dl", "section", "article", "header", "footer", "main", "aside", "nav", "figure",
         "hr", "form", "details", "body"}
    )  # fmt: skip
    _LINE = frozenset(
        {"br", "div", "li", "tr", "dt", "dd", "figcaption", "summary", "address", "option",
         "legend"}
    )  # fmt: skip
    _HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
    _BOLD = frozenset({"b", "strong"})
    _VOID = frozenset({"br", "hr", "img", "meta", "link", "input", "wbr", "col", "source"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._out = _Output()
        self._skip = 0
        self._pre = 0
        self._sections = 0
        self._links = 0
        self._anchor = False  # inside a link to a place on this page
        self._chrome: _Chrome | None = None
        self._title: list[str] | None = None
        self._titles: list[str] = []
        self._heading: _OpenHeading | None = None
        self._open: list[Heading] = []  # the heading path in effect
        self._tables: list[Table] = []
        self._flat_tables = 0  # tables nested past MAX_TABLE_DEPTH: their cells are the outer's
        self._table_title: _TitleBlock | None = None
        self._bold = 0  # open b and strong elements
        self._redirect = False
        self._index_chars = 0  # the text of a book's index, left out
        self._link_chars = 0
        self._text_chars = 0
        self._targets: set[str] = set()  # where the links within the site lead

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._close_title()
        if self._chrome is not None:
            self._chrome.depth += tag == self._chrome.tag
            return
        if tag == "title" and not self._titles:
            self._title = []
        elif tag == "meta":
            self._redirect = self._redirect or html_chrome.is_redirect(attrs)
        elif tag in self._SKIP:
            self._skip += 1
        elif html_chrome.is_chrome(tag, attrs, self._sections > 0) or html_chrome.is_index(attrs):
            if tag not in self._VOID:
                self._chrome = _Chrome(tag, index=html_chrome.is_index(attrs))
            return
        self._open_tag(tag, attrs)

    def _open_tag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in html_chrome.SECTIONING:
            self._sections += 1
        elif tag == "a" and (href := dict(attrs).get("href")) is not None:
            internal = html_chrome.is_internal(href)
            self._links += internal
            self._anchor = href.startswith("#")
            if internal:
                self._targets.add(href)
        elif tag == "pre":
            self._pre += 1
        elif tag in self._HEADINGS and not self._tables:
            self._heading = _OpenHeading(int(tag[1]))
        elif "title" in (dict(attrs).get("class") or "").split() and not self._tables:
            self._table_title = _TitleBlock(tag, self._out.length)
        elif tag == "p" and not self._tables:
            self._table_title = _TitleBlock(tag, self._out.length, bold_only=True)
        elif tag in self._BOLD:
            self._bold += 1
        if self._table_tag(tag, attrs):
            return
        self._block(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._chrome is None:
            self.handle_starttag(tag, attrs)
            if tag not in self._VOID:
                self.handle_endtag(tag)

    def parse_marked_section(self, i: int, report: int = 1) -> int:
        """Skip `<![...]>` sections: the stdlib asserts on any it does not know (`<![if`)."""
        closing = "]]>" if self.rawdata.startswith("<![CDATA[", i) else ">"
        end = self.rawdata.find(closing, i + 3)
        return -1 if end < 0 else end + len(closing)

    def handle_endtag(self, tag: str) -> None:
        if self._chrome is not None:
            self._chrome.depth -= tag == self._chrome.tag
            if self._chrome.depth <= 0:
                self._chrome = None
            return
        if tag == "title":
            self._close_title()
        elif tag in self._SKIP:
            self._skip = max(0, self._skip - 1)
        elif tag in html_chrome.SECTIONING:
            self._sections = max(0, self._sections - 1)
        elif tag == "a":
            self._links, self._anchor = max(0, self._links - 1), False
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)
        elif tag in self._HEADINGS:
            self._close_heading()
        elif tag in self._BOLD:
            self._bold = max(0, self._bold - 1)
        block = self._table_title
        if block is not None and tag == block.tag and block.end is None:
            block.end = self._out.length
        if tag == "table" or tag == "caption":
            self._table_end(tag)
        elif tag == "thead" and self._tables:  # rows after it are the body's, tbody or not
            self._tables[-1].in_head = False
        self._block(tag)

    def handle_data(self, data: str) -> None:
        if self._title is not None:
            self._title.append(data)
            return
        if self._chrome is not None and self._chrome.index:
            self._index_chars += len(data.strip())
        if self._skip or self._chrome is not None:
            return
        if self._anchor and html_chrome.SKIP_LINK.match(data):
            return
        if not self._pre:
            data = re.sub(r"\s+", " ", data)
            if not self._tables and (self._out.newlines or not self._out.parts):
                data = data.lstrip(" ")
        self._count(data)
        if self._tables:
            self._tables[-1].add(data)
            return
        if self._heading is not None and data.strip():
            if self._heading.offset is None:
                self._heading.offset = self._out.length + len(data) - len(data.lstrip())
            self._heading.parts.append(data)
        block = self._table_title
        if block is not None and block.end is None:
            block.parts.append(data)
            block.plain = block.plain or (block.bold_only and not self._bold and bool(data.strip()))
        self._out.write(data)

    def close(self) -> None:
        super().close()
        while self._tables:  # tables a broken page never closed
            self._table_end("table")

    def page(self) -> HtmlPage:
        self._close_title()
        h1s = [h.title for h in self._out.headings if h.level == 1]
        title = next((t for t in self._titles + h1s if t), "")
        text, outline = self._out.result()
        navigation = (
            self._redirect
            or self._index_chars > self._text_chars
            or html_chrome.is_navigation(self._link_chars, self._text_chars)
        )
        return HtmlPage(title, text, outline, navigation, frozenset(self._targets))

    def _count(self, data: str) -> None:
        """Count the page's visible characters, and those of link text."""
        visible = len(data.strip())
        self._text_chars += visible
        if self._links:
            self._link_chars += visible

    def _block(self, tag: str) -> None:
        if (tag not in self._PARAGRAPH and tag not in self._LINE) or self._skip:
            return
        if self._tables:
            self._tables[-1].add("\n")
        else:
            self._out.brk(2 if tag in self._PARAGRAPH else 1, keep_spaces=self._pre > 0)

    def _table_tag(self, tag: str, attrs: list[tuple[str, str | None]]) -> bool:
        """Open a table's part; whether `tag` was one."""
        if tag == "table":
            if len(self._tables) < MAX_TABLE_DEPTH:
                self._tables.append(Table())
            else:
                self._flat_tables += 1
            return True
        if not self._tables:
            return False
        table = self._tables[-1]
        if tag == "caption":
            table.caption_parts = []
        elif tag in ("thead", "tbody", "tfoot"):
            table.in_head = tag == "thead"
        elif tag == "tr":
            table.start_row()
        elif tag in ("td", "th"):
            values = dict(attrs)
            table.start_cell(tag == "th", span(values.get("colspan")), span(values.get("rowspan")))
        else:
            return False
        return True

    def _table_end(self, tag: str) -> None:
        if not self._tables:
            return
        if tag == "table" and self._flat_tables:
            self._flat_tables -= 1
            return
        if tag == "caption":
            self._tables[-1].close_caption()
            return
        table = self._tables.pop()
        table.close_caption()
        if self._tables:  # a table in a cell: its text is the cell's
            rendered = table.render("")
            self._tables[-1].add("\n".join(["", *rendered.lead, *rendered.rows, ""]))
        else:
            self._write_table(table)

    def _write_table(self, table: Table) -> None:
        """A top-level table: records under its caption, each row a numbered place; or,
        without column names, its rows as lines."""
        out = self._out
        titled = self._preceding_title()
        caption = table.caption or (titled.text if titled else "")
        rendered = table.render(caption or (self._open[-1].title if self._open else ""))
        out.brk(2)
        if not rendered.named:
            out.write("\n".join(row for row in rendered.rows if row))
            out.brk(2)
            return
        if caption:
            self._section(titled.start if titled and not table.caption else out.length, caption)
        for line in rendered.lead:
            out.write(line)
            out.brk(2)
        for number, row in enumerate(rendered.rows, start=1):
            out.page(number)
            out.write(row)
            out.brk(2)
        out.page(None)
        if caption:
            self._end_section()

    def _preceding_title(self) -> _Caption | None:
        """The title block just before a table (nothing written between them), if any."""
        block, self._table_title = self._table_title, None
        out = self._out
        if block is None or block.end is None or out.length - block.end > out.newlines:
            return None
        text = " ".join("".join(block.parts).split())
        if block.bold_only and (block.plain or not caption_of(text)):
            return None
        return _Caption(block.start, text) if text else None

    def _section(self, offset: int, title: str) -> None:
        """A table's caption as a section one level below the heading in effect."""
        level = min(self._open[-1].level + 1, 6) if self._open else 1
        self._out.headings.append(Heading(offset, level, short_title(title)))

    def _end_section(self) -> None:
        """Back to the heading in effect before the table's caption (none: an empty title
        closes the caption's section)."""
        back = self._open[-1] if self._open else Heading(0, 1, "")
        self._out.headings.append(Heading(self._out.length, back.level, back.title))

    def _close_title(self) -> None:
        if self._title is not None:
            self._titles.append(short_title(" ".join("".join(self._title).split())))
            self._title = None

    def _close_heading(self) -> None:
        heading, self._heading = self._heading, None
        if heading is not None and heading.offset is not None:
            title = short_title(" ".join("".join(heading.parts).split()))
            found = Heading(heading.offset, heading.level, title)
            self._out.headings.append(found)
            while self._open and self._open[-1].level >= found.level:
                self._open.pop()
            self._open.append(found)


@dataclass(frozen=True)
class _Caption:
    """A table's title block: where it starts in the text (its section starts there too)."""

    start: int
    text: str
