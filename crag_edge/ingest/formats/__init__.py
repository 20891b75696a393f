"""Every file format ingest reads, each by the loader for its family, chosen by the file's
suffix and checked against its content (`sniff`): a `.docx` that holds a PDF, or a `.txt`
that holds a ZIP archive, is that file's error, saying what it really is.

Loaders take the file's bytes and the per-document budget (`max_document_bytes`), so a
container is bounded before it is unpacked and a document stops at its budget as it is read.
A type still unsupported is skipped with the nearest supported route (`unsupported`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from crag_edge.ingest.formats.epub import load_epub
from crag_edge.ingest.formats.html import load_html
from crag_edge.ingest.formats.mail import load_eml, load_mbox
from crag_edge.ingest.formats.opendocument import load_odp, load_odt
from crag_edge.ingest.formats.pdf import DEFAULT_OCR, OcrLimits, load_pdf_file
from crag_edge.ingest.formats.rtf import load_rtf
from crag_edge.ingest.formats.sheets import load_csv, load_ods, load_xlsx
from crag_edge.ingest.formats.slides import load_pptx
from crag_edge.ingest.formats.sniff import DESCRIPTIONS, sniff
from crag_edge.ingest.formats.word import load_docx
from crag_edge.ingest.loaders import (
    LoadedDocument,
    Loader,
    LoadError,
    load_markdown,
    load_text,
)

Read = Callable[[Path, bytes, int], LoadedDocument]


@dataclass(frozen=True)
class Format:
    """A file suffix's content kind (a `sniff` result) and the loader that reads it."""

    kind: str
    read: Read


def _unbounded(loader: Loader) -> Read:
    """A text loader: its file was already read within the budget, and its text is it."""
    return lambda path, raw, _max_bytes: loader(path, raw)


def _attachment_loader(path: Path) -> Callable[[bytes, int], LoadedDocument] | None:
    """How an e-mail attachment is read: as a file of its name would be; None if unsupported."""
    return partial(load_file, path) if is_supported(path) else None


FORMATS: dict[str, Format] = {
    ".txt": Format("text", _unbounded(load_text)),
    ".text": Format("text", _unbounded(load_text)),
    ".md": Format("text", _unbounded(load_markdown)),
    ".markdown": Format("text", _unbounded(load_markdown)),
    ".html": Format("text", _unbounded(load_html)),
    ".htm": Format("text", _unbounded(load_html)),
    ".csv": Format("text", load_csv),
    ".eml": Format("text", partial(load_eml, attachments=_attachment_loader)),
    ".mbox": Format("text", partial(load_mbox, attachments=_attachment_loader)),
    ".pdf": Format("pdf", load_pdf_file),
    ".rtf": Format("rtf", load_rtf),
    ".docx": Format("docx", load_docx),
    ".docm": Format("docx", load_docx),
    ".pptx": Format("pptx", load_pptx),
    ".pptm": Format("pptx", load_pptx),
    ".xlsx": Format("xlsx", load_xlsx),
    ".xlsm": Format("xlsx", load_xlsx),
    ".odt": Format("odt", load_odt),
    ".odp": Format("odp", load_odp),
    ".ods": Format("ods", load_ods),
    ".epub": Format("epub", load_epub),
}
# Common types still unsupported, with the nearest route to one that is.
ROUTES = {
    ".doc": "save it as .docx (Word or LibreOffice) or convert it to PDF",
    ".xls": "save it as .xlsx or export its sheets to .csv",
    ".ppt": "save it as .pptx or export it to PDF",
    ".pages": "export it to .docx or PDF",
    ".numbers": "export it to .xlsx or .csv",
    ".key": "export it to .pptx or PDF",
    ".msg": "save the message as .eml",
    ".mobi": "convert it to EPUB (e.g. with Calibre)",
    ".azw3": "convert it to EPUB (e.g. with Calibre)",
    ".djvu": "convert it to PDF",
    ".png": "put scans in a PDF (e.g. img2pdf) to have them read by OCR",
    ".jpg": "put scans in a PDF (e.g. img2pdf) to have them read by OCR",
    ".jpeg": "put scans in a PDF (e.g. img2pdf) to have them read by OCR",
    ".tif": "put scans in a PDF (e.g. img2pdf) to have them read by OCR",
    ".tiff": "put scans in a PDF (e.g. img2pdf) to have them read by OCR",
}
_ZIP_KINDS = frozenset({"docx", "pptx", "xlsx", "odt", "odp", "ods", "epub"})
_SUFFIX_OF = {"pdf": ".pdf", "rtf": ".rtf", "docx": ".docx", "pptx": ".pptx", "xlsx": ".xlsx",
              "odt": ".odt", "odp": ".odp", "ods": ".ods", "epub": ".epub"}  # fmt: skip


def is_supported(path: Path) -> bool:
    return path.suffix.lower() in FORMATS


def unsupported(path: Path) -> str:
    """Why `path` is skipped, and what to do to have it read."""
    suffix = path.suffix.lower()
    route = ROUTES.get(suffix, "convert it to PDF or plain text")
    return f"unsupported file type {path.suffix or '(none)'}; {route}"


def load_file(
    path: Path, raw: bytes, max_bytes: int, ocr: OcrLimits = DEFAULT_OCR
) -> LoadedDocument:
    """The document in `raw`, read by the loader for `path`'s suffix once its content is
    known to be of that kind (a PDF's scanned pages by OCR within `ocr`; a mail file's
    attachments within the defaults); LoadError otherwise."""
    expected = FORMATS[path.suffix.lower()]
    if not raw and expected.kind != "text":
        raise LoadError(str(path), "empty file")
    kind = sniff(raw)
    if expected.kind == "pdf" and b"%PDF-" in raw[:1024]:  # readers allow junk before it
        kind = "pdf"
    if kind == "encrypted-office":
        raise LoadError(str(path), "password-protected Office file; save a copy without a password")
    if kind != expected.kind and not (kind == "zip-damaged" and expected.kind in _ZIP_KINDS):
        raise LoadError(str(path), _mismatch(path, kind))
    if expected.kind == "pdf":
        return load_pdf_file(path, raw, max_bytes, ocr)
    return expected.read(path, raw, max_bytes)


def _mismatch(path: Path, kind: str) -> str:
    """A file whose extension lies, told what it holds and how to have it read."""
    held = DESCRIPTIONS.get(kind, "something else")
    rename = f"; rename it to {_SUFFIX_OF[kind]}" if kind in _SUFFIX_OF else ""
    return f"its content is {held}, not what {path.suffix} says{rename}"
