"""How much of an HTML manual's site chrome reaches the index, and how much of its content
does (docs/formats.md, "Main content only").

For each folder of HTML pages (one manual), every page is read by the HTML loader and cut
into chunks by the ingest chunker with the embedder's tokenizer and the default chunk
settings: the chunks ingest stores. Against them it sets the page's raw text, read as the
loader read it before chrome was left out (every visible text, blocks on lines of their own):

- a chrome line is a line of raw text found on more than 30 % of the manual's pages, but
  for the labels named with `--label` (an admonition's title, `Note`, `See also`, recurs
  as much: it is the text's, and is listed with the lines found, to check by hand);
- chunks that are only chrome: every line of the chunk is a chrome line;
- chunks with chrome: at least one line of the chunk is a chrome line;
- content words kept: of a sample of pages (not navigation), the distinct words of their
  raw text outside chrome lines and lines of links (half or more of the line's text is
  link text: a table of contents' entries, a Next/Previous bar) that the page's indexed
  text still holds; the words lost are listed, to check by hand.

    python scripts/chrome_report.py /usr/share/doc/diffutils [...] [--sample 20] [--json]
        [--label Note --label "See also" ...]

`--compare` runs crag-edge's rule and the extractors on PyPI that are installed
(trafilatura, readability-lxml, jusText) on the same sample: content words kept, chrome lines
left, headings kept, milliseconds per page.

A PDF given instead of a folder is a manual whose pages are the PDF's: its raw lines are each
page's text as poppler's `pdftotext` reads it (`apt-get install poppler-utils`; numbers in
a line counted as one, so `Page 3` and `Page 4` are one recurring line), its indexed text
each page's text as the PDF loader gives it.

`--repeated` lists the lines of the loader's output (chrome left out by structure) that recur
on more than 30 % of the content pages of one folder, and on three at least: what a rule
telling chrome by repetition would leave out, to read by hand.

`--speed` times the loader alone over the folders and counts the chunks and tokens it gives
(embedding, the most of ingest's time, costs by token); run it with `PYTHONPATH` set to
another checkout to compare two versions of the loader.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import re
import subprocess
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from html.parser import HTMLParser
from pathlib import Path

from crag_edge.config import Settings
from crag_edge.ingest import Chunker, LoadError, load_file
from crag_edge.models.registry import load_embedder

CHROME_SHARE = 0.3  # a line on more than this share of a manual's pages is chrome
MAX_BYTES = 10_000_000
_WORD = re.compile(r"\w+")
_NUMBER = re.compile(r"\b\d+\b")  # a number of its own, not the digits of a word ("amd64")
_HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})


class RawText(HTMLParser):
    """Every visible text of a page, blocks on lines of their own, table cells side by side:
    what the loader indexed before it left chrome out; with each line, how much of it is
    the text of links."""

    _SKIP = frozenset({"script", "style", "noscript", "template", "svg", "title"})
    _BLOCKS = frozenset(
        {"p", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "table", "ul", "ol",
         "dl", "section", "article", "header", "footer", "main", "aside", "nav", "figure",
         "hr", "form", "details", "body", "br", "div", "li", "tr", "dt", "dd", "figcaption",
         "summary", "caption", "address", "option", "legend"}
    )  # fmt: skip

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.done: list[tuple[str, float]] = []  # (line, share of it that is link text)
        self._line: list[str] = []
        self._link_chars = 0
        self._skip = 0
        self._links = 0
        self.headings: list[str] = []
        self._heading: list[str] | None = None
        self.in_chrome: set[str] = set()  # lines inside what the rule leaves out as chrome
        self._chrome: list[str] = []  # the chrome element open, and its tag's nested copies
        self._line_in_chrome = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._skip += tag in self._SKIP
        self._links += tag == "a" and dict(attrs).get("href") is not None
        self._open_chrome(tag, attrs)
        if tag in _HEADINGS:
            self._heading = []
        self._boundary(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self._SKIP:
            self._skip = max(0, self._skip - 1)
        if tag == "a":
            self._links = max(0, self._links - 1)
        if self._chrome and tag == self._chrome[0]:
            self._chrome.pop()
        if tag in _HEADINGS and self._heading is not None:
            self.headings.append(_line("".join(self._heading)))
            self._heading = None
        self._boundary(tag)

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self._line_in_chrome = self._line_in_chrome or bool(self._chrome and data.strip())
            self._line.append(data)
            if self._heading is not None:
                self._heading.append(data)
            self._link_chars += len(data.strip()) if self._links else 0

    def _boundary(self, tag: str) -> None:
        if tag in ("td", "th"):
            self._line.append(" ")
        elif tag in self._BLOCKS:
            self._end_line()

    def _end_line(self) -> None:
        line = _line("".join(self._line))
        if line:
            self.done.append((line, self._link_chars / len(line)))
            if self._line_in_chrome:
                self.in_chrome.add(line)
        self._line, self._link_chars, self._line_in_chrome = [], 0, False

    def _open_chrome(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        """Follow the elements crag-edge's rule leaves out (`formats.html_chrome`), to tell
        the words lost with them from words lost otherwise."""
        from crag_edge.ingest.formats import html_chrome  # not in a checkout before the rule

        if self._chrome:
            self._chrome += [tag] if tag == self._chrome[0] else []
        elif tag not in ("br", "hr", "img", "input") and html_chrome.is_chrome(tag, attrs, False):
            self._chrome.append(tag)

    def lines(self) -> list[tuple[str, float]]:
        self._end_line()
        return self.done


def _line(text: str) -> str:
    return " ".join(text.split())


def _has(text: str, heading: str) -> bool:
    """Whether `text` holds `heading`'s words in a row (a permalink's ¶ aside)."""
    return " ".join(_WORD.findall(heading)) in " ".join(_WORD.findall(text))


def _words(text: str) -> set[str]:
    return {word.lower() for word in _WORD.findall(text)}


@dataclass
class Page:
    path: Path
    raw_lines: list[tuple[str, float]]  # (line, share of link text)
    text: str
    navigation: bool
    chunks: list[str]
    headings: list[str]
    html: str
    in_chrome: set[str]


@dataclass
class Report:
    manual: str
    pages: int
    navigation_pages: int
    chunks: int
    chrome_lines: int
    chunks_only_chrome: int
    chunks_with_chrome: int
    share_with_chrome: float
    sampled_pages: int
    content_words: int
    content_words_kept: int
    share_kept: float
    share_kept_outside_chrome: float  # the same, not counting what the rule left out
    lost_words: dict[str, list[str]] = field(default_factory=dict)
    frequent_chrome: list[str] = field(default_factory=list)
    chrome_in_chunks: dict[str, int] = field(default_factory=dict)  # line -> chunks holding it
    labels_found: list[str] = field(default_factory=list)


def read_manual(folder: Path, chunker: Chunker) -> list[Page]:
    pages = []
    for path in sorted([*folder.rglob("*.html"), *folder.rglob("*.htm")]):
        raw = path.read_bytes()
        parser = RawText()
        parser.feed(raw.decode("utf-8", "replace"))  # the raw text, as before the rule
        parser.close()
        try:
            doc = load_file(path, raw, MAX_BYTES)
        except LoadError:
            continue
        chunks = [span.text for span in chunker.split(doc.text)]
        navigation = bool(doc.metadata.get("navigation"))
        html = raw.decode("utf-8", "replace")
        lines = parser.lines()
        pages.append(
            Page(path, lines, doc.text, navigation, chunks, parser.headings, html, parser.in_chrome)
        )
    return pages


def read_pdf_manual(path: Path, chunker: Chunker) -> list[Page]:
    """A PDF's pages as the manual's pages: each page as poppler's `pdftotext` reads it (a
    reader apart from the loader's, which spaces words well) against the page's text as
    loaded; each chunk counted with the page it starts on."""
    raw = path.read_bytes()
    printed = subprocess.run(
        ["pdftotext", "-enc", "UTF-8", str(path), "-"], capture_output=True, check=True
    ).stdout.decode("utf-8", "replace")
    doc = load_file(path, raw, MAX_BYTES)
    starts = [*doc.outline.page_starts, len(doc.text)]
    pages = []
    for number, layer in enumerate(printed.split("\f")[: len(starts) - 1]):
        text = doc.text[starts[number] : starts[number + 1]]
        lines = [(_pdf_line(line), 0.0) for line in layer.splitlines() if line.strip()]
        pages.append(Page(path, lines, text, False, [], [], "", set()))
    # A chunk's line is a raw line when it differs from one only in its spaces (readers of
    # text layers space words differently: "DebianReference" and "Debian Reference").
    as_raw = {_spaceless(line): line for page in pages for line, _ in page.raw_lines}
    for span in chunker.split(doc.text):
        on = min(max(bisect.bisect_right(starts, span.start) - 1, 0), len(pages) - 1)
        lines = (_pdf_line(line) for line in span.text.split("\n"))
        pages[on].chunks.append("\n".join(as_raw.get(_spaceless(ln), ln) for ln in lines))
    for number, page in enumerate(pages, start=1):
        page.path = path.with_name(f"{path.name} p. {number}")
    return pages


def _pdf_line(line: str) -> str:
    """A PDF line as it recurs from page to page: its numbers as `#`."""
    return _NUMBER.sub("#", _line(line))


def _spaceless(line: str) -> str:
    return "".join(line.split())


def chrome_lines(pages: list[Page], labels: set[str]) -> tuple[set[str], Counter[str]]:
    """The lines on more than `CHROME_SHARE` of the pages but `labels`, and on how many
    pages each line is."""
    on_pages: Counter[str] = Counter()
    for page in pages:
        on_pages.update({line for line, _ in page.raw_lines if _WORD.search(line)})
    limit = CHROME_SHARE * len(pages)
    frequent = {line for line, count in on_pages.items() if count > limit}
    return frequent - labels, on_pages


def report(folder: Path, pages: list[Page], sample: int, labels: set[str]) -> Report:
    chrome, counts = chrome_lines(pages, labels)
    chunks = [chunk for page in pages for chunk in page.chunks]
    only = with_chrome = 0
    found: Counter[str] = Counter()
    for chunk in chunks:
        lines = [line for line in map(_line, chunk.split("\n")) if line]
        hits = [line for line in lines if line in chrome]
        only += bool(lines) and len(hits) == len(lines)
        with_chrome += bool(hits)
        found.update(set(hits))
    chosen = _sample(pages, sample)
    kept, total, lost = _retention(chosen, chrome)
    kept_outside, total_outside, _ = _retention(chosen, chrome, outside_rule=True)
    return Report(
        str(folder),
        len(pages),
        sum(page.navigation for page in pages),
        len(chunks),
        len(chrome),
        only,
        with_chrome,
        round(with_chrome / max(len(chunks), 1), 4),
        min(sample, sum(not page.navigation for page in pages)),
        total,
        kept,
        round(kept / max(total, 1), 4),
        round(kept_outside / max(total_outside, 1), 4),
        lost,
        sorted(chrome, key=lambda line: -counts[line])[:8],
        dict(found.most_common(10)),
        sorted(labels & set(counts)),
    )


def _sample(pages: list[Page], count: int) -> list[Page]:
    """`count` pages of content spread evenly over the manual (sorted by path)."""
    content = [page for page in pages if not page.navigation]
    step = max(len(content) / max(count, 1), 1)
    return [content[int(i * step)] for i in range(min(count, len(content)))]


def _retention(
    pages: list[Page], chrome: set[str], *, outside_rule: bool = False
) -> tuple[int, int, dict[str, list[str]]]:
    """(content words kept, content words, the words each page lost); `outside_rule`: not
    counting the words of what the rule leaves out as chrome."""
    kept = total = 0
    lost: dict[str, list[str]] = {}
    for page in pages:
        left_out = page.in_chrome if outside_rule else set()
        prose = (
            line
            for line, links in page.raw_lines
            if line not in chrome and links < 0.5 and line not in left_out
        )
        wanted = _words(" ".join(prose))
        missing = wanted - _words(page.text)
        total += len(wanted)
        kept += len(wanted) - len(missing)
        if missing:
            lost[page.path.name] = sorted(missing)[:20]
    return kept, total, lost


def extractors() -> dict[str, Callable[[str], str]]:
    """HTML to main text: crag-edge's rule, and each PyPI extractor that is installed."""
    from crag_edge.ingest.formats.html import read_html  # not in a checkout before the rule

    found: dict[str, Callable[[str], str]] = {"crag-edge": lambda html: read_html(html).text}
    with contextlib.suppress(ImportError):
        import trafilatura

        found["trafilatura"] = lambda html: trafilatura.extract(html, include_tables=True) or ""
    with contextlib.suppress(ImportError):
        import lxml.html
        from readability import Document

        found["readability-lxml"] = lambda html: lxml.html.fromstring(
            Document(html).summary()
        ).text_content()
    with contextlib.suppress(ImportError):
        import justext

        stoplist = justext.get_stoplist("English")
        found["jusText"] = lambda html: "\n".join(
            p.text for p in justext.justext(html.encode(), stoplist) if not p.is_boilerplate
        )
    return found


