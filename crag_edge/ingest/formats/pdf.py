"""PDFs: each page's text layer (`loaders.pdf_pages`), tables as rows, scanned pages by OCR.

A page without a text layer (a scan) is rendered at `OCR_DPI` (pypdfium2) and read by the
`tesseract` program (Debian's `tesseract-ocr`) when it is installed; its citation says so:
`scan.pdf p. 4 (OCR)`. OCR reads at most `ocr_max_pages` pages of a file, none larger than
`ocr_max_page_inches`, each rendered within `OCR_MAX_PIXELS`. Without Tesseract, the report
says once per file how many pages have no text and how to read them; never a silently empty
document. With `pdfplumber` (the `office` extra), a page holding ruled tables is read by it
instead: the text around the tables, then each row as a record named by the header row and
titled by the line above its table (`builder.caption_of`), so one row is one unit. Running
heads and page numbers are dropped and hyphenated line ends joined (`pdf_text`).
"""

from __future__ import annotations

import io
import itertools
import math
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pypdfium2 as pdfium
import pypdfium2.raw as pdfium_c

from crag_edge.citations import RECOGNISED
from crag_edge.ingest.formats.builder import DocumentText, caption_of, rows_as_records
from crag_edge.ingest.formats.extras import MissingExtra, require
from crag_edge.ingest.loaders import LoadedDocument, LoadError, pdf_pages
from crag_edge.ingest.pdf_text import readable_pages, running_lines, without_running

# Scans are rendered at this resolution for Tesseract (its accuracy drops below ~200 dpi).
OCR_DPI = 300
# A page is rendered with at most this many pixels (one byte each, in gray): a larger page is
# rendered at a lower resolution, so OCR's memory stays bounded (A4 at 300 dpi is 8.7 million).
OCR_MAX_PIXELS = 36_000_000
# A page Tesseract has not read in this long is left unread (a pathological scan).
OCR_TIMEOUT_S = 300
# How many rules (a rectangle, or a line from where the pen moved to) a page draws before its
# tables are looked for (a 2x2 table has at least 6).
_MIN_RULES = 6
# Letters closer than this (in points) are one word for pdfplumber: its default, 3, joins the
# words of LaTeX's tightly set lines ("Apackagenameisreferred...", docs/formats.md).
X_TOLERANCE = 1.5
OCR_HOW = "install Tesseract (apt-get install tesseract-ocr)"


@dataclass(frozen=True)
class OcrLimits:
    """How much of one PDF OCR reads (`ocr_max_pages`, `ocr_max_page_inches`): scanned pages
    past the first `max_pages`, and pages larger than `max_page_inches` on a side, are left
    unread, each kind said in one line of the report."""

    max_pages: int = 50
    max_page_inches: float = 50.0


DEFAULT_OCR = OcrLimits()


def load_pdf_file(
    path: Path, raw: bytes, max_bytes: int, ocr: OcrLimits = DEFAULT_OCR
) -> LoadedDocument:
    source = str(path)
    layers, title = pdf_pages(source, raw)
    running = running_lines(layers)
    pages = readable_pages(_with_tables(source, raw, layers, running), running)
    blank = [i for i, page in enumerate(pages) if not page]
    text = DocumentText(source, max_bytes)
    recognised = _recognise(source, raw, blank, ocr, text.warnings) if blank else {}
    for number, page in enumerate(pages, start=1):
        text.page(number)
        if number - 1 in recognised:
            text.section(1, RECOGNISED)
        elif number - 2 in recognised:  # the page after a scan has its own text layer
            text.section(1, "")
        text.block(recognised.get(number - 1, page))
    unread = len(recognised) - sum(1 for t in recognised.values() if t)
    if blank and not recognised and not text.warnings:
        text.warnings.append(
            f"{len(blank)} of {len(pages)} pages have no text layer (scanned?); to read "
            f"them, {OCR_HOW}, then ingest the file again with --reread"
        )
    elif unread:
        text.warnings.append(f"{unread} of {len(pages)} pages have no text, even by OCR")
    metadata = {"page_count": len(pages), "ocr_pages": len(recognised)}
    return text.document(title or path.stem, metadata)


def ocr_available() -> bool:
    """Tesseract is installed."""
    return shutil.which("tesseract") is not None


def _recognise(
    source: str, raw: bytes, indexes: list[int], ocr: OcrLimits, warnings: list[str]
) -> dict[int, str]:
    """The OCR text of the pages at `indexes` (0-based) within `ocr`'s limits, what is left
    unread said in `warnings`; {} when OCR is not installed."""
    if not ocr_available():
        return {}
    try:
        document = pdfium.PdfDocument(raw)
    except pdfium.PdfiumError as exc:
        raise LoadError(source, f"unreadable PDF for OCR ({exc})") from None
    if len(indexes) > ocr.max_pages:
        warnings.append(
            f"{len(indexes) - ocr.max_pages} scanned pages after the first {ocr.max_pages} not "
            "read by OCR (ocr_max_pages)"
        )
    read: dict[int, str] = {}
    try:
        for index in indexes[: ocr.max_pages]:
            page = document[index]
            side = max(page.get_size()) / 72
            if side > ocr.max_page_inches:
                warnings.append(
                    f"page {index + 1} is {side:,.0f} inches on a side, over "
                    f"ocr_max_page_inches ({ocr.max_page_inches:g}); not read by OCR"
                )
                continue
            image = _page_image(page)
            read[index] = "" if image is None else _tesseract(image)
    finally:
        document.close()
    return read


