"""Turn file contents into plain text: txt, md, pdf, and BEIR `corpus.jsonl` collections
(HTML and the container formats: `ingest.formats`).

Loaders parse bytes that `ingest.files` read (they never open a file themselves), return (or,
for BEIR, yield) `LoadedDocument`s, and report what they cannot read as a `LoadError` with a
reason a user can act on. Text leaves here valid Unicode (`text_boundary.repair`).
"""

from __future__ import annotations

import codecs
import json
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, cast

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from crag_edge.ingest.outline import (
    Outline,
    front_matter_title,
    markdown_headings,
    short_title,
    split_front_matter,
)
from crag_edge.ingest.pdf_text import readable_pages
from crag_edge.text_boundary import has_no_controls, repair


@dataclass(frozen=True)
class LoadedDocument:
    """Extracted text of one document; `source` is its stable identity in the corpus,
    `outline` where its pages start and its headings stand (for citations), `warnings`
    what of it could not be read (the ingest report carries them), and `attached` the
    documents its file carries (an e-mail's attachments: `crag_edge.attached`), each read,
    or the error it could not be read with."""

    source: str
    title: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)
    outline: Outline = field(default_factory=Outline)
    warnings: tuple[str, ...] = ()
    attached: tuple[LoadedDocument | LoadError, ...] = ()


class LoadError(Exception):
    """One document could not be read; ingest records it and carries on."""

    def __init__(self, source: str, reason: str) -> None:
        self.source = source
        self.reason = reason
        super().__init__(f"{source}: {reason}")


Loader = Callable[[Path, bytes], LoadedDocument]


def load_text(path: Path, raw: bytes) -> LoadedDocument:
    """A plain-text file, titled by its file name."""
    return LoadedDocument(str(path), path.stem, decode_text(raw, str(path)))


def load_markdown(path: Path, raw: bytes) -> LoadedDocument:
    """Markdown kept verbatim (its markup is mostly readable text) without its front matter;
    titled by the front matter's `title:`, else its first heading, else its file name."""
    front_matter, text = split_front_matter(decode_text(raw, str(path)))
    headings = markdown_headings(text)
    title = front_matter_title(front_matter) or (headings[0].title if headings else path.stem)
    return LoadedDocument(str(path), title, text, outline=Outline(headings=headings))


def load_pdf(path: Path, raw: bytes) -> LoadedDocument:
    """PDF text page by page, its outline holding each page's offset in the text; running
    heads and page numbers dropped, hyphenated line ends joined (`pdf_text`)."""
    source = str(path)
    pages, title = pdf_pages(source, raw)
    pages = readable_pages(pages)
    starts, offset = [], 0
    for page in pages:
        starts.append(offset)
        offset += len(page) + 2
    return LoadedDocument(
        source,
        title or path.stem,
        "\n\n".join(pages),
        {"page_count": len(pages)},
        Outline(page_starts=tuple(starts)),
    )


def pdf_pages(source: str, raw: bytes) -> tuple[list[str], str]:
    """(each page's text layer, the /Info title or "") of a PDF; LoadError if it cannot be
    read or needs a password. PDFium reads the layer: it parts words set apart by moving the
    pen rather than by a space character, as LaTeX sets them (docs/formats.md, "PDF running
    heads and broken words")."""
    try:
        document = pdfium.PdfDocument(raw)
    except pdfium.PdfiumError as exc:
        if exc.err_code == pdfium_c.FPDF_ERR_PASSWORD:
            raise LoadError(source, "encrypted PDF; a password is needed to read it") from None
        raise LoadError(source, f"unreadable PDF ({exc})") from None
    try:
        pages = [_page_text(document[index]) for index in range(len(document))]
        title = short_title(clean_text(document.get_metadata_value("Title")).strip())
    except pdfium.PdfiumError as exc:  # a page that cannot be loaded
        raise LoadError(source, f"unreadable PDF ({exc})") from None
    finally:
        document.close()
    return pages, title


def _page_text(page: pdfium.PdfPage) -> str:
    """One page's text layer, a word hyphenated at a line's end broken there again: PDFium
    writes its hyphen as U+FFFE and runs the two lines together; `pdf_text` decides whether
    the hyphen stays."""
    textpage = page.get_textpage()
    try:
        return clean_text(textpage.get_text_range().replace("\ufffe", "-\n")).strip()
    finally:
        textpage.close()
        page.close()