def compare(folder: Path, pages: list[Page], sample: int, labels: set[str]) -> list[dict]:
    """Each extractor on the same sample of pages: content words kept, chrome lines left,
    headings kept (those that are no chrome line), seconds per page."""
    chrome, _ = chrome_lines(pages, labels)
    chosen = _sample(pages, sample)
    rows = []
    for name, extract in extractors().items():
        started = time.perf_counter()
        texts = [extract(page.html) for page in chosen]
        seconds = (time.perf_counter() - started) / max(len(chosen), 1)
        outputs = [replace(page, text=text) for page, text in zip(chosen, texts, strict=True)]
        kept, total, _ = _retention(outputs, chrome)
        raw_chrome = sum(len({ln for ln, _ in p.raw_lines} & chrome) for p in chosen)
        left = sum(len(set(map(_line, t.split("\n"))) & chrome) for t in texts)
        wanted = [(h, t) for p, t in zip(chosen, texts, strict=True) for h in p.headings
                  if h and h not in chrome]  # fmt: skip
        rows.append({
            "manual": str(folder), "extractor": name, "pages": len(chosen),
            "content_words_kept": round(kept / max(total, 1), 4),
            "chrome_lines_left": f"{left}/{raw_chrome}",
            "headings_kept": round(sum(_has(t, h) for h, t in wanted) / max(len(wanted), 1), 4),
            "ms_per_page": round(seconds * 1000, 1),
        })  # fmt: skip
    return rows


