"""Tiny real documents for loader and ingest tests (no fixtures files to keep in the repo)."""

from __future__ import annotations


def pdf_stream(data: str) -> str:
    """A PDF stream object holding `data`."""
    return f"<< /Length {len(data)} >>\nstream\n{data}\nendstream"


HELVETICA = ("<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",)
# A composite font as XeLaTeX embeds one (Type0, two bytes a glyph), each code read as the
# character of the same number; code 0x20, which stands for a space in a simple font, is a
# glyph wider than a word gap here (a space is never drawn).
COMPOSITE = (
    "<< /Type /Font /Subtype /Type0 /BaseFont /Serif /Encoding /Identity-H /ToUnicode 4 0 R "
    "/DescendantFonts [<< /Type /Font /Subtype /CIDFontType2 /BaseFont /Serif /DW 500 "
    "/W [32 [564]] /CIDToGIDMap /Identity "
    "/CIDSystemInfo << /Registry (Adobe) /Ordering (Identity) /Supplement 0 >> >>] >>",
    pdf_stream(
        "/CIDInit /ProcSet findresource begin 12 dict begin begincmap /CMapName /Serif def "
        "/CMapType 2 def 1 begincodespacerange <0000> <FFFF> endcodespacerange "
        "1 beginbfrange <0021> <007E> <0021> endbfrange endcmap "
        "CMapName currentdict /CMap defineresource pop end end"
    ),
)


def make_pdf(pages: list[str], title: str | None = None) -> bytes:
    """A minimal valid PDF: each page's text in Helvetica, a printed line per line of it
    (lines 14 points apart, from the top), optional /Info title."""
    streams = []
    for text in pages:
        lines = " Tj T* ".join(f"({line})" for line in text.split("\n"))
        streams.append(f"BT /F1 12 Tf 14 TL 72 720 Td {lines} Tj ET")
    return drawn_pdf(streams, title)


def pen_spaced_pdf(lines: list[str]) -> bytes:
    """One page whose words are set apart by moving the pen (a quarter of an em left blank
    between them), not by a space character, in the `COMPOSITE` font: as XeLaTeX prints a
    manual (the Debian Reference's PDF)."""
    shown = []
    for number, line in enumerate(lines):
        glyphs = ("<" + "".join(f"{ord(char):04x}" for char in word) + ">" for word in line.split())
        shown.append(f"BT /F1 10 Tf 72 {720 - 14 * number} Td [{' -250 '.join(glyphs)}] TJ ET")
    return drawn_pdf(["\n".join(shown)], font=COMPOSITE)


def drawn_pdf(
    streams: list[str], title: str | None = None, font: tuple[str, ...] = HELVETICA
) -> bytes:
    """A minimal valid PDF whose pages draw the content streams `streams` with the font `/F1`
    (`font`: its dictionary, object 3, then the objects it refers to, 4 onwards), optional
    /Info title."""
    count, first = len(streams), 3 + len(font)
    kids = " ".join(f"{first + 2 * i} 0 R" for i in range(count))
    objects = {
        1: "<< /Type /Catalog /Pages 2 0 R >>",
        2: f"<< /Type /Pages /Kids [{kids}] /Count {count} >>",
    } | {3 + i: part for i, part in enumerate(font)}
    for i, stream in enumerate(streams):
        objects[first + 2 * i] = (
            "<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            f"/Resources << /Font << /F1 3 0 R >> >> /Contents {first + 1 + 2 * i} 0 R >>"
        )
        objects[first + 1 + 2 * i] = pdf_stream(stream)
    trailer = ""
    if title is not None:
        objects[first + 2 * count] = f"<< /Title ({title}) >>"
        trailer = f" /Info {first + 2 * count} 0 R"
    out = bytearray(b"%PDF-1.4\n")
    offsets = {}
    for number in sorted(objects):
        offsets[number] = len(out)
        out += f"{number} 0 obj\n{objects[number]}\nendobj\n".encode("latin-1")
    xref, size = len(out), len(objects) + 1
    out += f"xref\n0 {size}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offsets[n]:010d} 00000 n \n".encode() for n in range(1, size))
    out += f"trailer\n<< /Size {size} /Root 1 0 R{trailer} >>\nstartxref\n{xref}\n%%EOF\n".encode()
    return bytes(out)
