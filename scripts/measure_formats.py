"""Ingest speed per document format, OCR's cost per page, and peak memory on hostile files
(docs/formats.md). Documents are made by the real tools (pandoc, LibreOffice, poppler,
img2pdf, Python's mailbox), then read by the loaders alone: embedding costs the same per
chunk whatever the format (docs/measurements.md).

    python scripts/measure_formats.py [--keep FOLDER]  # speed per format, OCR per page
    python scripts/measure_formats.py --hostile  # peak RSS on a zip bomb and a 1M-row sheet
"""

from __future__ import annotations

import argparse
import io
import mailbox
import subprocess
import sys
import tempfile
import time
import zipfile
from email.message import EmailMessage
from pathlib import Path

from crag_edge.ingest import LoadError, load_file
from crag_edge.ingest.formats.pdf import load_pdf_file

MAX_BYTES = 10_000_000  # the default max_document_bytes
PARAGRAPH = (
    "Section {n}. The harbour master logs every arrival in the berth register, checks the "
    "tide table and assigns a berth by length and draught; boats over eighteen metres moor "
    "at the eastern pier, where the water is deepest at low tide."
)


def make_documents(folder: Path) -> dict[str, tuple[Path, int, str]]:
    """name -> (file, units in it, unit name), each made by a real tool."""
    text = "\n\n".join(f"# Part {n}\n\n{PARAGRAPH.format(n=n)}" for n in range(1, 401))
    (folder / "book.md").write_text(text)
    for suffix in ("docx", "odt", "epub", "pptx"):
        _run("pandoc", str(folder / "book.md"), "-o", str(folder / f"book.{suffix}"))
    rows = "\n".join(
        f"Item {n},Supplier {n % 97},{n % 12 + 1} weeks,{n * 3}" for n in range(50_000)
    )
    (folder / "sheet.csv").write_text("Item,Supplier,Lead time,Price\n" + rows + "\n")
    for suffix in ("xlsx", "ods"):
        _office(suffix, folder / "sheet.csv", folder)
    _mailbox(folder / "mail.mbox", 10_000)
    _office("pdf", folder / "book.odt", folder)
    return {
        "docx": (folder / "book.docx", 400, "sections"),
        "odt": (folder / "book.odt", 400, "sections"),
        "epub": (folder / "book.epub", 400, "sections"),
        "pptx": (folder / "book.pptx", 400, "slides"),
        "xlsx": (folder / "sheet.xlsx", 50_000, "rows"),
        "ods": (folder / "sheet.ods", 50_000, "rows"),
        "csv": (folder / "sheet.csv", 50_000, "rows"),
        "mbox": (folder / "mail.mbox", 10_000, "messages"),
        "pdf": (folder / "book.pdf", _pages(folder / "book.pdf"), "pages"),
    }


def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True)


def _office(suffix: str, source: Path, folder: Path) -> None:
    profile = f"-env:UserInstallation=file://{folder}/profile"
    _run(
        "soffice",
        profile,
        "--headless",
        "--convert-to",
        suffix,
        "--outdir",
        str(folder),
        str(source),
    )


def _pages(pdf: Path) -> int:
    info = subprocess.run(["pdfinfo", str(pdf)], check=True, capture_output=True, text=True)
    pages = next(line for line in info.stdout.splitlines() if line.startswith("Pages:"))
    return int(pages.split()[-1])


def _mailbox(path: Path, count: int) -> None:
    box = mailbox.mbox(path)
    for n in range(count):
        message = EmailMessage()
        message["From"], message["To"] = f"crew{n % 30}@example.org", "ops@example.org"
        message["Subject"], message["Date"] = f"Berth {n}", "Mon, 02 Mar 2026 09:30:00 +0000"
        message.set_content(PARAGRAPH.format(n=n))
        box.add(message)
    box.close()


def speed(documents: dict[str, tuple[Path, int, str]]) -> None:
    print("| format | file | units/s | text MB/s | file MB/s |")
    print("|---|---|---|---|---|")
    for name, (path, units, unit) in documents.items():
        raw = path.read_bytes()
        seconds = min(_timed(path, raw) for _ in range(3))
        text_mb = len(load_file(path, raw, MAX_BYTES).text.encode()) / 1e6
        print(
            f"| {name} | {len(raw) / 1e6:.2f} MB, {units:,} {unit}, {text_mb:.2f} MB of text | "
            f"{units / seconds:,.0f} {unit} | {text_mb / seconds:.1f} | "
            f"{len(raw) / 1e6 / seconds:.1f} |"
        )


