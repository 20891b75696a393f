"""Small files that amplify: each is under every size cap, and read naively costs far more
than its size (a zip of empty paragraphs, a space run of 400 million, a shared-string table
of 100 MB, one slide or chapter listed hundreds of times, a PDF page of 6000 x 6000 points).
Built from the format fixtures, for `tests/test_amplifying_input.py` and
`scripts/measure_amplifiers.py`."""

from __future__ import annotations

import re
import zipfile
from collections.abc import Callable
from io import BytesIO
from pathlib import Path

FIXTURES = Path(__file__).parent / "data" / "formats"
_W = "http://schemas.openxmlformats.org/wordprocessingml/2006/main"
_ODF = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"'
)
_S = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"


def _with(name: str, members: dict[str, bytes]) -> bytes:
    """The fixture `name` with `members` replaced or added, compressed as tightly as zip can."""
    with zipfile.ZipFile(FIXTURES / name) as source:
        kept = {n: source.read(n) for n in source.namelist()}
    buffer = BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        for member, data in (kept | members).items():
            archive.writestr(member, data)
    return buffer.getvalue()


def empty_paragraphs_docx(count: int = 20_000_000) -> bytes:
    body = b"<w:p/>" * count
    xml = f'<w:document xmlns:w="{_W}"><w:body>'.encode() + body + b"</w:body></w:document>"
    return _with("plan.docx", {"word/document.xml": xml})


def space_run_odt(count: int = 400_000_000) -> bytes:
    xml = (
        f"<office:document-content {_ODF}><office:body><office:text><text:p>A gap"
        f'<text:s text:c="{count}"/>then words.</text:p></office:text></office:body>'
        "</office:document-content>"
    )
    return _with("handbook.odt", {"content.xml": xml.encode()})


def shared_strings_xlsx(total: int = 100_000_000) -> bytes:
    item = b"<si><t>" + b"ab" * 500 + b"</t></si>"
    count = total // 1000
    head = f'<sst xmlns="{_S}" count="{count}" uniqueCount="{count}">'.encode()
    return _with("suppliers.xlsx", {"xl/sharedStrings.xml": head + item * count + b"</sst>"})


def repeated_slide_pptx(times: int = 500, slide_bytes: int = 2_000_000) -> bytes:
    with zipfile.ZipFile(FIXTURES / "deck.pptx") as deck:
        presentation = deck.read("ppt/presentation.xml").decode()
        slide = deck.read("ppt/slides/slide1.xml").decode()
    listed = "".join(f'<p:sldId id="{256 + i}" r:id="rId2" />' for i in range(times))
    presentation = re.sub(r"<p:sldIdLst>.*?</p:sldIdLst>", f"<p:sldIdLst>{listed}</p:sldIdLst>",
                          presentation)  # fmt: skip
    runs = "<a:r><a:t>Words on the one slide. </a:t></a:r>" * (slide_bytes // 50)
    slide = slide.replace("</a:p>", runs + "</a:p>", 1)
    members = {"ppt/presentation.xml": presentation, "ppt/slides/slide1.xml": slide}
    return _with("deck.pptx", {name: xml.encode() for name, xml in members.items()})


def repeated_chapter_epub(times: int = 200, chapter_bytes: int = 9_000_000) -> bytes:
    with zipfile.ZipFile(FIXTURES / "book.epub") as book:
        opf = book.read("EPUB/content.opf").decode()
    spine = '<itemref idref="ch001_xhtml" />' * times
    opf = re.sub(r'<spine toc="ncx">.*?</spine>', f'<spine toc="ncx">{spine}</spine>', opf,
                 flags=re.DOTALL)  # fmt: skip
    words = "<p>The tide turns twice a day at the harbour mouth.</p>" * (chapter_bytes // 55)
    chapter = f"<html><head><title>One</title></head><body>{words}</body></html>"
    return _with("book.epub", {"EPUB/content.opf": opf.encode(),
                               "EPUB/text/ch001.xhtml": chapter.encode()})  # fmt: skip


def blank_pdf(pages: int = 1, side: int = 6000) -> bytes:
    """A PDF of `pages` blank pages of `side` x `side` points, written by hand."""
    kids = " ".join(f"{3 + i} 0 R" for i in range(pages))
    objects = [
        "<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {pages} >>",
        *[f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 {side} {side}] >>"] * pages,
    ]
    out, offsets = b"%PDF-1.4\n", []
    for number, body in enumerate(objects, start=1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n{body}\nendobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += "".join(f"{offset:010d} 00000 n \n" for offset in offsets).encode()
    trailer = f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\nstartxref\n{xref}\n%%EOF\n"
    return out + trailer.encode()


# Each hostile file by its name.
AMPLIFIERS: dict[str, Callable[[], bytes]] = {
    "empty-paragraphs.docx": empty_paragraphs_docx,
    "space-run.odt": space_run_odt,
    "shared-strings.xlsx": shared_strings_xlsx,
    "repeated-slide.pptx": repeated_slide_pptx,
    "repeated-chapter.epub": repeated_chapter_epub,
    "huge-page.pdf": blank_pdf,
    "large-page.pdf": lambda: blank_pdf(side=3000),
    "many-pages.pdf": lambda: blank_pdf(pages=60, side=612),
}


CANARY = "Canary: the lighthouse keeper logs the tide at dawn."


def write(folder: Path, *names: str) -> Path:
    """The hostile files `names` written into `folder`, with a canary text file beside them."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "canary.txt").write_text(CANARY, encoding="utf-8")
    for name in names:
        (folder / name).write_bytes(AMPLIFIERS[name]())
    return folder
