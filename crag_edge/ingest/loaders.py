"""Turn files into plain text: txt, md, html, pdf, and BEIR `corpus.jsonl` collections.

Every loader returns (or, for BEIR, yields) `LoadedDocument`s and reports any file it cannot
read as a `LoadError` with a reason a user can act on.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from pypdf import PasswordType, PdfReader


@dataclass(frozen=True)
class LoadedDocument:
    """Extracted text of one document; `source` is its stable identity in the corpus."""

    source: str
    title: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


class LoadError(Exception):
    """One document could not be read; ingest records it and carries on."""

    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        self.reason = reason
        super().__init__(f"{source}: {reason}")


Loader = Callable[[Path], LoadedDocument]


def load_text(path: Path) -> LoadedDocument:
    """A plain-text file, titled by its file name."""
    return LoadedDocument(str(path), path.stem, _decode(path.read_bytes(), str(path)))


def load_markdown(path: Path) -> LoadedDocument:
    """Markdown kept verbatim (its markup is mostly readable text); titled by its first heading."""
    text = _decode(path.read_bytes(), str(path))
    heading = _MD_HEADING.search(text)
    title = heading.group(1).strip() if heading else path.stem
    return LoadedDocument(str(path), title, text)


def load_html(path: Path) -> LoadedDocument:
    """Visible HTML text: scripts and styles dropped, block elements turned into line breaks."""
    raw = path.read_bytes()
    declared = _HTML_CHARSET.search(raw[:4096])
    text = _decode(raw, str(path), declared.group(1).decode("ascii") if declared else None)
    parser = _HtmlText()
    parser.feed(text)
    parser.close()
    return LoadedDocument(str(path), parser.title() or path.stem, parser.text())


def load_pdf(path: Path) -> LoadedDocument:
    """PDF text page by page; `metadata["page_starts"]` holds each page's offset in the text."""
    source = str(path)
    try:
        reader = PdfReader(path)
        if reader.is_encrypted and reader.decrypt("") == PasswordType.NOT_DECRYPTED:
            raise LoadError(source, "encrypted PDF; a password is needed to read it")
        pages = [_clean(page.extract_text() or "").strip() for page in reader.pages]
        info_title = reader.metadata.title if reader.metadata else None
    except LoadError:
        raise
    except Exception as exc:  # pypdf raises many unrelated types on damaged files
        raise LoadError(source, f"unreadable PDF ({type(exc).__name__}: {exc})") from None
    starts, offset = [], 0
    for page in pages:
        starts.append(offset)
        offset += len(page) + 2
    title = _clean(info_title).strip() if isinstance(info_title, str) else ""
    return LoadedDocument(
        source,
        title or path.stem,
        "\n\n".join(pages),
        {"page_count": len(pages), "page_starts": starts},
    )


def iter_beir(path: Path) -> Iterator[LoadedDocument | LoadError]:
    """Each line `{"_id", "title", "text"}` of a BEIR corpus as a document `beir:<_id>`.

    A bad line is yielded as a `LoadError` (source `path:line`) so the other lines still load.
    """
    with path.open("rb") as fh:
        for lineno, line in enumerate(fh, start=1):
            if line.strip():
                yield _beir_document(line, f"{path}:{lineno}")


def loader_for(path: Path) -> Loader | None:
    """The loader for a file suffix, or None when the format is not supported."""
    return LOADERS.get(path.suffix.lower())


LOADERS: dict[str, Loader] = {
    ".txt": load_text,
    ".text": load_text,
    ".md": load_markdown,
    ".markdown": load_markdown,
    ".html": load_html,
    ".htm": load_html,
    ".pdf": load_pdf,
}

_MD_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_HTML_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)


def _beir_document(line: bytes, where: str) -> LoadedDocument | LoadError:
    try:
        record = json.loads(line)
    except ValueError as exc:  # JSONDecodeError and UnicodeDecodeError
        return LoadError(where, f"invalid JSON line ({exc})")
    if not isinstance(record, dict):
        return LoadError(where, "expected a JSON object with _id, title and text")
    doc_id, title, text = record.get("_id"), record.get("title", ""), record.get("text")
    if not isinstance(doc_id, str | int) or str(doc_id) == "":
        return LoadError(where, "missing or empty _id")
    if not isinstance(text, str) or not isinstance(title, str | None):
        return LoadError(where, f"_id {doc_id}: text and title must be strings")
    metadata = record.get("metadata")
    return LoadedDocument(
        _clean(f"beir:{doc_id}"),
        _clean(title or "").strip(),
        _clean(text),
        metadata if isinstance(metadata, dict) else {},
    )


