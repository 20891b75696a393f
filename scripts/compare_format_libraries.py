"""How the format loaders compare with the libraries a loader could have been built on
(docs/formats.md): text fidelity on the committed fixtures, seconds and peak memory on a
50,000-row sheet and a 400-section document. Run it in a virtualenv that also has the
candidates (none of them is a dependency):

    pip install 'markitdown[docx,pptx,xlsx]' python-docx python-pptx openpyxl odfpy ebooklib
    python scripts/compare_format_libraries.py FOLDER  # FOLDER: sheet.xlsx and book.docx
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

FIXTURES = Path(__file__).parent.parent / "tests" / "data" / "formats"
# What a reader of each fixture must find (+) or must not (-) in its text.
CHECKS = {
    "handbook.docx": [
        ("+", "Fuel for it is kept in the locked shed"),  # a tracked insertion, accepted
        ("-", "runs on petrol"),  # a tracked deletion
        ("+", "16 amp shore power"),  # the footnote
        ("+", "18 m"),  # a table cell
    ],
    "deck.pptx": [("+", "certificate expired in March"), ("+", "Licences")],
    "suppliers.xlsx": [("+", "2026-03-30"), ("+", "Baltic Steel")],
    "handbook.odt": [("+", "locked shed"), ("-", "runs on petrol"), ("+", "16 amp")],
    "book.epub": [("+", "one prolonged blast"), ("+", "Cleat hitch")],
}


def ours(path: Path) -> str:
    from crag_edge.ingest import load_file

    return load_file(path, path.read_bytes(), 10_000_000).text


def markitdown(path: Path) -> str:
    from markitdown import MarkItDown

    return MarkItDown().convert(str(path)).text_content


def python_docx(path: Path) -> str:
    import docx

    document = docx.Document(str(path))
    cells = [c.text for t in document.tables for r in t.rows for c in r.cells]
    return "\n".join([p.text for p in document.paragraphs] + cells)


def python_pptx(path: Path) -> str:
    import pptx

    parts = []
    for slide in pptx.Presentation(str(path)).slides:
        parts += [s.text_frame.text for s in slide.shapes if s.has_text_frame]
        parts += [
            c.text for s in slide.shapes if s.has_table for r in s.table.rows for c in r.cells
        ]
        if slide.has_notes_slide:
            parts.append(slide.notes_slide.notes_text_frame.text)
    return "\n".join(parts)


def openpyxl(path: Path) -> str:
    import openpyxl as xl

    book = xl.load_workbook(str(path), read_only=True, data_only=True)
    rows = (r for sheet in book.worksheets for r in sheet.iter_rows(values_only=True))
    return "\n".join(" ".join(str(v) for v in row if v is not None) for row in rows)


def odfpy(path: Path) -> str:
    from odf import opendocument, teletype, text

    document = opendocument.load(str(path))
    elements = document.getElementsByType(text.P) + document.getElementsByType(text.H)
    return "\n".join(teletype.extractText(e) for e in elements)


def ebooklib(path: Path) -> str:
    import ebooklib as eb
    from ebooklib import epub

    from crag_edge.ingest.formats.html import read_html

    book = epub.read_epub(str(path))
    items = book.get_items_of_type(eb.ITEM_DOCUMENT)
    return "\n".join(read_html(i.get_content().decode()).text for i in items)


READERS: dict[str, Callable[[Path], str]] = {
    "crag-edge": ours,
    "markitdown": markitdown,
    "python-docx": python_docx,
    "python-pptx": python_pptx,
    "openpyxl": openpyxl,
    "odfpy": odfpy,
    "ebooklib": ebooklib,
}
WARM_UP = {".xlsx": "suppliers.xlsx", ".docx": "handbook.docx", ".pptx": "deck.pptx"}
FOR_SUFFIX = {
    ".docx": ["crag-edge", "markitdown", "python-docx"],
    ".pptx": ["crag-edge", "markitdown", "python-pptx"],
    ".xlsx": ["crag-edge", "markitdown", "openpyxl"],
    ".odt": ["crag-edge", "odfpy"],
    ".epub": ["crag-edge", "markitdown", "ebooklib"],
}


def fidelity() -> None:
    print("| file | reader | checks passed | missed |")
    print("|---|---|---|---|")
    for name, checks in CHECKS.items():
        for reader in FOR_SUFFIX[Path(name).suffix]:
            try:
                text = READERS[reader](FIXTURES / name)
            except Exception as exc:
                print(f"| {name} | {reader} | failed | {type(exc).__name__} |")
                continue
            missed = [w for sign, w in checks if (w in text) != (sign == "+")]
            print(f"| {name} | {reader} | {len(checks) - len(missed)}/{len(checks)} | "
                  f"{'; '.join(missed)} |")  # fmt: skip


def cost(reader: str, path: Path) -> None:
    """Seconds and peak RSS of one reader on one file, in this process (run by `main`),
    after it read a small file of the same kind (its imports are not counted)."""
    READERS[reader](FIXTURES / WARM_UP[path.suffix])
    before = _peak_mb()
    started = time.perf_counter()
    chars = len(READERS[reader](path))
    seconds = time.perf_counter() - started
    peak = _peak_mb()
    print(f"| {path.name} | {reader} | {seconds:.2f} | {peak - before:.0f} | {chars:,} |")


def _peak_mb() -> float:
    """Peak resident memory (VmHWM; ru_maxrss would count the parent's, kept across exec)."""
    status = Path("/proc/self/status").read_text()
    return int(next(x for x in status.splitlines() if x.startswith("VmHWM:")).split()[1]) / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="holds sheet.xlsx and book.docx to time")
    parser.add_argument("--one", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        cost(args.one[0], Path(args.one[1]))
        return
    fidelity()
    print("\n| file | reader | seconds | peak RSS growth (MB) | chars |\n|---|---|---|---|---|")
    for name in ("sheet.xlsx", "book.docx", "book.pptx"):
        for reader in FOR_SUFFIX[Path(name).suffix]:
            one = [sys.executable, __file__, str(args.folder), "--one", reader]
            subprocess.run([*one, str(args.folder / name)], check=True)  # a process each


if __name__ == "__main__":
    main()