def iter_beir(
    path: Path, fh: BinaryIO, max_bytes: int | None = None
) -> Iterator[LoadedDocument | LoadError]:
    """Each line `{"_id", "title", "text"}` of a BEIR corpus (read from `fh`) as a document
    `beir:<_id>`. A bad line, or one over `max_bytes` (never held in memory whole), is
    yielded as a `LoadError` (source `path:line`) so the other lines still load.
    """
    for lineno, (line, length) in enumerate(_lines(fh, max_bytes), start=1):
        where = f"{path}:{lineno}"
        if line is None:
            yield LoadError(where, too_large(length, cast(int, max_bytes)))
        elif line.strip():
            yield _beir_document(line, where)


def count_beir_lines(fh: BinaryIO, max_bytes: int | None = None) -> int:
    """How many items `iter_beir` will yield for `fh` (documents and errors)."""
    return sum(1 for line, _ in _lines(fh, max_bytes) if line is None or line.strip())


def _lines(fh: BinaryIO, max_bytes: int | None) -> Iterator[tuple[bytes | None, int]]:
    """(line, length) of each line; a line over `max_bytes` comes as (None, length)."""
    limit = -1 if max_bytes is None else max_bytes + 1
    while line := fh.readline(limit):
        length = len(line)
        if max_bytes is None or length <= max_bytes:
            yield line, length
            continue
        while not line.endswith(b"\n") and (line := fh.readline(limit)):
            length += len(line)
        yield None, length


def too_large(size: int, max_bytes: int) -> str:
    """The per-document cost cap's one message, for files, lines and extracted text alike."""
    return (
        f"{size:,} bytes, over max_document_bytes ({max_bytes:,}); raise that setting to index it"
    )


def _beir_document(line: bytes, where: str) -> LoadedDocument | LoadError:
    try:
        record = json.loads(line, parse_float=_finite, parse_constant=_finite)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError and `_finite`'s
        return LoadError(where, f"invalid JSON line ({exc})")
    except RecursionError:  # the parser recurses once per nested array or object
        return LoadError(where, "invalid JSON line (nested too deeply)")
    if not isinstance(record, dict):
        return LoadError(where, "expected a JSON object with _id, title and text")
    doc_id, title, text = record.get("_id"), record.get("title", ""), record.get("text")
    if isinstance(doc_id, bool) or not isinstance(doc_id, str | int) or str(doc_id) == "":
        return LoadError(where, "missing or empty _id (a string or an integer)")
    if not has_no_controls(str(doc_id)):  # the id is the source, stored and shown, as a name
        return LoadError(where, f"_id {str(doc_id)!r} holds control characters")
    if not isinstance(text, str) or not isinstance(title, str | None):
        return LoadError(where, f"_id {doc_id}: text and title must be strings")
    metadata = record.get("metadata")
    return LoadedDocument(
        clean_text(f"beir:{doc_id}"),
        short_title(clean_text(title or "").strip()),
        clean_text(text),
        metadata if isinstance(metadata, dict) else {},
    )


def _finite(literal: str) -> float:
    """A JSON number as a float. NaN, Infinity and numbers beyond a float's range (1e400) are
    refused: Python reads them, but they are no JSON, and the corpus stores metadata as JSON
    it checks."""
    value = float(literal)
    if not math.isfinite(value):
        raise ValueError(f"{literal} is not a finite number")
    return value


def decode_text(raw: bytes, source: str, declared: str | None = None) -> str:
    """UTF-8 (or UTF-16, with a BOM or told by its NUL bytes, or a declared HTML charset);
    anything else is an error."""
    if raw.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        encoding = "utf-16"
    elif raw.startswith(codecs.BOM_UTF8):
        encoding = "utf-8-sig"
    else:
        encoding = _utf16_without_bom(raw) or "utf-8"
    try:
        text = raw.decode(encoding)
    except UnicodeDecodeError as exc:
        text = _decode_declared(raw, source, declared, exc)
    if "\x00" in text:
        raise LoadError(source, "contains NUL characters; this looks like a binary file")
    return clean_text(text)


def _utf16_without_bom(raw: bytes) -> str | None:
    """The byte order of UTF-16 text saved without a byte-order mark, told by where its NUL
    bytes stand (text in a Latin script has one in every other byte); None for anything
    else. Text that holds NUL bytes is no UTF-8, so this costs nothing for UTF-8 files."""
    if b"\x00" not in raw or len(raw) % 2:
        return None
    half = len(raw) // 2
    even, odd = raw[0::2].count(0), raw[1::2].count(0)
    if odd >= 0.75 * half and even <= 0.05 * half:
        return "utf-16-le"
    if even >= 0.75 * half and odd <= 0.05 * half:
        return "utf-16-be"
    return None


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


def clean_text(text: str) -> str:
    """Newlines normalised, lone surrogates (JSON escapes, PDF text) repaired and control
    characters (terminal escape sequences, form feeds) dropped: `text_boundary.repair`."""
    return _normalise_newlines(repair(text))