def _timed(path: Path, raw: bytes) -> float:
    started = time.perf_counter()
    load_file(path, raw, MAX_BYTES)
    return time.perf_counter() - started


def ocr_cost(folder: Path, pages: int = 5) -> None:
    """Seconds per scanned page: a text PDF rasterised at 150 dpi and put back in a PDF."""
    _run(
        "pdftoppm",
        "-r",
        "150",
        "-gray",
        "-png",
        "-l",
        str(pages),
        str(folder / "book.pdf"),
        str(folder / "scan"),
    )
    _run(
        "img2pdf",
        *sorted(str(p) for p in folder.glob("scan-*.png")),
        "-o",
        str(folder / "scan.pdf"),
    )
    raw = (folder / "scan.pdf").read_bytes()
    started = time.perf_counter()
    document = load_pdf_file(folder / "scan.pdf", raw, MAX_BYTES)
    seconds = time.perf_counter() - started
    print(
        f"OCR: {pages} pages in {seconds:.1f} s = {seconds / pages:.2f} s/page "
        f"({document.metadata['ocr_pages']} pages recognised, {len(document.text):,} chars)"
    )


def hostile(path: Path) -> None:
    """Peak RSS of a process that reads one hostile file (made by another process)."""
    baseline = _peak_mb()
    raw = path.read_bytes()
    started = time.perf_counter()
    try:
        load_file(path, raw, MAX_BYTES)
        outcome = "read"
    except LoadError as exc:
        outcome = exc.reason
    print(
        f"{path.name}: {len(raw) / 1e6:.1f} MB file, {time.perf_counter() - started:.1f} s, "
        f"peak RSS {_peak_mb():.0f} MB ({baseline:.0f} MB after imports): {outcome}"
    )


def _peak_mb() -> float:
    """This process's peak resident memory (VmHWM: unlike ru_maxrss, not inherited from the
    parent that forked it)."""
    status = Path("/proc/self/status").read_text()
    line = next(line for line in status.splitlines() if line.startswith("VmHWM:"))
    return int(line.split()[1]) / 1024


def _zip_bomb() -> bytes:
    """A .docx whose document.xml unpacks to 1 GB (of spaces), written in pieces."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w", force_zip64=True) as member:
            for _ in range(1024):
                member.write(b" " * (1 << 20))
    return buffer.getvalue()


def _big_sheet() -> bytes:
    """An .xlsx of one sheet of a million rows of numbers (86 MB of XML)."""
    rows = "".join(
        f'<row r="{n}"><c r="A{n}"><v>{n}</v></c><c r="B{n}"><v>{n * 7}</v></c></row>'
        for n in range(1, 1_000_001)
    )
    main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
    rel = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr(
            "xl/workbook.xml",
            f'<workbook xmlns="{main}" xmlns:r="{rel}"><sheets>'
            '<sheet name="Big" sheetId="1" r:id="rId1"/></sheets></workbook>',
        )
        archive.writestr(
            "xl/_rels/workbook.xml.rels",
            '<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">'
            '<Relationship Id="rId1" Target="worksheets/sheet1.xml"/></Relationships>',
        )
        archive.writestr(
            "xl/worksheets/sheet1.xml",
            f'<worksheet xmlns="{main}"><sheetData>{rows}</sheetData></worksheet>',
        )
    return buffer.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hostile", action="store_true", help="peak RSS on hostile files")
    parser.add_argument("--keep", type=Path, help="make the documents in this folder, kept")
    parser.add_argument("--read", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.read:
        hostile(args.read)
    elif args.hostile:
        with tempfile.TemporaryDirectory() as folder:
            for name, make in (("bomb.docx", _zip_bomb), ("big.xlsx", _big_sheet)):
                (Path(folder) / name).write_bytes(make())
                command = [sys.executable, __file__, "--read", str(Path(folder) / name)]
                subprocess.run(command, check=True)  # a process each: its own peak
    else:
        with tempfile.TemporaryDirectory() as temporary:
            folder = args.keep or Path(temporary)
            folder.mkdir(parents=True, exist_ok=True)
            speed(make_documents(folder))
            ocr_cost(folder)


if __name__ == "__main__":
    main()