def _decode(raw: bytes, source: str, declared: str | None = None) -> str:
    """UTF-8 (or a BOM-marked UTF-16, or a declared HTML charset); anything else is an error."""
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    elif raw.startswith(codecs.BOM_UTF8):
        encoding = "utf-8-sig"
    else:
        encoding = "utf-8"
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        text = _decode_declared(raw, source, declared, exc)
    if "\x00" in text:
        raise LoadError(source, "contains NUL characters; this looks like a binary file")
    return _normalise_newlines(text)


def _decode_declared(raw: bytes, source: str, declared: str | None, exc: UnicodeDecodeError) -> str:
    reason = f"not valid {exc.encoding} (byte {exc.start}: {raw[exc.start : exc.start + 1]!r})"
    if declared:
        try:
            return raw.decode(codecs.lookup(declared).name)
        except LookupError:
            reason += f"; declared charset {declared!r} is unknown"
        except UnicodeDecodeError:
            reason += f"; nor valid in its declared charset {declared!r}"
    raise LoadError(source, reason + "; convert the file to UTF-8")


def _normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _clean(text: str) -> str:
    """Newlines normalised and lone surrogates (JSON escapes, PDF text) replaced by "?"."""
    return _normalise_newlines(text.encode("utf-8", "replace").decode("utf-8"))


class _HtmlText(HTMLParser):
    """Collects visible text, the <title> and the first <h1> from (possibly broken) HTML."""

    _SKIP = frozenset({"script", "style", "noscript", "template", "svg"})
    _PARAGRAPH = frozenset(
        {"p", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "blockquote", "table", "ul", "ol",
         "dl", "section", "article", "header", "footer", "main", "aside", "nav", "figure",
         "hr", "form", "details", "body"}
    )  # fmt: skip
    _LINE = frozenset(
        {"br", "div", "li", "tr", "dt", "dd", "figcaption", "summary", "caption", "address",
         "option", "legend"}
    )  # fmt: skip
    _CELL = frozenset({"td", "th"})

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self._parts: list[str] = []
        self._newlines = 0  # newlines at the end of the output so far
        self._skip = 0
        self._pre = 0
        self._title: list[str] | None = None
        self._titles: list[str] = []
        self._h1: list[str] | None = None
        self._h1s: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._close_title()
        if tag == "title" and not self._titles:
            self._title = []
        elif tag in self._SKIP:
            self._skip += 1
        elif tag == "pre":
            self._pre += 1
        elif tag == "h1" and not self._h1s:
            self._h1 = []
        if tag in self._CELL:
            self.handle_data(" ")
        self._block(tag)

    def parse_marked_section(self, i: int, report: int = 1) -> int:
        """Skip `<![...]>` sections: the stdlib asserts on any it does not know (`<![if`)."""
        closing = "]]>" if self.rawdata.startswith("<![CDATA[", i) else ">"
        end = self.rawdata.find(closing, i + 3)
        return -1 if end < 0 else end + len(closing)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._block(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag == "title":
            self._close_title()
        elif tag in self._SKIP:
            self._skip = max(0, self._skip - 1)
        elif tag == "pre":
            self._pre = max(0, self._pre - 1)
        elif tag == "h1" and self._h1 is not None:
            self._h1s.append(" ".join("".join(self._h1).split()))
            self._h1 = None
        self._block(tag)

    def handle_data(self, data: str) -> None:
        if self._title is not None:
            self._title.append(data)
            return
        if self._skip:
            return
        if self._h1 is not None:
            self._h1.append(data)
        if not self._pre:
            data = re.sub(r"\s+", " ", data)
            if self._newlines or not self._parts:
                data = data.lstrip(" ")
        if data:
            self._parts.append(data)
            stripped = data.rstrip("\n")
            self._newlines = len(data) - len(stripped) if stripped else self._newlines + len(data)

    def title(self) -> str:
        self._close_title()
        return next((t for t in self._titles + self._h1s if t), "")

    def text(self) -> str:
        return "".join(self._parts).strip()

    def _block(self, tag: str) -> None:
        if tag in self._PARAGRAPH or tag in self._LINE:
            self._break(2 if tag in self._PARAGRAPH else 1)

    def _break(self, count: int) -> None:
        if not self._parts or self._skip:
            return
        if not self._pre:
            self._parts[-1] = self._parts[-1].rstrip(" ")
        if count > self._newlines:
            self._parts.append("\n" * (count - self._newlines))
            self._newlines = count

    def _close_title(self) -> None:
        if self._title is not None:
            self._titles.append(" ".join("".join(self._title).split()))
            self._title = None
