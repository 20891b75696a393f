"""A PDF's page texts as a person reads them: without the running heads and page numbers
printed on every page, and with words hyphenated at line ends joined again.

Running heads and feet are found by repetition: a line among the first or last
`EDGE_LINES` of a page whose text, digits aside (`Page 3 of 40` and `Page 4 of 40` are one
line), stands at the edge of more than `RUNNING_SHARE` of the pages, and of two at least, is
furniture, not text, in a document of at least `MIN_PAGES` pages. A page number alone on its
line is such a line.

A word broken at a line's end (`infor-` / `mation`) is joined when the next line goes on in
lower case: `information`. It keeps its hyphen when the document writes the same compound
with a hyphen inside a line elsewhere (`well-known`), and is left as it is when the next line
starts with a capital or a digit (`Jean-` / `Paul`, `COVID-` / `19`).
"""

from __future__ import annotations

import re
from collections import Counter

# Where running heads and feet stand: this many lines at the top and bottom of a page.
EDGE_LINES = 2
# A line at the edge of more than this share of the pages is a running head or foot.
RUNNING_SHARE = 0.3
# Fewer pages than this cannot tell a running head from a line two pages share.
MIN_PAGES = 3
_DIGITS = re.compile(r"\d+")
_PUNCTUATION = re.compile(r"[^\w#]+")
_NUMBERS = re.compile(r"#+")
_ROMAN_PAGE = re.compile(r"x{0,3}(?:ix|iv|v?i{0,3})")  # i to xxxix: a front matter's pages
_BROKEN_WORD = re.compile(r"(\w*[a-z])-[ \t]*\n[ \t]*([a-z]\w*)")
_COMPOUND = re.compile(r"\b\w+-\w+\b")


def readable_pages(pages: list[str], running: frozenset[str] | None = None) -> list[str]:
    """`pages` without their running heads and feet (`running`: those found on them, or on
    the same pages as another extractor read them), hyphenated line ends joined."""
    running = running_lines(pages) if running is None else running
    kept = [without_running(page, running) for page in pages] if running else pages
    compounds = {found.lower() for page in kept for found in _COMPOUND.findall(page)}
    return [_join_broken_words(page, compounds) for page in kept]


def running_lines(pages: list[str]) -> frozenset[str]:
    """The keys (`_key`) of the lines standing at the edge of more than `RUNNING_SHARE` of
    the pages."""
    if len(pages) < MIN_PAGES:
        return frozenset()
    counts: Counter[str] = Counter()
    for page in pages:
        lines = page.splitlines()
        counts.update({_key(lines[index]) for index in _edges(lines)})
    least = max(RUNNING_SHARE * len(pages), 1)  # and on two pages at least
    return frozenset(key for key, count in counts.items() if key and count > least)


def _edges(lines: list[str]) -> set[int]:
    """The indexes of the first and last `EDGE_LINES` non-blank lines of a page."""
    filled = [index for index, line in enumerate(lines) if line.strip()]
    return set(filled[:EDGE_LINES] + filled[-EDGE_LINES:])


def _key(line: str) -> str:
    """A line as it recurs from page to page: lower case, its letters alone (extractors space
    a line's words differently: `DebianReference` and `Debian Reference`), each page number
    as `#`, in digits, as a fraction or in Roman numerals (`Debian Reference 27 / 233`,
    `Debian Reference xiii`)."""
    words = _DIGITS.sub("#", line.lower()).split()
    key = "".join("#" if word and _ROMAN_PAGE.fullmatch(word) else word for word in words)
    return _NUMBERS.sub("#", _PUNCTUATION.sub("", key))


def without_running(page: str, running: frozenset[str]) -> str:
    """`page` without the running lines at its edges (a line in its middle stays)."""
    lines = page.splitlines()
    edges = _edges(lines)
    kept = [line for i, line in enumerate(lines) if i not in edges or _key(line) not in running]
    return "\n".join(kept).strip()


def _join_broken_words(page: str, compounds: set[str]) -> str:
    def joined(match: re.Match[str]) -> str:
        head, tail = match.groups()
        hyphen = "-" if f"{head}-{tail}".lower() in compounds else ""
        return f"{head}{hyphen}{tail}"

    return _BROKEN_WORD.sub(joined, page)