def speed(folders: list[Path], chunker: Chunker) -> dict[str, float]:
    started, cpu = time.perf_counter(), time.process_time()
    texts = []
    for folder in folders:
        for path in sorted(folder.rglob("*.html")):
            try:
                texts.append(load_file(path, path.read_bytes(), MAX_BYTES).text)
            except LoadError:
                continue
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    spans = [span for text in texts for span in chunker.split(text)]
    return {
        "pages": len(texts),
        "load_seconds": round(seconds, 2),
        "load_cpu_seconds": round(cpu, 2),  # steadier than wall time on a shared machine
        "chunks": len(spans),
        "tokens": sum(span.token_count for span in spans),
    }


def repeated(folder: Path) -> list[dict]:
    """The lines of the loader's output on more than `CHROME_SHARE` of one folder's content
    pages (and on three at least), with the share of pages each is on."""
    by_folder: dict[Path, list[set[str]]] = {}
    for path in sorted([*folder.rglob("*.html"), *folder.rglob("*.htm")]):
        try:
            doc = load_file(path, path.read_bytes(), MAX_BYTES)
        except LoadError:
            continue
        if not doc.metadata.get("navigation"):
            lines = {_line(line) for line in doc.text.splitlines()} - {""}
            by_folder.setdefault(path.parent, []).append(lines)
    found = []
    for where, pages in by_folder.items():
        counts = Counter(line for page in pages for line in page)
        least = max(CHROME_SHARE * len(pages), 2)
        found += [
            {"folder": str(where), "line": line, "pages": f"{count}/{len(pages)}"}
            for line, count in counts.most_common()
            if count > least
        ]
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--sample", type=int, default=20, help="pages checked for content words")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--speed", action="store_true", help="loader time, chunks and tokens")
    parser.add_argument(
        "--repeated", action="store_true", help="output lines recurring across a folder's pages"
    )
    parser.add_argument(
        "--compare", action="store_true", help="crag-edge's rule against the PyPI extractors"
    )
    parser.add_argument(
        "--label", action="append", default=[], help="a recurring line that is the text's own"
    )
    args = parser.parse_args()
    settings = Settings.load()
    tokenizer = load_embedder(settings.models).tokenizer
    chunker = Chunker(tokenizer, settings.ingest.chunk_tokens, settings.ingest.chunk_overlap)
    if args.speed:
        print(json.dumps(speed(args.folders, chunker)))
        return
    for folder in args.folders:
        if args.repeated:
            for row in repeated(folder):
                print(json.dumps(row))
            continue
        is_pdf = folder.suffix.lower() == ".pdf"
        pages = (read_pdf_manual if is_pdf else read_manual)(folder, chunker)
        if args.compare:
            for row in compare(folder, pages, args.sample, set(args.label)):
                print(json.dumps(row))
            continue
        result = report(folder, pages, args.sample, set(args.label))
        if args.json:
            print(json.dumps(asdict(result)))
            continue
        print(
            f"{result.manual}: {result.pages} pages ({result.navigation_pages} navigation), "
            f"{result.chunks} chunks, {result.chrome_lines} chrome lines; "
            f"only chrome {result.chunks_only_chrome}, with chrome {result.chunks_with_chrome} "
            f"({result.share_with_chrome:.2%}); content words kept "
            f"{result.content_words_kept}/{result.content_words} ({result.share_kept:.2%}; "
            f"{result.share_kept_outside_chrome:.2%} of those outside what the rule left out)"
        )


if __name__ == "__main__":
    main()