def _page_image(page: Any) -> bytes | None:
    """The page rendered in gray at `OCR_DPI`, or lower for a page that would take more than
    `OCR_MAX_PIXELS`, as a PGM image (Tesseract reads it on stdin); None for a page of one
    shade, which holds nothing to read (Tesseract takes seconds even on a blank page:
    docs/formats.md, "Files that amplify")."""
    width, height = page.get_size()
    scale = min(OCR_DPI / 72, math.sqrt(OCR_MAX_PIXELS / max(width * height, 1.0)))
    bitmap = page.render(scale=scale, grayscale=True)
    width, height, stride, pixels = bitmap.width, bitmap.height, bitmap.stride, bytes(bitmap.buffer)
    if not pixels.strip(pixels[:1]):
        return None
    if stride != width:  # rows padded to an alignment
        pixels = b"".join(pixels[row * stride : row * stride + width] for row in range(height))
    return f"P5\n{width} {height}\n255\n".encode() + pixels


def _tesseract(image: bytes) -> str:
    """Tesseract's reading of one page image; "" when it fails or takes too long. One thread:
    its OpenMP threads spin on a busy machine (docs/formats.md, "Scanned PDFs")."""
    try:
        done = subprocess.run(
            ["tesseract", "stdin", "stdout"],
            input=image,
            capture_output=True,
            env=os.environ | {"OMP_THREAD_LIMIT": "1"},
            timeout=OCR_TIMEOUT_S,
            check=True,
        )
    except (subprocess.SubprocessError, OSError):
        return ""
    return done.stdout.decode("utf-8", "replace").strip()


def _with_tables(source: str, raw: bytes, pages: list[str], running: frozenset[str]) -> list[str]:
    """`pages` with each page that holds tables read again by pdfplumber (if installed);
    `running`: the running heads and feet, left out of the text around the tables."""
    try:
        pdfplumber = require("pdfplumber", "PDF tables", source)
    except MissingExtra:
        return pages
    ruled = _ruled_pages(raw)
    if not ruled:
        return pages
    try:
        with pdfplumber.open(io.BytesIO(raw)) as pdf:
            return [
                (index in ruled and _page_with_tables(page, running)) or text
                for index, (page, text) in enumerate(zip(pdf.pages, pages, strict=False))
            ]
    except Exception:  # PDFium read it; pdfplumber's failure only loses the table layout
        return pages


def _ruled_pages(raw: bytes) -> set[int]:
    """Pages that draw enough rules to hold a ruled table: only those are laid out by
    pdfplumber (its layout analysis made a text-only PDF many times slower to read:
    docs/formats.md, "Speed")."""
    document = pdfium.PdfDocument(raw)
    try:
        return {index for index in range(len(document)) if _is_ruled(document[index])}
    finally:
        document.close()


def _is_ruled(page: pdfium.PdfPage) -> bool:
    """Whether `page` draws `_MIN_RULES` rules: a stretch of path that the pen moved to, then
    drew a straight line from (a rectangle is one, a line `m l` one)."""
    rules = 0
    try:
        for path in page.get_objects(filter=(pdfium_c.FPDF_PAGEOBJ_PATH,)):
            kinds = [
                pdfium_c.FPDFPathSegment_GetType(pdfium_c.FPDFPath_GetPathSegment(path, index))
                for index in range(pdfium_c.FPDFPath_CountSegments(path))
            ]
            rules += sum(
                kind == pdfium_c.FPDF_SEGMENT_MOVETO and after == pdfium_c.FPDF_SEGMENT_LINETO
                for kind, after in itertools.pairwise(kinds)
            )
            if rules >= _MIN_RULES:
                return True
    finally:
        page.close()
    return False


def _page_with_tables(page: Any, running: frozenset[str]) -> str | None:
    """The page's text around its tables, without its running heads and feet (the rows
    follow it, so a running foot would stand mid-page), then their rows as records; None
    without tables."""
    tables = page.find_tables()
    if not tables:
        return None
    outside = page
    for table in tables:
        outside = outside.outside_bbox(table.bbox)
    rows = [
        record
        for table in tables
        for record in rows_as_records(
            [[cell or "" for cell in row] for row in table.extract(x_tolerance=X_TOLERANCE)],
            _caption(page, table),
        )
    ]
    around = without_running(outside.extract_text(x_tolerance=X_TOLERANCE) or "", running)
    return "\n\n".join([around, *rows]).strip()


def _caption(page: Any, table: Any) -> str:
    """The line just above `table` on `page` when it is short enough to title it."""
    top = table.bbox[1]
    above = (
        page.crop((0, 0, page.width, top)).extract_text(x_tolerance=X_TOLERANCE) if top > 0 else ""
    )
    lines = [line for line in (above or "").splitlines() if line.strip()]
    return caption_of(lines[-1]) if lines else ""
